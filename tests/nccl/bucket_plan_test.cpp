// Gradient buckets (nccl/bucket_plan.hpp): packed in order with a small first bucket, aligned
// offsets, buckets over a parameter layout, and bad input.

#include <gtest/gtest.h>

#include <cstddef>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/parameter_layout.hpp>
#include <graphstep/nccl/bucket_plan.hpp>
#include <vector>

namespace gn = graphstep::nccl;

TEST(bucket_plan, packs_in_order_with_a_small_first_bucket) {
  // Six gradients of 400 KiB: first bucket 1 MiB holds two, later buckets of 2 MiB hold five.
  std::vector<std::size_t> const grads(6, 400 << 10);
  auto const plan = gn::plan_buckets(grads, 2 << 20, 1 << 20, 256);
  ASSERT_EQ(plan.buckets.size(), 2U);
  EXPECT_EQ(plan.buckets[0].first, 0U);
  EXPECT_EQ(plan.buckets[0].last, 2U);
  EXPECT_EQ(plan.buckets[1].first, 2U);
  EXPECT_EQ(plan.buckets[1].last, 6U);
  EXPECT_EQ(plan.buckets[1].offset, plan.offsets[2]);
  EXPECT_EQ(plan.buffer_bytes, 6U * (400 << 10));
  std::size_t covered = 0;
  for (auto const& b : plan.buckets) covered += b.bytes;
  EXPECT_EQ(covered, plan.buffer_bytes);
}

TEST(bucket_plan, a_large_gradient_gets_its_own_bucket_and_offsets_are_aligned) {
  auto const plan = gn::plan_buckets({100, 10 << 20, 300}, 1 << 20, 1 << 20, 256);
  ASSERT_EQ(plan.buckets.size(), 3U);
  EXPECT_EQ(plan.offsets[1] % 256, 0U);
  EXPECT_EQ(plan.offsets[2] % 256, 0U);
  EXPECT_EQ(plan.buckets[1].bytes, std::size_t{10} << 20);
}

TEST(bucket_plan, bad_input) {
  EXPECT_THROW(static_cast<void>(gn::plan_buckets({})), graphstep::usage_error);
  EXPECT_THROW(static_cast<void>(gn::plan_buckets({4, 0})), graphstep::usage_error);
  EXPECT_THROW(static_cast<void>(gn::plan_buckets({4}, 0)), graphstep::usage_error);
  EXPECT_THROW(static_cast<void>(gn::plan_buckets({4}, 8, 8, 3)), graphstep::usage_error);
}

TEST(bucket_plan, over_a_parameter_layout_puts_each_gradient_at_its_layout_offset) {
  graphstep::parameter_layout layout{128};
  layout.add({"final norm", {100}, graphstep::dtype::bfloat16});  // 256 bytes of slot
  layout.add({"fc2", {300, 1000}, graphstep::dtype::bfloat16});   // 600 000 bytes
  layout.add({"fc1", {1000, 300}, graphstep::dtype::bfloat16});   // 600 000 bytes
  layout.add({"embedding", {7, 3}, graphstep::dtype::float32});   // 128 bytes of slot
  auto const plan = gn::plan_buckets(layout, 1 << 20, 4096);
  ASSERT_EQ(plan.offsets.size(), layout.size());
  for (std::size_t i = 0; i < layout.size(); ++i) {
    EXPECT_EQ(plan.offsets[i], layout.at(i).byte_offset()) << layout.at(i).spec.name();
  }
  EXPECT_EQ(plan.buffer_bytes, layout.buffer_bytes());
  // The first bucket (at most 4 KiB) holds the final norm alone; fc2 and fc1 do not fit one.
  ASSERT_EQ(plan.buckets.size(), 3U);
  EXPECT_EQ(plan.buckets[0].last, 1U);
  EXPECT_EQ(plan.buckets[1].last, 2U);
  EXPECT_EQ(plan.buckets[2].last, 4U);
  std::size_t covered = 0;
  for (auto const& b : plan.buckets) covered += b.bytes;
  EXPECT_EQ(covered, plan.buffer_bytes);
  EXPECT_THROW(static_cast<void>(gn::plan_buckets(graphstep::parameter_layout{})),
               graphstep::usage_error);
}
