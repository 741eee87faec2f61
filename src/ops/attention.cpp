// The plain attention launchers: each checks its operands through attention_problem
// (ops/attention_problem.hpp), then launches (kernels/ops/attention.cu).
#include <cstddef>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/ops/attention.hpp>
#include <graphstep/ops/attention_problem.hpp>

#include "ops/op_kernels.hpp"

namespace graphstep::ops {

void launch_causal_attention_forward(device_span out, device_span logsumexp, device_span qkv,
                                     attention_shape const& shape, cuda::stream_view stream) {
  dtype const type = attention_problem{shape}.check_forward(out, logsumexp, qkv);
  detail::causal_attention_forward(shape, type, out.data(), static_cast<float*>(logsumexp.data()),
                                   qkv.data(), stream);
}

void launch_causal_attention_backward(device_span dqkv, device_span dout, device_span qkv,
                                      device_span out, device_span logsumexp,
                                      attention_shape const& shape, void* workspace,
                                      std::size_t workspace_bytes, cuda::stream_view stream) {
  dtype const type = attention_problem{shape}.check_backward(dqkv, dout, qkv, out, logsumexp,
                                                             workspace, workspace_bytes);
  detail::causal_attention_backward(shape, type, dqkv.data(), dout.data(), qkv.data(), out.data(),
                                    static_cast<float const*>(logsumexp.data()),
                                    static_cast<float*>(workspace), stream);
}

std::size_t attention_backward_workspace_size(attention_shape const& shape) {
  return attention_problem{shape}.backward_workspace_bytes();
}

}  // namespace graphstep::ops
