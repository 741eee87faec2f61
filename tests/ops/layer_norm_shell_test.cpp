// The layer norm and add launchers check their operands through layer_norm_problem before any
// CUDA call (the cases: layer_norm_problem_test.cpp): one refusal per launcher, no device needed.
// The pointers are fake addresses, never touched.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/ops/layer_norm.hpp>
#include <string>

#include "common/error_message.hpp"
#include "common/fake_address.hpp"

namespace gs = graphstep;
namespace go = graphstep::ops;
using gs::testing::contains;
using gs::testing::fake_address;
using gs::testing::message_of;

namespace {

gs::cuda::stream_view const stream{cudaStreamPerThread};
auto const bf16 = gs::dtype::bfloat16;
auto const fp32 = gs::dtype::float32;

}  // namespace

TEST(layer_norm_launchers, refuse_through_the_problem_before_any_cuda_call) {
  gs::device_span const matrix{fake_address(1), bf16, 4 * 768};
  gs::device_span const x{fake_address(2), bf16, 4 * 768};
  gs::device_span const row{fake_address(3), bf16, 768};
  gs::device_span const statistics{fake_address(4), fp32, 4};
  std::string message = message_of([&] {
    go::launch_layer_norm_forward(x, statistics, statistics, x, row, row, 4, 768, 1e-5F, stream);
  });
  EXPECT_TRUE(contains(message, "layer_norm_forward: y may not alias x")) << message;
  message = message_of([&] {
    go::launch_layer_norm_backward(matrix, row, row, matrix, x, row, statistics, statistics, 4, 768,
                                   false, fake_address(5), 1 << 20, stream);
  });
  EXPECT_TRUE(contains(message, "layer_norm_backward: dx may not alias dy or x")) << message;
  message = message_of([&] {  // refused before the SM count is asked of a device
    go::launch_layer_norm_backward(matrix, row, row, x, x, row, statistics, statistics, 4, 768,
                                   false, nullptr, 1 << 20, stream);
  });
  EXPECT_TRUE(contains(message, "layer_norm_backward: the workspace is required")) << message;
  message = message_of([&] { static_cast<void>(go::layer_norm_backward_workspace_size(0, 768)); });
  EXPECT_TRUE(contains(message, "layer_norm_backward_workspace_size: sizes must be positive"))
      << message;
  message = message_of([&] { go::launch_add(matrix, x, row, stream); });
  EXPECT_TRUE(contains(message, "add: b is 768 bfloat16")) << message;
}
