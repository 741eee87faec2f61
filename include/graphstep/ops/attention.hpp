#pragma once

/// @file ops/attention.hpp
/// @brief Causal multi-head self-attention, forward and backward, in plain CUDA kernels: the
/// path that runs everywhere (the simulated device included). fp32, fp16 or bf16 storage, fp32
/// math; softmax statistics saved in fp32 so that the backward recomputes the probabilities
/// instead of storing a [T,T] matrix per head. Every launcher enqueues on `stream` only,
/// allocates nothing, is capturable, and is bitwise reproducible: no floating-point atomics.
///
/// Layout (GPT-2's fused projection): `qkv` is row-major [B·T, 3·H·D]; row b·T + t holds the
/// query of every head, then the keys, then the values: q(b,t,h) at column h·D, k at H·D + h·D,
/// v at 2·H·D + h·D. The output is [B·T, H·D] with head h at column h·D, ready for the output
/// projection. Scores are q·k/√D; position t attends to positions 0..t.

#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/ops/attention_problem.hpp>

namespace graphstep::ops {

/// @brief out = softmax(q·kᵀ/√D, causal) · v for every batch row and head; logsumexp[B,H,T]
/// (fp32) = log Σ_{t' ≤ t} exp(q_t·k_t'/√D), for the backward.
/// qkv and out are spans of qkv's type (fp32, fp16 or bf16) holding at least the elements above.
/// @throws usage_error (null spans, spans of another type or too few elements; qkv or out not
/// 16-byte aligned, logsumexp not 4-byte aligned; overlapping buffers; non-positive sizes; a
/// head dimension the kernels do not take: it must be a multiple of 8, at most 256; T above
/// 524280 or B·H above 2³¹ − 1, beyond one launch's grid), cuda_error (launch failure)
void launch_causal_attention_forward(device_span out, device_span logsumexp, device_span qkv,
                                     attention_shape const& shape, cuda::stream_view stream);

/// @brief dqkv [B·T, 3·H·D] (overwritten, same layout as qkv) from dout [B·T, H·D], with the
/// forward's qkv, out and logsumexp. `workspace`: device memory of at least
/// `attention_backward_workspace_size(shape)` bytes, 4-byte aligned, used by no concurrent work.
/// @throws usage_error (as the forward; dout and dqkv 16-byte aligned too; dqkv or the
/// workspace overlapping an input; too little workspace), cuda_error (launch failure)
void launch_causal_attention_backward(device_span dqkv, device_span dout, device_span qkv,
                                      device_span out, device_span logsumexp,
                                      attention_shape const& shape, void* workspace,
                                      std::size_t workspace_bytes, cuda::stream_view stream);

/// @brief Workspace bytes of launch_causal_attention_backward: B·H·T fp32 values (the rowwise
/// dot products of dout and out).
/// @throws usage_error (non-positive sizes)
[[nodiscard]] std::size_t attention_backward_workspace_size(attention_shape const& shape);

}  // namespace graphstep::ops
