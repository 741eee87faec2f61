// Mean squared error and its gradient in two passes with a fixed reduction order: per-block
// partial sums, then one block sums them. No atomics, so every run gives the same bits.

#include <cuda_runtime_api.h>

#include <algorithm>
#include <graphstep/cuda/check.hpp>
#include <graphstep/error.hpp>

#include "train/train_kernels.hpp"

namespace graphstep::train::detail {
namespace {

constexpr unsigned loss_threads = 256;
constexpr unsigned max_partial_blocks = 1024;

// Tree reduction in shared memory; the order depends only on blockDim.
__device__ float block_sum(float value, float* shared) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
    __syncthreads();
  }
  return shared[0];
}

__global__ void mse_partial_kernel(float const* prediction, float const* target, float* gradient,
                                   float* partials, std::size_t count) {
  __shared__ float shared[loss_threads];
  float const scale = 2.0F / static_cast<float>(count);
  float sum = 0.0F;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < count;
       i += std::size_t{gridDim.x} * blockDim.x) {
    float const difference = prediction[i] - target[i];
    gradient[i] = scale * difference;
    sum += difference * difference;
  }
  float const total = block_sum(sum, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void mse_finish_kernel(float const* partials, unsigned blocks, float* loss,
                                  std::size_t count) {
  __shared__ float shared[loss_threads];
  float sum = 0.0F;
  for (unsigned i = threadIdx.x; i < blocks; i += blockDim.x) sum += partials[i];
  float const total = block_sum(sum, shared);
  if (threadIdx.x == 0) *loss = total / static_cast<float>(count);
}

}  // namespace

unsigned mse_partial_blocks(std::size_t count) noexcept {
  std::size_t const needed = (count + loss_threads - 1) / loss_threads;
  return static_cast<unsigned>(std::clamp<std::size_t>(needed, 1, max_partial_blocks));
}

void launch_mse(float const* prediction, float const* target, float* gradient, float* partials,
                float* loss, std::size_t count, cuda::stream_view stream) {
  unsigned const blocks = mse_partial_blocks(count);
  mse_partial_kernel<<<blocks, loss_threads, 0, stream.get()>>>(prediction, target, gradient,
                                                                partials, count);
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
  mse_finish_kernel<<<1, loss_threads, 0, stream.get()>>>(partials, blocks, loss, count);
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

}  // namespace graphstep::train::detail
