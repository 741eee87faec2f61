#include <cuda_runtime_api.h>

#include <algorithm>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device.hpp>

#include "ops/op_kernels.hpp"

namespace graphstep::ops::detail {

int multiprocessor_count() {
  int count = 0;
  GRAPHSTEP_CUDA_TRY(
      cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, cuda::current_device()));
  return std::max(count, 1);
}

}  // namespace graphstep::ops::detail
