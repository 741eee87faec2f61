#include <graphstep/error.hpp>
#include <graphstep/stream.hpp>

namespace graphstep {

void detail::stream_deleter::operator()(pointer handle) const noexcept {
  GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaStreamDestroy(handle));
}

stream::stream(int priority) {
  cudaStream_t handle = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaStreamCreateWithPriority(&handle, cudaStreamNonBlocking, priority));
  handle_.reset(handle);
}

}  // namespace graphstep
