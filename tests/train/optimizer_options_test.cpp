// What validate refuses in the optimizers' options (train/optimizer_options.hpp).

#include <gtest/gtest.h>

#include <graphstep/error.hpp>
#include <graphstep/train/optimizer_options.hpp>

namespace gt = graphstep::train;

TEST(optimizer_options, validation) {
  EXPECT_NO_THROW(gt::validate(gt::sgd_options{}));
  EXPECT_THROW(gt::validate(gt::sgd_options{-0.1F}), graphstep::usage_error);
  EXPECT_THROW(gt::validate(gt::sgd_options{0.0F, 0.0F, 0.0F, true}), graphstep::usage_error);
  EXPECT_THROW(gt::validate(gt::sgd_options{0.9F, 0.1F, 0.0F, true}), graphstep::usage_error);
  EXPECT_NO_THROW(gt::validate(gt::adam_options{}));
  EXPECT_THROW(gt::validate(gt::adam_options{1.0F}), graphstep::usage_error);
  EXPECT_THROW(gt::validate(gt::adam_options{0.9F, 0.999F, 0.0F}), graphstep::usage_error);
}
