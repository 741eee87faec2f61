// The graph cache's least-recently-used order under a memory budget
// (schedule/detail/lru_budget.hpp).

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <graphstep/error.hpp>
#include <graphstep/schedule/detail/lru_budget.hpp>
#include <string>
#include <vector>

namespace gsch = graphstep::schedule;

namespace {

// Capture sizes 0 to n-1: a capture size's slot is the capture size itself.
std::vector<std::int64_t> sizes_up_to(std::int64_t n) {
  std::vector<std::int64_t> sizes;
  for (std::int64_t b = 0; b < n; ++b) sizes.push_back(b);
  return sizes;
}

}  // namespace

TEST(lru_budget, evicts_least_recently_used_first_to_fit) {
  gsch::detail::lru_budget lru{sizes_up_to(6), 100};
  EXPECT_TRUE(lru.insert(1, 40).empty());
  EXPECT_TRUE(lru.insert(2, 40).empty());
  lru.touch(1);  // 2 is now the least recent
  EXPECT_EQ(lru.insert(3, 40), (std::vector<std::size_t>{2}));
  EXPECT_EQ(lru.order(), (std::vector<std::int64_t>{1, 3}));
  EXPECT_EQ(lru.total_bytes(), 80U);
  EXPECT_EQ(lru.insert(4, 90), (std::vector<std::size_t>{1, 3}));
  EXPECT_TRUE(lru.contains(4));
  EXPECT_THROW(static_cast<void>(lru.insert(4, 1)), graphstep::usage_error);
  EXPECT_THROW(static_cast<void>(lru.insert(5, 101)), graphstep::usage_error);
  lru.erase(4);
  EXPECT_EQ(lru.total_bytes(), 0U);
}

TEST(lru_budget, no_budget_never_evicts) {
  gsch::detail::lru_budget lru{sizes_up_to(100)};
  for (std::size_t i = 0; i < 100; ++i) EXPECT_TRUE(lru.insert(i, 1U << 30).empty());
  EXPECT_EQ(lru.order().size(), 100U);
}

TEST(lru_budget, messages_name_the_size_not_its_slot_and_slots_out_of_range_are_refused) {
  gsch::detail::lru_budget lru{{64, 128}, 1000};
  try {
    static_cast<void>(lru.insert(1, 2000));
    FAIL() << "no error";
  } catch (graphstep::usage_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("capture size 128 needs 2000 bytes"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(static_cast<void>(lru.insert(2, 1)), graphstep::usage_error);
  EXPECT_THROW(lru.touch(7), graphstep::usage_error);
  EXPECT_FALSE(lru.contains(7));
  EXPECT_EQ(lru.total_bytes(), 0U);
}
