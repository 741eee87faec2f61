// A buffer made from a parameter layout: its bytes, the layout it keeps, its tensors by index and
// by name at their slots, and a buffer of no tensor refused.

#include <cstdint>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <graphstep/memory/parameter_buffer.hpp>
#include <graphstep/parameter_layout.hpp>
#include <string>
#include <utility>
#include <vector>

#include "common/error_message.hpp"
#include "common/gpu_test.hpp"

namespace gs = graphstep;
using gs::testing::contains;
using gs::testing::message_of;

namespace {

class parameter_buffer_test : public gs::testing::gpu_test {};

gs::parameter_layout two_tensors() {
  gs::parameter_layout layout{128};
  layout.add({"weight", {5, 9}, gs::dtype::bfloat16});
  layout.add({"scale", {3}, gs::dtype::float32}, 1);
  return layout;
}

}  // namespace

TEST_F(parameter_buffer_test, holds_the_layouts_bytes_and_hands_out_its_tensors) {
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  gs::memory::parameter_buffer const weights{two_tensors(), stream, pool};
  ASSERT_NE(weights.data(), nullptr);
  EXPECT_EQ(weights.bytes(), weights.layout().buffer_bytes());
  EXPECT_EQ(weights.layout().size(), 2U);

  gs::tensor_view const scale = weights.view("scale");
  EXPECT_EQ(scale.data(), static_cast<unsigned char*>(weights.data()) + 128);
  EXPECT_EQ(scale.spec(), (gs::tensor_spec{"scale", {3}, gs::dtype::float32}));
  EXPECT_EQ(weights.view(0).data(), weights.data());
  EXPECT_EQ(weights.view(0).shape(), (std::vector<std::int64_t>{5, 9}));
  EXPECT_TRUE(contains(message_of([&] { static_cast<void>(weights.view(2)); }), "no tensor 2"));
  EXPECT_TRUE(contains(message_of([&] { static_cast<void>(weights.view("bias")); }), "'bias'"));

  // Weights and gradients: two buffers of one layout, the same tensor at the same offset.
  gs::memory::parameter_buffer gradients{weights.layout(), stream, pool};
  EXPECT_EQ(static_cast<unsigned char*>(gradients.view("scale").data()) -
                static_cast<unsigned char*>(gradients.data()),
            128);
  gs::memory::parameter_buffer moved{std::move(gradients)};
  // NOLINTNEXTLINE(bugprone-use-after-move,clang-analyzer-cplusplus.Move): what a moved-from buffer says
  EXPECT_TRUE(contains(message_of([&] { static_cast<void>(gradients.view(0)); }), "moved from"));
  stream.synchronize();
}

TEST_F(parameter_buffer_test, a_layout_of_no_tensor_is_refused) {
  gs::cuda::stream stream;
  EXPECT_TRUE(contains(message_of([&] {
                         gs::memory::parameter_buffer{gs::parameter_layout{}, stream};
                       }),
                       "holds no tensor"));
}
