#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/error.hpp>

namespace graphstep::cuda {

void detail::stream_deleter::operator()(pointer handle) const noexcept {
  GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaStreamDestroy(handle));
}

stream::stream(int priority) {
  cudaStream_t handle = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaStreamCreateWithPriority(&handle, cudaStreamNonBlocking, priority));
  handle_.reset(handle);
}

}  // namespace graphstep::cuda
