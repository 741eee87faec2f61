#pragma once

/// @file graphs/capture_mode.hpp
/// @brief `capture_mode`: which calls from other code invalidate a capture in progress.
/// graphstep_core: plain C++, includes no CUDA header.

namespace graphstep::graphs {

/// @brief Which calls from other code invalidate a capture in progress (cudaStreamCaptureMode).
enum class capture_mode {
  global,       ///< unsafe calls from any thread invalidate it (strictest)
  this_thread,  ///< only unsafe calls from the capturing thread do (the default; NCCL needs it)
  relaxed,      ///< no call is checked; for code that knows what it does
};

}  // namespace graphstep::graphs
