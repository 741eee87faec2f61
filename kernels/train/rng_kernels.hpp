#pragma once

/// @file detail/rng_kernels.hpp
/// @brief Launch wrappers of the capture-safe generator's kernels (kernels/rng.cu) that the
/// host code calls directly. Host C++: includable from any .cpp file.

#include <cstdint>
#include <graphstep/cuda/stream_view.hpp>

namespace graphstep::train::detail {

/// @brief Enqueues the kernel that adds `counters` to the device offset `state[1]`; captured,
/// it advances the offset on every replay.
/// @throws cuda_error (launch failure)
void launch_advance_offset(std::uint64_t* state, std::uint64_t counters, cuda::stream_view stream);

}  // namespace graphstep::train::detail
