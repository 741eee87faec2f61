#include <cuda_runtime_api.h>

#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device_guard.hpp>
#include <graphstep/error.hpp>

namespace graphstep::cuda {

device_guard::device_guard(int device) {
  GRAPHSTEP_CUDA_TRY(cudaGetDevice(&previous_));
  if (device != previous_) {
    GRAPHSTEP_CUDA_TRY(cudaSetDevice(device));
    changed_ = true;
  }
}

device_guard::~device_guard() {
  if (changed_) GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaSetDevice(previous_));
}

}  // namespace graphstep::cuda
