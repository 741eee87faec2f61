#pragma once

/// @file ops/reference.hpp
/// @brief fp64 reference math for the fused layer: GEMM, GELU in both forms and their
/// derivatives, bias gradient. Row-major throughout. Plain C++.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
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

}  // namespace graphstep::ops::reference
