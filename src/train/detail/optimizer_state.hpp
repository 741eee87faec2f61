#pragma once

// What every optimizer decides alike before it touches the device: the tensors of a parameter
// layout as the optimizer's parameters, and the checkpoint entries of its per-tensor state.
// Plain C++ (graphstep_core).

#include <cmath>
#include <cstddef>
#include <graphstep/parameter_layout.hpp>
#include <graphstep/train/checkpoint.hpp>
#include <graphstep/train/optimizer_options.hpp>
#include <string>
#include <vector>

namespace graphstep::memory {
class parameter_buffer;
}

namespace graphstep::train::detail {

/// Every tensor of `layout`, in its order and with its parameter group: its weights in the
/// buffer at `values`, its gradient at `gradients` (only read), both laid out by `layout`.
/// @throws usage_error naming `who` (an empty layout, a null buffer)
[[nodiscard]] std::vector<parameter> layout_parameters(parameter_layout const& layout,
                                                       void* values, void const* gradients,
                                                       std::string const& who);

/// `layout_parameters` over the weights' buffer and its layout, after `expect_same_layout` of
/// the gradients' (the shell: src/train/optimizer.cpp).
[[nodiscard]] std::vector<parameter> buffer_parameters(memory::parameter_buffer const& weights,
                                                       memory::parameter_buffer const& gradients,
                                                       std::string const& who);

/// Refuses gradients laid out otherwise than the weights (another tensor, dtype, shape, group
/// or offset), naming `who` and the first difference.
/// @throws usage_error
void expect_same_layout(parameter_layout const& weights, parameter_layout const& gradients,
                        std::string const& who);

/// "<prefix>/<tensor>/<buffer>": the entry of one state buffer of one tensor (PyTorch's
/// state_dict names its buffers alike: momentum_buffer, exp_avg, exp_avg_sq).
[[nodiscard]] std::string state_entry(std::string const& prefix, std::size_t tensor,
                                      std::string const& buffer);

/// Refuses `from` unless it holds, for each tensor t of `counts`, every one of `buffers` as a
/// float32 tensor of shape [counts[t]], and no tensor t = counts.size(): checked before an
/// optimizer copies anything, so that a checkpoint of another layout changes nothing.
/// @throws usage_error naming `who`, the entry and what differs
void expect_state_entries(checkpoint const& from, std::string const& prefix,
                          std::vector<std::size_t> const& counts,
                          std::vector<std::string> const& buffers, std::string const& who);

/// Whether `skips_step` (train/mixed_precision.hpp) can say yes for some step: with a loss
/// scaler (its finding), a finite `skip_norm`, or clipping on. When it cannot, a captured update
/// needs no conditional node around it.
[[nodiscard]] inline bool step_may_be_skipped(bool has_loss_scaler, float max_grad_norm,
                                              float skip_norm) {
  return has_loss_scaler || std::isfinite(skip_norm) || max_grad_norm > 0.0F;
}

}  // namespace graphstep::train::detail
