// Chunk planning for the multi-tensor kernels (train/multi_tensor.hpp): every element covered
// once and in order, and bad input named.

#include <gtest/gtest.h>

#include <cstddef>
#include <graphstep/error.hpp>
#include <graphstep/train/detail/multi_tensor.hpp>
#include <random>
#include <string>
#include <vector>

namespace gt = graphstep::train;

TEST(plan_chunks, covers_every_element_once_in_order) {
  std::mt19937 rng{3};
  std::uniform_int_distribution<std::size_t> size{1, 5000};
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::size_t> counts(1 + trial % 17);
    for (auto& c : counts) c = size(rng);
    std::size_t const chunk = 1 + trial % 700;
    auto const chunks = gt::detail::plan_chunks(counts, chunk);
    std::vector<std::size_t> covered(counts.size(), 0);
    for (auto const& c : chunks) {
      ASSERT_LT(c.tensor, counts.size());
      ASSERT_GT(c.count, 0U);
      ASSERT_LE(c.count, chunk);
      EXPECT_EQ(c.begin, covered[c.tensor]) << "chunks of a tensor are contiguous and ordered";
      covered[c.tensor] += c.count;
    }
    EXPECT_EQ(covered, counts);
  }
}

TEST(plan_chunks, exact_multiples_and_single_elements) {
  auto const chunks = gt::detail::plan_chunks({8, 1, 9}, 4);
  ASSERT_EQ(chunks.size(), 6U);
  EXPECT_EQ(chunks[0].count, 4U);
  EXPECT_EQ(chunks[1].begin, 4U);
  EXPECT_EQ(chunks[2].tensor, 1U);
  EXPECT_EQ(chunks[2].count, 1U);
  EXPECT_EQ(chunks[5].count, 1U);
  EXPECT_EQ(chunks[5].begin, 8U);
}

TEST(plan_chunks, bad_input_is_a_usage_error) {
  EXPECT_THROW(static_cast<void>(gt::detail::plan_chunks({})), graphstep::usage_error);
  EXPECT_THROW(static_cast<void>(gt::detail::plan_chunks({4, 0, 2})), graphstep::usage_error);
  EXPECT_THROW(static_cast<void>(gt::detail::plan_chunks({4}, 0)), graphstep::usage_error);
  try {
    static_cast<void>(gt::detail::plan_chunks({4, 0}));
  } catch (graphstep::usage_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("tensor 1"), std::string::npos) << e.what();
  }
}
