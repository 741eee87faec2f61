#pragma once

/// @file train/loss_scaler.hpp
/// @brief `loss_scaler`: dynamic loss scaling whose state lives in device memory and whose
/// update runs on the device, so a captured step scales, unscales, skips and adapts on every
/// replay without a host synchronization (PyTorch's GradScaler, inside the graph).

#include <cstddef>
#include <graphstep/cuda/device_buffer.hpp>
#include <graphstep/cuda/memory_resource.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/train/loss_scale.hpp>
#include <graphstep/train/multi_tensor.hpp>
#include <vector>

namespace graphstep::train {

/// @brief An fp32 gradient tensor in device memory, at an address that stays fixed, that the
/// scaler unscales in place.
struct scaled_gradient {
  float* data;
  std::size_t count;
};

/// @brief Dynamic loss scaling on the device. Per step, in order on one stream, all capturable:
/// 1. the backward pass scales the loss gradient by `*scale()` (a device float its kernel
///    reads, so replays follow the scale instead of freezing the one of the capture);
/// 2. `unscale(stream)` multiplies every gradient by 1/scale in one launch over all of them,
///    and sets `*all_finite()` to 0 when one of them holds an inf or NaN, else 1;
/// 3. the optimizer step runs only when `*all_finite()` is 1: `graphs::capture_if(stream,
///    scaler.all_finite(), [&](auto s) { optimizer.step(s); })`;
/// 4. `update(stream)` backs the scale off after a step with an inf or NaN gradient and grows
///    it after `growth_interval` finite steps in a row (`update_loss_scale`).
///
/// Its state and chunk table come from the resource given to the constructor and go back to it
/// on the constructor's stream: that stream and the resource must outlive the scaler (see
/// `cuda::device_buffer`). Move-only.
class loss_scaler {
 public:
  /// @throws usage_error (no gradient, a null or empty gradient, bad options, a capturing
  /// stream), out_of_memory, no_device_error, cuda_error
  loss_scaler(std::vector<scaled_gradient> const& gradients, loss_scale_options const& options,
              cuda::stream_view stream, cuda::memory_resource& resource = cuda::default_resource());

  /// @brief Unscales every gradient and records whether all were finite; capturable.
  /// @throws cuda_error
  void unscale(cuda::stream_view stream) const;
  /// @brief Updates the scale from the last `unscale`'s finding; capturable.
  /// @throws cuda_error
  void update(cuda::stream_view stream) const;

  /// @brief The current scale, in device memory: what the loss gradient is multiplied by.
  [[nodiscard]] float const* scale() const noexcept;
  /// @brief 1 when the gradients last unscaled were all finite, else 0, in device memory: the
  /// flag of a `graphs::capture_if` around the optimizer step.
  [[nodiscard]] unsigned int const* all_finite() const noexcept;
  /// @brief The state, read from the device (synchronizes `stream`). Not inside a capture.
  /// @throws usage_error (a capturing stream), cuda_error
  [[nodiscard]] loss_scale_state read(cuda::stream_view stream) const;

 private:
  loss_scaler(std::vector<scaled_gradient> const& gradients,
              std::vector<tensor_chunk> const& chunks, loss_scale_options const& options,
              cuda::stream_view stream, cuda::memory_resource& resource);
  [[nodiscard]] loss_scale_state* state() const noexcept;

  loss_scale_options options_;
  std::size_t chunk_count_{};
  cuda::device_buffer state_;   // loss_scale_state
  cuda::device_buffer slots_;   // scaled_gradient, one per tensor
  cuda::device_buffer chunks_;  // tensor_chunk
};

}  // namespace graphstep::train
