#pragma once

/// @file ops/layer_norm.hpp
/// @brief Layer normalization over the rows of a row-major [M,N] matrix, forward and backward,
/// and the residual add of a pre-norm transformer block. fp32, fp16 or bf16 storage; fp32 math
/// and fp32 saved statistics. Every launcher enqueues on `stream` only, allocates nothing, and
/// is capturable. Results are bitwise reproducible for one device and one workspace size: no
/// floating-point atomics, every sum in a fixed order.

#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>

namespace graphstep::ops {

/// @brief y = (x − mean) · rstd · gamma + beta, row by row, with mean and rstd =
/// 1/√(var + epsilon) of each row (biased variance, as torch.nn.LayerNorm) saved to `mean[M]`
/// and `rstd[M]` (fp32) for the backward. x and y are [M,N] and gamma and beta [N] of x's type
/// (fp32, fp16 or bf16); a span may hold more elements than the sizes need. `y` may not alias
/// `x`.
/// @throws usage_error (null or misaligned spans, spans of another type or too few elements,
/// y equal to x, non-positive sizes, epsilon ≤ 0 or NaN), cuda_error (launch failure)
void launch_layer_norm_forward(device_span y, device_span mean, device_span rstd, device_span x,
                               device_span gamma, device_span beta, std::int64_t m, std::int64_t n,
                               float epsilon, cuda::stream_view stream);

/// @brief The gradients of the forward above from dy[M,N]: dx[M,N], dgamma[N], dbeta[N].
/// With `accumulate_dx` the input gradient is added to what `dx` holds (the residual stream's
/// gradient of a pre-norm block), else it overwrites it. dgamma and dbeta are overwritten:
/// fp32 partial sums of row slices go to `workspace`, then are added per column in order.
/// `workspace` is device memory of at least `layer_norm_backward_workspace_size(m, n)` bytes,
/// 4-byte aligned, that no concurrent work uses.
/// dx, dy and x are [M,N] and dgamma, dbeta and gamma [N] of x's type; mean and rstd the
/// forward's fp32 [M].
/// @throws usage_error (as the forward; dx equal to dy or x, too little workspace), cuda_error
/// (launch failure)
void launch_layer_norm_backward(device_span dx, device_span dgamma, device_span dbeta,
                                device_span dy, device_span x, device_span gamma, device_span mean,
                                device_span rstd, std::int64_t m, std::int64_t n,
                                bool accumulate_dx, void* workspace, std::size_t workspace_bytes,
                                cuda::stream_view stream);

/// @brief Workspace bytes launch_layer_norm_backward needs for [M,N] on the current device.
/// @throws usage_error (non-positive sizes), cuda_error
[[nodiscard]] std::size_t layer_norm_backward_workspace_size(std::int64_t m, std::int64_t n);

/// @brief out[i] = a[i] + b[i] over every element of three spans of one dtype and one count,
/// in fp32 and rounded once; `out` may be `a` or `b`.
/// @throws usage_error (null or misaligned spans, spans without elements, of different dtypes
/// or counts), cuda_error
void launch_add(device_span out, device_span a, device_span b, cuda::stream_view stream);

}  // namespace graphstep::ops
