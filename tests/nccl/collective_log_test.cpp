// The log of captured collectives (nccl/collective_log.hpp): sequence hashes, and the message
// that names the ranks whose sequences differ and the first collective where they do.

#include "nccl/detail/collective_log.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <graphstep/error.hpp>
#include <graphstep/nccl/collective_log.hpp>
#include <optional>
#include <string>
#include <vector>

namespace gn = graphstep::nccl;

TEST(collective_log, equal_sequences_hash_equal_and_any_difference_shows) {
  gn::collective_record const a{
      gn::collective_kind::all_reduce, 0, 1024, gn::reduce_op::avg, -1, 0};
  gn::collective_record const b{gn::collective_kind::broadcast, 2, 8, gn::reduce_op::sum, 0, 0};
  gn::collective_log x;
  gn::collective_log y;
  x.record(a);
  x.record(b);
  y.record(a);
  y.record(b);
  EXPECT_EQ(x.hash(), y.hash());
  gn::collective_log reordered;
  reordered.record(b);
  reordered.record(a);
  EXPECT_NE(x.hash(), reordered.hash());
  for (auto changed :
       {gn::collective_record{gn::collective_kind::all_reduce, 0, 1025, gn::reduce_op::avg, -1, 0},
        gn::collective_record{gn::collective_kind::all_reduce, 1, 1024, gn::reduce_op::avg, -1, 0},
        gn::collective_record{gn::collective_kind::all_reduce, 0, 1024, gn::reduce_op::sum, -1, 0},
        gn::collective_record{gn::collective_kind::reduce_scatter, 0, 1024, gn::reduce_op::avg, -1,
                              0},
        gn::collective_record{gn::collective_kind::all_reduce, 0, 1024, gn::reduce_op::avg, 1, 0},
        gn::collective_record{gn::collective_kind::all_reduce, 0, 1024, gn::reduce_op::avg, -1,
                              1}}) {
    gn::collective_log z;
    z.record(changed);
    z.record(b);
    EXPECT_NE(z.hash(), x.hash()) << gn::describe(changed);
  }
  ASSERT_EQ(x.prefix_hashes().size(), 2U);
  EXPECT_EQ(x.prefix_hashes().back(), x.hash());
  gn::collective_log only_a;
  only_a.record(a);
  EXPECT_EQ(x.prefix_hashes().front(), only_a.hash());
  x.clear();
  EXPECT_EQ(x.hash(), gn::collective_log{}.hash());
  EXPECT_TRUE(x.prefix_hashes().empty());
  EXPECT_EQ(gn::describe(a), "all_reduce(float32 x 1024, avg, slot 0)");
  EXPECT_EQ(gn::describe(b), "broadcast(bfloat16 x 8, root 0, slot 0)");
}

namespace {

gn::collective_record op(std::size_t count, int slot = 0) {
  return {gn::collective_kind::all_reduce, 0, count, gn::reduce_op::avg, -1, slot};
}

// What verify_captured_sequence computes from the logs of all ranks, without the network.
std::string mismatch_message(std::vector<gn::collective_log> const& logs, int this_rank) {
  std::vector<gn::detail::sequence_summary> summaries;
  for (auto const& log : logs) summaries.push_back({log.hash(), log.records().size()});
  std::size_t const length = gn::detail::prefixes_to_compare(summaries);
  std::vector<std::uint64_t> prefixes;
  for (auto const& log : logs) {
    auto const mine = gn::detail::padded_prefixes(log, length);
    prefixes.insert(prefixes.end(), mine.begin(), mine.end());
  }
  auto const first = gn::detail::first_difference(prefixes, logs.size(), length);
  try {
    gn::detail::expect_same_sequence(summaries, this_rank,
                                     logs[static_cast<std::size_t>(this_rank)], first);
  } catch (graphstep::nccl_error const& e) {
    EXPECT_EQ(e.code(), 5) << "ncclInvalidUsage";
    return e.what();
  }
  return {};
}

}  // namespace

TEST(collective_log, equal_sequences_pass) {
  std::vector<gn::collective_log> logs(4);
  for (auto& log : logs) {
    for (std::size_t i = 1; i <= 5; ++i) log.record(op(i * 100));
  }
  EXPECT_EQ(mismatch_message(logs, 2), "");
  EXPECT_EQ(mismatch_message(std::vector<gn::collective_log>(3), 0), "") << "nothing captured";
  EXPECT_TRUE(gn::detail::differing_ranks({{7, 2}, {7, 2}}).empty());
}

TEST(collective_log, a_mismatch_names_the_ranks_and_the_first_differing_collective) {
  std::vector<gn::collective_log> logs(4);
  for (auto& log : logs) {
    for (std::size_t i = 1; i <= 5; ++i) log.record(op(i * 100));
  }
  logs[2].clear();  // rank 2 captured a different size at #3
  for (std::size_t i = 1; i <= 5; ++i) logs[2].record(op(i == 4 ? 999 : i * 100));
  logs[3].record(op(600));  // rank 3 captured one more at #5
  EXPECT_EQ(
      gn::detail::differing_ranks(
          {{logs[0].hash(), 5}, {logs[1].hash(), 5}, {logs[2].hash(), 5}, {logs[3].hash(), 6}}),
      (std::vector<int>{2, 3}));
  std::string const on_rank_2 = mismatch_message(logs, 2);
  EXPECT_NE(on_rank_2.find("rank(s) 2, 3"), std::string::npos) << on_rank_2;
  EXPECT_NE(on_rank_2.find("rank 0: 5, rank 2: 5, rank 3: 6"), std::string::npos) << on_rank_2;
  EXPECT_NE(on_rank_2.find("collective #3"), std::string::npos) << on_rank_2;
  EXPECT_NE(on_rank_2.find("all_reduce(float32 x 999, avg, slot 0)"), std::string::npos)
      << on_rank_2;
  // Rank 0 reports the same index and what it captured there itself.
  std::string const on_rank_0 = mismatch_message(logs, 0);
  EXPECT_NE(on_rank_0.find("collective #3"), std::string::npos) << on_rank_0;
  EXPECT_NE(on_rank_0.find("x 400"), std::string::npos) << on_rank_0;
}

TEST(collective_log, a_longer_sequence_or_another_slot_is_found) {
  std::vector<gn::collective_log> logs(2);
  logs[0].record(op(8));
  logs[1].record(op(8));
  logs[1].record(op(8));
  std::string const longer = mismatch_message(logs, 0);
  EXPECT_NE(longer.find("collective #1"), std::string::npos) << longer;
  EXPECT_NE(longer.find("captured nothing"), std::string::npos) << longer;
  std::vector<gn::collective_log> slots(2);
  slots[0].record(op(8, 0));
  slots[1].record(op(8, 1));
  std::string const slot = mismatch_message(slots, 1);
  EXPECT_NE(slot.find("collective #0"), std::string::npos) << slot;
  EXPECT_NE(slot.find("slot 1"), std::string::npos) << slot;
}

TEST(collective_log, beyond_the_compared_prefix_the_index_is_unknown) {
  std::vector<gn::collective_log> logs(2);
  for (std::size_t i = 0; i < 10; ++i) {
    logs[0].record(op(i + 1));
    logs[1].record(op(i + 1));
  }
  logs[1].record(op(1));
  std::vector<gn::detail::sequence_summary> const summaries{{logs[0].hash(), 10},
                                                            {logs[1].hash(), 11}};
  std::size_t const length = gn::detail::prefixes_to_compare(summaries, 4);
  EXPECT_EQ(length, 4U);
  auto prefixes = gn::detail::padded_prefixes(logs[0], length);
  auto const other = gn::detail::padded_prefixes(logs[1], length);
  prefixes.insert(prefixes.end(), other.begin(), other.end());
  EXPECT_FALSE(gn::detail::first_difference(prefixes, 2, length));
  try {
    gn::detail::expect_same_sequence(summaries, 0, logs[0], std::nullopt);
    FAIL() << "no error";
  } catch (graphstep::nccl_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("unknown"), std::string::npos) << e.what();
  }
  EXPECT_THROW(static_cast<void>(gn::detail::first_difference(prefixes, 3, length)),
               graphstep::usage_error);
}
