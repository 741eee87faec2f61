// The fp64 layer norm reference the GPU tests compare against: values worked by hand, a row far
// from zero (where a one-pass variance would cancel), and the backward against central finite
// differences of the forward.

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <graphstep/ops/reference.hpp>
#include <random>
#include <vector>

namespace ref = graphstep::ops::reference;

namespace {

std::vector<double> random(std::size_t n, std::mt19937& rng, double low, double high) {
  std::uniform_real_distribution<double> dist{low, high};
  std::vector<double> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// L = Σ dy·y, whose gradients layer_norm_backward returns.
double loss(std::vector<double> const& dy, std::vector<double> const& x,
            std::vector<double> const& gamma, std::vector<double> const& beta, std::size_t m,
            std::size_t n, double epsilon) {
  auto const y = ref::layer_norm(x, gamma, beta, m, n, epsilon).y;
  double sum = 0.0;
  for (std::size_t i = 0; i < y.size(); ++i) sum += dy[i] * y[i];
  return sum;
}

}  // namespace

TEST(layer_norm_reference, forward_values_worked_by_hand) {
  // ε = 0.75 makes the numbers round: row 0 has mean 2.5 and biased variance
  // (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25, so rstd = 1/√2 and x̂ = (−1.5, −0.5, 0.5, 1.5)/√2.
  // Row 1 is constant: variance 0, rstd = 1/√0.75, x̂ = 0 and y = β. Row 2 is row 0 moved by
  // 1e8, which a one-pass E[x²] − E[x]² loses entirely in fp64 (ulp(1e16) = 2 > 1.25).
  std::vector<double> const x{1, 2, 3, 4, 2, 2, 2, 2, 1e8 + 1, 1e8 + 2, 1e8 + 3, 1e8 + 4};
  std::vector<double> const gamma{1, 2, 0.5, -1};
  std::vector<double> const beta{0, 1, 0, 0.5};
  auto const r = ref::layer_norm(x, gamma, beta, 3, 4, 0.75);
  double const s = 1.0 / std::sqrt(2.0);
  // y = x̂·γ + β: (−1.5s, 2·(−0.5s) + 1, 0.5·0.5s, −1.5s + 0.5)
  std::vector<double> const row0{-1.5 * s, 1.0 - s, 0.25 * s, 0.5 - 1.5 * s};
  for (std::size_t j = 0; j < 4; ++j) {
    EXPECT_NEAR(r.y[j], row0[j], 1e-15) << j;
    EXPECT_NEAR(r.y[4 + j], beta[j], 1e-15) << j;
    EXPECT_NEAR(r.y[8 + j], row0[j], 1e-15) << j;
  }
  EXPECT_NEAR(r.y[1], 0.29289321881345248, 1e-15);  // 1 − 1/√2
  EXPECT_DOUBLE_EQ(r.mean[0], 2.5);
  EXPECT_DOUBLE_EQ(r.mean[1], 2.0);
  EXPECT_DOUBLE_EQ(r.mean[2], 1e8 + 2.5);
  EXPECT_NEAR(r.rstd[0], 0.70710678118654752, 1e-15);
  EXPECT_NEAR(r.rstd[1], 1.1547005383792515, 1e-15);  // 1/√0.75
  EXPECT_NEAR(r.rstd[2], 0.70710678118654752, 1e-15);
}

TEST(layer_norm_reference, normalized_rows_have_zero_mean_and_the_shrunk_variance) {
  std::mt19937 rng{5};
  std::size_t const m = 4;
  std::size_t const n = 33;
  auto const x = random(m * n, rng, -3.0, 5.0);
  std::vector<double> const ones(n, 1.0);
  std::vector<double> const zeros(n, 0.0);
  double const epsilon = 0.1;
  auto const r = ref::layer_norm(x, ones, zeros, m, n, epsilon);
  for (std::size_t i = 0; i < m; ++i) {
    double sum = 0.0;
    double squares = 0.0;
    for (std::size_t j = 0; j < n; ++j) sum += r.y[i * n + j];
    for (std::size_t j = 0; j < n; ++j) squares += r.y[i * n + j] * r.y[i * n + j];
    // var(y) = var / (var + ε) and var = 1/rstd² − ε, so var(y) = 1 − ε·rstd².
    EXPECT_NEAR(sum / static_cast<double>(n), 0.0, 1e-14) << i;
    EXPECT_NEAR(squares / static_cast<double>(n), 1.0 - epsilon * r.rstd[i] * r.rstd[i], 1e-14)
        << i;
  }
}

TEST(layer_norm_reference, backward_values_worked_by_hand) {
  // Row 0 as above with dy = (1, 0, 0, 0): g = dy·γ = (1, 0, 0, 0), mean(g) = 1/4,
  // mean(g·x̂) = −1.5s/4, so dx_j = s·(g_j − 0.25 + x̂_j·1.5s/4) = s·(g_j − 0.25 + 0.1875·(x_j −
  // 2.5)) = s·(0.46875, −0.34375, −0.15625, 0.03125).
  // Row 1 (constant, x̂ = 0) with dy = (0, 1, 0, 0): g = (0, 2, 0, 0), mean(g) = 0.5, so
  // dx = (1/√0.75)·(−0.5, 1.5, −0.5, −0.5). dγ = Σ dy·x̂ = (−1.5s, 0, 0, 0), dβ = Σ dy = (1, 1,
  // 0, 0).
  std::vector<double> const x{1, 2, 3, 4, 2, 2, 2, 2};
  std::vector<double> const gamma{1, 2, 0.5, -1};
  std::vector<double> const dy{1, 0, 0, 0, 0, 1, 0, 0};
  auto const g = ref::layer_norm_backward(dy, x, gamma, 2, 4, 0.75);
  double const s = 1.0 / std::sqrt(2.0);
  double const t = 1.0 / std::sqrt(0.75);
  std::vector<double> const dx{0.46875 * s, -0.34375 * s, -0.15625 * s, 0.03125 * s,
                               -0.5 * t,    1.5 * t,      -0.5 * t,     -0.5 * t};
  for (std::size_t i = 0; i < dx.size(); ++i) EXPECT_NEAR(g.dx[i], dx[i], 1e-15) << i;
  std::vector<double> const dgamma{-1.5 * s, 0, 0, 0};
  std::vector<double> const dbeta{1, 1, 0, 0};
  for (std::size_t j = 0; j < 4; ++j) {
    EXPECT_NEAR(g.dgamma[j], dgamma[j], 1e-15) << j;
    EXPECT_NEAR(g.dbeta[j], dbeta[j], 1e-15) << j;
  }
}

TEST(layer_norm_reference, backward_matches_central_finite_differences) {
  std::mt19937 rng{6};
  std::size_t const m = 3;
  std::size_t const n = 7;
  double const epsilon = 1e-5;
  auto x = random(m * n, rng, -2.0, 2.0);
  auto gamma = random(n, rng, 0.5, 1.5);
  auto beta = random(n, rng, -0.5, 0.5);
  auto const dy = random(m * n, rng, -1.0, 1.0);
  auto const g = ref::layer_norm_backward(dy, x, gamma, m, n, epsilon);
  // Central differences: truncation O(h²) ≈ 1e-12 here, rounding ≈ 1e-16·|L|/h ≈ 1e-10.
  double const h = 1e-6;
  double const bound = 1e-8;
  auto const numeric = [&](double& v) {
    double const saved = v;
    v = saved + h;
    double const up = loss(dy, x, gamma, beta, m, n, epsilon);
    v = saved - h;
    double const down = loss(dy, x, gamma, beta, m, n, epsilon);
    v = saved;
    return (up - down) / (2 * h);
  };
  for (std::size_t i = 0; i < m * n; ++i) EXPECT_NEAR(g.dx[i], numeric(x[i]), bound) << "x " << i;
  for (std::size_t j = 0; j < n; ++j) {
    EXPECT_NEAR(g.dgamma[j], numeric(gamma[j]), bound) << "gamma " << j;
    EXPECT_NEAR(g.dbeta[j], numeric(beta[j]), bound) << "beta " << j;
  }
  // Each row of dx sums to zero (the mean is removed) and is orthogonal to x̂ up to ε: with
  // Σx̂² = N·var·rstd² = N·(1 − ε·rstd²), Σ dx·x̂ = rstd·Σ(g·x̂)·ε·rstd².
  auto const r = ref::layer_norm(x, gamma, beta, m, n, epsilon);
  for (std::size_t i = 0; i < m; ++i) {
    double along_ones = 0.0;
    double along_normalized = 0.0;
    double g_normalized = 0.0;
    for (std::size_t j = 0; j < n; ++j) {
      double const normalized = (x[i * n + j] - r.mean[i]) * r.rstd[i];
      along_ones += g.dx[i * n + j];
      along_normalized += g.dx[i * n + j] * normalized;
      g_normalized += dy[i * n + j] * gamma[j] * normalized;
    }
    double const rstd = r.rstd[i];
    EXPECT_NEAR(along_ones, 0.0, 1e-12) << i;
    EXPECT_NEAR(along_normalized, rstd * g_normalized * epsilon * rstd * rstd, 1e-12) << i;
    EXPECT_GT(std::fabs(along_normalized), 1e-9) << i;  // not zero: ε is in the formula
  }
}
