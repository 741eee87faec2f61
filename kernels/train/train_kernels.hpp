#pragma once

// Launch wrappers of the training kernels (kernels/optimizer.cu, kernels/mse_loss.cu) and the
// layouts they share with the host. Plain C++: host code includes it without nvcc.

#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/train/detail/multi_tensor.hpp>
#include <graphstep/train/loss_scaler_options.hpp>
#include <graphstep/train/lr_schedule.hpp>
#include <graphstep/train/optimizer_options.hpp>

namespace graphstep::train::detail {

/// Per-optimizer values that change from step to step; they live in device memory and the
/// captured kernels read them, so replays follow them without re-capture.
struct optimizer_device_state {
  std::int64_t step{0};        // steps taken; the captured step advances it before the update
  float inv_loss_scale{1.0F};  // this step's gradients are multiplied by it
  std::uint32_t skipped{0};    // 1: this step is skipped (its gradients were not all finite)
  train::lr_schedule schedule;
  float const* learning_rate{nullptr};  // when set, read by each step instead of the schedule
};

/// One tensor of a multi-tensor update: its value, gradient and up to two state buffers.
struct tensor_slot {
  float* value;
  float const* gradient;
  float* state1;  // SGD momentum, Adam exp_avg
  float* state2;  // Adam exp_avg_sq
  std::uint64_t count;
};

/// One gradient of the loss scaler, as its kernel reads it (the chunks carry the counts).
struct scaled_slot {
  void* data;
  dtype type;
};

/// Decides the step on the device: skipped when `all_finite` reads 0 (the step count stays),
/// else the step count advances and the inverse loss scale is 1 / *loss_scale (1 without one).
/// Both come from the optimizer's loss_scaler, or are null.
void launch_advance_step(optimizer_device_state* state, float const* loss_scale,
                         unsigned int const* all_finite, cuda::stream_view stream);
void launch_sgd(tensor_slot const* slots, tensor_chunk const* chunks, std::size_t chunk_count,
                optimizer_device_state const* state, train::sgd_options const& options,
                cuda::stream_view stream);
void launch_adam(tensor_slot const* slots, tensor_chunk const* chunks, std::size_t chunk_count,
                 optimizer_device_state const* state, train::adam_options const& options,
                 cuda::stream_view stream);

/// Resets the state's all_finite flag to 1, then clears it on an inf or NaN in any gradient
/// (one launch for every tensor); writes no gradient.
void launch_check(scaled_slot const* gradients, tensor_chunk const* chunks, std::size_t chunk_count,
                  train::loss_scaler_state* state, cuda::stream_view stream);
/// One thread applies train::update_loss_scaler to the state.
void launch_update_loss_scaler(train::loss_scaler_state* state,
                               train::loss_scaler_options const& options, cuda::stream_view stream);

/// Blocks of the first pass of the loss; the partial sums buffer needs this many floats.
[[nodiscard]] unsigned mse_partial_blocks(std::size_t count) noexcept;
/// gradient = 2·(prediction − target)/count and *loss = mean((prediction − target)²), with a
/// reduction whose order is fixed, so eager and graphed runs give the same bits.
void launch_mse(float const* prediction, float const* target, float* gradient, float* partials,
                float* loss, std::size_t count, cuda::stream_view stream);

}  // namespace graphstep::train::detail
