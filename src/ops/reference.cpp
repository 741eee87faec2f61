// graphstep_core: plain C++, includes no CUDA header.
// fp64 reference math of the fused layer; see ops/reference.hpp.

#include <cmath>
#include <graphstep/ops/reference.hpp>

namespace graphstep::ops::reference {

namespace {
// Beyond |x| = 40 both forms have saturated in fp64: tanh(√(2/π)(x + 0.044715x³)) and
// erf(x/√2) round to ±1 and exp(−x²/2) underflows to 0, so the formulas give exactly x or −0
// and 1 or 0 there. Returning those values directly keeps them where the formulas would turn
// into NaN: x·x overflows for |x| above ~1e154, and ±inf meets a zero factor (inf·0).
constexpr double saturation = 40.0;
}  // namespace

double gelu(double x, gelu_form form) {
  if (std::isnan(x)) return x;
  if (x > saturation) return x;
  if (x < -saturation) return -0.0;
  if (form == gelu_form::erf) return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
  double const c = std::sqrt(2.0 / 3.14159265358979323846);
  return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
}

double gelu_derivative(double x, gelu_form form) {
  if (std::isnan(x)) return x;
  if (x > saturation) return 1.0;
  if (x < -saturation) return 0.0;
  double const pi = 3.14159265358979323846;
  if (form == gelu_form::erf) {
    return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))) +
           x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * pi);
  }
  double const c = std::sqrt(2.0 / pi);
  double const inner = c * (x + 0.044715 * x * x * x);
  double const t = std::tanh(inner);
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x);
}

std::vector<double> matmul_abt(std::vector<double> const& a, std::vector<double> const& b,
                               std::size_t m, std::size_t n, std::size_t k) {
  std::vector<double> c(m * n, 0.0);
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (std::size_t p = 0; p < k; ++p) sum += a[i * k + p] * b[j * k + p];
      c[i * n + j] = sum;
    }
  }
  return c;
}

std::vector<double> matmul_ab(std::vector<double> const& a, std::vector<double> const& b,
                              std::size_t m, std::size_t n, std::size_t k) {
  std::vector<double> c(m * n, 0.0);
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t p = 0; p < k; ++p) {
      double const x = a[i * k + p];
      for (std::size_t j = 0; j < n; ++j) c[i * n + j] += x * b[p * n + j];
    }
  }
  return c;
}

std::vector<double> matmul_atb(std::vector<double> const& a, std::vector<double> const& b,
                               std::size_t m, std::size_t n, std::size_t k) {
  std::vector<double> c(n * k, 0.0);
  for (std::size_t r = 0; r < m; ++r) {
    for (std::size_t i = 0; i < n; ++i) {
      double const x = a[r * n + i];
      for (std::size_t j = 0; j < k; ++j) c[i * k + j] += x * b[r * k + j];
    }
  }
  return c;
}

std::vector<double> column_sums(std::vector<double> const& a, std::size_t m, std::size_t n) {
  std::vector<double> sums(n, 0.0);
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j) sums[j] += a[i * n + j];
  }
  return sums;
}

double relative_error(std::vector<double> const& got, std::vector<double> const& want) {
  double difference = 0.0;
  double norm = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    double const d = got[i] - want[i];
    difference += d * d;
    norm += want[i] * want[i];
  }
  if (norm == 0.0) return std::sqrt(difference);
  return std::sqrt(difference / norm);
}

}  // namespace graphstep::ops::reference
