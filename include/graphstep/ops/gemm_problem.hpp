#pragma once

/// @file ops/gemm_problem.hpp
/// @brief The GEMMs of a fully connected layer with GELU, forward and backward, described in
/// row-major terms and mapped onto column-major cuBLASLt calls, with every constraint of the
/// fused epilogues checked. Plain C++.
///
/// Row-major X[M,K] (activations), W[N,K] (weights, out × in), b[N]:
///
/// | kind | computes | epilogue |
/// | --- | --- | --- |
/// | `forward` | Y = X·Wᵀ | none |
/// | `forward_bias` | Y = X·Wᵀ + b | BIAS |
/// | `forward_bias_gelu` | Z = X·Wᵀ + b saved, Y = GELU(Z) | GELU_AUX_BIAS |
/// | `backward_data` | dX = dY·W | none |
/// | `backward_data_gelu` | dZ = (dY_next·W_next) ⊙ GELU′(Z), db = Σ_rows dZ | DGELU_BGRAD |
/// | `backward_weight` | dW = dYᵀ·X | none |
/// | `backward_weight_bias` | dW = dYᵀ·X, db = Σ_rows dY | BGRADB |
///
/// For the backward kinds M is the batch, N the layer's out features, K its in features (for
/// `backward_data_gelu`, N is the next layer's out features and K this layer's out features).
/// Epilogues need column-major output, so row-major Y = X·Wᵀ is computed as Yᵀ = W·Xᵀ.

#include <cstddef>
#include <cstdint>
#include <string>

namespace graphstep::ops {

/// @brief Data type and math: fp32 (fp32 math), tf32 (fp32 data on tensor cores), fp16 and
/// bf16 (16-bit data, fp32 accumulation).
enum class precision { fp32, tf32, fp16, bf16 };

/// @brief Which GELU: `tanh` is cuBLASLt's epilogue form, 0.5·x·(1 + tanh(√(2/π)(x + 0.044715x³)));
/// `erf` is the exact 0.5·x·(1 + erf(x/√2)), available on the unfused path only.
enum class gelu_form { tanh, erf };

enum class gemm_kind {
  forward,
  forward_bias,
  forward_bias_gelu,
  backward_data,
  backward_data_gelu,
  backward_weight,
  backward_weight_bias,
};

/// @brief cuBLASLt's epilogue for a kind (mirrors cublasLtEpilogue_t, without its header).
enum class epilogue { none, bias, gelu_aux_bias, dgelu_bgrad, bgradb };

struct gemm_problem {
  gemm_kind kind{gemm_kind::forward};
  std::int64_t m{};  ///< rows of the row-major output (the batch)
  std::int64_t n{};
  std::int64_t k{};
  precision type{precision::fp32};
};

/// @brief One column-major cuBLASLt call: D[m,n] = op(A)[m,k] · op(B)[k,n].
struct lt_call {
  bool transpose_a{};
  bool transpose_b{};
  std::int64_t m{}, n{}, k{};
  std::int64_t lda{}, ldb{}, ldc{};
  epilogue ep{epilogue::none};
  std::int64_t aux_ld{};       ///< leading dimension of the saved pre-activation (elements)
  std::int64_t bias_length{};  ///< bias or bias-gradient length
  /// Which row-major operand is A and which is B, by name, for documentation and errors.
  char const* a_operand{};
  char const* b_operand{};
};

/// @brief The column-major call for a row-major problem.
/// @throws usage_error (non-positive sizes, sizes beyond int32 that cuBLASLt cannot take)
[[nodiscard]] lt_call map_to_cublaslt(gemm_problem const& problem);

/// @brief Whether the fused path can run a problem with operands at these addresses; `reason`
/// names the constraint that fails and what to do.
struct support {
  bool fused{true};
  std::string reason;
};

/// @brief Addresses of the operands, for the 16-byte alignment the fused kernels want.
struct operand_addresses {
  std::uintptr_t a{}, b{}, d{}, bias{}, aux{};
};

/// @brief Checks the fused epilogue's constraints: the aux leading dimension must be a multiple
/// of 8 (so the layer's out features must be), matrix leading dimensions multiples of 16 bytes
/// for 16-bit types, operands 16-byte aligned.
[[nodiscard]] support can_fuse(gemm_problem const& problem, operand_addresses const& addresses);

/// @brief 2·m·n·k.
[[nodiscard]] double flops(gemm_problem const& problem) noexcept;

[[nodiscard]] std::size_t element_bytes(precision type) noexcept;
[[nodiscard]] char const* name(precision type) noexcept;
[[nodiscard]] char const* name(gemm_kind kind) noexcept;

}  // namespace graphstep::ops
