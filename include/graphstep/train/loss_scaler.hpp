#pragma once

/// @file train/loss_scaler.hpp
/// @brief `loss_scaler`: dynamic loss scaling whose state lives in device memory and whose
/// update runs on the device, so a captured step scales, unscales, skips and adapts on every
/// replay without a host synchronization (PyTorch's GradScaler, inside the graph), and
/// `check_finite`, the same device-side finding for one tensor without a scale. The rule and
/// the options are the core's (`loss_scaler_options.hpp`).

#include <cstddef>
#include <graphstep/cuda/device_buffer.hpp>
#include <graphstep/cuda/memory_resource.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/train/checkpoint.hpp>
#include <graphstep/train/detail/multi_tensor.hpp>
#include <graphstep/train/loss_scaler_options.hpp>
#include <string>
#include <vector>

namespace graphstep::train {

/// @brief Dynamic loss scaling on the device, wired one way. Per step, in order on one stream,
/// all capturable:
/// 1. the backward pass scales the loss gradient by `*scale()` (a device float its kernel
///    reads, so replays follow the scale instead of freezing the one of the capture);
/// 2. `check(stream)`, one launch over all the gradients, sets `*all_finite()` to 0 when one of
///    them holds an inf or NaN, else 1, and leaves them as they are, still scaled;
/// 3. `optimizer.step(stream)` of an optimizer constructed with this scaler: it multiplies
///    each gradient by 1/scale in fp32 as it reads it, so nothing is rounded back to 16 bits
///    and no pass writes the gradients, and it skips the step on the device, its step count
///    included, when the flag reads 0 (as GradScaler skips `optimizer.step()`);
/// 4. `update(stream)` backs the scale off after a step with an inf or NaN gradient and grows
///    it after `growth_interval` finite steps in a row (`update_loss_scaler`). It comes after
///    the step, which divides by the scale the backward used.
///
/// Gradients may be fp32, fp16 or bf16, mixed in one scaler; a 16-bit gradient is tested on its
/// bits. The optimizer reads `scale()` and `all_finite()` at the addresses they have at its
/// construction: the scaler must outlive the optimizer's steps (moving it keeps them).
///
/// Its state and chunk table come from the resource given to the constructor and go back to it
/// on the constructor's stream: that stream and the resource must outlive the scaler (see
/// `cuda::device_buffer`). Move-only.
class loss_scaler {
 public:
  /// @throws usage_error (no gradient, a null, empty or misaligned gradient, an unknown dtype,
  /// bad options, a capturing stream), out_of_memory, no_device_error, cuda_error
  loss_scaler(std::vector<device_span> const& gradients, loss_scaler_options const& options,
              cuda::stream_view stream, cuda::memory_resource& resource = cuda::default_resource());

  /// @brief Records whether every gradient is finite and leaves them as they are, still
  /// carrying the scale; capturable. The optimizer constructed with this scaler unscales them
  /// as it reads.
  /// @throws cuda_error
  void check(cuda::stream_view stream) const;
  /// @brief Updates the scale from the last `check`'s finding; capturable.
  /// @throws cuda_error
  void update(cuda::stream_view stream) const;

  /// @brief The current scale, in device memory: what the loss gradient is multiplied by.
  [[nodiscard]] float const* scale() const noexcept;
  /// @brief 1 when the gradients last checked were all finite, else 0, in device memory: the
  /// flag the optimizer's step reads.
  [[nodiscard]] unsigned int const* all_finite() const noexcept;
  /// @brief The state, read from the device (synchronizes `stream`). Not inside a capture.
  /// @throws usage_error (a capturing stream), cuda_error
  [[nodiscard]] loss_scaler_state read(cuda::stream_view stream) const;
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
              std::vector<detail::tensor_chunk> const& chunks, loss_scaler_options const& options,
              cuda::stream_view stream, cuda::memory_resource& resource);
  [[nodiscard]] loss_scaler_state* state() const noexcept;

  loss_scaler_options options_;
  std::size_t chunk_count_{};
  cuda::device_buffer state_;   // loss_scaler_state
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
