// A grid-wide barrier needs a cooperative launch, which the simulated device does not provide:
// cooperative_groups.h's grid_group::sync() aborts with `__trap()` when the group is not valid,
// so the kernel faults (cudaErrorLaunchFailure, sticky) with a message that says why. The case
// runs in a child process, since a sticky error ends the process's use of the device.

#include <cooperative_groups.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdlib>

namespace cg = cooperative_groups;

namespace {

__global__ void grid_barrier(int* out) {
  cg::grid_group grid = cg::this_grid();
  out[grid.thread_rank()] = 1;
  grid.sync();
  out[grid.thread_rank()] = 2;
}

void launch_grid_barrier_and_exit_with_the_error() {
  int* out = nullptr;
  if (cudaMalloc(&out, 64 * sizeof(int)) != cudaSuccess) std::exit(100);
  grid_barrier<<<2, 32>>>(out);
  cudaError_t const synchronized = cudaDeviceSynchronize();
  cudaError_t const later = cudaMemset(out, 0, sizeof(int));
  std::exit(synchronized == cudaErrorLaunchFailure && later == cudaErrorLaunchFailure ? 0 : 1);
}

TEST(cooperative_groups, a_grid_sync_without_a_cooperative_launch_is_a_sticky_launch_failure) {
  EXPECT_EXIT(launch_grid_barrier_and_exit_with_the_error(), ::testing::ExitedWithCode(0),
              "kernel grid_barrier faulted: grid_barrier: thread \\(0,0,0\\) of block "
              "\\(0,0,0\\): grid_group::sync\\(\\) needs a cooperative launch "
              "\\(cudaLaunchCooperativeKernel\\)");
}

}  // namespace
