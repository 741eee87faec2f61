// The finiteness check that drives a skipped optimizer step: one kernel sets the flag, a
// grid-stride kernel clears it on the first non-finite value.

#include <cuda_runtime.h>

#include <algorithm>
#include <graphstep/cuda/check.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/error.hpp>
#include <graphstep/train/loss_scaler.hpp>

#include "detail/element_conversion.cuh"
#include "detail/span_checks.hpp"

namespace graphstep::train {
namespace {

__global__ void set_flag_kernel(unsigned int* flag, unsigned int value) {
  *flag = value;
}

template <typename T>
__global__ void check_finite_kernel(T const* data, std::size_t n, unsigned int* all_finite) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x) {
    // A 16-bit inf or NaN converts to a float inf or NaN.
    if (!isfinite(graphstep::detail::to_float(data[i]))) *all_finite = 0;  // every writer writes 0
  }
}

template <typename T>
void launch_check(device_span data, unsigned int* all_finite, cuda::stream_view stream) {
  std::size_t const blocks = std::min<std::size_t>((data.count() + 255) / 256, 4096);
  check_finite_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream.get()>>>(
      static_cast<T const*>(data.data()), data.count(), all_finite);
}

}  // namespace

void check_finite(device_span data, unsigned int* all_finite, cuda::stream_view stream) {
  GRAPHSTEP_EXPECTS(all_finite != nullptr, "check_finite: the all_finite flag is a null pointer");
  graphstep::detail::expect_valid_span("check_finite", "data", data);
  graphstep::detail::expect_floating("check_finite: data", data.type());
  set_flag_kernel<<<1, 1, 0, stream.get()>>>(all_finite, 1U);
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
  if (data.empty()) return;
  switch (data.type()) {
    case dtype::float32: launch_check<float>(data, all_finite, stream); break;
    case dtype::float16: launch_check<__half>(data, all_finite, stream); break;
    case dtype::bfloat16: launch_check<__nv_bfloat16>(data, all_finite, stream); break;
    case dtype::int32:
    case dtype::uint8: graphstep::detail::refuse_integer("check_finite: data", data.type());
  }
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

}  // namespace graphstep::train
