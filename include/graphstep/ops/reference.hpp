#pragma once

/// @file ops/reference.hpp
/// @brief fp64 reference math for the fused layer (GEMM, GELU in both forms and their
/// derivatives, bias gradient) and for the transformer ops (layer norm, causal attention,
/// embedding, cross-entropy). Row-major throughout. Plain C++.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <graphstep/ops/gemm_problem.hpp>
#include <vector>

namespace graphstep::ops::reference {

/// @brief GELU in the given form. Saturates: GELU(x) = x for x > 40 (+inf included) and −0 for
/// x < −40 (−inf included), where the formula itself has reached those values; NaN stays NaN.
[[nodiscard]] double gelu(double x, gelu_form form);
/// @brief GELU′ in the given form: 1 for x > 40, 0 for x < −40 (the formula would overflow in
/// x·x or meet inf·0 there), NaN for NaN.
[[nodiscard]] double gelu_derivative(double x, gelu_form form);

/// @brief C[M,N] = A[M,K] · Bᵀ where B is [N,K] (the layout of a weight).
[[nodiscard]] std::vector<double> matmul_abt(std::vector<double> const& a,
                                             std::vector<double> const& b, std::size_t m,
                                             std::size_t n, std::size_t k);
/// @brief C[M,N] = A[M,K] · B[K,N].
[[nodiscard]] std::vector<double> matmul_ab(std::vector<double> const& a,
                                            std::vector<double> const& b, std::size_t m,
                                            std::size_t n, std::size_t k);
/// @brief C[N,K] = Aᵀ · B where A is [M,N] and B is [M,K] (the weight gradient).
[[nodiscard]] std::vector<double> matmul_atb(std::vector<double> const& a,
                                             std::vector<double> const& b, std::size_t m,
                                             std::size_t n, std::size_t k);
/// @brief Column sums of a row-major [M,N] matrix (the bias gradient).
[[nodiscard]] std::vector<double> column_sums(std::vector<double> const& a, std::size_t m,
                                              std::size_t n);
/// @brief ‖got − want‖ / ‖want‖ (Frobenius); 0 when both are zero.
[[nodiscard]] double relative_error(std::vector<double> const& got,
                                    std::vector<double> const& want);

// --- the transformer ops (ops/layer_norm.hpp, ops/attention.hpp, ops/embedding.hpp,
// ops/cross_entropy.hpp), in the same layouts as their kernels -------------------------------

/// @brief Layer norm of each row of x[M,N]: y, and each row's mean and rstd = 1/√(var + ε).
struct layer_norm_result {
  std::vector<double> y, mean, rstd;
};
[[nodiscard]] layer_norm_result layer_norm(std::vector<double> const& x,
                                           std::vector<double> const& gamma,
                                           std::vector<double> const& beta, std::size_t m,
                                           std::size_t n, double epsilon);
/// @brief The gradients of layer_norm from dy[M,N].
struct layer_norm_gradients {
  std::vector<double> dx, dgamma, dbeta;
};
[[nodiscard]] layer_norm_gradients layer_norm_backward(std::vector<double> const& dy,
                                                       std::vector<double> const& x,
                                                       std::vector<double> const& gamma,
                                                       std::size_t m, std::size_t n,
                                                       double epsilon);

/// @brief Causal attention over qkv[B·T, 3·H·D] (queries, keys, values of every head per row):
/// out[B·T, H·D] and logsumexp[B,H,T] of the scaled scores.
struct attention_result {
  std::vector<double> out, logsumexp;
};
[[nodiscard]] attention_result causal_attention(std::vector<double> const& qkv, std::size_t batch,
                                                std::size_t sequence, std::size_t heads,
                                                std::size_t head_dim);
/// @brief dqkv[B·T, 3·H·D] from dout[B·T, H·D].
[[nodiscard]] std::vector<double> causal_attention_backward(std::vector<double> const& dout,
                                                            std::vector<double> const& qkv,
                                                            std::size_t batch, std::size_t sequence,
                                                            std::size_t heads,
                                                            std::size_t head_dim);

/// @brief out[B·T, C] = token_table[token] + position_table[t]; an id outside [0, vocab) gives
/// a row of NaN.
[[nodiscard]] std::vector<double> embedding(std::vector<std::int32_t> const& tokens,
                                            std::vector<double> const& token_table,
                                            std::vector<double> const& position_table,
                                            std::size_t batch, std::size_t sequence,
                                            std::size_t vocab, std::size_t channels);
/// @brief token[vocab, C] = Σ of dout rows per id (ids outside [0, vocab) ignored);
/// position[T, C] = Σ_b dout[b·T + t].
struct embedding_gradients {
  std::vector<double> token, position;
};
[[nodiscard]] embedding_gradients embedding_backward(std::vector<double> const& dout,
                                                     std::vector<std::int32_t> const& tokens,
                                                     std::size_t batch, std::size_t sequence,
                                                     std::size_t vocab, std::size_t channels);

/// @brief Mean softmax cross-entropy of logits[M, padded_vocab] (classes: the first `vocab`
/// columns) and its gradient times `gradient_scale` (zero in the padded columns); a target
/// outside [0, vocab) makes the loss and its gradient row NaN.
struct cross_entropy_result {
  double loss{};
  std::vector<double> dlogits;
};
[[nodiscard]] cross_entropy_result cross_entropy(std::vector<double> const& logits,
                                                 std::vector<std::int32_t> const& targets,
                                                 std::size_t rows, std::size_t vocab,
                                                 std::size_t padded_vocab, double gradient_scale);

}  // namespace graphstep::ops::reference
