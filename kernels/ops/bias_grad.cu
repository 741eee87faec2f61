// The bias gradient of the unfused path: db[N] = Σ over the M rows of dz[M,N], for fp32, fp16
// and bf16 storage, accumulated in fp32 in a fixed order (the same bits on every run, so a
// replayed graph reproduces the eager result exactly).
//
// A block owns a tile of columns and walks all rows: `lanes` threads side by side read one
// row's slice of the tile (16 bytes each when vectorized), `rows_per_pass` such groups take
// interleaved rows, then the groups' partial sums are added in group order through shared
// memory. Narrow vectorized tiles (8 lanes × 16 bytes) keep enough blocks in flight for the
// layer widths of an MLP; the scalar kernel, for unaligned data, uses 32 lanes.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <graphstep/cuda/check.hpp>
#include <graphstep/error.hpp>
#include <graphstep/ops/gelu_kernels.hpp>
#include <string>

#include "ops/element_conversion.cuh"

namespace graphstep::ops {
namespace {

constexpr int threads = 256;

using detail::from_float;
using detail::to_float;

// `width` elements of T loaded as one transaction (16 bytes when width = 16 / sizeof(T)).
template <typename T, int width>
struct alignas(sizeof(T) * width) pack {
  T v[width];
};

// width = elements per thread (16 / sizeof(T) vectorized, 1 scalar); lanes = threads per row.
template <typename T, int width, int lanes>
__global__ void __launch_bounds__(threads)
    bias_gradient_kernel(T* __restrict__ db, T const* __restrict__ dz, std::int64_t rows,
                         std::int64_t cols) {
  constexpr int rows_per_pass = threads / lanes;
  constexpr int tile = lanes * width;
  __shared__ float partial[rows_per_pass][tile];
  int const lane = static_cast<int>(threadIdx.x) % lanes;
  int const group = static_cast<int>(threadIdx.x) / lanes;
  std::int64_t const tile_first = std::int64_t{blockIdx.x} * tile;
  std::int64_t const col = tile_first + std::int64_t{lane} * width;

  float sum[width];
#pragma unroll
  for (int i = 0; i < width; ++i) sum[i] = 0.0F;
  if (col < cols) {  // vectorized: cols % width == 0, so the whole pack is in range
    for (std::int64_t r = group; r < rows; r += rows_per_pass) {
      pack<T, width> const values = *reinterpret_cast<pack<T, width> const*>(dz + r * cols + col);
#pragma unroll
      for (int i = 0; i < width; ++i) sum[i] += to_float(values.v[i]);
    }
  }
#pragma unroll
  for (int i = 0; i < width; ++i) partial[group][lane * width + i] = sum[i];
  __syncthreads();
  for (int c = static_cast<int>(threadIdx.x); c < tile; c += threads) {
    if (tile_first + c >= cols) break;
    float total = 0.0F;
#pragma unroll
    for (int g = 0; g < rows_per_pass; ++g) total += partial[g][c];
    db[tile_first + c] = from_float<T>(total);
  }
}

template <typename T>
void bias_gradient(void* db, void const* dz, std::int64_t m, std::int64_t n,
                   cuda::stream_view stream) {
  constexpr int width = 16 / sizeof(T);
  bool const vectorized = n % width == 0 && reinterpret_cast<std::uintptr_t>(dz) % 16 == 0;
  if (vectorized) {
    constexpr int lanes = 8;
    auto const grid = static_cast<unsigned>((n + lanes * width - 1) / (lanes * width));
    bias_gradient_kernel<T, width, lanes><<<grid, threads, 0, stream.value()>>>(
        static_cast<T*>(db), static_cast<T const*>(dz), m, n);
  } else {
    constexpr int lanes = 32;
    auto const grid = static_cast<unsigned>((n + lanes - 1) / lanes);
    bias_gradient_kernel<T, 1, lanes><<<grid, threads, 0, stream.value()>>>(
        static_cast<T*>(db), static_cast<T const*>(dz), m, n);
  }
}

}  // namespace

void launch_bias_gradient(void* db, void const* dz, std::int64_t m, std::int64_t n, dtype type,
                          cuda::stream_view stream) {
  GRAPHSTEP_EXPECTS(db != nullptr && dz != nullptr,
                    "bias_gradient: db and dz are required (a pointer is null)");
  GRAPHSTEP_EXPECTS(m > 0 && n > 0, "bias_gradient: sizes must be positive (M=" +
                                        std::to_string(m) + ", N=" + std::to_string(n) + ")");
  // Grid x may hold 2^31 - 1 blocks; a tile holds at least 32 columns.
  GRAPHSTEP_EXPECTS(n / 32 < std::int64_t{0x7fffffff},
                    "bias_gradient: N=" + std::to_string(n) + " is too wide for one launch");
  switch (type) {
    case dtype::float32: bias_gradient<float>(db, dz, m, n, stream); break;
    case dtype::float16: bias_gradient<__half>(db, dz, m, n, stream); break;
    case dtype::bfloat16: bias_gradient<__nv_bfloat16>(db, dz, m, n, stream); break;
  }
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

}  // namespace graphstep::ops
