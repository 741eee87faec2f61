// The MPI bootstrap's id broadcast and local rank, run by ctest under mpiexec with several
// ranks. Needs no GPU: communicator_from_mpi itself is tested on the simulated device.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <graphstep/error.hpp>
#include <graphstep/nccl/bootstrap.hpp>
#include <graphstep/nccl/launch_environment.hpp>
#include <graphstep/nccl/mpi_bootstrap.hpp>
#include <graphstep/nccl/nccl_comm_view.hpp>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "nccl/detail/mpi_bootstrap.hpp"

namespace gs = graphstep;
namespace gn = graphstep::nccl;

namespace {

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int world_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

// Ends this rank when a test outlasts `limit`: a rank blocked in a collective that another
// rank never joins would otherwise wait until ctest's TIMEOUT. mpiexec then stops every rank
// (one exited before MPI_Finalize), so the job fails at once and says which test hung.
class hang_guard {
 public:
  explicit hang_guard(std::chrono::seconds limit)
      : test_{::testing::UnitTest::GetInstance()->current_test_info()->name()},
        watcher_{[this, limit] {
          std::unique_lock<std::mutex> lock{mutex_};
          if (done_changed_.wait_for(lock, limit, [this] { return done_; })) return;
          std::fprintf(stderr, "rank %d: %s still runs after %llds: a rank is left waiting\n",
                       world_rank(), test_.c_str(), static_cast<long long>(limit.count()));
          std::fflush(stderr);
          std::_Exit(3);
        }} {}
  hang_guard(hang_guard const&) = delete;
  hang_guard& operator=(hang_guard const&) = delete;
  ~hang_guard() {
    {
      std::lock_guard<std::mutex> lock{mutex_};
      done_ = true;
    }
    done_changed_.notify_one();
    watcher_.join();
  }

 private:
  std::string test_;
  std::mutex mutex_;
  std::condition_variable done_changed_;
  bool done_{false};
  std::thread watcher_;  // last: starts once the members it reads exist
};

constexpr std::chrono::seconds test_limit{20};

gn::unique_id_bytes filled(unsigned char value) {
  gn::unique_id_bytes id{};
  id.fill(value);
  return id;
}

// After a failed bootstrap the ranks are still in step: the next collective on `comm` matches
// the same collective on every rank, not one the bootstrap left pending.
void expect_ranks_in_step(MPI_Comm comm) {
  int const one = 1;
  int total = 0;
  MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, comm);
  EXPECT_EQ(total, world_size()) << "rank " << world_rank();
}

// Runs `call` and returns the nccl_error it threw; fails the test if it threw anything else.
template <typename Call>
gs::nccl_error expect_nccl_error(Call&& call) {
  try {
    call();
  } catch (gs::nccl_error const& e) {
    return e;
  } catch (std::exception const& e) {
    ADD_FAILURE() << "rank " << world_rank() << " threw another exception: " << e.what();
    return gs::nccl_error{0, ""};
  }
  ADD_FAILURE() << "rank " << world_rank() << " threw nothing";
  return gs::nccl_error{0, ""};
}

}  // namespace

TEST(mpi_bootstrap, every_rank_receives_rank_zeros_id) {
  int const rank = world_rank();
  auto const id = gn::detail::broadcast_unique_id(MPI_COMM_WORLD, filled(rank == 0 ? 42 : 7));
  EXPECT_EQ(id, filled(42)) << "rank " << rank;
}

TEST(mpi_bootstrap, every_rank_receives_the_id_rank_zero_made) {
  hang_guard const guard{test_limit};
  int const rank = world_rank();
  int prepared = 0;
  int made = 0;
  auto const id = gn::detail::bootstrap_unique_id(
      MPI_COMM_WORLD, [&] { ++prepared; },
      [&] {
        ++made;
        return filled(42);
      });
  EXPECT_EQ(id, filled(42)) << "rank " << rank;
  EXPECT_EQ(prepared, 1) << "rank " << rank;
  EXPECT_EQ(made, rank == 0 ? 1 : 0) << "rank " << rank;
}

TEST(mpi_bootstrap, rank_zero_failing_to_make_the_id_fails_every_rank) {
  hang_guard const guard{test_limit};
  int const rank = world_rank();
  auto const bootstrap = [] {
    static_cast<void>(gn::detail::bootstrap_unique_id(
        MPI_COMM_WORLD, [] {},
        []() -> gn::unique_id_bytes { throw std::runtime_error{"no usable network interface"}; }));
  };
  if (rank == 0) {
    // Rank 0 gets its own exception back, unchanged.
    try {
      bootstrap();
      ADD_FAILURE() << "rank 0 threw nothing";
    } catch (gs::nccl_error const& e) {
      ADD_FAILURE() << "rank 0 threw nccl_error, not its own exception: " << e.what();
    } catch (std::runtime_error const& e) {
      EXPECT_STREQ(e.what(), "no usable network interface");
    }
  } else {
    auto const e = expect_nccl_error(bootstrap);
    EXPECT_EQ(e.code(), 2) << "rank " << rank;  // ncclSystemError
    std::string const what = e.what();
    EXPECT_NE(what.find("rank 0 failed to create the NCCL unique id"), std::string::npos) << what;
    EXPECT_NE(what.find("no usable network interface"), std::string::npos) << what;
    EXPECT_NE(what.find("see rank 0's error"), std::string::npos) << what;
  }
  expect_ranks_in_step(MPI_COMM_WORLD);
}

TEST(mpi_bootstrap, a_long_reason_from_rank_zero_arrives_cut_short) {
  hang_guard const guard{test_limit};
  std::string const reason = "why " + std::string(5000, 'x');
  auto const bootstrap = [&] {
    static_cast<void>(gn::detail::bootstrap_unique_id(
        MPI_COMM_WORLD, [] {}, [&]() -> gn::unique_id_bytes { throw gs::usage_error{reason}; }));
  };
  if (world_rank() == 0) {
    EXPECT_THROW(bootstrap(), gs::usage_error);
  } else {
    std::string const what = expect_nccl_error(bootstrap).what();
    EXPECT_NE(what.find("why xxx"), std::string::npos) << what;
    EXPECT_LT(what.size(), reason.size());
    EXPECT_NE(what.find("see rank 0's error"), std::string::npos) << what;
  }
  expect_ranks_in_step(MPI_COMM_WORLD);
}

TEST(mpi_bootstrap, rank_zero_failing_to_prepare_fails_every_rank_and_makes_no_id) {
  hang_guard const guard{test_limit};
  int const rank = world_rank();
  int made = 0;
  auto const bootstrap = [&] {
    static_cast<void>(gn::detail::bootstrap_unique_id(
        MPI_COMM_WORLD,
        [rank] {
          if (rank == 0) throw gs::usage_error{"rank 0 sees no GPU"};
        },
        [&] {
          ++made;
          return filled(42);
        }));
  };
  if (rank == 0) {
    EXPECT_THROW(bootstrap(), gs::usage_error);
  } else {
    std::string const what = expect_nccl_error(bootstrap).what();
    EXPECT_NE(what.find("rank 0 sees no GPU"), std::string::npos) << what;
  }
  EXPECT_EQ(made, 0) << "rank " << rank;
  expect_ranks_in_step(MPI_COMM_WORLD);
}

TEST(mpi_bootstrap, another_rank_failing_to_prepare_fails_every_rank) {
  hang_guard const guard{test_limit};
  int const rank = world_rank();
  int const last = world_size() - 1;
  auto const bootstrap = [&] {
    static_cast<void>(gn::detail::bootstrap_unique_id(
        MPI_COMM_WORLD,
        [&] {
          if (rank == last) throw gs::usage_error{"too many ranks on this host"};
        },
        [] { return filled(42); }));
  };
  if (rank == last) {
    EXPECT_THROW(bootstrap(), gs::usage_error);
  } else {
    // Rank 0 too: it would otherwise wait in ncclCommInitRank for a rank that never comes.
    auto const e = expect_nccl_error(bootstrap);
    EXPECT_EQ(e.code(), 2) << "rank " << rank;
    std::string const what = e.what();
    std::string const failed = "rank " + std::to_string(last);
    EXPECT_NE(what.find(failed + " failed"), std::string::npos) << what;
    EXPECT_NE(what.find("see " + failed + "'s error"), std::string::npos) << what;
  }
  expect_ranks_in_step(MPI_COMM_WORLD);
}

TEST(mpi_bootstrap, local_ranks_are_distinct_on_one_host) {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int const local = gn::detail::local_rank(MPI_COMM_WORLD);
  std::vector<int> all(static_cast<std::size_t>(size));
  MPI_Allgather(&local, 1, MPI_INT, all.data(), 1, MPI_INT, MPI_COMM_WORLD);
  std::sort(all.begin(), all.end());
  for (int i = 0; i < size; ++i) EXPECT_EQ(all[static_cast<std::size_t>(i)], i);
}

// communicator_from_mpi on the simulated device, which main() gives two GPUs: two ranks
// connect; with three ranks on this host the third has no GPU of its own.
#if defined(GRAPHSTEP_CUDA_SIM)

TEST(mpi_bootstrap, communicator_from_mpi_connects_a_rank_per_gpu) {
  hang_guard const guard{test_limit};
  int const rank = world_rank();
  MPI_Comm pair = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, rank < 2 ? 0 : MPI_UNDEFINED, rank, &pair);
  if (pair != MPI_COMM_NULL) {
    {
      gn::nccl_comm const comm = gn::communicator_from_mpi(pair);
      EXPECT_EQ(comm.view().rank(), rank);
      EXPECT_EQ(comm.view().size(), 2);
    }
    MPI_Comm_free(&pair);
  }
}

// Three ranks on two simulated GPUs: rank 2 has none, refuses, and every other rank fails too.
void expect_every_rank_to_fail_for_rank_2s_gpu(std::function<void()> const& connect) {
  hang_guard const guard{test_limit};
  if (world_rank() == 2) {
    EXPECT_THROW(connect(), gs::usage_error);
  } else {
    std::string const what = expect_nccl_error(connect).what();
    EXPECT_NE(what.find("rank 2 failed"), std::string::npos) << what;
  }
  expect_ranks_in_step(MPI_COMM_WORLD);
}

TEST(mpi_bootstrap, communicator_from_mpi_fails_every_rank_when_one_has_no_gpu) {
  if (world_size() != 3) GTEST_SKIP() << "needs three ranks on two simulated GPUs";
  expect_every_rank_to_fail_for_rank_2s_gpu(
      [] { static_cast<void>(gn::communicator_from_mpi(MPI_COMM_WORLD)); });
}

// Under mpiexec, communicator_from_environment reads Open MPI's variables and takes the MPI
// bootstrap: the build says it has MPI (built_with_mpi answers for the whole build, the core
// included), so no rank refuses the launch as one built without MPI.
TEST(mpi_bootstrap, communicator_from_environment_takes_the_mpi_bootstrap_under_mpiexec) {
  EXPECT_TRUE(gn::built_with_mpi());
  EXPECT_EQ(gn::read_launch_environment(gn::process_environment()).bootstrap,
            gn::bootstrap_kind::mpi);
  if (world_size() != 3) GTEST_SKIP() << "needs three ranks on two simulated GPUs";
  expect_every_rank_to_fail_for_rank_2s_gpu(
      [] { static_cast<void>(gn::communicator_from_environment()); });
}

#endif

int main(int argc, char** argv) {
#if defined(GRAPHSTEP_CUDA_SIM)
  setenv("GRAPHSTEP_SIM_DEVICES", "2", 1);  // read once, at the first CUDA call
  unsetenv("NCCL_MULTI_RANK_GPU_ENABLE");
#endif
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {  // one report, from rank 0
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS();
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failed;
}
