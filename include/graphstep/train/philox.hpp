#pragma once

/// @file train/philox.hpp
/// @brief Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC11),
/// the counter-based generator behind cuRAND's and PyTorch's GPU randomness: 128-bit counter
/// and 64-bit key in, four 32-bit words out. Host and device share this code. Plain C++.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstdint>
#include <graphstep/detail/host_device.hpp>

namespace graphstep::train {

struct philox_block {
  // A C array, not std::array: device code uses it, where std::array's members are host
  // functions (without --expt-relaxed-constexpr).
  std::uint32_t word[4];  // NOLINT(modernize-avoid-c-arrays)
};

namespace detail {
GRAPHSTEP_HOST_DEVICE inline void mulhilo(std::uint32_t a, std::uint32_t b, std::uint32_t& hi,
                                          std::uint32_t& lo) {
  std::uint64_t const product = static_cast<std::uint64_t>(a) * b;
  hi = static_cast<std::uint32_t>(product >> 32);
  lo = static_cast<std::uint32_t>(product);
}
}  // namespace detail

/// @brief Ten rounds of Philox-4x32 on `counter` with `key`.
GRAPHSTEP_HOST_DEVICE inline philox_block philox4x32_10(philox_block counter, std::uint32_t key0,
                                                        std::uint32_t key1) {
  constexpr std::uint32_t m0 = 0xD2511F53U;
  constexpr std::uint32_t m1 = 0xCD9E8D57U;
  constexpr std::uint32_t w0 = 0x9E3779B9U;
  constexpr std::uint32_t w1 = 0xBB67AE85U;
  philox_block c = counter;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key0 += w0;
      key1 += w1;
    }
    std::uint32_t hi0 = 0;
    std::uint32_t lo0 = 0;
    std::uint32_t hi1 = 0;
    std::uint32_t lo1 = 0;
    detail::mulhilo(m0, c.word[0], hi0, lo0);
    detail::mulhilo(m1, c.word[2], hi1, lo1);
    c = philox_block{{hi1 ^ c.word[1] ^ key0, lo1, hi0 ^ c.word[3] ^ key1, lo0}};
  }
  return c;
}

/// @brief The block for a 64-bit seed and a 64-bit position in its stream: the seed is the
/// key, the position the low half of the counter.
GRAPHSTEP_HOST_DEVICE inline philox_block philox_at(std::uint64_t seed, std::uint64_t position) {
  philox_block counter{
      {static_cast<std::uint32_t>(position), static_cast<std::uint32_t>(position >> 32), 0U, 0U}};
  return philox4x32_10(counter, static_cast<std::uint32_t>(seed),
                       static_cast<std::uint32_t>(seed >> 32));
}

/// @brief A float uniform in [0, 1) from 32 random bits (24 bits of mantissa).
GRAPHSTEP_HOST_DEVICE inline float to_unit_float(std::uint32_t bits) {
  return static_cast<float>(bits >> 8) * (1.0F / 16777216.0F);
}

}  // namespace graphstep::train
