#pragma once
// Kernels in a header, as trainers keep them: a template that sums each row of a matrix with one
// warp per row, the lanes' partial sums combined by warp shuffles.

#include <cuda_runtime_api.h>

namespace consumer {

inline constexpr int warp_lanes = 32;

// The sum of `value` over the 32 lanes of the warp, in every lane (butterfly reduction).
template <typename T>
__device__ T warp_sum(T value) {
  for (int offset = warp_lanes / 2; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(0xFFFFFFFFU, value, offset);
  }
  return value;
}

// sums[row] = the sum of the row's `cols` elements; launched with one warp (32 threads) a block,
// one block a row.
template <typename T>
__global__ void row_sums(T const* matrix, T* sums, int cols) {
  int const row = static_cast<int>(blockIdx.x);
  int const lane = static_cast<int>(threadIdx.x);
  T partial{};
  for (int col = lane; col < cols; col += warp_lanes) partial += matrix[row * cols + col];
  T const total = warp_sum(partial);
  if (lane == 0) sums[row] = total;
}

}  // namespace consumer
