#pragma once

/// @file train/detail/rng_state.hpp
/// @brief The checkpoint form of a capture-safe generator's state: seed and offset as 16 bytes,
/// with the size checked on the way back. Plain C++.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <graphstep/error.hpp>
#include <string>
#include <vector>

namespace graphstep::train::detail {

/// @brief What a capture-safe generator keeps in device memory.
struct rng_state {
  std::uint64_t seed{};
  std::uint64_t offset{};  ///< Philox counters consumed so far
};

/// @brief Bytes of a saved state.
inline constexpr std::size_t rng_state_bytes = 2 * sizeof(std::uint64_t);

/// @brief The state as bytes, seed first (the layout of the device copy).
[[nodiscard]] inline std::vector<std::byte> to_bytes(rng_state const& state) {
  std::vector<std::byte> bytes(rng_state_bytes);
  std::memcpy(bytes.data(), &state.seed, sizeof state.seed);
  std::memcpy(bytes.data() + sizeof state.seed, &state.offset, sizeof state.offset);
  return bytes;
}

/// @brief The state saved by `to_bytes`.
/// @throws usage_error (a size other than `rng_state_bytes`)
[[nodiscard]] inline rng_state from_bytes(std::vector<std::byte> const& bytes) {
  GRAPHSTEP_EXPECTS(bytes.size() == rng_state_bytes,
                    "capture_safe_rng::restore: the saved state has " +
                        std::to_string(bytes.size()) + " bytes, not " +
                        std::to_string(rng_state_bytes) + ": restore what save() returned");
  rng_state state;
  std::memcpy(&state.seed, bytes.data(), sizeof state.seed);
  std::memcpy(&state.offset, bytes.data() + sizeof state.seed, sizeof state.offset);
  return state;
}

}  // namespace graphstep::train::detail
