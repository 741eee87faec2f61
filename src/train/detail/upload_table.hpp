#pragma once

// The host tables of the multi-tensor kernels (slots, chunks, initial state) copied to their
// device buffers in the order of the constructor's stream.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device_buffer.hpp>
#include <graphstep/cuda/stream_view.hpp>

namespace graphstep::train::detail {

template <typename T>
void upload_table(cuda::device_buffer const& device, T const* host, std::size_t count,
                  cuda::stream_view stream) {
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(device.data(), host, sizeof(T) * count, cudaMemcpyHostToDevice,
                                     stream.get()));
}

}  // namespace graphstep::train::detail
