// The element rules of mixed-precision training (train/mixed_precision.hpp), the options and
// parameter groups of the mixed-precision AdamW (train/optimizer_options.hpp), and its fp32
// host reference (train/reference.hpp) against the fp64 AdamW reference.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <graphstep/error.hpp>
#include <graphstep/train/mixed_precision.hpp>
#include <graphstep/train/optimizer_options.hpp>
#include <graphstep/train/reference.hpp>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/error_message.hpp"

namespace gt = graphstep::train;
using graphstep::testing::message_of;

namespace {

float from_bits(std::uint32_t bits) {
  float x{};
  std::memcpy(&x, &bits, sizeof x);
  return x;
}
std::uint32_t to_bits(float x) {
  std::uint32_t bits{};
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}
// The two bf16 neighbours of a finite x, towards zero and away from it, by truncation.
double bf16_toward_zero(float x) {
  return from_bits(to_bits(x) & 0xFFFF0000U);
}
double bf16_away_from_zero(float x) {
  std::uint32_t const low = to_bits(x) & 0xFFFFU;
  return low == 0 ? x : from_bits((to_bits(x) & 0xFFFF0000U) + 0x10000U);
}
bool contains(std::string const& text, std::string const& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST(mixed_precision, nearest_even_picks_the_nearer_neighbour_and_breaks_ties_to_even) {
  EXPECT_EQ(graphstep::bfloat16_nearest_even(1.0F), 0x3F80);
  EXPECT_EQ(graphstep::bfloat16_nearest_even(from_bits(0x3F808000U)), 0x3F80);  // tie, 0x3F80 even
  EXPECT_EQ(graphstep::bfloat16_nearest_even(from_bits(0x3F818000U)), 0x3F82);  // tie, 0x3F82 even
  EXPECT_EQ(graphstep::bfloat16_nearest_even(from_bits(0x3F808001U)), 0x3F81);  // just above the tie
  EXPECT_EQ(graphstep::bfloat16_nearest_even(from_bits(0xBF808001U)), 0xBF81);  // negative
  EXPECT_EQ(graphstep::bfloat16_nearest_even(from_bits(0x7F7FFFFFU)), 0x7F80);  // fp32 max → inf
  EXPECT_TRUE(std::isnan(
      graphstep::bfloat16_to_float(graphstep::bfloat16_nearest_even(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(graphstep::bfloat16_to_float(graphstep::bfloat16_nearest_even(from_bits(0x7F800001U)))));
  std::mt19937 rng{1};
  std::uniform_real_distribution<float> dist{-1000.0F, 1000.0F};
  for (int i = 0; i < 100000; ++i) {
    float const x = dist(rng);
    double const down = bf16_toward_zero(x);
    double const up = bf16_away_from_zero(x);
    double const got = graphstep::bfloat16_to_float(graphstep::bfloat16_nearest_even(x));
    double const best = std::fabs(x - down) <= std::fabs(up - x) ? down : up;
    if (std::fabs(x - down) != std::fabs(up - x)) {
      ASSERT_EQ(got, best) << x;
    }
  }
}

TEST(mixed_precision, stochastic_rounding_picks_a_neighbour_and_keeps_bf16_values) {
  float const x = from_bits(0x3F80C000U);  // 3/4 of the way from 0x3F80 to 0x3F81
  EXPECT_EQ(graphstep::bfloat16_stochastic(x, 0U), 0x3F80);
  EXPECT_EQ(graphstep::bfloat16_stochastic(x, 0x3FFFU), 0x3F80);
  EXPECT_EQ(graphstep::bfloat16_stochastic(x, 0x4000U), 0x3F81);
  EXPECT_EQ(graphstep::bfloat16_stochastic(x, 0xFFFFU), 0x3F81);
  EXPECT_EQ(graphstep::bfloat16_stochastic(-x, 0xFFFFU), 0xBF81);  // away from zero, as for +x
  for (std::uint32_t r : {0U, 0x1234U, 0xFFFFU, 0xFFFFFFFFU}) {
    EXPECT_EQ(graphstep::bfloat16_stochastic(1.5F, r), 0x3FC0);  // exactly bf16: unchanged
    EXPECT_EQ(graphstep::bfloat16_stochastic(std::numeric_limits<float>::infinity(), r), 0x7F80);
    EXPECT_TRUE(
        std::isnan(graphstep::bfloat16_to_float(graphstep::bfloat16_stochastic(from_bits(0x7F800001U), r))));
  }
}

// The mean of many stochastically rounded copies of x is x: the error of the mean stays within
// 5 standard deviations of a Bernoulli mean (ulp · sqrt(p(1 − p) / n)).
TEST(mixed_precision, stochastic_rounding_is_unbiased) {
  std::uint64_t const n = 200000;
  for (float const x : {1.0F + 0.3F / 128.0F, -3.7F, 1e-3F, 12345.678F}) {
    double const down = bf16_toward_zero(x);
    double const up = bf16_away_from_zero(x);
    double const ulp = std::fabs(up - down);
    double const p = std::fabs(x - down) / ulp;
    double sum = 0.0;
    std::uint64_t ups = 0;
    for (std::uint64_t e = 0; e < n; ++e) {
      double const r =
          graphstep::bfloat16_to_float(graphstep::bfloat16_stochastic(x, gt::stochastic_rounding_bits(42, 7, e)));
      ASSERT_TRUE(r == down || r == up) << x << " rounded to " << r;
      sum += r;
      ups += r == up ? 1 : 0;
    }
    double const sigma = ulp * std::sqrt(p * (1.0 - p) / static_cast<double>(n));
    EXPECT_NEAR(sum / static_cast<double>(n), x, 5.0 * sigma + 1e-12) << x;
    EXPECT_GT(ups, 0U);
    EXPECT_LT(ups, n);
  }
}

TEST(mixed_precision, the_rounding_bits_follow_seed_step_and_element) {
  EXPECT_EQ(gt::stochastic_rounding_bits(5, 3, 10), gt::stochastic_rounding_bits(5, 3, 10));
  int same_step = 0;
  int same_seed = 0;
  for (std::uint64_t e = 0; e < 64; ++e) {
    same_step += gt::stochastic_rounding_bits(5, 3, e) == gt::stochastic_rounding_bits(5, 4, e);
    same_seed += gt::stochastic_rounding_bits(5, 3, e) == gt::stochastic_rounding_bits(6, 3, e);
  }
  EXPECT_EQ(same_step, 0);
  EXPECT_EQ(same_seed, 0);
  // The documented counter: Philox on {element / 4, step} keyed by the seed, word element % 4.
  std::uint64_t const seed = 0x0123456789ABCDEFULL;
  std::uint64_t const element = (std::uint64_t{3} << 32) * 4 + 6;
  gt::philox_block const block = gt::philox4x32_10(
      {{static_cast<std::uint32_t>(element / 4), 3U, 9U, 0U}}, 0x89ABCDEFU, 0x01234567U);
  EXPECT_EQ(gt::stochastic_rounding_bits(seed, 9, element), block.word[2]);
}

TEST(mixed_precision, clip_factor_follows_clip_grad_norm) {
  EXPECT_EQ(gt::gradient_clip_factor(100.0F, 0.0F, 1e-6F), 1.0F);  // clipping off
  EXPECT_EQ(gt::gradient_clip_factor(0.5F, 1.0F, 1e-6F), 1.0F);    // below the bound
  EXPECT_NEAR(gt::gradient_clip_factor(10.0F, 1.0F, 1e-6F), 1.0 / (10.0 + 1e-6), 1e-8);
  EXPECT_NEAR(gt::gradient_clip_factor(4.0F, 2.0F, 1e-6F), 2.0 / (4.0 + 1e-6), 1e-8);
  EXPECT_EQ(gt::gradient_clip_factor(std::numeric_limits<float>::infinity(), 1.0F, 1e-6F), 0.0F);
  EXPECT_TRUE(
      std::isnan(gt::gradient_clip_factor(std::numeric_limits<float>::quiet_NaN(), 1.0F, 1e-6F)));
}

TEST(mixed_precision, bad_options_are_usage_errors_naming_the_option) {
  EXPECT_NO_THROW(gt::validate(gt::mixed_adamw_options{}));
  auto const refused = [](auto change) {
    gt::mixed_adamw_options options;
    change(options);
    return message_of([&] { gt::validate(options); });
  };
  EXPECT_TRUE(contains(refused([](auto& o) { o.beta1 = 1.0F; }), "beta1 must lie in [0, 1)"));
  EXPECT_TRUE(contains(refused([](auto& o) { o.beta2 = -0.1F; }), "beta2 must lie in [0, 1)"));
  EXPECT_TRUE(contains(refused([](auto& o) { o.epsilon = 0.0F; }), "epsilon must be positive"));
  EXPECT_TRUE(contains(refused([](auto& o) { o.max_grad_norm = -1.0F; }), "max_grad_norm"));
  EXPECT_TRUE(contains(refused([](auto& o) { o.max_grad_norm = INFINITY; }), "0 turns clipping"));
  EXPECT_TRUE(contains(refused([](auto& o) { o.clip_epsilon = 0.0F; }), "clip_epsilon"));
}

TEST(mixed_precision, parameter_groups_map_tensors_and_refuse_what_cannot_be_right) {
  std::vector<gt::parameter_group> const groups{{0.1F, 1.0F}, {0.0F, 0.5F}};
  auto const planned = gt::plan_parameter_groups(groups, {1, 0, 0, 1});
  ASSERT_EQ(planned.size(), 4U);
  EXPECT_EQ(planned[0].weight_decay, 0.0F);
  EXPECT_EQ(planned[0].lr_multiplier, 0.5F);
  EXPECT_EQ(planned[1].weight_decay, 0.1F);
  EXPECT_EQ(planned[3].lr_multiplier, 0.5F);
  EXPECT_TRUE(
      contains(message_of([] { (void)gt::plan_parameter_groups({}, {0}); }), "no group was given"));
  EXPECT_TRUE(contains(message_of([&] { (void)gt::plan_parameter_groups(groups, {}); }),
                       "no tensor was given"));
  EXPECT_TRUE(contains(message_of([&] {
                         (void)gt::plan_parameter_groups(groups, {0, 2});
                       }),
                       "tensor 1 names group 2 but only 2 groups"));
  EXPECT_TRUE(contains(message_of([] {
                         (void)gt::plan_parameter_groups({{-1.0F, 1.0F}}, {0});
                       }),
                       "group 0 has a negative or non-finite weight_decay"));
  EXPECT_TRUE(contains(message_of([] {
                         (void)gt::plan_parameter_groups({{0.0F, NAN}}, {0});
                       }),
                       "group 0 has a negative or non-finite lr_multiplier"));
}

TEST(mixed_precision, bias_correction_is_one_minus_beta_to_the_step) {
  for (std::int64_t step : {1, 2, 10, 1000}) {
    EXPECT_NEAR(gt::reference::bias_correction(0.999F, step),
                1.0 - std::pow(static_cast<double>(0.999F), static_cast<double>(step)), 1e-7);
  }
  EXPECT_EQ(gt::reference::bias_correction(0.9F, 0), 0.0F);
}

// Several fp32 steps stay within fp32 rounding of the fp64 AdamW of reference::adam_step, with
// the group's decay and multiplier, the loss scale and the clip factor folded in.
TEST(mixed_precision, the_fp32_reference_step_follows_the_fp64_adamw) {
  std::mt19937 rng{3};
  std::uniform_real_distribution<float> dist{-1.0F, 1.0F};
  std::size_t const n = 1000;
  std::vector<float> master(n), grad(n), m(n, 0.0F), v(n, 0.0F);
  for (auto& x : master) x = dist(rng);
  for (auto& x : grad) x = dist(rng) * 1024.0F;  // scaled by a loss scale of 1024
  gt::mixed_adamw_options options;
  gt::parameter_group const group{0.05F, 0.5F};
  gt::adam_options fp64_options;
  fp64_options.weight_decay = group.weight_decay;
  std::vector<double> want(master.begin(), master.end());
  std::vector<double> want_grad(n);
  for (std::size_t i = 0; i < n; ++i) want_grad[i] = grad[i] / 1024.0 * 0.25;
  std::vector<double> want_m(n, 0.0), want_v(n, 0.0);
  for (std::int64_t step = 1; step <= 5; ++step) {
    float const lr = 1e-2F;
    gt::reference::mixed_adamw_scalars const scalars{
        lr, gt::reference::bias_correction(options.beta1, step),
        std::sqrt(gt::reference::bias_correction(options.beta2, step)), 1.0F / 1024.0F, 0.25F};
    gt::reference::mixed_adamw_step(master, m, v, grad, options, group, scalars);
    gt::reference::adamw_step(want, want_grad, want_m, want_v, fp64_options,
                              static_cast<double>(lr) * group.lr_multiplier, step);
  }
  for (std::size_t i = 0; i < n; ++i) ASSERT_NEAR(master[i], want[i], 2e-6) << i;
  auto const nearest = gt::reference::to_bfloat16(master, false, 0, 5, 0);
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_LE(std::fabs(graphstep::bfloat16_to_float(nearest[i]) - master[i]),
              std::fabs(master[i]) / 256.0 + 1e-30)
        << i;
  }
}
