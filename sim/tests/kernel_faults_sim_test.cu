// What a GPU reports as a fault in a kernel, the simulated device reports too: the launch's
// error is sticky, every later call returns it, and the message names the kernel and the thread.
// Each case runs in a child process, since a sticky error ends the process's use of the device.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdlib>

namespace {

// Threads 0-15 wait at __syncthreads, threads 16-31 of the same warp wait for them at
// __syncwarp: running threads wait at barriers the others never reach, a deadlock on a GPU.
// (Threads that exit do not hold up a barrier: `if (threadIdx.x < 16) __syncthreads();` alone
// completes once the others have returned.)
__global__ void divergent_barrier(int* out) {
  if (threadIdx.x < 16) {
    __syncthreads();
  } else {
    __syncwarp();
  }
  out[threadIdx.x] = 1;
}

__global__ void trapping(int* out) {
  if (threadIdx.x == 3) __trap();
  out[threadIdx.x] = 1;
}

// The upper half of the warp returns, then lane 3 reads lane 20 by a shuffle: "If the target
// thread is inactive, the retrieved value is undefined" (Programming Guide, "Warp Shuffle
// Functions"), a fault here rather than a made-up value.
__global__ void shuffle_from_an_exited_lane(int* out) {
  if (threadIdx.x >= 16) return;
  int const source = threadIdx.x == 3 ? 20 : static_cast<int>(threadIdx.x);
  out[threadIdx.x] = __shfl_sync(0x0000FFFFU, static_cast<int>(threadIdx.x), source);
}

// Launched by name: the simulator names a kernel as its launch does.
void launch_and_exit_with_the_sticky_error(bool trap) {
  int* out = nullptr;
  if (cudaMalloc(&out, 64 * sizeof(int)) != cudaSuccess) std::exit(100);
  if (trap) {
    trapping<<<1, 64>>>(out);
  } else {
    divergent_barrier<<<1, 64>>>(out);
  }
  cudaError_t const synchronized = cudaDeviceSynchronize();
  cudaError_t const later = cudaMemset(out, 0, sizeof(int));
  std::exit(synchronized == cudaErrorLaunchFailure && later == cudaErrorLaunchFailure ? 0 : 1);
}

TEST(kernel_faults, a_barrier_only_some_threads_reach_is_a_sticky_launch_failure) {
  EXPECT_EXIT(launch_and_exit_with_the_sticky_error(false), ::testing::ExitedWithCode(0),
              "kernel divergent_barrier faulted: divergent_barrier block \\(0,0,0\\): a barrier "
              "that can never complete.*threads at __syncthreads: \\[0 1 2 .*at a warp-level "
              "intrinsic: \\[16 17 ");
}

void shuffle_from_an_exited_lane_and_exit() {
  int* out = nullptr;
  if (cudaMalloc(&out, 32 * sizeof(int)) != cudaSuccess) std::exit(100);
  shuffle_from_an_exited_lane<<<1, 32>>>(out);
  std::exit(cudaDeviceSynchronize() == cudaErrorLaunchFailure ? 0 : 1);
}

TEST(kernel_faults, a_shuffle_reading_an_exited_lane_names_the_reading_thread) {
  EXPECT_EXIT(shuffle_from_an_exited_lane_and_exit(), ::testing::ExitedWithCode(0),
              "shuffle_from_an_exited_lane: thread \\(3,0,0\\) of block \\(0,0,0\\): a warp "
              "shuffle read the value of a lane that has exited");
}

TEST(kernel_faults, a_trap_names_the_kernel_and_the_thread) {
  EXPECT_EXIT(launch_and_exit_with_the_sticky_error(true), ::testing::ExitedWithCode(0),
              "kernel trapping faulted: trapping: thread \\(3,0,0\\) of block \\(0,0,0\\): "
              "__trap\\(\\) called");
}

// Memory accesses compute-sanitizer's memcheck reports on a GPU end the process here, with the
// kernel, the access and the allocation named.
__global__ void write_at(float* data, int index) {
  if (threadIdx.x == 0) data[index] = 1.0F;
}

__global__ void read_at(float const* data, int index, float* out) {
  if (threadIdx.x == 0) *out = data[index];
}

constexpr int elements = 1000;  // 4000 bytes: 96 bytes short of the 256-byte alignment

void write_past_the_end(int index) {
  float* data = nullptr;
  if (cudaMalloc(&data, elements * sizeof(float)) != cudaSuccess) std::exit(100);
  write_at<<<1, 32>>>(data, index);
  std::exit(cudaDeviceSynchronize() == cudaSuccess ? 0 : 1);
}

void read_after_free() {
  float* data = nullptr;
  float* out = nullptr;
  if (cudaMalloc(&data, elements * sizeof(float)) != cudaSuccess) std::exit(100);
  if (cudaMalloc(&out, sizeof(float)) != cudaSuccess) std::exit(100);
  if (cudaFree(data) != cudaSuccess) std::exit(101);
  read_at<<<1, 32>>>(data, 0, out);
  std::exit(cudaDeviceSynchronize() == cudaSuccess ? 0 : 1);
}

void host_read_after_free() {
  float* pinned = nullptr;
  if (cudaMallocHost(&pinned, elements * sizeof(float)) != cudaSuccess) std::exit(100);
  if (cudaFreeHost(pinned) != cudaSuccess) std::exit(101);
  volatile float const value = pinned[elements / 2];
  static_cast<void>(value);
  std::exit(0);
}

void host_read_of_device_memory() {
  float* data = nullptr;
  if (cudaMalloc(&data, elements * sizeof(float)) != cudaSuccess) std::exit(100);
  if (cudaMemset(data, 0, elements * sizeof(float)) != cudaSuccess) std::exit(101);
  volatile float const value = data[10];
  static_cast<void>(value);
  std::exit(0);
}

void read_in_host_function(void* data) {
  volatile float const value = static_cast<float const*>(data)[0];
  static_cast<void>(value);
}

void host_function_reading_device_memory() {
  float* data = nullptr;
  if (cudaMalloc(&data, elements * sizeof(float)) != cudaSuccess) std::exit(100);
  if (cudaLaunchHostFunc(nullptr, read_in_host_function, data) != cudaSuccess) std::exit(101);
  std::exit(cudaDeviceSynchronize() == cudaSuccess ? 0 : 1);
}

// One graph launch is one stretch of device work: a kernel writes the buffer, then a host node
// of the same launch reads it. The host node is host code all the same: the memory the kernel
// opened is closed to it.
void host_node_reading_what_a_kernel_of_its_graph_wrote() {
  float* data = nullptr;
  cudaStream_t stream = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (cudaMalloc(&data, elements * sizeof(float)) != cudaSuccess) std::exit(100);
  if (cudaStreamCreate(&stream) != cudaSuccess) std::exit(101);
  if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) != cudaSuccess) std::exit(102);
  write_at<<<1, 32, 0, stream>>>(data, 5);
  if (cudaLaunchHostFunc(stream, read_in_host_function, data) != cudaSuccess) std::exit(103);
  if (cudaStreamEndCapture(stream, &graph) != cudaSuccess) std::exit(104);
  if (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) std::exit(105);
  if (cudaGraphLaunch(exec, stream) != cudaSuccess) std::exit(106);
  std::exit(cudaStreamSynchronize(stream) == cudaSuccess ? 0 : 1);
}

// A kernel given a null pointer: no allocation made before it, so nothing but the launch has
// prepared the simulator's fault handler.
void write_through_a_null_pointer() {
  write_at<<<1, 32>>>(nullptr, 3);
  std::exit(cudaDeviceSynchronize() == cudaSuccess ? 0 : 1);
}

TEST(kernel_faults, the_last_element_is_in_bounds) {
  EXPECT_EXIT(write_past_the_end(elements - 1), ::testing::ExitedWithCode(0), "");
}

TEST(kernel_faults, a_write_past_the_end_of_an_allocation_names_the_kernel_and_the_offset) {
  // 4096 bytes in: past the end of the 4000-byte allocation and of its alignment slack.
  EXPECT_DEATH(write_past_the_end(1024),
               "kernel write_at: out-of-bounds write at 0x[0-9a-f]+, offset 4096 in the "
               "4000-byte device allocation at 0x[0-9a-f]+");
}

TEST(kernel_faults, a_null_pointer_dereference_names_the_kernel) {
  EXPECT_DEATH(write_through_a_null_pointer(),
               "kernel write_at: write at 0xc, 12 bytes past a null pointer");
}

TEST(kernel_faults, a_read_of_freed_memory_names_the_kernel_and_the_freed_allocation) {
  EXPECT_DEATH(read_after_free(),
               "kernel read_at: read at 0x[0-9a-f]+ after free: inside the freed 4000-byte "
               "device allocation");
}

TEST(kernel_faults, host_code_reading_freed_pinned_memory_is_named) {
  EXPECT_DEATH(host_read_after_free(),
               "host code: read at 0x[0-9a-f]+ after free: inside the freed 4000-byte pinned "
               "host allocation");
}

TEST(kernel_faults, host_code_reading_device_memory_is_named) {
  EXPECT_DEATH(host_read_of_device_memory(),
               "host code: read of device memory at 0x[0-9a-f]+, offset 40 in the 4000-byte "
               "device allocation at 0x[0-9a-f]+: device memory is not accessible from the host");
}

TEST(kernel_faults, a_host_function_reading_device_memory_is_named) {
  EXPECT_DEATH(host_function_reading_device_memory(),
               "host code: read of device memory at 0x[0-9a-f]+, offset 0 in the 4000-byte "
               "device allocation");
}

TEST(kernel_faults, a_host_node_reading_memory_a_kernel_of_its_launch_wrote_is_named) {
  EXPECT_DEATH(host_node_reading_what_a_kernel_of_its_graph_wrote(),
               "host code: read of device memory at 0x[0-9a-f]+, offset 0 in the 4000-byte "
               "device allocation");
}

}  // namespace

// A kernel reaches another device's cudaMalloc memory only once peer access is enabled from its
// device (cudaDeviceEnablePeerAccess), as on a GPU.
void write_from_device_1_into_memory_of_device_0(bool enable_peer_access) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count < 2) std::exit(0);
  float* data = nullptr;
  if (cudaSetDevice(0) != cudaSuccess || cudaMalloc(&data, elements * sizeof(float)) != cudaSuccess)
    std::exit(100);
  if (cudaSetDevice(1) != cudaSuccess) std::exit(101);
  if (enable_peer_access && cudaDeviceEnablePeerAccess(0, 0) != cudaSuccess) std::exit(102);
  write_at<<<1, 32>>>(data, 10);
  std::exit(cudaDeviceSynchronize() == cudaSuccess ? 0 : 1);
}

// With fewer than two simulated devices (GRAPHSTEP_SIM_DEVICES; the sim test preset sets 2)
// these tests are skipped, not passed.
bool two_devices() {
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess && devices >= 2;
}

TEST(kernel_faults, a_kernel_on_another_device_without_peer_access_is_named) {
  if (!two_devices()) GTEST_SKIP() << "needs two simulated devices: GRAPHSTEP_SIM_DEVICES=2";
  EXPECT_DEATH(write_from_device_1_into_memory_of_device_0(false),
               "kernel write_at on device 1: write of memory of device 0 at 0x[0-9a-f]+, offset "
               "40 in the 4000-byte device allocation at 0x[0-9a-f]+, which device 1 may not "
               "access: enable peer access");
}

TEST(kernel_faults, peer_access_lets_a_kernel_reach_another_devices_memory) {
  if (!two_devices()) GTEST_SKIP() << "needs two simulated devices: GRAPHSTEP_SIM_DEVICES=2";
  EXPECT_EXIT(write_from_device_1_into_memory_of_device_0(true), ::testing::ExitedWithCode(0), "");
}

// Pool memory follows the pool's access, not peer access: "memory pool allocation accessibility
// does not follow cudaDeviceEnablePeerAccess" (CUDA Programming Guide, "Stream Ordered Memory
// Allocator"); cudaMemPoolSetAccess grants it.
void write_from_device_1_into_pool_memory_of_device_0(bool grant_pool_access) {
  cudaMemPoolProps properties{};
  properties.allocType = cudaMemAllocationTypePinned;
  properties.location = cudaMemLocation{cudaMemLocationTypeDevice, 0};
  cudaMemPool_t pool{};
  float* data = nullptr;
  if (cudaSetDevice(0) != cudaSuccess || cudaMemPoolCreate(&pool, &properties) != cudaSuccess ||
      cudaMallocFromPoolAsync(reinterpret_cast<void**>(&data), elements * sizeof(float), pool,
                              cudaStreamLegacy) != cudaSuccess) {
    std::exit(100);
  }
  if (grant_pool_access) {
    cudaMemAccessDesc const grant{cudaMemLocation{cudaMemLocationTypeDevice, 1},
                                  cudaMemAccessFlagsProtReadWrite};
    if (cudaMemPoolSetAccess(pool, &grant, 1) != cudaSuccess) std::exit(101);
  }
  if (cudaSetDevice(1) != cudaSuccess || cudaDeviceEnablePeerAccess(0, 0) != cudaSuccess) {
    std::exit(102);
  }
  write_at<<<1, 32>>>(data, 10);
  std::exit(cudaDeviceSynchronize() == cudaSuccess ? 0 : 1);
}

TEST(kernel_faults, a_kernel_on_another_device_without_pool_access_is_named) {
  if (!two_devices()) GTEST_SKIP() << "needs two simulated devices: GRAPHSTEP_SIM_DEVICES=2";
  EXPECT_DEATH(write_from_device_1_into_pool_memory_of_device_0(false),
               "kernel write_at on device 1: write of memory of device 0 at 0x[0-9a-f]+, offset "
               "40 in the 4000-byte device allocation at 0x[0-9a-f]+, which device 1 may not "
               "access: grant it to the pool with cudaMemPoolSetAccess");
}

TEST(kernel_faults, pool_access_lets_a_kernel_reach_another_devices_pool_memory) {
  if (!two_devices()) GTEST_SKIP() << "needs two simulated devices: GRAPHSTEP_SIM_DEVICES=2";
  EXPECT_EXIT(write_from_device_1_into_pool_memory_of_device_0(true),
              ::testing::ExitedWithCode(0), "");
}
