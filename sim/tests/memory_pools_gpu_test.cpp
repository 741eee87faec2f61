// The stream-ordered memory allocator as cuda_runtime_api.h documents it: default and created
// pools, cudaMallocAsync from the device's current pool, cudaMallocFromPoolAsync, the pools'
// attributes and counters, trimming, access and destruction. On the simulated device they check
// its model; on a GPU the same tests check the tests.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "sim_test.hpp"

namespace {

using memory_pools = sim_testing::gpu_test;

constexpr std::size_t mebibyte = std::size_t{1} << 20;

std::uint64_t pool_attribute(cudaMemPool_t pool, cudaMemPoolAttr attribute) {
  std::uint64_t value = 0;
  SIM_TEST_TRY(cudaMemPoolGetAttribute(pool, attribute, &value));
  return value;
}

int pool_flag(cudaMemPool_t pool, cudaMemPoolAttr attribute) {
  int value = -1;
  SIM_TEST_TRY(cudaMemPoolGetAttribute(pool, attribute, &value));
  return value;
}

cudaMemPoolProps device_pool_properties(int device) {
  cudaMemPoolProps properties{};
  properties.allocType = cudaMemAllocationTypePinned;
  properties.handleTypes = cudaMemHandleTypeNone;
  properties.location = cudaMemLocation{cudaMemLocationTypeDevice, device};
  return properties;
}

// A pool of the current device, destroyed at the end of the scope.
class pool_guard {
 public:
  explicit pool_guard(cudaMemPoolProps const& properties) {
    SIM_TEST_TRY(cudaMemPoolCreate(&pool_, &properties));
  }
  pool_guard() : pool_guard(device_pool_properties(current_device())) {}
  ~pool_guard() { SIM_TEST_EXPECT_SUCCESS(cudaMemPoolDestroy(pool_)); }
  pool_guard(pool_guard const&) = delete;
  pool_guard& operator=(pool_guard const&) = delete;
  pool_guard(pool_guard&&) = delete;
  pool_guard& operator=(pool_guard&&) = delete;
  [[nodiscard]] cudaMemPool_t get() const noexcept { return pool_; }
  static int current_device() {
    int device = 0;
    SIM_TEST_TRY(cudaGetDevice(&device));
    return device;
  }

 private:
  cudaMemPool_t pool_{};
};

class stream_guard {
 public:
  stream_guard() { SIM_TEST_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~stream_guard() { SIM_TEST_EXPECT_SUCCESS(cudaStreamDestroy(stream_)); }
  stream_guard(stream_guard const&) = delete;
  stream_guard& operator=(stream_guard const&) = delete;
  stream_guard(stream_guard&&) = delete;
  stream_guard& operator=(stream_guard&&) = delete;
  [[nodiscard]] cudaStream_t get() const noexcept { return stream_; }

 private:
  cudaStream_t stream_{};
};

// Writes `value` to `bytes` of `memory` on the stream and reads it back.
std::vector<unsigned char> fill_and_read(void* memory, int value, std::size_t bytes,
                                         cudaStream_t stream) {
  std::vector<unsigned char> host(bytes);
  SIM_TEST_TRY(cudaMemsetAsync(memory, value, bytes, stream));
  SIM_TEST_TRY(cudaMemcpyAsync(host.data(), memory, bytes, cudaMemcpyDeviceToHost, stream));
  SIM_TEST_TRY(cudaStreamSynchronize(stream));
  return host;
}

bool all_equal(std::vector<unsigned char> const& bytes, unsigned char value) {
  for (unsigned char const b : bytes) {
    if (b != value) return false;
  }
  return true;
}

}  // namespace

// "The default mempool of a device contains device memory from that device"
// (cudaDeviceGetDefaultMemPool); "By default, a device's current memory pool is its default
// memory pool" (cudaDeviceSetMemPool); the location-based forms name the same pools.
TEST_F(memory_pools, the_default_pool_is_the_current_pool_of_each_form) {
  int const device = pool_guard::current_device();
  cudaMemPool_t default_pool{};
  cudaMemPool_t current{};
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&default_pool, device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetMemPool(&current, device), cudaSuccess);
  EXPECT_NE(default_pool, nullptr);
  EXPECT_EQ(current, default_pool);
  cudaMemLocation location{cudaMemLocationTypeDevice, device};
  cudaMemPool_t by_location{};
  ASSERT_EQ(cudaMemGetDefaultMemPool(&by_location, &location, cudaMemAllocationTypePinned),
            cudaSuccess);
  EXPECT_EQ(by_location, default_pool);
  ASSERT_EQ(cudaMemGetMemPool(&by_location, &location, cudaMemAllocationTypePinned), cudaSuccess);
  EXPECT_EQ(by_location, default_pool);
  cudaMemAccessFlags flags = cudaMemAccessFlagsProtNone;
  ASSERT_EQ(cudaMemPoolGetAccess(&flags, default_pool, &location), cudaSuccess);
  EXPECT_EQ(flags, cudaMemAccessFlagsProtReadWrite);
}

// cudaMallocAsync "allocates from the current mempool of the provided stream's device": the
// pool's used count ("Amount of memory from the pool that is currently in use by the
// application") grows by at least the allocation and falls back once its free has run; the
// reserved count ("Amount of backing memory currently allocated") is never below it.
TEST_F(memory_pools, malloc_async_allocates_from_the_current_pool) {
  stream_guard const stream;
  int const device = pool_guard::current_device();
  pool_guard const pool;
  ASSERT_EQ(cudaDeviceSetMemPool(device, pool.get()), cudaSuccess);
  cudaMemPool_t current{};
  ASSERT_EQ(cudaDeviceGetMemPool(&current, device), cudaSuccess);
  EXPECT_EQ(current, pool.get());
  cudaMemLocation location{cudaMemLocationTypeDevice, device};
  ASSERT_EQ(cudaMemGetMemPool(&current, &location, cudaMemAllocationTypePinned), cudaSuccess);
  EXPECT_EQ(current, pool.get());

  void* memory = nullptr;
  ASSERT_EQ(cudaMallocAsync(&memory, mebibyte, stream.get()), cudaSuccess);
  EXPECT_GE(pool_attribute(pool.get(), cudaMemPoolAttrUsedMemCurrent), mebibyte);
  EXPECT_GE(pool_attribute(pool.get(), cudaMemPoolAttrReservedMemCurrent),
            pool_attribute(pool.get(), cudaMemPoolAttrUsedMemCurrent));
  EXPECT_TRUE(all_equal(fill_and_read(memory, 0x5A, mebibyte, stream.get()), 0x5A));
  ASSERT_EQ(cudaFreeAsync(memory, stream.get()), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream.get()), cudaSuccess);
  EXPECT_EQ(pool_attribute(pool.get(), cudaMemPoolAttrUsedMemCurrent), 0U);
  EXPECT_GE(pool_attribute(pool.get(), cudaMemPoolAttrUsedMemHigh), mebibyte);

  // cudaMemSetMemPool with a device location and cudaMemAllocationTypePinned "is the
  // equivalent of calling cudaDeviceSetMemPool".
  cudaMemPool_t default_pool{};
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&default_pool, device), cudaSuccess);
  ASSERT_EQ(cudaMemSetMemPool(&location, cudaMemAllocationTypePinned, default_pool), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetMemPool(&current, device), cudaSuccess);
  EXPECT_EQ(current, default_pool);
}

// cudaMallocFromPoolAsync: "The allocation comes from the specified memory pool". Freed memory
// stays reserved while the release threshold allows it, and cudaMemPoolTrimTo "Releases memory
// back to the OS until the pool contains fewer than minBytesToKeep reserved bytes".
TEST_F(memory_pools, a_pool_keeps_freed_memory_up_to_its_release_threshold_until_trimmed) {
  stream_guard const stream;
  pool_guard const pool;
  std::uint64_t keep_everything = UINT64_MAX;
  ASSERT_EQ(cudaMemPoolSetAttribute(pool.get(), cudaMemPoolAttrReleaseThreshold, &keep_everything),
            cudaSuccess);
  std::vector<void*> memory(3);
  for (void*& m : memory) {
    ASSERT_EQ(cudaMallocFromPoolAsync(&m, mebibyte, pool.get(), stream.get()), cudaSuccess);
  }
  EXPECT_GE(pool_attribute(pool.get(), cudaMemPoolAttrUsedMemCurrent), 3 * mebibyte);
  EXPECT_TRUE(all_equal(fill_and_read(memory[1], 0x11, mebibyte, stream.get()), 0x11));
  for (void* m : memory) ASSERT_EQ(cudaFreeAsync(m, stream.get()), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream.get()), cudaSuccess);
  EXPECT_EQ(pool_attribute(pool.get(), cudaMemPoolAttrUsedMemCurrent), 0U);
  std::uint64_t const reserved = pool_attribute(pool.get(), cudaMemPoolAttrReservedMemCurrent);
  EXPECT_GE(reserved, 3 * mebibyte);  // kept: the threshold allows everything

  // Reused: a new allocation takes no more backing memory.
  void* again = nullptr;
  ASSERT_EQ(cudaMallocFromPoolAsync(&again, mebibyte, pool.get(), stream.get()), cudaSuccess);
  EXPECT_EQ(pool_attribute(pool.get(), cudaMemPoolAttrReservedMemCurrent), reserved);
  ASSERT_EQ(cudaFreeAsync(again, stream.get()), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream.get()), cudaSuccess);

  ASSERT_EQ(cudaMemPoolTrimTo(pool.get(), 0), cudaSuccess);
  EXPECT_EQ(pool_attribute(pool.get(), cudaMemPoolAttrReservedMemCurrent), 0U);
  EXPECT_GE(pool_attribute(pool.get(), cudaMemPoolAttrReservedMemHigh), reserved);
}

// cudaMemPoolAttrReleaseThreshold defaults to 0: "the allocator will try to release memory back
// to the OS on the next call to stream, event or context synchronize".
TEST_F(memory_pools, with_the_default_threshold_a_synchronize_releases_freed_memory) {
  stream_guard const stream;
  pool_guard const pool;
  EXPECT_EQ(pool_attribute(pool.get(), cudaMemPoolAttrReleaseThreshold), 0U);
  void* memory = nullptr;
  ASSERT_EQ(cudaMallocFromPoolAsync(&memory, 4 * mebibyte, pool.get(), stream.get()), cudaSuccess);
  ASSERT_EQ(cudaFreeAsync(memory, stream.get()), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream.get()), cudaSuccess);
  EXPECT_EQ(pool_attribute(pool.get(), cudaMemPoolAttrReservedMemCurrent), 0U);
}

// The reuse policies (int) and the threshold (cuuint64_t) read back as set; the high watermarks
// can only be reset ("It is illegal to set this attribute to a non-zero value"), and the current
// counts not at all.
TEST_F(memory_pools, attributes_read_back_and_watermarks_only_reset) {
  stream_guard const stream;
  pool_guard const pool;
  for (cudaMemPoolAttr const attribute :
       {cudaMemPoolReuseFollowEventDependencies, cudaMemPoolReuseAllowOpportunistic,
        cudaMemPoolReuseAllowInternalDependencies}) {
    EXPECT_EQ(pool_flag(pool.get(), attribute), 1) << "enabled by default";
    int off = 0;
    ASSERT_EQ(cudaMemPoolSetAttribute(pool.get(), attribute, &off), cudaSuccess);
    EXPECT_EQ(pool_flag(pool.get(), attribute), 0);
    int on = 1;
    ASSERT_EQ(cudaMemPoolSetAttribute(pool.get(), attribute, &on), cudaSuccess);
    EXPECT_EQ(pool_flag(pool.get(), attribute), 1);
  }
  std::uint64_t threshold = 64 * mebibyte;
  ASSERT_EQ(cudaMemPoolSetAttribute(pool.get(), cudaMemPoolAttrReleaseThreshold, &threshold),
            cudaSuccess);
  EXPECT_EQ(pool_attribute(pool.get(), cudaMemPoolAttrReleaseThreshold), threshold);

  void* memory = nullptr;
  ASSERT_EQ(cudaMallocFromPoolAsync(&memory, 2 * mebibyte, pool.get(), stream.get()), cudaSuccess);
  ASSERT_EQ(cudaFreeAsync(memory, stream.get()), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream.get()), cudaSuccess);
  EXPECT_GE(pool_attribute(pool.get(), cudaMemPoolAttrUsedMemHigh), 2 * mebibyte);
  std::uint64_t nonzero = 1;
  EXPECT_EQ(cudaMemPoolSetAttribute(pool.get(), cudaMemPoolAttrUsedMemHigh, &nonzero),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPoolSetAttribute(pool.get(), cudaMemPoolAttrReservedMemHigh, &nonzero),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPoolSetAttribute(pool.get(), cudaMemPoolAttrUsedMemCurrent, &nonzero),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPoolSetAttribute(pool.get(), cudaMemPoolAttrReservedMemCurrent, &nonzero),
            cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
  std::uint64_t zero = 0;
  ASSERT_EQ(cudaMemPoolSetAttribute(pool.get(), cudaMemPoolAttrUsedMemHigh, &zero), cudaSuccess);
  EXPECT_EQ(pool_attribute(pool.get(), cudaMemPoolAttrUsedMemHigh),
            pool_attribute(pool.get(), cudaMemPoolAttrUsedMemCurrent));
  ASSERT_EQ(cudaMemPoolSetAttribute(pool.get(), cudaMemPoolAttrReservedMemHigh, &zero),
            cudaSuccess);
  EXPECT_EQ(pool_attribute(pool.get(), cudaMemPoolAttrReservedMemHigh),
            pool_attribute(pool.get(), cudaMemPoolAttrReservedMemCurrent));
  EXPECT_EQ(cudaMemPoolGetAttribute(pool.get(), cudaMemPoolAttrUsedMemCurrent, nullptr),
            cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

// cudaMemPoolDestroy: with an allocation outstanding "the function will return immediately and
// the resources associated with the pool will be released automatically once there are no more
// outstanding allocations": the memory stays usable until freed. "Destroying the current mempool
// of a device sets the default mempool of that device as the current mempool", and "A device's
// default memory pool cannot be destroyed".
TEST_F(memory_pools, a_destroyed_pool_outlives_its_outstanding_allocations) {
  stream_guard const stream;
  int const device = pool_guard::current_device();
  cudaMemPoolProps const properties = device_pool_properties(device);
  cudaMemPool_t pool{};
  ASSERT_EQ(cudaMemPoolCreate(&pool, &properties), cudaSuccess);
  ASSERT_EQ(cudaDeviceSetMemPool(device, pool), cudaSuccess);
  void* memory = nullptr;
  ASSERT_EQ(cudaMallocAsync(&memory, mebibyte, stream.get()), cudaSuccess);
  ASSERT_EQ(cudaMemPoolDestroy(pool), cudaSuccess);
  cudaMemPool_t current{};
  cudaMemPool_t default_pool{};
  ASSERT_EQ(cudaDeviceGetMemPool(&current, device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&default_pool, device), cudaSuccess);
  EXPECT_EQ(current, default_pool);
  EXPECT_TRUE(all_equal(fill_and_read(memory, 0x77, mebibyte, stream.get()), 0x77));
  ASSERT_EQ(cudaFreeAsync(memory, stream.get()), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream.get()), cudaSuccess);
  EXPECT_EQ(cudaMemPoolDestroy(default_pool), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

// cudaMemPoolProps::maxSize: "Applications can control the maximum size of the pool"; an
// allocation beyond it fails, and the pool stays usable.
TEST_F(memory_pools, an_allocation_beyond_the_pools_maximum_size_fails) {
  stream_guard const stream;
  cudaMemPoolProps properties = device_pool_properties(pool_guard::current_device());
  properties.maxSize = 2 * mebibyte;
  pool_guard const pool{properties};
  void* memory = nullptr;
  EXPECT_EQ(cudaMallocFromPoolAsync(&memory, 64 * mebibyte, pool.get(), stream.get()),
            cudaErrorMemoryAllocation);
  static_cast<void>(cudaGetLastError());
  ASSERT_EQ(cudaMallocFromPoolAsync(&memory, mebibyte, pool.get(), stream.get()), cudaSuccess);
  ASSERT_EQ(cudaFreeAsync(memory, stream.get()), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream.get()), cudaSuccess);
}

// During a capture "this function results in the creation of an allocation node. In this case,
// the allocation is owned by the graph instead of the memory pool" (cudaMallocFromPoolAsync):
// the pool's used count does not move, and the graph's allocation works when launched.
TEST_F(memory_pools, a_captured_pool_allocation_is_a_graph_allocation) {
  stream_guard const stream;
  pool_guard const pool;
  constexpr std::size_t bytes = 4096;
  unsigned char* host = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&host), bytes), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeThreadLocal), cudaSuccess);
  void* memory = nullptr;
  ASSERT_EQ(cudaMallocFromPoolAsync(&memory, bytes, pool.get(), stream.get()), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(memory, 0x3C, bytes, stream.get()), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(host, memory, bytes, cudaMemcpyDeviceToHost, stream.get()),
            cudaSuccess);
  ASSERT_EQ(cudaFreeAsync(memory, stream.get()), cudaSuccess);
  cudaGraph_t graph{};
  ASSERT_EQ(cudaStreamEndCapture(stream.get(), &graph), cudaSuccess);
  EXPECT_EQ(pool_attribute(pool.get(), cudaMemPoolAttrUsedMemCurrent), 0U);
  std::size_t count = 0;
  ASSERT_EQ(cudaGraphGetNodes(graph, nullptr, &count), cudaSuccess);
  std::vector<cudaGraphNode_t> nodes(count);
  ASSERT_EQ(cudaGraphGetNodes(graph, nodes.data(), &count), cudaSuccess);
  cudaGraphNodeType first = cudaGraphNodeTypeEmpty;
  ASSERT_EQ(cudaGraphNodeGetType(nodes.front(), &first), cudaSuccess);
  EXPECT_EQ(first, cudaGraphNodeTypeMemAlloc);
  cudaGraphExec_t exec{};
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream.get()), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream.get()), cudaSuccess);
  EXPECT_TRUE(all_equal(std::vector<unsigned char>(host, host + bytes), 0x3C));
  EXPECT_EQ(cudaFreeHost(host), cudaSuccess);
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
}

// The errors the header lists for bad arguments.
TEST_F(memory_pools, bad_arguments_are_refused_with_the_documented_errors) {
  stream_guard const stream;
  int const device = pool_guard::current_device();
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  cudaMemPool_t pool{};
  cudaMemPoolProps properties = device_pool_properties(device);
  EXPECT_EQ(cudaMemPoolCreate(nullptr, &properties), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPoolCreate(&pool, nullptr), cudaErrorInvalidValue);
  properties.allocType = cudaMemAllocationTypeInvalid;
  EXPECT_EQ(cudaMemPoolCreate(&pool, &properties), cudaErrorInvalidValue);
  properties = device_pool_properties(device);
  // "Specifying cudaMemLocationTypeHostNumaCurrent ... will result in cudaErrorInvalidValue".
  properties.location.type = cudaMemLocationTypeHostNumaCurrent;
  EXPECT_EQ(cudaMemPoolCreate(&pool, &properties), cudaErrorInvalidValue);
  properties = device_pool_properties(device);
  properties.reserved[0] = 1;  // "reserved for future use, must be 0"
  EXPECT_EQ(cudaMemPoolCreate(&pool, &properties), cudaErrorInvalidValue);
  // Doc-silent: an invalid ordinal in the location (cudaErrorInvalidValue here; a GPU answers).
  properties = device_pool_properties(count);
  EXPECT_EQ(cudaMemPoolCreate(&pool, &properties), cudaErrorInvalidValue);

  EXPECT_EQ(cudaDeviceGetDefaultMemPool(nullptr, device), cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceGetDefaultMemPool(&pool, count), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaDeviceSetMemPool(count, pool), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaDeviceGetMemPool(nullptr, device), cudaErrorInvalidValue);
  // Doc-silent: cudaDeviceGetMemPool lists no cudaErrorInvalidDevice (a GPU answers).
  EXPECT_EQ(cudaDeviceGetMemPool(&pool, count), cudaErrorInvalidValue);
  cudaMemLocation location{cudaMemLocationTypeDevice, device};
  EXPECT_EQ(cudaMemGetMemPool(&pool, &location, cudaMemAllocationTypeInvalid),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemGetDefaultMemPool(&pool, nullptr, cudaMemAllocationTypePinned),
            cudaErrorInvalidValue);
  cudaMemLocation invalid_type{cudaMemLocationTypeHostNumaCurrent, 0};
  EXPECT_EQ(cudaMemGetDefaultMemPool(&pool, &invalid_type, cudaMemAllocationTypePinned),
            cudaErrorInvalidValue);

  pool_guard const created;
  EXPECT_EQ(cudaMallocFromPoolAsync(nullptr, 16, created.get(), stream.get()),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPoolSetAttribute(created.get(), cudaMemPoolAttrReleaseThreshold, nullptr),
            cudaErrorInvalidValue);
  // cudaMemSetMemPool: "The type of memory pool should also match the parameter allocType".
  EXPECT_EQ(cudaMemSetMemPool(&location, cudaMemAllocationTypeManaged, created.get()),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemSetMemPool(nullptr, cudaMemAllocationTypePinned, created.get()),
            cudaErrorInvalidValue);
  // Doc-silent, modelled strictly: the pool's own device cannot lose access, and access by a
  // device location only (a GPU answers).
  cudaMemAccessDesc own{location, cudaMemAccessFlagsProtNone};
  EXPECT_EQ(cudaMemPoolSetAccess(created.get(), &own, 1), cudaErrorInvalidValue);
  cudaMemAccessDesc host{cudaMemLocation{cudaMemLocationTypeHost, 0},
                         cudaMemAccessFlagsProtReadWrite};
  EXPECT_EQ(cudaMemPoolSetAccess(created.get(), &host, 1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPoolSetAccess(created.get(), nullptr, 1), cudaErrorInvalidValue);
  cudaMemAccessFlags flags = cudaMemAccessFlagsProtNone;
  EXPECT_EQ(cudaMemPoolGetAccess(nullptr, created.get(), &location), cudaErrorInvalidValue);
  ASSERT_EQ(cudaMemPoolGetAccess(&flags, created.get(), &location), cudaSuccess);
  EXPECT_EQ(flags, cudaMemAccessFlagsProtReadWrite);  // nothing above changed it
  static_cast<void>(cudaGetLastError());
}

// cudaMemPoolSetAccess: "Each descriptor instructs the access to enable for a single gpu";
// cudaMemPoolGetAccess reads it back. Needs two devices.
TEST_F(memory_pools, access_granted_to_another_device_reads_back) {
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  if (count < 2) GTEST_SKIP() << "needs two devices";
  int const device = pool_guard::current_device();
  int const other = device == 0 ? 1 : 0;
  int can_access = 0;
  ASSERT_EQ(cudaDeviceCanAccessPeer(&can_access, other, device), cudaSuccess);
  if (can_access == 0) GTEST_SKIP() << "the devices are not peers";
  pool_guard const pool;
  cudaMemLocation peer{cudaMemLocationTypeDevice, other};
  cudaMemAccessFlags flags = cudaMemAccessFlagsProtReadWrite;
  ASSERT_EQ(cudaMemPoolGetAccess(&flags, pool.get(), &peer), cudaSuccess);
  EXPECT_EQ(flags, cudaMemAccessFlagsProtNone);
  cudaMemAccessDesc grant{peer, cudaMemAccessFlagsProtReadWrite};
  ASSERT_EQ(cudaMemPoolSetAccess(pool.get(), &grant, 1), cudaSuccess);
  ASSERT_EQ(cudaMemPoolGetAccess(&flags, pool.get(), &peer), cudaSuccess);
  EXPECT_EQ(flags, cudaMemAccessFlagsProtReadWrite);
  grant.flags = cudaMemAccessFlagsProtNone;
  ASSERT_EQ(cudaMemPoolSetAccess(pool.get(), &grant, 1), cudaSuccess);
  ASSERT_EQ(cudaMemPoolGetAccess(&flags, pool.get(), &peer), cudaSuccess);
  EXPECT_EQ(flags, cudaMemAccessFlagsProtNone);
  // Doc-silent, modelled strictly: read-only access is refused (a GPU answers).
  grant.flags = cudaMemAccessFlagsProtRead;
  EXPECT_EQ(cudaMemPoolSetAccess(pool.get(), &grant, 1), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
  // cudaMallocFromPoolAsync: "The specified memory pool may be from a device different than that
  // of the specified hStream".
  ASSERT_EQ(cudaSetDevice(other), cudaSuccess);
  {
    stream_guard const stream;
    void* memory = nullptr;
    ASSERT_EQ(cudaMallocFromPoolAsync(&memory, mebibyte, pool.get(), stream.get()), cudaSuccess);
    cudaPointerAttributes attributes{};
    ASSERT_EQ(cudaPointerGetAttributes(&attributes, memory), cudaSuccess);
    EXPECT_EQ(attributes.device, device);
    ASSERT_EQ(cudaFreeAsync(memory, stream.get()), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream.get()), cudaSuccess);
  }
  ASSERT_EQ(cudaSetDevice(device), cudaSuccess);
}
