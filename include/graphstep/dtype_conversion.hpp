#pragma once

/// @file dtype_conversion.hpp
/// @brief bf16 bit patterns and fp32: the value of a pattern, and rounding to nearest even and
/// stochastically, in code that kernels and host references share.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstdint>
#include <cstring>
#include <graphstep/detail/host_device.hpp>

namespace graphstep {

namespace detail {
GRAPHSTEP_HOST_DEVICE inline std::uint32_t bits_of(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  std::uint32_t bits{};
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
#endif
}
GRAPHSTEP_HOST_DEVICE inline float float_of(std::uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float x{};
  std::memcpy(&x, &bits, sizeof x);
  return x;
#endif
}
GRAPHSTEP_HOST_DEVICE inline bool is_nan_bits(std::uint32_t bits) {
  return (bits & 0x7FFFFFFFU) > 0x7F800000U;
}
}  // namespace detail

/// @brief The bf16 value of a bf16 bit pattern: its 16 bits are the high half of an fp32.
GRAPHSTEP_HOST_DEVICE inline float bfloat16_to_float(std::uint16_t bits) {
  return detail::float_of(static_cast<std::uint32_t>(bits) << 16);
}

/// @brief x rounded to bf16, to nearest with ties to even (IEEE 754's default, and what
/// __float2bfloat16 does); a NaN stays a (quiet) NaN.
GRAPHSTEP_HOST_DEVICE inline std::uint16_t bfloat16_nearest_even(float x) {
  std::uint32_t const bits = detail::bits_of(x);
  if (detail::is_nan_bits(bits)) return static_cast<std::uint16_t>((bits >> 16) | 0x0040U);
  std::uint32_t const tie_to_even = 0x7FFFU + ((bits >> 16) & 1U);
  return static_cast<std::uint16_t>((bits + tie_to_even) >> 16);
}

/// @brief x rounded to one of the two bf16 values around it, up (in magnitude) with the
/// probability of its distance from the lower one: the low 16 bits of `random` are added to
/// the 16 bits that bf16 drops, and the carry decides. With uniform random bits the expected
/// result is x itself (unbiased). A bf16 value, an infinity and a NaN come back unchanged (a
/// NaN quiet); a value within 2^-16 ulp below bf16's largest finite may round to infinity.
GRAPHSTEP_HOST_DEVICE inline std::uint16_t bfloat16_stochastic(float x, std::uint32_t random) {
  std::uint32_t const bits = detail::bits_of(x);
  if (detail::is_nan_bits(bits)) return static_cast<std::uint16_t>((bits >> 16) | 0x0040U);
  return static_cast<std::uint16_t>((bits + (random & 0xFFFFU)) >> 16);
}

}  // namespace graphstep
