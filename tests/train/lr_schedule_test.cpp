// Learning-rate schedules (train/lr_schedule.hpp): each shape step by step, and what validate
// refuses.

#include <gtest/gtest.h>

#include <graphstep/error.hpp>
#include <graphstep/train/lr_schedule.hpp>

namespace gt = graphstep::train;

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
