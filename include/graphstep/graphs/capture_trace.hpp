#pragma once

/// @file graphs/capture_trace.hpp
/// @brief What capture diagnostics found (`capture_scope::diagnosis()`): the call that broke a
/// capture and the calls worth a warning, each with what happened and what to do.
///
/// The decisions behind it (what a CUDA API call means to a capture in progress, which recorded
/// call broke it, which frame of a backtrace is the user's, the report) are internal
/// (graphs/detail/capture_trace.hpp); the recording itself (CUPTI callbacks, backtraces,
/// host-memory queries) lives in the CUDA shell; see `capture_options::diagnose`.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace graphstep::graphs {

/// @brief What the diagnosis found about one call.
enum class finding_kind : unsigned char {
  broke_capture,  ///< this call made the capture fail
  legacy_stream,  ///< it issued work to the legacy default stream while the capture ran
  pageable_copy,  ///< it copied from or to pageable host memory inside the capture
};

struct finding {
  finding_kind kind{finding_kind::broke_capture};
  std::size_t call{};       ///< index into the recorded calls
  std::string explanation;  ///< what happened and what to do about it
  /// The library call that made this call ("cublasLtMatmul (libcublasLt.so.13)"), "" when the
  /// user's code made it directly.
  std::string library_call;
};

/// @brief The call that broke a capture, and the warnings about the others.
struct capture_diagnosis {
  bool capture_failed{false};
  std::optional<finding> cause;
  std::vector<finding> warnings;
  std::size_t calls_seen{};  ///< calls recorded, including those not kept
  std::size_t threads{};     ///< threads that made them
};

}  // namespace graphstep::graphs
