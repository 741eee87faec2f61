// Arguments that are checked before any CUDA call: the error is the same with or without a
// GPU, so these run everywhere. The pointers are never dereferenced.

#include <gtest/gtest.h>

#include <cstdint>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/train/capture_safe_rng.hpp>
#include <limits>
#include <string>

#include "common/error_message.hpp"

namespace gs = graphstep;

namespace {

// Never used: every call below fails its checks first.
cudaStream_t const unused_stream = nullptr;

using gs::testing::contains;
using gs::testing::message_of;

}  // namespace

TEST(dropout_arguments, p_outside_zero_to_one_is_a_usage_error) {
  float data[4] = {};
  std::uint8_t mask[4] = {};
  std::uint64_t const state[2] = {};
  gs::train::philox_args const rng{state, 0};
  gs::device_span const span{data, gs::dtype::float32, 4};
  gs::device_span const bytes{mask, gs::dtype::uint8, 4};
  for (float const p : {1.0F, 1.5F, -0.1F, std::numeric_limits<float>::quiet_NaN()}) {
    std::string const forward =
        message_of([&] { gs::train::dropout_forward(span, bytes, span, p, rng, unused_stream); });
    EXPECT_NE(forward.find("dropout_forward: p must lie in [0, 1)"), std::string::npos)
        << "p = " << p << ": " << forward;
    std::string const backward =
        message_of([&] { gs::train::dropout_backward(span, bytes, span, p, unused_stream); });
    EXPECT_NE(backward.find("dropout_backward: p must lie in [0, 1)"), std::string::npos)
        << "p = " << p << ": " << backward;
  }
}

TEST(dropout_arguments, null_unaligned_unlike_and_mistyped_spans_are_named) {
  alignas(8) float data[4] = {};
  std::uint8_t mask[4] = {};
  std::uint64_t const state[2] = {};
  gs::train::philox_args const rng{state, 0};
  gs::device_span const span{data, gs::dtype::float32, 4};
  gs::device_span const bytes{mask, gs::dtype::uint8, 4};
  auto const forward = [&](gs::device_span y, gs::device_span m, gs::device_span x,
                           gs::train::philox_args r) {
    return message_of([&] { gs::train::dropout_forward(y, m, x, 0.5F, r, unused_stream); });
  };
  auto const backward = [&](gs::device_span dx, gs::device_span m, gs::device_span dy) {
    return message_of([&] { gs::train::dropout_backward(dx, m, dy, 0.5F, unused_stream); });
  };
  EXPECT_TRUE(contains(forward(span, {nullptr, gs::dtype::uint8, 4}, span, rng),
                       "dropout_forward: mask is a null pointer"));
  EXPECT_TRUE(contains(forward(span, bytes, span, {nullptr, 0}),
                       "dropout_forward: the generator state is a null pointer"));
  EXPECT_TRUE(contains(forward({nullptr, gs::dtype::float32, 4}, bytes, span, rng),
                       "dropout_forward: y is a null pointer"));
  EXPECT_TRUE(contains(backward(span, bytes, {nullptr, gs::dtype::float32, 4}),
                       "dropout_backward: dy is a null pointer"));
  auto* const raw = reinterpret_cast<unsigned char*>(data);
  EXPECT_TRUE(
      contains(backward({raw + 2, gs::dtype::float32, 2}, bytes.subspan(0, 2), span.subspan(0, 2)),
               "dropout_backward: dx is not aligned"));
  std::string const half =
      forward({data, gs::dtype::float16, 8}, bytes, {data, gs::dtype::float16, 8}, rng);
  EXPECT_TRUE(contains(half, "dropout_forward: 8 float16")) << half;
  EXPECT_TRUE(contains(half, "is not float32; dropout runs on float32")) << half;
  std::string const counts = backward(span, bytes, span.subspan(0, 3));
  EXPECT_TRUE(contains(counts, "dropout_backward: dx is 4 float32")) << counts;
  EXPECT_TRUE(contains(counts, "but dy is 3 float32")) << counts;
  std::string const float_mask = forward(span, span, span, rng);
  EXPECT_TRUE(contains(float_mask, "dropout_forward: the mask is 4 float32")) << float_mask;
  EXPECT_TRUE(contains(float_mask, "it holds one uint8 per element")) << float_mask;
  std::string const short_mask = backward(span, bytes.subspan(0, 3), span);
  EXPECT_TRUE(contains(short_mask, "dropout_backward: mask is 3 uint8")) << short_mask;
}
