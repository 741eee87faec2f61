#pragma once

/// @file graphs/detail/capture_trace.hpp
/// @brief The decisions of the capture diagnostic mode, in plain C++: what a CUDA API call means
/// to a capture in progress, which recorded call broke a capture, what deserves a warning, which
/// frame of a backtrace is the user's, and the report that names them. Internal: they fill the
/// public `capture_diagnosis` (graphs/capture_trace.hpp).
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <graphstep/graphs/capture_mode.hpp>
#include <graphstep/graphs/capture_trace.hpp>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace graphstep::graphs::detail {

/// @brief The API a recorded call belongs to.
enum class api_domain : unsigned char { runtime, driver };

/// @brief What a call does that matters to a capture, known from its name alone.
struct api_traits {
  bool synchronizes{false};    ///< waits for device work (cannot be captured)
  bool manages_memory{false};  ///< cudaMalloc, cudaFree, cudaHostAlloc…: unsafe while capturing
  bool copies{false};          ///< a memory copy (a host side may be pageable)
  /// Issues its work to the default stream without taking a stream (cudaMemcpy, cudaMemset…).
  bool uses_default_stream{false};
  /// The per-thread default-stream variant ("_ptsz", "_ptds"), not the legacy stream.
  bool per_thread_variant{false};
};

/// @brief The name without its version and per-thread suffixes:
/// "cuMemcpyHtoDAsync_v2_ptsz" → "cuMemcpyHtoDAsync", "cudaLaunchKernel_v7000" →
/// "cudaLaunchKernel".
[[nodiscard]] std::string_view base_api_name(std::string_view name) noexcept;

/// @brief The traits of a runtime ("cuda…") or driver ("cu…") API function, by name.
[[nodiscard]] api_traits classify_api(std::string_view name) noexcept;

/// @brief Which stream a call was issued to, as far as the recorder could tell.
enum class stream_kind : unsigned char {
  none,            ///< the call takes no stream and issues no work
  unknown,         ///< it takes one, which was not decoded
  legacy_default,  ///< the legacy default stream (stream 0, cudaStreamLegacy)
  capturing,       ///< the stream the capture began on
  other,           ///< another stream (a side stream, the per-thread default stream…)
};

/// @brief The kind of stream handle `handle` is, for a call whose per-thread variant is
/// `per_thread_variant` ("_ptsz": stream 0 is then the per-thread default stream), during a
/// capture that began on `capturing`.
[[nodiscard]] stream_kind classify_stream(std::uintptr_t handle, bool per_thread_variant,
                                          std::uintptr_t capturing) noexcept;

/// @brief The stream of a call that takes none: the default stream for cudaMemcpy and its
/// kind (legacy, or per-thread for the "_ptds" variant), `none` for the rest.
[[nodiscard]] stream_kind implicit_stream(std::string_view name) noexcept;

/// @brief Where the host side of a copy lives, once asked.
enum class host_memory : unsigned char { not_a_host_copy, unknown, pinned, pageable };

/// @brief One CUDA API call made while a diagnosed capture ran.
struct api_call {
  std::uint64_t sequence{};  ///< order among all recorded calls
  api_domain domain{api_domain::runtime};
  std::string name;        ///< as the API reports it, e.g. "cudaStreamSynchronize"
  std::uint32_t thread{};  ///< a small per-process thread number (1 is the first seen)
  stream_kind stream{stream_kind::none};
  std::uintptr_t stream_handle{};
  int result{0};                 ///< the cudaError_t or CUresult it returned
  std::uintptr_t copy_source{};  ///< the addresses of a copy (0 for other calls)
  std::uintptr_t copy_destination{};
  host_memory host{host_memory::not_a_host_copy};
  std::uintptr_t host_address{};          ///< the host side of a copy, once found
  std::vector<std::uintptr_t> backtrace;  ///< return addresses, innermost first; kept for
                                          ///< notable calls only
};

/// @brief True for CUDA's stream-capture errors, whose cudaError_t and CUresult values agree
/// (900 unsupported … 908 wrong thread).
[[nodiscard]] bool is_capture_error(int code) noexcept;
/// @brief "cudaErrorStreamCaptureUnsupported"…, or "error N" for other codes.
[[nodiscard]] std::string capture_error_name(int code);

/// @brief True when a call is worth a backtrace: it failed, used the legacy stream, copied,
/// synchronized or managed memory.
[[nodiscard]] bool is_notable(api_call const& call) noexcept;

/// @brief The capture the calls were recorded for.
struct capture_context {
  std::string name{"graph"};
  graphs::capture_mode mode{graphs::capture_mode::this_thread};
  std::uint32_t capturing_thread{};
  int outcome{0};  ///< what ending the capture returned (0: it succeeded)
};

/// @brief Finds the call that broke the capture (the first one to return a capture error other
/// than "invalidated", else the first to return "invalidated", else — for a failed capture —
/// the first unsafe call that the capture's mode forbids) and the calls worth a warning. Only
/// calls that bear on this capture count: made by its thread, issued to its stream, or made by
/// any thread under capture_mode::global.
[[nodiscard]] capture_diagnosis diagnose(std::vector<api_call> const& calls,
                                         capture_context const& context,
                                         std::size_t calls_seen = 0);

/// @brief One symbolized stack frame.
struct frame {
  std::uintptr_t address{};
  std::string module;              ///< the shared object or executable; "" when unknown
  std::string symbol;              ///< the demangled function; "" when the module exports none
  std::uintptr_t module_offset{};  ///< address within the module, for addr2line
};

/// @brief True for frames of graphstep itself, of the CUDA libraries and of the C and C++
/// runtimes, and of kernel-launch stubs: frames a user did not write.
[[nodiscard]] bool is_library_frame(frame const& f);
/// @brief The innermost frame the user wrote, if any.
[[nodiscard]] std::optional<std::size_t> first_user_frame(std::vector<frame> const& frames);

/// @brief The call into a CUDA library (cuBLAS, cuBLASLt, cuDNN, NCCL, cuFFT, cuRAND, cuSPARSE,
/// cuSOLVER) that made the call these frames (innermost first) belong to: that library's
/// outermost frame below the user's first one, as "cublasLtMatmul (libcublasLt.so.13)", or
/// "a call into libcudnn.so.9" where the library exports no name for it. "" when no such
/// library made the call.
[[nodiscard]] std::string library_call_around(std::vector<frame> const& frames);

/// @brief What broke a capture and what to do, for the capture's error: `call` (a CUDA API
/// function) returned `error` (a cudaError_t) inside `library_call` ("" when the user's code
/// made it). Without a library, `advice` (the fix for the error alone) follows the call's name.
[[nodiscard]] std::string explain_break(std::string_view call, std::string_view library_call,
                                        int error, std::string_view advice);

using symbolizer = std::function<frame(std::uintptr_t)>;

/// @brief The report: the call that broke the capture with its backtrace (the user's frame
/// marked), then each warning with the user's frame.
[[nodiscard]] std::string format_report(capture_diagnosis const& diagnosis,
                                        std::vector<api_call> const& calls,
                                        symbolizer const& symbolize, std::size_t max_frames = 12);

/// @brief A bounded, thread-safe record of the calls made while a capture runs: the first
/// `capacity` calls, then only notable ones up to `capacity` more; the rest are counted.
class capture_trace {
 public:
  explicit capture_trace(std::size_t capacity = 4096) : capacity_{capacity} {}

  void record(api_call call);
  /// @brief The kept calls, in the order recorded.
  [[nodiscard]] std::vector<api_call> calls() const;
  /// @brief Every call offered to `record`, kept or not.
  [[nodiscard]] std::size_t seen() const;

 private:
  mutable std::mutex mutex_;
  std::size_t capacity_;
  std::size_t seen_{};
  std::size_t notable_kept_{};
  std::vector<api_call> calls_;
};

}  // namespace graphstep::graphs::detail
