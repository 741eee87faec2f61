// The arithmetic of the simulated cuBLASLt matmul. Each rule cites where it comes from; where
// the documentation is silent the choice is written next to the code.

#include "detail/matmul.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

#include "detail/block_workers.hpp"
#include "detail/runtime_state.hpp"

namespace graphstep::sim::detail {

namespace {

std::uint32_t bits_of(float value) noexcept {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

float float_of(std::uint32_t bits) noexcept {
  float value = 0.0F;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// IEEE binary16 from binary32, round to nearest even (cuda_fp16.h, __float2half: "round-to-
// nearest-even mode"), with subnormals, overflow to infinity and NaN kept a NaN.
std::uint16_t half_bits_of(float value) noexcept {
  std::uint32_t const bits = bits_of(value);
  std::uint32_t const sign = (bits >> 16U) & 0x8000U;
  std::uint32_t const exponent = (bits >> 23U) & 0xFFU;
  std::uint32_t mantissa = bits & 0x7FFFFFU;
  if (exponent == 0xFFU) {
    return static_cast<std::uint16_t>(sign | 0x7C00U | (mantissa != 0U ? 0x200U : 0U));
  }
  int const half_exponent = static_cast<int>(exponent) - 127 + 15;
  if (half_exponent >= 31) return static_cast<std::uint16_t>(sign | 0x7C00U);
  if (half_exponent <= 0) {
    if (half_exponent < -10) return static_cast<std::uint16_t>(sign);
    mantissa |= 0x800000U;
    auto const shift = static_cast<std::uint32_t>(14 - half_exponent);
    std::uint32_t result = mantissa >> shift;
    std::uint32_t const rest = mantissa & ((1U << shift) - 1U);
    std::uint32_t const halfway = 1U << (shift - 1U);
    if (rest > halfway || (rest == halfway && (result & 1U) != 0U)) ++result;
    return static_cast<std::uint16_t>(sign | result);
  }
  std::uint32_t result =
      sign | (static_cast<std::uint32_t>(half_exponent) << 10U) | (mantissa >> 13U);
  std::uint32_t const rest = mantissa & 0x1FFFU;
  // A carry out of the mantissa steps the exponent, up to infinity: still correctly rounded.
  if (rest > 0x1000U || (rest == 0x1000U && (result & 1U) != 0U)) ++result;
  return static_cast<std::uint16_t>(result);
}

float float_of_half(std::uint16_t half) noexcept {
  std::uint32_t const sign = (std::uint32_t{half} & 0x8000U) << 16U;
  std::uint32_t const exponent = (std::uint32_t{half} >> 10U) & 0x1FU;
  std::uint32_t const mantissa = std::uint32_t{half} & 0x3FFU;
  if (exponent == 0) {
    float const magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign != 0U ? -magnitude : magnitude;
  }
  if (exponent == 31) return float_of(sign | 0x7F800000U | (mantissa << 13U));
  return float_of(sign | ((exponent - 15U + 127U) << 23U) | (mantissa << 13U));
}

// bfloat16 from binary32, round to nearest even (cuda_bf16.h, __float2bfloat16: "round-to-
// nearest-even mode"); a NaN stays a quiet NaN.
std::uint16_t bfloat16_bits_of(float value) noexcept {
  if (std::isnan(value)) return 0x7FC0U;
  std::uint32_t const bits = bits_of(value);
  return static_cast<std::uint16_t>((bits + 0x7FFFU + ((bits >> 16U) & 1U)) >> 16U);
}

float element_of(matrix_operand const& operand, std::int64_t row, std::int64_t col,
                 std::int64_t batch) noexcept {
  return load_element(operand.data, operand.type,
                      batch * operand.batch_stride + col * operand.ld + row);
}

}  // namespace

std::int64_t size_of(element_type type) noexcept {
  return type == element_type::float32 ? 4 : 2;
}

std::size_t span_bytes(element_type type, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                       std::int64_t batch_count, std::int64_t batch_stride) noexcept {
  if (rows <= 0 || cols <= 0 || batch_count <= 0 || ld < 0 || batch_stride < 0) return 0;
  std::int64_t const elements = (batch_count - 1) * batch_stride + (cols - 1) * ld + rows;
  return static_cast<std::size_t>(elements * size_of(type));
}

float load_element(void const* base, element_type type, std::int64_t index) noexcept {
  auto const* bytes = static_cast<unsigned char const*>(base) + index * size_of(type);
  if (type == element_type::float32) {
    float value = 0.0F;
    std::memcpy(&value, bytes, sizeof value);
    return value;
  }
  std::uint16_t raw = 0;
  std::memcpy(&raw, bytes, sizeof raw);
  return type == element_type::float16 ? float_of_half(raw) : float_of(std::uint32_t{raw} << 16U);
}

void store_element(void* base, element_type type, std::int64_t index, float value) noexcept {
  auto* bytes = static_cast<unsigned char*>(base) + index * size_of(type);
  if (type == element_type::float32) {
    std::memcpy(bytes, &value, sizeof value);
    return;
  }
  std::uint16_t const raw =
      type == element_type::float16 ? half_bits_of(value) : bfloat16_bits_of(value);
  std::memcpy(bytes, &raw, sizeof raw);
}

// TF32 keeps fp32's exponent and 10 mantissa bits. Rounded to nearest, ties away from zero, as
// PTX's cvt.rna.tf32.f32 (PTX ISA, "cvt") and CUDA's __float_to_tf32 convert; the cuBLAS
// documentation does not say how its kernels convert (some tensor-core paths drop the low 13 bits
// instead). The difference is at most one TF32 unit in the last place per input; the conformance
// test's error budget allows for either.
float round_to_tf32(float value) noexcept {
  if (!std::isfinite(value)) return value;
  std::uint32_t bits = bits_of(value);
  bits += 0x1000U;  // half of the 13 dropped bits: ties go away from zero
  bits &= ~std::uint32_t{0x1FFFU};
  return float_of(bits);
}

// cuBLASLt's GELU epilogue is the tanh approximation (cuBLAS documentation, cublasLtEpilogue_t,
// "GELU ... x:=GELU(x)"; the fused kernels use 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))), the
// form graphstep's gelu_form::tanh reproduces).
float gelu_tanh(float x) noexcept {
  constexpr float sqrt_2_over_pi = 0.7978845608028654F;
  constexpr float cubic = 0.044715F;
  float const inner = sqrt_2_over_pi * (x + cubic * x * x * x);
  return 0.5F * x * (1.0F + std::tanh(inner));
}

// d/dx of the tanh form: 0.5(1 + t) + 0.5x(1 - t²)·sqrt(2/pi)(1 + 3·0.044715x²).
float gelu_tanh_derivative(float x) noexcept {
  constexpr float sqrt_2_over_pi = 0.7978845608028654F;
  constexpr float cubic = 0.044715F;
  float const t = std::tanh(sqrt_2_over_pi * (x + cubic * x * x * x));
  return 0.5F * (1.0F + t) +
         0.5F * x * (1.0F - t * t) * sqrt_2_over_pi * (1.0F + 3.0F * cubic * x * x);
}

namespace {

// Products of at least this many multiply-adds share their rows among the host threads that
// run grids (block_workers.hpp): below, waking a helper costs more than it saves.
constexpr std::size_t shared_product_terms = std::size_t{1} << 18;

// Calls `rows(first, last)` for ranges that cover [0, m) once, on the host threads that run
// grids where the product is large enough. Each row's terms are added in the same order
// whichever thread computes it, so the result does not depend on how rows are shared.
template <typename Rows>
void for_row_ranges(std::size_t m, std::size_t terms_per_row, Rows const& rows) {
  unsigned const threads = state().block_threads.threads;
  if (threads <= 1 || m < 2 || m * terms_per_row < shared_product_terms || platform_lock_lent()) {
    rows(std::size_t{0}, m);
    return;
  }
  // Whole cache lines of a column of D (16 floats) per range where there are enough rows.
  std::size_t const chunk = (m / (std::size_t{threads} * 4) + 15) / 16 * 16;
  std::atomic<std::size_t> next{0};
  run_on_block_threads(threads - 1, [&](bool /*on_helper*/) {
    for (std::size_t first = next.fetch_add(chunk); first < m; first = next.fetch_add(chunk)) {
      rows(first, std::min(m, first + chunk));
    }
  });
}

}  // namespace

void run_matmul(matmul_problem const& p) {
  auto const a_at = [&](std::int64_t row, std::int64_t kk, std::int64_t batch) {
    return p.transpose_a ? element_of(p.a, kk, row, batch) : element_of(p.a, row, kk, batch);
  };
  auto const b_at = [&](std::int64_t kk, std::int64_t col, std::int64_t batch) {
    return p.transpose_b ? element_of(p.b, col, kk, batch) : element_of(p.b, kk, col, batch);
  };
  // With CUBLAS_COMPUTE_32F_FAST_TF32 "the inputs are down-converted to TF32" (cublas_api.h,
  // cublasComputeType_t; cuBLAS documentation, "Tensor Core Usage"). 16-bit inputs are already
  // narrower than TF32, so rounding leaves them unchanged.
  auto const input = [&](float v) { return p.tf32 ? round_to_tf32(v) : v; };
  auto const m = static_cast<std::size_t>(p.m);
  auto const n = static_cast<std::size_t>(p.n);
  auto const k = static_cast<std::size_t>(p.k);
  std::vector<float> op_a(m * k);  // op(A), column-major m x k, as the multiplier reads it
  std::vector<float> op_b(k * n);  // op(B), column-major k x n
  std::vector<float> column_sums(m);  // DGELU_BGRAD: Σ over D's columns, per row
  for (std::int32_t batch = 0; batch < p.batch_count; ++batch) {
    for (std::size_t kk = 0; kk < k; ++kk) {
      for (std::size_t row = 0; row < m; ++row) {
        op_a[kk * m + row] =
            input(a_at(static_cast<std::int64_t>(row), static_cast<std::int64_t>(kk), batch));
      }
    }
    for (std::size_t col = 0; col < n; ++col) {
      for (std::size_t kk = 0; kk < k; ++kk) {
        op_b[col * k + kk] =
            input(b_at(static_cast<std::int64_t>(kk), static_cast<std::int64_t>(col), batch));
      }
    }
    std::fill(column_sums.begin(), column_sums.end(), 0.0F);
    for_row_ranges(m, n * k, [&](std::size_t first, std::size_t last) {
      // This range's accumulators and row sums, its own: rows another thread shares a cache
      // line with are written to at every term.
      std::vector<float> range_accumulators(last - first);
      std::vector<float> range_sums(last - first, 0.0F);
      std::size_t const count = last - first;
      for (std::size_t col = 0; col < n; ++col) {
        // fp32 accumulation, each element's terms in k order. A 16-bit or TF32 product is exact
        // in fp32; an fp32 product is rounded before the add, where a GPU's FFMA rounds once: at
        // most one rounding per term apart, inside the γ_k bound of any fp32 summation order.
        std::fill(range_accumulators.begin(), range_accumulators.end(), 0.0F);
        for (std::size_t kk = 0; kk < k; ++kk) {
          float const b_value = op_b[col * k + kk];
          float const* a_column = op_a.data() + kk * m + first;
          float* const accumulators = range_accumulators.data();
          for (std::size_t i = 0; i < count; ++i) accumulators[i] += a_column[i] * b_value;
        }
        for (std::size_t row = first; row < last; ++row) {
          auto const r = static_cast<std::int64_t>(row);
          auto const c = static_cast<std::int64_t>(col);
          // "D = alpha * op(A) * op(B) + beta * C" (cublasLt.h, cublasLtMatmul): C is read only
          // when beta is not zero ("if beta == 0, C does not have to be a valid input", cuBLAS
          // documentation, cublas<t>gemm), so an unset C does not leak into D.
          float x = p.alpha * range_accumulators[row - first];
          if (p.beta != 0.0F) x += p.beta * element_of(p.c, r, c, batch);
          // "Bias vector is broadcasted to all columns and added before applying final
          // postprocessing" (cublasLt.h, CUBLASLT_EPILOGUE_BIAS).
          if (p.steps.add_bias)
            x += load_element(p.bias, p.bias_type, batch * p.bias_batch_stride + r);
          std::int64_t const aux_index = batch * p.aux_batch_stride + c * p.aux_ld + r;
          // "outputs GELU input as a separate matrix" (CUBLASLT_EPILOGUE_GELU_AUX).
          if (p.steps.store_aux) store_element(p.aux, p.aux_type, aux_index, x);
          if (p.steps.gelu) x = gelu_tanh(x);
          // "Apply GELU gradient to matmul output", the GELU input read from aux
          // (CUBLASLT_EPILOGUE_DGELU).
          if (p.steps.gelu_gradient) {
            x *= gelu_tanh_derivative(load_element(p.aux, p.aux_type, aux_index));
          }
          range_sums[row - first] += x;
          store_element(p.d, p.d_type, batch * p.d_batch_stride + c * p.ldd + r, x);
        }
      }
      std::copy(range_sums.begin(), range_sums.end(),
                column_sums.begin() + static_cast<std::ptrdiff_t>(first));
    });
    std::int64_t const bias_base = batch * p.bias_batch_stride;
    // "Bias gradient in the auxiliary output" (CUBLASLT_EPILOGUE_DGELU_BGRAD): the forward's bias
    // was broadcast over D's columns, so its gradient sums each row of D over the columns, in
    // fp32, from the values before D is rounded (the documentation is silent on it).
    if (p.steps.bias_gradient_of_d) {
      for (std::size_t row = 0; row < m; ++row) {
        store_element(p.bias_gradient, p.bias_type, bias_base + static_cast<std::int64_t>(row),
                      column_sums[row]);
      }
    }
    // "The bias size corresponds to the number of rows of the matrix D. The reduction happens
    // over the GEMM's k dimension" (CUBLASLT_EPILOGUE_BGRADA); BGRADB the same for columns. The
    // sums read the inputs as stored (the TF32 rounding is the multiplier's).
    if (p.steps.bias_gradient_of_a) {
      for (std::int64_t row = 0; row < p.m; ++row) {
        float sum = 0.0F;
        for (std::int64_t kk = 0; kk < p.k; ++kk) sum += a_at(row, kk, batch);
        store_element(p.bias_gradient, p.bias_type, bias_base + row, sum);
      }
    }
    if (p.steps.bias_gradient_of_b) {
      for (std::int64_t col = 0; col < p.n; ++col) {
        float sum = 0.0F;
        for (std::int64_t kk = 0; kk < p.k; ++kk) sum += b_at(kk, col, batch);
        store_element(p.bias_gradient, p.bias_type, bias_base + col, sum);
      }
    }
  }
}

}  // namespace graphstep::sim::detail
