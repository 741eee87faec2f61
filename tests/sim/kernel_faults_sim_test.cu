// What a GPU reports as a fault in a kernel, the simulated device reports too: the launch's
// error is sticky, every later call returns it, and the message names the kernel and the thread.
// Each case runs in a child process, since a sticky error ends the process's use of the device.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdlib>

namespace {

__global__ void divergent_barrier(int* out) {
  if (threadIdx.x < 16) __syncthreads();  // only some threads of the block reach it
  out[threadIdx.x] = 1;
}

__global__ void trapping(int* out) {
  if (threadIdx.x == 3) __trap();
  out[threadIdx.x] = 1;
}

// Launched by name: the simulator names a kernel as its launch does.
void launch_and_exit_with_the_sticky_error(bool trap) {
  int* out = nullptr;
  if (cudaMalloc(&out, 64 * sizeof(int)) != cudaSuccess) std::exit(100);
  if (trap) {
    trapping<<<1, 64>>>(out);
  } else {
    divergent_barrier<<<1, 64>>>(out);
  }
  cudaError_t const synchronized = cudaDeviceSynchronize();
  cudaError_t const later = cudaMemset(out, 0, sizeof(int));
  std::exit(synchronized == cudaErrorLaunchFailure && later == cudaErrorLaunchFailure ? 0 : 1);
}

TEST(kernel_faults, a_barrier_only_some_threads_reach_is_a_sticky_launch_failure) {
  EXPECT_EXIT(launch_and_exit_with_the_sticky_error(false), ::testing::ExitedWithCode(0),
              "kernel divergent_barrier faulted: .*reached a barrier that thread 0 of its block "
              "did not|kernel divergent_barrier faulted: .*finished while others wait");
}

TEST(kernel_faults, a_trap_names_the_kernel_and_the_thread) {
  EXPECT_EXIT(launch_and_exit_with_the_sticky_error(true), ::testing::ExitedWithCode(0),
              "kernel trapping faulted: trapping: thread \\(3,0,0\\) of block \\(0,0,0\\): "
              "__trap\\(\\) called");
}

}  // namespace
