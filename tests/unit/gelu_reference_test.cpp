// The fp64 reference the GPU tests compare against, checked on known values.

#include <graphstep/ops/reference.hpp>

#include <gtest/gtest.h>

#include <cmath>

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
    EXPECT_NEAR(ref::gelu(10.0, form), 10.0, 1e-12);   // identity far right
    EXPECT_NEAR(ref::gelu(-10.0, form), 0.0, 1e-12);   // zero far left
    EXPECT_NEAR(ref::gelu_derivative(0.0, form), 0.5, 1e-15);
    EXPECT_NEAR(ref::gelu_derivative(10.0, form), 1.0, 1e-9);
  }
  // The two forms differ by at most about 1e-3 (the tanh form is an approximation).
  double worst = 0.0;
  for (double x = -6.0; x <= 6.0; x += 0.01) {
    worst = std::max(worst, std::fabs(ref::gelu(x, go::gelu_form::tanh) -
                                      ref::gelu(x, go::gelu_form::erf)));
  }
  EXPECT_LT(worst, 1e-3);
  EXPECT_GT(worst, 1e-5);
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
