#pragma once

/// @file ops/gelu_kernels.hpp
/// @brief Host launchers of the hand-written kernels of the layer (kernels/gelu.cu): the
/// unfused bias + GELU, its backward, and the bias gradient. Row-major [M,N] matrices of the
/// given precision (tf32 means fp32 storage); math in fp32. Plain C++.

#include <graphstep/ops/gemm_problem.hpp>
#include <graphstep/stream_view.hpp>

#include <cstdint>

namespace graphstep::ops {

/// @brief In place on y[M,N]: z = y + bias[col] (when bias is not null), saved to
/// `pre_activation` when it is not null; then y = GELU(z) when `apply_gelu`, else y = z.
/// Uses 16-byte loads when N and the pointers allow.
/// @throws usage_error (null y, non-positive sizes), cuda_error
void launch_bias_gelu(void* y, void* pre_activation, void const* bias, std::int64_t m,
                      std::int64_t n, precision type, bool apply_gelu, gelu_form form,
                      stream_view stream);

/// @brief dz = dy ⊙ GELU′(pre_activation), all [M,N]; dz may be dy.
void launch_gelu_backward(void* dz, void const* dy, void const* pre_activation, std::int64_t m,
                          std::int64_t n, precision type, gelu_form form, stream_view stream);

/// @brief db[N] = Σ over the M rows of dz[M,N], accumulated in fp32 in a fixed order.
void launch_bias_gradient(void* db, void const* dz, std::int64_t m, std::int64_t n,
                          precision type, stream_view stream);

}  // namespace graphstep::ops
