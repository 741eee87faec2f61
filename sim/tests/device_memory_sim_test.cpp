// Physical device memory (cuMemCreate) is a memory file here, filled with garbage (0xFF) as fresh
// device memory is: a limit a GPU never meets, the process's file-size limit (RLIMIT_FSIZE,
// `ulimit -f`), stops it growing. The simulated device says so, by name, and neither dies of
// SIGXFSZ nor leaks the file. Each such case runs in a child process, which alone lowers its
// limit.

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

namespace {

void* entry(char const* name) {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &function, 12000, cudaEnableDefault, &found) !=
          cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    std::exit(100);
  }
  return function;
}

// What both cases ask cuMemCreate for: pinned memory of device 0.
CUmemAllocationProp pinned_on_device_zero() {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  return prop;
}

int open_files() {
  DIR* const listing = opendir("/proc/self/fd");
  if (listing == nullptr) std::exit(101);
  int count = 0;
  while (readdir(listing) != nullptr) ++count;
  closedir(listing);
  return count;
}

// Exits 0 when a creation past the limit fails as out of memory, leaves the signal mask, the
// SIGXFSZ disposition, the pending signals and the open files as they were, and a creation
// within the raised limit succeeds.
void create_past_the_file_size_limit_and_exit() {
  auto* const create = reinterpret_cast<decltype(&cuMemCreate)>(entry("cuMemCreate"));
  auto* const release = reinterpret_cast<decltype(&cuMemRelease)>(entry("cuMemRelease"));
  CUmemAllocationProp const prop = pinned_on_device_zero();
  std::size_t const size = std::size_t{2} << 20;  // one granule

  rlimit limit{};
  if (getrlimit(RLIMIT_FSIZE, &limit) != 0) std::exit(102);
  rlimit const lowered{std::size_t{1} << 20, limit.rlim_max};
  if (setrlimit(RLIMIT_FSIZE, &lowered) != 0) std::exit(103);
  sigset_t mask_before;
  pthread_sigmask(SIG_SETMASK, nullptr, &mask_before);
  struct sigaction disposition_before {};
  sigaction(SIGXFSZ, nullptr, &disposition_before);
  int const files_before = open_files();

  CUmemGenericAllocationHandle handle{};
  if (create(&handle, size, &prop, 0) != CUDA_ERROR_OUT_OF_MEMORY) std::exit(1);

  sigset_t mask_after;
  pthread_sigmask(SIG_SETMASK, nullptr, &mask_after);
  if (sigismember(&mask_after, SIGXFSZ) != sigismember(&mask_before, SIGXFSZ)) std::exit(2);
  struct sigaction disposition_after {};
  sigaction(SIGXFSZ, nullptr, &disposition_after);
  if (disposition_after.sa_handler != disposition_before.sa_handler) std::exit(3);
  sigset_t pending;
  sigpending(&pending);
  if (sigismember(&pending, SIGXFSZ) == 1) std::exit(4);
  if (open_files() != files_before) std::exit(5);

  if (setrlimit(RLIMIT_FSIZE, &limit) != 0) std::exit(104);
  if (create(&handle, size, &prop, 0) != CUDA_SUCCESS) std::exit(6);
  if (release(handle) != CUDA_SUCCESS) std::exit(7);
  std::exit(0);
}

TEST(device_memory, the_file_size_limit_stopping_growth_is_named_with_its_value) {
  EXPECT_EXIT(create_past_the_file_size_limit_and_exit(), ::testing::ExitedWithCode(0),
              "cuMemCreate of 2097152 bytes: the process's file-size limit \\(ulimit -f\\) of "
              "1048576 bytes stops the simulated device from growing its memory.*raise it");
}

// Fresh physical memory holds garbage, as cudaMalloc's does: every byte reads 0xFF once mapped.
TEST(device_memory, fresh_physical_memory_reads_as_garbage_not_zeros) {
  auto* const create = reinterpret_cast<decltype(&cuMemCreate)>(entry("cuMemCreate"));
  auto* const release = reinterpret_cast<decltype(&cuMemRelease)>(entry("cuMemRelease"));
  auto* const reserve =
      reinterpret_cast<decltype(&cuMemAddressReserve)>(entry("cuMemAddressReserve"));
  auto* const free_range = reinterpret_cast<decltype(&cuMemAddressFree)>(entry("cuMemAddressFree"));
  auto* const map = reinterpret_cast<decltype(&cuMemMap)>(entry("cuMemMap"));
  auto* const unmap = reinterpret_cast<decltype(&cuMemUnmap)>(entry("cuMemUnmap"));
  auto* const set_access = reinterpret_cast<decltype(&cuMemSetAccess)>(entry("cuMemSetAccess"));
  CUmemAllocationProp const prop = pinned_on_device_zero();
  std::size_t const size = std::size_t{3} << 21;  // three granules, past the 1 MiB written at once
  CUmemGenericAllocationHandle handle{};
  ASSERT_EQ(create(&handle, size, &prop, 0), CUDA_SUCCESS);
  CUdeviceptr address{};
  ASSERT_EQ(reserve(&address, size, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(map(address, size, 0, handle, 0), CUDA_SUCCESS);
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  ASSERT_EQ(set_access(address, size, &access, 1), CUDA_SUCCESS);
  std::vector<unsigned char> host(size, 0);
  ASSERT_EQ(
      cudaMemcpy(host.data(), reinterpret_cast<void const*>(address), size, cudaMemcpyDeviceToHost),
      cudaSuccess);
  std::size_t const not_garbage = static_cast<std::size_t>(
      std::count_if(host.begin(), host.end(), [](unsigned char b) { return b != 0xFFU; }));
  EXPECT_EQ(not_garbage, 0U);
  EXPECT_EQ(unmap(address, size), CUDA_SUCCESS);
  EXPECT_EQ(free_range(address, size), CUDA_SUCCESS);
  EXPECT_EQ(release(handle), CUDA_SUCCESS);
}

}  // namespace
