#pragma once

// A blocking stream forked into a capture for as long as it runs. While a blocking stream of a
// device is capturing, any use of that device's legacy default stream fails with
// cudaErrorStreamCaptureImplicit and invalidates the capture (CUDA Programming Guide, "Prohibited
// and Unhandled Operations": "When any stream in the same context is being captured, and it was
// not created with cudaStreamNonBlocking, any attempted use of the legacy stream is invalid").
// So work a capture of a non-blocking stream would miss — a cudaMemset or cudaMemcpy without a
// stream, a kernel launched without one, which CUDA would run once, at once — ends the capture
// with an error instead of leaving replays without it.

#include <cuda_runtime_api.h>

namespace graphstep::graphs::detail {

class legacy_stream_guard {
 public:
  // Takes a blocking stream of `device` (made once, then reused by later captures). Call before
  // the capture begins: creating a stream beside a capture is not needed then.
  explicit legacy_stream_guard(int device);
  // Gives the stream back for another capture.
  ~legacy_stream_guard();
  legacy_stream_guard(legacy_stream_guard const&) = delete;
  legacy_stream_guard& operator=(legacy_stream_guard const&) = delete;
  legacy_stream_guard(legacy_stream_guard&&) = delete;
  legacy_stream_guard& operator=(legacy_stream_guard&&) = delete;

  // Brings the stream into the capture of `origin` (an event recorded there, waited on here).
  // @throws cuda_error
  void enter(cudaStream_t origin);
  // Joins it back into `origin`, as the end of a capture needs every forked stream joined. A
  // failure (the capture was invalidated) is left for the end of the capture to report.
  void leave(cudaStream_t origin) noexcept;

 private:
  int device_;
  cudaStream_t stream_{};
  cudaEvent_t event_{};
};

}  // namespace graphstep::graphs::detail
