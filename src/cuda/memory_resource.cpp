#include <cuda_runtime_api.h>

#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/memory_resource.hpp>
#include <graphstep/error.hpp>
#include <new>
#include <string>
#include <type_traits>

#include "cuda/detail/relaxed_capture_mode.hpp"

namespace graphstep::cuda {

void* memory_resource::allocate(std::size_t bytes, stream_view stream) {
  GRAPHSTEP_EXPECTS(bytes > 0,
                    "memory_resource::allocate: a request of 0 bytes; ask for at least 1 (a "
                    "cuda::device_buffer of 0 bytes is empty and allocates nothing)");
  return do_allocate(bytes, stream);
}

void memory_resource::deallocate(void* pointer, std::size_t bytes, stream_view stream) {
  GRAPHSTEP_EXPECTS(pointer != nullptr,
                    "memory_resource::deallocate: a null pointer was passed; pass the pointer "
                    "allocate returned");
  do_deallocate(pointer, bytes, stream);
}

namespace {

// cudaMallocAsync rather than cudaMalloc: the allocation and the free are ordered on the
// stream, so freeing never waits for the whole device (cudaFree does, which stalls every
// stream and hangs behind a stuck collective). Both calls run Relaxed: beside another thread's
// Global capture they are "potentially unsafe" and would break it (cudaFreeAsync on an H100,
// docs/validation.md), and the stream they use is never a capturing one.
class runtime_resource final : public memory_resource {
 private:
  void* do_allocate(std::size_t bytes, stream_view stream) override {
    GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                      "cuda::default_resource: the stream is capturing into a graph, which would "
                      "own the allocation; allocate before the capture, or from the "
                      "memory::memory_pool given to the graphs::capture_scope");
    void* pointer = nullptr;
    cudaError_t status = cudaSuccess;
    {
      detail::relaxed_capture_mode const relaxed;
      status = cudaMallocAsync(&pointer, bytes, stream.get());
    }
    if (status == cudaErrorMemoryAllocation) {
      static_cast<void>(cudaGetLastError());  // not sticky: later calls must not see it
      out_of_memory::details sizes{};
      sizes.requested = bytes;
      throw out_of_memory{
          sizes, "cuda::default_resource: cannot allocate " + std::to_string(bytes) +
                     " B: the device is out of memory (cudaMallocAsync: "
                     "cudaErrorMemoryAllocation). Free memory you no longer need, or take it from "
                     "a memory::memory_pool whose budget leaves room for the rest of the program"};
    }
    if (status != cudaSuccess) {  // e.g. cudaErrorNotSupported: a device without memory pools
      detail::throw_cuda_error(static_cast<int>(status), "cudaMallocAsync(&pointer, bytes, stream)",
                               __FILE__, __LINE__);
    }
    return pointer;
  }

  void do_deallocate(void* pointer, std::size_t /*bytes*/, stream_view stream) override {
    GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                      "cuda::default_resource: memory allocated outside a graph is being freed on "
                      "a stream that is capturing into one; free it after the capture ends, or "
                      "order the free on another stream (device_buffer::set_stream)");
    detail::relaxed_capture_mode const relaxed;
    GRAPHSTEP_CUDA_TRY(cudaFreeAsync(pointer, stream.get()));
  }
};

}  // namespace

memory_resource& default_resource() noexcept {
  // Never destroyed: a buffer in a static object may be freed after this function's statics
  // would have been destroyed.
  static std::aligned_storage_t<sizeof(runtime_resource), alignof(runtime_resource)> storage;
  static auto* const resource = new (&storage) runtime_resource{};
  return *resource;
}

}  // namespace graphstep::cuda
