// graphstep_core: plain C++, includes no CUDA header.
// fp64 reference of ops/layer_norm.hpp; see ops/reference.hpp.

#include <cmath>
#include <cstddef>
#include <graphstep/ops/reference.hpp>
#include <vector>

namespace graphstep::ops::reference {

namespace {

struct row_statistics {
  double mean{};
  double rstd{};
};

// Two passes over the row: the mean first, then the biased variance around it.
row_statistics statistics_of(double const* row, std::size_t n, double epsilon) {
  double sum = 0.0;
  for (std::size_t j = 0; j < n; ++j) sum += row[j];
  double const mean = sum / static_cast<double>(n);
  double squares = 0.0;
  for (std::size_t j = 0; j < n; ++j) squares += (row[j] - mean) * (row[j] - mean);
  double const variance = squares / static_cast<double>(n);
  return {mean, 1.0 / std::sqrt(variance + epsilon)};
}

}  // namespace

layer_norm_result layer_norm(std::vector<double> const& x, std::vector<double> const& gamma,
                             std::vector<double> const& beta, std::size_t m, std::size_t n,
                             double epsilon) {
  layer_norm_result r{std::vector<double>(m * n), std::vector<double>(m), std::vector<double>(m)};
  for (std::size_t i = 0; i < m; ++i) {
    double const* const row = x.data() + i * n;
    row_statistics const s = statistics_of(row, n, epsilon);
    r.mean[i] = s.mean;
    r.rstd[i] = s.rstd;
    for (std::size_t j = 0; j < n; ++j) {
      r.y[i * n + j] = (row[j] - s.mean) * s.rstd * gamma[j] + beta[j];
    }
  }
  return r;
}

layer_norm_gradients layer_norm_backward(std::vector<double> const& dy,
                                         std::vector<double> const& x,
                                         std::vector<double> const& gamma, std::size_t m,
                                         std::size_t n, double epsilon) {
  layer_norm_gradients g{std::vector<double>(m * n), std::vector<double>(n, 0.0),
                         std::vector<double>(n, 0.0)};
  std::vector<double> normalized(n);
  for (std::size_t i = 0; i < m; ++i) {
    double const* const row = x.data() + i * n;
    double const* const grad = dy.data() + i * n;
    row_statistics const s = statistics_of(row, n, epsilon);
    // dx = rstd·(g − mean(g) − x̂·mean(g·x̂)) with g = dy·γ: the gradient through x̂ less its
    // components along the two directions the normalization removes (the constant and x̂).
    double sum_g = 0.0;
    double sum_g_normalized = 0.0;
    for (std::size_t j = 0; j < n; ++j) {
      normalized[j] = (row[j] - s.mean) * s.rstd;
      double const gj = grad[j] * gamma[j];
      sum_g += gj;
      sum_g_normalized += gj * normalized[j];
      g.dgamma[j] += grad[j] * normalized[j];
      g.dbeta[j] += grad[j];
    }
    double const mean_g = sum_g / static_cast<double>(n);
    double const mean_g_normalized = sum_g_normalized / static_cast<double>(n);
    for (std::size_t j = 0; j < n; ++j) {
      g.dx[i * n + j] = s.rstd * (grad[j] * gamma[j] - mean_g - normalized[j] * mean_g_normalized);
    }
  }
  return g;
}

}  // namespace graphstep::ops::reference
