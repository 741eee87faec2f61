#include <cuda_runtime_api.h>

#include <graphstep/cuda/check.hpp>
#include <graphstep/error.hpp>
#include <graphstep/train/mse_loss.hpp>

#include "detail/span_checks.hpp"
#include "train/train_kernels.hpp"

namespace graphstep::train {

namespace {
// The checks come first, so that nothing is allocated for a bad request.
cuda::device_buffer partials_buffer(std::size_t count, cuda::stream_view stream,
                                    cuda::memory_resource& resource) {
  GRAPHSTEP_EXPECTS(count > 0, "mse_loss: the element count must be positive");
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    "mse_loss: construct it before the capture; it allocates its scratch");
  return cuda::device_buffer{sizeof(float) * detail::mse_partial_blocks(count), stream, resource};
}
}  // namespace

mse_loss::mse_loss(std::size_t count, cuda::stream_view stream, cuda::memory_resource& resource)
    : count_{count}, partials_{partials_buffer(count, stream, resource)} {
  stream.synchronize();  // the allocation is stream-ordered; forward_backward takes any stream
}

mse_loss::~mse_loss() = default;
mse_loss::mse_loss(mse_loss&& other) noexcept = default;
mse_loss& mse_loss::operator=(mse_loss&& other) noexcept = default;

void mse_loss::forward_backward(device_span prediction, device_span target, device_span gradient,
                                device_span loss, cuda::stream_view stream) const {
  GRAPHSTEP_EXPECTS(!partials_.empty(), "mse_loss: this loss was moved from");
  char const* const what = "mse_loss::forward_backward";
  using graphstep::detail::expect_operand;
  expect_operand(what, "prediction", prediction, dtype::float32, count_);
  expect_operand(what, "target", target, dtype::float32, count_);
  expect_operand(what, "gradient", gradient, dtype::float32, count_);
  expect_operand(what, "loss", loss, dtype::float32, 1);
  detail::launch_mse(static_cast<float const*>(prediction.data()),
                     static_cast<float const*>(target.data()), static_cast<float*>(gradient.data()),
                     static_cast<float*>(partials_.data()), static_cast<float*>(loss.data()),
                     count_, stream);
}

}  // namespace graphstep::train
