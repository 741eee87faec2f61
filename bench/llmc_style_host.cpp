// The host twins of llmc_style_kernels.cuh: the same arithmetic in plain loops, compiled as
// ordinary C++ (not through the simulator's build, whose access instrumentation would slow them).

#include "llmc_style_host.hpp"

#include <cmath>

namespace llmc_style {

void layernorm_forward_host(float* out, float* mean, float* rstd, float const* x,
                            float const* weight, float const* bias, int rows, int channels) {
  for (int r = 0; r < rows; ++r) {
    float const* xr = x + static_cast<std::ptrdiff_t>(r) * channels;
    float sum = 0.0F;
    for (int i = 0; i < channels; ++i) sum += xr[i];
    float const m = sum / static_cast<float>(channels);
    float squares = 0.0F;
    for (int i = 0; i < channels; ++i) squares += (xr[i] - m) * (xr[i] - m);
    float const s = 1.0F / std::sqrt(squares / static_cast<float>(channels) + 1e-5F);
    for (int i = 0; i < channels; ++i) {
      out[static_cast<std::ptrdiff_t>(r) * channels + i] = (xr[i] - m) * s * weight[i] + bias[i];
    }
    mean[r] = m;
    rstd[r] = s;
  }
}

void matmul_forward_host(float* out, float const* in, float const* weight, float const* bias,
                         int rows, int inner, int columns) {
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < columns; ++c) {
      float acc = 0.0F;
      for (int k = 0; k < inner; ++k) {
        acc += in[static_cast<std::ptrdiff_t>(r) * inner + k] *
               weight[static_cast<std::ptrdiff_t>(c) * inner + k];
      }
      out[static_cast<std::ptrdiff_t>(r) * columns + c] = acc + bias[c];
    }
  }
}

void softmax_forward_host(float* out, float const* x, int rows, int columns) {
  for (int r = 0; r < rows; ++r) {
    float const* xr = x + static_cast<std::ptrdiff_t>(r) * columns;
    float high = -INFINITY;
    for (int i = 0; i < columns; ++i) high = std::fmax(high, xr[i]);
    float sum = 0.0F;
    for (int i = 0; i < columns; ++i) sum += std::exp(xr[i] - high);
    for (int i = 0; i < columns; ++i) {
      out[static_cast<std::ptrdiff_t>(r) * columns + i] = std::exp(xr[i] - high) / sum;
    }
  }
}

void matmul_backward_bias_host(float* dbias, float const* dout, int rows, int columns) {
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < columns; ++c)
      dbias[c] += dout[static_cast<std::ptrdiff_t>(r) * columns + c];
  }
}

void adamw_host(float* parameters, float const* gradients, float* m, float* v, std::size_t count,
                float learning_rate, float beta1, float beta2, float beta1_correction,
                float beta2_correction, float epsilon, float weight_decay) {
  for (std::size_t i = 0; i < count; ++i) {
    float const g = gradients[i];
    m[i] = beta1 * m[i] + (1.0F - beta1) * g;
    v[i] = beta2 * v[i] + (1.0F - beta2) * g * g;
    float const update = (m[i] / beta1_correction) / (std::sqrt(v[i] / beta2_correction) + epsilon);
    parameters[i] -= learning_rate * (update + weight_decay * parameters[i]);
  }
}

}  // namespace llmc_style
