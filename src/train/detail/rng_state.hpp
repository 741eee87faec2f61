#pragma once

/// @file train/detail/rng_state.hpp
/// @brief What a capture-safe generator keeps in device memory, and saves to a checkpoint as
/// one value: the seed, then the offset. Plain C++.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstdint>

namespace graphstep::train::detail {

/// @brief The device state of a `capture_safe_rng`, in its layout: no padding, so its bytes
/// are what a checkpoint holds.
struct rng_state {
  std::uint64_t seed{};
  std::uint64_t offset{};  ///< Philox counters consumed so far
};
static_assert(sizeof(rng_state) == 2 * sizeof(std::uint64_t), "saved as its bytes");

}  // namespace graphstep::train::detail
