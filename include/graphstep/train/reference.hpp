#pragma once

/// @file train/reference.hpp
/// @brief fp64 reference implementations of the optimizers and the loss, and the host's
/// recomputation of the capture-safe generator's fills, for tests.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace graphstep::train {

struct sgd_options;
struct adam_options;
struct mixed_adamw_options;
struct parameter_group;

namespace reference {

/// @brief One SGD step with PyTorch's semantics (momentum buffer set to the gradient on the
/// first step, dampening, Nesterov, L2 weight decay), on every element.
/// @param step the step number, 1 for the first
void sgd_step(std::vector<double>& param, std::vector<double> const& grad,
              std::vector<double>& momentum, sgd_options const& options, double lr,
              std::int64_t step, double inv_loss_scale = 1.0);

/// @brief One Adam step with bias correction and L2 weight decay (`train::adam`).
void adam_step(std::vector<double>& param, std::vector<double> const& grad,
               std::vector<double>& exp_avg, std::vector<double>& exp_avg_sq,
               adam_options const& options, double lr, std::int64_t step,
               double inv_loss_scale = 1.0);

/// @brief One AdamW step: Adam with decoupled weight decay, the weights first multiplied by
/// 1 − lr · weight_decay (torch.optim.AdamW), in fp64.
void adamw_step(std::vector<double>& param, std::vector<double> const& grad,
                std::vector<double>& exp_avg, std::vector<double>& exp_avg_sq,
                adam_options const& options, double lr, std::int64_t step,
                double inv_loss_scale = 1.0);

/// @brief The per-step values of a mixed-precision AdamW step that do not depend on the element.
struct mixed_adamw_scalars {
  float lr;                     ///< the schedule's rate of the step (before the group multiplier)
  float bias_correction1;       ///< 1 − beta1^step
  float sqrt_bias_correction2;  ///< sqrt(1 − beta2^step)
  float inv_loss_scale;         ///< gradients are multiplied by it first
  float clip_factor;            ///< then by it
};

/// @brief 1 − beta^step in fp32, beta^step being the product of `step` fp64 factors beta (how
/// the optimizer keeps it in device memory, one factor per step taken).
[[nodiscard]] float bias_correction(float beta, std::int64_t step);

/// @brief One AdamW step (torch.optim.AdamW's formula, `_single_tensor_adam` with decoupled
/// decay) on fp32 master weights, in fp32, one operation at a time in this order:
/// g = grad · inv_loss_scale · clip_factor; lr' = lr · lr_multiplier;
/// master ·= 1 − lr' · weight_decay; m = β1 m + (1 − β1) g; v = β2 v + ((1 − β2) g) g;
/// master −= (lr' / bias_correction1) · (m / (sqrt(v) / sqrt_bias_correction2 + ε)).
void mixed_adamw_step(std::vector<float>& master, std::vector<float>& exp_avg,
                      std::vector<float>& exp_avg_sq, std::vector<float> const& gradient,
                      mixed_adamw_options const& options, parameter_group const& group,
                      mixed_adamw_scalars const& scalars);

/// @brief The bf16 bits of every master weight: to nearest even, or stochastically with the
/// bits of train::stochastic_rounding_bits(seed, step, first_element + i).
[[nodiscard]] std::vector<std::uint16_t> to_bfloat16(std::vector<float> const& master,
                                                     bool stochastic, std::uint64_t seed,
                                                     std::int64_t step,
                                                     std::uint64_t first_element);

/// @brief sqrt(Σ (g · inv_loss_scale)²) over every element of every tensor, in fp64.
[[nodiscard]] double global_norm(std::vector<std::vector<float>> const& gradients,
                                 double inv_loss_scale = 1.0);

/// @brief Mean squared error and its gradient 2·(prediction − target)/n.
double mse(std::vector<double> const& prediction, std::vector<double> const& target,
           std::vector<double>* gradient);

/// @brief What `capture_safe_rng::uniform` draws for n elements with `seed` when its first
/// Philox block is at `position` (the device offset plus the fill's base), with the transforms
/// of train/random_fill.hpp.
/// @throws usage_error (the arguments `capture_safe_rng::uniform` refuses)
[[nodiscard]] std::vector<float> uniform_fill(std::uint64_t seed, std::uint64_t position,
                                              std::size_t n, float low, float high);
/// @brief What `capture_safe_rng::normal` draws (see `uniform_fill`).
/// @throws usage_error (the arguments `capture_safe_rng::normal` refuses)
[[nodiscard]] std::vector<float> normal_fill(std::uint64_t seed, std::uint64_t position,
                                             std::size_t n, float mean, float stddev);
/// @brief What `capture_safe_rng::bernoulli` draws, as 0 and 1 (see `uniform_fill`).
/// @throws usage_error (the arguments `capture_safe_rng::bernoulli` refuses)
[[nodiscard]] std::vector<std::uint8_t> bernoulli_fill(std::uint64_t seed, std::uint64_t position,
                                                       std::size_t n, float p);

}  // namespace reference
}  // namespace graphstep::train
