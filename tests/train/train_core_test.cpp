// The plain C++ side of training: chunk planning, schedules, option checks and the fp64
// references the GPU tests compare against.

#include <gtest/gtest.h>

#include <cmath>
#include <graphstep/error.hpp>
#include <graphstep/train/lr_schedule.hpp>
#include <graphstep/train/multi_tensor.hpp>
#include <graphstep/train/optimizer_options.hpp>
#include <graphstep/train/reference.hpp>
#include <numeric>
#include <random>

namespace gt = graphstep::train;

TEST(plan_chunks, covers_every_element_once_in_order) {
  std::mt19937 rng{3};
  std::uniform_int_distribution<std::size_t> size{1, 5000};
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::size_t> counts(1 + trial % 17);
    for (auto& c : counts) c = size(rng);
    std::size_t const chunk = 1 + trial % 700;
    auto const chunks = gt::plan_chunks(counts, chunk);
    std::vector<std::size_t> covered(counts.size(), 0);
    for (auto const& c : chunks) {
      ASSERT_LT(c.tensor, counts.size());
      ASSERT_GT(c.count, 0U);
      ASSERT_LE(c.count, chunk);
      EXPECT_EQ(c.begin, covered[c.tensor]) << "chunks of a tensor are contiguous and ordered";
      covered[c.tensor] += c.count;
    }
    EXPECT_EQ(covered, counts);
  }
}

TEST(plan_chunks, exact_multiples_and_single_elements) {
  auto const chunks = gt::plan_chunks({8, 1, 9}, 4);
  ASSERT_EQ(chunks.size(), 6U);
  EXPECT_EQ(chunks[0].count, 4U);
  EXPECT_EQ(chunks[1].begin, 4U);
  EXPECT_EQ(chunks[2].tensor, 1U);
  EXPECT_EQ(chunks[2].count, 1U);
  EXPECT_EQ(chunks[5].count, 1U);
  EXPECT_EQ(chunks[5].begin, 8U);
}

TEST(plan_chunks, bad_input_is_a_usage_error) {
  EXPECT_THROW(static_cast<void>(gt::plan_chunks({})), graphstep::usage_error);
  EXPECT_THROW(static_cast<void>(gt::plan_chunks({4, 0, 2})), graphstep::usage_error);
  EXPECT_THROW(static_cast<void>(gt::plan_chunks({4}, 0)), graphstep::usage_error);
  try {
    static_cast<void>(gt::plan_chunks({4, 0}));
  } catch (graphstep::usage_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("tensor 1"), std::string::npos) << e.what();
  }
}

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

TEST(optimizer_options, validation) {
  EXPECT_NO_THROW(gt::validate(gt::sgd_options{}));
  EXPECT_THROW(gt::validate(gt::sgd_options{-0.1F}), graphstep::usage_error);
  EXPECT_THROW(gt::validate(gt::sgd_options{0.0F, 0.0F, 0.0F, true}), graphstep::usage_error);
  EXPECT_THROW(gt::validate(gt::sgd_options{0.9F, 0.1F, 0.0F, true}), graphstep::usage_error);
  EXPECT_NO_THROW(gt::validate(gt::adam_options{}));
  EXPECT_THROW(gt::validate(gt::adam_options{1.0F}), graphstep::usage_error);
  EXPECT_THROW(gt::validate(gt::adam_options{0.9F, 0.999F, 0.0F}), graphstep::usage_error);
}

TEST(reference, sgd_plain_momentum_and_nesterov_by_hand) {
  std::vector<double> p{1.0};
  std::vector<double> buf{0.0};
  gt::reference::sgd_step(p, {0.5}, buf, {}, 0.1, 1);
  EXPECT_DOUBLE_EQ(p[0], 1.0 - 0.1 * 0.5);

  p = {1.0};
  gt::sgd_options momentum{0.9F};
  gt::reference::sgd_step(p, {0.5}, buf, momentum, 0.1, 1);  // first step: buf = g
  EXPECT_DOUBLE_EQ(buf[0], 0.5);
  EXPECT_DOUBLE_EQ(p[0], 0.95);
  gt::reference::sgd_step(p, {0.5}, buf, momentum, 0.1, 2);  // buf = 0.9·0.5 + 0.5
  EXPECT_NEAR(buf[0], 0.95, 1e-7);
  EXPECT_NEAR(p[0], 0.95 - 0.095, 1e-7);

  p = {1.0};
  buf = {0.0};
  gt::sgd_options nesterov{0.9F, 0.0F, 0.1F, true};
  gt::reference::sgd_step(p, {0.5}, buf, nesterov, 0.1, 1);  // g = 0.5 + 0.1·1 = 0.6
  EXPECT_NEAR(buf[0], 0.6, 1e-7);
  EXPECT_NEAR(p[0], 1.0 - 0.1 * (0.6 + 0.9 * 0.6), 1e-7);
}

TEST(reference, adam_first_step_moves_by_the_learning_rate) {
  // With bias correction the first Adam step is lr · g/|g| (up to epsilon).
  std::vector<double> p{1.0, -2.0};
  std::vector<double> m{0.0, 0.0};
  std::vector<double> v{0.0, 0.0};
  gt::reference::adam_step(p, {0.3, -4.0}, m, v, {}, 0.01, 1);
  EXPECT_NEAR(p[0], 1.0 - 0.01, 1e-7);
  EXPECT_NEAR(p[1], -2.0 + 0.01, 1e-7);
}

TEST(reference, adamw_decays_weights_decoupled) {
  std::vector<double> p{2.0};
  std::vector<double> m{0.0};
  std::vector<double> v{0.0};
  gt::adam_options options;
  options.weight_decay = 0.5F;
  options.decoupled_weight_decay = true;
  gt::reference::adam_step(p, {1.0}, m, v, options, 0.1, 1);
  EXPECT_NEAR(p[0], 2.0 * (1.0 - 0.05) - 0.1, 1e-7);
}

TEST(reference, mse_and_gradient) {
  std::vector<double> gradient;
  double const loss = gt::reference::mse({1.0, 2.0, 4.0}, {0.0, 2.0, 1.0}, &gradient);
  EXPECT_DOUBLE_EQ(loss, (1.0 + 0.0 + 9.0) / 3.0);
  EXPECT_DOUBLE_EQ(gradient[0], 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(gradient[1], 0.0);
  EXPECT_DOUBLE_EQ(gradient[2], 2.0);
}
