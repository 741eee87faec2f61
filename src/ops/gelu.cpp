// The launchers of the unfused GELU and the bias gradient: each checks its operands through
// gelu_problem or bias_gradient_problem (ops/gelu_problem.hpp), then launches
// (kernels/ops/gelu.cu, kernels/ops/bias_grad.cu).
#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/ops/gelu.hpp>
#include <graphstep/ops/gelu_problem.hpp>

#include "ops/op_kernels.hpp"

namespace graphstep::ops {

void launch_bias_gelu(device_span y, device_span pre_activation, device_span bias, std::int64_t m,
                      std::int64_t n, bool apply_gelu, gelu_form form, cuda::stream_view stream) {
  dtype const type = gelu_problem{m, n}.check_forward(y, pre_activation, bias);
  detail::bias_gelu(type, y.data(), pre_activation.empty() ? nullptr : pre_activation.data(),
                    bias.empty() ? nullptr : bias.data(), m, n, apply_gelu, form, stream);
}

void launch_gelu_backward(device_span dz, device_span dy, device_span pre_activation,
                          std::int64_t m, std::int64_t n, gelu_form form,
                          cuda::stream_view stream) {
  dtype const type = gelu_problem{m, n}.check_backward(dz, dy, pre_activation);
  detail::gelu_backward(type, dz.data(), dy.data(), pre_activation.data(), m, n, form, stream);
}

void launch_bias_gradient(device_span db, device_span dz, std::int64_t m, std::int64_t n,
                          void* workspace, std::size_t workspace_bytes, cuda::stream_view stream) {
  dtype const type = bias_gradient_problem{m, n}.check(db, dz, workspace, workspace_bytes);
  detail::bias_gradient(type, db.data(), dz.data(), m, n, workspace, workspace_bytes, stream);
}

void launch_bias_gradient(device_span db, device_span dz, std::int64_t m, std::int64_t n,
                          cuda::stream_view stream) {
  launch_bias_gradient(db, dz, m, n, nullptr, 0, stream);
}

std::size_t bias_gradient_workspace_size(std::int64_t n) {
  bias_gradient_problem const problem{0, n};
  static_cast<void>(problem.workspace_bytes(1));  // refuses N before any CUDA call
  return problem.workspace_bytes(detail::multiprocessor_count());
}

}  // namespace graphstep::ops
