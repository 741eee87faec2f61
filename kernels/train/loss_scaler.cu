// Dynamic loss scaling on the device: one launch finds infs and NaNs in every gradient (fp32,
// fp16 or bf16) and, for unscale, multiplies them by 1/scale in place; one thread updates the
// scale. The scale and the flag live in device memory, so a captured step adapts on every
// replay.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <graphstep/cuda/check.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <type_traits>

#include "detail/element_conversion.cuh"
#include "train/train_kernels.hpp"

namespace graphstep::train::detail {
namespace {

constexpr int unscale_threads = 256;

__global__ void reset_all_finite_kernel(train::loss_scale_state* state) {
  state->all_finite = 1U;
}

// One chunk of 16-bit gradients: the finite test reads the bits (train/loss_scale.hpp); an
// unscaled element is rounded back to T to nearest even.
template <typename T>
__device__ bool unscale_16(void* tensor, tensor_chunk const& chunk, float inv_scale, bool unscale) {
  static_assert(sizeof(T) == sizeof(std::uint16_t));
  T* const data = static_cast<T*>(tensor) + chunk.begin;
  bool finite = true;
  for (std::uint32_t i = threadIdx.x; i < chunk.count; i += blockDim.x) {
    T const g = data[i];
    std::uint16_t bits{};
    memcpy(&bits, &g, sizeof bits);
    if constexpr (std::is_same_v<T, __half>) {
      finite = finite && train::detail::float16_is_finite(bits);
    } else {
      finite = finite && train::detail::bfloat16_is_finite(bits);
    }
    if (unscale) data[i] = graphstep::detail::from_float<T>(graphstep::detail::to_float(g) * inv_scale);
  }
  return finite;
}

__global__ void unscale_kernel(scaled_slot const* gradients, tensor_chunk const* chunks,
                               train::loss_scale_state* state, bool unscale) {
  tensor_chunk const chunk = chunks[blockIdx.x];
  scaled_slot const gradient = gradients[chunk.tensor];
  float const inv_scale = state->inv_scale;
  bool finite = true;
  switch (gradient.type) {
    case dtype::float32: {
      float* const data = static_cast<float*>(gradient.data) + chunk.begin;
      for (std::uint32_t i = threadIdx.x; i < chunk.count; i += blockDim.x) {
        float const g = data[i];
        finite = finite && train::detail::is_finite(g);
        if (unscale) data[i] = g * inv_scale;
      }
      break;
    }
    case dtype::float16:
      finite = unscale_16<__half>(gradient.data, chunk, inv_scale, unscale);
      break;
    case dtype::bfloat16:
      finite = unscale_16<__nv_bfloat16>(gradient.data, chunk, inv_scale, unscale);
      break;
    case dtype::int32:
    case dtype::uint8: break;  // the constructor refuses integer gradients
  }
  if (!finite) state->all_finite = 0U;  // benign race: every writer writes 0
}

__global__ void update_loss_scale_kernel(train::loss_scale_state* state,
                                         train::loss_scale_options options) {
  train::update_loss_scale(*state, options);
}

}  // namespace

void launch_unscale(scaled_slot const* gradients, tensor_chunk const* chunks,
                    std::size_t chunk_count, train::loss_scale_state* state, bool unscale,
                    cuda::stream_view stream) {
  reset_all_finite_kernel<<<1, 1, 0, stream.get()>>>(state);
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
  unscale_kernel<<<static_cast<unsigned>(chunk_count), unscale_threads, 0, stream.get()>>>(
      gradients, chunks, state, unscale);
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

void launch_update_loss_scale(train::loss_scale_state* state,
                              train::loss_scale_options const& options, cuda::stream_view stream) {
  update_loss_scale_kernel<<<1, 1, 0, stream.get()>>>(state, options);
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

}  // namespace graphstep::train::detail
