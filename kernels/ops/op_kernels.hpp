#pragma once

// Launches of the ops' kernels (kernels/ops/*.cu) on raw device pointers, for the launchers of
// src/ops/, which check every operand through the op's problem type first: these check nothing
// but the element type, and throw cuda_error when a launch fails. Each enqueues on `stream`
// only and allocates nothing. Plain C++: host code includes it without nvcc.

#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/ops/attention_problem.hpp>
#include <graphstep/ops/cross_entropy_problem.hpp>
#include <graphstep/ops/embedding_problem.hpp>
#include <graphstep/ops/gemm_problem.hpp>
#include <graphstep/ops/layer_norm_problem.hpp>

namespace graphstep::ops::detail {

/// The current device's SM count (at least 1), which sizes the sliced reductions.
[[nodiscard]] int multiprocessor_count();

// --- layer norm (kernels/ops/layer_norm.cu) ---
void layer_norm_forward(layer_norm_problem const& problem, dtype type, void* y, float* mean,
                        float* rstd, void const* x, void const* gamma, void const* beta,
                        float epsilon, cuda::stream_view stream);
void layer_norm_backward(layer_norm_problem const& problem, dtype type,
                         layer_norm_slicing const& slicing, void* dx, void* dgamma, void* dbeta,
                         void const* dy, void const* x, void const* gamma, float const* mean,
                         float const* rstd, bool accumulate_dx, float* workspace,
                         cuda::stream_view stream);
void add(dtype type, void* out, void const* a, void const* b, std::int64_t count,
         cuda::stream_view stream);

// --- attention (kernels/ops/attention.cu) ---
void causal_attention_forward(attention_shape const& shape, dtype type, void* out, float* logsumexp,
                              void const* qkv, cuda::stream_view stream);
void causal_attention_backward(attention_shape const& shape, dtype type, void* dqkv,
                               void const* dout, void const* qkv, void const* out,
                               float const* logsumexp, float* workspace, cuda::stream_view stream);

// --- cross-entropy (kernels/ops/cross_entropy.cu) ---
void cross_entropy_forward_backward(cross_entropy_shape const& shape, dtype type, float* loss,
                                    void* dlogits, void const* logits, std::int32_t const* targets,
                                    float gradient_scale, float* row_loss,
                                    cuda::stream_view stream);

// --- embedding (kernels/ops/embedding.cu) ---
void embedding_forward(embedding_shape const& shape, dtype type, void* out,
                       std::int32_t const* tokens, void const* token_table,
                       void const* position_table, cuda::stream_view stream);
void embedding_backward(embedding_shape const& shape, dtype type, void* token_gradient,
                        void* position_gradient, void const* dout, std::int32_t const* tokens,
                        bool accumulate_tokens, cuda::stream_view stream);

// --- GELU and the bias gradient (kernels/ops/gelu.cu, kernels/ops/bias_grad.cu) ---
// pre_activation and bias may be null.
void bias_gelu(dtype type, void* y, void* pre_activation, void const* bias, std::int64_t m,
               std::int64_t n, bool apply_gelu, gelu_form form, cuda::stream_view stream);
void gelu_backward(dtype type, void* dz, void const* dy, void const* pre_activation, std::int64_t m,
                   std::int64_t n, gelu_form form, cuda::stream_view stream);
// workspace may be null with 0 bytes (the one-pass sum).
void bias_gradient(dtype type, void* db, void const* dz, std::int64_t m, std::int64_t n,
                   void* workspace, std::size_t workspace_bytes, cuda::stream_view stream);

}  // namespace graphstep::ops::detail
