#pragma once

// Kernels kept in a header, as trainers keep them: function templates launched with deduced
// template arguments, a kernel whose dynamic shared memory is declared here, overloaded kernels
// a launch inside a function template, and kernels declared through macros of another header
// (source_constructs/kernel_macros.hpp). Plain CUDA: nvcc compiles it as it is, and the
// simulated device rewrites it (graphstep_cuda_sim_sources mirrors the headers of a target's
// folders). Included by source_constructs_gpu_test.cu.

#include <cuda_runtime.h>

#include "source_constructs/affine.cuh"
#include "source_constructs/kernel_macros.hpp"

namespace source_constructs {

template <typename T>
__global__ void fill(T* out, T value, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = value;
}

// `T const*` takes a `T*` argument: T is deduced from the other parameters, and the pointer
// converts, as in a call.
template <typename T>
__global__ void __launch_bounds__(128) scale(T const* in, T* out, T factor, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in[i] * factor;
}

// Each block reverses its slice in dynamic shared memory. The array has one type for every T:
// the declarations of one extern __shared__ name must agree (CUDA C++ Programming Guide,
// "__shared__": the size of an extern array "is determined at launch time").
template <typename T>
__global__ void reverse_blocks(T const* in, T* out) {
  extern __shared__ __align__(16) unsigned char staged_bytes[];
  T* const staged = reinterpret_cast<T*>(staged_bytes);
  unsigned const base = blockIdx.x * blockDim.x;
  staged[threadIdx.x] = in[base + threadIdx.x];
  __syncthreads();
  out[base + threadIdx.x] = staged[blockDim.x - 1 - threadIdx.x];
}

// Overloads: a launch chooses one as a call with the same arguments would.
__global__ void add_one(int* values, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) values[i] += 1;
}

__global__ void add_one(float* values, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) values[i] += 0.5F;
}

// Declared through macros: T deduced and overloads told apart all the same.
template <typename T>
SOURCE_CONSTRUCTS_KERNEL square(T* values, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) values[i] *= values[i];
}

SOURCE_CONSTRUCTS_GLOBAL void halve(int* values, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) values[i] /= 2;
}

SOURCE_CONSTRUCTS_GLOBAL void halve(float* values, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) values[i] *= 0.5F;
}

// A launch inside a header's function template, deducing the kernel's arguments in turn.
template <typename T>
void scale_async(T const* in, T* out, T factor, int n, cudaStream_t stream) {
  int const threads = 128;
  scale<<<(n + threads - 1) / threads, threads, 0, stream>>>(in, out, factor, n);
}

}  // namespace source_constructs
