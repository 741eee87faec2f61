// Device management and stream callbacks where the simulator answers what the header leaves open,
// or what only it can stage: a callback queued before a device fault receives the error, limits
// refused after a kernel launch, a short PCI bus id buffer, unknown initialization flags, and
// cudaDeviceSyncMemops making a device-to-device cudaMemcpy wait for itself.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include "sim_test.hpp"
#include <graphstep/sim/sim.hpp>

namespace gs = graphstep;

namespace {

__global__ void trap_in_thread_three(int* out) {
  if (threadIdx.x == 3) __trap();
  out[threadIdx.x] = 1;
}

__global__ void write_one(int* out) {
  out[threadIdx.x] = 1;
}

cudaError_t status_seen = cudaSuccess;
bool called = false;

void CUDART_CB remember_status(cudaStream_t /*stream*/, cudaError_t status, void* /*data*/) {
  called = true;
  status_seen = status;
}

// "In the event of a device error, all subsequently executed callbacks will receive an
// appropriate cudaError_t" (cudaStreamAddCallback): queued behind a kernel that faults, the
// callback still runs, with the fault's error.
void fault_then_call_back_and_exit() {
  gs::sim::set_execution_mode(gs::sim::execution_mode::deferred);
  int* out = nullptr;
  if (cudaMalloc(reinterpret_cast<void**>(&out), 64 * sizeof(int)) != cudaSuccess) std::exit(100);
  trap_in_thread_three<<<1, 64>>>(out);
  if (cudaStreamAddCallback(nullptr, remember_status, nullptr, 0) != cudaSuccess) std::exit(101);
  static_cast<void>(cudaDeviceSynchronize());
  std::exit(called && status_seen == cudaErrorLaunchFailure ? 0 : 1);
}

TEST(device_management_sim, a_callback_after_a_device_fault_receives_the_error) {
  EXPECT_EXIT(fault_then_call_back_and_exit(), ::testing::ExitedWithCode(0), "faulted");
}

TEST(device_management_sim, a_callback_in_a_capture_is_capture_unsupported) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  EXPECT_EQ(cudaStreamAddCallback(stream, remember_status, nullptr, 0),
            cudaErrorStreamCaptureUnsupported);
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorStreamCaptureInvalidated);
  static_cast<void>(cudaGetLastError());
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  // "Passing an invalid handle will result in undefined behavior" (cudaStreamGetId): refused here.
  unsigned long long id = 0;
  EXPECT_EQ(cudaStreamGetId(stream, &id), cudaErrorInvalidResourceHandle);
  static_cast<void>(cudaGetLastError());
}

// Which kernels use printf or malloc is not known here: once any kernel was launched on the
// device, their limits are refused ("must not be performed after launching any kernel that uses
// the printf() device system call", cudaDeviceSetLimit); the stack size still changes.
TEST(device_management_sim, printf_and_heap_limits_are_refused_after_a_kernel_launch) {
  int* out = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&out), 64 * sizeof(int)), cudaSuccess);
  write_one<<<1, 64>>>(out);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaDeviceSetLimit(cudaLimitMallocHeapSize, std::size_t{16} << 20),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceSetLimit(cudaLimitPrintfFifoSize, std::size_t{2} << 20),
            cudaErrorInvalidValue);
  std::size_t stack = 0;
  ASSERT_EQ(cudaDeviceGetLimit(&stack, cudaLimitStackSize), cudaSuccess);
  EXPECT_EQ(cudaDeviceSetLimit(cudaLimitStackSize, stack), cudaSuccess);
  EXPECT_EQ(cudaDeviceSetLimit(cudaLimitMaxL2FetchGranularity, 256), cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceSetLimit(static_cast<cudaLimit>(0x7f), 1), cudaErrorUnsupportedLimit);
  // The persisting L2 size is clamped to the device's maximum.
  ASSERT_EQ(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, ~std::size_t{0}), cudaSuccess);
  std::size_t persisting = 0;
  ASSERT_EQ(cudaDeviceGetLimit(&persisting, cudaLimitPersistingL2CacheSize), cudaSuccess);
  int maximum = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&maximum, cudaDevAttrMaxPersistingL2CacheSize, 0), cudaSuccess);
  EXPECT_EQ(persisting, static_cast<std::size_t>(maximum));
  ASSERT_EQ(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0), cudaSuccess);
  static_cast<void>(cudaGetLastError());
  ASSERT_EQ(cudaFree(out), cudaSuccess);
}

// The stricter readings where the header is silent: a PCI bus id buffer shorter than the 13
// characters it asks for, and cudaInitDevice flags it does not define.
TEST(device_management_sim, short_buffers_and_unknown_flags_are_invalid_values) {
  char text[12] = {};
  EXPECT_EQ(cudaDeviceGetPCIBusId(text, sizeof text, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaInitDevice(0, 0, 0x2), cudaErrorInvalidValue);
  EXPECT_EQ(cudaInitDevice(0, cudaDeviceScheduleSpin | cudaDeviceScheduleYield,
                           cudaInitDeviceFlagsAreValid),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaSetDeviceFlags(cudaDeviceScheduleSpin | cudaDeviceScheduleYield),
            cudaErrorInvalidValue);
  int found = -1;
  EXPECT_EQ(cudaDeviceGetByPCIBusId(&found, "0000:7f:00.0"), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaDeviceGetByPCIBusId(&found, "0000:01:00.0x"), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

// cudaDeviceSyncMemops: "synchronous memory operations initiated on this context will always
// synchronize" (cudaSetDeviceFlags): a device-to-device cudaMemcpy, which otherwise returns before
// it is done, is complete when it returns.
TEST(device_management_sim, sync_memops_make_a_device_to_device_copy_blocking) {
  void* a = nullptr;
  void* b = nullptr;
  ASSERT_EQ(cudaMalloc(&a, 256), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b, 256), cudaSuccess);
  ASSERT_EQ(cudaMemset(a, 0, 256), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  unsigned flags = 0;
  ASSERT_EQ(cudaGetDeviceFlags(&flags), cudaSuccess);
  gs::sim::set_execution_mode(gs::sim::execution_mode::deferred);
  ASSERT_EQ(cudaMemcpy(b, a, 256, cudaMemcpyDeviceToDevice), cudaSuccess);
  EXPECT_EQ(gs::sim::queued_operations(), 1U);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cudaSetDeviceFlags(cudaDeviceSyncMemops), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(b, a, 256, cudaMemcpyDeviceToDevice), cudaSuccess);
  EXPECT_EQ(gs::sim::queued_operations(), 0U);
  ASSERT_EQ(cudaMemset(b, 1, 256), cudaSuccess);
  EXPECT_EQ(gs::sim::queued_operations(), 0U);
  gs::sim::set_execution_mode(gs::sim::execution_mode::immediate);
  ASSERT_EQ(cudaSetDeviceFlags(flags & ~static_cast<unsigned>(cudaDeviceMapHost)), cudaSuccess);
  ASSERT_EQ(cudaFree(a), cudaSuccess);
  ASSERT_EQ(cudaFree(b), cudaSuccess);
}

}  // namespace
