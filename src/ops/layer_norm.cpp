// The layer norm and residual add launchers: each checks its operands through
// layer_norm_problem (ops/layer_norm_problem.hpp), then launches (kernels/ops/layer_norm.cu).
#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/ops/layer_norm.hpp>
#include <graphstep/ops/layer_norm_problem.hpp>

#include "ops/op_kernels.hpp"

namespace graphstep::ops {

void launch_layer_norm_forward(device_span y, device_span mean, device_span rstd, device_span x,
                               device_span gamma, device_span beta, std::int64_t m, std::int64_t n,
                               float epsilon, cuda::stream_view stream) {
  layer_norm_problem const problem{m, n};
  dtype const type = problem.check_forward(y, mean, rstd, x, gamma, beta, epsilon);
  detail::layer_norm_forward(problem, type, y.data(), static_cast<float*>(mean.data()),
                             static_cast<float*>(rstd.data()), x.data(), gamma.data(), beta.data(),
                             epsilon, stream);
}

void launch_layer_norm_backward(device_span dx, device_span dgamma, device_span dbeta,
                                device_span dy, device_span x, device_span gamma, device_span mean,
                                device_span rstd, std::int64_t m, std::int64_t n,
                                bool accumulate_dx, void* workspace, std::size_t workspace_bytes,
                                cuda::stream_view stream) {
  layer_norm_problem const problem{m, n};
  // What needs no device first, so that a wrong call is refused where there is none; then the
  // workspace's size, which depends on the device's SM count.
  dtype const type = problem.check_backward(dx, dgamma, dbeta, dy, x, gamma, mean, rstd, workspace);
  int const multiprocessors = detail::multiprocessor_count();
  problem.check_backward_workspace(workspace_bytes, multiprocessors);
  detail::layer_norm_backward(problem, type, problem.backward_slicing(multiprocessors), dx.data(),
                              dgamma.data(), dbeta.data(), dy.data(), x.data(), gamma.data(),
                              static_cast<float const*>(mean.data()),
                              static_cast<float const*>(rstd.data()), accumulate_dx,
                              static_cast<float*>(workspace), stream);
}

std::size_t layer_norm_backward_workspace_size(std::int64_t m, std::int64_t n) {
  layer_norm_problem const problem{m, n};
  static_cast<void>(problem.check_shape("layer_norm_backward_workspace_size"));
  return problem.backward_workspace_bytes(detail::multiprocessor_count());
}

void launch_add(device_span out, device_span a, device_span b, cuda::stream_view stream) {
  dtype const type = check_add(out, a, b);
  detail::add(type, out.data(), a.data(), b.data(), static_cast<std::int64_t>(out.count()), stream);
}

}  // namespace graphstep::ops
