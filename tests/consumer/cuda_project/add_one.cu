// The consumer's own kernel, built by the consumer's nvcc against its own CUDA runtime.
#include <cuda_runtime_api.h>

namespace {
__global__ void add_one(float* x, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) x[i] += 1.0F;
}
}  // namespace

cudaError_t launch_add_one(float* x, int n, cudaStream_t stream) {
  add_one<<<(n + 255) / 256, 256, 0, stream>>>(x, n);
  return cudaGetLastError();
}
