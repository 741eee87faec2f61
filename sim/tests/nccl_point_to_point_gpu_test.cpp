// Probes of ncclSend and ncclRecv where nccl.h is silent and the simulator models the stricter
// reading: a GPU run answers whether NCCL agrees. Two ranks on devices 0 and 1, one host thread
// each (NCCL connects a pair's first exchange on the host, which waits for the peer); skipped
// with fewer than two devices (GRAPHSTEP_SIM_DEVICES=2 on the simulator).

#if __has_include(<nccl.h>)
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <functional>
#include <future>
#include <thread>
#include <vector>

#include "sim_test.hpp"

namespace {

class nccl_point_to_point_probe : public sim_testing::gpu_test {
 protected:
  void SetUp() override {
    sim_testing::gpu_test::SetUp();
    if (IsSkipped()) return;
    int count = 0;
    ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
    if (count < 2) GTEST_SKIP() << "two ranks need two devices";
    std::array<int, 2> const devices{0, 1};
    ASSERT_EQ(ncclCommInitAll(comms_.data(), 2, devices.data()), ncclSuccess);
  }
  void TearDown() override {
    for (ncclComm_t comm : comms_) {
      if (comm != nullptr) {
        EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
      }
    }
  }
  // Runs body(rank, comm, stream) on one thread per rank, each on its rank's device.
  void run_ranks(std::function<void(int, ncclComm_t, cudaStream_t)> const& body) {
    std::vector<std::thread> threads;
    for (int rank = 0; rank < 2; ++rank) {
      threads.emplace_back([&, rank] {
        EXPECT_EQ(cudaSetDevice(rank), cudaSuccess);
        cudaStream_t stream = nullptr;
        ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
        try {
          body(rank, comms_.at(static_cast<std::size_t>(rank)), stream);
        } catch (std::exception const& e) {
          ADD_FAILURE() << "rank " << rank << ": " << e.what();
        }
        EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
        EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
      });
    }
    for (auto& thread : threads) thread.join();
  }
  std::array<ncclComm_t, 2> comms_{};
};

// nccl.h says only "This operation is blocking for the GPU". The simulator completes a send once
// its receive has taken all of it; NCCL may finish a small send into the peer's buffer before
// the receive is issued. A GPU that disagrees fails here.
TEST_F(nccl_point_to_point_probe, a_small_send_completes_only_once_its_receive_is_issued) {
  std::promise<void> probed;
  std::shared_future<void> const may_receive = probed.get_future().share();
  run_ranks([&](int rank, ncclComm_t comm, cudaStream_t stream) {
    float* buffer = nullptr;
    SIM_TEST_TRY(cudaMalloc(&buffer, 16 * sizeof(float)));
    std::vector<float> values(16, 2.5F);
    if (rank == 0) {
      SIM_TEST_TRY(cudaMemcpyAsync(buffer, values.data(), 16 * sizeof(float),
                                   cudaMemcpyHostToDevice, stream));
      // Connects the pair first (NCCL does so on the host, with the peer), so that the probe
      // below sees the send itself.
      EXPECT_EQ(ncclSend(buffer, 16, ncclFloat, 1, comm, stream), ncclSuccess);
      SIM_TEST_TRY(cudaStreamSynchronize(stream));
      EXPECT_EQ(ncclSend(buffer, 16, ncclFloat, 1, comm, stream), ncclSuccess);
      std::this_thread::sleep_for(std::chrono::milliseconds{200});
      EXPECT_EQ(cudaStreamQuery(stream), cudaErrorNotReady)
          << "the send completed before its receive was issued";
      probed.set_value();
    } else {
      EXPECT_EQ(ncclRecv(buffer, 16, ncclFloat, 0, comm, stream), ncclSuccess);
      SIM_TEST_TRY(cudaStreamSynchronize(stream));
      may_receive.wait();
      SIM_TEST_TRY(cudaMemsetAsync(buffer, 0, 16 * sizeof(float), stream));
      EXPECT_EQ(ncclRecv(buffer, 16, ncclFloat, 0, comm, stream), ncclSuccess);
      EXPECT_EQ(sim_testing::copy_to_host(buffer, 16, stream), values);
    }
    SIM_TEST_TRY(cudaStreamSynchronize(stream));
    SIM_TEST_TRY(cudaFree(buffer));
  });
}

}  // namespace
#endif
