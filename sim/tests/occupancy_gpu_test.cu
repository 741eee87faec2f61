// The occupancy calculator as cuda_runtime_api.h documents it
// (cudaOccupancyMaxActiveBlocksPerMultiprocessor, ...WithFlags,
// cudaOccupancyAvailableDynamicSMemPerBlock), checked against the device's own limits for a
// kernel that uses no static shared memory and too few registers for them to limit it. On the
// simulated device they check its model; on a GPU the same tests check the tests.

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>

#include "sim_test.hpp"

namespace {

__global__ void occupancy_probe(float* out) {
  out[blockIdx.x * blockDim.x + threadIdx.x] = 1.0F;
}

void const* probe() {
  return reinterpret_cast<void const*>(&occupancy_probe);
}

class occupancy : public sim_testing::gpu_test {
 protected:
  void SetUp() override {
    gpu_test::SetUp();
    if (IsSkipped()) return;
    int device = 0;
    SIM_TEST_TRY(cudaGetDevice(&device));
    SIM_TEST_TRY(cudaGetDeviceProperties(&properties_, device));
  }

  // What the device's limits allow a block of `threads` with `dynamic` bytes of dynamic shared
  // memory: warps per SM, blocks per SM, and shared memory per SM (each block takes the reserved
  // shared memory too, in 128-byte allocation units).
  [[nodiscard]] int expected_blocks(int threads, std::size_t dynamic) const {
    int const warps = (threads + properties_.warpSize - 1) / properties_.warpSize;
    int const by_warps = properties_.maxThreadsPerMultiProcessor / properties_.warpSize / warps;
    std::size_t const allocated =
        (properties_.reservedSharedMemPerBlock + dynamic + 127) / 128 * 128;
    auto const by_shared = static_cast<int>(properties_.sharedMemPerMultiprocessor / allocated);
    return std::min({by_warps, properties_.maxBlocksPerMultiProcessor, by_shared});
  }

  cudaDeviceProp properties_{};
};

}  // namespace

// "Returns in *numBlocks the maximum number of active blocks per streaming multiprocessor for
// the device function": bound by threads for large blocks, by shared memory for large dynamic
// shared memory.
TEST_F(occupancy, active_blocks_follow_the_devices_thread_and_shared_memory_limits) {
  for (int const threads : {32, 128, 256, 1024}) {
    for (std::size_t const dynamic : {std::size_t{0}, std::size_t{4000}, std::size_t{48} << 10}) {
      int blocks = -1;
      SIM_TEST_TRY(
          cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, probe(), threads, dynamic));
      EXPECT_EQ(blocks, expected_blocks(threads, dynamic))
          << threads << " threads, " << dynamic << " bytes of dynamic shared memory";
      int with_flags = -1;
      SIM_TEST_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
          &with_flags, probe(), threads, dynamic, cudaOccupancyDisableCachingOverride));
      EXPECT_EQ(with_flags, blocks);
    }
  }
}

// A block the kernel can never launch has no active blocks: more threads than a block may have,
// or more dynamic shared memory than the kernel's limit (48 KiB until
// cudaFuncAttributeMaxDynamicSharedMemorySize raises it).
TEST_F(occupancy, a_block_that_cannot_launch_has_no_active_blocks) {
  int blocks = -1;
  SIM_TEST_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &blocks, probe(), properties_.maxThreadsPerBlock + 1, 0));
  EXPECT_EQ(blocks, 0);
  blocks = -1;
  SIM_TEST_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &blocks, probe(), 128, properties_.sharedMemPerBlockOptin + 1));
  EXPECT_EQ(blocks, 0);
}

// The calls' bad input: cudaErrorInvalidValue for a missing result, a block size of 0 and an
// unknown flag; cudaErrorInvalidDeviceFunction for a null function.
TEST_F(occupancy, bad_input_is_refused) {
  int blocks = 0;
  EXPECT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(nullptr, probe(), 128, 0),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, probe(), 0, 0),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, nullptr, 128, 0),
            cudaErrorInvalidDeviceFunction);
  EXPECT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&blocks, probe(), 128, 0, 0x10),
            cudaErrorInvalidValue);
  std::size_t available = 0;
  EXPECT_EQ(cudaOccupancyAvailableDynamicSMemPerBlock(nullptr, probe(), 1, 128),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaOccupancyAvailableDynamicSMemPerBlock(&available, probe(), 0, 128),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaOccupancyAvailableDynamicSMemPerBlock(&available, nullptr, 1, 128),
            cudaErrorInvalidDeviceFunction);
  // More blocks than fit on an SM at all.
  EXPECT_EQ(cudaOccupancyAvailableDynamicSMemPerBlock(
                &available, probe(), properties_.maxBlocksPerMultiProcessor + 1, 32),
            cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

// "Returns in *dynamicSmemSize the maximum size of dynamic shared memory to allow numBlocks
// blocks per SM": with that much, numBlocks blocks are active; with one allocation unit more,
// fewer are (unless the kernel's own limit is what bounds it). One block gets the kernel's
// limit, 48 KiB by default.
TEST_F(occupancy, available_dynamic_shared_memory_is_the_most_that_lets_the_blocks_fit) {
  std::size_t available = 0;
  SIM_TEST_TRY(cudaOccupancyAvailableDynamicSMemPerBlock(&available, probe(), 1, 128));
  EXPECT_EQ(available, properties_.sharedMemPerBlock);
  for (int const wanted : {3, 5, 8, 13}) {
    SIM_TEST_TRY(cudaOccupancyAvailableDynamicSMemPerBlock(&available, probe(), wanted, 128));
    int blocks = 0;
    SIM_TEST_TRY(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, probe(), 128, available));
    EXPECT_GE(blocks, wanted) << available << " bytes for " << wanted << " blocks";
    if (available < properties_.sharedMemPerBlock) {
      SIM_TEST_TRY(
          cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, probe(), 128, available + 128));
      EXPECT_LT(blocks, wanted) << available + 128 << " bytes for " << wanted << " blocks";
    }
  }
}
