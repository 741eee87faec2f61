// The fp64 causal attention reference (ops/reference.hpp) that the GPU tests compare against:
// values worked by hand, the qkv layout (each head reads its own columns, position t only
// positions 0..t), and the backward against central finite differences of the forward.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <graphstep/error.hpp>
#include <graphstep/ops/reference.hpp>
#include <random>
#include <vector>

namespace gs = graphstep;
namespace ref = graphstep::ops::reference;

namespace {

std::vector<double> random_values(std::size_t n, std::mt19937& rng, double scale = 1.0) {
  std::uniform_real_distribution<double> dist{-scale, scale};
  std::vector<double> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

double dot(std::vector<double> const& a, std::vector<double> const& b) {
  double sum = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

}  // namespace

// B = 1, T = 2, H = 1, D = 1: rows [q, k, v] = [1, 2, 3] and [0.5, -1, 5]; 1/√D = 1.
TEST(attention_reference, two_positions_worked_by_hand) {
  std::vector<double> const qkv{1.0, 2.0, 3.0, 0.5, -1.0, 5.0};
  auto const r = ref::causal_attention(qkv, 1, 2, 1, 1);
  ASSERT_EQ(r.out.size(), 2U);
  ASSERT_EQ(r.logsumexp.size(), 2U);
  // t = 0 sees itself only: out = v0 = 3, logsumexp = q0·k0 = 2.
  EXPECT_DOUBLE_EQ(r.out[0], 3.0);
  EXPECT_DOUBLE_EQ(r.logsumexp[0], 2.0);
  // t = 1: scores q1·k0 = 1, q1·k1 = -0.5; logsumexp = 1 + log(1 + e^-1.5) = 1.2014132780;
  // p = (e^(1 - 1.2014132780), e^(-0.5 - 1.2014132780)) = (0.8175744762, 0.1824255238);
  // out = 3·0.8175744762 + 5·0.1824255238 = 3.3648510476.
  EXPECT_NEAR(r.logsumexp[1], 1.2014132779827524, 1e-14);
  EXPECT_NEAR(r.out[1], 3.3648510476127127, 1e-14);

  // dout = (1, 1). t = 0: P = 1, dP = v0·1 = 3 = delta, so dS = 0; dv0 += 1.
  // t = 1: dP = (3, 5), delta = Σ P·dP = out1 = 3.3648510476;
  // dS = (0.8175744762·(3 - 3.3648510476), 0.1824255238·(5 - 3.3648510476))
  //    = (-0.2982929041, 0.2982929041);
  // dq1 = dS·(k0, k1) = -0.2982929041·2 + 0.2982929041·(-1) = -0.8948787124;
  // dk0 = dS0·q1 = -0.1491464521, dk1 = dS1·q1 = 0.1491464521;
  // dv0 = 1 + 0.8175744762 = 1.8175744762, dv1 = 0.1824255238.
  auto const g = ref::causal_attention_backward({1.0, 1.0}, qkv, 1, 2, 1, 1);
  ASSERT_EQ(g.size(), 6U);
  EXPECT_NEAR(g[0], 0.0, 1e-15);                   // dq0
  EXPECT_NEAR(g[1], -0.14914645207033286, 1e-14);  // dk0
  EXPECT_NEAR(g[2], 1.8175744761936437, 1e-14);    // dv0
  EXPECT_NEAR(g[3], -0.8948787124219972, 1e-14);   // dq1
  EXPECT_NEAR(g[4], 0.14914645207033286, 1e-14);   // dk1
  EXPECT_NEAR(g[5], 0.18242552380635635, 1e-14);   // dv1
}

// With every query zero the scores are equal: position t averages v over 0..t and its
// logsumexp is log(t + 1), for every batch row and head, each head in its own columns.
TEST(attention_reference, equal_scores_average_the_values_of_the_prefix) {
  std::size_t const batch = 2;
  std::size_t const sequence = 5;
  std::size_t const heads = 3;
  std::size_t const head_dim = 4;
  std::size_t const row = 3 * heads * head_dim;
  std::vector<double> qkv(batch * sequence * row, 0.0);
  auto value = [](std::size_t b, std::size_t t, std::size_t h, std::size_t d) {
    return 100.0 * static_cast<double>(b) + 10.0 * static_cast<double>(h) +
           static_cast<double>(t * t) + 0.25 * static_cast<double>(d);
  };
  for (std::size_t b = 0; b < batch; ++b) {
    for (std::size_t t = 0; t < sequence; ++t) {
      for (std::size_t h = 0; h < heads; ++h) {
        for (std::size_t d = 0; d < head_dim; ++d) {
          std::size_t const base = (b * sequence + t) * row + h * head_dim + d;
          qkv[base + heads * head_dim] = 0.5 * static_cast<double>(t + h + d);  // keys: any
          qkv[base + 2 * heads * head_dim] = value(b, t, h, d);
        }
      }
    }
  }
  auto const r = ref::causal_attention(qkv, batch, sequence, heads, head_dim);
  for (std::size_t b = 0; b < batch; ++b) {
    for (std::size_t t = 0; t < sequence; ++t) {
      for (std::size_t h = 0; h < heads; ++h) {
        EXPECT_NEAR(r.logsumexp[(b * heads + h) * sequence + t],
                    std::log(static_cast<double>(t + 1)), 1e-14);
        for (std::size_t d = 0; d < head_dim; ++d) {
          double mean = 0.0;
          for (std::size_t j = 0; j <= t; ++j) mean += value(b, j, h, d);
          mean /= static_cast<double>(t + 1);
          EXPECT_NEAR(r.out[(b * sequence + t) * heads * head_dim + h * head_dim + d], mean, 1e-12)
              << "b " << b << " t " << t << " h " << h << " d " << d;
        }
      }
    }
  }
}

// Changing position 3 changes no output before it; changing head 1 changes no other head.
TEST(attention_reference, outputs_depend_on_the_prefix_and_their_own_head_only) {
  std::size_t const batch = 1;
  std::size_t const sequence = 6;
  std::size_t const heads = 2;
  std::size_t const head_dim = 3;
  std::size_t const row = 3 * heads * head_dim;
  std::mt19937 rng{7};  // NOLINT(cert-msc32-c,cert-msc51-cpp): a fixed, reproducible set
  auto const qkv = random_values(batch * sequence * row, rng);
  auto const base = ref::causal_attention(qkv, batch, sequence, heads, head_dim);

  auto later = qkv;
  for (std::size_t c = 0; c < row; ++c) later[3 * row + c] += 1.0;
  auto const changed = ref::causal_attention(later, batch, sequence, heads, head_dim);
  for (std::size_t i = 0; i < 3 * heads * head_dim; ++i) EXPECT_EQ(changed.out[i], base.out[i]);
  EXPECT_NE(changed.out[3 * heads * head_dim], base.out[3 * heads * head_dim]);

  auto other_head = qkv;
  for (std::size_t t = 0; t < sequence; ++t) {
    for (std::size_t part = 0; part < 3; ++part) {  // q, k and v of head 1
      for (std::size_t d = 0; d < head_dim; ++d) {
        other_head[t * row + part * heads * head_dim + head_dim + d] *= -2.0;
      }
    }
  }
  auto const moved = ref::causal_attention(other_head, batch, sequence, heads, head_dim);
  for (std::size_t t = 0; t < sequence; ++t) {
    for (std::size_t d = 0; d < head_dim; ++d) {
      EXPECT_EQ(moved.out[t * heads * head_dim + d], base.out[t * heads * head_dim + d]);
    }
    EXPECT_EQ(moved.logsumexp[t], base.logsumexp[t]);  // head 0's
    EXPECT_NE(moved.logsumexp[sequence + t], base.logsumexp[sequence + t]);
  }
}

// dL/dqkv for L = Σ dout ⊙ out, against (L(x + h) − L(x − h)) / 2h for every element. The
// central difference errs by about h²·|L‴|/6 ≈ 1e-11 plus rounding 1e-16·|L|/h ≈ 1e-11.
TEST(attention_reference, backward_matches_central_finite_differences) {
  std::mt19937 rng{11};  // NOLINT(cert-msc32-c,cert-msc51-cpp): a fixed, reproducible set
  struct shape {
    std::size_t batch, sequence, heads, head_dim;
  };
  for (auto const s : {shape{2, 5, 2, 3}, shape{1, 7, 1, 4}, shape{1, 1, 3, 2}}) {
    std::size_t const rows = s.batch * s.sequence;
    auto qkv = random_values(rows * 3 * s.heads * s.head_dim, rng, 1.5);
    auto const dout = random_values(rows * s.heads * s.head_dim, rng);
    auto const analytic =
        ref::causal_attention_backward(dout, qkv, s.batch, s.sequence, s.heads, s.head_dim);
    ASSERT_EQ(analytic.size(), qkv.size());
    auto loss = [&](std::vector<double> const& x) {
      return dot(dout, ref::causal_attention(x, s.batch, s.sequence, s.heads, s.head_dim).out);
    };
    double const h = 1e-5;
    double largest = 0.0;
    for (std::size_t i = 0; i < qkv.size(); ++i) {
      double const saved = qkv[i];
      qkv[i] = saved + h;
      double const up = loss(qkv);
      qkv[i] = saved - h;
      double const down = loss(qkv);
      qkv[i] = saved;
      double const numeric = (up - down) / (2 * h);
      EXPECT_NEAR(analytic[i], numeric, 1e-8) << "element " << i << " of T=" << s.sequence;
      largest = std::max(largest, std::fabs(numeric));
    }
    EXPECT_GT(largest, 1e-2);  // the gradient is not trivially zero
  }
}

// With T = 1 the softmax is over one score, a constant 1: out = v, dq = dk = 0, dv = dout.
TEST(attention_reference, one_position_passes_dout_to_the_values_only) {
  std::mt19937 rng{3};  // NOLINT(cert-msc32-c,cert-msc51-cpp): a fixed, reproducible set
  std::size_t const heads = 2;
  std::size_t const head_dim = 4;
  auto const qkv = random_values(3 * heads * head_dim, rng);
  auto const dout = random_values(heads * head_dim, rng);
  auto const r = ref::causal_attention(qkv, 1, 1, heads, head_dim);
  auto const g = ref::causal_attention_backward(dout, qkv, 1, 1, heads, head_dim);
  for (std::size_t i = 0; i < heads * head_dim; ++i) {
    EXPECT_DOUBLE_EQ(r.out[i], qkv[2 * heads * head_dim + i]);  // out = v
    EXPECT_EQ(g[i], 0.0);                                       // dq
    EXPECT_EQ(g[heads * head_dim + i], 0.0);                    // dk
    EXPECT_DOUBLE_EQ(g[2 * heads * head_dim + i], dout[i]);     // dv
  }
  for (std::size_t h = 0; h < heads; ++h) {  // logsumexp = q·k/√D
    double s = 0.0;
    for (std::size_t d = 0; d < head_dim; ++d) {
      s += qkv[h * head_dim + d] * qkv[heads * head_dim + h * head_dim + d];
    }
    EXPECT_NEAR(r.logsumexp[h], s / 2.0, 1e-15);
  }
}

TEST(attention_reference, refuses_sizes_that_do_not_match) {
  std::vector<double> const qkv(std::size_t{2 * 3 * 2 * 4}, 0.0);  // B·T = 2, H = 2, D = 4
  EXPECT_NO_THROW(static_cast<void>(ref::causal_attention(qkv, 1, 2, 2, 4)));
  EXPECT_THROW(static_cast<void>(ref::causal_attention(qkv, 1, 3, 2, 4)), gs::usage_error);
  EXPECT_THROW(static_cast<void>(ref::causal_attention(qkv, 1, 2, 0, 4)), gs::usage_error);
  EXPECT_THROW(
      static_cast<void>(ref::causal_attention_backward(std::vector<double>(15), qkv, 1, 2, 2, 4)),
      gs::usage_error);
}
