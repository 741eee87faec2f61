// The loss scaler's update rule (train/loss_scaler_options.hpp) against PyTorch's GradScaler tests
// (test/test_cuda.py), and what validate refuses.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <graphstep/error.hpp>
#include <graphstep/train/loss_scaler_options.hpp>
#include <graphstep/train/mixed_precision.hpp>
#include <limits>
#include <string>
#include <vector>

namespace gt = graphstep::train;

namespace {

std::string message_of_validate(gt::loss_scaler_options const& options) {
  try {
    gt::validate(options);
  } catch (graphstep::usage_error const& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// test_grad_scaling_update_scale: growth 2, backoff 0.25, interval 2, from scale 4.
TEST(loss_scaler_options, two_finite_steps_grow_the_scale_and_an_overflow_backs_it_off) {
  gt::loss_scaler_options options;
  options.init_scale = 4.0F;
  options.growth_factor = 2.0F;
  options.backoff_factor = 0.25F;
  options.growth_interval = 2;
  gt::loss_scaler_state state = gt::initial_loss_scaler_state(options);
  gt::update_loss_scaler(state, options);
  EXPECT_EQ(state.growth_tracker, 1);
  EXPECT_EQ(state.scale, 4.0F);
  gt::update_loss_scaler(state, options);
  EXPECT_EQ(state.growth_tracker, 0);
  EXPECT_EQ(state.scale, 8.0F);
  state.all_finite = 0U;
  gt::update_loss_scaler(state, options);
  EXPECT_EQ(state.growth_tracker, 0);
  EXPECT_EQ(state.scale, 2.0F);
  EXPECT_EQ(state.inv_scale, 0.5F);
}

// test_graph_grad_scaling: GradScaler(init_scale=4) with its other defaults; the gradient is
// the input times the scale in fp16, which overflows above 65504 (values from 65520 on round
// to inf). Inputs 5, 20000, 5, 40000 give scales 4, 2, 2, 1 and trackers 1, 0, 1, 0.
TEST(loss_scaler_options, pytorchs_graphed_grad_scaling_sequence) {
  gt::loss_scaler_options options;
  options.init_scale = 4.0F;
  gt::loss_scaler_state state = gt::initial_loss_scaler_state(options);
  std::vector<float> scales;
  std::vector<std::int32_t> trackers;
  for (float const input : {5.0F, 20000.0F, 5.0F, 40000.0F}) {
    state.all_finite = input * state.scale < 65520.0F ? 1U : 0U;
    gt::update_loss_scaler(state, options);
    scales.push_back(state.scale);
    trackers.push_back(state.growth_tracker);
  }
  EXPECT_EQ(scales, (std::vector<float>{4.0F, 2.0F, 2.0F, 1.0F}));
  EXPECT_EQ(trackers, (std::vector<std::int32_t>{1, 0, 1, 0}));
}

TEST(loss_scaler_options, growth_that_would_overflow_keeps_the_scale_and_restarts_the_tracker) {
  gt::loss_scaler_options options;
  options.init_scale = std::numeric_limits<float>::max();
  options.growth_interval = 1;
  gt::loss_scaler_state state = gt::initial_loss_scaler_state(options);
  gt::update_loss_scaler(state, options);
  EXPECT_EQ(state.scale, std::numeric_limits<float>::max());
  EXPECT_EQ(state.growth_tracker, 0);
}

TEST(loss_scaler_options, is_finite_tells_inf_and_nan_apart_from_every_finite_value) {
  EXPECT_TRUE(gt::detail::is_finite(0.0F));
  EXPECT_TRUE(gt::detail::is_finite(-std::numeric_limits<float>::max()));
  EXPECT_TRUE(gt::detail::is_finite(std::numeric_limits<float>::denorm_min()));
  EXPECT_FALSE(gt::detail::is_finite(std::numeric_limits<float>::infinity()));
  EXPECT_FALSE(gt::detail::is_finite(-std::numeric_limits<float>::infinity()));
  EXPECT_FALSE(gt::detail::is_finite(std::numeric_limits<float>::quiet_NaN()));
}

// Every bf16 pattern: the bit test agrees with the fp32 value the pattern holds.
TEST(loss_scaler_options, bfloat16_is_finite_agrees_with_the_value_of_every_pattern) {
  int non_finite = 0;
  for (std::uint32_t bits = 0; bits <= 0xFFFFU; ++bits) {
    auto const b = static_cast<std::uint16_t>(bits);
    bool const finite = std::isfinite(graphstep::bfloat16_to_float(b));
    ASSERT_EQ(gt::detail::bfloat16_is_finite(b), finite) << std::hex << bits;
    non_finite += finite ? 0 : 1;
  }
  EXPECT_EQ(non_finite, 2 * 128);  // sign × 7 fraction bits under the all-ones exponent
}

// fp16 (IEEE binary16: 1 sign, 5 exponent, 10 fraction bits): 65504 is the largest finite
// value, 0x7C00 is inf, and exactly the 2 × 2^10 patterns with the all-ones exponent are inf or
// NaN.
TEST(loss_scaler_options, float16_is_finite_refuses_exactly_inf_and_nan) {
  EXPECT_TRUE(gt::detail::float16_is_finite(0x7BFFU));   // 65504
  EXPECT_TRUE(gt::detail::float16_is_finite(0xFBFFU));   // -65504
  EXPECT_TRUE(gt::detail::float16_is_finite(0x0001U));   // the smallest subnormal
  EXPECT_TRUE(gt::detail::float16_is_finite(0x8000U));   // -0
  EXPECT_FALSE(gt::detail::float16_is_finite(0x7C00U));  // inf
  EXPECT_FALSE(gt::detail::float16_is_finite(0xFC00U));  // -inf
  EXPECT_FALSE(gt::detail::float16_is_finite(0x7E00U));  // a quiet NaN
  EXPECT_FALSE(gt::detail::float16_is_finite(0x7C01U));  // a signalling NaN
  int non_finite = 0;
  for (std::uint32_t bits = 0; bits <= 0xFFFFU; ++bits) {
    non_finite += gt::detail::float16_is_finite(static_cast<std::uint16_t>(bits)) ? 0 : 1;
  }
  EXPECT_EQ(non_finite, 2 * 1024);
}

TEST(loss_scaler_options, validation_names_the_bad_option) {
  EXPECT_EQ(message_of_validate(gt::loss_scaler_options{}), "");
  float const inf = std::numeric_limits<float>::infinity();
  EXPECT_NE(message_of_validate({0.0F}).find("init_scale"), std::string::npos);
  EXPECT_NE(message_of_validate({inf}).find("init_scale"), std::string::npos);
  EXPECT_NE(message_of_validate({4.0F, 1.0F}).find("growth_factor"), std::string::npos);
  EXPECT_NE(message_of_validate({4.0F, 2.0F, 1.0F}).find("backoff_factor"), std::string::npos);
  EXPECT_NE(message_of_validate({4.0F, 2.0F, 0.0F}).find("backoff_factor"), std::string::npos);
  EXPECT_NE(message_of_validate({4.0F, 2.0F, 0.5F, 0}).find("growth_interval"), std::string::npos);
}
