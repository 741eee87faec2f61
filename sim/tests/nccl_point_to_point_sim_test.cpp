// ncclSend and ncclRecv (and ncclAlltoAll, ncclGather and ncclScatter, built on them) on the
// simulated device, with ranks as threads of this process sharing
// device 0 (NCCL on a GPU refuses two ranks on one device, so these run on the simulator only):
// rings among 2 and 4 ranks, eager and captured then replayed with new data, a send to self,
// an all-to-all group, matching in issue order, a send whose receive comes later, mismatched
// pairs and bad arguments, and the race checker's view of a receive buffer.

#if __has_include(<nccl.h>)
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <graphstep/sim/sim.hpp>
#include <string>
#include <thread>
#include <vector>

#include "sim_test.hpp"

namespace gs = graphstep;

namespace {

// More floats than one chunk of a channel holds, so that messages move in several chunks.
constexpr std::size_t elements = 70'000;

void upload(float* device, std::vector<float> const& host, cudaStream_t stream) {
  SIM_TEST_TRY(cudaMemcpyAsync(device, host.data(), host.size() * sizeof(float),
                               cudaMemcpyHostToDevice, stream));
  SIM_TEST_TRY(cudaStreamSynchronize(stream));
}

std::vector<float> pattern(int rank, int round, std::size_t count) {
  std::vector<float> values(count);
  for (std::size_t i = 0; i < count; ++i) {
    values[i] = static_cast<float>(rank * 1000 + round * 100) + static_cast<float>(i % 97);
  }
  return values;
}

// One rank's communicator and stream, made on its own thread.
struct rank_context {
  int rank{};
  int ranks{};
  ncclComm_t comm{};
  cudaStream_t stream{};
};

// Runs `body` on `ranks` threads, each a rank of one communicator on device 0 with a stream of
// its own; the communicators are destroyed (or aborted, with `abort`) afterwards.
void run_ranks(int ranks, std::function<void(rank_context&)> const& body, bool abort = false) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < ranks; ++rank) {
    threads.emplace_back([&, rank] {
      rank_context context{rank, ranks, nullptr, nullptr};
      EXPECT_EQ(cudaSetDevice(0), cudaSuccess);
      ASSERT_EQ(ncclCommInitRank(&context.comm, ranks, id, rank), ncclSuccess);
      ASSERT_EQ(cudaStreamCreateWithFlags(&context.stream, cudaStreamNonBlocking), cudaSuccess);
      try {
        body(context);
      } catch (std::exception const& e) {
        ADD_FAILURE() << "rank " << rank << ": " << e.what();
      }
      EXPECT_EQ(abort ? ncclCommAbort(context.comm) : ncclCommDestroy(context.comm), ncclSuccess);
      EXPECT_EQ(cudaStreamDestroy(context.stream), cudaSuccess);
    });
  }
  for (auto& thread : threads) thread.join();
}

// Each rank sends to the next and receives from the previous, in one group.
void ring_step(rank_context const& c, float const* send, float* receive) {
  EXPECT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclSend(send, elements, ncclFloat, (c.rank + 1) % c.ranks, c.comm, c.stream),
            ncclSuccess);
  EXPECT_EQ(
      ncclRecv(receive, elements, ncclFloat, (c.rank + c.ranks - 1) % c.ranks, c.comm, c.stream),
      ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
}

void ring_exchanges_data(int ranks, bool captured) {
  run_ranks(ranks, [captured](rank_context& c) {
    float* send = nullptr;
    float* receive = nullptr;
    SIM_TEST_TRY(cudaMalloc(&send, elements * sizeof(float)));
    SIM_TEST_TRY(cudaMalloc(&receive, elements * sizeof(float)));
    cudaGraphExec_t exec = nullptr;
    if (captured) {
      cudaGraph_t graph = nullptr;
      SIM_TEST_TRY(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeThreadLocal));
      ring_step(c, send, receive);
      SIM_TEST_TRY(cudaStreamEndCapture(c.stream, &graph));
      SIM_TEST_TRY(cudaGraphInstantiate(&exec, graph, 0));
      SIM_TEST_TRY(cudaGraphDestroy(graph));
    }
    int const left = (c.rank + c.ranks - 1) % c.ranks;
    for (int round = 0; round < 3; ++round) {
      upload(send, pattern(c.rank, round, elements), c.stream);
      if (captured) {
        SIM_TEST_TRY(cudaGraphLaunch(exec, c.stream));
      } else {
        ring_step(c, send, receive);
      }
      EXPECT_EQ(sim_testing::copy_to_host(receive, elements, c.stream),
                pattern(left, round, elements))
          << "rank " << c.rank << ", round " << round;
    }
    if (exec != nullptr) SIM_TEST_TRY(cudaGraphExecDestroy(exec));
    SIM_TEST_TRY(cudaFree(send));
    SIM_TEST_TRY(cudaFree(receive));
  });
}

TEST(nccl_point_to_point, a_ring_of_2_ranks_exchanges_data) {
  ring_exchanges_data(2, false);
}

TEST(nccl_point_to_point, a_ring_of_4_ranks_exchanges_data) {
  ring_exchanges_data(4, false);
}

TEST(nccl_point_to_point, a_captured_ring_of_2_ranks_exchanges_new_data_at_every_replay) {
  ring_exchanges_data(2, true);
}

TEST(nccl_point_to_point, a_captured_ring_of_4_ranks_exchanges_new_data_at_every_replay) {
  ring_exchanges_data(4, true);
}

TEST(nccl_point_to_point, a_send_to_self_reaches_the_receive_of_its_group) {
  run_ranks(1, [](rank_context& c) {
    float* send = nullptr;
    float* receive = nullptr;
    SIM_TEST_TRY(cudaMalloc(&send, elements * sizeof(float)));
    SIM_TEST_TRY(cudaMalloc(&receive, elements * sizeof(float)));
    upload(send, pattern(7, 1, elements), c.stream);
    EXPECT_EQ(ncclGroupStart(), ncclSuccess);
    EXPECT_EQ(ncclSend(send, elements, ncclFloat, 0, c.comm, c.stream), ncclSuccess);
    EXPECT_EQ(ncclRecv(receive, elements, ncclFloat, 0, c.comm, c.stream), ncclSuccess);
    EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
    EXPECT_EQ(sim_testing::copy_to_host(receive, elements, c.stream), pattern(7, 1, elements));
    SIM_TEST_TRY(cudaFree(send));
    SIM_TEST_TRY(cudaFree(receive));
  });
}

TEST(nccl_point_to_point, an_all_to_all_group_of_4_ranks_delivers_every_block) {
  constexpr std::size_t block = 20'000;
  run_ranks(4, [](rank_context& c) {
    float* send = nullptr;
    float* receive = nullptr;
    std::size_t const total = block * static_cast<std::size_t>(c.ranks);
    SIM_TEST_TRY(cudaMalloc(&send, total * sizeof(float)));
    SIM_TEST_TRY(cudaMalloc(&receive, total * sizeof(float)));
    // Block j of rank r's send buffer holds pattern(r, j).
    std::vector<float> mine;
    for (int j = 0; j < c.ranks; ++j) {
      auto const part = pattern(c.rank, j, block);
      mine.insert(mine.end(), part.begin(), part.end());
    }
    upload(send, mine, c.stream);
    EXPECT_EQ(ncclGroupStart(), ncclSuccess);
    for (int peer = 0; peer < c.ranks; ++peer) {
      auto const at = static_cast<std::size_t>(peer) * block;
      EXPECT_EQ(ncclSend(send + at, block, ncclFloat, peer, c.comm, c.stream), ncclSuccess);
      EXPECT_EQ(ncclRecv(receive + at, block, ncclFloat, peer, c.comm, c.stream), ncclSuccess);
    }
    EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
    std::vector<float> expected;
    for (int i = 0; i < c.ranks; ++i) {
      auto const part = pattern(i, c.rank, block);
      expected.insert(expected.end(), part.begin(), part.end());
    }
    EXPECT_EQ(sim_testing::copy_to_host(receive, total, c.stream), expected) << "rank " << c.rank;
    SIM_TEST_TRY(cudaFree(send));
    SIM_TEST_TRY(cudaFree(receive));
  });
}

TEST(nccl_point_to_point, sends_to_one_peer_match_its_receives_in_issue_order) {
  run_ranks(2, [](rank_context& c) {
    float* first = nullptr;
    float* second = nullptr;
    SIM_TEST_TRY(cudaMalloc(&first, 100 * sizeof(float)));
    SIM_TEST_TRY(cudaMalloc(&second, 100 * sizeof(float)));
    if (c.rank == 0) {
      upload(first, pattern(0, 1, 100), c.stream);
      upload(second, pattern(0, 2, 100), c.stream);
    }
    EXPECT_EQ(ncclGroupStart(), ncclSuccess);
    for (float* buffer : {first, second}) {
      EXPECT_EQ(c.rank == 0 ? ncclSend(buffer, 100, ncclFloat, 1, c.comm, c.stream)
                            : ncclRecv(buffer, 100, ncclFloat, 0, c.comm, c.stream),
                ncclSuccess);
    }
    EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
    EXPECT_EQ(sim_testing::copy_to_host(first, 100, c.stream), pattern(0, 1, 100));
    EXPECT_EQ(sim_testing::copy_to_host(second, 100, c.stream), pattern(0, 2, 100));
    SIM_TEST_TRY(cudaFree(first));
    SIM_TEST_TRY(cudaFree(second));
  });
}

// nccl.h: "This operation is blocking for the GPU": the host goes on, the stream waits.
TEST(nccl_point_to_point, a_lone_send_completes_when_its_receive_is_issued_later) {
  run_ranks(2, [](rank_context& c) {
    float* buffer = nullptr;
    SIM_TEST_TRY(cudaMalloc(&buffer, elements * sizeof(float)));
    if (c.rank == 0) {
      upload(buffer, pattern(0, 3, elements), c.stream);
      EXPECT_EQ(ncclSend(buffer, elements, ncclFloat, 1, c.comm, c.stream), ncclSuccess);
      SIM_TEST_TRY(cudaStreamSynchronize(c.stream));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds{100});
      EXPECT_EQ(ncclRecv(buffer, elements, ncclFloat, 0, c.comm, c.stream), ncclSuccess);
      EXPECT_EQ(sim_testing::copy_to_host(buffer, elements, c.stream), pattern(0, 3, elements));
    }
    SIM_TEST_TRY(cudaFree(buffer));
  });
}

// NCCL does not check that a matched pair agrees (it corrupts or hangs); the simulator stops
// both ends and keeps ncclInvalidUsage as the asynchronous error, naming both sides.
TEST(nccl_point_to_point, a_matched_pair_of_different_counts_is_an_asynchronous_error) {
  run_ranks(
      2,
      [](rank_context& c) {
        float* buffer = nullptr;
        SIM_TEST_TRY(cudaMalloc(&buffer, 64 * sizeof(float)));
        EXPECT_EQ(c.rank == 0 ? ncclSend(buffer, 32, ncclFloat, 1, c.comm, c.stream)
                              : ncclRecv(buffer, 64, ncclFloat, 0, c.comm, c.stream),
                  ncclSuccess);
        SIM_TEST_TRY(cudaStreamSynchronize(c.stream));
        ncclResult_t async = ncclSuccess;
        EXPECT_EQ(ncclCommGetAsyncError(c.comm, &async), ncclSuccess);
        EXPECT_EQ(async, ncclInvalidUsage) << "rank " << c.rank;
        if (c.rank == 1) {
          std::string const message = ncclGetLastError(c.comm);
          EXPECT_NE(message.find("ncclRecv(count 64, type 7) from rank 0"), std::string::npos)
              << message;
          EXPECT_NE(message.find("rank 0's ncclSend(count 32, type 7)"), std::string::npos)
              << message;
        }
        // The communicator answers with its error from now on.
        EXPECT_EQ(ncclSend(buffer, 32, ncclFloat, 1 - c.rank, c.comm, c.stream), ncclInvalidUsage);
        SIM_TEST_TRY(cudaFree(buffer));
      },
      true);
}

TEST(nccl_point_to_point, a_matched_pair_of_different_types_is_an_asynchronous_error) {
  run_ranks(
      2,
      [](rank_context& c) {
        float* buffer = nullptr;
        SIM_TEST_TRY(cudaMalloc(&buffer, 64 * sizeof(float)));
        EXPECT_EQ(c.rank == 0 ? ncclSend(buffer, 64, ncclInt32, 1, c.comm, c.stream)
                              : ncclRecv(buffer, 64, ncclFloat32, 0, c.comm, c.stream),
                  ncclSuccess);
        SIM_TEST_TRY(cudaStreamSynchronize(c.stream));
        ncclResult_t async = ncclSuccess;
        EXPECT_EQ(ncclCommGetAsyncError(c.comm, &async), ncclSuccess);
        EXPECT_EQ(async, ncclInvalidUsage) << "rank " << c.rank;
        SIM_TEST_TRY(cudaFree(buffer));
      },
      true);
}

// One rank, so that no other thread's error replaces the one ncclGetLastError reads.
TEST(nccl_point_to_point, bad_peers_and_null_buffers_are_invalid_arguments) {
  run_ranks(1, [](rank_context& c) {
    float* buffer = nullptr;
    SIM_TEST_TRY(cudaMalloc(&buffer, 16 * sizeof(float)));
    EXPECT_EQ(ncclSend(buffer, 16, ncclFloat, -1, c.comm, c.stream), ncclInvalidArgument);
    EXPECT_EQ(ncclRecv(buffer, 16, ncclFloat, 1, c.comm, c.stream), ncclInvalidArgument);
    EXPECT_NE(std::string{ncclGetLastError(c.comm)}.find("ncclRecv: peer 1 is not a rank of 1"),
              std::string::npos)
        << ncclGetLastError(c.comm);
    EXPECT_EQ(ncclSend(nullptr, 16, ncclFloat, 0, c.comm, c.stream), ncclInvalidArgument);
    EXPECT_EQ(ncclRecv(nullptr, 16, ncclFloat, 0, c.comm, c.stream), ncclInvalidArgument);
    EXPECT_NE(std::string{ncclGetLastError(c.comm)}.find("receive buffer"), std::string::npos)
        << ncclGetLastError(c.comm);
    EXPECT_EQ(ncclSend(buffer, 16, ncclFloat, 0, nullptr, c.stream), ncclInvalidArgument);
    // Inside a group, the group's end returns the error and launches none of its operations.
    EXPECT_EQ(ncclGroupStart(), ncclSuccess);
    EXPECT_EQ(ncclSend(buffer, 16, ncclFloat, 0, c.comm, c.stream), ncclSuccess);
    EXPECT_EQ(ncclRecv(buffer, 16, ncclFloat, 5, c.comm, c.stream), ncclInvalidArgument);
    EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
    // Nothing was left behind: a send to self with its receive still matches.
    EXPECT_EQ(ncclGroupStart(), ncclSuccess);
    EXPECT_EQ(ncclSend(buffer, 16, ncclFloat, 0, c.comm, c.stream), ncclSuccess);
    EXPECT_EQ(ncclRecv(buffer, 16, ncclFloat, 0, c.comm, c.stream), ncclSuccess);
    EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
    SIM_TEST_TRY(cudaStreamSynchronize(c.stream));
    ncclResult_t async = ncclInternalError;
    EXPECT_EQ(ncclCommGetAsyncError(c.comm, &async), ncclSuccess);
    EXPECT_EQ(async, ncclSuccess);
    SIM_TEST_TRY(cudaFree(buffer));
  });
}

// ncclAlltoAll, ncclGather and ncclScatter move blocks of `count` elements between pairs.
std::vector<float> blocks(int rank, int ranks, std::size_t block) {
  std::vector<float> values;
  for (int j = 0; j < ranks; ++j) {
    auto const part = pattern(rank, j, block);
    values.insert(values.end(), part.begin(), part.end());
  }
  return values;
}

TEST(nccl_block_exchanges, all_to_all_of_4_ranks_delivers_block_j_to_rank_j_at_every_replay) {
  constexpr std::size_t block = 40'000;
  run_ranks(4, [](rank_context& c) {
    std::size_t const total = block * static_cast<std::size_t>(c.ranks);
    float* send = nullptr;
    float* receive = nullptr;
    SIM_TEST_TRY(cudaMalloc(&send, total * sizeof(float)));
    SIM_TEST_TRY(cudaMalloc(&receive, total * sizeof(float)));
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    SIM_TEST_TRY(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeThreadLocal));
    EXPECT_EQ(ncclAlltoAll(send, receive, block, ncclFloat, c.comm, c.stream), ncclSuccess);
    SIM_TEST_TRY(cudaStreamEndCapture(c.stream, &graph));
    SIM_TEST_TRY(cudaGraphInstantiate(&exec, graph, 0));
    SIM_TEST_TRY(cudaGraphDestroy(graph));
    for (int round = 0; round < 3; ++round) {
      std::vector<float> mine = blocks(c.rank, c.ranks, block);
      for (float& value : mine) value += static_cast<float>(round) * 0.5F;
      upload(send, mine, c.stream);
      if (round == 0) {
        EXPECT_EQ(ncclAlltoAll(send, receive, block, ncclFloat, c.comm, c.stream), ncclSuccess);
      } else {
        SIM_TEST_TRY(cudaGraphLaunch(exec, c.stream));
      }
      std::vector<float> expected;
      for (int i = 0; i < c.ranks; ++i) {
        auto part = pattern(i, c.rank, block);
        for (float& value : part) value += static_cast<float>(round) * 0.5F;
        expected.insert(expected.end(), part.begin(), part.end());
      }
      EXPECT_EQ(sim_testing::copy_to_host(receive, total, c.stream), expected)
          << "rank " << c.rank << ", round " << round;
    }
    SIM_TEST_TRY(cudaGraphExecDestroy(exec));
    SIM_TEST_TRY(cudaFree(send));
    SIM_TEST_TRY(cudaFree(receive));
  });
}

TEST(nccl_block_exchanges, gather_places_rank_i_at_block_i_of_the_root) {
  constexpr std::size_t block = 1'000;
  run_ranks(3, [](rank_context& c) {
    std::size_t const total = block * static_cast<std::size_t>(c.ranks);
    float* send = nullptr;
    float* receive = nullptr;
    SIM_TEST_TRY(cudaMalloc(&send, block * sizeof(float)));
    SIM_TEST_TRY(cudaMalloc(&receive, total * sizeof(float)));
    upload(send, pattern(c.rank, 5, block), c.stream);
    EXPECT_EQ(ncclGather(send, receive, block, ncclFloat, 1, c.comm, c.stream), ncclSuccess);
    if (c.rank == 1) {
      std::vector<float> expected;
      for (int i = 0; i < c.ranks; ++i) {
        auto const part = pattern(i, 5, block);
        expected.insert(expected.end(), part.begin(), part.end());
      }
      EXPECT_EQ(sim_testing::copy_to_host(receive, total, c.stream), expected);
    }
    SIM_TEST_TRY(cudaStreamSynchronize(c.stream));
    SIM_TEST_TRY(cudaFree(send));
    SIM_TEST_TRY(cudaFree(receive));
  });
}

TEST(nccl_block_exchanges, scatter_sends_block_i_of_the_root_to_rank_i) {
  constexpr std::size_t block = 1'000;
  run_ranks(3, [](rank_context& c) {
    std::size_t const total = block * static_cast<std::size_t>(c.ranks);
    float* send = nullptr;
    float* receive = nullptr;
    SIM_TEST_TRY(cudaMalloc(&send, total * sizeof(float)));
    SIM_TEST_TRY(cudaMalloc(&receive, block * sizeof(float)));
    if (c.rank == 2) upload(send, blocks(9, c.ranks, block), c.stream);
    EXPECT_EQ(ncclScatter(send, receive, block, ncclFloat, 2, c.comm, c.stream), ncclSuccess);
    EXPECT_EQ(sim_testing::copy_to_host(receive, block, c.stream), pattern(9, c.rank, block))
        << "rank " << c.rank;
    SIM_TEST_TRY(cudaFree(send));
    SIM_TEST_TRY(cudaFree(receive));
  });
}

TEST(nccl_block_exchanges, a_bad_root_or_a_short_buffer_is_an_invalid_argument) {
  run_ranks(1, [](rank_context& c) {
    float* buffer = nullptr;
    SIM_TEST_TRY(cudaMalloc(&buffer, 16 * sizeof(float)));
    EXPECT_EQ(ncclGather(buffer, buffer, 16, ncclFloat, 1, c.comm, c.stream), ncclInvalidArgument);
    EXPECT_NE(std::string{ncclGetLastError(c.comm)}.find("ncclGather: root 1 is not a rank of 1"),
              std::string::npos)
        << ncclGetLastError(c.comm);
    EXPECT_EQ(ncclScatter(buffer, buffer, 16, ncclFloat, -1, c.comm, c.stream),
              ncclInvalidArgument);
    EXPECT_EQ(ncclAlltoAll(buffer, nullptr, 16, ncclFloat, c.comm, c.stream), ncclInvalidArgument);
    EXPECT_EQ(ncclAlltoAll(buffer, buffer, 32, ncclFloat, c.comm, c.stream), ncclInvalidArgument);
    // One rank: the exchange is a copy to self.
    float* other = nullptr;
    SIM_TEST_TRY(cudaMalloc(&other, 16 * sizeof(float)));
    upload(buffer, pattern(3, 3, 16), c.stream);
    EXPECT_EQ(ncclAlltoAll(buffer, other, 16, ncclFloat, c.comm, c.stream), ncclSuccess);
    EXPECT_EQ(sim_testing::copy_to_host(other, 16, c.stream), pattern(3, 3, 16));
    SIM_TEST_TRY(cudaFree(other));
    SIM_TEST_TRY(cudaFree(buffer));
  });
}

// The race checker sees a receive write its buffer where its stream runs it: a memset of that
// buffer on another stream, unordered with it, races; ordered by an event, it does not.
void receive_beside_a_memset(bool ordered, std::size_t& races_found) {
  gs::sim::race_mode const before = gs::sim::current_race_mode();
  gs::sim::set_race_mode(gs::sim::race_mode::report);
  std::size_t const already = gs::sim::races().size();
  run_ranks(1, [ordered](rank_context& c) {
    float* send = nullptr;
    float* receive = nullptr;
    cudaStream_t other = nullptr;
    cudaEvent_t done = nullptr;
    SIM_TEST_TRY(cudaMalloc(&send, 256 * sizeof(float)));
    SIM_TEST_TRY(cudaMalloc(&receive, 256 * sizeof(float)));
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
    SIM_TEST_TRY(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    SIM_TEST_TRY(cudaMemsetAsync(send, 0, 256 * sizeof(float), c.stream));
    EXPECT_EQ(ncclGroupStart(), ncclSuccess);
    EXPECT_EQ(ncclSend(send, 256, ncclFloat, 0, c.comm, c.stream), ncclSuccess);
    EXPECT_EQ(ncclRecv(receive, 256, ncclFloat, 0, c.comm, c.stream), ncclSuccess);
    EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
    if (ordered) {
      SIM_TEST_TRY(cudaEventRecord(done, c.stream));
      SIM_TEST_TRY(cudaStreamWaitEvent(other, done, 0));
    }
    SIM_TEST_TRY(cudaMemsetAsync(receive + 128, 1, 16, other));
    SIM_TEST_TRY(cudaStreamSynchronize(other));
    SIM_TEST_TRY(cudaStreamSynchronize(c.stream));
    SIM_TEST_TRY(cudaEventDestroy(done));
    SIM_TEST_TRY(cudaStreamDestroy(other));
    SIM_TEST_TRY(cudaFree(send));
    SIM_TEST_TRY(cudaFree(receive));
  });
  races_found = gs::sim::races().size() - already;
  gs::sim::set_race_mode(before);
}

TEST(nccl_point_to_point, a_receive_unordered_with_a_write_of_its_buffer_races) {
  std::size_t found = 0;
  receive_beside_a_memset(false, found);
  EXPECT_EQ(found, 1U);
  auto const all = gs::sim::races();
  ASSERT_FALSE(all.empty());
  EXPECT_NE(all.back().find("ncclDevKernel_SendRecv"), std::string::npos) << all.back();
}

TEST(nccl_point_to_point, a_receive_ordered_before_a_write_of_its_buffer_does_not_race) {
  std::size_t found = 0;
  receive_beside_a_memset(true, found);
  EXPECT_EQ(found, 0U);
}

}  // namespace
#endif
