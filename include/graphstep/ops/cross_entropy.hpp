#pragma once

/// @file ops/cross_entropy.hpp
/// @brief Softmax cross-entropy over the logits of a language model, its mean loss and its
/// gradient in one pass. fp32, fp16 or bf16 logits; fp32 math. Enqueues on `stream` only,
/// allocates nothing, is capturable, and is bitwise reproducible (the per-row losses are
/// summed in one fixed order, with no atomics).
///
/// Logits are row-major [M, padded_vocab]: a vocabulary padded to a multiple of 64 keeps the
/// output projection's GEMM on its fast paths; the columns from `vocab` on are not classes (they
/// take no probability and get a zero gradient). A target outside [0, vocab) makes its row's
/// loss NaN (so the mean is NaN and a step that checks finiteness is skipped) and its gradient
/// row NaN.

#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/ops/cross_entropy_problem.hpp>

namespace graphstep::ops {

/// @brief loss[0] = (1/M) Σ_r −log softmax(logits_r)[targets_r] (fp32), and
/// dlogits_r = (softmax(logits_r) − onehot(targets_r)) · gradient_scale / M, which is the
/// gradient of loss · gradient_scale. `dlogits` may be `logits` (overwritten in place).
/// `workspace`: device memory of at least `cross_entropy_workspace_size(shape)` bytes, 4-byte
/// aligned, used by no concurrent work (the per-row losses).
/// `loss` is one fp32 value, `targets` M int32 ids, `dlogits` and `logits` [M, padded_vocab] of
/// the logits' type (fp32, fp16 or bf16).
/// @throws usage_error (null or misaligned spans, spans of another type or too few elements,
/// non-positive sizes, more than 2³¹ − 1 rows, padded_vocab < vocab, dlogits overlapping logits
/// without being it, too little workspace), cuda_error (launch failure)
void launch_cross_entropy_forward_backward(device_span loss, device_span dlogits,
                                           device_span logits, device_span targets,
                                           cross_entropy_shape const& shape, float gradient_scale,
                                           void* workspace, std::size_t workspace_bytes,
                                           cuda::stream_view stream);

/// @brief Workspace bytes of launch_cross_entropy_forward_backward: M fp32 values.
/// @throws usage_error (non-positive sizes)
[[nodiscard]] std::size_t cross_entropy_workspace_size(cross_entropy_shape const& shape);

}  // namespace graphstep::ops
