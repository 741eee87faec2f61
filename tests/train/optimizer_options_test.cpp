// What validate refuses in the optimizers' options (train/optimizer_options.hpp).

#include <gtest/gtest.h>

#include <graphstep/error.hpp>
#include <graphstep/train/optimizer_options.hpp>
#include <string>

#include "common/error_message.hpp"

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

// A parameter's value and gradient are spans of one dtype and count; each refusal names the
// parameter and what to fix.
TEST(optimizer_options, a_parameter_is_two_spans_of_one_dtype_and_count) {
  namespace gs = graphstep;
  alignas(4) static unsigned char value[64];
  alignas(4) static unsigned char gradient[64];
  auto const refused = [](gt::parameter const& p) {
    return gs::testing::message_of([&] { gt::validate(p, 3, "sgd"); });
  };
  using gs::testing::contains;
  EXPECT_NO_THROW(gt::validate(
      {{value, gs::dtype::bfloat16, 16}, {gradient, gs::dtype::bfloat16, 16}, 2}, 3, "sgd"));
  EXPECT_TRUE(contains(refused({{value, gs::dtype::float32, 0}, {gradient, gs::dtype::float32, 0}}),
                       "sgd: parameter 3 value holds no element"));
  EXPECT_TRUE(contains(refused({{value, gs::dtype::float32, 4}, {gradient, gs::dtype::float32, 0}}),
                       "sgd: parameter 3 gradient holds no element"));
  EXPECT_TRUE(contains(refused({{value, gs::dtype::int32, 4}, {gradient, gs::dtype::int32, 4}}),
                       "sgd: parameter 3 value is int32; it takes float32, float16 or bfloat16"));
  EXPECT_TRUE(contains(refused({{value, gs::dtype::float32, 4}, {nullptr, gs::dtype::float32, 4}}),
                       "sgd: parameter 3 gradient is a null pointer"));
  EXPECT_TRUE(
      contains(refused({{value + 2, gs::dtype::float32, 4}, {gradient, gs::dtype::float32, 4}}),
               "sgd: parameter 3 value is not aligned"));
  EXPECT_TRUE(
      contains(refused({{value, gs::dtype::bfloat16, 4}, {gradient, gs::dtype::float16, 4}}),
               "has a bfloat16 value but a float16 gradient"));
  EXPECT_TRUE(contains(refused({{value, gs::dtype::float32, 4}, {gradient, gs::dtype::float32, 3}}),
                       "has 4 values but 3 gradient elements"));
}
