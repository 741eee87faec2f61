// What a tensor is and views of one: plain C++, no device.

#include <gtest/gtest.h>

#include <cstdint>
#include <graphstep/error.hpp>
#include <graphstep/tensor.hpp>
#include <limits>
#include <string>

#include "common/error_message.hpp"

namespace gs = graphstep;
using gs::testing::contains;
using gs::testing::message_of;

TEST(tensor_spec, counts_elements_and_derives_bytes) {
  gs::tensor_spec const weight{"fc1 weight", {640, 4096}, gs::dtype::bfloat16};
  EXPECT_EQ(weight.name(), "fc1 weight");
  EXPECT_EQ(weight.count(), 640U * 4096U);
  EXPECT_EQ(weight.bytes(), 640U * 4096U * 2U);
  EXPECT_EQ(gs::describe(weight), "'fc1 weight' [640, 4096] bfloat16");

  gs::tensor_spec const scalar{{}, gs::dtype::float32};
  EXPECT_TRUE(scalar.name().empty());
  EXPECT_EQ(scalar.count(), 1U);
  EXPECT_EQ(scalar.bytes(), 4U);
  EXPECT_EQ(gs::describe(scalar), "[] float32");

  gs::tensor_spec const empty{{3, 0}, gs::dtype::uint8};
  EXPECT_EQ(empty.count(), 0U);
  EXPECT_EQ(empty.bytes(), 0U);
}

TEST(tensor_spec, compares_name_shape_and_dtype) {
  gs::tensor_spec const a{"a", {2, 3}, gs::dtype::float16};
  EXPECT_EQ(a, (gs::tensor_spec{"a", {2, 3}, gs::dtype::float16}));
  EXPECT_NE(a, (gs::tensor_spec{"b", {2, 3}, gs::dtype::float16}));
  EXPECT_NE(a, (gs::tensor_spec{"a", {3, 2}, gs::dtype::float16}));
  EXPECT_NE(a, (gs::tensor_spec{"a", {2, 3}, gs::dtype::bfloat16}));
  EXPECT_TRUE(gs::same_shape_and_type(a, a.renamed("b")));
  EXPECT_EQ(a.renamed("b").name(), "b");
  EXPECT_FALSE(gs::same_shape_and_type(a, gs::tensor_spec{{6}, gs::dtype::float16}));
}

TEST(tensor_spec, refuses_a_negative_extent_an_unknown_dtype_and_an_overflow) {
  EXPECT_TRUE(contains(message_of([] {
                         static_cast<void>(gs::tensor_spec{"w", {4, -1}, gs::dtype::float32});
                       }),
                       "negative extent"));
  EXPECT_TRUE(contains(message_of([] {
                         static_cast<void>(gs::tensor_spec{"w", {4}, static_cast<gs::dtype>(42)});
                       }),
                       "unknown dtype"));
  // Elements that fit a size_t but bytes that do not.
  auto const half = static_cast<std::int64_t>(std::numeric_limits<std::size_t>::max() / 2 / 2 + 1);
  std::string const bytes = message_of([&] {
    static_cast<void>(gs::tensor_spec{"w", {half}, gs::dtype::float32});
  });
  EXPECT_TRUE(contains(bytes, "'w'")) << bytes;
  EXPECT_TRUE(contains(bytes, "more bytes than a size_t holds")) << bytes;
  // Elements that do not fit.
  EXPECT_THROW((gs::tensor_spec{{std::int64_t{1} << 40, std::int64_t{1} << 40}, gs::dtype::uint8}),
               gs::usage_error);
}

TEST(tensor_view, is_a_spec_at_an_address_and_a_flat_span) {
  alignas(16) static float memory[32];
  gs::tensor_view const view{memory, gs::tensor_spec{"w", {4, 8}, gs::dtype::float32}};
  EXPECT_EQ(view.data(), memory);
  EXPECT_EQ(view.name(), "w");
  EXPECT_EQ(view.shape(), (std::vector<std::int64_t>{4, 8}));
  EXPECT_EQ(view.count(), 32U);
  EXPECT_EQ(view.bytes(), sizeof(memory));
  EXPECT_EQ(view.span(), (gs::device_span{memory, gs::dtype::float32, 32}));

  gs::tensor_view const reshaped{view.span(), {2, 16}};
  EXPECT_EQ(reshaped.data(), memory);
  EXPECT_TRUE(reshaped.name().empty());
  EXPECT_EQ(reshaped.shape(), (std::vector<std::int64_t>{2, 16}));
  EXPECT_TRUE(contains(gs::describe(reshaped), "[2, 16] float32 at "));
}

TEST(tensor_view, refuses_a_shape_of_another_count_a_null_or_misaligned_pointer) {
  alignas(16) static float memory[32];
  std::string const count = message_of([] {
    static_cast<void>(gs::tensor_view{gs::device_span{memory, gs::dtype::float32, 32}, {4, 4}});
  });
  EXPECT_TRUE(contains(count, "holds 16 elements but the span")) << count;
  EXPECT_TRUE(contains(
      message_of([] {
        static_cast<void>(gs::tensor_view{nullptr, gs::tensor_spec{"w", {4}, gs::dtype::float32}});
      }),
      "null pointer"));
  EXPECT_TRUE(contains(message_of([] {
                         static_cast<void>(
                             gs::tensor_view{reinterpret_cast<unsigned char*>(memory) + 2,
                                             gs::tensor_spec{"w", {4}, gs::dtype::float32}});
                       }),
                       "not aligned"));
  // A tensor without elements may be null.
  EXPECT_EQ(gs::tensor_view(nullptr, gs::tensor_spec{{0}, gs::dtype::float32}).count(), 0U);
}
