#pragma once

/// @file train/mixed_precision.hpp
/// @brief The element rules of mixed-precision training that kernels and host references share:
/// bf16 rounding (to nearest even and stochastic), the random bits of stochastic rounding, and
/// the global-norm clip factor.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstdint>
#include <cstring>
#include <graphstep/train/detail/host_device.hpp>
#include <graphstep/train/philox.hpp>

namespace graphstep::train {

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

/// @brief The random word that stochastically rounds element `element` at step `step`.
///
/// Convention: `element` numbers the elements of all the optimizer's tensors in the order they
/// were given (tensor 0's first, then tensor 1's, ...); `step` is the optimizer's device step
/// count (1 for the first step). Philox-4x32-10 runs on the counter {element / 4 (low, high
/// word), step (low, high word)} with the 64-bit seed as key, and element % 4 picks the word.
/// So every step rounds with fresh bits, and one seed gives the same rounding on every run,
/// eager or replayed.
GRAPHSTEP_HOST_DEVICE inline std::uint32_t stochastic_rounding_bits(std::uint64_t seed,
                                                                    std::uint64_t step,
                                                                    std::uint64_t element) {
  std::uint64_t const quad = element / 4;
  philox_block const counter{
      {static_cast<std::uint32_t>(quad), static_cast<std::uint32_t>(quad >> 32),
       static_cast<std::uint32_t>(step), static_cast<std::uint32_t>(step >> 32)}};
  philox_block const block = philox4x32_10(counter, static_cast<std::uint32_t>(seed),
                                           static_cast<std::uint32_t>(seed >> 32));
  return block.word[element % 4];
}

/// @brief What torch.nn.utils.clip_grad_norm_ multiplies the gradients by: min(1, max_norm /
/// (norm + epsilon)), and 1 when max_norm is 0 (no clipping). A non-finite norm gives NaN or
/// 0; the optimizer skips such a step instead of applying it.
GRAPHSTEP_HOST_DEVICE inline float gradient_clip_factor(float norm, float max_norm, float epsilon) {
  if (max_norm == 0.0F) return 1.0F;
  float const factor = max_norm / (norm + epsilon);
  return factor < 1.0F ? factor : (factor >= 1.0F ? 1.0F : factor);  // NaN passes through
}

}  // namespace graphstep::train
