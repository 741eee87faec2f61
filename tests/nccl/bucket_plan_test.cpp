// Gradient buckets (nccl/bucket_plan.hpp): packed in order with a small first bucket, aligned
// offsets, every size in elements, buckets over a parameter layout, and bad input.

#include <gtest/gtest.h>

#include <cstddef>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/nccl/bucket_plan.hpp>
#include <graphstep/parameter_layout.hpp>
#include <limits>
#include <string>
#include <vector>

#include "common/error_message.hpp"

namespace gn = graphstep::nccl;
using graphstep::dtype;
using graphstep::testing::message_of;

TEST(bucket_plan, packs_in_order_with_a_small_first_bucket) {
  // Six fp32 gradients of 400 KiB: first bucket 1 MiB holds two, later buckets of 2 MiB hold five.
  std::vector<std::size_t> const grads(6, 100 << 10);
  auto const plan = gn::plan_buckets(dtype::float32, grads, 2 << 20, 1 << 20, 256);
  EXPECT_EQ(plan.type, dtype::float32);
  ASSERT_EQ(plan.buckets.size(), 2U);
  EXPECT_EQ(plan.buckets[0].first, 0U);
  EXPECT_EQ(plan.buckets[0].last, 2U);
  EXPECT_EQ(plan.buckets[1].first, 2U);
  EXPECT_EQ(plan.buckets[1].last, 6U);
  EXPECT_EQ(plan.buckets[1].offset, plan.offsets[2]);
  EXPECT_EQ(plan.offsets[2], 2U * (100 << 10));  // elements
  EXPECT_EQ(plan.buffer_count, 6U * (100 << 10));
  EXPECT_EQ(plan.buffer_bytes(), 6U * (400 << 10));
  std::size_t covered = 0;
  for (auto const& b : plan.buckets) covered += b.count;
  EXPECT_EQ(covered, plan.buffer_count);
}

TEST(bucket_plan, a_large_gradient_gets_its_own_bucket_and_offsets_are_aligned) {
  // bf16: a 256-byte alignment is 128 elements.
  auto const plan = gn::plan_buckets(dtype::bfloat16, {100, 5 << 20, 300}, 1 << 20, 1 << 20, 256);
  ASSERT_EQ(plan.buckets.size(), 3U);
  EXPECT_EQ(plan.offsets[1], 128U);
  EXPECT_EQ(plan.offsets[2] % 128, 0U);
  EXPECT_EQ(plan.buckets[1].count, std::size_t{5} << 20);
  EXPECT_EQ(plan.buffer_count, 128U + (std::size_t{5} << 20) + 384U);
}

TEST(bucket_plan, bad_input_is_refused_saying_what_is_wrong) {
  auto const f32 = dtype::float32;
  EXPECT_THROW(static_cast<void>(gn::plan_buckets(f32, {})), graphstep::usage_error);
  EXPECT_NE(message_of([&] {
              static_cast<void>(gn::plan_buckets(f32, {4, 0}));
            }).find("gradient 1 is empty"),
            std::string::npos);
  EXPECT_THROW(static_cast<void>(gn::plan_buckets(f32, {4}, 0)), graphstep::usage_error);
  EXPECT_THROW(static_cast<void>(gn::plan_buckets(f32, {4}, 8, 8, 3)), graphstep::usage_error);
  EXPECT_NE(message_of([&] {
              static_cast<void>(gn::plan_buckets(f32, {4}, 8, 8, 2));
            }).find("at least one float32 element"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              static_cast<void>(gn::plan_buckets(static_cast<dtype>(42), {4}));
            }).find("unknown dtype"),
            std::string::npos);
  std::size_t const huge = std::numeric_limits<std::size_t>::max() / 4 - 8;
  EXPECT_NE(message_of([&] {
              static_cast<void>(gn::plan_buckets(f32, {256, huge}));
            }).find("past SIZE_MAX"),
            std::string::npos);
}

TEST(bucket_plan, over_a_parameter_layout_puts_each_gradient_at_its_layout_offset) {
  graphstep::parameter_layout layout{128};
  layout.add({"final norm", {100}, dtype::bfloat16});  // 256 bytes of slot
  layout.add({"fc2", {300, 1000}, dtype::bfloat16});   // 600 000 bytes
  layout.add({"fc1", {1000, 300}, dtype::bfloat16});   // 600 000 bytes
  layout.add({"embedding", {7, 3}, dtype::bfloat16});  // 128 bytes of slot
  auto const plan = gn::plan_buckets(layout, 1 << 20, 4096);
  EXPECT_EQ(plan.type, dtype::bfloat16);
  ASSERT_EQ(plan.offsets.size(), layout.size());
  for (std::size_t i = 0; i < layout.size(); ++i) {
    EXPECT_EQ(plan.offsets[i], layout.at(i).offset) << layout.at(i).spec.name();
  }
  EXPECT_EQ(plan.buffer_bytes(), layout.buffer_bytes());
  // The first bucket (at most 4 KiB) holds the final norm alone; fc2 and fc1 do not fit one.
  ASSERT_EQ(plan.buckets.size(), 3U);
  EXPECT_EQ(plan.buckets[0].last, 1U);
  EXPECT_EQ(plan.buckets[1].last, 2U);
  EXPECT_EQ(plan.buckets[2].last, 4U);
  std::size_t covered = 0;
  for (auto const& b : plan.buckets) covered += b.count;
  EXPECT_EQ(covered, plan.buffer_count);
  EXPECT_THROW(static_cast<void>(gn::plan_buckets(graphstep::parameter_layout{})),
               graphstep::usage_error);

  layout.add({"scale", {1}, dtype::float32});
  EXPECT_NE(message_of([&] {
              static_cast<void>(gn::plan_buckets(layout));
            }).find("'scale' [1] float32 is not bfloat16"),
            std::string::npos);
}

TEST(bucket_plan, refuses_an_adopted_layout_whose_offsets_buckets_would_not_match) {
  graphstep::parameter_layout layout = graphstep::parameter_layout::adopting(64);
  layout.add_at({"weight", {4}, dtype::float32}, 4);
  EXPECT_NE(message_of([&] { static_cast<void>(gn::plan_buckets(layout)); })
                .find("adopts a buffer"),
            std::string::npos);
}
