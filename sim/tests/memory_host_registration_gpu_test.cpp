// Registered host memory as cuda_runtime_api.h documents it: cudaHostRegister page-locks a range
// of the program's memory, which copies then use as pinned memory; cudaHostGetDevicePointer,
// cudaHostGetFlags and cudaHostUnregister. On the simulated device they check its model; on a
// GPU the same tests check the tests.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "sim_test.hpp"

namespace {

using host_registration = sim_testing::gpu_test;

constexpr std::size_t bytes = 1 << 16;

int current_device() {
  int device = 0;
  SIM_TEST_TRY(cudaGetDevice(&device));
  return device;
}

}  // namespace

// "Page-locks the memory range specified by ptr and size": copies from and to it land, in stream
// order, and cudaPointerGetAttributes calls it host memory until cudaHostUnregister "makes it
// pageable again".
TEST_F(host_registration, registered_memory_serves_copies_as_pinned_memory) {
  std::vector<unsigned char> source(bytes);
  std::vector<unsigned char> destination(bytes, 0);
  for (std::size_t i = 0; i < bytes; ++i) source[i] = static_cast<unsigned char>(i * 13 + 5);
  ASSERT_EQ(cudaHostRegister(source.data(), bytes, cudaHostRegisterDefault), cudaSuccess);
  ASSERT_EQ(cudaHostRegister(destination.data(), bytes, cudaHostRegisterMapped), cudaSuccess);
  cudaPointerAttributes attributes{};
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, source.data() + 100), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeHost);
  void* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, bytes), cudaSuccess);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(device, source.data(), bytes, cudaMemcpyHostToDevice, stream),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(destination.data(), device, bytes, cudaMemcpyDeviceToHost, stream),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(destination, source);
  EXPECT_EQ(cudaHostUnregister(source.data()), cudaSuccess);
  EXPECT_EQ(cudaHostUnregister(destination.data()), cudaSuccess);
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, source.data()), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeUnregistered);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  EXPECT_EQ(cudaFree(device), cudaSuccess);
}

// cudaHostGetDevicePointer: with cudaDevAttrCanUseHostPointerForRegisteredMem on the device the
// device pointer "will match the original pointer pHost"; "flags ... must be set to 0".
TEST_F(host_registration, the_device_pointer_of_registered_memory) {
  int can_use_host_pointer = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&can_use_host_pointer,
                                   cudaDevAttrCanUseHostPointerForRegisteredMem, current_device()),
            cudaSuccess);
  int supported = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&supported, cudaDevAttrHostRegisterSupported, current_device()),
            cudaSuccess);
  EXPECT_EQ(supported, 1);
  std::vector<float> host(1024, 1.5F);
  ASSERT_EQ(cudaHostRegister(host.data(), host.size() * sizeof(float), cudaHostRegisterMapped),
            cudaSuccess);
  void* device = nullptr;
  ASSERT_EQ(cudaHostGetDevicePointer(&device, host.data(), 0), cudaSuccess);
  EXPECT_NE(device, nullptr);
  if (can_use_host_pointer != 0) {
    EXPECT_EQ(device, static_cast<void*>(host.data()));
  }
  // A copy through the device pointer reads the host memory.
  std::vector<float> back(host.size(), 0.0F);
  ASSERT_EQ(cudaMemcpy(back.data(), device, back.size() * sizeof(float), cudaMemcpyDefault),
            cudaSuccess);
  EXPECT_EQ(back, host);
  EXPECT_EQ(cudaHostGetDevicePointer(&device, host.data(), 1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaHostUnregister(host.data()), cudaSuccess);
  EXPECT_EQ(cudaHostGetDevicePointer(&device, host.data(), 0), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

// cudaHostGetFlags: the flags cudaHostAlloc was given ("orthogonal to one another"); memory not
// from cudaHostAlloc is refused.
TEST_F(host_registration, host_get_flags_reads_back_the_allocation_flags) {
  void* pinned = nullptr;
  ASSERT_EQ(cudaHostAlloc(&pinned, 4096, cudaHostAllocMapped | cudaHostAllocPortable), cudaSuccess);
  unsigned flags = 0;
  ASSERT_EQ(cudaHostGetFlags(&flags, static_cast<unsigned char*>(pinned) + 10), cudaSuccess);
  EXPECT_EQ(flags & (cudaHostAllocMapped | cudaHostAllocPortable),
            static_cast<unsigned>(cudaHostAllocMapped | cudaHostAllocPortable));
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
  std::vector<unsigned char> pageable(64);
  EXPECT_EQ(cudaHostGetFlags(&flags, pageable.data()), cudaErrorInvalidValue);
  EXPECT_EQ(cudaHostGetFlags(nullptr, pageable.data()), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

// The errors the header lists: cudaErrorInvalidValue for bad arguments,
// cudaErrorHostMemoryAlreadyRegistered for a range registered twice, and
// cudaErrorHostMemoryNotRegistered for a base address cudaHostRegister was not given.
TEST_F(host_registration, bad_arguments_are_refused_with_the_documented_errors) {
  std::vector<unsigned char> host(bytes);
  EXPECT_EQ(cudaHostRegister(nullptr, bytes, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaHostRegister(host.data(), 0, 0), cudaErrorInvalidValue);
  ASSERT_EQ(cudaHostRegister(host.data(), bytes, 0), cudaSuccess);
  EXPECT_EQ(cudaHostRegister(host.data() + 4096, 4096, 0), cudaErrorHostMemoryAlreadyRegistered);
  EXPECT_EQ(cudaHostUnregister(host.data() + 4096), cudaErrorHostMemoryNotRegistered);
  // Doc-silent, modelled strictly: registered memory is not cudaHostAlloc's for
  // cudaHostGetFlags, and cudaFreeHost refuses it ("must be unregistered with
  // cudaHostUnregister()").
  unsigned flags = 0;
  EXPECT_EQ(cudaHostGetFlags(&flags, host.data()), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFreeHost(host.data()), cudaErrorInvalidValue);
  ASSERT_EQ(cudaHostUnregister(host.data()), cudaSuccess);
  EXPECT_EQ(cudaHostUnregister(host.data()), cudaErrorHostMemoryNotRegistered);
  static_cast<void>(cudaGetLastError());
}
