// Device management as cuda_runtime_api.h documents it: device flags, cudaInitDevice,
// cudaChooseDevice, PCI bus ids and resource limits; and stream callbacks and stream ids. On the
// simulated device they check its model; on a GPU the same tests check the tests.

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "sim_test.hpp"

namespace {

using device_management = sim_testing::gpu_test;

// Restores the current device's flags when a test changed them.
class device_flags_guard {
 public:
  device_flags_guard() { SIM_TEST_TRY(cudaGetDeviceFlags(&flags_)); }
  ~device_flags_guard() {
    static_cast<void>(cudaSetDeviceFlags(flags_ & ~static_cast<unsigned>(cudaDeviceMapHost)));
  }
  device_flags_guard(device_flags_guard const&) = delete;
  device_flags_guard& operator=(device_flags_guard const&) = delete;

 private:
  unsigned flags_{};
};

}  // namespace

// cudaSetDeviceFlags "Records flags as the flags for the current device"; cudaGetDeviceFlags
// returns them and "may specifically include cudaDeviceMapHost".
TEST_F(device_management, device_flags_set_read_back) {
  device_flags_guard const restore;
  ASSERT_EQ(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync), cudaSuccess);
  unsigned flags = 0;
  ASSERT_EQ(cudaGetDeviceFlags(&flags), cudaSuccess);
  EXPECT_EQ(flags & cudaDeviceScheduleMask, static_cast<unsigned>(cudaDeviceScheduleBlockingSync));
  EXPECT_EQ(flags & ~static_cast<unsigned>(cudaDeviceMapHost | cudaDeviceLmemResizeToMax),
            static_cast<unsigned>(cudaDeviceScheduleBlockingSync));
  ASSERT_EQ(cudaSetDeviceFlags(cudaDeviceScheduleSpin | cudaDeviceSyncMemops), cudaSuccess);
  ASSERT_EQ(cudaGetDeviceFlags(&flags), cudaSuccess);
  EXPECT_EQ(flags & cudaDeviceScheduleMask, static_cast<unsigned>(cudaDeviceScheduleSpin));
  EXPECT_NE(flags & cudaDeviceSyncMemops, 0U);
  // cudaErrorInvalidValue, the only error listed: an unknown bit.
  EXPECT_EQ(cudaSetDeviceFlags(0x100), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

// cudaInitDevice: "When cudaInitDeviceFlagsAreValid is set in flags, deviceFlags are applied to
// the requested device. The effect may be verified by cudaGetDeviceFlags"; an invalid device is
// cudaErrorInvalidDevice. The context is not made current: the current device stays.
TEST_F(device_management, init_device_applies_its_flags_and_keeps_the_current_device) {
  device_flags_guard const restore;
  int current = -1;
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  ASSERT_EQ(cudaInitDevice(current, cudaDeviceScheduleYield, cudaInitDeviceFlagsAreValid),
            cudaSuccess);
  unsigned flags = 0;
  ASSERT_EQ(cudaGetDeviceFlags(&flags), cudaSuccess);
  EXPECT_EQ(flags & cudaDeviceScheduleMask, static_cast<unsigned>(cudaDeviceScheduleYield));
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  if (count > 1) {
    int const other = current == 0 ? 1 : 0;
    ASSERT_EQ(cudaInitDevice(other, 0, 0), cudaSuccess);
    int after = -1;
    ASSERT_EQ(cudaGetDevice(&after), cudaSuccess);
    EXPECT_EQ(after, current);
  }
  EXPECT_EQ(cudaInitDevice(count, 0, 0), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaInitDevice(-1, 0, 0), cudaErrorInvalidDevice);
  static_cast<void>(cudaGetLastError());
}

// "Returns in *device the device which has properties that best match *prop" (cudaChooseDevice):
// asking for the properties of a device gives a device with that compute capability.
TEST_F(device_management, choose_device_gives_a_device_matching_the_properties) {
  cudaDeviceProp wanted{};
  ASSERT_EQ(cudaGetDeviceProperties(&wanted, 0), cudaSuccess);
  int chosen = -1;
  ASSERT_EQ(cudaChooseDevice(&chosen, &wanted), cudaSuccess);
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  ASSERT_GE(chosen, 0);
  ASSERT_LT(chosen, count);
  cudaDeviceProp got{};
  ASSERT_EQ(cudaGetDeviceProperties(&got, chosen), cudaSuccess);
  EXPECT_EQ(got.major, wanted.major);
  EXPECT_EQ(got.minor, wanted.minor);
  EXPECT_EQ(cudaChooseDevice(nullptr, &wanted), cudaErrorInvalidValue);
  EXPECT_EQ(cudaChooseDevice(&chosen, nullptr), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

// cudaDeviceGetPCIBusId: "[domain]:[bus]:[device].[function] where domain, bus, device, and
// function are all hexadecimal values", the values cudaDeviceProp gives; cudaDeviceGetByPCIBusId
// takes it back, also as [domain]:[bus]:[device] and [bus]:[device].[function].
TEST_F(device_management, pci_bus_ids_name_each_device_both_ways) {
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  for (int device = 0; device < count; ++device) {
    char text[32] = {};
    ASSERT_EQ(cudaDeviceGetPCIBusId(text, sizeof text, device), cudaSuccess);
    unsigned domain = 0;
    unsigned bus = 0;
    unsigned slot = 0;
    unsigned function = 0;
    ASSERT_EQ(std::sscanf(text, "%x:%x:%x.%x", &domain, &bus, &slot, &function), 4) << text;
    cudaDeviceProp p{};
    ASSERT_EQ(cudaGetDeviceProperties(&p, device), cudaSuccess);
    EXPECT_EQ(domain, static_cast<unsigned>(p.pciDomainID)) << text;
    EXPECT_EQ(bus, static_cast<unsigned>(p.pciBusID)) << text;
    EXPECT_EQ(slot, static_cast<unsigned>(p.pciDeviceID)) << text;
    int found = -1;
    ASSERT_EQ(cudaDeviceGetByPCIBusId(&found, text), cudaSuccess) << text;
    EXPECT_EQ(found, device);
    char shorter[32] = {};
    static_cast<void>(std::snprintf(shorter, sizeof shorter, "%x:%x:%x", domain, bus, slot));
    found = -1;
    ASSERT_EQ(cudaDeviceGetByPCIBusId(&found, shorter), cudaSuccess) << shorter;
    EXPECT_EQ(found, device);
    static_cast<void>(std::snprintf(shorter, sizeof shorter, "%x:%x.%x", bus, slot, function));
    found = -1;
    ASSERT_EQ(cudaDeviceGetByPCIBusId(&found, shorter), cudaSuccess) << shorter;
    EXPECT_EQ(found, device);
  }
  char text[32] = {};
  EXPECT_EQ(cudaDeviceGetPCIBusId(text, sizeof text, count), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaDeviceGetPCIBusId(nullptr, 32, 0), cudaErrorInvalidValue);
  int found = -1;
  EXPECT_EQ(cudaDeviceGetByPCIBusId(&found, "not a bus id"), cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceGetByPCIBusId(&found, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceGetByPCIBusId(nullptr, "0000:01:00.0"), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

// cudaDeviceGetLimit and cudaDeviceSetLimit: a limit set reads back at least as set ("The driver
// is free to modify the requested value to meet h/w requirements ... rounding up");
// cudaLimitDevRuntimeSyncDepth is cudaErrorUnsupportedLimit on compute capability 9.0 and later;
// a null pointer is cudaErrorInvalidValue.
TEST_F(device_management, limits_are_read_and_set) {
  std::size_t stack = 0;
  ASSERT_EQ(cudaDeviceGetLimit(&stack, cudaLimitStackSize), cudaSuccess);
  EXPECT_GT(stack, 0U);
  ASSERT_EQ(cudaDeviceSetLimit(cudaLimitStackSize, stack * 2), cudaSuccess);
  std::size_t doubled = 0;
  ASSERT_EQ(cudaDeviceGetLimit(&doubled, cudaLimitStackSize), cudaSuccess);
  EXPECT_GE(doubled, stack * 2);
  ASSERT_EQ(cudaDeviceSetLimit(cudaLimitStackSize, stack), cudaSuccess);
  for (cudaLimit const limit :
       {cudaLimitPrintfFifoSize, cudaLimitMallocHeapSize, cudaLimitDevRuntimePendingLaunchCount}) {
    std::size_t value = 0;
    EXPECT_EQ(cudaDeviceGetLimit(&value, limit), cudaSuccess) << limit;
    EXPECT_GT(value, 0U) << limit;
  }
  std::size_t granularity = 0;
  ASSERT_EQ(cudaDeviceGetLimit(&granularity, cudaLimitMaxL2FetchGranularity), cudaSuccess);
  EXPECT_LE(granularity, 128U);  // "Values can range from 0B to 128B"
  ASSERT_EQ(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0), cudaSuccess);
  std::size_t persisting = 1;
  ASSERT_EQ(cudaDeviceGetLimit(&persisting, cudaLimitPersistingL2CacheSize), cudaSuccess);
  EXPECT_EQ(persisting, 0U);

  cudaDeviceProp p{};
  ASSERT_EQ(cudaGetDeviceProperties(&p, 0), cudaSuccess);
  if (p.major >= 9) {
    std::size_t depth = 0;
    EXPECT_EQ(cudaDeviceGetLimit(&depth, cudaLimitDevRuntimeSyncDepth), cudaErrorUnsupportedLimit);
    EXPECT_EQ(cudaDeviceSetLimit(cudaLimitDevRuntimeSyncDepth, 4), cudaErrorUnsupportedLimit);
  }
  EXPECT_EQ(cudaDeviceGetLimit(nullptr, cudaLimitStackSize), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}
