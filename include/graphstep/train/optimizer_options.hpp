#pragma once

/// @file train/optimizer_options.hpp
/// @brief Hyperparameters of the optimizers that do not change from step to step.
/// graphstep_core: plain C++, includes no CUDA header.

namespace graphstep::train {

/// @brief SGD as in PyTorch: optional momentum (with dampening, optionally Nesterov) and L2
/// weight decay.
struct sgd_options {
  float momentum{0.0F};
  float dampening{0.0F};
  float weight_decay{0.0F};
  bool nesterov{false};
};

/// @brief Adam with bias correction; `decoupled_weight_decay` makes it AdamW.
struct adam_options {
  float beta1{0.9F};
  float beta2{0.999F};
  float epsilon{1e-8F};
  float weight_decay{0.0F};
  bool decoupled_weight_decay{false};
};

/// @brief Throws usage_error naming the bad hyperparameter (negative momentum, Nesterov without
/// momentum or with dampening, betas outside [0, 1), non-positive epsilon, negative decay).
void validate(sgd_options const& options);
/// @copydoc validate(sgd_options const&)
void validate(adam_options const& options);

}  // namespace graphstep::train
