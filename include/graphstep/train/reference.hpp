#pragma once

/// @file train/reference.hpp
/// @brief fp64 reference implementations of the optimizers and the loss, for tests.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace graphstep::train {

struct sgd_options;
struct adam_options;

namespace reference {

/// @brief One SGD step with PyTorch's semantics (momentum buffer set to the gradient on the
/// first step, dampening, Nesterov, L2 weight decay), on every element.
/// @param step the step number, 1 for the first
void sgd_step(std::vector<double>& param, std::vector<double> const& grad,
              std::vector<double>& momentum, sgd_options const& options, double lr,
              std::int64_t step, double inv_loss_scale = 1.0);

/// @brief One Adam (L2 weight decay) or AdamW (decoupled weight decay) step with bias
/// correction.
void adam_step(std::vector<double>& param, std::vector<double> const& grad,
               std::vector<double>& exp_avg, std::vector<double>& exp_avg_sq,
               adam_options const& options, double lr, std::int64_t step,
               double inv_loss_scale = 1.0);

/// @brief Mean squared error and its gradient 2·(prediction − target)/n.
double mse(std::vector<double> const& prediction, std::vector<double> const& target,
           std::vector<double>* gradient);

}  // namespace reference
}  // namespace graphstep::train
