#pragma once

// A kernel in a header of a subfolder, taking a struct from its neighbour by a quoted #include.

#include "scalar.hpp"

namespace source_constructs {

template <typename T>
__device__ T apply(affine<T> const& map, T x) {
  return map.scale * x + map.shift;
}

template <typename T>
__global__ void apply_affine(T* values, affine<T> map, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) values[i] = apply(map, values[i]);
}

}  // namespace source_constructs
