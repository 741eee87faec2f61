#pragma once

// Two NCCL ranks on devices 0 and 1 of one process, one host thread each, for the simulator's
// NCCL tests and probes (NCCL connects a pair's first exchange on the host, which waits for the
// peer). Skipped with fewer than two devices (GRAPHSTEP_SIM_DEVICES=2 on the simulator).

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <array>
#include <cstddef>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

#include "sim_test.hpp"

namespace sim_testing {

class nccl_ranks_test : public gpu_test {
 protected:
  static constexpr int ranks = 2;

  void SetUp() override {
    gpu_test::SetUp();
    if (IsSkipped()) return;
    int count = 0;
    ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
    if (count < ranks) GTEST_SKIP() << "two ranks need two devices";
    std::array<int, ranks> const devices{0, 1};
    ASSERT_EQ(ncclCommInitAll(comms_.data(), ranks, devices.data()), ncclSuccess);
  }
  void TearDown() override {
    for (ncclComm_t comm : comms_) {
      if (comm != nullptr) {
        EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
      }
    }
  }
  [[nodiscard]] ncclComm_t comm_of(int rank) const {
    return comms_.at(static_cast<std::size_t>(rank));
  }

  /// Runs body(rank, stream) on one thread per rank, each on its rank's device with a stream of
  /// its own, synchronized and destroyed after the body; an exception fails the test.
  static void run_ranks(std::function<void(int, cudaStream_t)> const& body) {
    std::vector<std::thread> threads;
    for (int rank = 0; rank < ranks; ++rank) {
      threads.emplace_back([&, rank] {
        EXPECT_EQ(cudaSetDevice(rank), cudaSuccess);
        cudaStream_t stream = nullptr;
        ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
        try {
          body(rank, stream);
        } catch (std::exception const& e) {
          ADD_FAILURE() << "rank " << rank << ": " << e.what();
        }
        EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
        EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
      });
    }
    for (auto& thread : threads) thread.join();
  }

  std::array<ncclComm_t, ranks> comms_{};
};

}  // namespace sim_testing
