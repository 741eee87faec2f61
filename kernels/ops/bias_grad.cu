// The bias gradient of the unfused path: db[N] = Σ over the M rows of dz[M,N], for fp32, fp16
// and bf16 storage, accumulated in fp32 in a fixed order (the same bits on every run, so a
// replayed graph reproduces the eager result exactly). No atomics.
//
// Pass 1, a 2-D grid: block (x, y) owns a tile of columns (x) and a slice of rows (y). Inside a
// block `lanes` threads side by side read one row's slice of the tile (16 bytes each when
// vectorized), `rows_per_pass` such groups take interleaved rows of the slice, then the groups'
// partial sums are added in group order through shared memory. With one row slice the block
// writes db itself; otherwise it writes its slice's fp32 sums to the workspace and pass 2 adds
// the slices of each column in slice order, one thread per column.
//
// The row slices make the grid fill the GPU for MLP widths: about two blocks per SM, each slice
// at least one row per group. On a 132-SM H100 (target 264 blocks), M = 640, with workspace
// enough for the slices (bias_gradient_workspace_size; a plan passes its cuBLASLt workspace):
//   bf16 (64-column tiles): N = 1024 → 16 tiles × 17 slices of 38 rows = 272 blocks;
//                           N = 4096 → 64 tiles × 5 slices of 128 rows = 320 blocks;
//   fp32 (32-column tiles): N = 1024 → 32 tiles × 9 slices of 72 rows = 288 blocks;
//                           N = 4096 → 128 tiles × 3 slices of 214 rows = 384 blocks.
// A single pass over whole columns would launch 16, 64, 32 and 128 blocks.
// The slice count depends on M, N, the tile, the SM count and the workspace given, never on
// timing, so the result is reproducible on one device with one workspace size.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <graphstep/cuda/check.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/ops/gelu_problem.hpp>

#include "detail/element_conversion.cuh"
#include "ops/op_kernels.hpp"

namespace graphstep::ops {
namespace {

constexpr int threads = 256;
constexpr int blocks_per_sm = static_cast<int>(bias_gradient_problem::blocks_per_sm);

using graphstep::detail::from_float;
using graphstep::detail::to_float;

// `width` elements of T loaded as one transaction (16 bytes when width = 16 / sizeof(T)).
template <typename T, int width>
struct alignas(sizeof(T) * width) pack {
  T v[width];
};

// width = elements per thread (16 / sizeof(T) vectorized, 1 scalar); lanes = threads per row.
// Writes out[blockIdx.y * cols + column]: db itself with one slice, fp32 partials otherwise.
template <typename T, typename Out, int width, int lanes>
__global__ void __launch_bounds__(threads)
    column_sums_kernel(Out* __restrict__ out, T const* __restrict__ dz, std::int64_t rows,
                       std::int64_t cols, std::int64_t rows_per_slice) {
  constexpr int rows_per_pass = threads / lanes;
  constexpr int tile = lanes * width;
  __shared__ float partial[rows_per_pass][tile];
  int const lane = static_cast<int>(threadIdx.x) % lanes;
  int const group = static_cast<int>(threadIdx.x) / lanes;
  std::int64_t const tile_first = std::int64_t{blockIdx.x} * tile;
  std::int64_t const col = tile_first + std::int64_t{lane} * width;
  std::int64_t const slice_first = std::int64_t{blockIdx.y} * rows_per_slice;
  std::int64_t const slice_end =
      slice_first + rows_per_slice < rows ? slice_first + rows_per_slice : rows;

  float sum[width];
#pragma unroll
  for (int i = 0; i < width; ++i) sum[i] = 0.0F;
  if (col < cols) {  // vectorized: cols % width == 0, so the whole pack is in range
    for (std::int64_t r = slice_first + group; r < slice_end; r += rows_per_pass) {
      pack<T, width> const values = *reinterpret_cast<pack<T, width> const*>(dz + r * cols + col);
#pragma unroll
      for (int i = 0; i < width; ++i) sum[i] += to_float(values.v[i]);
    }
  }
#pragma unroll
  for (int i = 0; i < width; ++i) partial[group][lane * width + i] = sum[i];
  __syncthreads();
  Out* const out_row = out + std::int64_t{blockIdx.y} * cols;
  for (int c = static_cast<int>(threadIdx.x); c < tile; c += threads) {
    if (tile_first + c >= cols) break;
    float total = 0.0F;
#pragma unroll
    for (int g = 0; g < rows_per_pass; ++g) total += partial[g][c];
    out_row[tile_first + c] = from_float<Out>(total);
  }
}

// db[c] = Σ_s partial[s][c], slices in order.
template <typename T>
__global__ void __launch_bounds__(threads)
    add_slices_kernel(T* __restrict__ db, float const* __restrict__ partial, std::int64_t slices,
                      std::int64_t cols) {
  std::int64_t const c = std::int64_t{blockIdx.x} * threads + threadIdx.x;
  if (c >= cols) return;
  float total = 0.0F;
  for (std::int64_t s = 0; s < slices; ++s) total += partial[s * cols + c];
  db[c] = from_float<T>(total);
}

struct row_slicing {
  std::int64_t slices{1};
  std::int64_t rows_per_slice{};
};

// Enough slices for about blocks_per_sm blocks per SM, no slice shorter than one row per group,
// no more than the workspace holds (fp32 sums of every column per slice), at most 65535 (grid y).
row_slicing slicing_for(std::int64_t m, std::int64_t n, std::int64_t tiles, int rows_per_pass,
                        std::size_t workspace_bytes) {
  std::int64_t const wanted =
      (std::int64_t{detail::multiprocessor_count()} * blocks_per_sm + tiles - 1) / tiles;
  std::int64_t const by_rows = (m + rows_per_pass - 1) / rows_per_pass;
  auto const by_workspace =
      static_cast<std::int64_t>(workspace_bytes / (static_cast<std::size_t>(n) * sizeof(float)));
  std::int64_t slices = std::min({wanted, by_rows, by_workspace, std::int64_t{65535}});
  if (slices < 2) return {1, m};
  std::int64_t const rows_per_slice = (m + slices - 1) / slices;
  return {(m + rows_per_slice - 1) / rows_per_slice, rows_per_slice};
}

template <typename T, int width, int lanes>
void column_sums(void* db, void const* dz, std::int64_t m, std::int64_t n, void* workspace,
                 std::size_t workspace_bytes, cuda::stream_view stream) {
  constexpr int tile = lanes * width;
  constexpr int rows_per_pass = threads / lanes;
  std::int64_t const tiles = (n + tile - 1) / tile;
  row_slicing const s = slicing_for(m, n, tiles, rows_per_pass, workspace_bytes);
  dim3 const grid{static_cast<unsigned>(tiles), static_cast<unsigned>(s.slices)};
  if (s.slices == 1) {
    column_sums_kernel<T, T, width, lanes><<<grid, threads, 0, stream.get()>>>(
        static_cast<T*>(db), static_cast<T const*>(dz), m, n, m);
    return;
  }
  auto* const partial = static_cast<float*>(workspace);
  column_sums_kernel<T, float, width, lanes><<<grid, threads, 0, stream.get()>>>(
      partial, static_cast<T const*>(dz), m, n, s.rows_per_slice);
  auto const columns_grid = static_cast<unsigned>((n + threads - 1) / threads);
  add_slices_kernel<T>
      <<<columns_grid, threads, 0, stream.get()>>>(static_cast<T*>(db), partial, s.slices, n);
}

template <typename T>
void column_sums_of(void* db, void const* dz, std::int64_t m, std::int64_t n, void* workspace,
                    std::size_t workspace_bytes, cuda::stream_view stream) {
  constexpr int width = 16 / sizeof(T);
  bool const vectorized = n % width == 0 && reinterpret_cast<std::uintptr_t>(dz) % 16 == 0;
  if (vectorized) {  // narrow tiles (8 lanes × 16 bytes) keep many column tiles in flight
    column_sums<T, width, 8>(db, dz, m, n, workspace, workspace_bytes, stream);
  } else {
    column_sums<T, 1, 32>(db, dz, m, n, workspace, workspace_bytes, stream);
  }
}

}  // namespace

namespace detail {

void bias_gradient(dtype type, void* db, void const* dz, std::int64_t m, std::int64_t n,
                   void* workspace, std::size_t workspace_bytes, cuda::stream_view stream) {
  switch (type) {
    case dtype::float32:
      column_sums_of<float>(db, dz, m, n, workspace, workspace_bytes, stream);
      break;
    case dtype::float16:
      column_sums_of<__half>(db, dz, m, n, workspace, workspace_bytes, stream);
      break;
    case dtype::bfloat16:
      column_sums_of<__nv_bfloat16>(db, dz, m, n, workspace, workspace_bytes, stream);
      break;
    case dtype::int32:
    case dtype::uint8: graphstep::detail::refuse_integer("bias_gradient", type);
  }
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

}  // namespace detail
}  // namespace graphstep::ops
