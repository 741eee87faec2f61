#pragma once

// Kernel templates the simulated device's tests reach through the include path (sim/testing is on
// it, outside the tests' folder): their launches name the stride and leave the element type to be
// deduced, as a call would, and one kernel is declared through a macro, as some trainers spell
// kernels.

#include <cuda_runtime_api.h>

#define SIM_TESTING_KERNEL __global__ void

namespace sim_testing {

/// out[i] = in[i * Stride] for i < n.
template <int Stride, typename T>
__global__ void gather_strided(T const* in, T* out, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in[i * Stride];
}

/// out[i] = in[i * Stride] * scale for i < n: an overload, told apart by its arguments.
template <int Stride, typename T>
__global__ void gather_strided(T const* in, T* out, int n, T scale) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in[i * Stride] * scale;
}

/// values[i] = -values[i] for i < n.
template <typename T>
SIM_TESTING_KERNEL negate(T* values, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) values[i] = -values[i];
}

}  // namespace sim_testing
