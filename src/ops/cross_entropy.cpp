// The cross-entropy launcher: checks its operands through cross_entropy_problem
// (ops/cross_entropy_problem.hpp), then launches (kernels/ops/cross_entropy.cu).
#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/ops/cross_entropy.hpp>
#include <graphstep/ops/cross_entropy_problem.hpp>

#include "ops/op_kernels.hpp"

namespace graphstep::ops {

void launch_cross_entropy_forward_backward(device_span loss, device_span dlogits,
                                           device_span logits, device_span targets,
                                           cross_entropy_shape const& shape, float gradient_scale,
                                           void* workspace, std::size_t workspace_bytes,
                                           cuda::stream_view stream) {
  dtype const type = cross_entropy_problem{shape}.check(loss, dlogits, logits, targets, workspace,
                                                        workspace_bytes);
  detail::cross_entropy_forward_backward(shape, type, static_cast<float*>(loss.data()),
                                         dlogits.data(), logits.data(),
                                         static_cast<std::int32_t const*>(targets.data()),
                                         gradient_scale, static_cast<float*>(workspace), stream);
}

std::size_t cross_entropy_workspace_size(cross_entropy_shape const& shape) {
  return cross_entropy_problem{shape}.workspace_bytes();
}

}  // namespace graphstep::ops
