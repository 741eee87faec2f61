// A model's tensors in one flat buffer (memory/parameter_layout.hpp): slots in the order added,
// aligned, named, and every bad tensor refused with what to do.

#include <gtest/gtest.h>

#include <cstdint>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/memory/parameter_layout.hpp>
#include <limits>
#include <string>
#include <vector>

#include "common/error_message.hpp"

namespace gm = graphstep::memory;
using graphstep::dtype;

using graphstep::testing::message_of;

TEST(parameter_layout, lays_tensors_out_in_the_order_added_each_on_an_aligned_slot) {
  gm::parameter_layout layout{128};
  EXPECT_EQ(layout.add("fc2 weight", {64, 256}, dtype::bfloat16), 0U);
  EXPECT_EQ(layout.add("fc2 bias", {3}, dtype::bfloat16, 1), 1U);
  EXPECT_EQ(layout.add("scale", {1}, dtype::float32, 1), 2U);
  ASSERT_EQ(layout.size(), 3U);
  gm::parameter_slot const& weight = layout.at(0);
  EXPECT_EQ(weight.count, 64U * 256U);
  EXPECT_EQ(weight.offset, 0U);
  EXPECT_EQ(weight.bytes, 64U * 256U * 2U);  // a multiple of 128 already
  gm::parameter_slot const& bias = layout.at("fc2 bias");
  EXPECT_EQ(bias.offset, 64U * 256U * 2U);
  EXPECT_EQ(bias.bytes, 128U);  // 6 bytes, rounded up
  EXPECT_EQ(bias.group, 1U);
  EXPECT_EQ(bias.shape, (std::vector<std::int64_t>{3}));
  EXPECT_EQ(layout.at(2).offset, bias.offset + 128U);
  EXPECT_EQ(layout.at(2).type, dtype::float32);
  EXPECT_EQ(layout.buffer_bytes(), layout.at(2).offset + 128U);
  EXPECT_EQ(layout.find("scale"), 2U);
  EXPECT_FALSE(layout.find("missing").has_value());
  for (gm::parameter_slot const& slot : layout.slots()) {
    EXPECT_EQ(slot.offset % layout.alignment(), 0U) << slot.name;
    EXPECT_GE(slot.bytes, slot.count * graphstep::size_in_bytes(slot.type)) << slot.name;
  }
}

TEST(parameter_layout, bad_tensors_are_refused_naming_the_tensor_and_leave_the_layout_as_it_was) {
  gm::parameter_layout layout;
  layout.add("weight", {4, 4}, dtype::float32);
  std::size_t const bytes = layout.buffer_bytes();
  struct bad {
    std::string name;
    std::vector<std::int64_t> shape;
    dtype type;
    std::string says;
  };
  std::int64_t const huge = std::numeric_limits<std::int64_t>::max();
  for (bad const& b : std::vector<bad>{
           {"weight", {2}, dtype::float32, "already in the layout"},
           {"", {2}, dtype::float32, "empty name"},
           {"bias", {}, dtype::float32, "empty shape"},
           {"bias", {4, 0}, dtype::float32, "dimension below 1"},
           {"bias", {-3}, dtype::float32, "dimension below 1"},
           {"bias", {2}, static_cast<dtype>(9), "unknown dtype"},
           {"bias", {huge, huge}, dtype::float32, "more elements than a size can hold"},
           {"bias", {huge}, dtype::float32, "does not fit"},
       }) {
    std::string const message = message_of([&] { layout.add(b.name, b.shape, b.type); });
    EXPECT_NE(message.find(b.says), std::string::npos) << "'" << b.name << "': " << message;
    if (!b.name.empty() && b.says != "already in the layout") {
      EXPECT_NE(message.find("'" + b.name + "'"), std::string::npos) << message;
    }
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
    EXPECT_NE(message_of([&] { gm::parameter_layout{alignment}; }).find("power of two"),
              std::string::npos)
        << alignment;
  }
  EXPECT_EQ(gm::parameter_layout{16}.alignment(), 16U);
  EXPECT_EQ(gm::parameter_layout{}.alignment(), 256U);
}
