// Device spans and the shapes of typed buffers: plain C++, no device.

#include <gtest/gtest.h>

#include <cstdint>
#include <graphstep/device_span.hpp>
#include <graphstep/error.hpp>
#include <limits>
#include <string>
#include <type_traits>

#include "common/error_message.hpp"
#include "detail/span_checks.hpp"

namespace gs = graphstep;

TEST(shape, element_counts_and_descriptions) {
  EXPECT_EQ(gs::element_count({640, 4096}), 640U * 4096U);
  EXPECT_EQ(gs::element_count({}), 1U);  // a scalar
  EXPECT_EQ(gs::element_count({3, 0, 5}), 0U);
  EXPECT_EQ(gs::describe({640, 4096}, gs::dtype::bfloat16), "[640, 4096] bfloat16");
  EXPECT_THROW(static_cast<void>(gs::element_count({4, -1})), gs::usage_error);
  EXPECT_THROW(static_cast<void>(gs::element_count({std::int64_t{1} << 40, std::int64_t{1} << 40})),
               gs::usage_error);
}

TEST(dtype, names_sizes_and_which_types_are_floating) {
  struct expected {
    gs::dtype type;
    char const* name;
    std::size_t bytes;
    bool floating;
  };
  for (auto const& e : {expected{gs::dtype::float32, "float32", 4, true},
                        expected{gs::dtype::float16, "float16", 2, true},
                        expected{gs::dtype::bfloat16, "bfloat16", 2, true},
                        expected{gs::dtype::int32, "int32", 4, false},
                        expected{gs::dtype::uint8, "uint8", 1, false}}) {
    EXPECT_STREQ(gs::name(e.type), e.name);
    EXPECT_EQ(gs::size_in_bytes(e.type), e.bytes) << e.name;
    EXPECT_EQ(gs::is_floating(e.type), e.floating) << e.name;
    EXPECT_TRUE(gs::detail::is_known(e.type)) << e.name;
  }
  EXPECT_FALSE(gs::detail::is_known(static_cast<gs::dtype>(5)));
  EXPECT_FALSE(gs::is_floating(static_cast<gs::dtype>(5)));
  EXPECT_NO_THROW(gs::detail::expect_floating("x", gs::dtype::bfloat16));
  std::string said =
      gs::testing::message_of([] { gs::detail::expect_floating("add: out", gs::dtype::uint8); });
  EXPECT_NE(said.find("add: out is uint8; it takes float32, float16 or bfloat16"),
            std::string::npos)
      << said;
  said = gs::testing::message_of(
      [] { gs::detail::expect_floating("add: out", static_cast<gs::dtype>(12)); });
  EXPECT_NE(said.find("add: out has an unknown dtype (12)"), std::string::npos) << said;
  said = gs::testing::message_of(
      [] { gs::detail::refuse_integer("layer_norm_forward: type", gs::dtype::int32); });
  EXPECT_NE(said.find("layer_norm_forward: type is int32"), std::string::npos) << said;
}

TEST(device_span, holds_pointer_type_and_count_and_counts_bytes_by_type) {
  alignas(4) static unsigned char memory[64];
  gs::device_span const halves{memory, gs::dtype::bfloat16, 10};
  EXPECT_EQ(halves.data(), memory);
  EXPECT_EQ(halves.count(), 10U);
  EXPECT_EQ(halves.type(), gs::dtype::bfloat16);
  EXPECT_EQ(halves.bytes(), 20U);

  gs::device_span const fp32{memory, gs::dtype::float32, 3};
  EXPECT_EQ(fp32.type(), gs::dtype::float32);
  EXPECT_EQ(fp32.bytes(), 12U);

  gs::device_span const ids{memory, gs::dtype::int32, 5};
  EXPECT_EQ(ids.bytes(), 20U);
  gs::device_span const mask{memory + 3, gs::dtype::uint8, 7};
  EXPECT_EQ(mask.bytes(), 7U);
  EXPECT_NO_THROW(gs::detail::expect_valid_span("x", "mask", mask));  // a byte is never misaligned

  gs::device_span const none;
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.data(), nullptr);
  EXPECT_EQ(none.bytes(), 0U);
}

TEST(device_span, a_subspan_counts_its_offset_in_elements_and_stays_inside) {
  alignas(4) static unsigned char memory[64];
  gs::device_span const all{memory, gs::dtype::float16, 32};
  gs::device_span const tail = all.subspan(8, 24);
  EXPECT_EQ(tail.data(), memory + 16);
  EXPECT_EQ(tail.count(), 24U);
  EXPECT_EQ(tail.type(), gs::dtype::float16);
  EXPECT_EQ(all.subspan(32, 0).count(), 0U);

  std::string const said = gs::testing::message_of([&] { (void)all.subspan(8, 25); });
  EXPECT_NE(said.find("reaches past the end of 32 float16"), std::string::npos) << said;
  EXPECT_THROW((void)all.subspan(33, 0), gs::usage_error);
  // An offset and count whose sum wraps around is refused too, not taken as small.
  EXPECT_THROW((void)all.subspan(1, std::numeric_limits<std::size_t>::max()), gs::usage_error);
}

TEST(device_span, equal_when_memory_type_and_count_are) {
  alignas(4) static unsigned char memory[16];
  EXPECT_EQ((gs::device_span{memory, gs::dtype::float16, 4}),
            (gs::device_span{memory, gs::dtype::float16, 4}));
  EXPECT_NE((gs::device_span{memory, gs::dtype::float16, 4}),
            (gs::device_span{memory, gs::dtype::bfloat16, 4}));
  EXPECT_NE((gs::device_span{memory, gs::dtype::float16, 4}),
            (gs::device_span{memory, gs::dtype::float16, 2}));
}

TEST(device_span, checks_refuse_null_misaligned_and_oversized_spans_naming_them) {
  alignas(4) static unsigned char memory[16];
  std::string said = gs::testing::message_of([&] {
    gs::detail::expect_valid_span("all_reduce", "send", {nullptr, gs::dtype::float32, 4});
  });
  EXPECT_NE(said.find("all_reduce: send is a null pointer"), std::string::npos) << said;

  said = gs::testing::message_of([&] {
    gs::detail::expect_valid_span("all_reduce", "send", {memory + 2, gs::dtype::float32, 1});
  });
  EXPECT_NE(said.find("not aligned"), std::string::npos) << said;

  said = gs::testing::message_of([&] {
    gs::detail::expect_valid_span(
        "all_reduce", "send",
        {memory, gs::dtype::float32, std::numeric_limits<std::size_t>::max()});
  });
  EXPECT_NE(said.find("more bytes than a size_t holds"), std::string::npos) << said;

  // An empty span names no memory: any pointer passes.
  EXPECT_NO_THROW(gs::detail::expect_valid_span("x", "y", {nullptr, gs::dtype::float32, 0}));
  said = gs::testing::message_of([&] {
    gs::detail::expect_valid_span("x", "y", {nullptr, gs::dtype::float32, 0},
                                  gs::detail::empty_span::refused);
  });
  EXPECT_NE(said.find("x: y holds no element"), std::string::npos) << said;
  said = gs::testing::message_of([&] {
    gs::detail::expect_valid_span("all_reduce", "send", {memory, static_cast<gs::dtype>(9), 2});
  });
  EXPECT_NE(said.find("all_reduce: send has an unknown dtype (9)"), std::string::npos) << said;
  // What passes, passes: aligned, known, with elements, and refused-empty only when empty.
  EXPECT_NO_THROW(gs::detail::expect_valid_span("x", "y", {memory + 2, gs::dtype::bfloat16, 7},
                                                gs::detail::empty_span::refused));
}

// The check that builds no message and the one that refuses with one decide alike.
TEST(dtype, a_typed_buffer_passes_exactly_where_its_refusal_does_not_throw) {
  alignas(4) static unsigned char memory[8];
  struct buffer {
    void const* data;
    gs::dtype type;
    bool passes;
  };
  for (buffer const& b :
       {buffer{memory, gs::dtype::float32, true}, buffer{memory + 2, gs::dtype::bfloat16, true},
        buffer{memory + 1, gs::dtype::uint8, true}, buffer{nullptr, gs::dtype::float32, false},
        buffer{memory + 2, gs::dtype::float32, false},
        buffer{memory + 1, gs::dtype::float16, false},
        buffer{memory, static_cast<gs::dtype>(9), false}}) {
    EXPECT_EQ(gs::detail::is_typed_buffer(b.data, b.type), b.passes)
        << b.data << " " << static_cast<int>(b.type);
    if (b.passes) {
      EXPECT_NO_THROW(gs::detail::expect_typed_buffer("buffer", b.data, b.type));
    } else {
      EXPECT_THROW(gs::detail::expect_typed_buffer("buffer", b.data, b.type), gs::usage_error);
    }
  }
}

TEST(device_span, an_ops_matrix_sizes_are_positive_and_their_product_fits) {
  EXPECT_EQ(gs::detail::matrix_elements("bias_gelu", 640, 4096), 640U * 4096U);
  std::string said = gs::testing::message_of(
      [] { static_cast<void>(gs::detail::matrix_elements("bias_gelu", 0, 8)); });
  EXPECT_NE(said.find("bias_gelu: sizes must be positive (M=0, N=8)"), std::string::npos) << said;
  said = gs::testing::message_of(
      [] { static_cast<void>(gs::detail::matrix_elements("layer_norm_forward", 8, -3)); });
  EXPECT_NE(said.find("layer_norm_forward: sizes must be positive (M=8, N=-3)"), std::string::npos)
      << said;
  std::int64_t const huge = std::numeric_limits<std::int64_t>::max();
  said = gs::testing::message_of(
      [&] { static_cast<void>(gs::detail::matrix_elements("bias_gradient", huge, huge)); });
  EXPECT_NE(said.find("more elements than a size_t holds"), std::string::npos) << said;
}

// A (pointer, bytes, type) triple or a (pointer, bytes) pair, as the older views took, must not
// compile as a span: the type comes second and is always named.
static_assert(!std::is_constructible_v<gs::device_span, void*, std::size_t, gs::dtype>);
static_assert(!std::is_constructible_v<gs::device_span, float*, std::size_t>);
static_assert(!std::is_constructible_v<gs::device_span, void*, std::size_t>);
static_assert(std::is_constructible_v<gs::device_span, void*, gs::dtype, std::size_t>);
static_assert(std::is_trivially_copyable_v<gs::device_span>);
