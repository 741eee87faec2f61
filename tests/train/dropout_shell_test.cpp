// Arguments that are checked before any CUDA call: the error is the same with or without a
// GPU, so these run everywhere. The pointers are never dereferenced.

#include <gtest/gtest.h>

#include <cstdint>
#include <graphstep/error.hpp>
#include <graphstep/train/capture_safe_rng.hpp>
#include <limits>
#include <string>

#include "common/error_message.hpp"

namespace gs = graphstep;

namespace {

// Never used: every call below fails its checks first.
cudaStream_t const unused_stream = nullptr;

using gs::testing::message_of;

}  // namespace

TEST(dropout_arguments, p_outside_zero_to_one_is_a_usage_error) {
  float data[4] = {};
  std::uint8_t mask[4] = {};
  std::uint64_t const state[2] = {};
  gs::train::philox_args const rng{state, 0};
  for (float const p : {1.0F, 1.5F, -0.1F, std::numeric_limits<float>::quiet_NaN()}) {
    std::string const forward =
        message_of([&] { gs::train::dropout_forward(data, mask, data, 4, p, rng, unused_stream); });
    EXPECT_NE(forward.find("dropout_forward: p must lie in [0, 1)"), std::string::npos)
        << "p = " << p << ": " << forward;
    std::string const backward =
        message_of([&] { gs::train::dropout_backward(data, mask, data, 4, p, unused_stream); });
    EXPECT_NE(backward.find("dropout_backward: p must lie in [0, 1)"), std::string::npos)
        << "p = " << p << ": " << backward;
  }
}

TEST(dropout_arguments, null_pointers_are_usage_errors) {
  float data[4] = {};
  std::uint8_t mask[4] = {};
  std::uint64_t const state[2] = {};
  std::string const what = message_of([&] {
    gs::train::dropout_forward(data, nullptr, data, 4, 0.5F, {state, 0}, unused_stream);
  });
  EXPECT_NE(what.find("null pointer"), std::string::npos) << what;
  EXPECT_FALSE(message_of([&] {
                 gs::train::dropout_forward(data, mask, data, 4, 0.5F, {nullptr, 0}, unused_stream);
               }).empty());
  EXPECT_FALSE(message_of([&] {
                 gs::train::dropout_backward(nullptr, mask, data, 4, 0.5F, unused_stream);
               }).empty());
}
