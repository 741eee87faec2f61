// A program whose .cu files nvcc compiled, linked to the simulated device instead of the CUDA
// runtime (nvcc -cudart none): nvcc's host code registers each kernel's host stub with its
// device name before main (crt/host_runtime.h: __cudaRegisterFatBinary, __cudaRegisterFunction)
// and turns `<<<...>>>` into __cudaPushCallConfiguration / __cudaPopCallConfiguration and
// __cudaLaunchKernel (crt/device_functions.h). The kernels themselves are machine code for a GPU
// the simulator cannot run: every such launch is refused with cudaErrorInvalidDeviceFunction and
// said so, never silently skipped. Rebuilding the sources with graphstep_cuda_sim_sources runs
// them.

#include <cuda_runtime_api.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "detail/runtime_state.hpp"

namespace sim = graphstep::sim::detail;

namespace {

struct registry {
  std::mutex mutex;
  std::map<void const*, std::string> names;  // host stub -> mangled device name
  std::set<std::string> reported;
};

// Registration runs in static constructors before main: a function-local static is ready then.
registry& kernels() {
  static auto* const instance = new registry;
  return *instance;
}

struct call_configuration {
  dim3 grid;
  dim3 block;
  std::size_t shared_bytes{};
  cudaStream_t stream{};
};

std::vector<call_configuration>& configurations() {
  thread_local std::vector<call_configuration> stack;
  return stack;
}

cudaError_t refuse(void const* function, cudaStream_t stream) {
  std::string name = "(a function nvcc did not register)";
  {
    std::lock_guard<std::mutex> const lock{kernels().mutex};
    auto const found = kernels().names.find(function);
    if (found != kernels().names.end()) name = found->second;
    if (kernels().reported.insert(name).second) {
      static_cast<void>(
          std::fprintf(stderr,
                       "graphstep simulated device: kernel %s was compiled by nvcc; the simulated "
                       "device runs kernels only from their source (build the .cu file with "
                       "graphstep_cuda_sim_sources): not run\n",
                       name.c_str()));
    }
  }
  sim::lock_guard const lock{sim::state().mutex};
  if (sim::stream_state* s = sim::find_stream(stream); s != nullptr && s->capture != nullptr) {
    sim::invalidate(*s->capture, cudaErrorInvalidDeviceFunction, "cudaLaunchKernel");
  }
  return sim::fail(cudaErrorInvalidDeviceFunction);
}

}  // namespace

// The entry points nvcc's generated code calls, with the names it gives them.
// NOLINTBEGIN(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp)
extern "C" {

void** __cudaRegisterFatBinary(void* /*fat_cubin*/) {
  static void* handle = nullptr;
  return &handle;
}

void __cudaRegisterFatBinaryEnd(void** /*handle*/) {}

void __cudaUnregisterFatBinary(void** /*handle*/) {}

void __cudaRegisterFunction(void** /*handle*/, char const* host_function, char* /*device*/,
                            char const* device_name, int /*thread_limit*/, uint3* /*tid*/,
                            uint3* /*bid*/, dim3* /*block*/, dim3* /*grid*/, int* /*warp*/) {
  std::lock_guard<std::mutex> const lock{kernels().mutex};
  kernels().names[host_function] = device_name;
}

void __cudaRegisterVar(void** /*handle*/, char* /*host*/, char* /*device*/, char const* /*name*/,
                       int /*ext*/, std::size_t /*size*/, int /*constant*/, int /*global*/) {}

char __cudaInitModule(void** /*handle*/) {
  return 1;
}

unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, std::size_t shared_bytes,
                                     CUstream_st* stream) {
  configurations().push_back(call_configuration{grid, block, shared_bytes, stream});
  return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3* grid, dim3* block, std::size_t* shared_bytes,
                                       void* stream) {
  auto& stack = configurations();
  if (stack.empty()) return cudaErrorInvalidConfiguration;
  call_configuration const top = stack.back();
  stack.pop_back();
  *grid = top.grid;
  *block = top.block;
  *shared_bytes = top.shared_bytes;
  *static_cast<cudaStream_t*>(stream) = top.stream;
  return cudaSuccess;
}

cudaError_t __cudaGetKernel(cudaKernel_t* kernel, void const* function) {
  if (kernel == nullptr) return cudaErrorInvalidValue;
  *kernel = reinterpret_cast<cudaKernel_t>(const_cast<void*>(function));
  return cudaSuccess;
}

cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 /*grid*/, dim3 /*block*/, void** /*args*/,
                               std::size_t /*shared_bytes*/, cudaStream_t stream) {
  return refuse(reinterpret_cast<void const*>(kernel), stream);
}

cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 grid, dim3 block, void** args,
                                    std::size_t shared_bytes, cudaStream_t stream) {
  return __cudaLaunchKernel(kernel, grid, block, args, shared_bytes, stream);
}

}  // extern "C"
// NOLINTEND(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp)

cudaError_t cudaLaunchKernel(void const* function, dim3 /*grid*/, dim3 /*block*/, void** /*args*/,
                             std::size_t /*shared_bytes*/, cudaStream_t stream) {
  return refuse(function, stream);
}
