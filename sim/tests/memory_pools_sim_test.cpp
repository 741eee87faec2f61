// The simulated device's memory pools where a GPU test cannot look: what a pool reserves counts
// against the device's memory (cudaMemGetInfo, which other processes move on a GPU), what is
// not modelled is refused by name, and a destroyed pool's handle is refused.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace {

constexpr std::size_t mebibyte = std::size_t{1} << 20;

cudaMemPoolProps device_pool_properties() {
  cudaMemPoolProps properties{};
  properties.allocType = cudaMemAllocationTypePinned;
  properties.location = cudaMemLocation{cudaMemLocationTypeDevice, 0};
  return properties;
}

std::size_t free_memory() {
  std::size_t free_bytes = 0;
  std::size_t total = 0;
  EXPECT_EQ(cudaMemGetInfo(&free_bytes, &total), cudaSuccess);
  return free_bytes;
}

}  // namespace

// Freed pool memory stays reserved, out of the device's free memory, until a synchronization
// releases what exceeds the release threshold (0 by default) or cudaMemPoolTrimTo does.
TEST(memory_pools_sim, a_pool_gives_unused_memory_back_at_a_synchronize_or_a_trim) {
  cudaMemPoolProps const properties = device_pool_properties();
  cudaMemPool_t pool{};
  ASSERT_EQ(cudaMemPoolCreate(&pool, &properties), cudaSuccess);
  std::size_t const before = free_memory();
  void* memory = nullptr;
  ASSERT_EQ(cudaMallocFromPoolAsync(&memory, 64 * mebibyte, pool, cudaStreamLegacy), cudaSuccess);
  EXPECT_EQ(free_memory(), before - 64 * mebibyte);
  ASSERT_EQ(cudaFreeAsync(memory, cudaStreamLegacy), cudaSuccess);
  EXPECT_EQ(free_memory(), before - 64 * mebibyte);
  ASSERT_EQ(cudaStreamSynchronize(cudaStreamLegacy), cudaSuccess);
  EXPECT_EQ(free_memory(), before);

  std::uint64_t keep = 32 * mebibyte;
  ASSERT_EQ(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), cudaSuccess);
  ASSERT_EQ(cudaMallocFromPoolAsync(&memory, 64 * mebibyte, pool, cudaStreamLegacy), cudaSuccess);
  ASSERT_EQ(cudaFreeAsync(memory, cudaStreamLegacy), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(free_memory(), before - 32 * mebibyte);  // down to the threshold
  ASSERT_EQ(cudaMemPoolTrimTo(pool, 0), cudaSuccess);
  EXPECT_EQ(free_memory(), before);
  ASSERT_EQ(cudaMemPoolDestroy(pool), cudaSuccess);
}

// A destroyed pool whose memory is outstanding keeps it reserved until the last free, then the
// device gets all of it back.
TEST(memory_pools_sim, a_destroyed_pool_gives_unused_memory_back_after_its_last_free) {
  cudaMemPoolProps const properties = device_pool_properties();
  cudaMemPool_t pool{};
  ASSERT_EQ(cudaMemPoolCreate(&pool, &properties), cudaSuccess);
  std::uint64_t keep_everything = UINT64_MAX;
  ASSERT_EQ(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_everything),
            cudaSuccess);
  std::size_t const before = free_memory();
  void* memory = nullptr;
  ASSERT_EQ(cudaMallocFromPoolAsync(&memory, 8 * mebibyte, pool, cudaStreamLegacy), cudaSuccess);
  ASSERT_EQ(cudaMemPoolDestroy(pool), cudaSuccess);
  EXPECT_EQ(free_memory(), before - 8 * mebibyte);
  ASSERT_EQ(cudaFreeAsync(memory, cudaStreamLegacy), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(cudaStreamLegacy), cudaSuccess);
  EXPECT_EQ(free_memory(), before);
  // Its handle names no pool any more.
  std::uint64_t value = 0;
  EXPECT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &value),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPoolDestroy(pool), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMallocFromPoolAsync(&memory, 16, pool, cudaStreamLegacy), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

// Host-memory, managed and IPC-capable pools are not modelled: refused by name with
// cudaErrorNotSupported, an error the header lists.
TEST(memory_pools_sim, pools_that_are_not_modelled_are_refused_by_name) {
  cudaMemPoolProps properties = device_pool_properties();
  properties.location = cudaMemLocation{cudaMemLocationTypeHost, 0};
  cudaMemPool_t pool{};
  testing::internal::CaptureStderr();
  EXPECT_EQ(cudaMemPoolCreate(&pool, &properties), cudaErrorNotSupported);
  std::string said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("cudaMemPoolCreate is not modelled for host-memory pools"), std::string::npos)
      << said;
  cudaMemLocation location{cudaMemLocationTypeNone, 0};
  testing::internal::CaptureStderr();
  EXPECT_EQ(cudaMemGetDefaultMemPool(&pool, &location, cudaMemAllocationTypeManaged),
            cudaErrorNotSupported);
  said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("cudaMemGetDefaultMemPool is not modelled for managed pools"),
            std::string::npos)
      << said;
  properties = device_pool_properties();
  properties.handleTypes = cudaMemHandleTypePosixFileDescriptor;
  EXPECT_EQ(cudaMemPoolCreate(&pool, &properties), cudaErrorNotSupported);
  static_cast<void>(cudaGetLastError());
}
