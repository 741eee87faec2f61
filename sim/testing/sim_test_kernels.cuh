#pragma once

// Small kernels the simulated device's tests launch.

#include <cuda_runtime_api.h>

namespace sim_testing {
namespace {

__global__ void copy_kernel(float const* from, float* to, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) to[i] = from[i];
}

}  // namespace
}  // namespace sim_testing
