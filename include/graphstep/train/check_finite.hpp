#pragma once

/// @file train/check_finite.hpp
/// @brief A device-side check that a tensor holds only finite values, for steps that skip the
/// optimizer on overflow without a host synchronization (with graphs::capture_if).

#include <cstddef>
#include <graphstep/cuda/stream_view.hpp>

namespace graphstep::train {

/// @brief Sets *all_finite to 1 when every one of the n floats is finite, else 0 (device
/// memory; no host synchronization). Capturable.
/// @throws usage_error (null pointers), cuda_error
void check_finite(float const* data, std::size_t n, unsigned int* all_finite,
                  cuda::stream_view stream);

}  // namespace graphstep::train
