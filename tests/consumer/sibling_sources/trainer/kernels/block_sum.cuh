#pragma once
// A block reduction as trainers write them: a kernel template (its block size a template
// argument), a warp-shuffle reduction within each warp, and shared memory between the warps,
// ordered by __syncthreads.

constexpr unsigned kFullWarp = 0xffffffffU;

template <typename T>
__device__ T warp_sum(T value) {
  for (int offset = 16; offset > 0; offset /= 2) {
    value += __shfl_down_sync(kFullWarp, value, offset);
  }
  return value;
}

// sums[b] = the sum of x[b * kBlock ... (b + 1) * kBlock), the elements past n counting 0.
template <int kBlock, typename T>
__global__ void block_sum(T const* x, T* sums, int n) {
  __shared__ T warp_sums[kBlock / 32];
  int const i = static_cast<int>(blockIdx.x * kBlock + threadIdx.x);
  T const value = warp_sum(i < n ? x[i] : T{0});
  int const lane = static_cast<int>(threadIdx.x % 32);
  int const warp = static_cast<int>(threadIdx.x / 32);
  if (lane == 0) warp_sums[warp] = value;
  __syncthreads();
  if (warp == 0) {
    T const total = warp_sum(lane < kBlock / 32 ? warp_sums[lane] : T{0});
    if (lane == 0) sums[blockIdx.x] = total;
  }
}
