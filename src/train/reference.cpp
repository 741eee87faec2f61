// graphstep_core: plain C++, includes no CUDA header.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <graphstep/error.hpp>
#include <graphstep/train/mixed_precision.hpp>
#include <graphstep/train/optimizer_options.hpp>
#include <graphstep/train/philox.hpp>
#include <graphstep/train/random_fill.hpp>
#include <graphstep/train/reference.hpp>
#include <limits>
#include <vector>

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

namespace {

enum class decay { l2, decoupled };

void adam_family_step(std::vector<double>& param, std::vector<double> const& grad,
                      std::vector<double>& exp_avg, std::vector<double>& exp_avg_sq,
                      adam_options const& options, double lr, std::int64_t step,
                      double inv_loss_scale, decay kind) {
  double const correction1 = 1.0 - std::pow(static_cast<double>(options.beta1), step);
  double const correction2 = 1.0 - std::pow(static_cast<double>(options.beta2), step);
  for (std::size_t i = 0; i < param.size(); ++i) {
    double g = grad[i] * inv_loss_scale;
    if (kind == decay::decoupled) {
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

}  // namespace

void adam_step(std::vector<double>& param, std::vector<double> const& grad,
               std::vector<double>& exp_avg, std::vector<double>& exp_avg_sq,
               adam_options const& options, double lr, std::int64_t step, double inv_loss_scale) {
  adam_family_step(param, grad, exp_avg, exp_avg_sq, options, lr, step, inv_loss_scale, decay::l2);
}

void adamw_step(std::vector<double>& param, std::vector<double> const& grad,
                std::vector<double>& exp_avg, std::vector<double>& exp_avg_sq,
                adam_options const& options, double lr, std::int64_t step, double inv_loss_scale) {
  adam_family_step(param, grad, exp_avg, exp_avg_sq, options, lr, step, inv_loss_scale,
                   decay::decoupled);
}

float bias_correction(float beta, std::int64_t step) {
  double power = 1.0;
  for (std::int64_t s = 0; s < step; ++s) power *= static_cast<double>(beta);
  return static_cast<float>(1.0 - power);
}

void mixed_adamw_step(std::vector<float>& master, std::vector<float>& exp_avg,
                      std::vector<float>& exp_avg_sq, std::vector<float> const& gradient,
                      mixed_adamw_options const& options, parameter_group const& group,
                      mixed_adamw_scalars const& scalars) {
  float const lr = scalars.lr * group.lr_multiplier;
  float const decay = 1.0F - lr * group.weight_decay;
  float const step_size = lr / scalars.bias_correction1;
  for (std::size_t i = 0; i < master.size(); ++i) {
    float g = gradient[i] * scalars.inv_loss_scale;
    g = g * scalars.clip_factor;
    float value = master[i] * decay;
    float const m = options.beta1 * exp_avg[i] + (1.0F - options.beta1) * g;
    float const v = options.beta2 * exp_avg_sq[i] + ((1.0F - options.beta2) * g) * g;
    float const denominator = std::sqrt(v) / scalars.sqrt_bias_correction2 + options.epsilon;
    value = value - step_size * (m / denominator);
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    master[i] = value;
  }
}

std::vector<std::uint16_t> to_bfloat16(std::vector<float> const& master, bool stochastic,
                                       std::uint64_t seed, std::int64_t step,
                                       std::uint64_t first_element) {
  std::vector<std::uint16_t> bits(master.size());
  for (std::size_t i = 0; i < master.size(); ++i) {
    bits[i] = stochastic
                  ? bfloat16_stochastic(
                        master[i], stochastic_rounding_bits(seed, static_cast<std::uint64_t>(step),
                                                            first_element + i))
                  : bfloat16_nearest_even(master[i]);
  }
  return bits;
}

double global_norm(std::vector<std::vector<float>> const& gradients, double inv_loss_scale) {
  double sum = 0.0;
  for (auto const& tensor : gradients) {
    for (float g : tensor) sum += (g * inv_loss_scale) * (g * inv_loss_scale);
  }
  return std::sqrt(sum);
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

namespace {
// Element 4t + j takes word j of the block at position + t, as the device fill does.
template <typename T, typename Transform>
std::vector<T> fill(std::uint64_t seed, std::uint64_t position, std::size_t n,
                    Transform const& transform) {
  std::vector<T> out(n);
  for (std::size_t t = 0; 4 * t < n; ++t) {
    T values[4];  // NOLINT(modernize-avoid-c-arrays): the transforms take device-style arrays
    transform(philox_at(seed, position + t), values);
    for (std::size_t j = 0; j < 4 && 4 * t + j < n; ++j) out[4 * t + j] = values[j];
  }
  return out;
}
}  // namespace

std::vector<float> uniform_fill(std::uint64_t seed, std::uint64_t position, std::size_t n,
                                float low, float high) {
  detail::check_uniform_arguments(low, high);
  return fill<float>(seed, position, n, uniform_transform{low, high});
}

std::vector<float> normal_fill(std::uint64_t seed, std::uint64_t position, std::size_t n,
                               float mean, float stddev) {
  detail::check_normal_arguments(mean, stddev);
  return fill<float>(seed, position, n, normal_transform{mean, stddev});
}

std::vector<std::uint8_t> bernoulli_fill(std::uint64_t seed, std::uint64_t position, std::size_t n,
                                         float p) {
  detail::check_bernoulli_arguments(p);
  return fill<std::uint8_t>(seed, position, n, bernoulli_transform<std::uint8_t>{p});
}

}  // namespace graphstep::train::reference
