// The fp64 reference of softmax cross-entropy: values worked by hand, padded columns, bad
// targets, and the gradient against central finite differences of the loss.

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <graphstep/ops/reference.hpp>
#include <random>
#include <vector>

namespace ref = graphstep::ops::reference;

TEST(cross_entropy_reference, one_row_by_hand) {
  // Logits (0, ln 2, ln 5) over 3 classes: softmax = (1, 2, 5) / 8, target 1.
  // loss = ln 8 − ln 2 = ln 4; dlogits = (1/8, 2/8 − 1, 5/8) · scale / M with M = 1.
  std::vector<double> const logits{0.0, std::log(2.0), std::log(5.0), 123.0};  // padded to 4
  auto const r = ref::cross_entropy(logits, {1}, 1, 3, 4, 2.0);
  EXPECT_NEAR(r.loss, std::log(4.0), 1e-15);
  ASSERT_EQ(r.dlogits.size(), 4U);
  EXPECT_NEAR(r.dlogits[0], 2.0 * 0.125, 1e-15);
  EXPECT_NEAR(r.dlogits[1], 2.0 * (0.25 - 1.0), 1e-15);
  EXPECT_NEAR(r.dlogits[2], 2.0 * 0.625, 1e-15);
  EXPECT_EQ(r.dlogits[3], 0.0);  // the padded column is no class: zero gradient
}

TEST(cross_entropy_reference, mean_over_rows_by_hand) {
  // Row 0: equal logits over 4 classes, loss ln 4. Row 1: (0, 0, ln 2, 0), target 2:
  // softmax (1, 1, 2, 1) / 5, loss ln 5 − ln 2. Large shared offsets change nothing.
  std::vector<double> const logits{700, 700, 700, 700, 0, 0, std::log(2.0), 0};
  auto const r = ref::cross_entropy(logits, {3, 2}, 2, 4, 4, 1.0);
  EXPECT_NEAR(r.loss, (std::log(4.0) + std::log(2.5)) / 2.0, 1e-14);
  // dlogits = (softmax − onehot) / M with M = 2. Row 0's logsumexp, 700 + ln 4, is rounded to
  // the ulp of 700 (1.1e-13), which its probabilities inherit.
  EXPECT_NEAR(r.dlogits[0], 0.25 / 2, 1e-13);
  EXPECT_NEAR(r.dlogits[3], (0.25 - 1.0) / 2, 1e-13);
  EXPECT_NEAR(r.dlogits[4], 0.2 / 2, 1e-15);
  EXPECT_NEAR(r.dlogits[6], (0.4 - 1.0) / 2, 1e-15);
  // Each gradient row sums to zero (softmax sums to one).
  for (std::size_t row = 0; row < 2; ++row) {
    double sum = 0.0;
    for (std::size_t i = 0; i < 4; ++i) sum += r.dlogits[row * 4 + i];
    EXPECT_NEAR(sum, 0.0, 1e-13) << row;
  }
}

TEST(cross_entropy_reference, a_target_outside_the_vocabulary_makes_its_row_nan) {
  std::vector<double> const logits{1, 2, 3, 0, 1, 2, 3, 0};  // 2 rows, vocab 3, padded 4
  for (std::int32_t bad : {-1, 3, 4}) {
    auto const r = ref::cross_entropy(logits, {0, bad}, 2, 3, 4, 1.0);
    EXPECT_TRUE(std::isnan(r.loss)) << bad;
    for (std::size_t i = 0; i < 4; ++i) {
      EXPECT_FALSE(std::isnan(r.dlogits[i])) << bad << " " << i;
      EXPECT_TRUE(std::isnan(r.dlogits[4 + i])) << bad << " " << i;
    }
  }
}

// dlogits is the gradient of loss · gradient_scale: each entry against a central difference,
// padded columns included (the loss does not depend on them).
TEST(cross_entropy_reference, gradient_matches_finite_differences) {
  std::size_t const rows = 3;
  std::size_t const vocab = 7;
  std::size_t const padded = 9;
  double const scale = 3.5;
  std::mt19937 rng{11};  // NOLINT(cert-msc32-c,cert-msc51-cpp): a fixed, reproducible set
  std::normal_distribution<double> dist{0.0, 2.0};
  std::vector<double> logits(rows * padded);
  for (auto& x : logits) x = dist(rng);
  std::vector<std::int32_t> const targets{6, 0, 3};
  auto const r = ref::cross_entropy(logits, targets, rows, vocab, padded, scale);
  double const h = 1e-5;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    double const saved = logits[i];
    logits[i] = saved + h;
    double const up = ref::cross_entropy(logits, targets, rows, vocab, padded, scale).loss;
    logits[i] = saved - h;
    double const down = ref::cross_entropy(logits, targets, rows, vocab, padded, scale).loss;
    logits[i] = saved;
    EXPECT_NEAR(r.dlogits[i], scale * (up - down) / (2 * h), 1e-9) << i;
    if (i % padded >= vocab) {
      EXPECT_EQ(r.dlogits[i], 0.0) << i;
    }
  }
}
