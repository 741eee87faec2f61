#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include <graphstep/cuda/check.hpp>
#include <graphstep/log.hpp>
#include <string>
#include <utility>

#include "cuda/detail/driver_api.hpp"
#include "detail/logger.hpp"

namespace graphstep::cuda::detail {

using ::graphstep::detail::format_failure;

namespace {

bool is_no_device(cudaError_t code) {
  return code == cudaErrorNoDevice || code == cudaErrorInsufficientDriver;
}

bool is_capture_failure(cudaError_t code) {
  switch (code) {
    case cudaErrorStreamCaptureUnsupported:
    case cudaErrorStreamCaptureInvalidated:
    case cudaErrorStreamCaptureMerge:
    case cudaErrorStreamCaptureUnmatched:
    case cudaErrorStreamCaptureUnjoined:
    case cudaErrorStreamCaptureIsolation:
    case cudaErrorStreamCaptureImplicit:
    case cudaErrorStreamCaptureWrongThread:
    case cudaErrorCapturedEvent: return true;
    default: return false;
  }
}

}  // namespace

void throw_cuda_error(int code, char const* call, char const* file, int line) {
  auto const status = static_cast<cudaError_t>(code);
  // Clear the (non-sticky) error so that later, unrelated calls do not report it again.
  static_cast<void>(cudaGetLastError());
  std::string message =
      format_failure(file, line, call, cudaGetErrorName(status), cudaGetErrorString(status));
  if (is_no_device(status)) throw no_device_error{code, no_device_advice() + ": " + message};
  if (is_capture_failure(status)) throw capture_error{code, message};
  throw cuda_error{code, message};
}

void throw_cu_error(int code, char const* call, char const* file, int line) {
  std::string const name = driver_error_name(code);
  std::string const text = driver_error_text(code);
  throw cuda_driver_error{code, format_failure(file, line, call, name.c_str(), text)};
}

namespace {
// cuBLAS names its statuses only in libcublas; cuBLASLt users should not need that library.
std::pair<char const*, char const*> cublas_status_text(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return {"CUBLAS_STATUS_SUCCESS", "success"};
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return {"CUBLAS_STATUS_NOT_INITIALIZED", "the library or handle was not initialized"};
    case CUBLAS_STATUS_ALLOC_FAILED:
      return {"CUBLAS_STATUS_ALLOC_FAILED", "a resource allocation failed"};
    case CUBLAS_STATUS_INVALID_VALUE:
      return {"CUBLAS_STATUS_INVALID_VALUE", "an unsupported value or parameter was passed"};
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return {"CUBLAS_STATUS_ARCH_MISMATCH", "the device lacks a feature the call needs"};
    case CUBLAS_STATUS_MAPPING_ERROR:
      return {"CUBLAS_STATUS_MAPPING_ERROR", "access to GPU memory failed"};
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return {"CUBLAS_STATUS_EXECUTION_FAILED", "the GPU program failed to execute"};
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return {"CUBLAS_STATUS_INTERNAL_ERROR", "an internal operation failed"};
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return {"CUBLAS_STATUS_NOT_SUPPORTED", "the requested functionality is not supported"};
    case CUBLAS_STATUS_LICENSE_ERROR: return {"CUBLAS_STATUS_LICENSE_ERROR", "a licensing error"};
  }
  return {"CUBLAS_STATUS_UNKNOWN", "an unknown status"};
}
}  // namespace

void throw_cublas_error(int code, char const* call, char const* file, int line) {
  auto const [name, text] = cublas_status_text(static_cast<cublasStatus_t>(code));
  throw cublas_error{code, format_failure(file, line, call, name, text)};
}

void report_cleanup_failure(int code, char const* call, char const* file, int line) noexcept {
  auto const status = static_cast<cudaError_t>(code);
  if (status == cudaErrorCudartUnloading) return;  // the runtime is shutting down at exit
  static_cast<void>(cudaGetLastError());
  graphstep::detail::log_lazily(log_level::error, [&] {
    return std::string{"cleanup failed, continuing: "} + file + ":" + std::to_string(line) + ": " +
           call + ": " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")";
  });
}

}  // namespace graphstep::cuda::detail
