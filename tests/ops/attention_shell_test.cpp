// The plain attention launchers check their operands through attention_problem before any CUDA
// call (the cases: attention_problem_test.cpp): one refusal per launcher, no device needed. The
// pointers are fake addresses, never touched.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/ops/attention.hpp>
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
constexpr std::size_t plenty = std::size_t{1} << 24;
auto const bf16 = gs::dtype::bfloat16;

}  // namespace

TEST(attention_launchers, refuse_through_the_problem_before_any_cuda_call) {
  go::attention_shape const shape{2, 16, 3, 64};
  gs::device_span const qkv{fake_address(1), bf16, plenty};
  gs::device_span const out{fake_address(2), bf16, plenty};
  gs::device_span const logsumexp{fake_address(3), gs::dtype::float32, plenty};
  std::string message = message_of([&] {
    go::launch_causal_attention_forward(out, logsumexp, qkv, {2, 16, 3, 12}, stream);
  });
  EXPECT_TRUE(contains(message, "causal_attention_forward: head_dim 12 is not supported"))
      << message;
  message = message_of([&] {
    go::launch_causal_attention_backward({fake_address(5), bf16, plenty},
                                         {fake_address(4), bf16, plenty}, qkv, out, logsumexp,
                                         shape, fake_address(6), 4, stream);
  });
  EXPECT_TRUE(contains(message, "causal_attention_backward: the workspace of 4 bytes is too small"))
      << message;
  EXPECT_EQ(go::attention_backward_workspace_size(shape), 2U * 3U * 16U * 4U);
}
