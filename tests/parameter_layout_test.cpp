// A model's tensors in one flat buffer (parameter_layout.hpp): slots in the order added,
// aligned, named, views of a buffer by index and by name, and every bad tensor refused with
// what to do.

#include <gtest/gtest.h>

#include <cstdint>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/parameter_layout.hpp>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "common/error_message.hpp"

namespace gs = graphstep;
using graphstep::dtype;

using graphstep::testing::message_of;

TEST(parameter_layout, lays_tensors_out_in_the_order_added_each_on_an_aligned_slot) {
  gs::parameter_layout layout{128};
  EXPECT_EQ(layout.add({"fc2 weight", {64, 256}, dtype::bfloat16}), 0U);
  EXPECT_EQ(layout.add({"fc2 bias", {3}, dtype::bfloat16}, 1), 1U);
  EXPECT_EQ(layout.add({"scale", {1}, dtype::float32}, 1), 2U);
  ASSERT_EQ(layout.size(), 3U);
  gs::parameter_slot const& weight = layout.at(0);
  EXPECT_EQ(weight.spec.count(), 64U * 256U);
  EXPECT_EQ(weight.offset, 0U);
  EXPECT_EQ(layout.bytes_through(0), 64U * 256U * 2U);  // a multiple of 128 already
  gs::parameter_slot const& bias = layout.at("fc2 bias");
  EXPECT_EQ(bias.offset, 64U * 256U);  // elements of bfloat16
  EXPECT_EQ(bias.byte_offset(), 64U * 256U * 2U);
  EXPECT_EQ(layout.bytes_through(1), bias.byte_offset() + 128U);  // 6 bytes, rounded up
  EXPECT_EQ(bias.group, 1U);
  EXPECT_EQ(bias.spec, (gs::tensor_spec{"fc2 bias", {3}, dtype::bfloat16}));
  EXPECT_EQ(layout.at(2).byte_offset(), bias.byte_offset() + 128U);
  EXPECT_EQ(layout.at(2).offset, (bias.byte_offset() + 128U) / 4U);  // elements of float32
  EXPECT_EQ(layout.at(2).spec.type(), dtype::float32);
  EXPECT_EQ(layout.buffer_bytes(), layout.at(2).byte_offset() + 128U);
  EXPECT_EQ(layout.bytes_through(2), layout.buffer_bytes());
  EXPECT_EQ(layout.find("scale"), 2U);
  EXPECT_FALSE(layout.find("missing").has_value());
  for (std::size_t i = 0; i < layout.size(); ++i) {
    gs::parameter_slot const& slot = layout.at(i);
    EXPECT_EQ(slot.byte_offset() % layout.alignment(), 0U) << slot.spec.name();
    EXPECT_GE(layout.bytes_through(i) - slot.byte_offset(), slot.spec.bytes()) << slot.spec.name();
  }
  EXPECT_NE(message_of([&] { static_cast<void>(layout.bytes_through(3)); }).find("no tensor 3"),
            std::string::npos);
}

TEST(parameter_layout, hands_out_views_of_a_buffer_by_index_and_by_name) {
  gs::parameter_layout layout{128};
  layout.add({"weight", {4, 8}, dtype::bfloat16});
  layout.add({"scale", {2}, dtype::float32}, 1);
  std::vector<std::uint64_t> memory(layout.buffer_bytes() / sizeof(std::uint64_t));
  auto* const base = reinterpret_cast<unsigned char*>(memory.data());

  gs::tensor_view const weight = layout.view(base, 0);
  EXPECT_EQ(weight.data(), base);
  EXPECT_EQ(weight.spec(), layout.at(0).spec);
  gs::tensor_view const scale = layout.view(base, "scale");
  EXPECT_EQ(scale.data(), base + 128);
  EXPECT_EQ(scale.span(), (gs::device_span{base + 128, dtype::float32, 2}));
  EXPECT_EQ(scale.shape(), (std::vector<std::int64_t>{2}));

  EXPECT_NE(message_of([&] { static_cast<void>(layout.view(nullptr, 0)); }).find("null pointer"),
            std::string::npos);
  EXPECT_NE(message_of([&] { static_cast<void>(layout.view(base, 2)); }).find("no tensor 2"),
            std::string::npos);
  EXPECT_NE(message_of([&] { static_cast<void>(layout.view(base, "bias")); }).find("'bias'"),
            std::string::npos);
  EXPECT_NE(message_of([&] { static_cast<void>(layout.view(base + 2, "scale")); })
                .find("not aligned"),
            std::string::npos);
}

TEST(parameter_layout, names_the_first_tensor_of_another_dtype_than_the_first) {
  gs::parameter_layout layout;
  EXPECT_EQ(layout.first_of_another_dtype(), std::nullopt);  // empty
  layout.add({"weight", {4, 8}, dtype::bfloat16});
  layout.add({"bias", {8}, dtype::bfloat16});
  EXPECT_EQ(layout.first_of_another_dtype(), std::nullopt);  // one dtype
  layout.add({"scale", {2}, dtype::float32});
  layout.add({"shift", {2}, dtype::float16});
  EXPECT_EQ(layout.first_of_another_dtype(), std::optional<std::size_t>{2});
}

TEST(parameter_layout, bad_tensors_are_refused_naming_the_tensor_and_leave_the_layout_as_it_was) {
  gs::parameter_layout layout;
  layout.add({"weight", {4, 4}, dtype::float32});
  std::size_t const bytes = layout.buffer_bytes();
  struct bad {
    std::string name;
    std::vector<std::int64_t> shape;
    dtype type;
    std::string says;
  };
  std::int64_t const huge = std::numeric_limits<std::int64_t>::max();
  // Bytes that a size_t holds, but not after the slot before it.
  auto const almost = static_cast<std::int64_t>(std::numeric_limits<std::size_t>::max() / 4 - 10);
  for (bad const& b : std::vector<bad>{
           {"weight", {2}, dtype::float32, "already in the layout"},
           {"", {2}, dtype::float32, "empty name"},
           {"bias", {}, dtype::float32, "empty shape"},
           {"bias", {4, 0}, dtype::float32, "extent below 1"},
           {"bias", {-3}, dtype::float32, "negative extent"},
           {"bias", {2}, static_cast<dtype>(9), "unknown dtype"},
           {"bias", {2}, dtype::int32, "it takes float32, float16 or bfloat16"},
           {"bias", {huge, huge}, dtype::float32, "too many elements"},
           {"bias", {huge}, dtype::float32, "more bytes than a size_t holds"},
           {"bias", {almost}, dtype::float32, "does not fit"},
       }) {
    std::string const message =
        message_of([&] { layout.add(gs::tensor_spec{b.name, b.shape, b.type}); });
    EXPECT_NE(message.find(b.says), std::string::npos) << "'" << b.name << "': " << message;
  }
  EXPECT_EQ(layout.size(), 1U);
  EXPECT_EQ(layout.buffer_bytes(), bytes);
  EXPECT_NE(message_of([&] { static_cast<void>(layout.at(1)); }).find("no tensor 1"),
            std::string::npos);
  EXPECT_NE(message_of([&] { static_cast<void>(layout.at("bias")); }).find("'bias'"),
            std::string::npos);
}

TEST(parameter_layout, an_alignment_must_be_a_power_of_two_of_at_least_16) {
  for (std::size_t alignment : {0, 8, 24, 100}) {
    EXPECT_NE(message_of([&] { gs::parameter_layout{alignment}; }).find("power of two"),
              std::string::npos)
        << alignment;
  }
  EXPECT_EQ(gs::parameter_layout{16}.alignment(), 16U);
  EXPECT_EQ(gs::parameter_layout{}.alignment(), 256U);
}

// A C trainer's flat buffer, its tensors at the offsets the trainer computed: the layout states
// them, moves nothing and rounds nothing.
TEST(parameter_layout, adopting_a_buffer_places_each_tensor_at_its_stated_offset) {
  // llm.c's packing: float32 tensors back to back, no padding, listed out of buffer order.
  std::size_t const bytes = (12 + 3 + 5) * 4;
  gs::parameter_layout layout = gs::parameter_layout::adopting(bytes);
  EXPECT_TRUE(layout.adopted());
  EXPECT_FALSE(gs::parameter_layout{}.adopted());
  EXPECT_EQ(layout.buffer_bytes(), bytes);  // the buffer's, before any tensor
  EXPECT_EQ(layout.add_at({"bias", {3}, dtype::float32}, 12 * 4, 1), 0U);
  EXPECT_EQ(layout.add_at({"weight", {3, 4}, dtype::float32}, 0), 1U);
  EXPECT_EQ(layout.add_at({"norm", {5}, dtype::float32}, 15 * 4), 2U);
  EXPECT_EQ(layout.buffer_bytes(), bytes);
  EXPECT_EQ(layout.at("bias").offset, 12U);
  EXPECT_EQ(layout.at("bias").group, 1U);
  EXPECT_EQ(layout.at("norm").byte_offset(), 60U);
  EXPECT_EQ(layout.bytes_through(1), 48U);  // the tensor's own end: no slot is rounded
  EXPECT_EQ(layout.bytes_through(2), bytes);
  std::vector<float> memory(bytes / 4);
  EXPECT_EQ(layout.view(memory.data(), "norm").data(), memory.data() + 15);
  EXPECT_EQ(layout.view(memory.data(), 0).data(), memory.data() + 12);
  // Mixed dtypes: each offset needs its own dtype's alignment only.
  gs::parameter_layout mixed = gs::parameter_layout::adopting(10);
  mixed.add_at({"half", {1}, dtype::float16}, 2);
  mixed.add_at({"single", {1}, dtype::float32}, 4);
  EXPECT_EQ(mixed.at("single").offset, 1U);
}

TEST(parameter_layout, an_adopted_buffer_refuses_misplaced_tensors_and_stays_as_it_was) {
  EXPECT_NE(message_of([] { static_cast<void>(gs::parameter_layout::adopting(0)); })
                .find("zero bytes"),
            std::string::npos);
  gs::parameter_layout layout = gs::parameter_layout::adopting(64);
  layout.add_at({"a", {4}, dtype::float32}, 16);  // bytes [16, 32)
  struct bad {
    gs::tensor_spec spec;
    std::size_t offset;
    char const* says;
  };
  std::size_t const huge = std::numeric_limits<std::size_t>::max() - 1;  // even, past the end
  for (bad const& b : std::vector<bad>{
           {{"b", {1}, dtype::float32}, 2, "not aligned to its dtype (4 bytes)"},
           {{"b", {1}, dtype::bfloat16}, 33, "multiple of 2"},
           {{"b", {4}, dtype::float32}, 52, "ends past the buffer's 64 bytes"},
           {{"b", {1}, dtype::float32}, 64, "end at 68"},
           {{"b", {1}, dtype::float16}, huge, "more than a size_t holds"},
           {{"b", {4}, dtype::float32}, 4, "overlaps tensor 'a'"},   // ends inside a
           {{"b", {1}, dtype::float32}, 28, "overlaps tensor 'a'"},  // starts inside a
           {{"b", {8}, dtype::float32}, 8, "bytes [16, 32)"},        // spans a
           {{"a", {1}, dtype::float32}, 0, "already in the layout"},
           {{"", {1}, dtype::float32}, 0, "empty name"},
           {{"b", {1}, dtype::int32}, 0, "float32, float16 or bfloat16"},
       }) {
    std::string const message = message_of([&] { layout.add_at(b.spec, b.offset); });
    EXPECT_NE(message.find(b.says), std::string::npos) << b.offset << ": " << message;
  }
  EXPECT_EQ(layout.size(), 1U);
  EXPECT_EQ(layout.buffer_bytes(), 64U);
  // Touching neighbours are not an overlap.
  layout.add_at({"before", {4}, dtype::float32}, 0);
  layout.add_at({"after", {4}, dtype::float32}, 32);
  EXPECT_EQ(layout.size(), 3U);
  // Each kind of layout places tensors its own way.
  EXPECT_NE(message_of([&] { layout.add({"c", {1}, dtype::float32}); }).find("add_at"),
            std::string::npos);
  gs::parameter_layout packed;
  EXPECT_NE(message_of([&] { packed.add_at({"c", {1}, dtype::float32}, 0); })
                .find("parameter_layout::adopting"),
            std::string::npos);
}
