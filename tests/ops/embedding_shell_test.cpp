// The embedding launchers check their operands through embedding_problem before any CUDA call
// (the cases: embedding_problem_test.cpp): one refusal per launcher, no device needed. The
// pointers are fake addresses, never touched.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/ops/embedding.hpp>
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

// {B=2, T=3, vocab=11, C=8}: out 48, tokens 6, token_table 88, position_table 24 elements.
TEST(embedding_launchers, refuse_through_the_problem_before_any_cuda_call) {
  auto const bf16 = gs::dtype::bfloat16;
  go::embedding_shape const shape{2, 3, 11, 8};
  gs::device_span const tokens{fake_address(1), gs::dtype::int32, 6};
  std::string message = message_of([&] {
    go::launch_embedding_forward({fake_address(2), bf16, 47}, tokens, {fake_address(3), bf16, 88},
                                 {fake_address(4), bf16, 24}, shape, stream);
  });
  EXPECT_TRUE(contains(message, "embedding_forward: out is 47 bfloat16")) << message;
  message = message_of([&] {
    go::launch_embedding_backward({fake_address(3), bf16, 88}, {fake_address(4), bf16, 24},
                                  {fake_address(2), bf16, 48}, tokens, {2, 0, 11, 8}, true, stream);
  });
  EXPECT_TRUE(contains(message, "embedding_backward: sizes must be positive")) << message;
}
