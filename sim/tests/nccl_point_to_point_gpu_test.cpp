// Probes of ncclSend and ncclRecv where nccl.h is silent and the simulator models the stricter
// reading: a GPU run answers whether NCCL agrees. Two ranks (sim_testing::nccl_ranks_test).

#if __has_include(<nccl.h>)
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <chrono>
#include <cstddef>
#include <future>
#include <thread>
#include <vector>

#include "nccl_ranks.hpp"

namespace {

using nccl_point_to_point_probe = sim_testing::nccl_ranks_test;

// nccl.h says only "This operation is blocking for the GPU". The simulator completes a send once
// its receive has taken all of it; NCCL may finish a small send into the peer's buffer before
// the receive is issued. A GPU that disagrees fails here.
TEST_F(nccl_point_to_point_probe, a_small_send_completes_only_once_its_receive_is_issued) {
  std::promise<void> probed;
  std::shared_future<void> const may_receive = probed.get_future().share();
  run_ranks([&](int rank, cudaStream_t stream) {
    ncclComm_t const comm = comm_of(rank);
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
