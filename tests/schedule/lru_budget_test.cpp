// The graph cache's least-recently-used order under a memory budget
// (schedule/detail/lru_budget.hpp).

#include <gtest/gtest.h>

#include <cstdint>
#include <graphstep/error.hpp>
#include <graphstep/schedule/detail/lru_budget.hpp>
#include <vector>

namespace gsch = graphstep::schedule;

TEST(lru_budget, evicts_least_recently_used_first_to_fit) {
  gsch::detail::lru_budget lru{100};
  EXPECT_TRUE(lru.insert(1, 40).empty());
  EXPECT_TRUE(lru.insert(2, 40).empty());
  lru.touch(1);  // 2 is now the least recent
  EXPECT_EQ(lru.insert(3, 40), (std::vector<std::int64_t>{2}));
  EXPECT_EQ(lru.order(), (std::vector<std::int64_t>{1, 3}));
  EXPECT_EQ(lru.total_bytes(), 80U);
  EXPECT_EQ(lru.insert(4, 90), (std::vector<std::int64_t>{1, 3}));
  EXPECT_TRUE(lru.contains(4));
  EXPECT_THROW(static_cast<void>(lru.insert(4, 1)), graphstep::usage_error);
  EXPECT_THROW(static_cast<void>(lru.insert(5, 101)), graphstep::usage_error);
  lru.erase(4);
  EXPECT_EQ(lru.total_bytes(), 0U);
}

TEST(lru_budget, no_budget_never_evicts) {
  gsch::detail::lru_budget lru;
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(lru.insert(i, 1U << 30).empty());
  EXPECT_EQ(lru.order().size(), 100U);
}
