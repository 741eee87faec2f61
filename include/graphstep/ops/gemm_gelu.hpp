#pragma once

/// @file ops/gemm_gelu.hpp
/// @brief Linear layers with bias and GELU, forward and backward, on cuBLASLt epilogues, set up
/// before capture and enqueued capturably.
///
/// CUTLASS's shape: `can_implement` → `workspace_size` → construct (initialize: descriptors,
/// algorithm choice from pointer-aware heuristics, optional autotune, one eager run) →
/// `run(stream)`, which issues only cublasLtMatmul (plus the small kernels of the unfused path)
/// and is safe under stream capture. The operands are static buffers: their addresses are part
/// of the plan, as they are part of a captured graph.
///
/// A two-layer MLP (fc1 + GELU, fc2) runs its backward in three GEMMs plus the input gradient:
/// fc2 `backward_weight_bias` (dW2 and db2 in one GEMM), `backward_data_gelu` through fc2 into
/// fc1 (dZ1 and db1 in one GEMM, reading fc1's saved pre-activation), fc1 `backward_weight`,
/// and `backward_data` for dX when the input needs a gradient.

#include <graphstep/ops/gemm_problem.hpp>
#include <graphstep/stream_view.hpp>

#include <cublasLt.h>

#include <cstddef>
#include <memory>
#include <string>

namespace graphstep::ops {

namespace detail {
struct lt_handle_deleter {
  using pointer = cublasLtHandle_t;
  void operator()(pointer handle) const noexcept;
};
struct lt_state;
}  // namespace detail

/// @brief An owning cuBLASLt handle. Move-only.
class cublaslt_handle {
 public:
  /// @throws cublas_error
  cublaslt_handle();
  [[nodiscard]] cublasLtHandle_t get() const noexcept { return handle_.get(); }

 private:
  std::unique_ptr<cublasLtHandle_t, detail::lt_handle_deleter> handle_;
};

/// @brief Operands in the row-major formula of each kind:
/// forward: out = lhs·rhsᵀ (+ bias) with lhs = X[M,K], rhs = W[N,K], out = Y[M,N];
/// backward_data: out = lhs·rhs with lhs = dY[M,N], rhs = W[N,K], out = dX[M,K];
/// backward_weight: out = lhsᵀ·rhs with lhs = dY[M,N], rhs = X[M,K], out = dW[N,K].
struct gemm_operands {
  void const* lhs{};
  void const* rhs{};
  void* out{};
  void const* bias{};       ///< forward_bias, forward_bias_gelu: [N]
  void* pre_activation{};   ///< forward_bias_gelu writes it, backward_data_gelu reads it
  void* bias_gradient{};    ///< backward_data_gelu: [K]; backward_weight_bias: [N]
};

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

/// @brief One planned GEMM of a layer.
class gemm_plan {
 public:
  /// @brief Whether the fused path can run; `reason` says which constraint fails.
  [[nodiscard]] static support can_implement(gemm_problem const& problem,
                                             gemm_operands const& operands);
  /// @brief Recommended workspace: 32 MiB on sm90 and newer, 4 MiB before (cuBLAS docs).
  /// @throws cuda_error
  [[nodiscard]] static std::size_t workspace_size();

  /// @brief Initializes the plan and runs it once on `stream` (which must not be capturing).
  /// @param workspace device memory of `workspace_bytes`, 256-byte aligned (from the pool)
  /// @throws usage_error (unsupported without fallback, missing operands, a capturing stream,
  /// misaligned workspace), cublas_error, cuda_error
  gemm_plan(cublaslt_handle const& handle, gemm_problem const& problem,
            gemm_operands const& operands, void* workspace, std::size_t workspace_bytes,
            gemm_options const& options, stream_view stream);
  ~gemm_plan();
  gemm_plan(gemm_plan&&) noexcept;
  gemm_plan& operator=(gemm_plan&&) noexcept;

  /// @brief Enqueues the GEMM (and, unfused, its kernels) on `stream`. Capturable.
  void run(stream_view stream) const;

  [[nodiscard]] bool fused() const noexcept;
  /// @brief Why the unfused path was taken (empty when fused).
  [[nodiscard]] std::string const& unfused_reason() const noexcept;
  [[nodiscard]] gemm_problem const& problem() const noexcept;

 private:
  std::unique_ptr<detail::lt_state> state_;
};

}  // namespace graphstep::ops
