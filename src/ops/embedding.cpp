// The embedding launchers: each checks its operands through embedding_problem
// (ops/embedding_problem.hpp), then launches (kernels/ops/embedding.cu).
#include <cstdint>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/ops/embedding.hpp>
#include <graphstep/ops/embedding_problem.hpp>

#include "ops/op_kernels.hpp"

namespace graphstep::ops {

void launch_embedding_forward(device_span out, device_span tokens, device_span token_table,
                              device_span position_table, embedding_shape const& shape,
                              cuda::stream_view stream) {
  dtype const type =
      embedding_problem{shape}.check_forward(out, tokens, token_table, position_table);
  detail::embedding_forward(shape, type, out.data(),
                            static_cast<std::int32_t const*>(tokens.data()), token_table.data(),
                            position_table.data(), stream);
}

void launch_embedding_backward(device_span token_gradient, device_span position_gradient,
                               device_span dout, device_span tokens, embedding_shape const& shape,
                               bool accumulate_tokens, cuda::stream_view stream) {
  dtype const type =
      embedding_problem{shape}.check_backward(token_gradient, position_gradient, dout, tokens);
  detail::embedding_backward(shape, type, token_gradient.data(), position_gradient.data(),
                             dout.data(), static_cast<std::int32_t const*>(tokens.data()),
                             accumulate_tokens, stream);
}

}  // namespace graphstep::ops
