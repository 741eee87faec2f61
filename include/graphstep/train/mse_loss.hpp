#pragma once

/// @file train/mse_loss.hpp
/// @brief Mean squared error with its gradient, in two capturable kernels.

#include <cstddef>
#include <graphstep/cuda/stream_view.hpp>
#include <memory>

namespace graphstep::train {

/// @brief loss = mean((prediction − target)²) and gradient = 2·(prediction − target)/n for a
/// fixed element count. The reduction order is fixed (no atomics), so eager and graphed runs
/// produce identical bits. Owns its scratch; construct before capturing.
class mse_loss {
 public:
  /// @throws usage_error (count of 0, capturing stream), no_device_error, cuda_error
  mse_loss(std::size_t count, cuda::stream_view stream);
  ~mse_loss();
  mse_loss(mse_loss&& other) noexcept;
  mse_loss& operator=(mse_loss&& other) noexcept;
  mse_loss(mse_loss const&) = delete;
  mse_loss& operator=(mse_loss const&) = delete;

  /// @brief Writes the gradient (count floats) and the loss (one float) in device memory.
  /// @throws usage_error (null pointer)
  void forward_backward(float const* prediction, float const* target, float* gradient, float* loss,
                        cuda::stream_view stream) const;
  [[nodiscard]] std::size_t count() const noexcept { return count_; }

 private:
  std::size_t count_;
  float* partials_{nullptr};
};

}  // namespace graphstep::train
