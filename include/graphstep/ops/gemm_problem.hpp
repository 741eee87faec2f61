#pragma once

/// @file ops/gemm_problem.hpp
/// @brief The GEMMs of a fully connected layer with GELU, forward and backward, described in
/// row-major terms and mapped onto column-major cuBLASLt calls, with every constraint of the
/// fused epilogues checked and the choice between the fused and the unfused path made here.
/// Plain C++: no CUDA header, so all of it is tested on machines without a GPU.
///
/// Row-major X[M,K] (activations), W[N,K] (weights, out × in), b[N]:
///
/// | kind | computes | epilogue |
/// | --- | --- | --- |
/// | `forward` | Y = X·Wᵀ | none |
/// | `forward_bias` | Y = X·Wᵀ + b | BIAS |
/// | `forward_gelu` | Z = X·Wᵀ saved, Y = GELU(Z) | GELU_AUX |
/// | `forward_bias_gelu` | Z = X·Wᵀ + b saved, Y = GELU(Z) | GELU_AUX_BIAS |
/// | `backward_data` | dX = dY·W | none |
/// | `backward_data_dgelu` | dZ = (dY_next·W_next) ⊙ GELU′(Z) | DGELU |
/// | `backward_data_gelu` | dZ = (dY_next·W_next) ⊙ GELU′(Z), db = Σ_rows dZ | DGELU_BGRAD |
/// | `backward_weight` | dW = dYᵀ·X | none |
/// | `backward_weight_bias` | dW = dYᵀ·X, db = Σ_rows dY | BGRADB |
///
/// For the backward kinds M is the batch, N the layer's out features, K its in features (for
/// the two `backward_data_*gelu` kinds, N is the next layer's out features and K this layer's
/// out features, the width of the saved pre-activation Z[M,K]).
/// Epilogues need column-major output, so row-major Y = X·Wᵀ is computed as Yᵀ = W·Xᵀ.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <graphstep/dtype.hpp>
#include <string>
#include <vector>

namespace graphstep::ops {

/// @brief How the GEMM multiplies its elements; the element type itself is a `dtype`.
/// `standard`: fp32 math on float32 data (COMPUTE_32F), tensor cores on 16-bit data. `tf32`:
/// float32 data multiplied on tensor cores in tf32 (COMPUTE_32F_FAST_TF32); float32 data only.
/// Every mode accumulates in fp32.
enum class gemm_math { standard, tf32 };

/// @brief Which GELU: `tanh` is cuBLASLt's epilogue form, 0.5·x·(1 + tanh(√(2/π)(x + 0.044715x³)));
/// `erf` is the exact 0.5·x·(1 + erf(x/√2)), available on the unfused path only.
enum class gelu_form { tanh, erf };

/// @brief Which GEMM of the layer (see the table in this file's description).
enum class gemm_kind {
  forward,
  forward_bias,
  forward_bias_gelu,
  backward_data,
  backward_data_gelu,
  backward_weight,
  backward_weight_bias,
  forward_gelu,
  backward_data_dgelu,
};

/// @brief cuBLASLt's epilogue for a kind (mirrors cublasLtEpilogue_t, without its header).
enum class epilogue { none, bias, gelu_aux_bias, dgelu_bgrad, bgradb, gelu_aux, dgelu };

/// @brief One GEMM of the layer in row-major terms.
struct gemm_problem {
  gemm_kind kind{gemm_kind::forward};
  std::int64_t m{};  ///< rows of the row-major output (the batch)
  std::int64_t n{};
  std::int64_t k{};
  /// Element type of inputs, output, bias, bias gradient and pre-activation alike.
  dtype type{dtype::float32};
  gemm_math math{gemm_math::standard};
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

/// @brief The column-major call for a row-major problem. cuBLASLt's A is always the row-major
/// `rhs` operand (W, or X for the weight gradient) and its B the `lhs` (X or dY).
/// @throws usage_error (non-positive sizes, sizes beyond int32 that cuBLASLt cannot take, tf32
/// math on 16-bit data)
[[nodiscard]] lt_call map_to_cublaslt(gemm_problem const& problem);

/// @brief Whether the fused path can run a problem with operands at these addresses; `reason`
/// names the constraint that fails and what to do.
struct support {
  bool fused{true};
  std::string reason;
};

/// @brief Addresses of the operands, for the 16-byte alignment the fused kernels want. `a` and
/// `b` are cuBLASLt's A and B (the row-major rhs and lhs), `bias` the bias or bias-gradient.
struct operand_addresses {
  std::uintptr_t a{}, b{}, d{}, bias{}, aux{};
};

/// @brief Checks the fused epilogue's constraints: the aux leading dimension must be a multiple
/// of 8 and at least the rows of D (so the layer's out features must be a multiple of 8),
/// matrix leading dimensions multiples of 16 bytes, every operand 16-byte aligned. A kind
/// without an epilogue has nothing to fuse and is always supported.
/// @throws usage_error (bad sizes, as map_to_cublaslt)
[[nodiscard]] support can_fuse(gemm_problem const& problem, operand_addresses const& addresses);

/// @brief How a `gemm` is made; the defaults fuse or fail loudly.
struct gemm_options {
  gelu_form form{gelu_form::tanh};
  /// Take the unfused path (plain GEMM + kernels) when the fused one cannot run, instead of
  /// raising usage_error. The erf form always takes it: cuBLASLt's GELU is the tanh form.
  bool allow_unfused{false};
  /// Force the unfused path (the benchmark baseline).
  bool force_unfused{false};
  /// Time up to this many of cuBLASLt's top candidates with CUDA events and keep the fastest;
  /// 1 keeps the heuristic's first choice.
  int autotune_candidates{1};
};

/// @brief A kernel of the unfused path, run after the plain GEMM, in the order listed.
enum class unfused_kernel {
  bias,                  ///< out += bias
  gelu,                  ///< pre_activation = out; out = GELU(out)
  bias_gelu,             ///< pre_activation = out + bias; out = GELU(pre_activation)
  gelu_backward,         ///< out ⊙= GELU′(pre_activation)
  bias_gradient_of_out,  ///< bias_gradient = Σ_rows out (after gelu_backward)
  bias_gradient_of_lhs,  ///< bias_gradient = Σ_rows lhs (dY of the weight gradient)
};

/// @brief The path a `gemm` takes: the GEMM's epilogue, and the kernels after it when unfused.
struct path_decision {
  bool fused{true};
  /// Why the unfused path was taken; empty when fused.
  std::string reason;
  /// The epilogue set on the GEMM (none on the unfused path).
  epilogue gemm_epilogue{epilogue::none};
  std::vector<unfused_kernel> kernels;
};

/// @brief Chooses between the fused epilogue and the unfused path (plain GEMM, then kernels).
/// The unfused path is taken when forced, when the erf form is asked of a GELU kind, or when
/// `can_fuse` fails and `allow_unfused` is set.
/// @throws usage_error when the fused path cannot run and the unfused one is not allowed; the
/// message names the constraint and what to do
[[nodiscard]] path_decision decide_path(gemm_problem const& problem,
                                        operand_addresses const& addresses,
                                        gemm_options const& options);

/// @brief The unfused path for a problem, with `reason` recorded (used when cuBLASLt itself
/// offers no algorithm for a fused epilogue).
[[nodiscard]] path_decision unfused_path(gemm_problem const& problem, std::string reason);

/// @brief The next path when cuBLASLt's heuristic offers no algorithm for `current` with
/// `workspace_bytes` of workspace: the unfused path when `current` is a fused epilogue and
/// `options.allow_unfused` is set. `what` starts the messages.
/// @throws usage_error when there is no next path: a fused epilogue without allow_unfused
/// (naming both remedies), or a plain GEMM (asking for more workspace)
[[nodiscard]] path_decision path_without_algorithm(gemm_problem const& problem,
                                                   path_decision const& current,
                                                   gemm_options const& options,
                                                   std::size_t workspace_bytes,
                                                   std::string const& what);

/// @brief The largest power of two, up to 256, that divides `address` (256 for null).
[[nodiscard]] std::uint32_t alignment_of(std::uintptr_t address) noexcept;

/// @brief Everything cuBLASLt's algorithm choice for a `gemm` depends on, for the process-wide
/// cache of chosen algorithms: device, kind, path (the epilogue set on the GEMM), shape,
/// element type and math, autotune count, workspace, and the alignment of every pointer the
/// heuristic sees. A/B/C/D alignments reach it through CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES;
/// the bias and aux pointers it reads from the descriptor (CUBLASLT_MATMUL_DESC_BIAS_POINTER,
/// CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER), so an algorithm chosen for a 256-byte aligned
/// bias may need 16-byte vector loads another gemm's bias cannot serve. Alignments of pointers
/// the GEMM's epilogue does not use are 0, so they do not split the cache.
struct algorithm_key {
  int device{};
  gemm_kind kind{gemm_kind::forward};
  epilogue gemm_epilogue{epilogue::none};
  std::int64_t m{}, n{}, k{};
  dtype type{dtype::float32};
  gemm_math math{gemm_math::standard};
  int autotune_candidates{};
  std::uint32_t align_a{}, align_b{}, align_d{}, align_bias{}, align_aux{};
  std::size_t workspace_bytes{};
};
[[nodiscard]] bool operator<(algorithm_key const& lhs, algorithm_key const& rhs) noexcept;
[[nodiscard]] bool operator==(algorithm_key const& lhs, algorithm_key const& rhs) noexcept;

/// @brief The cache key of a `gemm` on `device` taking `path` with operands at `addresses`.
/// @throws usage_error (bad sizes, as map_to_cublaslt)
[[nodiscard]] algorithm_key algorithm_key_for(int device, gemm_problem const& problem,
                                              path_decision const& path,
                                              operand_addresses const& addresses,
                                              int autotune_candidates, std::size_t workspace_bytes);

/// @brief Whether a kind's epilogue involves GELU (forward or derivative).
[[nodiscard]] bool uses_gelu(gemm_kind kind) noexcept;

/// @brief The element type of a layer whose inputs and output have these types, multiplied
/// with `math`.
/// @throws usage_error for a combination the layer does not run (mixed types, tf32 on 16-bit
/// data), naming what to do instead
[[nodiscard]] dtype element_type_for(dtype inputs, dtype output, gemm_math math);

/// @brief 2·m·n·k.
[[nodiscard]] double flops(gemm_problem const& problem) noexcept;

/// @brief "standard" or "tf32".
[[nodiscard]] char const* name(gemm_math math) noexcept;
/// @brief The problem for messages: its kind, element type (and math when not the standard
/// one) and sizes, "gemm forward_bias (float32 with tf32 math, M=64 N=128 K=32)".
[[nodiscard]] std::string describe(gemm_problem const& problem);
/// @brief The kind's enumerator name, e.g. "forward_bias_gelu".
[[nodiscard]] char const* name(gemm_kind kind) noexcept;
/// @brief cuBLASLt's name of the epilogue without its prefix, e.g. "GELU_AUX_BIAS".
[[nodiscard]] char const* name(epilogue ep) noexcept;

}  // namespace graphstep::ops
