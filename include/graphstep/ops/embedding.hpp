#pragma once

/// @file ops/embedding.hpp
/// @brief Token + position embedding of a language model, forward and backward. fp32, fp16 or
/// bf16 tables; fp32 math. Every launcher enqueues on `stream` only, allocates nothing, and is
/// capturable. The backward is bitwise reproducible: each gradient row is summed by one owner
/// in increasing token position, with no floating-point atomics.
///
/// A token id outside [0, vocab) cannot be reported from the device without stopping it; the
/// forward writes a row of NaN for it (so the loss turns NaN, and an optimizer that skips
/// non-finite steps skips it) and the backward ignores it.

#include <cstdint>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/ops/embedding_problem.hpp>

namespace graphstep::ops {

/// @brief out[b·T + t, :] = token_table[tokens[b·T + t], :] + position_table[t, :]; out is
/// [B·T, C], tokens B·T int32 ids, token_table [vocab, C] (or more rows), position_table [T, C]
/// (or more rows), all but the ids of the table's type (fp32, fp16 or bf16).
/// @throws usage_error (null or misaligned spans, spans of another type or too few elements,
/// non-positive sizes, more than 2³⁰ positions or 65535·256 channels), cuda_error
void launch_embedding_forward(device_span out, device_span tokens, device_span token_table,
                              device_span position_table, embedding_shape const& shape,
                              cuda::stream_view stream);

/// @brief token_gradient[v, :] gets Σ over positions p with tokens[p] = v of dout[p, :], summed
/// in increasing p, added to what it holds when `accumulate_tokens` (a tied output projection
/// wrote its part first) or else written (rows of ids that do not occur are then zeroed);
/// position_gradient[t, :] = Σ_b dout[b·T + t, :] in increasing b (overwritten). The gradients
/// have dout's type and the tables' shapes.
/// @throws usage_error (as the forward), cuda_error
void launch_embedding_backward(device_span token_gradient, device_span position_gradient,
                               device_span dout, device_span tokens, embedding_shape const& shape,
                               bool accumulate_tokens, cuda::stream_view stream);

}  // namespace graphstep::ops
