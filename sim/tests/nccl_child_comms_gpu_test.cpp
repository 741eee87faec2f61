// Communicators made from another (ncclCommSplit, ncclCommShrink) and ncclCommInitRankScalable,
// as nccl.h and NCCL's source (src/init.cc: commGetSplitInfo, getParentRanks,
// ncclCommInitChildComm) define them. Two ranks (sim_testing::nccl_ranks_test).

#if __has_include(<nccl.h>)
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <array>
#include <cstddef>
#include <vector>

#include "nccl_ranks.hpp"

namespace {

class nccl_child_comms : public sim_testing::nccl_ranks_test {
 protected:
  // What an all-gather over `comm` of each rank's `value` gives, in the comm's rank order.
  static std::vector<float> gathered(ncclComm_t comm, float value) {
    int count = 0;
    EXPECT_EQ(ncclCommCount(comm, &count), ncclSuccess);
    cudaStream_t stream = nullptr;
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    float* send = nullptr;
    float* receive = nullptr;
    SIM_TEST_TRY(cudaMalloc(&send, sizeof(float)));
    SIM_TEST_TRY(cudaMalloc(&receive, sizeof(float) * static_cast<std::size_t>(count)));
    SIM_TEST_TRY(cudaMemcpyAsync(send, &value, sizeof value, cudaMemcpyHostToDevice, stream));
    EXPECT_EQ(ncclAllGather(send, receive, 1, ncclFloat, comm, stream), ncclSuccess);
    std::vector<float> out(static_cast<std::size_t>(count));
    SIM_TEST_TRY(cudaMemcpyAsync(out.data(), receive, sizeof(float) * out.size(),
                                 cudaMemcpyDeviceToHost, stream));
    SIM_TEST_TRY(cudaStreamSynchronize(stream));
    SIM_TEST_TRY(cudaFree(send));
    SIM_TEST_TRY(cudaFree(receive));
    SIM_TEST_TRY(cudaStreamDestroy(stream));
    return out;
  }
};

// nccl.h: "Ranks with the same color will end up in the same communicator. Within the new
// communicator, key will be used to order ranks."
TEST_F(nccl_child_comms, a_split_of_one_color_orders_its_ranks_by_key) {
  run_ranks([&](int rank, cudaStream_t /*stream*/) {
    ncclComm_t child = nullptr;
    ASSERT_EQ(ncclCommSplit(comm_of(rank), 7, ranks - rank, &child, nullptr), ncclSuccess);
    ASSERT_NE(child, nullptr);
    int count = 0;
    int child_rank = -1;
    int device = -1;
    EXPECT_EQ(ncclCommCount(child, &count), ncclSuccess);
    EXPECT_EQ(ncclCommUserRank(child, &child_rank), ncclSuccess);
    EXPECT_EQ(ncclCommCuDevice(child, &device), ncclSuccess);
    EXPECT_EQ(count, ranks);
    EXPECT_EQ(child_rank, ranks - 1 - rank);  // the keys reverse the order
    EXPECT_EQ(device, rank);
    // The child's collectives follow its own order: parent rank 1 first.
    std::vector<float> const order = gathered(child, static_cast<float>(rank));
    EXPECT_EQ(order, (std::vector<float>{1.0F, 0.0F}));
    EXPECT_EQ(ncclCommDestroy(child), ncclSuccess);
  });
  // The ranks' threads have ended holding nothing: the runtime still answers this one.
  int devices = 0;
  EXPECT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
}

TEST_F(nccl_child_comms, equal_keys_keep_the_parents_order_and_the_parent_still_works) {
  run_ranks([&](int rank, cudaStream_t /*stream*/) {
    ncclComm_t const parent = comm_of(rank);
    ncclComm_t child = nullptr;
    ASSERT_EQ(ncclCommSplit(parent, 0, 5, &child, nullptr), ncclSuccess);
    int child_rank = -1;
    EXPECT_EQ(ncclCommUserRank(child, &child_rank), ncclSuccess);
    EXPECT_EQ(child_rank, rank);
    EXPECT_EQ(gathered(child, static_cast<float>(rank)), (std::vector<float>{0.0F, 1.0F}));
    EXPECT_EQ(gathered(parent, 10.0F + static_cast<float>(rank)),
              (std::vector<float>{10.0F, 11.0F}));
    EXPECT_EQ(ncclCommDestroy(child), ncclSuccess);
  });
}

TEST_F(nccl_child_comms, a_rank_without_a_color_gets_no_communicator) {
  run_ranks([&](int rank, cudaStream_t /*stream*/) {
    ncclComm_t child = comm_of(0);  // overwritten with NCCL_COMM_NULL or the child
    int const color = rank == 1 ? NCCL_SPLIT_NOCOLOR : 3;
    ASSERT_EQ(ncclCommSplit(comm_of(rank), color, 0, &child, nullptr), ncclSuccess);
    if (rank == 1) {
      EXPECT_EQ(child, nullptr);
      return;
    }
    ASSERT_NE(child, nullptr);
    int count = 0;
    EXPECT_EQ(ncclCommCount(child, &count), ncclSuccess);
    EXPECT_EQ(count, 1);
    EXPECT_EQ(gathered(child, 4.0F), (std::vector<float>{4.0F}));
    EXPECT_EQ(ncclCommDestroy(child), ncclSuccess);
  });
}

TEST_F(nccl_child_comms, two_colors_make_two_communicators_and_splits_can_follow_one_another) {
  run_ranks([&](int rank, cudaStream_t /*stream*/) {
    ncclComm_t const parent = comm_of(rank);
    ncclComm_t alone = nullptr;
    ASSERT_EQ(ncclCommSplit(parent, rank, 0, &alone, nullptr), ncclSuccess);
    int count = 0;
    EXPECT_EQ(ncclCommCount(alone, &count), ncclSuccess);
    EXPECT_EQ(count, 1);
    EXPECT_EQ(gathered(alone, static_cast<float>(rank)),
              (std::vector<float>{static_cast<float>(rank)}));
    // A second split of the same parent makes a new communicator, not the first one again.
    ncclComm_t together = nullptr;
    ASSERT_EQ(ncclCommSplit(parent, 0, 0, &together, nullptr), ncclSuccess);
    EXPECT_EQ(ncclCommCount(together, &count), ncclSuccess);
    EXPECT_EQ(count, ranks);
    EXPECT_EQ(gathered(together, 1.0F + static_cast<float>(rank)),
              (std::vector<float>{1.0F, 2.0F}));
    EXPECT_EQ(ncclCommDestroy(alone), ncclSuccess);
    EXPECT_EQ(ncclCommDestroy(together), ncclSuccess);
  });
}

TEST_F(nccl_child_comms, a_shrink_leaves_out_the_excluded_ranks) {
  run_ranks([&](int rank, cudaStream_t /*stream*/) {
    std::array<int, 1> excluded{1};
    ncclComm_t child = nullptr;
    ncclComm_t const parent = comm_of(rank);
    if (rank == 1) {
      // nccl.h: excluded ranks do not call it; NCCL refuses one that does.
      EXPECT_EQ(ncclCommShrink(parent, excluded.data(), 1, &child, nullptr, NCCL_SHRINK_DEFAULT),
                ncclInvalidArgument);
      return;
    }
    ASSERT_EQ(ncclCommShrink(parent, excluded.data(), 1, &child, nullptr, NCCL_SHRINK_DEFAULT),
              ncclSuccess);
    int count = 0;
    int child_rank = -1;
    EXPECT_EQ(ncclCommCount(child, &count), ncclSuccess);
    EXPECT_EQ(ncclCommUserRank(child, &child_rank), ncclSuccess);
    EXPECT_EQ(count, 1);
    EXPECT_EQ(child_rank, 0);
    EXPECT_EQ(gathered(child, 9.0F), (std::vector<float>{9.0F}));
    EXPECT_EQ(ncclCommDestroy(child), ncclSuccess);
  });
}

TEST_F(nccl_child_comms, bad_arguments_are_refused_and_leave_no_communicator) {
  ncclComm_t child = comm_of(0);
  EXPECT_EQ(ncclCommSplit(comm_of(0), -2, 0, &child, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclCommSplit(comm_of(0), 0, 0, nullptr, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclCommSplit(nullptr, 0, 0, &child, nullptr), ncclInvalidArgument);
  std::array<int, 1> excluded{1};
  EXPECT_EQ(ncclCommShrink(comm_of(0), nullptr, 1, &child, nullptr, NCCL_SHRINK_DEFAULT),
            ncclInvalidArgument);
  EXPECT_EQ(ncclCommShrink(comm_of(0), excluded.data(), 0, &child, nullptr, NCCL_SHRINK_DEFAULT),
            ncclInvalidArgument);
  ncclConfig_t unset{};  // not from NCCL_CONFIG_INITIALIZER
  EXPECT_EQ(ncclCommSplit(comm_of(0), 0, 0, &child, &unset), ncclInvalidArgument);
  ncclUniqueId id{};
  EXPECT_EQ(ncclCommInitRankScalable(&child, ranks, 0, 0, &id, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclCommInitRankScalable(&child, ranks, 0, 1, nullptr, nullptr), ncclInvalidArgument);
  // The parent is unharmed: a split of every rank still works.
  run_ranks([&](int rank, cudaStream_t /*stream*/) {
    ncclComm_t made = nullptr;
    ASSERT_EQ(ncclCommSplit(comm_of(rank), 0, 0, &made, nullptr), ncclSuccess);
    EXPECT_EQ(ncclCommDestroy(made), ncclSuccess);
  });
}

// nccl.h: every rank passes the same nId ids; the communicator is as ncclCommInitRank's.
TEST_F(nccl_child_comms, init_rank_scalable_makes_one_communicator_of_several_ids) {
  std::array<ncclUniqueId, 2> ids{};
  ASSERT_EQ(ncclGetUniqueId(&ids[0]), ncclSuccess);
  ASSERT_EQ(ncclGetUniqueId(&ids[1]), ncclSuccess);
  run_ranks([&](int rank, cudaStream_t /*stream*/) {
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclCommInitRankScalable(&comm, ranks, rank, 2, ids.data(), nullptr), ncclSuccess);
    int child_rank = -1;
    EXPECT_EQ(ncclCommUserRank(comm, &child_rank), ncclSuccess);
    EXPECT_EQ(child_rank, rank);
    EXPECT_EQ(gathered(comm, 2.0F * static_cast<float>(rank)), (std::vector<float>{0.0F, 2.0F}));
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  });
}

}  // namespace
#endif
