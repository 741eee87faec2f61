// Learning-rate schedules (train/lr_schedule.hpp): each shape step by step, and what validate
// refuses.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <graphstep/error.hpp>
#include <graphstep/train/lr_schedule.hpp>
#include <string>

#include "common/error_message.hpp"

namespace gt = graphstep::train;
using graphstep::testing::message_of;

TEST(lr_schedule, shapes) {
  gt::lr_schedule s;
  s.base = 0.1F;
  EXPECT_FLOAT_EQ(s.at(1), 0.1F);
  EXPECT_FLOAT_EQ(s.at(1000000), 0.1F);

  s.shape = gt::lr_shape::linear_warmup;
  s.warmup_steps = 10;
  EXPECT_FLOAT_EQ(s.at(1), 0.01F);
  EXPECT_FLOAT_EQ(s.at(5), 0.05F);
  EXPECT_FLOAT_EQ(s.at(10), 0.1F);
  EXPECT_FLOAT_EQ(s.at(50), 0.1F);

  s.shape = gt::lr_shape::warmup_cosine;
  s.total_steps = 110;
  s.final_fraction = 0.1F;
  EXPECT_FLOAT_EQ(s.at(10), 0.1F);
  EXPECT_NEAR(s.at(60), 0.01F + 0.09F * 0.5F, 1e-6);  // halfway through the decay
  EXPECT_NEAR(s.at(110), 0.01F, 1e-6);
  EXPECT_NEAR(s.at(500), 0.01F, 1e-6);  // stays at the floor

  s.shape = gt::lr_shape::warmup_linear;
  EXPECT_NEAR(s.at(35), 0.01F + 0.09F * 0.75F, 1e-6);
  EXPECT_NEAR(s.at(110), 0.01F, 1e-6);
}

TEST(lr_schedule, validation) {
  gt::lr_schedule s;
  EXPECT_NO_THROW(gt::validate(s));
  s.base = -1.0F;
  EXPECT_THROW(gt::validate(s), graphstep::usage_error);
  s.base = 1.0F;
  s.shape = gt::lr_shape::warmup_cosine;
  s.warmup_steps = 10;
  s.total_steps = 10;
  EXPECT_THROW(gt::validate(s), graphstep::usage_error);
  s.total_steps = 20;
  s.final_fraction = 1.5F;
  EXPECT_THROW(gt::validate(s), graphstep::usage_error);
  s.final_fraction = 0.0F;
  EXPECT_NO_THROW(gt::validate(s));
}

// WSD against its definition written out here: warm-up base·s/W, base through T − D, then
// floor + (base − floor)·(1 − sqrt((s − (T − D)) / D)) up to T, the floor after.
TEST(lr_schedule, warmup_stable_decay_at_its_boundaries) {
  double const base = 0.5;
  double const fraction = 0.1;
  std::int64_t const warmup = 4;
  std::int64_t const total = 40;
  std::int64_t const decay = 16;
  auto const expected = [&](std::int64_t step) {
    double const floor = base * fraction;
    if (step <= warmup) return base * static_cast<double>(step) / static_cast<double>(warmup);
    if (step <= total - decay) return base;
    double const progress =
        static_cast<double>(std::min(step, total) - (total - decay)) / static_cast<double>(decay);
    return floor + (base - floor) * (1.0 - std::sqrt(progress));
  };
  gt::lr_schedule s;
  s.shape = gt::lr_shape::warmup_stable_decay;
  s.base = static_cast<float>(base);
  s.final_fraction = static_cast<float>(fraction);
  s.warmup_steps = warmup;
  s.total_steps = total;
  s.decay_steps = decay;
  ASSERT_NO_THROW(gt::validate(s));
  for (std::int64_t step : {0, 1, 3, 4, 5, 23, 24, 25, 28, 32, 39, 40, 41, 1000}) {
    EXPECT_NEAR(s.at(step), expected(step), 1e-6) << "step " << step;
  }
  EXPECT_EQ(s.at(0), 0.0F);                // before the first step of a warm-up
  EXPECT_EQ(s.at(warmup), s.base);         // the warm-up ends at base
  EXPECT_EQ(s.at(total - decay), s.base);  // the last stable step
  EXPECT_LT(s.at(total - decay + 1), s.base);
  EXPECT_NEAR(s.at(total - decay / 4 * 3), 0.05 + 0.45 * 0.5, 1e-6);  // a quarter in: sqrt = 1/2
  EXPECT_EQ(s.at(total), s.at(total + 100));  // the floor holds after total_steps

  s.warmup_steps = 0;  // no warm-up: step 0 and step 1 already get base
  EXPECT_EQ(s.at(0), s.base);
  EXPECT_EQ(s.at(1), s.base);
  s.decay_steps = total;  // decay from the first step on
  EXPECT_NEAR(s.at(1), 0.05 + 0.45 * (1.0 - std::sqrt(1.0 / 40.0)), 1e-6);
}

TEST(lr_schedule, warmup_stable_decay_validation_says_what_to_change) {
  gt::lr_schedule s;
  s.shape = gt::lr_shape::warmup_stable_decay;
  s.warmup_steps = 10;
  s.total_steps = 100;
  s.decay_steps = 0;
  EXPECT_NE(message_of([&] { gt::validate(s); }).find("decay_steps >= 1"), std::string::npos);
  s.decay_steps = 91;
  EXPECT_NE(message_of([&] { gt::validate(s); }).find("shorten the warm-up or the decay"),
            std::string::npos);
  s.decay_steps = 90;
  EXPECT_NO_THROW(gt::validate(s));
  s.total_steps = 10;
  EXPECT_THROW(gt::validate(s), graphstep::usage_error);
}

// The cosine and linear decays at every step against their definitions written out here:
// warm-up base·s/W, then with p = (min(s, T) − W) / (T − W), cosine floor + (base − floor)·
// (1 + cos πp)/2 and linear floor + (base − floor)·(1 − p); without a warm-up, step 0 gets base.
TEST(lr_schedule, every_step_of_the_cosine_and_linear_decays_follows_its_formula) {
  double const pi = std::acos(-1.0);
  double const base = 0.3;
  double const fraction = 0.2;
  std::int64_t const total = 50;
  for (std::int64_t const warmup : {std::int64_t{0}, std::int64_t{7}}) {
    for (gt::lr_shape const shape : {gt::lr_shape::warmup_cosine, gt::lr_shape::warmup_linear}) {
      gt::lr_schedule s;
      s.shape = shape;
      s.base = static_cast<float>(base);
      s.final_fraction = static_cast<float>(fraction);
      s.warmup_steps = warmup;
      s.total_steps = total;
      ASSERT_NO_THROW(gt::validate(s));
      double const floor = base * fraction;
      for (std::int64_t step = 0; step <= total + 10; ++step) {
        double expected = 0.0;
        if (warmup > 0 && step <= warmup) {
          expected = base * static_cast<double>(step) / static_cast<double>(warmup);
        } else {
          double const p =
              static_cast<double>(std::max(std::min(step, total) - warmup, std::int64_t{0})) /
              static_cast<double>(total - warmup);
          expected = shape == gt::lr_shape::warmup_cosine
                         ? floor + (base - floor) * 0.5 * (1.0 + std::cos(pi * p))
                         : floor + (base - floor) * (1.0 - p);
        }
        EXPECT_NEAR(s.at(step), expected, 1e-6)
            << "warm-up " << warmup << ", shape " << static_cast<int>(shape) << ", step " << step;
      }
    }
  }
}
