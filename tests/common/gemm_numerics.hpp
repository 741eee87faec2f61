#pragma once

// The element types and math modes the GEMM tests sweep: fp32, tf32 (float32 data on tensor
// cores), fp16 and bf16.

#include <array>
#include <graphstep/dtype.hpp>
#include <graphstep/ops/gemm_problem.hpp>

namespace graphstep::testing {

/// @brief One element type with the math that multiplies it.
struct gemm_numerics {
  dtype type;
  ops::gemm_math math;
};

inline constexpr std::array<gemm_numerics, 4> all_gemm_numerics{{
    {dtype::float32, ops::gemm_math::standard},
    {dtype::float32, ops::gemm_math::tf32},
    {dtype::float16, ops::gemm_math::standard},
    {dtype::bfloat16, ops::gemm_math::standard},
}};

/// @brief "fp32", "tf32", "fp16" or "bf16": short enough for the names of parameterized tests.
constexpr char const* short_name(gemm_numerics numerics) noexcept {
  if (numerics.math == ops::gemm_math::tf32) return "tf32";
  switch (numerics.type) {
    case dtype::float32: return "fp32";
    case dtype::float16: return "fp16";
    case dtype::bfloat16: return "bf16";
    case dtype::int32:
    case dtype::uint8: break;
  }
  return "unknown";
}

/// @brief Where the relative error (Frobenius norm) of a GPU result against the fp64 reference
/// comes from, for the GEMM tests: the reference sees the inputs already rounded to the storage
/// type, every product accumulates in fp32, and each term bounds its share of the error on a
/// real GPU (cuBLASLt 13.1 on sm_90), not on the simulator, which rounds less.
struct error_budget {
  /// Operands converted for the multiply. tf32 keeps 10 mantissa bits and cuBLASLt does not
  /// document how its kernels convert; a truncating conversion loses < 2^-10 of each operand,
  /// < 2^-9 of a product. fp32 products on COMPUTE_32F and 16-bit products in fp32 are exact.
  double conversion;
  /// fp32 accumulation over K ≤ 4096 terms of random sign: the probabilistic bound λ·√K·u with
  /// λ = 4 and u = 2^-24 (Higham and Mary, "A new approach to probabilistic rounding error
  /// analysis", 2019) is 1.5e-5; the worst case K·u would be 2.4e-4, which tiled GPU sums do
  /// not approach.
  double accumulation;
  /// Roundings to the storage type along the longest chain a test checks (the unfused backward:
  /// the GEMM output, then dZ after GELU′, then db from the stored dZ): 3u, with u = 2^-24
  /// (fp32), 2^-11 (fp16), 2^-8 (bf16).
  double storage;
  /// A fused GELU or GELU′: cuBLASLt's sm_90 epilogues evaluate tanh with tanh.approx.f32,
  /// relative error ≤ 2^-11 (PTX ISA, "tanh"). With δt = 2^-11·t on every element, GELU's error
  /// 0.5·x·δt is ≤ 0.71·2^-11 of ‖GELU‖ (the limit of ‖0.5·x·t‖/‖GELU(x)‖ for wide inputs), and
  /// GELU′'s error δt·(0.5 − x·t·√(2/π)(1 + 0.134145x²)) is 0.93·2^-11 of ‖GELU′‖ for
  /// pre-activations uniform in ±2, as in these tests (it grows as x³ beyond): 2^-11 covers both.
  /// The hand-written kernels use tanhf (2 ulp) and need nothing here.
  double gelu;
};

/// @brief The budget of one precision (see error_budget for where each number comes from).
constexpr error_budget budget_of(gemm_numerics numerics) noexcept {
  constexpr double accumulation = 4.0 * 64.0 / (1 << 24);  // 4·√4096·2^-24
  constexpr double gelu = 1.0 / (1 << 11);
  constexpr double tf32_truncation = 1.0 / (1 << 9);
  double unit_roundoff = 1.0 / (1 << 24);
  if (numerics.type == dtype::float16) unit_roundoff = 1.0 / (1 << 11);
  if (numerics.type == dtype::bfloat16) unit_roundoff = 1.0 / (1 << 8);
  double const conversion = numerics.math == ops::gemm_math::tf32 ? tf32_truncation : 0.0;
  return {conversion, accumulation, 3.0 * unit_roundoff, gelu};
}

/// @brief The relative-error bound of a result of this precision; `through_fused_gelu` when the
/// result passed through cuBLASLt's GELU or GELU′ epilogue (or is compared with one that did).
/// fp32 1.5e-5 / 5.0e-4, tf32 2.0e-3 / 2.5e-3, fp16 1.5e-3 / 2.0e-3, bf16 1.17e-2 / 1.22e-2.
constexpr double tolerance(gemm_numerics numerics, bool through_fused_gelu) noexcept {
  error_budget const b = budget_of(numerics);
  return b.conversion + b.accumulation + b.storage + (through_fused_gelu ? b.gelu : 0.0);
}

}  // namespace graphstep::testing
