// Launcher variables (nccl/launch_environment.hpp): torchrun's, mpirun's and srun's, the
// bootstrap they choose, messages that name a bad variable, and the checks of local ranks
// against visible GPUs.

#include <gtest/gtest.h>

#include <graphstep/error.hpp>
#include <graphstep/nccl/launch_environment.hpp>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "common/error_message.hpp"
#include "nccl/detail/device_choice.hpp"
#include "nccl/detail/slurm.hpp"

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

TEST(launch_environment, the_rendezvous_token_is_read_and_kept_out_of_logs) {
  auto const env = gn::read_launch_environment(fake({{"RANK", "0"},
                                                     {"WORLD_SIZE", "2"},
                                                     {"MASTER_ADDR", "node0"},
                                                     {"MASTER_PORT", "29511"},
                                                     {"GRAPHSTEP_RENDEZVOUS_TOKEN", "s3cret"}}));
  EXPECT_EQ(env.rendezvous_token, "s3cret");
  EXPECT_EQ(gn::describe(env).find("s3cret"), std::string::npos) << gn::describe(env);
}

TEST(launch_environment, torchruns_agent_store_carries_the_id) {
  std::map<std::string, std::string> torchrun{{"RANK", "1"},
                                              {"WORLD_SIZE", "2"},
                                              {"MASTER_ADDR", "localhost"},
                                              {"MASTER_PORT", "38295"},
                                              {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                                              {"TORCHELASTIC_RUN_ID", "8e26ffbe"},
                                              {"TORCHELASTIC_RESTART_COUNT", "2"}};
  auto const env = gn::read_launch_environment(fake(torchrun));
  EXPECT_EQ(env.bootstrap, gn::bootstrap_kind::torchrun_store);
  EXPECT_EQ(env.run_id, "8e26ffbe");
  EXPECT_EQ(env.restart_count, 2);
  EXPECT_EQ(gn::describe(env),
            "rank 1 of 2 (local 1 of 2), through torchrun's store at localhost:38295 (run "
            "8e26ffbe, restart 2)");
  EXPECT_STREQ(gn::name(env.bootstrap), "torchrun_store");
  // torch.distributed trusts the store only when the variable is exactly "True".
  torchrun["TORCHELASTIC_USE_AGENT_STORE"] = "False";
  EXPECT_EQ(gn::read_launch_environment(fake(torchrun)).bootstrap, gn::bootstrap_kind::rendezvous);
  torchrun["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  torchrun["NCCL_COMM_ID"] = "node0:4000";
  EXPECT_EQ(gn::read_launch_environment(fake(torchrun)).bootstrap,
            gn::bootstrap_kind::nccl_comm_id);
  torchrun.erase("NCCL_COMM_ID");
  torchrun["TORCHELASTIC_RESTART_COUNT"] = "-1";
  EXPECT_NE(usage_message(torchrun).find("TORCHELASTIC_RESTART_COUNT=-1"), std::string::npos);
  torchrun["TORCHELASTIC_RESTART_COUNT"] = "one";
  EXPECT_NE(usage_message(torchrun).find("TORCHELASTIC_RESTART_COUNT='one' is not an integer"),
            std::string::npos);
}

TEST(launch_environment, no_launcher_is_a_single_process_and_nccl_comm_id_is_recognized) {
  EXPECT_EQ(gn::read_launch_environment(fake({})).bootstrap, gn::bootstrap_kind::single_process);
  auto const env = gn::read_launch_environment(
      fake({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"NCCL_COMM_ID", "node0:4000"}}));
  EXPECT_EQ(env.bootstrap, gn::bootstrap_kind::nccl_comm_id);
  EXPECT_EQ(env.local_rank, 1) << "LOCAL_RANK defaults to RANK";
}

// srun starts every task of a step with SLURM_STEP_NUM_TASKS and SLURM_PROCID: a multi-task
// step is read as its ranks (before, each task would have trained alone); a batch script (no
// step variables) or one task is a single process.
TEST(launch_environment, a_multi_task_srun_step_is_read_as_its_ranks) {
  auto const env = gn::read_launch_environment(fake({{"SLURM_STEP_NUM_TASKS", "6"},
                                                     {"SLURM_PROCID", "4"},
                                                     {"SLURM_LOCALID", "0"},
                                                     {"SLURM_NODEID", "2"},
                                                     {"SLURM_STEP_TASKS_PER_NODE", "2(x2),1,1"},
                                                     {"SLURM_STEP_NODELIST", "gpu[07-09],cpu1"},
                                                     {"SLURM_JOB_ID", "123456"},
                                                     {"SLURM_STEP_ID", "2"}}));
  EXPECT_EQ(env.bootstrap, gn::bootstrap_kind::rendezvous);
  EXPECT_EQ(env.rank, 4);
  EXPECT_EQ(env.world_size, 6);
  EXPECT_EQ(env.local_rank, 0);
  EXPECT_EQ(env.local_world_size, 1) << "node 2 runs one task";
  EXPECT_EQ(env.master_addr, "gpu07") << "rank 0's host: the step's first node";
  EXPECT_EQ(env.master_port, gn::detail::slurm_rendezvous_port(123456, 2));
  EXPECT_EQ(env.master_port, 23458);
  EXPECT_EQ(env.rendezvous_token, "slurm/123456.2");
  EXPECT_EQ(env.rank_source, "SLURM_PROCID/SLURM_STEP_NUM_TASKS");

  auto const given = gn::read_launch_environment(fake({{"SLURM_STEP_NUM_TASKS", "2"},
                                                       {"SLURM_PROCID", "1"},
                                                       {"SLURM_LOCALID", "1"},
                                                       {"SLURM_JOB_NODELIST", "n1"},
                                                       {"MASTER_ADDR", "head"},
                                                       {"MASTER_PORT", "4000"},
                                                       {"GRAPHSTEP_RENDEZVOUS_TOKEN", "mine"}}));
  EXPECT_EQ(given.master_addr, "head") << "the user's MASTER_ADDR wins";
  EXPECT_EQ(given.master_port, 4000);
  EXPECT_EQ(given.rendezvous_token, "mine");
  EXPECT_EQ(given.local_world_size, 2) << "no tasks-per-node list: the world, as for torchrun";

  EXPECT_EQ(
      gn::read_launch_environment(fake({{"SLURM_NTASKS", "8"}, {"SLURM_PROCID", "0"}})).bootstrap,
      gn::bootstrap_kind::single_process)
      << "a batch script";
  EXPECT_EQ(gn::read_launch_environment(fake({{"SLURM_STEP_NUM_TASKS", "1"}})).bootstrap,
            gn::bootstrap_kind::single_process);
  auto const mapped = gn::read_launch_environment(fake({{"SLURM_STEP_NUM_TASKS", "2"},
                                                        {"RANK", "1"},
                                                        {"WORLD_SIZE", "2"},
                                                        {"MASTER_ADDR", "node0"},
                                                        {"MASTER_PORT", "29500"}}));
  EXPECT_EQ(mapped.bootstrap, gn::bootstrap_kind::rendezvous);
  EXPECT_EQ(mapped.rank_source, "RANK/WORLD_SIZE") << "variables mapped by hand still win";
}

TEST(launch_environment, an_srun_step_that_cannot_name_rank_0_is_refused_by_name) {
  std::map<std::string, std::string> const step{{"SLURM_STEP_NUM_TASKS", "4"},
                                                {"SLURM_PROCID", "1"}};
  auto with = [&](std::map<std::string, std::string> more) {
    more.insert(step.begin(), step.end());
    return usage_message(std::move(more));
  };
  EXPECT_NE(with({{"SLURM_JOB_ID", "7"}}).find("set MASTER_ADDR"), std::string::npos);
  EXPECT_NE(with({{"SLURM_JOB_NODELIST", "n[1-2"}, {"SLURM_JOB_ID", "7"}}).find("set MASTER_ADDR"),
            std::string::npos)
      << "brackets that do not close";
  EXPECT_NE(with({{"SLURM_JOB_NODELIST", "n1"}}).find("set MASTER_PORT"), std::string::npos);
  EXPECT_NE(usage_message({{"SLURM_STEP_NUM_TASKS", "4"}}).find("SLURM_PROCID is not set"),
            std::string::npos);
  EXPECT_NE(usage_message({{"SLURM_STEP_NUM_TASKS", "4"}, {"SLURM_PROCID", "4"}})
                .find("SLURM_PROCID=4 must lie in [0, SLURM_STEP_NUM_TASKS=4)"),
            std::string::npos);
  EXPECT_NE(usage_message({{"SLURM_STEP_NUM_TASKS", "4"}, {"SLURM_PROCID", "x"}})
                .find("SLURM_PROCID='x'"),
            std::string::npos)
      << "not a number";
  EXPECT_NE(usage_message({{"SLURM_STEP_NUM_TASKS", "four"}, {"SLURM_PROCID", "1"}})
                .find("SLURM_STEP_NUM_TASKS='four'"),
            std::string::npos)
      << "not a number";
  EXPECT_NE(
      with({{"SLURM_LOCALID", "0"},
            {"SLURM_NODEID", "0"},
            {"SLURM_STEP_TASKS_PER_NODE", "2(x"},
            {"MASTER_ADDR", "h"},
            {"MASTER_PORT", "1"}})
          .find("SLURM_STEP_TASKS_PER_NODE='2(x' has '2(x', whose repeat count does not read"),
      std::string::npos)
      << "a repeat count that does not close";
  auto per_node = [&](std::string list, std::string node) {
    return with({{"SLURM_LOCALID", "0"},
                 {"SLURM_NODEID", std::move(node)},
                 {"SLURM_STEP_TASKS_PER_NODE", std::move(list)},
                 {"MASTER_ADDR", "h"},
                 {"MASTER_PORT", "1"}});
  };
  EXPECT_NE(per_node("2,", "0").find("has '', which is no task count"), std::string::npos);
  EXPECT_NE(per_node("two", "0").find("has 'two', which is no task count"), std::string::npos);
  EXPECT_NE(per_node("0(x4)", "0").find("counts are at least 1"), std::string::npos);
  EXPECT_NE(per_node("2(x1)", "1").find("covers 1 node(s), not SLURM_NODEID=1"), std::string::npos);
  EXPECT_NE(with({{"SLURM_LOCALID", "2"},
                  {"SLURM_NODEID", "0"},
                  {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
                  {"MASTER_ADDR", "h"},
                  {"MASTER_PORT", "1"}})
                .find("SLURM_LOCALID=2 must lie in [0, 2)"),
            std::string::npos);
}

TEST(slurm, the_first_host_of_a_host_list) {
  EXPECT_EQ(gn::detail::first_host("node1"), "node1");
  EXPECT_EQ(gn::detail::first_host("node[01-04,07],gpu5"), "node01");
  EXPECT_EQ(gn::detail::first_host("node[3,5-6]"), "node3");
  EXPECT_EQ(gn::detail::first_host("rack[1-2]-n[3,5]"), "rack1-n3");
  EXPECT_EQ(gn::detail::first_host("a-b,c"), "a-b");
  EXPECT_EQ(gn::detail::first_host("n[1-2"), "");
  EXPECT_EQ(gn::detail::slurm_rendezvous_port(9999, 1), 20000) << "wraps within 20000..29999";
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
  int const nccl_2_28 = 22807;
  EXPECT_EQ(gn::detail::local_device("nccl_comm: LOCAL_RANK=1", 1, 2, false, nccl_2_28), 1);
  std::string const what = graphstep::testing::message_of([] {
    static_cast<void>(
        gn::detail::local_device("communicator_from_mpi: local rank 2", 2, 2, false, 22807));
  });
  EXPECT_NE(what.find("communicator_from_mpi: local rank 2 but only 2 GPU(s) are visible"),
            std::string::npos)
      << what;
  EXPECT_NE(what.find("at most one rank per visible GPU"), std::string::npos) << what;
  EXPECT_NE(what.find("NCCL_MULTI_RANK_GPU_ENABLE=1"), std::string::npos) << what;
  EXPECT_THROW(
      static_cast<void>(gn::detail::local_device("nccl_comm: LOCAL_RANK=0", 0, 0, true, 23007)),
      graphstep::usage_error);
}

TEST(launch_environment, ranks_share_gpus_round_robin_when_nccl_accepts_it) {
  int const nccl_2_30 = 23007;
  EXPECT_EQ(gn::detail::local_device("r", 0, 1, true, nccl_2_30), 0);
  EXPECT_EQ(gn::detail::local_device("r", 3, 1, true, nccl_2_30), 0);
  EXPECT_EQ(gn::detail::local_device("r", 3, 2, true, nccl_2_30), 1);
  EXPECT_EQ(gn::detail::local_device("r", 1, 2, true, 22807), 1)
      << "one rank per GPU needs no 2.30";
  std::string const old = graphstep::testing::message_of([] {
    static_cast<void>(gn::detail::local_device("nccl_comm: LOCAL_RANK=1", 1, 1, true, 22807));
  });
  EXPECT_NE(old.find("the NCCL loaded (2.28.7) refuses two ranks on one GPU"), std::string::npos)
      << old;

  EXPECT_FALSE(gn::detail::ranks_may_share_a_gpu(fake({})));
  EXPECT_FALSE(gn::detail::ranks_may_share_a_gpu(fake({{"NCCL_MULTI_RANK_GPU_ENABLE", "0"}})));
  EXPECT_TRUE(gn::detail::ranks_may_share_a_gpu(fake({{"NCCL_MULTI_RANK_GPU_ENABLE", "1"}})));
  EXPECT_TRUE(gn::read_launch_environment(fake({{"NCCL_MULTI_RANK_GPU_ENABLE", "2"}}))
                  .ranks_may_share_a_gpu);
  EXPECT_THROW(static_cast<void>(gn::detail::ranks_may_share_a_gpu(
                   fake({{"NCCL_MULTI_RANK_GPU_ENABLE", "yes"}}))),
               graphstep::usage_error);
}

TEST(launch_environment, a_device_list_names_a_duplicate_or_a_bad_id) {
  EXPECT_NO_THROW(gn::detail::check_local_device_list({0, 1, 2}));
  std::string const duplicate = graphstep::testing::message_of([] {
    gn::detail::check_local_device_list({0, 1, 0});
  });
  EXPECT_NE(duplicate.find("device 0 is listed twice"), std::string::npos) << duplicate;
  EXPECT_NE(duplicate.find("one rank per GPU"), std::string::npos) << duplicate;
  EXPECT_THROW(gn::detail::check_local_device_list({}), graphstep::usage_error);
  EXPECT_THROW(gn::detail::check_local_device_list({1, -1}), graphstep::usage_error);
}
