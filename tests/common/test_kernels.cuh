#pragma once

// Small kernels shared by the GPU tests.

#include <cuda_runtime_api.h>

namespace graphstep::testing {
// Internal linkage: each test file gets its own copy of these kernels.
namespace {

__global__ void fill_kernel(float* x, float value, int n) {
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = value;
}

__global__ void axpy_kernel(float* y, float const* x, float a, int n) {
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}

__global__ void copy_kernel(float const* from, float* to, int n) {
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) to[i] = from[i];
}

inline int blocks_for(int n) {
  return (n + 255) / 256;
}

}  // namespace

}  // namespace graphstep::testing
