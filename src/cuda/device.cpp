#include <cuda_runtime_api.h>

#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device.hpp>
#include <graphstep/error.hpp>

#include "cuda/detail/driver_api.hpp"

namespace graphstep::cuda {

int device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    // No driver reports cudaErrorInsufficientDriver, no GPU cudaErrorNoDevice: both mean none.
    static_cast<void>(cudaGetLastError());
    return 0;
  }
  return count;
}

void require_device() {
  int count = 0;
  cudaError_t const status = cudaGetDeviceCount(&count);
  if (status == cudaSuccess && count > 0) return;
  static_cast<void>(cudaGetLastError());
  std::string reason = status == cudaSuccess ? std::string{"cudaGetDeviceCount found 0 devices"}
                                             : std::string{cudaGetErrorName(status)} + " (" +
                                                   cudaGetErrorString(status) + ")";
  throw no_device_error{
      status == cudaSuccess ? static_cast<int>(cudaErrorNoDevice) : static_cast<int>(status),
      detail::no_device_advice() + ": " + reason};
}

int current_device() {
  int device = 0;
  GRAPHSTEP_CUDA_TRY(cudaGetDevice(&device));
  return device;
}

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
