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
  }
  return "unknown";
}

}  // namespace graphstep::testing
