// graphstep_core: plain C++, includes no CUDA header.
// fp64 reference of ops/attention.hpp; see ops/reference.hpp.
//
// Written from the definitions, one (batch row, head, query) at a time, so that it shares no
// shortcut with the kernels: the backward forms delta from P ⊙ dP (not from dout · out) and
// recomputes the probabilities from the scores.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <graphstep/error.hpp>
#include <graphstep/ops/reference.hpp>
#include <limits>
#include <string>
#include <vector>

namespace graphstep::ops::reference {

namespace {

// Where q, k and v of (b, t, h) start in qkv[B·T, 3·H·D], and the head's slice of a [B·T, H·D]
// row.
struct attention_layout {
  std::size_t batch, sequence, heads, head_dim;

  [[nodiscard]] std::size_t qkv_row() const { return 3 * heads * head_dim; }
  [[nodiscard]] std::size_t out_row() const { return heads * head_dim; }
  [[nodiscard]] std::size_t q(std::size_t b, std::size_t t, std::size_t h) const {
    return (b * sequence + t) * qkv_row() + h * head_dim;
  }
  [[nodiscard]] std::size_t k(std::size_t b, std::size_t t, std::size_t h) const {
    return q(b, t, h) + heads * head_dim;
  }
  [[nodiscard]] std::size_t v(std::size_t b, std::size_t t, std::size_t h) const {
    return q(b, t, h) + 2 * heads * head_dim;
  }
  [[nodiscard]] std::size_t out(std::size_t b, std::size_t t, std::size_t h) const {
    return (b * sequence + t) * out_row() + h * head_dim;
  }
  [[nodiscard]] double dot(std::vector<double> const& x, std::size_t i,
                           std::vector<double> const& y, std::size_t j) const {
    double sum = 0.0;
    for (std::size_t d = 0; d < head_dim; ++d) sum += x[i + d] * y[j + d];
    return sum;
  }
};

attention_layout checked_layout(std::vector<double> const& qkv, std::size_t batch,
                                std::size_t sequence, std::size_t heads, std::size_t head_dim,
                                char const* what) {
  GRAPHSTEP_EXPECTS(batch > 0 && sequence > 0 && heads > 0 && head_dim > 0,
                    std::string{what} + ": sizes must be positive");
  attention_layout const layout{batch, sequence, heads, head_dim};
  GRAPHSTEP_EXPECTS(qkv.size() == batch * sequence * layout.qkv_row(),
                    std::string{what} + ": qkv must hold B·T rows of 3·H·D values (" +
                        std::to_string(batch * sequence * layout.qkv_row()) + "), not " +
                        std::to_string(qkv.size()));
  return layout;
}

// The causal scores q_t·k_t'/√D for t' = 0..t, and their log Σ exp.
double scores_of(attention_layout const& l, std::vector<double> const& qkv, std::size_t b,
                 std::size_t h, std::size_t t, std::vector<double>& scores) {
  double const scale = 1.0 / std::sqrt(static_cast<double>(l.head_dim));
  scores.assign(t + 1, 0.0);
  double max = -std::numeric_limits<double>::infinity();
  for (std::size_t j = 0; j <= t; ++j) {
    scores[j] = l.dot(qkv, l.q(b, t, h), qkv, l.k(b, j, h)) * scale;
    max = std::max(max, scores[j]);
  }
  double sum = 0.0;
  for (double s : scores) sum += std::exp(s - max);
  return max + std::log(sum);
}

}  // namespace

attention_result causal_attention(std::vector<double> const& qkv, std::size_t batch,
                                  std::size_t sequence, std::size_t heads, std::size_t head_dim) {
  auto const l = checked_layout(qkv, batch, sequence, heads, head_dim, "causal_attention");
  attention_result result{std::vector<double>(batch * sequence * l.out_row(), 0.0),
                          std::vector<double>(batch * heads * sequence, 0.0)};
  std::vector<double> scores;
  for (std::size_t b = 0; b < batch; ++b) {
    for (std::size_t h = 0; h < heads; ++h) {
      for (std::size_t t = 0; t < sequence; ++t) {
        double const lse = scores_of(l, qkv, b, h, t, scores);
        result.logsumexp[(b * heads + h) * sequence + t] = lse;
        std::size_t const o = l.out(b, t, h);
        for (std::size_t j = 0; j <= t; ++j) {
          double const p = std::exp(scores[j] - lse);
          std::size_t const v = l.v(b, j, h);
          for (std::size_t d = 0; d < head_dim; ++d) result.out[o + d] += p * qkv[v + d];
        }
      }
    }
  }
  return result;
}

std::vector<double> causal_attention_backward(std::vector<double> const& dout,
                                              std::vector<double> const& qkv, std::size_t batch,
                                              std::size_t sequence, std::size_t heads,
                                              std::size_t head_dim) {
  auto const l = checked_layout(qkv, batch, sequence, heads, head_dim, "causal_attention_backward");
  GRAPHSTEP_EXPECTS(dout.size() == batch * sequence * l.out_row(),
                    "causal_attention_backward: dout must hold B·T rows of H·D values");
  double const scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  std::vector<double> dqkv(qkv.size(), 0.0);
  std::vector<double> scores;
  std::vector<double> p;
  std::vector<double> dp;
  for (std::size_t b = 0; b < batch; ++b) {
    for (std::size_t h = 0; h < heads; ++h) {
      for (std::size_t t = 0; t < sequence; ++t) {
        double const lse = scores_of(l, qkv, b, h, t, scores);
        std::size_t const g = l.out(b, t, h);
        p.assign(t + 1, 0.0);
        dp.assign(t + 1, 0.0);
        double delta = 0.0;  // Σ_t' P·dP: the softmax Jacobian's shared term
        for (std::size_t j = 0; j <= t; ++j) {
          p[j] = std::exp(scores[j] - lse);
          dp[j] = l.dot(dout, g, qkv, l.v(b, j, h));
          delta += p[j] * dp[j];
        }
        std::size_t const q = l.q(b, t, h);
        for (std::size_t j = 0; j <= t; ++j) {
          double const ds = p[j] * (dp[j] - delta) * scale;  // ∂L/∂(q·k), the 1/√D included
          std::size_t const k = l.k(b, j, h);
          std::size_t const v = l.v(b, j, h);
          for (std::size_t d = 0; d < head_dim; ++d) {
            dqkv[q + d] += ds * qkv[k + d];
            dqkv[k + d] += ds * qkv[q + d];
            dqkv[v + d] += p[j] * dout[g + d];
          }
        }
      }
    }
  }
  return dqkv;
}

}  // namespace graphstep::ops::reference
