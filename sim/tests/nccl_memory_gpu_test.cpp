// ncclMemAlloc, ncclMemFree, ncclCommRegister and ncclCommDeregister as NCCL's source defines them
// (src/allocator.cc maps memory with the driver's virtual memory calls, rounded up to the
// granularity; src/register/register.cc counts registrations of one range). One rank on device 0,
// so that a GPU machine with one GPU runs it too.

#if __has_include(<nccl.h>)
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <cstddef>
#include <vector>

#include "sim_test.hpp"

namespace {

class nccl_memory : public sim_testing::gpu_test {
 protected:
  void SetUp() override {
    sim_testing::gpu_test::SetUp();
    if (IsSkipped()) return;
    SIM_TEST_TRY(cudaSetDevice(0));
    int const device = 0;
    ASSERT_EQ(ncclCommInitAll(&comm_, 1, &device), ncclSuccess);
  }
  void TearDown() override {
    if (comm_ != nullptr) {
      EXPECT_EQ(ncclCommDestroy(comm_), ncclSuccess);
    }
  }
  ncclComm_t comm_{};
};

TEST_F(nccl_memory, mem_alloc_gives_device_memory_that_mem_free_gives_back) {
  void* memory = nullptr;
  ASSERT_EQ(ncclMemAlloc(&memory, 1000), ncclSuccess);
  ASSERT_NE(memory, nullptr);
  cudaPointerAttributes attributes{};
  SIM_TEST_TRY(cudaPointerGetAttributes(&attributes, memory));
  EXPECT_EQ(attributes.type, cudaMemoryTypeDevice);
  EXPECT_EQ(attributes.device, 0);
  SIM_TEST_TRY(cudaMemset(memory, 0x5A, 1000));
  std::vector<unsigned char> back(1000);
  SIM_TEST_TRY(cudaMemcpy(back.data(), memory, back.size(), cudaMemcpyDeviceToHost));
  EXPECT_EQ(back, std::vector<unsigned char>(1000, 0x5A));
  EXPECT_EQ(ncclMemFree(memory), ncclSuccess);
  EXPECT_NE(ncclMemFree(memory), ncclSuccess);   // freed already: the driver has no handle
  EXPECT_EQ(ncclMemFree(nullptr), ncclSuccess);  // cudaFree(NULL)
}

// src/allocator.cc: "The actual allocated size might be larger than requested due to granularity
// requirement" (nccl.h); the size is rounded up to the recommended granularity.
TEST_F(nccl_memory, mem_alloc_rounds_up_to_the_granularity) {
  void* memory = nullptr;
  ASSERT_EQ(ncclMemAlloc(&memory, 1), ncclSuccess);
  // Every byte up to the granularity (2 MiB on current GPUs, and on the simulated device) is
  // mapped: the last one can be written.
  auto* const last = static_cast<unsigned char*>(memory) + (std::size_t{2} << 20U) - 1;
  SIM_TEST_TRY(cudaMemset(last, 1, 1));
  SIM_TEST_TRY(cudaDeviceSynchronize());
  EXPECT_EQ(ncclMemFree(memory), ncclSuccess);
}

// NCCL falls back to cudaMalloc for a null pointer or a size of 0, which answers for them.
TEST_F(nccl_memory, a_null_pointer_or_a_size_of_zero_is_answered_as_cuda_malloc_answers) {
  EXPECT_EQ(ncclMemAlloc(nullptr, 64), ncclUnhandledCudaError);
  void* from_nccl = nullptr;
  void* from_cuda = nullptr;
  cudaError_t const cuda = cudaMalloc(&from_cuda, 0);
  static_cast<void>(cudaGetLastError());
  EXPECT_EQ(ncclMemAlloc(&from_nccl, 0) == ncclSuccess, cuda == cudaSuccess);
  EXPECT_EQ(from_nccl, from_cuda);
}

// ncclMemFree asks the driver for the allocation's handle (cuMemRetainAllocationHandle), which
// cudaMalloc's memory has not; cudaFree of mapped memory is refused likewise. A GPU run answers
// whether the runtime agrees on cudaFree.
TEST_F(nccl_memory, memory_of_one_allocator_is_not_freed_by_the_other) {
  void* from_cuda = nullptr;
  SIM_TEST_TRY(cudaMalloc(&from_cuda, 256));
  EXPECT_NE(ncclMemFree(from_cuda), ncclSuccess);
  SIM_TEST_TRY(cudaFree(from_cuda));
  void* from_nccl = nullptr;
  ASSERT_EQ(ncclMemAlloc(&from_nccl, 256), ncclSuccess);
  EXPECT_NE(cudaFree(from_nccl), cudaSuccess);
  static_cast<void>(cudaGetLastError());
  EXPECT_EQ(ncclMemFree(from_nccl), ncclSuccess);
}

TEST_F(nccl_memory, a_range_registered_twice_needs_two_deregistrations) {
  float* buffer = nullptr;
  SIM_TEST_TRY(cudaMalloc(&buffer, 64 * sizeof(float)));
  void* first = nullptr;
  void* second = nullptr;
  ASSERT_EQ(ncclCommRegister(comm_, buffer, 64 * sizeof(float), &first), ncclSuccess);
  ASSERT_EQ(ncclCommRegister(comm_, buffer, 64 * sizeof(float), &second), ncclSuccess);
  EXPECT_EQ(first, second);
  // A registered buffer reduces as any other.
  std::vector<float> values(64, 1.5F);
  SIM_TEST_TRY(cudaMemcpy(buffer, values.data(), 64 * sizeof(float), cudaMemcpyHostToDevice));
  EXPECT_EQ(ncclAllReduce(buffer, buffer, 64, ncclFloat, ncclSum, comm_, nullptr), ncclSuccess);
  SIM_TEST_TRY(cudaMemcpy(values.data(), buffer, 64 * sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT_EQ(values, std::vector<float>(64, 1.5F));
  EXPECT_EQ(ncclCommDeregister(comm_, first), ncclSuccess);
  EXPECT_EQ(ncclCommDeregister(comm_, second), ncclSuccess);
  EXPECT_EQ(ncclCommDeregister(comm_, first), ncclInvalidUsage);  // "Could not find handle"
  EXPECT_EQ(ncclCommDeregister(comm_, nullptr), ncclSuccess);
  SIM_TEST_TRY(cudaFree(buffer));
}

// What NCCL leaves to fail later or undefined, refused by the simulator at the call (the
// stricter reading).
TEST_F(nccl_memory, registering_what_is_not_device_memory_is_refused_here) {
  if (!sim_testing::simulated_device) GTEST_SKIP() << "not checked at the call on a GPU";
  std::vector<float> host(64);
  void* handle = nullptr;
  EXPECT_EQ(ncclCommRegister(comm_, host.data(), host.size() * sizeof(float), &handle),
            ncclInvalidArgument);
  float* buffer = nullptr;
  SIM_TEST_TRY(cudaMalloc(&buffer, 64 * sizeof(float)));
  EXPECT_EQ(ncclCommRegister(comm_, buffer, 65 * sizeof(float), &handle), ncclInvalidArgument);
  EXPECT_EQ(ncclCommRegister(comm_, buffer, 64 * sizeof(float), nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclCommRegister(nullptr, buffer, 64 * sizeof(float), &handle), ncclInvalidArgument);
  SIM_TEST_TRY(cudaFree(buffer));
}

// Without symmetric memory support (no NVLink multicast, as on the simulated device) NCCL
// checks the arguments and gives no window (src/dev_runtime.cc). A GPU with multicast gives one.
TEST_F(nccl_memory, a_window_without_symmetric_support_is_null) {
  void* memory = nullptr;
  ASSERT_EQ(ncclMemAlloc(&memory, 4096), ncclSuccess);
  ncclWindow_t window = nullptr;
  EXPECT_EQ(ncclCommWindowRegister(comm_, nullptr, 4096, &window, NCCL_WIN_DEFAULT),
            ncclInvalidArgument);
  EXPECT_EQ(ncclCommWindowRegister(comm_, memory, 4096, nullptr, NCCL_WIN_DEFAULT),
            ncclInvalidArgument);
  ASSERT_EQ(ncclCommWindowRegister(comm_, memory, 4096, &window, NCCL_WIN_COLL_SYMMETRIC),
            ncclSuccess);
  if (sim_testing::simulated_device) {
    EXPECT_EQ(window, nullptr);
  }
  EXPECT_EQ(ncclCommWindowDeregister(comm_, window), ncclSuccess);
  EXPECT_EQ(ncclMemFree(memory), ncclSuccess);
}

}  // namespace
#endif
