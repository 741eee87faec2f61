// The host's checks of a gradient-accumulation loop (train/micro_batch_plan.hpp) and the skip
// decision the optimizer takes on the device (train/mixed_precision.hpp), on the CPU.

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <graphstep/error.hpp>
#include <graphstep/train/micro_batch_plan.hpp>
#include <graphstep/train/mixed_precision.hpp>
#include <graphstep/train/optimizer_options.hpp>
#include <limits>

#include "common/error_message.hpp"

namespace gt = graphstep::train;
using graphstep::testing::contains;
using graphstep::testing::message_of;

TEST(micro_batch_plan, micro_batches_below_one_are_refused_by_value) {
  EXPECT_EQ(gt::checked_micro_batches(1), 1);
  EXPECT_EQ(gt::checked_micro_batches(8), 8);
  EXPECT_TRUE(contains(message_of([] { static_cast<void>(gt::checked_micro_batches(0)); }),
                       "micro_batches is 0"));
  EXPECT_TRUE(contains(message_of([] { static_cast<void>(gt::checked_micro_batches(-3)); }),
                       "micro_batches is -3"));
}

TEST(micro_batch_plan, an_input_must_hold_exactly_k_micro_batches) {
  EXPECT_EQ(gt::micro_batch_slice_bytes(4 * 6, 6, sizeof(std::int32_t), 4),
            6 * sizeof(std::int32_t));
  EXPECT_EQ(gt::micro_batch_slice_bytes(5, 5, 2, 1), 10U);
  std::string const short_input =
      message_of([] { static_cast<void>(gt::micro_batch_slice_bytes(23, 6, 4, 4)); });
  EXPECT_TRUE(contains(short_input, "holds 23 elements, not 4 micro-batches of 6")) << short_input;
  // One micro-batch too many is as wrong as one too few.
  EXPECT_TRUE(
      contains(message_of([] { static_cast<void>(gt::micro_batch_slice_bytes(30, 6, 4, 4)); }),
               "holds 30 elements"));
  EXPECT_TRUE(
      contains(message_of([] { static_cast<void>(gt::micro_batch_slice_bytes(0, 0, 4, 4)); }),
               "0 elements"));
  EXPECT_TRUE(
      contains(message_of([] { static_cast<void>(gt::micro_batch_slice_bytes(8, 8, 4, 0)); }),
               "micro_batches is 0"));
}

TEST(micro_batch_plan, a_step_is_skipped_on_a_finding_or_a_norm_above_the_threshold) {
  float const inf = std::numeric_limits<float>::infinity();
  float const nan = std::numeric_limits<float>::quiet_NaN();
  // Nothing set: only the scaler's finding skips.
  EXPECT_FALSE(gt::skips_step(true, 1e30F, 0.0F, inf));
  EXPECT_FALSE(gt::skips_step(true, nan, 0.0F, inf));
  EXPECT_TRUE(gt::skips_step(false, 0.5F, 0.0F, inf));
  // Clipping alone: a norm that is not finite skips, any finite one does not.
  EXPECT_FALSE(gt::skips_step(true, 1e30F, 1.0F, inf));
  EXPECT_TRUE(gt::skips_step(true, inf, 1.0F, inf));
  EXPECT_TRUE(gt::skips_step(true, nan, 1.0F, inf));
  // A threshold: above it, or not finite, skips; at it does not.
  EXPECT_FALSE(gt::skips_step(true, 2.0F, 0.0F, 2.0F));
  EXPECT_TRUE(gt::skips_step(true, 2.0001F, 0.0F, 2.0F));
  EXPECT_TRUE(gt::skips_step(true, inf, 0.0F, 2.0F));
  EXPECT_TRUE(gt::skips_step(true, nan, 0.0F, 2.0F));
  EXPECT_TRUE(gt::skips_step(false, 0.5F, 1.0F, 2.0F));
}

TEST(micro_batch_plan, a_skip_threshold_must_be_positive) {
  gt::mixed_adamw_options options;
  EXPECT_NO_THROW(gt::validate(options));  // infinity: off
  options.skip_norm = 10.0F;
  EXPECT_NO_THROW(gt::validate(options));
  options.skip_norm = 0.0F;
  EXPECT_TRUE(contains(message_of([&] { gt::validate(options); }), "skip_norm is 0;"));
  options.skip_norm = -1.0F;
  EXPECT_TRUE(contains(message_of([&] { gt::validate(options); }), "skip_norm is -1;"));
  options.skip_norm = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(contains(message_of([&] { gt::validate(options); }), "skip_norm is nan"));
}
