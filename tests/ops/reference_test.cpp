// The fp64 reference the GPU tests compare against, checked on known values.

#include <gtest/gtest.h>

#include <cmath>
#include <graphstep/ops/reference.hpp>
#include <limits>
#include <random>

#include "common/gemm_numerics.hpp"

namespace go = graphstep::ops;
namespace ref = graphstep::ops::reference;

TEST(gelu_reference, known_values) {
  // erf form: GELU(1) = 0.5·(1 + erf(1/√2)) = 0.841344746...
  EXPECT_NEAR(ref::gelu(1.0, go::gelu_form::erf), 0.8413447460685429, 1e-15);
  EXPECT_NEAR(ref::gelu(-1.0, go::gelu_form::erf), -0.15865525393145707, 1e-15);
  // tanh form: 0.5·(1 + tanh(√(2/π)·1.044715)) = 0.841191990...
  EXPECT_NEAR(ref::gelu(1.0, go::gelu_form::tanh), 0.8411919906082768, 1e-12);
  for (auto form : {go::gelu_form::tanh, go::gelu_form::erf}) {
    EXPECT_EQ(ref::gelu(0.0, form), 0.0);
    EXPECT_NEAR(ref::gelu(10.0, form), 10.0, 1e-12);  // identity far right
    EXPECT_NEAR(ref::gelu(-10.0, form), 0.0, 1e-12);  // zero far left
    EXPECT_NEAR(ref::gelu_derivative(0.0, form), 0.5, 1e-15);
    EXPECT_NEAR(ref::gelu_derivative(10.0, form), 1.0, 1e-9);
  }
  // The two forms differ by at most about 1e-3 (the tanh form is an approximation).
  double worst = 0.0;
  for (double x = -6.0; x <= 6.0; x += 0.01) {
    worst = std::max(
        worst, std::fabs(ref::gelu(x, go::gelu_form::tanh) - ref::gelu(x, go::gelu_form::erf)));
  }
  EXPECT_LT(worst, 1e-3);
  EXPECT_GT(worst, 1e-5);
}

TEST(gelu_reference, tanh_form_values_worked_by_hand) {
  // GELU_tanh(x) = 0.5·x·(1 + tanh(u)), u = √(2/π)·(x + 0.044715·x³), √(2/π) = 0.7978845608...
  // x = 2:   u = 0.79788456·(2 + 0.35772) = 1.88118839, tanh u = 0.95459769,
  //          GELU = 0.5·2·1.95459769 = 1.95459769
  EXPECT_NEAR(ref::gelu(2.0, go::gelu_form::tanh), 1.954597694087775, 1e-12);
  // x = -1:  u = -0.83356197, tanh u = -0.68238398, GELU = -0.5·0.31761602 = -0.15880801
  EXPECT_NEAR(ref::gelu(-1.0, go::gelu_form::tanh), -0.15880800939172324, 1e-12);
  // x = 0.5: u = 0.79788456·(0.5 + 0.00558938) = 0.40340196, tanh u = 0.38285604,
  //          GELU = 0.25·1.38285604 = 0.34571401
  EXPECT_NEAR(ref::gelu(0.5, go::gelu_form::tanh), 0.34571400982514394, 1e-12);
  // x = -3:  u = -3.35694370, tanh u = -0.99757507, GELU = -1.5·0.00242493 = -0.00363739
  EXPECT_NEAR(ref::gelu(-3.0, go::gelu_form::tanh), -0.0036373920817729943, 1e-12);
  // erf form at 2: 2·Φ(2) = 2·0.97724987 = 1.95449974 (differs from the tanh form by 1e-4)
  EXPECT_NEAR(ref::gelu(2.0, go::gelu_form::erf), 1.9544997361036416, 1e-12);
  // GELU′_tanh(x) = 0.5·(1 + t) + 0.5·x·(1 − t²)·√(2/π)·(1 + 3·0.044715·x²), t = tanh u.
  // x = 1: 0.5·1.68238398 + 0.5·0.53434410·0.79788456·1.134145 = 0.84119199 + 0.24177209
  //        = 1.08296408
  EXPECT_NEAR(ref::gelu_derivative(1.0, go::gelu_form::tanh), 1.0829640838457826, 1e-12);
  // x = -1: the terms are 0.15880801 and -0.24177209: GELU′ = -0.08296408 (GELU′(−x) = 1 −
  // GELU′(x))
  EXPECT_NEAR(ref::gelu_derivative(-1.0, go::gelu_form::tanh), -0.08296408384578255, 1e-12);
  // GELU′_erf(1) = Φ(1) + φ(1) = 0.84134475 + 0.24197072 = 1.08331547
  EXPECT_NEAR(ref::gelu_derivative(1.0, go::gelu_form::erf), 1.0833154705876864, 1e-12);
  // Both forms are odd-symmetric around x/2: GELU(x) − GELU(−x) = x.
  for (auto form : {go::gelu_form::tanh, go::gelu_form::erf}) {
    for (double x : {0.1, 0.7, 1.3, 4.0}) {
      EXPECT_NEAR(ref::gelu(x, form) - ref::gelu(-x, form), x, 1e-14);
      EXPECT_NEAR(ref::gelu_derivative(x, form) + ref::gelu_derivative(-x, form), 1.0, 1e-14);
    }
  }
}

TEST(gelu_reference, derivative_matches_finite_differences) {
  for (auto form : {go::gelu_form::tanh, go::gelu_form::erf}) {
    for (double x = -5.0; x <= 5.0; x += 0.37) {
      double const h = 1e-6;
      double const numeric = (ref::gelu(x + h, form) - ref::gelu(x - h, form)) / (2 * h);
      EXPECT_NEAR(ref::gelu_derivative(x, form), numeric, 1e-8) << "x = " << x;
    }
  }
}

// The formulas give NaN at ±inf (inf·0) and, for GELU′, once x·x overflows (|x| > ~1e154 in
// fp64); the reference saturates instead, and agrees with the formula where both are finite.
TEST(gelu_reference, saturates_at_large_and_infinite_inputs) {
  double const inf = std::numeric_limits<double>::infinity();
  for (auto form : {go::gelu_form::tanh, go::gelu_form::erf}) {
    EXPECT_EQ(ref::gelu(inf, form), inf);
    EXPECT_EQ(ref::gelu(-inf, form), 0.0);
    EXPECT_EQ(ref::gelu(1e200, form), 1e200);
    EXPECT_EQ(ref::gelu(-1e200, form), 0.0);
    EXPECT_EQ(ref::gelu_derivative(inf, form), 1.0);
    EXPECT_EQ(ref::gelu_derivative(-inf, form), 0.0);
    EXPECT_EQ(ref::gelu_derivative(1e200, form), 1.0);
    EXPECT_EQ(ref::gelu_derivative(-1e200, form), 0.0);
    EXPECT_TRUE(std::isnan(ref::gelu(std::nan(""), form)));
    EXPECT_TRUE(std::isnan(ref::gelu_derivative(std::nan(""), form)));
    // Continuous across the saturation point: both sides give the saturated value already.
    for (double x : {39.0, 40.0, 41.0, 1e10}) {
      EXPECT_EQ(ref::gelu(x, form), x) << x;
      EXPECT_EQ(ref::gelu(-x, form), 0.0) << x;
      EXPECT_EQ(ref::gelu_derivative(x, form), 1.0) << x;
      EXPECT_NEAR(ref::gelu_derivative(-x, form), 0.0, 1e-300) << x;
    }
  }
}

// The GPU tests' bound for results through a fused GELU (gemm_numerics.hpp) must hold for
// cuBLASLt's hardware tanh, off by up to 2^-11 relative: evaluate GELU and GELU′ with tanh off
// by exactly that, in either direction on every element, over the tests' pre-activations.
TEST(gelu_reference, gpu_tolerance_covers_the_hardware_tanh) {
  double const c = std::sqrt(2.0 / 3.14159265358979323846);
  double const off = std::ldexp(1.0, -11);
  auto const t_of = [&](double x, double sign) {
    return std::tanh(c * (x + 0.044715 * x * x * x)) * (1.0 + sign * off);
  };
  std::mt19937 rng{3};
  std::uniform_real_distribution<double> pre{-2.0, 2.0};  // the backward tests' Z
  std::normal_distribution<double> wide{0.0, 30.0};       // beyond any test's forward
  for (double sign : {1.0, -1.0}) {
    double forward_error = 0.0;
    double forward_norm = 0.0;
    double slope_error = 0.0;
    double slope_norm = 0.0;
    for (int i = 0; i < 100000; ++i) {
      double const x = i % 2 == 0 ? pre(rng) : wide(rng);
      double const t = t_of(x, sign);
      double const want = ref::gelu(x, go::gelu_form::tanh);
      double const got = 0.5 * x * (1.0 + t);
      forward_error += (got - want) * (got - want);
      forward_norm += want * want;
      if (i % 2 == 0) {
        double const slope =
            0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x);
        double const want_slope = ref::gelu_derivative(x, go::gelu_form::tanh);
        slope_error += (slope - want_slope) * (slope - want_slope);
        slope_norm += want_slope * want_slope;
      }
    }
    double const forward = std::sqrt(forward_error / forward_norm);
    double const slope = std::sqrt(slope_error / slope_norm);
    for (auto numerics : graphstep::testing::all_gemm_numerics) {
      EXPECT_LT(forward, graphstep::testing::budget_of(numerics).gelu);
      EXPECT_LT(slope, graphstep::testing::budget_of(numerics).gelu);
    }
    // fp32 rounding alone would not cover it: the tanh term dominates the fp32 budget.
    EXPECT_GT(forward, 10 * graphstep::testing::tolerance(
                                {graphstep::dtype::float32, go::gemm_math::standard}, false));
  }
}

TEST(matmul_reference, small_products_by_hand) {
  // A[2,3]·B[2,3]ᵀ
  std::vector<double> const a{1, 2, 3, 4, 5, 6};
  std::vector<double> const b{1, 0, -1, 2, 1, 0};
  EXPECT_EQ(ref::matmul_abt(a, b, 2, 2, 3), (std::vector<double>{-2, 4, -2, 13}));
  // A[2,3]·C[3,2]
  std::vector<double> const c{1, 2, 3, 4, 5, 6};
  EXPECT_EQ(ref::matmul_ab(a, c, 2, 2, 3), (std::vector<double>{22, 28, 49, 64}));
  // A[2,3]ᵀ·D[2,2] = [3,2]
  std::vector<double> const d{1, 0, 0, 1};
  EXPECT_EQ(ref::matmul_atb(a, d, 2, 3, 2), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(ref::column_sums(a, 2, 3), (std::vector<double>{5, 7, 9}));
  EXPECT_DOUBLE_EQ(ref::relative_error({1, 1}, {1, 1}), 0.0);
  EXPECT_NEAR(ref::relative_error({1.1, 0}, {1, 0}), 0.1, 1e-12);
}
