// Dynamic loss scaling on the device: one launch unscales every gradient and finds infs and
// NaNs, one thread updates the scale. The scale and the flag live in device memory, so a
// captured step adapts on every replay.

#include <cuda_runtime_api.h>

#include <graphstep/cuda/check.hpp>
#include <graphstep/error.hpp>

#include "train/train_kernels.hpp"

namespace graphstep::train::detail {
namespace {

constexpr int unscale_threads = 256;

__global__ void reset_all_finite_kernel(train::loss_scale_state* state) {
  state->all_finite = 1U;
}

__global__ void unscale_kernel(train::scaled_gradient const* gradients,
                               train::tensor_chunk const* chunks, train::loss_scale_state* state) {
  train::tensor_chunk const chunk = chunks[blockIdx.x];
  float* const data = gradients[chunk.tensor].data + chunk.begin;
  float const inv_scale = state->inv_scale;
  bool finite = true;
  for (std::uint32_t i = threadIdx.x; i < chunk.count; i += blockDim.x) {
    float const g = data[i];
    finite = finite && train::detail::is_finite(g);
    data[i] = g * inv_scale;
  }
  if (!finite) state->all_finite = 0U;  // benign race: every writer writes 0
}

__global__ void update_loss_scale_kernel(train::loss_scale_state* state,
                                         train::loss_scale_options options) {
  train::update_loss_scale(*state, options);
}

}  // namespace

void launch_unscale(train::scaled_gradient const* gradients, train::tensor_chunk const* chunks,
                    std::size_t chunk_count, train::loss_scale_state* state,
                    cuda::stream_view stream) {
  reset_all_finite_kernel<<<1, 1, 0, stream.value()>>>(state);
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
  unscale_kernel<<<static_cast<unsigned>(chunk_count), unscale_threads, 0, stream.value()>>>(
      gradients, chunks, state);
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

void launch_update_loss_scale(train::loss_scale_state* state,
                              train::loss_scale_options const& options, cuda::stream_view stream) {
  update_loss_scale_kernel<<<1, 1, 0, stream.value()>>>(state, options);
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

}  // namespace graphstep::train::detail
