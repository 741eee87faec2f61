#pragma once

/// @file ops/gelu.hpp
/// @brief The hand-written ops of the layer beside its GEMMs: the unfused bias + GELU, its
/// backward, and the bias gradient. Their shapes and operand checks: ops/gelu_problem.hpp.
/// Row-major [M,N] matrices of the given element type; math in fp32.
/// Each uses 16-byte loads and stores where its pointers are 16-byte aligned and finishes the
/// remainder with scalar accesses, so any M, N and any element-aligned pointer works. Every
/// launcher enqueues on `stream` only, allocates nothing, and is capturable.

#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/ops/gelu_problem.hpp>
#include <graphstep/ops/gemm_problem.hpp>

namespace graphstep::ops {

/// @brief In place on y[M,N]: z = y + bias[col] (when `bias`, [N], is not empty), saved to
/// `pre_activation` ([M,N]) when it is not empty; then y = GELU(z) in the given form when
/// `apply_gelu`, else y = z. With no bias and `apply_gelu` it is the GELU-only forward. Every
/// span has y's type (fp32, fp16 or bf16).
/// @throws usage_error (an empty y, spans null, misaligned, of another type or too short,
/// non-positive sizes), cuda_error (launch failure)
void launch_bias_gelu(device_span y, device_span pre_activation, device_span bias, std::int64_t m,
                      std::int64_t n, bool apply_gelu, gelu_form form, cuda::stream_view stream);

/// @brief dz = dy ⊙ GELU′(pre_activation) in the given form, all [M,N] of dy's type; dz may be
/// dy.
/// @throws usage_error (spans empty, null, misaligned, of another type or too short,
/// non-positive sizes), cuda_error (launch failure)
void launch_gelu_backward(device_span dz, device_span dy, device_span pre_activation,
                          std::int64_t m, std::int64_t n, gelu_form form, cuda::stream_view stream);

/// @brief db[N] = Σ over the M rows of dz[M,N], accumulated in fp32 in a fixed order (no
/// atomics: the result is bitwise reproducible for one device and one workspace size), stored
/// in dz's type. The rows are split into slices across a 2-D grid of about two blocks per SM whose
/// fp32 partial sums go to `workspace`, then a second kernel adds the slices of each column in
/// order. With less workspace it uses fewer slices; with none, one pass of one block per column
/// tile (as few as N/64 blocks: slow for narrow layers).
/// `workspace` is device memory, 4-byte aligned, that no concurrent work uses; it is free again
/// when the launch completes in stream order (a GEMM's workspace on the same stream serves).
/// @throws usage_error (spans null, misaligned, of another type or too short, non-positive
/// sizes, a size without a workspace, a misaligned workspace), cuda_error (launch failure)
void launch_bias_gradient(device_span db, device_span dz, std::int64_t m, std::int64_t n,
                          void* workspace, std::size_t workspace_bytes, cuda::stream_view stream);

/// @brief The bias gradient without workspace: one pass over whole columns.
/// @throws as above
void launch_bias_gradient(device_span db, device_span dz, std::int64_t m, std::int64_t n,
                          cuda::stream_view stream);

/// @brief Workspace with which launch_bias_gradient uses all the slices it wants for any M and
/// this N on the current device: (2 × SMs × 64 + N) fp32 values.
/// @throws usage_error (non-positive N), cuda_error
[[nodiscard]] std::size_t bias_gradient_workspace_size(std::int64_t n);

}  // namespace graphstep::ops
