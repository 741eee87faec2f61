// Dynamic loss scaling on the device: one launch finds infs and NaNs in every gradient (fp32,
// fp16 or bf16) and leaves them scaled (the optimizer unscales as it reads); one thread updates
// the scale. The scale and the flag live in device memory, so a captured step adapts on every
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

#include "train/train_kernels.hpp"

namespace graphstep::train::detail {
namespace {

constexpr int check_threads = 256;

__global__ void reset_all_finite_kernel(train::loss_scaler_state* state) {
  state->all_finite = 1U;
}

// One chunk of 16-bit gradients: the finite test reads the bits (train/loss_scaler_options.hpp).
template <typename T>
__device__ bool check_16(void const* tensor, tensor_chunk const& chunk) {
  static_assert(sizeof(T) == sizeof(std::uint16_t));
  T const* const data = static_cast<T const*>(tensor) + chunk.begin;
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
  }
  return finite;
}

__global__ void check_kernel(scaled_slot const* gradients, tensor_chunk const* chunks,
                             train::loss_scaler_state* state) {
  tensor_chunk const chunk = chunks[blockIdx.x];
  scaled_slot const gradient = gradients[chunk.tensor];
  bool finite = true;
  switch (gradient.type) {
    case dtype::float32: {
      float const* const data = static_cast<float const*>(gradient.data) + chunk.begin;
      for (std::uint32_t i = threadIdx.x; i < chunk.count; i += blockDim.x) {
        finite = finite && train::detail::is_finite(data[i]);
      }
      break;
    }
    case dtype::float16: finite = check_16<__half>(gradient.data, chunk); break;
    case dtype::bfloat16: finite = check_16<__nv_bfloat16>(gradient.data, chunk); break;
    case dtype::int32:
    case dtype::uint8: break;  // the constructor refuses integer gradients
  }
  if (!finite) state->all_finite = 0U;  // benign race: every writer writes 0
}

__global__ void update_loss_scaler_kernel(train::loss_scaler_state* state,
                                          train::loss_scaler_options options) {
  train::update_loss_scaler(*state, options);
}

}  // namespace

void launch_check(scaled_slot const* gradients, tensor_chunk const* chunks, std::size_t chunk_count,
                  train::loss_scaler_state* state, cuda::stream_view stream) {
  reset_all_finite_kernel<<<1, 1, 0, stream.get()>>>(state);
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
  check_kernel<<<static_cast<unsigned>(chunk_count), check_threads, 0, stream.get()>>>(
      gradients, chunks, state);
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

void launch_update_loss_scaler(train::loss_scaler_state* state,
                               train::loss_scaler_options const& options,
                               cuda::stream_view stream) {
  update_loss_scaler_kernel<<<1, 1, 0, stream.get()>>>(state, options);
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

}  // namespace graphstep::train::detail
