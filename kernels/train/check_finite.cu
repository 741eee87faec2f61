// The finiteness check that drives a skipped optimizer step: one kernel sets the flag, a
// grid-stride kernel clears it on the first non-finite value.

#include <cuda_runtime.h>

#include <algorithm>
#include <graphstep/cuda/check.hpp>
#include <graphstep/error.hpp>
#include <graphstep/train/check_finite.hpp>

namespace graphstep::train {
namespace {

__global__ void set_flag_kernel(unsigned int* flag, unsigned int value) {
  *flag = value;
}

__global__ void check_finite_kernel(float const* data, std::size_t n, unsigned int* all_finite) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x) {
    if (!isfinite(data[i])) *all_finite = 0;  // benign race: every writer writes 0
  }
}

}  // namespace

void check_finite(float const* data, std::size_t n, unsigned int* all_finite,
                  cuda::stream_view stream) {
  GRAPHSTEP_EXPECTS(data != nullptr && all_finite != nullptr,
                    "check_finite: a null device pointer was passed");
  set_flag_kernel<<<1, 1, 0, stream.get()>>>(all_finite, 1U);
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
  if (n == 0) return;
  std::size_t const blocks = std::min<std::size_t>((n + 255) / 256, 4096);
  check_finite_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream.get()>>>(data, n, all_finite);
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

}  // namespace graphstep::train
