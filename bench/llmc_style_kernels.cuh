#pragma once

// Kernels written the way C/CUDA trainers in llm.c's style write them, for the simulator_cost
// benchmark: in a header, templated on the element type, with cooperative-groups warp
// reductions, warp shuffles, block reductions through shared memory, a shared-memory tiled
// matmul and an elementwise AdamW. Each has a plain C++ twin on the host doing the same
// arithmetic (llmc_style_host.hpp), the "plain C step" a simulated step is measured against.

#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>

namespace llmc_style {

namespace cg = cooperative_groups;

// One warp per row of x (rows × channels): mean and reciprocal standard deviation by warp
// reductions, then the normalized, scaled and shifted row.
template <typename T>
__global__ void layernorm_forward(T* out, float* mean, float* rstd, T const* x, T const* weight,
                                  T const* bias, int rows, int channels) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  int const row = static_cast<int>(blockIdx.x * warp.meta_group_size() + warp.meta_group_rank());
  if (row >= rows) return;
  T const* xr = x + static_cast<std::ptrdiff_t>(row) * channels;
  float sum = 0.0F;
  for (int i = static_cast<int>(warp.thread_rank()); i < channels; i += 32) {
    sum += static_cast<float>(xr[i]);
  }
  float const m = cg::reduce(warp, sum, cg::plus<float>{}) / static_cast<float>(channels);
  float squares = 0.0F;
  for (int i = static_cast<int>(warp.thread_rank()); i < channels; i += 32) {
    float const d = static_cast<float>(xr[i]) - m;
    squares += d * d;
  }
  float const s =
      1.0F /
      sqrtf(cg::reduce(warp, squares, cg::plus<float>{}) / static_cast<float>(channels) + 1e-5F);
  T* o = out + static_cast<std::ptrdiff_t>(row) * channels;
  for (int i = static_cast<int>(warp.thread_rank()); i < channels; i += 32) {
    float const n = (static_cast<float>(xr[i]) - m) * s;
    o[i] = static_cast<T>(n * static_cast<float>(weight[i]) + static_cast<float>(bias[i]));
  }
  if (warp.thread_rank() == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

// out (rows × columns) = in (rows × inner) · weight (columns × inner)ᵀ + bias, through
// Tile × Tile tiles of both operands staged in shared memory.
template <typename T, int Tile>
__global__ void matmul_forward(T* out, T const* in, T const* weight, T const* bias, int rows,
                               int inner, int columns) {
  __shared__ float a[Tile][Tile];
  __shared__ float b[Tile][Tile];
  int const r = static_cast<int>(blockIdx.y * Tile + threadIdx.y);
  int const c = static_cast<int>(blockIdx.x * Tile + threadIdx.x);
  float acc = 0.0F;
  for (int k0 = 0; k0 < inner; k0 += Tile) {
    int const ka = k0 + static_cast<int>(threadIdx.x);
    int const wc = static_cast<int>(blockIdx.x * Tile + threadIdx.y);
    a[threadIdx.y][threadIdx.x] =
        r < rows && ka < inner ? static_cast<float>(in[static_cast<std::ptrdiff_t>(r) * inner + ka])
                               : 0.0F;
    int const kw = k0 + static_cast<int>(threadIdx.x);
    b[threadIdx.y][threadIdx.x] =
        wc < columns && kw < inner
            ? static_cast<float>(weight[static_cast<std::ptrdiff_t>(wc) * inner + kw])
            : 0.0F;
    __syncthreads();
    for (int k = 0; k < Tile; ++k) acc += a[threadIdx.y][k] * b[threadIdx.x][k];
    __syncthreads();
  }
  if (r < rows && c < columns) {
    out[static_cast<std::ptrdiff_t>(r) * columns + c] =
        static_cast<T>(acc + static_cast<float>(bias[c]));
  }
}

// Row-wise softmax of x (rows × columns), one block per row: the maximum and the sum each by a
// warp shuffle reduction, then across the warps through shared memory.
template <typename T>
__global__ void softmax_forward(T* out, T const* x, int columns) {
  __shared__ float partial[32];
  int const lane = static_cast<int>(threadIdx.x % 32);
  int const warp = static_cast<int>(threadIdx.x / 32);
  int const warps = static_cast<int>(blockDim.x / 32);
  T const* xr = x + static_cast<std::ptrdiff_t>(blockIdx.x) * columns;
  float high = -INFINITY;
  for (int i = static_cast<int>(threadIdx.x); i < columns; i += static_cast<int>(blockDim.x)) {
    high = fmaxf(high, static_cast<float>(xr[i]));
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    high = fmaxf(high, __shfl_xor_sync(0xFFFFFFFFU, high, offset));
  }
  if (lane == 0) partial[warp] = high;
  __syncthreads();
  high = partial[0];
  for (int w = 1; w < warps; ++w) high = fmaxf(high, partial[w]);
  __syncthreads();
  float sum = 0.0F;
  for (int i = static_cast<int>(threadIdx.x); i < columns; i += static_cast<int>(blockDim.x)) {
    sum += expf(static_cast<float>(xr[i]) - high);
  }
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xFFFFFFFFU, sum, offset);
  if (lane == 0) partial[warp] = sum;
  __syncthreads();
  sum = 0.0F;
  for (int w = 0; w < warps; ++w) sum += partial[w];
  T* o = out + static_cast<std::ptrdiff_t>(blockIdx.x) * columns;
  for (int i = static_cast<int>(threadIdx.x); i < columns; i += static_cast<int>(blockDim.x)) {
    o[i] = static_cast<T>(expf(static_cast<float>(xr[i]) - high) / sum);
  }
}

// The bias gradient: the sum of each column of dout (rows × columns), one block per 32 columns,
// each warp summing a stripe of rows, the warps' sums added through shared memory.
template <typename T>
__global__ void matmul_backward_bias(float* dbias, T const* dout, int rows, int columns) {
  __shared__ float sums[32][33];
  int const lane = static_cast<int>(threadIdx.x % 32);
  int const warp = static_cast<int>(threadIdx.x / 32);
  int const warps = static_cast<int>(blockDim.x / 32);
  int const c = static_cast<int>(blockIdx.x * 32) + lane;
  float sum = 0.0F;
  if (c < columns) {
    for (int r = warp; r < rows; r += warps) {
      sum += static_cast<float>(dout[static_cast<std::ptrdiff_t>(r) * columns + c]);
    }
  }
  sums[warp][lane] = sum;
  __syncthreads();
  if (warp == 0) {
    float total = 0.0F;
    for (int w = 0; w < warps; ++w) total += sums[w][lane];
    if (c < columns) dbias[c] += total;
  }
}

// AdamW on float master weights, one thread per parameter.
template <typename P>
__global__ void adamw(P* parameters, float const* gradients, float* m, float* v, std::size_t count,
                      float learning_rate, float beta1, float beta2, float beta1_correction,
                      float beta2_correction, float epsilon, float weight_decay) {
  std::size_t const i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= count) return;
  float const g = gradients[i];
  float const mi = beta1 * m[i] + (1.0F - beta1) * g;
  float const vi = beta2 * v[i] + (1.0F - beta2) * g * g;
  m[i] = mi;
  v[i] = vi;
  float const p = static_cast<float>(parameters[i]);
  float const update = (mi / beta1_correction) / (sqrtf(vi / beta2_correction) + epsilon);
  parameters[i] = static_cast<P>(p - learning_rate * (update + weight_decay * p));
}

}  // namespace llmc_style
