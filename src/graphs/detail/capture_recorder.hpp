#pragma once

// The CUDA shell of the capture diagnostics: CUPTI's callback API reports every runtime and
// driver API call of the process while a diagnosed capture runs; each is recorded with its
// stream, result and (for notable calls) a host backtrace. CUPTI is loaded with dlopen on
// first use, so that graphstep neither links it nor needs it unless diagnostics are asked for.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <graphstep/graphs/capture_mode.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graphs/detail/capture_trace.hpp"

namespace graphstep::graphs::detail {

struct recorder_slot;

class capture_recorder {
 public:
  /// Starts recording for the capture that began on `stream` on this thread.
  /// @throws error when CUPTI cannot be loaded or subscribed, saying why and what to do
  capture_recorder(cudaStream_t stream, graphs::capture_mode mode, std::string name);
  ~capture_recorder();
  capture_recorder(capture_recorder const&) = delete;
  capture_recorder& operator=(capture_recorder const&) = delete;

  /// Stops recording (before the capture ends, so that ending it is not recorded).
  void stop() noexcept;
  /// Stops recording, finds where the host side of each copy lives, and diagnoses the calls
  /// for a capture that ended with `outcome` (a cudaError_t).
  [[nodiscard]] capture_diagnosis diagnose(int outcome);
  /// The first runtime call recorded so far that was issued to one of `streams` (the capturing
  /// stream and the side streams forked into it) and returned an error, if any. CUDA leaves a
  /// capture valid after some such failures (cudaMemcpyBatchAsync, refused during capture), and
  /// the graph then lacks the call's work.
  [[nodiscard]] std::optional<api_call> first_failed_call_on(
      std::vector<std::uintptr_t> const& streams) const;
  /// The `index`th call of the last diagnosis (the index a `finding` holds).
  [[nodiscard]] api_call const& call(std::size_t index) const;
  /// The report of the last diagnosis, with names looked up.
  [[nodiscard]] std::string report(capture_diagnosis const& diagnosis) const;

 private:
  std::shared_ptr<recorder_slot> slot_;
  capture_context context_;
  std::vector<api_call> calls_;
};

/// Why CUPTI cannot be loaded, or "" when it can.
[[nodiscard]] std::string capture_diagnostics_unavailable_reason();

/// True when GRAPHSTEP_CAPTURE_DIAGNOSTICS is set to something other than "" or "0".
[[nodiscard]] bool diagnostics_requested_by_environment();

}  // namespace graphstep::graphs::detail
