// A program compiled by nvcc (-cudart none) and linked to graphstep::cuda_sim instead of the CUDA
// runtime: it loads and runs, and its kernel launch, which the simulator cannot run from source,
// is refused and said so.

#include <cuda_runtime_api.h>

#include <cstdio>

__global__ void scale(float* x, float factor, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) x[i] *= factor;
}

int main() {
  float* x = nullptr;
  if (cudaMalloc(&x, 32 * sizeof(float)) != cudaSuccess) return 2;
  scale<<<1, 32>>>(x, 2.0F, 32);
  cudaError_t const launched = cudaGetLastError();
  std::printf("launch: %s\n", cudaGetErrorName(launched));
  static_cast<void>(cudaFree(x));
  return launched == cudaErrorInvalidDeviceFunction ? 0 : 1;
}
