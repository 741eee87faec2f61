#pragma once

// Switches the calling thread to cudaStreamCaptureModeRelaxed for its lifetime, then back.
//
// Under Global mode a thread may not make "potentially unsafe" calls (allocations,
// synchronizations) while another thread captures in Global mode, nor while it captures itself;
// such a call fails and breaks that capture (cudaThreadExchangeStreamCaptureMode,
// cuda_runtime_api.h). Under Relaxed nothing is prohibited. graphstep's own waits and
// allocations touch no capturing stream, so they run Relaxed and never break a user's capture.

#include <cuda_runtime_api.h>

namespace graphstep::cuda::detail {

class relaxed_capture_mode {
 public:
  relaxed_capture_mode() noexcept {
    static_cast<void>(cudaThreadExchangeStreamCaptureMode(&mode_));
  }
  relaxed_capture_mode(relaxed_capture_mode const&) = delete;
  relaxed_capture_mode& operator=(relaxed_capture_mode const&) = delete;
  relaxed_capture_mode(relaxed_capture_mode&&) = delete;
  relaxed_capture_mode& operator=(relaxed_capture_mode&&) = delete;
  ~relaxed_capture_mode() { static_cast<void>(cudaThreadExchangeStreamCaptureMode(&mode_)); }

 private:
  cudaStreamCaptureMode mode_{cudaStreamCaptureModeRelaxed};
};

}  // namespace graphstep::cuda::detail
