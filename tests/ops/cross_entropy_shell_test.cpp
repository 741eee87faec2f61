// The cross-entropy launcher checks its operands through cross_entropy_problem before any CUDA
// call (the cases: cross_entropy_problem_test.cpp): a refusal and the workspace size, no device
// needed. The pointers are fake addresses, never touched.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/ops/cross_entropy.hpp>
#include <string>

#include "common/error_message.hpp"
#include "common/fake_address.hpp"

namespace gs = graphstep;
namespace go = graphstep::ops;
using gs::testing::contains;
using gs::testing::fake_address;
using gs::testing::message_of;

namespace {

}  // namespace

TEST(cross_entropy_launcher, refuses_through_the_problem_before_any_cuda_call) {
  auto const bf16 = gs::dtype::bfloat16;
  std::string const message = message_of([&] {
    go::launch_cross_entropy_forward_backward(
        {fake_address(1), gs::dtype::float32, 1}, {fake_address(2), bf16, 24},
        {fake_address(3), bf16, 24}, {fake_address(4), gs::dtype::int32, 3}, {3, 7, 8}, 1.0F,
        fake_address(5), 8, gs::cuda::stream_view{cudaStreamPerThread});
  });
  EXPECT_TRUE(contains(message, "cross_entropy: the workspace has 8 bytes")) << message;
  EXPECT_EQ(go::cross_entropy_workspace_size({3, 7, 8}), 12U);
}
