// ncclRedOpCreatePreMulSum and ncclRedOpDestroy as nccl.h documents them: "a new reduction
// operator which pre-multiplies input values by a given scalar locally before reducing them with
// peer values via summation", the scalar read at creation (ncclScalarHostImmediate) or while the
// collective runs (ncclScalarDevice). Two ranks (sim_testing::nccl_ranks_test).

#if __has_include(<nccl.h>)
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "nccl_ranks.hpp"

namespace {

class nccl_premul_sum : public sim_testing::nccl_ranks_test {
 protected:
  // All-reduces `values` over `comm` with `op` on `stream` and returns the result.
  template <typename T>
  static std::vector<T> all_reduced(std::vector<T> const& values, ncclDataType_t type,
                                    ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
    std::size_t const bytes = values.size() * sizeof(T);
    T* buffer = nullptr;
    SIM_TEST_TRY(cudaMalloc(&buffer, bytes));
    SIM_TEST_TRY(cudaMemcpyAsync(buffer, values.data(), bytes, cudaMemcpyHostToDevice, stream));
    EXPECT_EQ(ncclAllReduce(buffer, buffer, values.size(), type, op, comm, stream), ncclSuccess);
    std::vector<T> out(values.size());
    SIM_TEST_TRY(cudaMemcpyAsync(out.data(), buffer, bytes, cudaMemcpyDeviceToHost, stream));
    SIM_TEST_TRY(cudaStreamSynchronize(stream));
    SIM_TEST_TRY(cudaFree(buffer));
    return out;
  }
};

TEST_F(nccl_premul_sum, each_rank_multiplies_by_its_own_host_scalar_read_at_creation) {
  run_ranks([&](int rank, cudaStream_t stream) {
    float scalar = 1.0F + static_cast<float>(rank);  // rank 0 by 1, rank 1 by 2
    ncclRedOp_t op{};
    ASSERT_EQ(
        ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat, ncclScalarHostImmediate, comm_of(rank)),
        ncclSuccess);
    scalar = 100.0F;  // read before the call returned: no effect
    std::vector<float> const out =
        all_reduced(std::vector<float>{1.0F, -2.0F, 0.5F}, ncclFloat, op, comm_of(rank), stream);
    EXPECT_EQ(out, (std::vector<float>{3.0F, -6.0F, 1.5F}));
    EXPECT_EQ(ncclRedOpDestroy(op, comm_of(rank)), ncclSuccess);
  });
}

TEST_F(nccl_premul_sum, a_device_scalar_is_read_when_the_collective_runs_replays_included) {
  run_ranks([&](int rank, cudaStream_t stream) {
    float* scalar = nullptr;
    float* buffer = nullptr;
    SIM_TEST_TRY(cudaMalloc(&scalar, sizeof(float)));
    SIM_TEST_TRY(cudaMalloc(&buffer, sizeof(float) * 2));
    ncclRedOp_t op{};
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, scalar, ncclFloat, ncclScalarDevice, comm_of(rank)),
              ncclSuccess);
    // Captured once, replayed with the scalar and input uploaded before each launch.
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    SIM_TEST_TRY(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    EXPECT_EQ(ncclAllReduce(buffer, buffer, 2, ncclFloat, op, comm_of(rank), stream), ncclSuccess);
    SIM_TEST_TRY(cudaStreamEndCapture(stream, &graph));
    SIM_TEST_TRY(cudaGraphInstantiate(&exec, graph, 0));
    for (float const factor : {1.0F, 0.25F}) {
      float const mine = factor * static_cast<float>(rank + 1);
      std::vector<float> const input{2.0F, 4.0F};
      SIM_TEST_TRY(cudaMemcpyAsync(scalar, &mine, sizeof mine, cudaMemcpyHostToDevice, stream));
      SIM_TEST_TRY(
          cudaMemcpyAsync(buffer, input.data(), sizeof(float) * 2, cudaMemcpyHostToDevice, stream));
      SIM_TEST_TRY(cudaGraphLaunch(exec, stream));
      std::vector<float> out(2);
      SIM_TEST_TRY(
          cudaMemcpyAsync(out.data(), buffer, sizeof(float) * 2, cudaMemcpyDeviceToHost, stream));
      SIM_TEST_TRY(cudaStreamSynchronize(stream));
      // Both ranks' inputs are {2, 4}; their scalars add up to 3 * factor.
      EXPECT_EQ(out, (std::vector<float>{6.0F * factor, 12.0F * factor})) << "factor " << factor;
    }
    SIM_TEST_TRY(cudaGraphExecDestroy(exec));
    SIM_TEST_TRY(cudaGraphDestroy(graph));
    EXPECT_EQ(ncclRedOpDestroy(op, comm_of(rank)), ncclSuccess);
    SIM_TEST_TRY(cudaFree(scalar));
    SIM_TEST_TRY(cudaFree(buffer));
  });
}

TEST_F(nccl_premul_sum, integers_are_multiplied_and_summed_as_integers) {
  run_ranks([&](int rank, cudaStream_t stream) {
    std::int32_t scalar = rank == 0 ? 3 : -1;
    ncclRedOp_t op{};
    ASSERT_EQ(
        ncclRedOpCreatePreMulSum(&op, &scalar, ncclInt32, ncclScalarHostImmediate, comm_of(rank)),
        ncclSuccess);
    std::vector<std::int32_t> const out =
        all_reduced(std::vector<std::int32_t>{5, -7}, ncclInt32, op, comm_of(rank), stream);
    EXPECT_EQ(out, (std::vector<std::int32_t>{10, -14}));
    EXPECT_EQ(ncclRedOpDestroy(op, comm_of(rank)), ncclSuccess);
  });
}

TEST_F(nccl_premul_sum, one_rank_multiplies_too) {
  run_ranks([&](int rank, cudaStream_t stream) {
    ncclComm_t alone = nullptr;
    ASSERT_EQ(ncclCommSplit(comm_of(rank), rank, 0, &alone, nullptr), ncclSuccess);
    double scalar = 0.5;
    ncclRedOp_t op{};
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, &scalar, ncclDouble, ncclScalarHostImmediate, alone),
              ncclSuccess);
    EXPECT_EQ(all_reduced(std::vector<double>{8.0, 3.0}, ncclDouble, op, alone, stream),
              (std::vector<double>{4.0, 1.5}));
    EXPECT_EQ(ncclRedOpDestroy(op, alone), ncclSuccess);
    EXPECT_EQ(ncclCommDestroy(alone), ncclSuccess);
  });
}

// src/enqueue.cc, ncclRedOpDestroy: a built-in operator and one unknown to the communicator are
// refused with ncclInvalidArgument.
TEST_F(nccl_premul_sum, destroying_a_builtin_or_an_unknown_operator_is_refused) {
  float scalar = 2.0F;
  ncclRedOp_t op{};
  ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat, ncclScalarHostImmediate, comm_of(0)),
            ncclSuccess);
  EXPECT_EQ(ncclRedOpDestroy(ncclSum, comm_of(0)), ncclInvalidArgument);
  EXPECT_EQ(ncclRedOpDestroy(op, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclRedOpDestroy(op, comm_of(0)), ncclSuccess);
  EXPECT_EQ(ncclRedOpDestroy(op, comm_of(0)), ncclInvalidArgument);  // destroyed already
}

// What nccl.h leaves undefined ("for use only with collectives launched against comm and
// datatype"), refused by the simulator (the stricter reading).
TEST_F(nccl_premul_sum, an_operator_used_with_another_communicator_or_type_is_refused_here) {
  if (!sim_testing::simulated_device) GTEST_SKIP() << "undefined on a GPU";
  float scalar = 2.0F;
  ncclRedOp_t op{};
  ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat, ncclScalarHostImmediate, comm_of(0)),
            ncclSuccess);
  SIM_TEST_TRY(cudaSetDevice(1));
  float* on_one = nullptr;
  SIM_TEST_TRY(cudaMalloc(&on_one, sizeof(float)));
  EXPECT_EQ(ncclAllReduce(on_one, on_one, 1, ncclFloat, op, comm_of(1), nullptr),
            ncclInvalidArgument);
  SIM_TEST_TRY(cudaSetDevice(0));
  int* on_zero = nullptr;
  SIM_TEST_TRY(cudaMalloc(&on_zero, sizeof(int)));
  EXPECT_EQ(ncclAllReduce(on_zero, on_zero, 1, ncclInt32, op, comm_of(0), nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclRedOpDestroy(op, comm_of(0)), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(on_zero, on_zero, 1, ncclFloat, op, comm_of(0), nullptr),
            ncclInvalidArgument);
  float* host_scalar_on_device_call = &scalar;
  EXPECT_EQ(ncclRedOpCreatePreMulSum(&op, host_scalar_on_device_call, ncclFloat, ncclScalarDevice,
                                     comm_of(0)),
            ncclSuccess);
  EXPECT_EQ(ncclAllReduce(on_zero, on_zero, 1, ncclFloat, op, comm_of(0), nullptr),
            ncclInvalidArgument);  // the "device" scalar is host memory
  EXPECT_EQ(ncclRedOpDestroy(op, comm_of(0)), ncclSuccess);
  EXPECT_EQ(
      ncclRedOpCreatePreMulSum(nullptr, &scalar, ncclFloat, ncclScalarHostImmediate, comm_of(0)),
      ncclInvalidArgument);
  SIM_TEST_TRY(cudaFree(on_one));
  SIM_TEST_TRY(cudaFree(on_zero));
}

}  // namespace
#endif
