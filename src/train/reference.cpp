#include <algorithm>
#include <cmath>
#include <cstdint>
#include <graphstep/error.hpp>
#include <graphstep/train/optimizer_options.hpp>
#include <graphstep/train/reference.hpp>
#include <limits>

namespace graphstep::train::reference {

void sgd_step(std::vector<double>& param, std::vector<double> const& grad,
              std::vector<double>& momentum, sgd_options const& options, double lr,
              std::int64_t step, double inv_loss_scale) {
  for (std::size_t i = 0; i < param.size(); ++i) {
    double g = grad[i] * inv_loss_scale + options.weight_decay * param[i];
    if (options.momentum != 0.0F) {
      momentum[i] = step == 1 ? g : options.momentum * momentum[i] + (1.0 - options.dampening) * g;
      g = options.nesterov ? g + options.momentum * momentum[i] : momentum[i];
    }
    param[i] -= lr * g;
  }
}

void adam_step(std::vector<double>& param, std::vector<double> const& grad,
               std::vector<double>& exp_avg, std::vector<double>& exp_avg_sq,
               adam_options const& options, double lr, std::int64_t step, double inv_loss_scale) {
  double const correction1 = 1.0 - std::pow(static_cast<double>(options.beta1), step);
  double const correction2 = 1.0 - std::pow(static_cast<double>(options.beta2), step);
  for (std::size_t i = 0; i < param.size(); ++i) {
    double g = grad[i] * inv_loss_scale;
    if (options.decoupled_weight_decay) {
      param[i] *= 1.0 - lr * options.weight_decay;
    } else {
      g += options.weight_decay * param[i];
    }
    exp_avg[i] = options.beta1 * exp_avg[i] + (1.0 - options.beta1) * g;
    exp_avg_sq[i] = options.beta2 * exp_avg_sq[i] + (1.0 - options.beta2) * g * g;
    double const denominator = std::sqrt(exp_avg_sq[i] / correction2) + options.epsilon;
    param[i] -= lr * (exp_avg[i] / correction1) / denominator;
  }
}

double mse(std::vector<double> const& prediction, std::vector<double> const& target,
           std::vector<double>* gradient) {
  double sum = 0.0;
  auto const n = static_cast<double>(prediction.size());
  if (gradient != nullptr) gradient->resize(prediction.size());
  for (std::size_t i = 0; i < prediction.size(); ++i) {
    double const difference = prediction[i] - target[i];
    sum += difference * difference;
    if (gradient != nullptr) (*gradient)[i] = 2.0 * difference / n;
  }
  return sum / n;
}

}  // namespace graphstep::train::reference
