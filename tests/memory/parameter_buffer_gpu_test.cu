// A buffer made from a parameter layout: its bytes, the layout it keeps, its tensors by index and
// by name at their slots, all of them as one span, and a buffer of no tensor refused.

#include <cstdint>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device_buffer.hpp>
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
  // NOLINTNEXTLINE(bugprone-use-after-move,clang-analyzer-cplusplus.Move): as above
  EXPECT_TRUE(contains(message_of([&] { static_cast<void>(gradients.span()); }), "moved from"));
  stream.synchronize();
}

// All tensors as one span, gaps included; refused where the tensors differ in dtype.
TEST_F(parameter_buffer_test, its_span_covers_every_tensor_of_one_dtype) {
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  gs::parameter_layout layout{128};
  layout.add({"weight", {5, 9}, gs::dtype::bfloat16});  // 90 bytes, then a gap to 128
  layout.add({"bias", {5}, gs::dtype::bfloat16});
  gs::memory::parameter_buffer const gradients{layout, stream, pool};
  gs::device_span const all = gradients.span();
  EXPECT_EQ(all.data(), gradients.data());
  EXPECT_EQ(all.type(), gs::dtype::bfloat16);
  EXPECT_EQ(all.count(), gradients.bytes() / 2);
  EXPECT_GE(all.count(), 128U / 2 + 5);  // the gap is inside it

  gs::memory::parameter_buffer const mixed{two_tensors(), stream, pool};
  std::string const said = message_of([&] { static_cast<void>(mixed.span()); });
  EXPECT_TRUE(contains(said, "bfloat16 and float32 tensors ('scale')")) << said;
  stream.synchronize();
}

TEST_F(parameter_buffer_test, a_layout_of_no_tensor_is_refused) {
  gs::cuda::stream stream;
  EXPECT_TRUE(contains(message_of([&] {
                         gs::memory::parameter_buffer{gs::parameter_layout{}, stream};
                       }),
                       "holds no tensor"));
}

// A C trainer's one allocation, adopted: the tensors are where the trainer put them, and the
// memory stays the trainer's.
TEST_F(parameter_buffer_test, an_adopted_buffer_hands_out_the_trainers_tensors_in_place) {
  gs::cuda::stream stream;
  std::size_t const bytes = (6 + 2) * sizeof(float);  // llm.c's packing: no padding
  gs::cuda::device_buffer own{bytes, stream};          // the trainer's
  gs::parameter_layout layout = gs::parameter_layout::adopting(bytes);
  layout.add_at({"weight", {2, 3}, gs::dtype::float32}, 0);
  layout.add_at({"bias", {2}, gs::dtype::float32}, 6 * sizeof(float));
  {
    gs::memory::parameter_buffer weights =
        gs::memory::parameter_buffer::adopt(std::move(layout), own.data(), bytes);
    EXPECT_TRUE(weights.adopted());
    EXPECT_EQ(weights.data(), own.data());
    EXPECT_EQ(weights.bytes(), bytes);
    EXPECT_TRUE(weights.buffer().empty());
    EXPECT_EQ(weights.view("bias").data(), static_cast<float*>(own.data()) + 6);
    EXPECT_EQ(weights.view(0).data(), own.data());
    gs::memory::parameter_buffer moved = std::move(weights);
    EXPECT_EQ(weights.data(), nullptr);  // NOLINT(bugprone-use-after-move)
    EXPECT_EQ(weights.bytes(), 0U);      // NOLINT(bugprone-use-after-move)
    EXPECT_PRED2(contains, message_of([&] { static_cast<void>(weights.view(0)); }),  // NOLINT
                 "moved from");
    EXPECT_EQ(moved.view("weight").data(), own.data());
  }
  // Gone without freeing: the trainer's memory is still its own.
  std::vector<float> const values(8, 2.5F);
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(own.data(), values.data(), bytes, cudaMemcpyHostToDevice,
                                     stream.get()));
  EXPECT_EQ(gs::testing::copy_to_host(static_cast<float*>(own.data()), 8, stream), values);
  // A packed layout over memory large enough is adopted too.
  gs::parameter_layout packed{16};
  packed.add({"bias", {2}, gs::dtype::float32});
  EXPECT_EQ(gs::memory::parameter_buffer::adopt(packed, own.data(), bytes).view(0).data(),
            own.data());
}

TEST_F(parameter_buffer_test, adopting_memory_the_layout_does_not_fit_is_refused) {
  gs::cuda::stream stream;
  gs::cuda::device_buffer own{64, stream};
  gs::parameter_layout layout = gs::parameter_layout::adopting(64);
  layout.add_at({"weight", {4}, gs::dtype::float32}, 0);
  using gs::memory::parameter_buffer;
  EXPECT_PRED2(contains, message_of([&] {
                 static_cast<void>(parameter_buffer::adopt(layout, nullptr, 64));
               }),
               "the memory to adopt is a null pointer");
  EXPECT_PRED2(contains, message_of([&] {
                 static_cast<void>(parameter_buffer::adopt(layout, own.data(), 32));
               }),
               "the layout needs 64 bytes and the memory holds 32");
  EXPECT_PRED2(contains, message_of([&] {
                 static_cast<void>(parameter_buffer::adopt(
                     layout, static_cast<unsigned char*>(own.data()) + 4, 60));
               }),
               "is not aligned to the layout's 16 bytes");
  EXPECT_PRED2(contains, message_of([&] {
                 static_cast<void>(parameter_buffer::adopt(
                     gs::parameter_layout::adopting(64), own.data(), 64));
               }),
               "holds no tensor");
  // The packed layout of default alignment rounds each slot up: a trainer's tightly packed
  // buffer is too small for it, and that is said, not run past.
  gs::parameter_layout packed;
  packed.add({"a", {4}, gs::dtype::float32});
  packed.add({"b", {4}, gs::dtype::float32});
  EXPECT_PRED2(contains, message_of([&] {
                 static_cast<void>(parameter_buffer::adopt(packed, own.data(), 32));
               }),
               "parameter_layout::adopting(bytes)");
}
