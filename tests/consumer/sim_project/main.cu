// Plain CUDA, no graphstep header: a kernel template from a header of the project, launched with
// its type deduced, eagerly and captured into a graph, replayed, and the results read back and
// checked.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <vector>

#include "add_one.cuh"

#define CHECK(call)                                                              \
  do {                                                                           \
    cudaError_t const status = (call);                                           \
    if (status != cudaSuccess) {                                                 \
      std::printf("consumer: %s failed: %s\n", #call, cudaGetErrorName(status)); \
      return 1;                                                                  \
    }                                                                            \
  } while (false)

int main() {
  int const n = 1000;
  cudaStream_t stream = nullptr;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float* x = nullptr;
  CHECK(cudaMalloc(&x, n * sizeof(float)));
  CHECK(cudaMemsetAsync(x, 0, n * sizeof(float), stream));
  add_one<<<(n + 255) / 256, 256, 0, stream>>>(x, n);
  CHECK(cudaGetLastError());
  cudaGraph_t graph = nullptr;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  add_one<<<(n + 255) / 256, 256, 0, stream>>>(x, n);
  add_one<<<(n + 255) / 256, 256, 0, stream>>>(x, n);
  CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 10; ++i) CHECK(cudaGraphLaunch(exec, stream));
  std::vector<float> host(n);
  CHECK(cudaMemcpyAsync(host.data(), x, n * sizeof(float), cudaMemcpyDeviceToHost, stream));
  CHECK(cudaStreamSynchronize(stream));
  for (float const value : host) {
    if (value != 21.0F) {
      std::printf("consumer: expected 21, read %g\n", static_cast<double>(value));
      return 1;
    }
  }
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaFree(x));
  CHECK(cudaStreamDestroy(stream));
  std::printf("consumer: 1 eager and 10 replayed launches of 2 kernels gave 21 everywhere\n");
  return 0;
}
