#pragma once

/// @file error.hpp
/// @brief The exception hierarchy of graphstep, and the macros that check preconditions and
/// the status codes of cuDNN and NCCL (those of CUDA and cuBLAS: cuda/check.hpp).
///
/// This header is plain C++17 and includes no CUDA header, so the CPU-only core can throw
/// the same exceptions as the CUDA shell. Status codes are kept as the integer value of the
/// library's own enum (`cudaError_t`, `CUresult`, `cublasStatus_t`, `cudnnStatus_t`,
/// `ncclResult_t`); compare them against the enumerators directly.
///
///     std::runtime_error
///     └─ error ─┬─ cuda_error ─┬─ no_device_error
///               │              └─ capture_error
///               ├─ cuda_driver_error
///               ├─ cublas_error
///               ├─ cudnn_error
///               ├─ nccl_error
///               └─ usage_error
///     std::bad_alloc
///     └─ out_of_memory
///
/// `out_of_memory` is a `std::bad_alloc`, as every allocator's is, so code that handles running
/// out of memory catches it; it is not an `error` (deriving from both would make
/// `catch (std::exception const&)` ambiguous). To handle everything graphstep throws, catch
/// `error` and `std::bad_alloc`, or `std::exception`.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>

namespace graphstep {

/// @brief Base of every exception graphstep throws, except `out_of_memory` (a `std::bad_alloc`).
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// @brief A CUDA runtime call failed. `code()` is the `cudaError_t` value.
class cuda_error : public error {
 public:
  cuda_error(int code, std::string const& what) : error{what}, code_{code} {}
  /// @brief The `cudaError_t` the call returned.
  [[nodiscard]] int code() const noexcept { return code_; }

 private:
  int code_;
};

/// @brief No CUDA device is visible (no GPU, no driver, or `CUDA_VISIBLE_DEVICES` hides them).
/// Thrown by the first call that needs a device.
class no_device_error : public cuda_error {
 public:
  using cuda_error::cuda_error;
};

/// @brief A stream capture failed or was invalidated. `code()` is the CUDA reason.
class capture_error : public cuda_error {
 public:
  using cuda_error::cuda_error;
};

/// @brief A CUDA driver API call failed. `code()` is the `CUresult` value.
class cuda_driver_error : public error {
 public:
  cuda_driver_error(int code, std::string const& what) : error{what}, code_{code} {}
  /// @brief The `CUresult` the call returned.
  [[nodiscard]] int code() const noexcept { return code_; }

 private:
  int code_;
};

/// @brief A cuBLAS or cuBLASLt call failed. `code()` is the `cublasStatus_t` value.
class cublas_error : public error {
 public:
  cublas_error(int code, std::string const& what) : error{what}, code_{code} {}
  /// @brief The `cublasStatus_t` the call returned.
  [[nodiscard]] int code() const noexcept { return code_; }

 private:
  int code_;
};

/// @brief A cuDNN call failed. `code()` is the `cudnnStatus_t` value.
class cudnn_error : public error {
 public:
  cudnn_error(int code, std::string const& what) : error{what}, code_{code} {}
  /// @brief The `cudnnStatus_t` the call returned.
  [[nodiscard]] int code() const noexcept { return code_; }

 private:
  int code_;
};

/// @brief An NCCL call failed, or a collective timed out. `code()` is the `ncclResult_t` value.
class nccl_error : public error {
 public:
  nccl_error(int code, std::string const& what) : error{what}, code_{code} {}
  /// @brief The `ncclResult_t` the call returned.
  [[nodiscard]] int code() const noexcept { return code_; }

 private:
  int code_;
};

/// @brief The library was used against its contract: the message says what was wrong and what
/// to do instead.
class usage_error : public error {
 public:
  using error::error;
};

/// @brief An allocation could not be served, by the device or within a memory budget. A
/// `std::bad_alloc` (not an `error`), with a message and the sizes involved.
class out_of_memory : public std::bad_alloc {
 public:
  /// @brief Sizes of the failed request and of the pool at the time, in bytes. A `budget` of
  /// zero means no budget was set.
  struct details {
    std::size_t requested{};
    std::size_t in_use{};
    std::size_t reserved{};
    std::size_t budget{};
    std::size_t largest_free{};
  };
  out_of_memory(details const& sizes, std::string const& what)
      : message_{std::make_shared<std::string const>(what)}, details_{sizes} {}
  /// @brief The message: the request, the pool's sizes and what to do.
  [[nodiscard]] char const* what() const noexcept override { return message_->c_str(); }
  /// @brief The sizes the message reports, for programs that react to them.
  [[nodiscard]] details const& sizes() const noexcept { return details_; }

 private:
  // std::bad_alloc holds no message; shared, so that copying the exception cannot throw.
  std::shared_ptr<std::string const> message_;
  details details_;
};

namespace detail {

/// @brief Formats "file:line: call: name (text)".
[[nodiscard]] std::string format_failure(char const* file, int line, char const* call,
                                         char const* name, std::string const& text);

// Out-of-line throwers keep the macros small; each adds the call, file and line.
[[noreturn]] void throw_cudnn_error(int code, char const* name, char const* call, char const* file,
                                    int line);
[[noreturn]] void throw_nccl_error(int code, char const* text, char const* call, char const* file,
                                   int line);
[[noreturn]] void throw_usage_error(char const* condition, std::string const& message,
                                    char const* file, int line);

/// @brief The symbolic name of an `ncclResult_t` value ("ncclInvalidArgument").
[[nodiscard]] char const* nccl_result_name(int code) noexcept;

}  // namespace detail
}  // namespace graphstep

/// @brief Calls a cuDNN function; on failure throws `cudnn_error`. Needs `<cudnn.h>`.
#define GRAPHSTEP_CUDNN_TRY(call)                                                              \
  do {                                                                                         \
    if (auto const gs_status_ = (call); gs_status_ != CUDNN_STATUS_SUCCESS)                    \
      ::graphstep::detail::throw_cudnn_error(static_cast<int>(gs_status_),                     \
                                             cudnnGetErrorString(gs_status_), #call, __FILE__, \
                                             __LINE__);                                        \
  } while (0)

/// @brief Calls an NCCL function; on failure throws `nccl_error`. `ncclInProgress` (a
/// non-blocking communicator still working) counts as success. Needs `<nccl.h>`.
#define GRAPHSTEP_NCCL_TRY(call)                                                                   \
  do {                                                                                             \
    if (auto const gs_status_ = (call); gs_status_ != ncclSuccess && gs_status_ != ncclInProgress) \
      ::graphstep::detail::throw_nccl_error(static_cast<int>(gs_status_),                          \
                                            ncclGetErrorString(gs_status_), #call, __FILE__,       \
                                            __LINE__);                                             \
  } while (0)

/// @brief Checks a precondition; when it fails throws `usage_error` with `message`, which
/// should say what was wrong and what to do.
#define GRAPHSTEP_EXPECTS(condition, message)                                            \
  do {                                                                                   \
    if (!(condition))                                                                    \
      ::graphstep::detail::throw_usage_error(#condition, (message), __FILE__, __LINE__); \
  } while (0)
