// The plain C++ side of the NCCL support: launcher variables, the collective log, bucket
// planning, deadlines, and the NCCL status macro.

#include <gtest/gtest.h>

#include <cstdint>
#include <graphstep/error.hpp>
#include <graphstep/nccl/bucket_plan.hpp>
#include <graphstep/nccl/collective_log.hpp>
#include <graphstep/nccl/deadline.hpp>
#include <graphstep/nccl/launch_environment.hpp>
#include <map>
#include <string>

#include "common/error_message.hpp"

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
  EXPECT_NE(usage_message({{"RANK", "2"}, {"WORLD_SIZE", "2"}}).find("RANK=2"), std::string::npos);
  EXPECT_NE(usage_message({{"RANK", "0"}}).find("together"), std::string::npos);
  EXPECT_NE(
      usage_message({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}}).find("MASTER_ADDR"),
      std::string::npos);
  EXPECT_NE(
      usage_message({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}).find("MASTER_PORT"),
      std::string::npos);
  EXPECT_NE(
      usage_message(
          {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}})
          .find("1..65535"),
      std::string::npos);
  EXPECT_NE(usage_message({{"RANK", "0"}, {"WORLD_SIZE", "0"}}).find("WORLD_SIZE=0"),
            std::string::npos);
  EXPECT_NE(
      usage_message(
          {{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "3"}, {"LOCAL_WORLD_SIZE", "2"}})
          .find("LOCAL_RANK=3"),
      std::string::npos);
}

TEST(launch_environment, mpirun_variables_choose_the_mpi_bootstrap_when_it_is_built) {
  std::map<std::string, std::string> const open_mpi{{"OMPI_COMM_WORLD_RANK", "5"},
                                                    {"OMPI_COMM_WORLD_SIZE", "8"},
                                                    {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                                    {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}};
  auto const env = gn::read_launch_environment(fake(open_mpi), true);
  EXPECT_EQ(env.bootstrap, gn::bootstrap_kind::mpi);
  EXPECT_EQ(env.rank, 5);
  EXPECT_EQ(env.world_size, 8);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_world_size, 4);
  EXPECT_EQ(gn::describe(env),
            "rank 5 of 8 (local 1 of 4), bootstrap through MPI (ranks from OMPI_COMM_WORLD_*)");
  // MPICH and Intel MPI publish PMI_* instead.
  auto const mpich = gn::read_launch_environment(
      fake({{"PMI_RANK", "2"}, {"PMI_SIZE", "3"}, {"MPI_LOCALRANKID", "0"}}), true);
  EXPECT_EQ(mpich.bootstrap, gn::bootstrap_kind::mpi);
  EXPECT_EQ(mpich.rank_source, "PMI_*");
  EXPECT_EQ(mpich.local_rank, 0);
  // Without MPI in the build: a clear error, unless NCCL_COMM_ID lets NCCL bootstrap itself.
  try {
    static_cast<void>(gn::read_launch_environment(fake(open_mpi), false));
    FAIL() << "no usage_error";
  } catch (graphstep::usage_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("GRAPHSTEP_WITH_MPI"), std::string::npos) << e.what();
  }
  auto with_id = open_mpi;
  with_id["NCCL_COMM_ID"] = "node0:4000";
  auto const by_nccl = gn::read_launch_environment(fake(with_id), false);
  EXPECT_EQ(by_nccl.bootstrap, gn::bootstrap_kind::nccl_comm_id);
  EXPECT_EQ(by_nccl.rank, 5);
  EXPECT_EQ(gn::read_launch_environment(
                fake({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}}), false)
                .bootstrap,
            gn::bootstrap_kind::single_process);
  // torchrun's variables win over mpirun's.
  auto both = open_mpi;
  both.insert({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "9"}});
  EXPECT_EQ(gn::read_launch_environment(fake(both), true).bootstrap,
            gn::bootstrap_kind::rendezvous);
  EXPECT_STREQ(gn::name(gn::bootstrap_kind::mpi), "mpi");
}

TEST(launch_environment, inconsistent_mpirun_variables_are_named) {
  EXPECT_NE(usage_message({{"OMPI_COMM_WORLD_RANK", "4"}, {"OMPI_COMM_WORLD_SIZE", "4"}})
                .find("OMPI_COMM_WORLD_RANK=4"),
            std::string::npos);
  EXPECT_NE(usage_message({{"PMI_RANK", "1"}}).find("PMI_SIZE"), std::string::npos);
  EXPECT_NE(usage_message({{"RANK", "0"},
                           {"WORLD_SIZE", "2"},
                           {"LOCAL_WORLD_SIZE", "3"},
                           {"MASTER_ADDR", "h"},
                           {"MASTER_PORT", "9"}})
                .find("LOCAL_WORLD_SIZE=3"),
            std::string::npos);
}

TEST(launch_environment, a_local_rank_without_its_gpu_is_named) {
  EXPECT_NO_THROW(gn::check_local_device("nccl_comm: LOCAL_RANK=1", 1, 2));
  std::string const what = graphstep::testing::message_of(
      [] { gn::check_local_device("communicator_from_mpi: local rank 2", 2, 2); });
  EXPECT_NE(what.find("communicator_from_mpi: local rank 2 but only 2 GPU(s) are visible"),
            std::string::npos)
      << what;
  EXPECT_NE(what.find("at most one rank per visible GPU"), std::string::npos) << what;
}

TEST(launch_environment, a_device_list_names_a_duplicate_or_a_bad_id) {
  EXPECT_NO_THROW(gn::check_local_device_list({0, 1, 2}));
  std::string const duplicate = graphstep::testing::message_of([] {
    gn::check_local_device_list({0, 1, 0});
  });
  EXPECT_NE(duplicate.find("device 0 is listed twice"), std::string::npos) << duplicate;
  EXPECT_NE(duplicate.find("one rank per GPU"), std::string::npos) << duplicate;
  EXPECT_THROW(gn::check_local_device_list({}), graphstep::usage_error);
  EXPECT_THROW(gn::check_local_device_list({1, -1}), graphstep::usage_error);
}

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
  std::vector<gn::sequence_summary> summaries;
  for (auto const& log : logs) summaries.push_back({log.hash(), log.records().size()});
  std::size_t const length = gn::prefixes_to_compare(summaries);
  std::vector<std::uint64_t> prefixes;
  for (auto const& log : logs) {
    auto const mine = gn::padded_prefixes(log, length);
    prefixes.insert(prefixes.end(), mine.begin(), mine.end());
  }
  auto const first = gn::first_difference(prefixes, logs.size(), length);
  try {
    gn::expect_same_sequence(summaries, this_rank, logs[static_cast<std::size_t>(this_rank)],
                             first);
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
  EXPECT_TRUE(gn::differing_ranks({{7, 2}, {7, 2}}).empty());
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
      gn::differing_ranks(
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
  std::vector<gn::sequence_summary> const summaries{{logs[0].hash(), 10}, {logs[1].hash(), 11}};
  std::size_t const length = gn::prefixes_to_compare(summaries, 4);
  EXPECT_EQ(length, 4U);
  auto prefixes = gn::padded_prefixes(logs[0], length);
  auto const other = gn::padded_prefixes(logs[1], length);
  prefixes.insert(prefixes.end(), other.begin(), other.end());
  EXPECT_FALSE(gn::first_difference(prefixes, 2, length));
  try {
    gn::expect_same_sequence(summaries, 0, logs[0], std::nullopt);
    FAIL() << "no error";
  } catch (graphstep::nccl_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("unknown"), std::string::npos) << e.what();
  }
  EXPECT_THROW(static_cast<void>(gn::first_difference(prefixes, 3, length)),
               graphstep::usage_error);
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

TEST(deadline_tracker, later_launches_do_not_hide_a_hung_step) {
  auto now = std::chrono::steady_clock::time_point{};
  gn::deadline_tracker tracker{std::chrono::milliseconds{100}, [&] { return now; }};
  tracker.started(1);
  for (std::int64_t step = 2; step <= 5; ++step) {
    now += std::chrono::milliseconds{30};
    tracker.started(step);
  }
  EXPECT_EQ(tracker.outstanding_count(), 5U);
  auto const late = tracker.overdue(0);  // step 1 launched 120 ms ago
  ASSERT_TRUE(late);
  EXPECT_NE(late->find("step 1 "), std::string::npos) << *late;
  EXPECT_NE(late->find("4 later step(s)"), std::string::npos) << *late;
  tracker.finished(3);  // steps 1..3 done; step 4 launched 30 ms ago
  EXPECT_EQ(tracker.outstanding_step(), 4);
  EXPECT_FALSE(tracker.overdue(0));
  now += std::chrono::milliseconds{71};
  ASSERT_TRUE(tracker.overdue(0));
  EXPECT_NE(tracker.overdue(0)->find("step 4 has not finished after 101 ms"), std::string::npos);
  EXPECT_THROW(tracker.started(5), graphstep::usage_error) << "step numbers must increase";
  tracker.finished();
  EXPECT_EQ(tracker.outstanding_count(), 0U);
  EXPECT_NO_THROW(tracker.started(0)) << "after all finished, numbering may restart";
}

TEST(watchdog_verdict, nothing_wrong_is_no_reason) {
  gn::watchdog_observation seen;
  seen.rank = 1;
  seen.outstanding = 2;
  seen.oldest_outstanding = 5;
  EXPECT_EQ(gn::watchdog_verdict(seen), "");
  seen.async = gn::async_state::in_progress;  // a non-blocking call under way is not an error
  EXPECT_EQ(gn::watchdog_verdict(seen), "");
}

TEST(watchdog_verdict, an_asynchronous_nccl_error_is_named_with_the_outstanding_steps) {
  gn::watchdog_observation seen;
  seen.rank = 3;
  seen.async = gn::async_state::failed;
  seen.async_result = "ncclRemoteError (remote process exited or there was a network error)";
  seen.outstanding = 2;
  seen.oldest_outstanding = 41;
  EXPECT_EQ(gn::watchdog_verdict(seen),
            "rank 3: NCCL reported ncclRemoteError (remote process exited or there was a "
            "network error) asynchronously; 2 step(s) outstanding, oldest step 41");
  seen.overdue = "rank 3: step 41 has not finished";  // the NCCL error explains the delay
  EXPECT_EQ(gn::watchdog_verdict(seen).rfind("rank 3: NCCL reported ncclRemoteError", 0), 0U);
}

TEST(watchdog_verdict, a_stream_error_comes_first_and_a_missed_deadline_last) {
  gn::watchdog_observation seen;
  seen.rank = 0;
  seen.overdue = "rank 0: step 7 has not finished after 900 ms";
  seen.outstanding = 1;
  seen.oldest_outstanding = 7;
  EXPECT_EQ(gn::watchdog_verdict(seen),
            "rank 0: step 7 has not finished after 900 ms; NCCL's asynchronous state: "
            "ncclSuccess; 1 step(s) outstanding, oldest step 7");
  seen.async = gn::async_state::failed;
  seen.async_result = "ncclSystemError (unhandled system error)";
  seen.stream_error_step = 7;
  seen.stream_error = "cudaErrorIllegalAddress";
  EXPECT_EQ(gn::watchdog_verdict(seen),
            "rank 0, step 7: CUDA reported an error on the watched stream: "
            "cudaErrorIllegalAddress");
}
