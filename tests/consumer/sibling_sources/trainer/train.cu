// A trainer's source in a checkout of its own, built by a wrapper project: its kernels live in
// a header beside it (kernels/), found by a quoted #include. Plain CUDA, no graphstep header:
// scales a vector (a kernel of the wrapper's), sums it per block, and checks the sums.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <vector>

#include "kernels/block_sum.cuh"

cudaError_t scale_on_device(float* x, int n, float by, cudaStream_t stream);

#define CHECK(call)                                                              \
  do {                                                                           \
    cudaError_t const status = (call);                                           \
    if (status != cudaSuccess) {                                                 \
      std::printf("consumer: %s failed: %s\n", #call, cudaGetErrorName(status)); \
      return 1;                                                                  \
    }                                                                            \
  } while (false)

int main() {
  constexpr int kBlock = 128;
  int const n = 1000;  // not a multiple of the block: the last block sums fewer elements
  int const blocks = (n + kBlock - 1) / kBlock;
  std::vector<float> host(n);
  for (int i = 0; i < n; ++i) host[i] = static_cast<float>(i % 7);
  cudaStream_t stream = nullptr;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float* x = nullptr;
  float* sums = nullptr;
  CHECK(cudaMalloc(&x, n * sizeof(float)));
  CHECK(cudaMalloc(&sums, blocks * sizeof(float)));
  CHECK(cudaMemcpyAsync(x, host.data(), n * sizeof(float), cudaMemcpyHostToDevice, stream));
  CHECK(scale_on_device(x, n, 3.0F, stream));
  block_sum<kBlock><<<blocks, kBlock, 0, stream>>>(x, sums, n);
  CHECK(cudaGetLastError());
  std::vector<float> device_sums(blocks);
  CHECK(cudaMemcpyAsync(device_sums.data(), sums, blocks * sizeof(float), cudaMemcpyDeviceToHost,
                        stream));
  CHECK(cudaStreamSynchronize(stream));
  for (int b = 0; b < blocks; ++b) {
    float expected = 0.0F;
    for (int i = b * kBlock; i < n && i < (b + 1) * kBlock; ++i) expected += 3.0F * host[i];
    if (device_sums[b] != expected) {
      std::printf("consumer: block %d summed to %g, expected %g\n", b,
                  static_cast<double>(device_sums[b]), static_cast<double>(expected));
      return 1;
    }
  }
  CHECK(cudaFree(sums));
  CHECK(cudaFree(x));
  CHECK(cudaStreamDestroy(stream));
  std::printf("consumer: %d block sums of a scaled vector, from a sibling checkout, are right\n",
              blocks);
  return 0;
}
