#pragma once

/// @file train/random_fill.hpp
/// @brief How the capture-safe generator's fills turn Philox words into uniform, normal and
/// Bernoulli values, and the checks of their arguments. Host and device share the transforms,
/// so the host can recompute what a device fill drew (`reference::uniform_fill` and its
/// siblings in train/reference.hpp).
/// graphstep_core: plain C++, includes no CUDA header.
///
/// Every fill of n elements reserves `fill_counters(n)` = ceil(n / 4) Philox counters: the
/// block at position offset + base + t gives elements 4t .. 4t + 3, word j element 4t + j.
///
/// - **uniform(low, high)**: u = `to_unit_float(word)`, the top 24 bits of the word times 2^-24,
///   in [0, 1 − 2^-24]; value = fma(high − low, u, low), one rounding. A value that rounds up to
///   `high` is returned as `low` (as PyTorch's `uniform_` does), so every value lies in
///   [low, high). low == high is allowed and fills with `low` (PyTorch's `uniform_(a, a)`).
/// - **normal(mean, std)**: Box–Muller on the words in pairs (0, 1) and (2, 3):
///   u1 = `to_open_unit_float(first)` in (0, 1] (never 0, so the logarithm stays finite: |z| ≤
///   sqrt(−2 ln 2^-24) ≈ 5.77), u2 = `to_unit_float(second)` in [0, 1); r = sqrt(−2 ln u1),
///   θ = 2π·u2; element 4t + 2k is mean + std·r·cos θ, element 4t + 2k + 1 is mean + std·r·sin θ,
///   the last step an fma.
/// - **bernoulli(p)**: 1 when `to_unit_float(word)` < p, else 0: p = 0 gives only zeros, p = 1
///   only ones (u never reaches 1).
///
/// fp16 and bf16 output (`rounded_transform`): each value is the fp32 fill's, computed from the
/// same words, rounded to nearest even, as PyTorch computes these fills in fp32 and casts. A
/// uniform value that rounds to `high` (rounded) becomes `low` (rounded), PyTorch's rule for
/// the reduced types, so it stays below `high`; Bernoulli values are exactly 0 or 1; a normal
/// value beyond the type's range becomes an infinity, as PyTorch's cast gives.
///
/// Exactness: the uniform and Bernoulli transforms use only correctly rounded operations (a
/// conversion, a product by a power of two, a subtraction, an fma, a comparison), so host and
/// device give the same bits. The normal transform calls log, sqrt, cos and sin: sqrt is
/// correctly rounded on both, but CUDA's logf (1 ulp), sinf and cosf (2 ulp) differ from the
/// host's in the last bits. A GPU's normal draws are therefore the host reference's within a
/// few ulp of r·cos θ (the tests allow 16 ulp of |std·z| plus one ulp of the result); on the
/// simulated device, whose kernels run on the host, they are bitwise equal.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <graphstep/detail/host_device.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/train/philox.hpp>
#include <string>
#include <string_view>
#include <type_traits>

namespace graphstep::train {

/// @brief Counters a fill of n elements reserves: one Philox block per 4 elements.
[[nodiscard]] constexpr std::uint64_t fill_counters(std::size_t n) noexcept {
  return (static_cast<std::uint64_t>(n) + 3) / 4;
}

/// @brief A float in (0, 1] from the top 24 bits of 32 random bits: (bits / 2^8 + 1) · 2^-24.
GRAPHSTEP_HOST_DEVICE inline float to_open_unit_float(std::uint32_t bits) {
  return static_cast<float>((bits >> 8) + 1U) * (1.0F / 16777216.0F);
}

/// @brief A uniform value in [low, high) (`low` when low == high) from 32 random bits.
GRAPHSTEP_HOST_DEVICE inline float uniform_from_bits(std::uint32_t bits, float low, float high) {
  float const value = std::fma(high - low, to_unit_float(bits), low);
  return value < high ? value : low;
}

/// @brief Two independent standard normal values from two words (Box–Muller).
GRAPHSTEP_HOST_DEVICE inline void standard_normal_pair(std::uint32_t first, std::uint32_t second,
                                                       float& z0, float& z1) {
  constexpr float two_pi = 6.28318530717958647692F;
  float const radius = std::sqrt(-2.0F * std::log(to_open_unit_float(first)));
  float const angle = two_pi * to_unit_float(second);
  z0 = radius * std::cos(angle);
  z1 = radius * std::sin(angle);
}

/// @brief Uniform values in [low, high), one per word of a block.
struct uniform_transform {
  float low;
  float high;
  // NOLINTNEXTLINE(modernize-avoid-c-arrays): device code, where std::array is host-only
  GRAPHSTEP_HOST_DEVICE void operator()(philox_block const& bits, float (&out)[4]) const {
    for (int j = 0; j < 4; ++j) out[j] = uniform_from_bits(bits.word[j], low, high);
  }
};

/// @brief Normal values of mean `mean` and standard deviation `stddev`, two per word pair.
struct normal_transform {
  float mean;
  float stddev;
  // NOLINTNEXTLINE(modernize-avoid-c-arrays): device code, where std::array is host-only
  GRAPHSTEP_HOST_DEVICE void operator()(philox_block const& bits, float (&out)[4]) const {
    float z[4];  // NOLINT(modernize-avoid-c-arrays): device code
    standard_normal_pair(bits.word[0], bits.word[1], z[0], z[1]);
    standard_normal_pair(bits.word[2], bits.word[3], z[2], z[3]);
    for (int j = 0; j < 4; ++j) out[j] = std::fma(stddev, z[j], mean);
  }
};

/// @brief 1 with probability p, else 0, one per word of a block, as `T` (float or uint8).
template <typename T>
struct bernoulli_transform {
  float p;
  // NOLINTNEXTLINE(modernize-avoid-c-arrays): device code, where std::array is host-only
  GRAPHSTEP_HOST_DEVICE void operator()(philox_block const& bits, T (&out)[4]) const {
    for (int j = 0; j < 4; ++j) out[j] = to_unit_float(bits.word[j]) < p ? T{1} : T{0};
  }
};

/// @brief What a uniform fill to a 16-bit type stores for the fp32 fill's value `value` (of
/// `uniform_from_bits(bits, low, high)`): `value` rounded, or `low` rounded where that equals
/// `high` rounded. PyTorch's CUDA `uniform_kernel` (aten/src/ATen/native/cuda/
/// DistributionTemplates.h) casts to the reduced type first and then returns
/// `value == to ? from : value`, since a value below `to` in fp32 may round up to it; so every
/// value lies in [round(low), round(high)), or is round(low) when those are equal.
///
/// `Rounding` names the type: `Rounding::type` is stored, `Rounding::round(float)` rounds to
/// nearest even, `Rounding::widen(type)` gives its exact float (the kernels use CUDA's
/// conversions; kernels/train/rng.cu).
template <typename Rounding>
GRAPHSTEP_HOST_DEVICE typename Rounding::type rounded_uniform(float value, float low, float high) {
  auto const rounded = Rounding::round(value);
  // Compared as floats, as PyTorch compares: -0 rounded from below equals a `high` of +0.
  bool const reaches_high = Rounding::widen(rounded) == Rounding::widen(Rounding::round(high));
  return reaches_high ? Rounding::round(low) : rounded;
}

/// @brief The values of the fp32 transform `Transform`, rounded to `Rounding::type` to nearest
/// even; uniform values by `rounded_uniform`'s rule.
template <typename Rounding, typename Transform>
struct rounded_transform {
  Transform fp32;
  using type = typename Rounding::type;
  // NOLINTNEXTLINE(modernize-avoid-c-arrays): device code, where std::array is host-only
  GRAPHSTEP_HOST_DEVICE void operator()(philox_block const& bits, type (&out)[4]) const {
    float values[4];  // NOLINT(modernize-avoid-c-arrays): device code
    fp32(bits, values);
    for (int j = 0; j < 4; ++j) {
      if constexpr (std::is_same_v<Transform, uniform_transform>) {
        out[j] = rounded_uniform<Rounding>(values[j], fp32.low, fp32.high);
      } else {
        out[j] = Rounding::round(values[j]);
      }
    }
  }
};

namespace detail {

/// @brief Refuses a null `out`, a `type` that is no `dtype` value or not a floating type (a
/// `bernoulli` fill may also write a byte mask, `uint8`), and an `out` not aligned to an element
/// of `type`; `fill` names the fill in the message.
/// @throws usage_error
inline void check_fill_output(char const* fill, void const* out, dtype type) {
  std::string const which = std::string{"capture_safe_rng::"} + fill + ": out";
  ::graphstep::detail::expect_typed_buffer(which, out, type);
  bool const mask = type == dtype::uint8 && std::string_view{fill} == "bernoulli";
  if (!mask) ::graphstep::detail::expect_floating(which, type);
}

/// @brief Refuses bounds that are not finite, low > high, or a width high − low that overflows.
/// @throws usage_error
inline void check_uniform_arguments(float low, float high) {
  GRAPHSTEP_EXPECTS(std::isfinite(low) && std::isfinite(high),
                    "capture_safe_rng::uniform: low and high must be finite numbers");
  GRAPHSTEP_EXPECTS(low <= high,
                    "capture_safe_rng::uniform: low must not exceed high; pass the smaller "
                    "bound first");
  GRAPHSTEP_EXPECTS(std::isfinite(high - low),
                    "capture_safe_rng::uniform: high - low overflows a float; draw in a "
                    "narrower interval and scale the result");
}

/// @brief As above, and for fp16 and bf16 output bounds beyond the largest finite value of the
/// type, which PyTorch's `uniform_` refuses too ("from is out of bounds for Half"): values near
/// them would round to an infinity. The width may exceed that value: it is computed in fp32.
/// @throws usage_error
inline void check_uniform_arguments(float low, float high, dtype type) {
  check_uniform_arguments(low, high);
  if (type == dtype::float32) return;
  bool const half = type == dtype::float16;
  float const largest = half ? 65504.0F : 0x1.fep127F;  // (2 − 2^-10)·2^15, (2 − 2^-7)·2^127
  GRAPHSTEP_EXPECTS(-largest <= low && high <= largest,
                    std::string{"capture_safe_rng::uniform: low and high must lie within the "
                                "finite range of "} +
                        name(type) + " (magnitude at most " + (half ? "65504" : "3.3895e38") + ")");
}

/// @brief Refuses a mean that is not finite and a standard deviation that is negative or not
/// finite (0 is allowed: every value is then `mean`).
/// @throws usage_error
inline void check_normal_arguments(float mean, float stddev) {
  GRAPHSTEP_EXPECTS(std::isfinite(mean), "capture_safe_rng::normal: mean must be a finite number");
  GRAPHSTEP_EXPECTS(std::isfinite(stddev) && stddev >= 0.0F,
                    "capture_safe_rng::normal: std must be finite and >= 0");
}

/// @brief Refuses p outside [0, 1] (NaN included).
/// @throws usage_error
inline void check_bernoulli_arguments(float p) {
  GRAPHSTEP_EXPECTS(p >= 0.0F && p <= 1.0F, "capture_safe_rng::bernoulli: p must lie in [0, 1]");
}

}  // namespace detail
}  // namespace graphstep::train
