#pragma once

/// @file cuda/check.hpp
/// @brief Checked calls into the CUDA runtime, the driver and cuBLAS/cuBLASLt: on failure the
/// `GRAPHSTEP_*_TRY` macros throw the matching `graphstep` exception (error.hpp) with the call,
/// file, line, the status name and its text; `GRAPHSTEP_ASSERT_CUDA_SUCCESS` reports instead of
/// throwing, for destructors. The throwers are out of line so the macros stay small.

#include <cuda_runtime_api.h>

#include <graphstep/error.hpp>

namespace graphstep::cuda::detail {

// Out-of-line throwers keep the macros small; each adds the call, file and line.
[[noreturn]] void throw_cuda_error(int code, char const* call, char const* file, int line);
[[noreturn]] void throw_cu_error(int code, char const* call, char const* file, int line);
[[noreturn]] void throw_cublas_error(int code, char const* call, char const* file, int line);
/// @brief Reports a failure inside a destructor on stderr instead of throwing.
/// `cudaErrorCudartUnloading` (the runtime shutting down at exit) is accepted silently.
void report_cleanup_failure(int code, char const* call, char const* file, int line) noexcept;

}  // namespace graphstep::cuda::detail

/// @brief Calls a CUDA runtime function; on failure throws `cuda_error` (or `no_device_error`
/// when no device is visible, `capture_error` when a capture was broken).
#define GRAPHSTEP_CUDA_TRY(call)                                                                 \
  do {                                                                                           \
    if (auto const gs_status_ = (call); gs_status_ != cudaSuccess)                               \
      ::graphstep::cuda::detail::throw_cuda_error(static_cast<int>(gs_status_), #call, __FILE__, \
                                                  __LINE__);                                     \
  } while (0)

/// @brief Calls a CUDA driver function (through graphstep's run-time resolved entry points);
/// on failure throws `cuda_driver_error`. Needs `<cuda.h>`.
#define GRAPHSTEP_CU_TRY(call)                                                                 \
  do {                                                                                         \
    if (auto const gs_status_ = (call); gs_status_ != CUDA_SUCCESS)                            \
      ::graphstep::cuda::detail::throw_cu_error(static_cast<int>(gs_status_), #call, __FILE__, \
                                                __LINE__);                                     \
  } while (0)

/// @brief Calls a cuBLAS or cuBLASLt function; on failure throws `cublas_error`.
#define GRAPHSTEP_CUBLAS_TRY(call)                                                                 \
  do {                                                                                             \
    if (auto const gs_status_ = (call); gs_status_ != CUBLAS_STATUS_SUCCESS)                       \
      ::graphstep::cuda::detail::throw_cublas_error(static_cast<int>(gs_status_), #call, __FILE__, \
                                                    __LINE__);                                     \
  } while (0)

/// @brief For destructors: calls a CUDA runtime function and reports, never throws, a failure.
#define GRAPHSTEP_ASSERT_CUDA_SUCCESS(call)                                                  \
  do {                                                                                       \
    if (auto const gs_status_ = (call); gs_status_ != cudaSuccess)                           \
      ::graphstep::cuda::detail::report_cleanup_failure(static_cast<int>(gs_status_), #call, \
                                                        __FILE__, __LINE__);                 \
  } while (0)
