// The fp64 references the optimizer and loss GPU tests compare against (train/reference.hpp),
// checked against values worked out by hand.

#include <gtest/gtest.h>

#include <graphstep/train/optimizer_options.hpp>
#include <graphstep/train/reference.hpp>
#include <vector>

namespace gt = graphstep::train;

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
  gt::reference::adamw_step(p, {1.0}, m, v, options, 0.1, 1);
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
