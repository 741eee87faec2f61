#pragma once

/// @file detail/rng_kernels.hpp
/// @brief Launch wrappers of the capture-safe generator's kernels (kernels/rng.cu) that the
/// host code calls directly. Host C++: includable from any .cpp file.

#include <graphstep/stream_view.hpp>

#include <cstdint>

namespace graphstep::detail {

/// @brief Enqueues the kernel that adds `counters` to the device offset `state[1]`; captured,
/// it advances the offset on every replay.
/// @throws cuda_error (launch failure)
void launch_advance_offset(std::uint64_t* state, std::uint64_t counters, stream_view stream);

}  // namespace graphstep::detail
