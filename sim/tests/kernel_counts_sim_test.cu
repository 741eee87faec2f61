// graphstep::sim::current_kernel_counts: the threads kernels ran, their arrivals at barriers and
// the host thread's switches between their stacks, counted whether a grid's blocks run on one
// host thread or several.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <graphstep/sim/sim.hpp>

#include "sim_test.hpp"

namespace gs = graphstep::sim;

namespace {

__global__ void write_index(unsigned* out) {
  out[blockIdx.x * blockDim.x + threadIdx.x] = threadIdx.x;
}

// Two block barriers and a shuffle: three arrivals a thread.
__global__ void meet_three_times(float* out) {
  __shared__ float staged[64];
  staged[threadIdx.x] = static_cast<float>(threadIdx.x);
  __syncthreads();
  float value = staged[63U - threadIdx.x];
  __syncthreads();
  value += __shfl_xor_sync(0xffffffffU, value, 1);
  out[blockIdx.x * blockDim.x + threadIdx.x] = value;
}

// The second warp leaves before the barrier: only the first warp's threads arrive.
__global__ void half_leave_before_the_barrier(unsigned* out) {
  if (threadIdx.x >= 32U) return;
  __syncthreads();
  out[blockIdx.x * 32U + threadIdx.x] = threadIdx.x;
}

gs::kernel_counts since(gs::kernel_counts const& before) {
  SIM_TEST_TRY(cudaDeviceSynchronize());
  return gs::current_kernel_counts() - before;
}

class kernel_counts : public sim_testing::gpu_test {
 protected:
  void SetUp() override {
    sim_testing::gpu_test::SetUp();
    before_ = gs::current_block_threads();
  }
  void TearDown() override { gs::set_block_threads(before_); }

 private:
  gs::block_threads_setting before_{};
};

TEST_F(kernel_counts, a_grid_without_barriers_counts_its_threads_and_a_switch_in_and_out_a_block) {
  unsigned* out = nullptr;
  SIM_TEST_TRY(cudaMalloc(&out, 3 * 96 * sizeof(unsigned)));
  gs::kernel_counts const before = gs::current_kernel_counts();
  write_index<<<3, 96>>>(out);
  SIM_TEST_TRY(cudaGetLastError());
  gs::kernel_counts const counted = since(before);
  EXPECT_EQ(counted.threads, 3U * 96U);
  EXPECT_EQ(counted.barrier_waits, 0U);
  // A block's threads run one after another on one fiber: into it and back, once a block.
  EXPECT_EQ(counted.fiber_switches, 3U * 2U);
  SIM_TEST_TRY(cudaFree(out));
}

TEST_F(kernel_counts, every_arrival_at_a_barrier_counts_and_costs_one_or_two_switches) {
  float* out = nullptr;
  SIM_TEST_TRY(cudaMalloc(&out, 2 * 64 * sizeof(float)));
  gs::kernel_counts const before = gs::current_kernel_counts();
  meet_three_times<<<2, 64>>>(out);
  SIM_TEST_TRY(cudaGetLastError());
  gs::kernel_counts const counted = since(before);
  EXPECT_EQ(counted.threads, 2U * 64U);
  EXPECT_EQ(counted.barrier_waits, 2U * 64U * 3U);
  // A thread that stops hands over to the next (one switch), or yields to the block's loop,
  // which resumes the next (two, where fibers cannot hand over); a thread that ends hands over
  // too; a block starts on one fiber, into it and back.
  EXPECT_GE(counted.fiber_switches, counted.barrier_waits);
  EXPECT_LE(counted.fiber_switches, 2U * (counted.barrier_waits + counted.threads) + 2U * 2U);
  SIM_TEST_TRY(cudaFree(out));
}

TEST_F(kernel_counts, threads_that_leave_before_a_barrier_do_not_arrive_at_it) {
  unsigned* out = nullptr;
  SIM_TEST_TRY(cudaMalloc(&out, 4 * 32 * sizeof(unsigned)));
  gs::kernel_counts const before = gs::current_kernel_counts();
  half_leave_before_the_barrier<<<4, 64>>>(out);
  SIM_TEST_TRY(cudaGetLastError());
  gs::kernel_counts const counted = since(before);
  EXPECT_EQ(counted.threads, 4U * 64U);
  EXPECT_EQ(counted.barrier_waits, 4U * 32U);
  SIM_TEST_TRY(cudaFree(out));
}

TEST_F(kernel_counts, blocks_shared_among_host_threads_count_as_on_one) {
  float* out = nullptr;
  unsigned const blocks = 32;
  SIM_TEST_TRY(cudaMalloc(&out, blocks * 64 * sizeof(float)));
  gs::kernel_counts counted[2];
  unsigned const host_threads[2] = {1, 4};
  for (int i = 0; i < 2; ++i) {
    gs::set_block_threads(gs::block_threads_setting{host_threads[i], 1});
    gs::kernel_counts const before = gs::current_kernel_counts();
    meet_three_times<<<blocks, 64>>>(out);
    SIM_TEST_TRY(cudaGetLastError());
    counted[i] = since(before);
  }
  EXPECT_EQ(counted[0].threads, blocks * 64U);
  EXPECT_EQ(counted[1].threads, counted[0].threads);
  EXPECT_EQ(counted[0].barrier_waits, blocks * 64U * 3U);
  EXPECT_EQ(counted[1].barrier_waits, counted[0].barrier_waits);
  // Each block is scheduled alike on whichever host thread runs it.
  EXPECT_EQ(counted[1].fiber_switches, counted[0].fiber_switches);
  SIM_TEST_TRY(cudaFree(out));
}

}  // namespace
