#pragma once

/// @file train/mse_loss.hpp
/// @brief Mean squared error with its gradient, in two capturable kernels.

#include <cstddef>
#include <graphstep/cuda/device_buffer.hpp>
#include <graphstep/cuda/memory_resource.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <memory>

namespace graphstep::train {

/// @brief loss = mean((prediction − target)²) and gradient = 2·(prediction − target)/n for a
/// fixed element count. The reduction order is fixed (no atomics), so eager and graphed runs
/// produce identical bits. Owns its scratch; construct before capturing.
///
/// The scratch comes from `resource` (a `memory::memory_pool` counts it in its budget) and goes
/// back to it on `stream`, the stream given to the constructor: that stream and the resource
/// must outlive the loss (see `cuda::device_buffer`).
class mse_loss {
 public:
  /// @brief Allocates the scratch and waits for `stream`, so that any stream may use it.
  /// @throws usage_error (count of 0, capturing stream), out_of_memory, no_device_error,
  /// cuda_error
  mse_loss(std::size_t count, cuda::stream_view stream,
           cuda::memory_resource& resource = cuda::default_resource());
  ~mse_loss();
  mse_loss(mse_loss&& other) noexcept;
  mse_loss& operator=(mse_loss&& other) noexcept;
  mse_loss(mse_loss const&) = delete;
  mse_loss& operator=(mse_loss const&) = delete;

  /// @brief Writes the gradient and the loss in device memory: prediction, target and gradient
  /// are float32 spans of at least `count()` elements, loss one of at least one.
  /// @throws usage_error (a span empty, null, misaligned, not float32 or too short; a moved-from
  /// loss)
  void forward_backward(device_span prediction, device_span target, device_span gradient,
                        device_span loss, cuda::stream_view stream) const;
  [[nodiscard]] std::size_t count() const noexcept { return count_; }

 private:
  std::size_t count_;
  cuda::device_buffer partials_;  // floats, one per block of the reduction
};

}  // namespace graphstep::train
