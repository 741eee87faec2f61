#pragma once

/// @file cuda/timed_event.hpp
/// @brief `timed_event`: a CUDA event that records time, for measuring GPU work.

#include <graphstep/cuda/event.hpp>

namespace graphstep::cuda {

/// @brief An owning CUDA event with timing enabled. Move-only.
class timed_event : public event {
 public:
  /// @throws no_device_error, cuda_error
  timed_event();

  /// @brief Milliseconds of GPU time between two completed records.
  /// @throws cuda_error (cudaErrorNotReady when a record has not completed yet)
  [[nodiscard]] static float elapsed_ms(timed_event const& start, timed_event const& end);
};

}  // namespace graphstep::cuda
