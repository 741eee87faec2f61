#include <cuda_runtime_api.h>

#include <graphstep/cuda/check.hpp>
#include <graphstep/error.hpp>
#include <graphstep/train/mse_loss.hpp>
#include <utility>

#include "train/train_kernels.hpp"

namespace graphstep::train {

mse_loss::mse_loss(std::size_t count, cuda::stream_view stream) : count_{count} {
  GRAPHSTEP_EXPECTS(count > 0, "mse_loss: the element count must be positive");
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    "mse_loss: construct it before the capture; it allocates its scratch");
  void* partials = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaMalloc(&partials, sizeof(float) * detail::mse_partial_blocks(count)));
  partials_ = static_cast<float*>(partials);
}

mse_loss::~mse_loss() {
  if (partials_ != nullptr) GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaFree(partials_));
}

mse_loss::mse_loss(mse_loss&& other) noexcept
    : count_{other.count_}, partials_{std::exchange(other.partials_, nullptr)} {}

mse_loss& mse_loss::operator=(mse_loss&& other) noexcept {
  if (this != &other) {
    if (partials_ != nullptr) GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaFree(partials_));
    count_ = other.count_;
    partials_ = std::exchange(other.partials_, nullptr);
  }
  return *this;
}

void mse_loss::forward_backward(float const* prediction, float const* target, float* gradient,
                                float* loss, cuda::stream_view stream) const {
  GRAPHSTEP_EXPECTS(partials_ != nullptr, "mse_loss: this loss was moved from");
  GRAPHSTEP_EXPECTS(prediction && target && gradient && loss,
                    "mse_loss::forward_backward: a null device pointer was passed");
  detail::launch_mse(prediction, target, gradient, partials_, loss, count_, stream);
}

}  // namespace graphstep::train
