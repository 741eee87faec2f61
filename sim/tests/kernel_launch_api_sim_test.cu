// What the simulated device cannot do for a launch by address, and says so: a kernel no
// <<<...>>> launch has run (it knows a kernel from its first launch), launch attributes it does
// not model, and a grid-wide barrier in a cooperative launch (its blocks run one after another).

#include <cooperative_groups.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <graphstep/sim/race_report.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "sim_test.hpp"

namespace cg = cooperative_groups;

namespace {

__global__ void never_launched(int* value) {
  *value = 1;
}

__global__ void launched(int* value) {
  *value = 2;
}

__global__ void grid_barrier(int* out, int wait) {
  cg::grid_group grid = cg::this_grid();
  out[grid.thread_rank()] = 1;
  if (wait != 0) grid.sync();
  out[grid.thread_rank()] = 2;
}

class launch_by_address : public ::testing::Test {
 protected:
  void SetUp() override {
    SIM_TEST_TRY(cudaMalloc(&value_, sizeof(int)));
    launched<<<1, 1>>>(value_);
    SIM_TEST_TRY(cudaDeviceSynchronize());
  }
  void TearDown() override { SIM_TEST_EXPECT_SUCCESS(cudaFree(value_)); }

  int* value_{};
  void* arguments_[1] = {&value_};
};

// A cooperative launch of a kernel that waits at a grid-wide barrier: the blocks run one after
// another, so the barrier is a kernel fault (sticky), never a hang. Run in a child process.
void cooperative_grid_barrier_and_exit_with_the_error() {
  int* out = nullptr;
  if (cudaMalloc(&out, 64 * sizeof(int)) != cudaSuccess) std::exit(100);
  grid_barrier<<<1, 1>>>(out, 0);  // known to the simulated device from here
  if (cudaDeviceSynchronize() != cudaSuccess) std::exit(101);
  int wait = 1;
  void* args[] = {&out, &wait};
  if (cudaLaunchCooperativeKernel(reinterpret_cast<void const*>(&grid_barrier), dim3{2}, dim3{32},
                                  args, 0, nullptr) != cudaSuccess) {
    std::exit(102);
  }
  std::exit(cudaDeviceSynchronize() == cudaErrorLaunchFailure ? 0 : 1);
}

}  // namespace

TEST_F(launch_by_address, a_kernel_never_launched_is_an_invalid_device_function_and_said_so) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3{1};
  config.blockDim = dim3{1};
  auto const* func = reinterpret_cast<void const*>(&never_launched);
  testing::internal::CaptureStderr();
  EXPECT_EQ(cudaLaunchKernelExC(&config, func, arguments_), cudaErrorInvalidDeviceFunction);
  std::string said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("cudaLaunchKernelExC names function"), std::string::npos) << said;
  EXPECT_NE(said.find("knows a kernel from its first launch"), std::string::npos) << said;
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDeviceFunction);
  testing::internal::CaptureStderr();
  EXPECT_EQ(cudaLaunchCooperativeKernel(func, dim3{1}, dim3{1}, arguments_, 0, nullptr),
            cudaErrorInvalidDeviceFunction);
  said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("cudaLaunchCooperativeKernel names function"), std::string::npos) << said;
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDeviceFunction);
  testing::internal::CaptureStderr();
  EXPECT_EQ(cudaLaunchKernelExC(&config, nullptr, arguments_), cudaErrorInvalidDeviceFunction);
  static_cast<void>(testing::internal::GetCapturedStderr());
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDeviceFunction);
}

// Attributes that change how a grid launches in ways not modelled (a cluster shape, a memory
// synchronization domain, an event recorded part way) are cudaErrorNotSupported, named on
// stderr; an identifier no enumerator names is cudaErrorInvalidValue. Nothing runs.
TEST_F(launch_by_address, unmodelled_launch_attributes_are_refused_by_name) {
  SIM_TEST_TRY(cudaMemset(value_, 0, sizeof(int)));
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = 2;
  cluster.val.clusterDim.y = 1;
  cluster.val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3{2};
  config.blockDim = dim3{1};
  config.attrs = &cluster;
  config.numAttrs = 1;
  auto const* func = reinterpret_cast<void const*>(&launched);
  testing::internal::CaptureStderr();
  EXPECT_EQ(cudaLaunchKernelExC(&config, func, arguments_), cudaErrorNotSupported);
  std::string const said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("launch attribute cudaLaunchAttributeClusterDimension is not modelled"),
            std::string::npos)
      << said;
  EXPECT_EQ(cudaGetLastError(), cudaErrorNotSupported);
  cudaLaunchAttribute unknown{};
  // Stored as an integer, as a program built against a later header would store a new id.
  std::underlying_type_t<cudaLaunchAttributeID> const unknown_id = 999;
  std::memcpy(&unknown.id, &unknown_id, sizeof unknown_id);
  config.attrs = &unknown;
  EXPECT_EQ(cudaLaunchKernelExC(&config, func, arguments_), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  int value = -1;
  SIM_TEST_TRY(cudaMemcpy(&value, value_, sizeof value, cudaMemcpyDeviceToHost));
  EXPECT_EQ(value, 0);
}

// An unknown stream handle is cudaErrorInvalidResourceHandle, as for a <<<...>>> launch.
TEST_F(launch_by_address, a_destroyed_stream_is_an_invalid_resource_handle) {
  cudaStream_t stream{};
  SIM_TEST_TRY(cudaStreamCreate(&stream));
  SIM_TEST_TRY(cudaStreamDestroy(stream));
  EXPECT_EQ(cudaLaunchCooperativeKernel(reinterpret_cast<void const*>(&launched), dim3{1}, dim3{1},
                                        arguments_, 0, stream),
            cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
}

// The simulated device launches no thread block clusters (a cluster dimension is refused at a
// launch and by cudaFuncSetAttribute), so the cluster occupancy queries are refused with that
// reason rather than answered for launches that cannot happen.
TEST_F(launch_by_address, cluster_occupancy_is_refused_with_its_reason) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3{16};
  config.blockDim = dim3{128};
  auto const* func = reinterpret_cast<void const*>(&launched);
  int answer = -1;
  testing::internal::CaptureStderr();
  EXPECT_EQ(cudaOccupancyMaxActiveClusters(&answer, func, &config), cudaErrorNotSupported);
  EXPECT_EQ(cudaOccupancyMaxPotentialClusterSize(&answer, func, &config), cudaErrorNotSupported);
  std::string const said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("cudaOccupancyMaxActiveClusters is not modelled yet: the simulated device "
                      "launches no thread block clusters"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("cudaOccupancyMaxPotentialClusterSize is not modelled yet"),
            std::string::npos)
      << said;
  EXPECT_EQ(answer, -1);
  static_cast<void>(cudaGetLastError());
}

// A launch by address records its kernel's device-memory accesses as a <<<...>>> launch does: its
// write, unordered with a memset of the same bytes on another stream, is reported as a race.
TEST_F(launch_by_address, a_launch_by_address_is_seen_by_the_race_checker) {
  cudaStream_t a{};
  cudaStream_t b{};
  SIM_TEST_TRY(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  SIM_TEST_TRY(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  graphstep::sim::race_report const races;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3{1};
  config.blockDim = dim3{1};
  config.stream = a;
  SIM_TEST_TRY(cudaLaunchKernelExC(&config, reinterpret_cast<void const*>(&launched), arguments_));
  SIM_TEST_TRY(cudaMemsetAsync(value_, 0, sizeof(int), b));
  std::vector<std::string> const found = races.found();
  ASSERT_EQ(found.size(), 1U);
  EXPECT_NE(found[0].find("launched"), std::string::npos) << found[0];
  EXPECT_NE(found[0].find("not ordered before"), std::string::npos) << found[0];
  SIM_TEST_TRY(cudaDeviceSynchronize());
  SIM_TEST_TRY(cudaStreamDestroy(a));
  SIM_TEST_TRY(cudaStreamDestroy(b));
}

TEST(launch_by_address_barrier, a_grid_sync_in_a_cooperative_launch_is_a_kernel_fault) {
  EXPECT_EXIT(cooperative_grid_barrier_and_exit_with_the_error(), ::testing::ExitedWithCode(0),
              "grid_group::sync\\(\\) needs a cooperative launch \\(cudaLaunchCooperativeKernel\\) "
              "whose blocks run together");
}
