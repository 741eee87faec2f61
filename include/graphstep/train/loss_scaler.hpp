#pragma once

/// @file train/loss_scaler.hpp
/// @brief `loss_scaler`: dynamic loss scaling whose state lives in device memory and whose
/// update runs on the device, so a captured step scales, unscales, skips and adapts on every
/// replay without a host synchronization (PyTorch's GradScaler, inside the graph), and
/// `check_finite`, the same device-side finding for one tensor without a scale.

#include <cstddef>
#include <graphstep/cuda/device_buffer.hpp>
#include <graphstep/cuda/memory_resource.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/train/checkpoint.hpp>
#include <graphstep/train/detail/multi_tensor.hpp>
#include <graphstep/train/loss_scale.hpp>
#include <string>
#include <vector>

namespace graphstep::train {

/// @brief Dynamic loss scaling on the device. Per step, in order on one stream, all capturable:
/// 1. the backward pass scales the loss gradient by `*scale()` (a device float its kernel
///    reads, so replays follow the scale instead of freezing the one of the capture);
/// 2. either `unscale(stream)`, which multiplies every gradient by 1/scale in place, or
///    `check(stream)`, which leaves them scaled; both, in one launch over all the gradients,
///    set `*all_finite()` to 0 when one of them holds an inf or NaN, else 1;
/// 3. the optimizer step runs only when `*all_finite()` is 1: `graphs::capture_if(stream,
///    scaler.all_finite(), [&](auto s) { optimizer.step(s); })`, or an optimizer that reads the
///    flag itself (`mixed_precision_adamw` with `gradient_scaling::all_finite`);
/// 4. `update(stream)` backs the scale off after a step with an inf or NaN gradient and grows
///    it after `growth_interval` finite steps in a row (`update_loss_scale`).
///
/// Gradients may be fp32, fp16 or bf16, mixed in one scaler. Which of step 2 to use:
/// - fp16 or bf16 gradients with `mixed_precision_adamw`: `check`, and give the optimizer
///   `gradient_scaling{scaler.scale(), scaler.all_finite()}`. It multiplies each gradient by
///   1/scale in fp32 as it reads it, so nothing is rounded back to 16 bits and no pass writes
///   the gradients; the step must come before `update`, which changes the scale.
/// - an optimizer or a clip that needs the gradients unscaled in memory (fp32 `sgd`, `adam`):
///   `unscale`. An fp32 gradient becomes its fp32 product with 1/scale. An fp16 or bf16
///   gradient is converted to fp32, multiplied by 1/scale and rounded back to its type to
///   nearest even. With a power-of-two scale (GradScaler's: the default initial scale 2^16 and
///   factors 2 and 0.5 keep it one) the product is exact unless it leaves the type's normal
///   range: an fp16 result below 2^-14 in magnitude keeps fewer bits, and one of at most 2^-25
///   becomes 0, the underflow that loss scaling exists to avoid, which `check` does not
///   suffer. With any other scale each unscaled element is also rounded, by up to half an ulp
///   of its type. (PyTorch's GradScaler.unscale_ refuses fp16 gradients for these reasons.)
///
/// Its state and chunk table come from the resource given to the constructor and go back to it
/// on the constructor's stream: that stream and the resource must outlive the scaler (see
/// `cuda::device_buffer`). Move-only.
class loss_scaler {
 public:
  /// @throws usage_error (no gradient, a null, empty or misaligned gradient, an unknown dtype,
  /// bad options, a capturing stream), out_of_memory, no_device_error, cuda_error
  loss_scaler(std::vector<device_span> const& gradients, loss_scale_options const& options,
              cuda::stream_view stream, cuda::memory_resource& resource = cuda::default_resource());

  /// @brief Unscales every gradient in place and records whether all were finite (read as
  /// given, before unscaling); capturable. See the class comment for the rounding of fp16 and
  /// bf16 gradients.
  /// @throws cuda_error
  void unscale(cuda::stream_view stream) const;
  /// @brief Records whether every gradient is finite and leaves them as they are, still
  /// carrying the scale; capturable. Give the optimizer `scale()` to unscale them as it reads.
  /// @throws cuda_error
  void check(cuda::stream_view stream) const;
  /// @brief Updates the scale from the last `unscale`'s or `check`'s finding; capturable.
  /// @throws cuda_error
  void update(cuda::stream_view stream) const;

  /// @brief The current scale, in device memory: what the loss gradient is multiplied by.
  [[nodiscard]] float const* scale() const noexcept;
  /// @brief 1 when the gradients last unscaled or checked were all finite, else 0, in device
  /// memory: the flag of a `graphs::capture_if` around the optimizer step.
  [[nodiscard]] unsigned int const* all_finite() const noexcept;
  /// @brief The state, read from the device (synchronizes `stream`). Not inside a capture.
  /// @throws usage_error (a capturing stream), cuda_error
  [[nodiscard]] loss_scale_state read(cuda::stream_view stream) const;
  /// @brief Adds the state (scale, growth tracker, last finding) to `into` as the value `name`
  /// (synchronizes `stream`). Between steps, not in a capture.
  /// @throws usage_error (a capturing stream, a name already in `into`), cuda_error
  void save_to(checkpoint& into, std::string const& name, cuda::stream_view stream) const;
  /// @brief Restores the state `save_to` added as `name`: the next steps scale, back off and
  /// grow as the saved scaler's would. Between steps, not in a capture; synchronizes `stream`.
  /// @throws usage_error (no such value or one of another size, a scale that is not positive
  /// and finite, a capturing stream), cuda_error
  void restore_from(checkpoint const& from, std::string const& name, cuda::stream_view stream);

 private:
  loss_scaler(std::vector<device_span> const& gradients,
              std::vector<detail::tensor_chunk> const& chunks, loss_scale_options const& options,
              cuda::stream_view stream, cuda::memory_resource& resource);
  [[nodiscard]] loss_scale_state* state() const noexcept;

  loss_scale_options options_;
  std::size_t chunk_count_{};
  cuda::device_buffer state_;   // loss_scale_state
  cuda::device_buffer slots_;   // detail::scaled_slot, one per tensor
  cuda::device_buffer chunks_;  // tensor_chunk
};

/// @brief Sets `*all_finite` (device memory) to 1 when every element of `data` (fp32, fp16 or
/// bf16) is finite, else 0, without a host synchronization: for a step that skips its
/// optimizer on an inf or NaN without scaling the loss (`graphs::capture_if(stream, all_finite,
/// ...)`). An empty span sets 1. Capturable.
/// @throws usage_error (a null flag; a span with elements and a null pointer, misaligned or of
/// an unknown dtype), cuda_error
void check_finite(device_span data, unsigned int* all_finite, cuda::stream_view stream);

}  // namespace graphstep::train
