// The plain C++ parts of training: chunk planning, option checks and fp64 references.

#include <graphstep/error.hpp>
#include <graphstep/train/lr_schedule.hpp>
#include <graphstep/train/multi_tensor.hpp>
#include <graphstep/train/optimizer_options.hpp>
#include <graphstep/train/reference.hpp>

#include <cmath>
#include <limits>
#include <string>

namespace graphstep::train {

std::vector<tensor_chunk> plan_chunks(std::vector<std::size_t> const& element_counts,
                                      std::size_t chunk_elements) {
  GRAPHSTEP_EXPECTS(!element_counts.empty(), "plan_chunks: no tensor was given");
  GRAPHSTEP_EXPECTS(chunk_elements > 0 && chunk_elements <= (std::size_t{1} << 31),
                    "plan_chunks: the chunk size must be between 1 and 2^31 elements, not " +
                        std::to_string(chunk_elements));
  GRAPHSTEP_EXPECTS(element_counts.size() < std::numeric_limits<std::uint32_t>::max(),
                    "plan_chunks: more than 2^32 - 1 tensors; split them into groups");
  std::vector<tensor_chunk> chunks;
  for (std::size_t t = 0; t < element_counts.size(); ++t) {
    std::size_t const count = element_counts[t];
    GRAPHSTEP_EXPECTS(count > 0, "plan_chunks: tensor " + std::to_string(t) +
                                     " has no element; leave empty tensors out");
    for (std::size_t begin = 0; begin < count; begin += chunk_elements) {
      std::size_t const n = std::min(chunk_elements, count - begin);
      chunks.push_back({static_cast<std::uint32_t>(t), static_cast<std::uint32_t>(n),
                        static_cast<std::uint64_t>(begin)});
    }
  }
  return chunks;
}

void validate(lr_schedule const& schedule) {
  GRAPHSTEP_EXPECTS(std::isfinite(schedule.base) && schedule.base >= 0.0F,
                    "lr_schedule: the base learning rate must be finite and non-negative");
  GRAPHSTEP_EXPECTS(schedule.warmup_steps >= 0 && schedule.total_steps >= 0,
                    "lr_schedule: step counts must be non-negative");
  GRAPHSTEP_EXPECTS(schedule.final_fraction >= 0.0F && schedule.final_fraction <= 1.0F,
                    "lr_schedule: final_fraction must lie in [0, 1]");
  bool const decays =
      schedule.shape == lr_shape::warmup_cosine || schedule.shape == lr_shape::warmup_linear;
  GRAPHSTEP_EXPECTS(!decays || schedule.total_steps > schedule.warmup_steps,
                    "lr_schedule: a decaying schedule needs total_steps > warmup_steps (" +
                        std::to_string(schedule.total_steps) + " <= " +
                        std::to_string(schedule.warmup_steps) + ")");
}

void validate(sgd_options const& options) {
  GRAPHSTEP_EXPECTS(options.momentum >= 0.0F, "sgd: momentum must be non-negative");
  GRAPHSTEP_EXPECTS(options.weight_decay >= 0.0F, "sgd: weight_decay must be non-negative");
  GRAPHSTEP_EXPECTS(!options.nesterov || (options.momentum > 0.0F && options.dampening == 0.0F),
                    "sgd: Nesterov momentum needs a positive momentum and zero dampening");
}

void validate(adam_options const& options) {
  GRAPHSTEP_EXPECTS(options.beta1 >= 0.0F && options.beta1 < 1.0F,
                    "adam: beta1 must lie in [0, 1)");
  GRAPHSTEP_EXPECTS(options.beta2 >= 0.0F && options.beta2 < 1.0F,
                    "adam: beta2 must lie in [0, 1)");
  GRAPHSTEP_EXPECTS(options.epsilon > 0.0F, "adam: epsilon must be positive");
  GRAPHSTEP_EXPECTS(options.weight_decay >= 0.0F, "adam: weight_decay must be non-negative");
}

namespace reference {

void sgd_step(std::vector<double>& param, std::vector<double> const& grad,
              std::vector<double>& momentum, sgd_options const& options, double lr,
              std::int64_t step, double inv_loss_scale) {
  for (std::size_t i = 0; i < param.size(); ++i) {
    double g = grad[i] * inv_loss_scale + options.weight_decay * param[i];
    if (options.momentum != 0.0F) {
      momentum[i] = step == 1 ? g
                              : options.momentum * momentum[i] + (1.0 - options.dampening) * g;
      g = options.nesterov ? g + options.momentum * momentum[i] : momentum[i];
    }
    param[i] -= lr * g;
  }
}

void adam_step(std::vector<double>& param, std::vector<double> const& grad,
               std::vector<double>& exp_avg, std::vector<double>& exp_avg_sq,
               adam_options const& options, double lr, std::int64_t step,
               double inv_loss_scale) {
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

}  // namespace reference
}  // namespace graphstep::train
