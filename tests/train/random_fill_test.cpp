// The capture-safe generator's fill transforms and their host references: the distributions'
// moments over many draws, the ends of each interval, the layout of words in elements, the
// rounding of the 16-bit fills (run here with the library's bf16 conversions), and the
// arguments refused with a usage_error.
//
// Tolerances are five standard errors of the statistic over the number of draws, so a correct
// transform fails by chance with probability well under 1e-5 per check.

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/train/mixed_precision.hpp>
#include <graphstep/train/philox.hpp>
#include <graphstep/train/random_fill.hpp>
#include <graphstep/train/reference.hpp>
#include <limits>
#include <string>
#include <vector>

#include "common/error_message.hpp"

namespace gr = graphstep::train;
using graphstep::testing::message_of;

namespace {

constexpr std::size_t draws = 400000;

struct moments {
  double mean;
  double variance;
  double skewness;
  double kurtosis;  // standardized fourth moment (3 for a normal)
};

moments moments_of(std::vector<float> const& values) {
  double sum = 0.0;
  for (float v : values) sum += v;
  double const n = static_cast<double>(values.size());
  double const mean = sum / n;
  double m2 = 0.0, m3 = 0.0, m4 = 0.0;
  for (float v : values) {
    double const d = v - mean;
    m2 += d * d;
    m3 += d * d * d;
    m4 += d * d * d * d;
  }
  m2 /= n;
  m3 /= n;
  m4 /= n;
  return {mean, m2, m3 / std::pow(m2, 1.5), m4 / (m2 * m2)};
}

// bf16 rounding on the host, to run the 16-bit transforms here (the kernels use CUDA's).
struct bfloat16_nearest {
  using type = std::uint16_t;
  static std::uint16_t round(float x) { return graphstep::bfloat16_nearest_even(x); }
  static float widen(std::uint16_t bits) { return graphstep::bfloat16_to_float(bits); }
};

// The fp32 transform's values and the bf16 transform's, for the block at `position`.
// NOLINTBEGIN(modernize-avoid-c-arrays): the transforms take device-style arrays
template <typename Transform>
void both(Transform const& fp32, std::uint64_t position, float (&wide)[4],
          std::uint16_t (&narrow)[4]) {
  auto const bits = gr::philox_at(3, position);
  fp32(bits, wide);
  gr::rounded_transform<bfloat16_nearest, Transform>{fp32}(bits, narrow);
}
// NOLINTEND(modernize-avoid-c-arrays)

float constexpr infinity = std::numeric_limits<float>::infinity();
float constexpr not_a_number = std::numeric_limits<float>::quiet_NaN();
float constexpr largest = std::numeric_limits<float>::max();

}  // namespace

TEST(random_fill, fills_reserve_one_counter_per_four_elements) {
  EXPECT_EQ(gr::fill_counters(0), 0U);
  EXPECT_EQ(gr::fill_counters(1), 1U);
  EXPECT_EQ(gr::fill_counters(4), 1U);
  EXPECT_EQ(gr::fill_counters(5), 2U);
}

TEST(random_fill, open_unit_floats_exclude_zero_and_reach_one) {
  EXPECT_EQ(gr::to_open_unit_float(0), 1.0F / 16777216.0F);
  EXPECT_EQ(gr::to_open_unit_float(0xffffffffU), 1.0F);
  EXPECT_EQ(gr::to_open_unit_float(0xffU), 1.0F / 16777216.0F);  // the low 8 bits are dropped
}

TEST(random_fill, uniform_moments_and_range) {
  float const low = -2.0F;
  float const high = 3.0F;
  auto const values = gr::reference::uniform_fill(11, 0, draws, low, high);
  float lowest = high;
  float highest = low;
  for (float v : values) {
    ASSERT_GE(v, low);
    ASSERT_LT(v, high);
    lowest = std::min(lowest, v);
    highest = std::max(highest, v);
  }
  double const width = high - low;
  auto const m = moments_of(values);
  // Mean: standard error sqrt(width²/12/n) ≈ 0.0023. Variance width²/12: standard error
  // sqrt((width⁴/80 − width⁴/144)/n) ≈ 0.0029.
  EXPECT_NEAR(m.mean, (low + high) / 2.0, 0.012);
  EXPECT_NEAR(m.variance, width * width / 12.0, 0.015);
  EXPECT_NEAR(m.skewness, 0.0, 0.02);
  // The extremes of 400000 draws lie within ~width · 1e-4 of the ends.
  EXPECT_LT(lowest, low + 1e-3F);
  EXPECT_GT(highest, high - 1e-3F);
}

TEST(random_fill, uniform_ends_are_low_included_and_high_excluded) {
  EXPECT_EQ(gr::uniform_from_bits(0, -1.0F, 1.0F), -1.0F);
  EXPECT_LT(gr::uniform_from_bits(0xffffffffU, -1.0F, 1.0F), 1.0F);
  // In a one-ulp interval the largest word rounds up to high, and is returned as low.
  float const low = 1.0F;
  float const high = std::nextafter(1.0F, 2.0F);
  EXPECT_EQ(gr::uniform_from_bits(0xffffffffU, low, high), low);
  for (std::uint32_t bits : {0U, 0x80000000U, 0xfffffeffU, 0xffffffffU}) {
    float const v = gr::uniform_from_bits(bits, low, high);
    EXPECT_TRUE(v >= low && v < high) << bits;
  }
  // low == high: every value is low (PyTorch's uniform_(a, a)).
  for (float v : gr::reference::uniform_fill(5, 0, 64, 2.5F, 2.5F)) ASSERT_EQ(v, 2.5F);
}

TEST(random_fill, element_4t_plus_j_takes_word_j_of_the_block_at_position_plus_t) {
  auto const shifted = gr::reference::uniform_fill(3, 9, 12, 0.0F, 1.0F);
  auto const later = gr::reference::uniform_fill(3, 10, 8, 0.0F, 1.0F);
  for (std::size_t i = 0; i < later.size(); ++i) EXPECT_EQ(later[i], shifted[i + 4]) << i;
  auto const block = gr::philox_at(3, 10 + 1);
  EXPECT_EQ(later[6], gr::to_unit_float(block.word[2]));  // [0, 1): u itself
  // A tail shorter than a block takes the block's first words.
  auto const odd = gr::reference::uniform_fill(3, 10, 7, 0.0F, 1.0F);
  for (std::size_t i = 0; i < odd.size(); ++i) EXPECT_EQ(odd[i], later[i]) << i;
}

TEST(random_fill, normal_moments) {
  float const mean = 1.5F;
  float const stddev = 2.0F;
  auto const values = gr::reference::normal_fill(21, 7, draws, mean, stddev);
  std::size_t within_one_sigma = 0;
  for (float v : values) {
    ASSERT_TRUE(std::isfinite(v));
    // |z| ≤ sqrt(−2 ln 2^-24) ≈ 5.768: u1 is never below 2^-24.
    ASSERT_LE(std::abs(v - mean), stddev * 5.7683F);
    within_one_sigma += std::abs(v - mean) < stddev;
  }
  auto const m = moments_of(values);
  double const n = static_cast<double>(draws);
  // Standard errors: mean σ/√n ≈ 0.0032; variance σ²·√(2/n) ≈ 0.0089; skewness √(6/n) ≈ 0.0039;
  // kurtosis √(24/n) ≈ 0.0077; P(|z| < 1) = 0.6827, √(p(1 − p)/n) ≈ 0.0007.
  EXPECT_NEAR(m.mean, mean, 5 * stddev / std::sqrt(n));
  EXPECT_NEAR(m.variance, stddev * stddev, 0.045);
  EXPECT_NEAR(m.skewness, 0.0, 0.02);
  EXPECT_NEAR(m.kurtosis, 3.0, 0.04);
  EXPECT_NEAR(static_cast<double>(within_one_sigma) / n, 0.682689, 0.0037);
}

TEST(random_fill, normal_pairs_are_uncorrelated) {
  // The cos and sin halves of one Box–Muller pair share a radius: check they are uncorrelated.
  auto const z = gr::reference::normal_fill(5, 0, draws, 0.0F, 1.0F);
  double sum_xy = 0.0, sum_xx = 0.0, sum_yy = 0.0;
  for (std::size_t i = 0; i + 1 < z.size(); i += 2) {
    sum_xy += double{z[i]} * z[i + 1];
    sum_xx += double{z[i]} * z[i];
    sum_yy += double{z[i + 1]} * z[i + 1];
  }
  double const correlation = sum_xy / std::sqrt(sum_xx * sum_yy);
  EXPECT_NEAR(correlation, 0.0, 5.0 / std::sqrt(draws / 2.0));
}

TEST(random_fill, normal_radius_ends) {
  float z0 = 1.0F, z1 = 1.0F;
  // u1 = 1: radius 0.
  gr::standard_normal_pair(0xffffffffU, 0x12345678U, z0, z1);
  EXPECT_EQ(z0, 0.0F);
  EXPECT_EQ(z1, 0.0F);
  // u1 = 2^-24, the smallest: radius² = −2 ln 2^-24 = 48 ln 2, finite.
  gr::standard_normal_pair(0, 0x12345678U, z0, z1);
  double const radius_squared = double{z0} * z0 + double{z1} * z1;
  EXPECT_NEAR(radius_squared, 48.0 * std::log(2.0), 48.0 * std::log(2.0) * 1e-6);
  // std = 0: every value is the mean.
  for (float v : gr::reference::normal_fill(9, 0, 64, -4.25F, 0.0F)) ASSERT_EQ(v, -4.25F);
}

TEST(random_fill, bernoulli_rate_and_ends) {
  for (float const p : {0.3F, 0.5F, 0.9F}) {
    auto const values = gr::reference::bernoulli_fill(13, 0, draws, p);
    std::size_t ones = 0;
    for (auto v : values) {
      ASSERT_TRUE(v == 0 || v == 1);
      ones += v;
    }
    double const sigma = std::sqrt(p * (1.0 - p) / draws);
    EXPECT_NEAR(static_cast<double>(ones) / draws, p, 5 * sigma) << "p = " << p;
  }
  for (auto v : gr::reference::bernoulli_fill(13, 0, draws, 0.0F)) ASSERT_EQ(v, 0);
  for (auto v : gr::reference::bernoulli_fill(13, 0, draws, 1.0F)) ASSERT_EQ(v, 1);
  gr::bernoulli_transform<float> const as_float{1.0F};
  float out[4] = {};
  as_float(gr::philox_at(1, 0), out);
  for (float v : out) EXPECT_EQ(v, 1.0F);
}

TEST(random_fill, bad_uniform_bounds_are_usage_errors) {
  struct bounds {
    float low, high;
    char const* says;
  };
  for (auto const& b :
       {bounds{not_a_number, 1.0F, "must be finite"}, bounds{0.0F, infinity, "must be finite"},
        bounds{-infinity, 0.0F, "must be finite"},
        bounds{2.0F, 1.0F, "pass the smaller bound first"},
        bounds{-largest, largest, "overflows a float"}}) {
    std::string const what =
        message_of([&] { static_cast<void>(gr::reference::uniform_fill(1, 0, 4, b.low, b.high)); });
    EXPECT_NE(what.find("capture_safe_rng::uniform"), std::string::npos) << what;
    EXPECT_NE(what.find(b.says), std::string::npos) << b.low << ", " << b.high << ": " << what;
  }
}

TEST(random_fill, bad_normal_arguments_are_usage_errors) {
  struct arguments {
    float mean, stddev;
    char const* says;
  };
  for (auto const& a : {arguments{not_a_number, 1.0F, "mean must be a finite number"},
                        arguments{infinity, 1.0F, "mean must be a finite number"},
                        arguments{0.0F, -1.0F, "std must be finite and >= 0"},
                        arguments{0.0F, not_a_number, "std must be finite and >= 0"},
                        arguments{0.0F, infinity, "std must be finite and >= 0"}}) {
    std::string const what = message_of(
        [&] { static_cast<void>(gr::reference::normal_fill(1, 0, 4, a.mean, a.stddev)); });
    EXPECT_NE(what.find("capture_safe_rng::normal: "), std::string::npos) << what;
    EXPECT_NE(what.find(a.says), std::string::npos) << a.mean << ", " << a.stddev << ": " << what;
  }
}

TEST(random_fill, bad_bernoulli_probabilities_are_usage_errors) {
  for (float const p : {-0.1F, 1.1F, not_a_number, infinity}) {
    std::string const what =
        message_of([&] { static_cast<void>(gr::reference::bernoulli_fill(1, 0, 4, p)); });
    EXPECT_NE(what.find("capture_safe_rng::bernoulli: p must lie in [0, 1]"), std::string::npos)
        << "p = " << p << ": " << what;
  }
}

TEST(random_fill, rounded_fills_are_the_fp32_values_rounded_to_nearest_even) {
  // 0x3F80 is bf16's 1.0. [0, 1) in bf16: fp32 values from 1 − 2^-9 round up to 1 (high).
  std::size_t reached_high = 0;
  for (std::uint64_t position = 0; position < 4096; ++position) {
    float wide[4];            // NOLINT(modernize-avoid-c-arrays): the transforms' signature
    std::uint16_t narrow[4];  // NOLINT(modernize-avoid-c-arrays)
    both(gr::normal_transform{0.5F, 3.0F}, position, wide, narrow);
    for (int j = 0; j < 4; ++j) ASSERT_EQ(narrow[j], graphstep::bfloat16_nearest_even(wide[j]));
    both(gr::bernoulli_transform<float>{0.3F}, position, wide, narrow);
    for (int j = 0; j < 4; ++j) ASSERT_EQ(narrow[j], wide[j] == 1.0F ? 0x3F80 : 0x0000);
    both(gr::uniform_transform{0.0F, 1.0F}, position, wide, narrow);
    for (int j = 0; j < 4; ++j) {
      ASSERT_LT(graphstep::bfloat16_to_float(narrow[j]), 1.0F);
      if (graphstep::bfloat16_nearest_even(wide[j]) == 0x3F80) {
        ++reached_high;
        ASSERT_EQ(narrow[j], 0x0000);  // low
      } else {
        ASSERT_EQ(narrow[j], graphstep::bfloat16_nearest_even(wide[j]));
      }
    }
  }
  EXPECT_GT(reached_high, 0U);  // about 16384 / 512 = 32
}

TEST(random_fill, a_rounded_uniform_value_that_reaches_high_is_low) {
  float const ulp = 0x1p-7F;  // of bf16 at 1
  auto const rounded = [](float value, float low, float high) {
    return gr::rounded_uniform<bfloat16_nearest>(value, low, high);
  };
  // Below the midpoint: 1; at it: a tie, to even (1); above it: high, given as low.
  EXPECT_EQ(rounded(1.0F + 0x1p-9F, 1.0F, 1.0F + ulp), 0x3F80);
  EXPECT_EQ(rounded(1.0F + ulp / 2, 1.0F, 1.0F + ulp), 0x3F80);
  EXPECT_EQ(rounded(1.0F + ulp / 2 + 0x1p-20F, 0.5F, 1.0F + ulp), 0x3F00);  // 0.5
  // Bounds that are not bf16 values compare rounded: 1.003 rounds to 1 (high), given as 0.5.
  EXPECT_EQ(rounded(1.0F, 0.5F, 1.003F), 0x3F00);
  // A tiny negative value rounds to -0, which equals a high of +0 as PyTorch compares.
  EXPECT_EQ(rounded(-0x1p-140F, -1.0F, 0.0F), 0xBF80);  // -1
  // low == high: low.
  EXPECT_EQ(rounded(2.5F, 2.5F, 2.5F), graphstep::bfloat16_nearest_even(2.5F));
}

TEST(random_fill, bad_fill_outputs_are_usage_errors) {
  alignas(4) std::array<std::uint16_t, 4> const storage{};
  std::uint16_t const* const buffer = storage.data();
  for (auto const type :
       {graphstep::dtype::float32, graphstep::dtype::float16, graphstep::dtype::bfloat16}) {
    EXPECT_NO_THROW(gr::detail::check_fill_output("uniform", buffer, type));
  }
  EXPECT_NO_THROW(gr::detail::check_fill_output("bernoulli", buffer, graphstep::dtype::uint8));
  EXPECT_NE(message_of([&] {
              gr::detail::check_fill_output("uniform", buffer, graphstep::dtype::uint8);
            }).find("capture_safe_rng::uniform: out is uint8; it takes float32"),
            std::string::npos);
  EXPECT_NE(message_of([] {
              gr::detail::check_fill_output("normal", nullptr, graphstep::dtype::float16);
            }).find("capture_safe_rng::normal: out is a null pointer"),
            std::string::npos);
  std::string const what = message_of([&] {
    gr::detail::check_fill_output("bernoulli", buffer, static_cast<graphstep::dtype>(9));
  });
  EXPECT_NE(what.find("capture_safe_rng::bernoulli: out has an unknown dtype (9); use float32, "
                      "float16, bfloat16, int32 or uint8"),
            std::string::npos)
      << what;
  EXPECT_NE(
      message_of([&] {
        gr::detail::check_fill_output("uniform", buffer + 1, graphstep::dtype::float32);
      }).find("capture_safe_rng::uniform: out is not aligned to the 4 bytes of its dtype float32"),
      std::string::npos);
  auto const* odd = reinterpret_cast<unsigned char const*>(buffer) + 1;
  EXPECT_NE(message_of([&] {
              gr::detail::check_fill_output("uniform", odd, graphstep::dtype::float16);
            }).find("out is not aligned to the 2 bytes of its dtype float16"),
            std::string::npos);
}

TEST(random_fill, uniform_bounds_must_be_finite_in_the_output_type) {
  using graphstep::dtype;
  float const largest_bfloat16 = graphstep::bfloat16_to_float(0x7F7F);
  // The largest finite values are accepted, and a width beyond them (computed in fp32).
  EXPECT_NO_THROW(gr::detail::check_uniform_arguments(-65504.0F, 65504.0F, dtype::float16));
  EXPECT_NO_THROW(gr::detail::check_uniform_arguments(0.0F, largest_bfloat16, dtype::bfloat16));
  EXPECT_NO_THROW(gr::detail::check_uniform_arguments(0.0F, largest, dtype::float32));
  struct bounds {
    float low, high;
    dtype type;
    char const* says;
  };
  for (auto const& b : {bounds{0.0F, 65505.0F, dtype::float16, "finite range of float16"},
                        bounds{-70000.0F, 0.0F, dtype::float16, "finite range of float16"},
                        bounds{0.0F, largest, dtype::bfloat16, "finite range of bfloat16"},
                        bounds{-largest, 0.0F, dtype::bfloat16, "finite range of bfloat16"},
                        bounds{not_a_number, 1.0F, dtype::float16, "must be finite"},
                        bounds{1.0F, 0.0F, dtype::bfloat16, "pass the smaller bound first"}}) {
    std::string const what =
        message_of([&] { gr::detail::check_uniform_arguments(b.low, b.high, b.type); });
    EXPECT_NE(what.find("capture_safe_rng::uniform: "), std::string::npos) << what;
    EXPECT_NE(what.find(b.says), std::string::npos) << b.low << ", " << b.high << ": " << what;
  }
}
