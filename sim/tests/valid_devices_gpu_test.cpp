// cudaSetValidDevices as cuda_runtime_api.h documents it: "CUDA will try devices from the list
// sequentially until it finds one that works", a len of 0 goes "back to its default behavior",
// and the list's errors. A host thread that has not chosen a device uses the list's first.

#include <cuda_runtime_api.h>

#include <thread>

#include "sim_test.hpp"

namespace {

class valid_devices : public sim_testing::gpu_test {
 protected:
  void SetUp() override {
    gpu_test::SetUp();
    if (IsSkipped()) return;
    SIM_TEST_TRY(cudaGetDeviceCount(&count_));
  }
  void TearDown() override {
    if (count_ != 0) SIM_TEST_EXPECT_SUCCESS(cudaSetValidDevices(nullptr, 0));
  }
  // The device a new host thread uses before it chooses one, and where its allocation lands.
  static void device_of_a_new_thread(int& current, int& allocated_on) {
    std::thread{[&current, &allocated_on] {
      SIM_TEST_EXPECT_SUCCESS(cudaGetDevice(&current));
      void* memory = nullptr;
      SIM_TEST_EXPECT_SUCCESS(cudaMalloc(&memory, 256));
      cudaPointerAttributes attributes{};
      SIM_TEST_EXPECT_SUCCESS(cudaPointerGetAttributes(&attributes, memory));
      allocated_on = attributes.device;
      SIM_TEST_EXPECT_SUCCESS(cudaFree(memory));
    }}.join();
  }

  int count_{};
};

}  // namespace

// "If a specified device ID in the list does not exist, this function will return
// cudaErrorInvalidDevice. If len is not 0 and device_arr is NULL or if len exceeds the number of
// devices in the system, then cudaErrorInvalidValue is returned."
TEST_F(valid_devices, a_list_naming_no_device_or_too_long_is_refused) {
  EXPECT_EQ(cudaSetValidDevices(nullptr, 1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  int too_many[17]{};
  EXPECT_EQ(cudaSetValidDevices(too_many, count_ + 1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  int missing[] = {count_};
  EXPECT_EQ(cudaSetValidDevices(missing, 1), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice);
  int negative[] = {-1};
  EXPECT_EQ(cudaSetValidDevices(negative, 1), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice);
  int current = -1;
  int allocated_on = -1;
  device_of_a_new_thread(current, allocated_on);
  EXPECT_EQ(current, 0) << "a refused list changed the device";
}

// A negative len: the header does not say; the simulated device refuses it
// (cudaErrorInvalidValue), as it refuses a len past the device count. A GPU run answers.
TEST_F(valid_devices, probe_a_negative_length_is_invalid_value) {
  int devices[] = {0};
  EXPECT_EQ(cudaSetValidDevices(devices, -1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
}

// A new host thread uses the list's first device (every device works), for its current device
// and its allocations; a len of 0 goes back to the default list, whose first device is 0.
TEST_F(valid_devices, a_new_thread_uses_the_first_device_of_the_list) {
  if (count_ < 2) GTEST_SKIP() << "needs two devices";
  int list[] = {count_ - 1, 0};
  SIM_TEST_TRY(cudaSetValidDevices(list, 2));
  int current = -1;
  int allocated_on = -1;
  device_of_a_new_thread(current, allocated_on);
  EXPECT_EQ(current, count_ - 1);
  EXPECT_EQ(allocated_on, count_ - 1);

  SIM_TEST_TRY(cudaSetValidDevices(nullptr, 0));
  device_of_a_new_thread(current, allocated_on);
  EXPECT_EQ(current, 0);
  EXPECT_EQ(allocated_on, 0);
}

// A thread that chose its device with cudaSetDevice keeps it.
TEST_F(valid_devices, a_thread_that_chose_its_device_keeps_it) {
  if (count_ < 2) GTEST_SKIP() << "needs two devices";
  int kept = -1;
  std::thread{[this, &kept] {
    SIM_TEST_EXPECT_SUCCESS(cudaSetDevice(0));
    int list[] = {count_ - 1};
    SIM_TEST_EXPECT_SUCCESS(cudaSetValidDevices(list, 1));
    SIM_TEST_EXPECT_SUCCESS(cudaGetDevice(&kept));
  }}.join();
  EXPECT_EQ(kept, 0);
}
