// The MPI bootstrap's id broadcast and local rank, run by ctest under mpiexec with several
// ranks. Needs no GPU.

#include <gtest/gtest.h>

#include <algorithm>
#include <graphstep/nccl/mpi_bootstrap.hpp>
#include <vector>

namespace gn = graphstep::nccl;

TEST(mpi_bootstrap, every_rank_receives_rank_zeros_id) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  gn::unique_id_bytes mine{};
  mine.fill(static_cast<unsigned char>(rank == 0 ? 42 : 7));
  auto const id = gn::broadcast_unique_id(MPI_COMM_WORLD, mine);
  gn::unique_id_bytes expected{};
  expected.fill(42);
  EXPECT_EQ(id, expected) << "rank " << rank;
}

TEST(mpi_bootstrap, local_ranks_are_distinct_on_one_host) {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int const local = gn::local_rank(MPI_COMM_WORLD);
  std::vector<int> all(static_cast<std::size_t>(size));
  MPI_Allgather(&local, 1, MPI_INT, all.data(), 1, MPI_INT, MPI_COMM_WORLD);
  std::sort(all.begin(), all.end());
  for (int i = 0; i < size; ++i) EXPECT_EQ(all[static_cast<std::size_t>(i)], i);
}

int main(int argc, char** argv) {
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
