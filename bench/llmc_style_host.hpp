#pragma once

// The host twins of the kernels of llmc_style_kernels.cuh: the same arithmetic (float
// accumulation, the same formulas) in plain C++ loops over host memory.

#include <cstddef>

namespace llmc_style {

void layernorm_forward_host(float* out, float* mean, float* rstd, float const* x,
                            float const* weight, float const* bias, int rows, int channels);
void matmul_forward_host(float* out, float const* in, float const* weight, float const* bias,
                         int rows, int inner, int columns);
void softmax_forward_host(float* out, float const* x, int rows, int columns);
void matmul_backward_bias_host(float* dbias, float const* dout, int rows, int columns);
void adamw_host(float* parameters, float const* gradients, float* m, float* v, std::size_t count,
                float learning_rate, float beta1, float beta2, float beta1_correction,
                float beta2_correction, float epsilon, float weight_decay);

}  // namespace llmc_style
