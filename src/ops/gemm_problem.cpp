#include <graphstep/error.hpp>
#include <graphstep/ops/gemm_problem.hpp>
#include <graphstep/ops/reference.hpp>

#include <cmath>
#include <limits>

namespace graphstep::ops {

std::size_t element_bytes(precision type) noexcept {
  return type == precision::fp16 || type == precision::bf16 ? 2 : 4;
}

char const* name(precision type) noexcept {
  switch (type) {
    case precision::fp32: return "fp32";
    case precision::tf32: return "tf32";
    case precision::fp16: return "fp16";
    case precision::bf16: return "bf16";
  }
  return "unknown";
}

char const* name(gemm_kind kind) noexcept {
  switch (kind) {
    case gemm_kind::forward: return "forward";
    case gemm_kind::forward_bias: return "forward_bias";
    case gemm_kind::forward_bias_gelu: return "forward_bias_gelu";
    case gemm_kind::backward_data: return "backward_data";
    case gemm_kind::backward_data_gelu: return "backward_data_gelu";
    case gemm_kind::backward_weight: return "backward_weight";
    case gemm_kind::backward_weight_bias: return "backward_weight_bias";
  }
  return "unknown";
}

double flops(gemm_problem const& p) noexcept {
  return 2.0 * static_cast<double>(p.m) * static_cast<double>(p.n) * static_cast<double>(p.k);
}

lt_call map_to_cublaslt(gemm_problem const& p) {
  GRAPHSTEP_EXPECTS(p.m > 0 && p.n > 0 && p.k > 0,
                    std::string{"gemm "} + name(p.kind) + ": sizes must be positive (M=" +
                        std::to_string(p.m) + ", N=" + std::to_string(p.n) +
                        ", K=" + std::to_string(p.k) + ")");
  constexpr std::int64_t limit = std::numeric_limits<std::int32_t>::max();
  GRAPHSTEP_EXPECTS(p.m <= limit && p.n <= limit && p.k <= limit,
                    std::string{"gemm "} + name(p.kind) + ": a dimension exceeds 2^31 - 1");
  lt_call c;
  switch (p.kind) {
    case gemm_kind::forward:
    case gemm_kind::forward_bias:
    case gemm_kind::forward_bias_gelu:
      // Yᵀ[N,M] = W[N,K] · Xᵀ[K,M]: W is stored as column-major Wᵀ (K×N, ld K).
      c = {true, false, p.n, p.m, p.k, p.k, p.k, p.n};
      c.a_operand = "W";
      c.b_operand = "X";
      c.bias_length = p.n;
      c.ep = p.kind == gemm_kind::forward
                 ? epilogue::none
                 : (p.kind == gemm_kind::forward_bias ? epilogue::bias : epilogue::gelu_aux_bias);
      if (c.ep == epilogue::gelu_aux_bias) c.aux_ld = p.n;
      break;
    case gemm_kind::backward_data:
    case gemm_kind::backward_data_gelu:
      // dXᵀ[K,M] = Wᵀ[K,N] · dYᵀ[N,M]: both stored column-major as they are needed.
      c = {false, false, p.k, p.m, p.n, p.k, p.n, p.k};
      c.a_operand = "W";
      c.b_operand = "dY";
      if (p.kind == gemm_kind::backward_data_gelu) {
        c.ep = epilogue::dgelu_bgrad;
        c.aux_ld = p.k;
        c.bias_length = p.k;
      }
      break;
    case gemm_kind::backward_weight:
    case gemm_kind::backward_weight_bias:
      // dWᵀ[K,N] = Xᵀ[K,M] · dY[M,N]: dY is stored as column-major dYᵀ (N×M, ld N).
      c = {false, true, p.k, p.n, p.m, p.k, p.n, p.k};
      c.a_operand = "X";
      c.b_operand = "dY";
      if (p.kind == gemm_kind::backward_weight_bias) {
        c.ep = epilogue::bgradb;
        c.bias_length = p.n;
      }
      break;
  }
  return c;
}

support can_fuse(gemm_problem const& p, operand_addresses const& at) {
  lt_call const c = map_to_cublaslt(p);
  if (c.ep == epilogue::gelu_aux_bias || c.ep == epilogue::dgelu_bgrad) {
    if (c.aux_ld % 8 != 0) {
      return {false, std::string{"gemm "} + name(p.kind) + ": the GELU epilogue saves the "
                     "pre-activation with a leading dimension of " + std::to_string(c.aux_ld) +
                     ", which cuBLASLt requires to be a multiple of 8: use a layer width that is "
                     "a multiple of 8, or allow the unfused fallback"};
    }
  }
  std::size_t const bytes = element_bytes(p.type);
  for (std::int64_t ld : {c.lda, c.ldb, c.ldc}) {
    if ((static_cast<std::size_t>(ld) * bytes) % 16 != 0) {
      return {false, std::string{"gemm "} + name(p.kind) + ": a leading dimension of " +
                         std::to_string(ld) + " " + name(p.type) +
                         " elements is not a multiple of 16 bytes, which the fused epilogue "
                         "kernels need: pad the dimension, or allow the unfused fallback"};
    }
  }
  struct named {
    char const* what;
    std::uintptr_t address;
  };
  for (named const& operand : {named{"A", at.a}, named{"B", at.b}, named{"D", at.d},
                               named{"bias", at.bias}, named{"aux", at.aux}}) {
    if (operand.address % 16 != 0) {
      return {false, std::string{"gemm "} + name(p.kind) + ": operand " + operand.what +
                         " is not 16-byte aligned; allocate it from graphstep::memory_pool "
                         "(256-byte aligned), or allow the unfused fallback"};
    }
  }
  return {};
}

namespace reference {

double gelu(double x, gelu_form form) {
  if (form == gelu_form::erf) return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
  double const c = std::sqrt(2.0 / 3.14159265358979323846);
  return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
}

double gelu_derivative(double x, gelu_form form) {
  double const pi = 3.14159265358979323846;
  if (form == gelu_form::erf) {
    return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) /
                                                            std::sqrt(2.0 * pi);
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

}  // namespace reference
}  // namespace graphstep::ops
