// The plain C++ side of the NCCL support: launcher variables, the collective log, bucket
// planning, deadlines, and the NCCL status macro.

#include <graphstep/error.hpp>
#include <graphstep/nccl/bucket_plan.hpp>
#include <graphstep/nccl/collective_log.hpp>
#include <graphstep/nccl/deadline.hpp>
#include <graphstep/nccl/launch_environment.hpp>

#include <gtest/gtest.h>
#include <nccl.h>

#include <map>
#include <string>

namespace gn = graphstep::nccl;

namespace {

gn::environment_reader fake(std::map<std::string, std::string> values) {
  return [values = std::move(values)](char const* name) -> std::optional<std::string> {
    auto found = values.find(name);
    if (found == values.end()) return std::nullopt;
    return found->second;
  };
}

std::string usage_message(std::map<std::string, std::string> values) {
  try {
    static_cast<void>(gn::read_launch_environment(fake(std::move(values))));
  } catch (graphstep::usage_error const& e) {
    return e.what();
  }
  ADD_FAILURE() << "no usage_error";
  return {};
}

}  // namespace

TEST(launch_environment, torchrun_variables) {
  auto const env = gn::read_launch_environment(fake({{"RANK", "3"},
                                                     {"LOCAL_RANK", "1"},
                                                     {"WORLD_SIZE", "4"},
                                                     {"LOCAL_WORLD_SIZE", "2"},
                                                     {"MASTER_ADDR", "node0"},
                                                     {"MASTER_PORT", "29511"}}));
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.world_size, 4);
  EXPECT_EQ(env.local_world_size, 2);
  EXPECT_EQ(env.master_addr, "node0");
  EXPECT_EQ(env.master_port, 29511);
  EXPECT_EQ(env.bootstrap, gn::bootstrap_kind::rendezvous);
  EXPECT_EQ(gn::describe(env), "rank 3 of 4 (local 1 of 2), rendezvous at node0:29511");
}

TEST(launch_environment, no_launcher_is_a_single_process_and_nccl_comm_id_is_recognized) {
  EXPECT_EQ(gn::read_launch_environment(fake({})).bootstrap, gn::bootstrap_kind::single_process);
  auto const env = gn::read_launch_environment(
      fake({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"NCCL_COMM_ID", "node0:4000"}}));
  EXPECT_EQ(env.bootstrap, gn::bootstrap_kind::nccl_comm_id);
  EXPECT_EQ(env.local_rank, 1) << "LOCAL_RANK defaults to RANK";
}

TEST(launch_environment, bad_values_name_the_variable) {
  EXPECT_NE(usage_message({{"RANK", "x"}, {"WORLD_SIZE", "2"}}).find("RANK='x'"),
            std::string::npos);
  EXPECT_NE(usage_message({{"RANK", "2"}, {"WORLD_SIZE", "2"}}).find("RANK=2"),
            std::string::npos);
  EXPECT_NE(usage_message({{"RANK", "0"}}).find("together"), std::string::npos);
  EXPECT_NE(usage_message({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}})
                .find("MASTER_ADDR"),
            std::string::npos);
  EXPECT_NE(usage_message({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}})
                .find("MASTER_PORT"),
            std::string::npos);
  EXPECT_NE(usage_message({{"RANK", "0"},
                           {"WORLD_SIZE", "2"},
                           {"MASTER_ADDR", "h"},
                           {"MASTER_PORT", "70000"}})
                .find("1..65535"),
            std::string::npos);
  EXPECT_NE(usage_message({{"RANK", "0"}, {"WORLD_SIZE", "0"}}).find("WORLD_SIZE=0"),
            std::string::npos);
  EXPECT_NE(usage_message({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "3"},
                           {"LOCAL_WORLD_SIZE", "2"}})
                .find("LOCAL_RANK=3"),
            std::string::npos);
}

TEST(collective_log, equal_sequences_hash_equal_and_any_difference_shows) {
  gn::collective_record const a{gn::collective_kind::all_reduce, 0, 1024, gn::reduce_op::avg, -1};
  gn::collective_record const b{gn::collective_kind::broadcast, 2, 8, gn::reduce_op::sum, 0};
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
  for (auto changed : {gn::collective_record{gn::collective_kind::all_reduce, 0, 1025,
                                             gn::reduce_op::avg, -1},
                       gn::collective_record{gn::collective_kind::all_reduce, 1, 1024,
                                             gn::reduce_op::avg, -1},
                       gn::collective_record{gn::collective_kind::all_reduce, 0, 1024,
                                             gn::reduce_op::sum, -1},
                       gn::collective_record{gn::collective_kind::reduce_scatter, 0, 1024,
                                             gn::reduce_op::avg, -1}}) {
    gn::collective_log z;
    z.record(changed);
    z.record(b);
    EXPECT_NE(z.hash(), x.hash()) << gn::describe(changed);
  }
  x.clear();
  EXPECT_EQ(x.hash(), gn::collective_log{}.hash());
  EXPECT_EQ(gn::describe(a), "all_reduce(type 0 x 1024, avg)");
  EXPECT_EQ(gn::describe(b), "broadcast(type 2 x 8, root 0)");
}

TEST(collective_log, a_mismatch_names_the_ranks) {
  EXPECT_NO_THROW(gn::expect_same_sequence({7, 7, 7}, 1, 3));
  try {
    gn::expect_same_sequence({7, 7, 9, 8}, 0, 3);
    FAIL() << "no error";
  } catch (graphstep::nccl_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("rank(s) 2, 3"), std::string::npos) << e.what();
    EXPECT_EQ(e.code(), ncclInvalidUsage);
  }
}

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

TEST(deadline_tracker, times_out_only_past_the_deadline) {
  auto now = std::chrono::steady_clock::time_point{};
  gn::deadline_tracker tracker{std::chrono::milliseconds{500}, [&] { return now; }};
  EXPECT_FALSE(tracker.overdue(0));
  tracker.started(41);
  now += std::chrono::milliseconds{499};
  EXPECT_FALSE(tracker.overdue(0));
  now += std::chrono::milliseconds{2};
  auto const late = tracker.overdue(3);
  ASSERT_TRUE(late);
  EXPECT_NE(late->find("rank 3: step 41"), std::string::npos) << *late;
  EXPECT_NE(late->find("501 ms"), std::string::npos) << *late;
  tracker.finished();
  EXPECT_FALSE(tracker.overdue(3));
  EXPECT_THROW(gn::deadline_tracker(std::chrono::milliseconds{0}), graphstep::usage_error);
}

TEST(nccl_try, names_the_result_and_accepts_in_progress) {
  try {
    GRAPHSTEP_NCCL_TRY(ncclInvalidArgument);
    FAIL() << "no exception";
  } catch (graphstep::nccl_error const& e) {
    EXPECT_EQ(e.code(), ncclInvalidArgument);
    EXPECT_NE(std::string{e.what()}.find("ncclInvalidArgument"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(GRAPHSTEP_NCCL_TRY(ncclInProgress));
  EXPECT_NO_THROW(GRAPHSTEP_NCCL_TRY(ncclSuccess));
}
