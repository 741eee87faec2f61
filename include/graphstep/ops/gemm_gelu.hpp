#pragma once

/// @file ops/gemm_gelu.hpp
/// @brief Linear layers with bias and GELU, forward and backward, on cuBLASLt epilogues, set up
/// before capture and enqueued capturably.
///
/// CUTLASS's shape: `can_implement` → `workspace_size` → construct (initialize: descriptors,
/// layouts, alignment preferences from the real pointers, heuristic query, optional autotune,
/// one eager run) → `run(stream)`, which issues only cublasLtMatmul (plus the small kernels of
/// the unfused path) and is safe under stream capture. The operands are static buffers: their
/// addresses are part of the `gemm`, as they are part of a captured graph.
///
/// A two-layer MLP (fc1 + GELU, fc2) runs its backward in three GEMMs plus the input gradient:
/// fc2 `backward_weight_bias` (dW2 and db2 in one GEMM), `backward_data_gelu` through fc2 into
/// fc1 (dZ1 and db1 in one GEMM, reading fc1's saved pre-activation), fc1 `backward_weight`,
/// and `backward_data` for dX when the input needs a gradient.

#include <cublasLt.h>

#include <cstddef>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/ops/gemm_problem.hpp>
#include <memory>
#include <string>

namespace graphstep::ops {

namespace detail {
/// @brief Destroys a cuBLASLt handle; `unique_ptr` stores the handle itself.
struct lt_handle_deleter {
  using pointer = cublasLtHandle_t;
  void operator()(pointer handle) const noexcept;
};
struct lt_state;
}  // namespace detail

/// @brief An owning cuBLASLt handle. Move-only; a moved-from handle's get() is null.
///
/// Lifetime: a gemm keeps the raw handle and calls cublasLtMatmul with it on every run();
/// the handle is "an opaque structure holding the cuBLASLt library context" (cuBLAS
/// documentation, cublasLtCreate), which a destroyed handle no longer holds. So the handle must
/// outlive every `gemm` made with it.
class cublaslt_handle {
 public:
  /// @brief Creates a handle (cublasLtCreate; needs no device).
  /// @throws cublas_error
  cublaslt_handle();
  /// @brief The raw handle, still owned by this object.
  [[nodiscard]] cublasLtHandle_t get() const noexcept { return handle_.get(); }

 private:
  std::unique_ptr<cublasLtHandle_t, detail::lt_handle_deleter> handle_;
};

/// @brief Operands in the row-major formula of each kind:
/// forward kinds: out = lhs·rhsᵀ (+ bias) with lhs = X[M,K], rhs = W[N,K], out = Y[M,N];
/// backward_data kinds: out = lhs·rhs with lhs = dY[M,N], rhs = W[N,K], out = dX[M,K];
/// backward_weight kinds: out = lhsᵀ·rhs with lhs = dY[M,N], rhs = X[M,K], out = dW[N,K].
/// All are spans of the problem's storage type holding at least those elements; an operand the
/// kind does not use may be left empty.
struct gemm_operands {
  device_span lhs;
  device_span rhs;
  device_span out;
  device_span bias;  ///< forward_bias, forward_bias_gelu: [N]
  device_span
      pre_activation;  ///< forward_*gelu write it ([M,N]); backward_data_*gelu read it ([M,K])
  device_span bias_gradient;  ///< backward_data_gelu: [K]; backward_weight_bias: [N]
};

/// @brief One GEMM of a layer, set up (descriptors, algorithm, workspace) and ready to run.
///
/// Stream ordering: the constructor enqueues (and, when autotuning, waits for) work on the
/// stream it is given; run() only enqueues. Operands must stay allocated, at the same
/// addresses, for the gemm's life and for the life of every graph that captured run().
class gemm {
 public:
  /// @brief Whether the fused path can run these operands; `reason` says which constraint
  /// fails (alignments are read from the pointer values).
  /// @throws usage_error (bad sizes)
  [[nodiscard]] static support can_implement(gemm_problem const& problem,
                                             gemm_operands const& operands);
  /// @brief Recommended workspace: 32 MiB on sm90 and newer, 4 MiB before (cuBLAS docs).
  /// Take it from graphstep's memory pool and pass it to the constructor.
  /// @throws cuda_error
  [[nodiscard]] static std::size_t workspace_size();

  /// @brief Sets the GEMM up and runs it once on `stream` (which must not be capturing).
  /// @param handle must outlive the gemm: run() calls cublasLtMatmul with it
  /// @param workspace device memory of `workspace_bytes`, 256-byte aligned (from the pool); it
  /// must not be used by work running concurrently with this gemm's runs
  /// @throws usage_error (unsupported without fallback, missing operands or ones of another type
  /// or too short for the problem, a capturing stream, misaligned workspace, no cuBLASLt
  /// algorithm), cublas_error, cuda_error
  gemm(cublaslt_handle const& handle, gemm_problem const& problem, gemm_operands const& operands,
       void* workspace, std::size_t workspace_bytes, gemm_options const& options,
       cuda::stream_view stream);
  ~gemm();
  /// @post the moved-from gemm throws usage_error from run()
  gemm(gemm&& other) noexcept;
  gemm& operator=(gemm&& other) noexcept;
  gemm(gemm const&) = delete;
  gemm& operator=(gemm const&) = delete;

  /// @brief Enqueues the GEMM (and, unfused, its kernels) on `stream`. Capturable: it queries
  /// nothing and allocates nothing.
  /// @throws usage_error (a moved-from gemm), cublas_error, cuda_error
  void run(cuda::stream_view stream) const;

  /// @brief True when the epilogue runs inside the GEMM (always for kinds without one).
  [[nodiscard]] bool fused() const noexcept;
  /// @brief Why the unfused path was taken (empty when fused).
  [[nodiscard]] std::string const& unfused_reason() const noexcept;
  /// @brief The whole decision: the GEMM's epilogue and the kernels that follow it.
  [[nodiscard]] path_decision const& decision() const noexcept;
  /// @brief The problem this gemm was made for.
  [[nodiscard]] gemm_problem const& problem() const noexcept;

 private:
  std::unique_ptr<detail::lt_state> state_;
};

}  // namespace graphstep::ops
