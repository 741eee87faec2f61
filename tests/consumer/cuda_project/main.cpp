// The consumer's kernel runs on a stream that graphstep created: with one CUDA runtime in the
// process both see the same device, context and stream. Without a device, both must say so.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <graphstep/graphstep.hpp>
#include <vector>

cudaError_t launch_add_one(float* x, int n, cudaStream_t stream);

int main() {
  namespace gs = graphstep;
  int const devices = gs::cuda::device_count();
  int own_count = 0;
  cudaError_t const own_status = cudaGetDeviceCount(&own_count);
  if (devices == 0) {
    if (own_status == cudaSuccess && own_count > 0) {
      std::printf("consumer: graphstep sees no device, this program's runtime sees %d\n",
                  own_count);
      return 1;
    }
    std::printf("consumer: no device, as expected (%s)\n", cudaGetErrorName(own_status));
    return 0;
  }
  if (own_status != cudaSuccess || own_count != devices) {
    std::printf("consumer: graphstep sees %d device(s), this program's runtime %d (%s)\n", devices,
                own_count, cudaGetErrorName(own_status));
    return 1;
  }
  int const n = 1000;
  gs::cuda::stream stream;
  void* memory = nullptr;
  if (cudaMalloc(&memory, n * sizeof(float)) != cudaSuccess) return 1;
  auto* const x = static_cast<float*>(memory);
  std::vector<float> host(n, 1.0F);
  bool ok = cudaMemcpyAsync(x, host.data(), n * sizeof(float), cudaMemcpyHostToDevice,
                            stream.get()) == cudaSuccess &&
            launch_add_one(x, n, stream.get()) == cudaSuccess &&
            cudaMemcpyAsync(host.data(), x, n * sizeof(float), cudaMemcpyDeviceToHost,
                            stream.get()) == cudaSuccess;
  stream.synchronize();
  cudaFree(x);
  for (float const value : host) ok = ok && value == 2.0F;
  std::printf("consumer: %d device(s), own kernel on graphstep's stream: %s\n", devices,
              ok ? "2 everywhere" : "wrong");
  return ok ? 0 : 1;
}
