// The unfused GELU and bias gradient launchers check their operands through gelu_problem and
// bias_gradient_problem before any CUDA call (the cases: gelu_problem_test.cpp): one refusal per
// launcher, no device needed. The pointers are fake addresses, never touched.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/ops/gelu.hpp>
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

}  // namespace

TEST(gelu_launchers, refuse_through_the_problem_before_any_cuda_call) {
  auto const bf16 = gs::dtype::bfloat16;
  gs::device_span const matrix{fake_address(1), bf16, 4 * 96};
  std::string message = message_of([&] {
    go::launch_bias_gelu(matrix, {}, {fake_address(2), bf16, 95}, 4, 96, true, go::gelu_form::tanh,
                         stream);
  });
  EXPECT_TRUE(contains(message, "bias_gelu: bias is 95 bfloat16")) << message;
  message = message_of(
      [&] { go::launch_gelu_backward(matrix, matrix, {}, 4, 96, go::gelu_form::erf, stream); });
  EXPECT_TRUE(contains(message, "gelu_backward: pre_activation holds no element")) << message;
  message = message_of([&] {
    go::launch_bias_gradient({fake_address(2), bf16, 96}, matrix, 4, 96, nullptr, 64, stream);
  });
  EXPECT_TRUE(contains(message, "bias_gradient: a workspace size was given without")) << message;
  message = message_of([&] {
    go::launch_bias_gradient({fake_address(2), gs::dtype::float16, 96}, matrix, 4, 96, stream);
  });
  EXPECT_TRUE(contains(message, "bias_gradient: db")) << message;
  message = message_of([] { static_cast<void>(go::bias_gradient_workspace_size(0)); });
  EXPECT_TRUE(contains(message, "bias_gradient_workspace_size: N must be positive")) << message;
}
