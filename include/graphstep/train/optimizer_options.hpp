#pragma once

/// @file train/optimizer_options.hpp
/// @brief Hyperparameters of the optimizers that do not change from step to step.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <graphstep/device_span.hpp>
#include <limits>
#include <string>
#include <vector>

namespace graphstep::train {

/// @brief SGD as in PyTorch: optional momentum (with dampening, optionally Nesterov) and L2
/// weight decay.
struct sgd_options {
  float momentum{0.0F};
  float dampening{0.0F};
  float weight_decay{0.0F};
  bool nesterov{false};
};

/// @brief Adam as torch.optim.Adam: bias correction and L2 weight decay (added to the
/// gradient). AdamW, with decoupled decay, is `mixed_precision_adamw`, fp32 tensors included.
struct adam_options {
  float beta1{0.9F};
  float beta2{0.999F};
  float epsilon{1e-8F};
  float weight_decay{0.0F};  ///< L2: weight_decay x weight is added to the gradient
};

/// @brief AdamW over fp32 master weights (`mixed_precision_adamw`), with PyTorch's AdamW
/// formula (torch.optim.AdamW documentation); weight decay and the learning-rate multiplier
/// come from each tensor's `parameter_group`.
struct mixed_adamw_options {
  float beta1{0.9F};
  float beta2{0.999F};
  float epsilon{1e-8F};
  /// Global-norm clipping as torch.nn.utils.clip_grad_norm_: the gradients are multiplied by
  /// min(1, max_grad_norm / (norm + clip_epsilon)). 0 turns clipping off.
  float max_grad_norm{0.0F};
  float clip_epsilon{1e-6F};  ///< clip_grad_norm_'s 1e-6
  /// Rounds the new bf16 weights stochastically instead of to nearest even (see
  /// train/mixed_precision.hpp for the random bits); bf16 tensors only.
  bool stochastic_rounding{false};
  std::uint64_t seed{0};  ///< Philox key of the stochastic rounding
  /// Skips the whole step on the device (its step count and learning-rate schedule included)
  /// when the global norm of the unscaled gradients exceeds it or is not finite, and counts the
  /// skip (`mixed_precision_adamw::skipped_steps`). Infinity, the default, turns it off. Last,
  /// so that aggregate initializations written before it keep their meaning.
  float skip_norm{std::numeric_limits<float>::infinity()};
};

/// @brief The hyperparameters a tensor takes from its group, as in PyTorch's param_groups
/// (for example no weight decay on biases and norms).
struct parameter_group {
  float weight_decay{0.0F};   ///< decoupled (AdamW) decay
  float lr_multiplier{1.0F};  ///< the group's learning rate is the schedule's times this
};

/// @brief One model tensor as every optimizer takes it: its weights and its gradient, spans of
/// one dtype and count in device memory at addresses that stay fixed (static buffers of the
/// captured step), and its parameter group. `sgd` and `adam` take fp32 tensors of group 0;
/// `mixed_precision_adamw` takes bf16, fp16 and fp32 ones and their groups.
struct parameter {
  device_span value;
  device_span gradient;    ///< only read
  std::uint32_t group{0};  ///< index into the groups given to the optimizer
};

/// @brief Refuses parameter `index` of the optimizer `who` ("sgd") when its value or gradient is
/// empty, null, misaligned or of an unknown dtype, or they differ in dtype or count.
/// @throws usage_error naming the parameter and what to fix
void validate(parameter const& parameter, std::size_t index, std::string const& who);

/// @brief Throws usage_error naming the bad hyperparameter (negative momentum, Nesterov without
/// momentum or with dampening, betas outside [0, 1), non-positive epsilon, negative decay).
void validate(sgd_options const& options);
/// @copydoc validate(sgd_options const&)
void validate(adam_options const& options);
/// @brief Throws usage_error naming the bad hyperparameter (betas outside [0, 1), epsilon not
/// positive, max_grad_norm negative or not finite, clip_epsilon not positive, skip_norm not
/// positive or NaN).
void validate(mixed_adamw_options const& options);

/// @brief The group of each tensor, checked: `groups[group_of_tensor[t]]` for every tensor t.
/// @throws usage_error (no group, no tensor, a weight decay or lr multiplier that is negative
/// or not finite, a tensor naming a group that does not exist)
[[nodiscard]] std::vector<parameter_group> plan_parameter_groups(
    std::vector<parameter_group> const& groups, std::vector<std::uint32_t> const& group_of_tensor);

}  // namespace graphstep::train
