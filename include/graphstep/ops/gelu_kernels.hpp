#pragma once

/// @file ops/gelu_kernels.hpp
/// @brief Host launchers of the hand-written kernels of the layer (kernels/gelu.cu,
/// kernels/bias_grad.cu): the unfused bias + GELU, its backward, and the bias gradient.
/// Row-major [M,N] matrices of the given element type; math in fp32.
/// Each uses 16-byte loads and stores where its pointers are 16-byte aligned and finishes the
/// remainder with scalar accesses, so any M, N and any element-aligned pointer works. Every
/// launcher enqueues on `stream` only, allocates nothing, and is capturable.

#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/ops/gemm_problem.hpp>

namespace graphstep::ops {

/// @brief In place on y[M,N]: z = y + bias[col] (when bias is not null), saved to
/// `pre_activation` when it is not null; then y = GELU(z) in the given form when `apply_gelu`,
/// else y = z. With a null bias and `apply_gelu` it is the GELU-only forward.
/// @throws usage_error (null y, non-positive sizes), cuda_error (launch failure)
void launch_bias_gelu(void* y, void* pre_activation, void const* bias, std::int64_t m,
                      std::int64_t n, dtype type, bool apply_gelu, gelu_form form,
                      cuda::stream_view stream);

/// @brief dz = dy ⊙ GELU′(pre_activation) in the given form, all [M,N]; dz may be dy.
/// @throws usage_error (null pointers, non-positive sizes), cuda_error (launch failure)
void launch_gelu_backward(void* dz, void const* dy, void const* pre_activation, std::int64_t m,
                          std::int64_t n, dtype type, gelu_form form, cuda::stream_view stream);

/// @brief db[N] = Σ over the M rows of dz[M,N], accumulated in fp32 in a fixed order (no
/// atomics: the result is bitwise reproducible for one device and one workspace size), stored
/// in `type`. The rows are split into slices across a 2-D grid of about two blocks per SM whose
/// fp32 partial sums go to `workspace`, then a second kernel adds the slices of each column in
/// order. With less workspace it uses fewer slices; with none, one pass of one block per column
/// tile (as few as N/64 blocks: slow for narrow layers).
/// `workspace` is device memory, 4-byte aligned, that no concurrent work uses; it is free again
/// when the launch completes in stream order (a GEMM's workspace on the same stream serves).
/// @throws usage_error (null pointers, non-positive sizes, a size without a workspace, a
/// misaligned workspace), cuda_error (launch failure)
void launch_bias_gradient(void* db, void const* dz, std::int64_t m, std::int64_t n, dtype type,
                          void* workspace, std::size_t workspace_bytes, cuda::stream_view stream);

/// @brief The bias gradient without workspace: one pass over whole columns.
/// @throws as above
void launch_bias_gradient(void* db, void const* dz, std::int64_t m, std::int64_t n, dtype type,
                          cuda::stream_view stream);

/// @brief Workspace with which launch_bias_gradient uses all the slices it wants for any M and
/// this N on the current device: (2 × SMs × 64 + N) fp32 values.
/// @throws usage_error (non-positive N), cuda_error
[[nodiscard]] std::size_t bias_gradient_workspace_size(std::int64_t n);

}  // namespace graphstep::ops
