// Launches of a kernel named by its address, as cuda_runtime_api.h documents them:
// cudaLaunchKernelExC (a cudaLaunchConfig_t with attributes) and cudaLaunchCooperativeKernel
// (a grid whose blocks must all be resident at once). Each test checks that the kernel ran with
// the grid, block, dynamic shared memory and arguments it was given.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

#include "sim_test.hpp"

namespace {

// Every thread writes `tag` plus the linear index of the thread its block mirrors it with, read
// through dynamic shared memory of one int per thread; thread 0 of the first block records the
// grid and block dimensions.
__global__ void record_launch(int* out, unsigned* dims, int tag) {
  extern __shared__ int mirrored[];
  unsigned const threads = blockDim.x * blockDim.y * blockDim.z;
  unsigned const thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  unsigned const block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  mirrored[thread] = tag + static_cast<int>(thread);
  __syncthreads();
  out[block * threads + thread] = mirrored[threads - 1 - thread];
  if (block == 0 && thread == 0) {
    dims[0] = gridDim.x;
    dims[1] = gridDim.y;
    dims[2] = gridDim.z;
    dims[3] = blockDim.x;
    dims[4] = blockDim.y;
    dims[5] = blockDim.z;
  }
}

void const* recorder() {
  return reinterpret_cast<void const*>(&record_launch);
}

class kernel_launch_api : public sim_testing::gpu_test {
 protected:
  static constexpr std::size_t capacity = std::size_t{1} << 16;  // ints of out_

  void SetUp() override {
    gpu_test::SetUp();
    if (IsSkipped()) return;
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    SIM_TEST_TRY(cudaMalloc(&out_, capacity * sizeof(int)));
    SIM_TEST_TRY(cudaMalloc(&dims_, 6 * sizeof(unsigned)));
    // Known to the simulated device from this launch (a kernel runs there from its source).
    record_launch<<<1, 1, sizeof(int), stream_>>>(out_, dims_, 0);
    SIM_TEST_TRY(cudaStreamSynchronize(stream_));
    clear();
  }
  void TearDown() override {
    if (stream_ == nullptr) return;
    SIM_TEST_EXPECT_SUCCESS(cudaDeviceSynchronize());
    SIM_TEST_EXPECT_SUCCESS(cudaFree(out_));
    SIM_TEST_EXPECT_SUCCESS(cudaFree(dims_));
    SIM_TEST_EXPECT_SUCCESS(cudaStreamDestroy(stream_));
  }
  void clear() {
    SIM_TEST_TRY(cudaMemsetAsync(out_, 0xFF, capacity * sizeof(int), stream_));
    SIM_TEST_TRY(cudaMemsetAsync(dims_, 0, 6 * sizeof(unsigned), stream_));
    SIM_TEST_TRY(cudaStreamSynchronize(stream_));
  }
  // What record_launch wrote for `grid` x `block` with `tag`, checked element by element.
  void expect_recorded(dim3 grid, dim3 block, int tag) {
    std::vector<unsigned> const dims = sim_testing::copy_to_host(dims_, 6, stream_);
    EXPECT_EQ(dims, (std::vector<unsigned>{grid.x, grid.y, grid.z, block.x, block.y, block.z}));
    unsigned const threads = block.x * block.y * block.z;
    std::size_t const total = std::size_t{grid.x} * grid.y * grid.z * threads;
    ASSERT_LT(total, capacity);
    std::vector<int> const out = sim_testing::copy_to_host(out_, total + 1, stream_);
    for (std::size_t i = 0; i < total; ++i) {
      auto const thread = static_cast<unsigned>(i % threads);
      ASSERT_EQ(out[i], tag + static_cast<int>(threads - 1 - thread)) << "element " << i;
    }
    EXPECT_EQ(out[total], -1) << "a thread past the grid wrote";
  }
  // The largest grid of `threads`-thread blocks with `shared` bytes that is co-resident:
  // "the maximum number of blocks per multiprocessor as returned by
  // cudaOccupancyMaxActiveBlocksPerMultiprocessor ... times the number of multiprocessors"
  // (cudaLaunchCooperativeKernel).
  static unsigned co_resident_blocks(int threads, std::size_t shared) {
    int per_sm = 0;
    SIM_TEST_TRY(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, recorder(), threads, shared));
    int device = 0;
    SIM_TEST_TRY(cudaGetDevice(&device));
    int sms = 0;
    SIM_TEST_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    return static_cast<unsigned>(per_sm * sms);
  }

  cudaStream_t stream_{};
  int* out_{};
  unsigned* dims_{};
};

cudaLaunchConfig_t config_of(dim3 grid, dim3 block, std::size_t shared, cudaStream_t stream,
                             cudaLaunchAttribute* attrs, unsigned count) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared;
  config.stream = stream;
  config.attrs = attrs;
  config.numAttrs = count;
  return config;
}

}  // namespace

// cudaLaunchKernelExC: "Invokes the kernel func on config->gridDim ... grid of blocks. Each block
// contains config->blockDim ... threads. config->dynamicSmemBytes sets the amount of dynamic
// shared memory"; the arguments are copied from args[0..N-1].
TEST_F(kernel_launch_api, launch_ex_runs_the_kernel_with_its_configuration_and_arguments) {
  dim3 const grid{3, 2, 2};
  dim3 const block{4, 2, 3};
  int tag = 1000;
  void* args[] = {&out_, &dims_, &tag};
  cudaLaunchConfig_t const config = config_of(grid, block, 24 * sizeof(int), stream_, nullptr, 0);
  SIM_TEST_TRY(cudaLaunchKernelExC(&config, recorder(), args));
  tag = 0;  // "the actual parameter will be copied" at the call
  expect_recorded(grid, block, 1000);
}

// Attributes that change no result: an ignored entry ("Ignored entry, for convenient
// composition"), a priority, and programmatic stream serialization (the launch may overlap the
// previous kernel; it is still ordered after the stream's earlier memset here, which it reads
// nothing of, and the results are the kernel's).
TEST_F(kernel_launch_api, launch_ex_accepts_ignore_priority_and_programmatic_serialization) {
  int least = 0;
  int greatest = 0;
  SIM_TEST_TRY(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaLaunchAttribute attrs[3]{};
  attrs[0].id = cudaLaunchAttributeIgnore;
  attrs[1].id = cudaLaunchAttributePriority;
  attrs[1].val.priority = greatest;
  attrs[2].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[2].val.programmaticStreamSerializationAllowed = 1;
  dim3 const grid{5, 1, 1};
  dim3 const block{64, 1, 1};
  int tag = 7;
  void* args[] = {&out_, &dims_, &tag};
  cudaLaunchConfig_t const config = config_of(grid, block, 64 * sizeof(int), stream_, attrs, 3);
  SIM_TEST_TRY(cudaLaunchKernelExC(&config, recorder(), args));
  expect_recorded(grid, block, 7);
}

// A null configuration, or attributes counted but not given, is cudaErrorInvalidValue; a launch
// the device cannot run (too many threads in a block) fails and runs nothing.
TEST_F(kernel_launch_api, launch_ex_refuses_a_missing_configuration_or_attribute_array) {
  int tag = 1;
  void* args[] = {&out_, &dims_, &tag};
  EXPECT_EQ(cudaLaunchKernelExC(nullptr, recorder(), args), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  cudaLaunchConfig_t const missing = config_of(dim3{1}, dim3{1}, 0, stream_, nullptr, 1);
  EXPECT_EQ(cudaLaunchKernelExC(&missing, recorder(), args), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  cudaLaunchConfig_t const too_large = config_of(dim3{1}, dim3{2048}, 0, stream_, nullptr, 0);
  EXPECT_NE(cudaLaunchKernelExC(&too_large, recorder(), args), cudaSuccess);
  static_cast<void>(cudaGetLastError());
  std::vector<unsigned> const dims = sim_testing::copy_to_host(dims_, 6, stream_);
  EXPECT_EQ(dims, std::vector<unsigned>(6, 0U)) << "a refused launch ran";
}

// A priority outside cudaDeviceGetStreamPriorityRange: the header does not say; the simulated
// device refuses it (cudaErrorInvalidValue), as it does on a stream or a kernel node, and runs
// nothing. A GPU run answers whether a GPU clamps it instead (as cudaStreamCreateWithPriority
// does).
TEST_F(kernel_launch_api, probe_a_launch_priority_outside_the_range_is_invalid_value) {
  int least = 0;
  int greatest = 0;
  SIM_TEST_TRY(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaLaunchAttribute priority{};
  priority.id = cudaLaunchAttributePriority;
  priority.val.priority = least + 1;
  int tag = 1;
  void* args[] = {&out_, &dims_, &tag};
  cudaLaunchConfig_t const config = config_of(dim3{1}, dim3{1}, sizeof(int), stream_, &priority, 1);
  EXPECT_EQ(cudaLaunchKernelExC(&config, recorder(), args), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  std::vector<unsigned> const dims = sim_testing::copy_to_host(dims_, 6, stream_);
  EXPECT_EQ(dims, std::vector<unsigned>(6, 0U)) << "a refused launch ran";
}

// cudaLaunchCooperativeKernel: the largest co-resident grid runs, with its arguments and dynamic
// shared memory; one block more is cudaErrorCooperativeLaunchTooLarge and runs nothing.
TEST_F(kernel_launch_api, a_cooperative_launch_runs_a_co_resident_grid_and_refuses_a_larger_one) {
  int supported = 0;
  int device = 0;
  SIM_TEST_TRY(cudaGetDevice(&device));
  SIM_TEST_TRY(cudaDeviceGetAttribute(&supported, cudaDevAttrCooperativeLaunch, device));
  ASSERT_EQ(supported, 1);
  // 48 KiB of dynamic shared memory a block keeps the co-resident grid small.
  std::size_t const shared = std::size_t{48} << 10;
  unsigned const most = co_resident_blocks(32, shared);
  ASSERT_GT(most, 0U);
  ASSERT_LT(std::size_t{most + 1} * 32, capacity);
  int tag = 50;
  void* args[] = {&out_, &dims_, &tag};
  SIM_TEST_TRY(
      cudaLaunchCooperativeKernel(recorder(), dim3{most}, dim3{32}, args, shared, stream_));
  expect_recorded(dim3{most}, dim3{32}, 50);

  clear();
  EXPECT_EQ(
      cudaLaunchCooperativeKernel(recorder(), dim3{most + 1}, dim3{32}, args, shared, stream_),
      cudaErrorCooperativeLaunchTooLarge);
  EXPECT_EQ(cudaGetLastError(), cudaErrorCooperativeLaunchTooLarge);
  std::vector<unsigned> const dims = sim_testing::copy_to_host(dims_, 6, stream_);
  EXPECT_EQ(dims, std::vector<unsigned>(6, 0U)) << "a refused cooperative launch ran";
}

// cudaLaunchAttributeCooperative on cudaLaunchKernelExC is the same launch: a co-resident grid
// runs, a larger one is cudaErrorCooperativeLaunchTooLarge.
TEST_F(kernel_launch_api, the_cooperative_attribute_checks_the_grid_as_a_cooperative_launch) {
  std::size_t const shared = std::size_t{48} << 10;
  unsigned const most = co_resident_blocks(64, shared);
  cudaLaunchAttribute cooperative{};
  cooperative.id = cudaLaunchAttributeCooperative;
  cooperative.val.cooperative = 1;
  int tag = 3;
  void* args[] = {&out_, &dims_, &tag};
  cudaLaunchConfig_t const larger =
      config_of(dim3{most + 1}, dim3{64}, shared, stream_, &cooperative, 1);
  EXPECT_EQ(cudaLaunchKernelExC(&larger, recorder(), args), cudaErrorCooperativeLaunchTooLarge);
  EXPECT_EQ(cudaGetLastError(), cudaErrorCooperativeLaunchTooLarge);
  cudaLaunchConfig_t const fits = config_of(dim3{2}, dim3{64}, shared, stream_, &cooperative, 1);
  SIM_TEST_TRY(cudaLaunchKernelExC(&fits, recorder(), args));
  expect_recorded(dim3{2}, dim3{64}, 3);
}

// A launch into a capturing stream is captured, not run: it becomes a kernel node with the
// launch's function, grid, block and dynamic shared memory, and the graph's launch runs it.
TEST_F(kernel_launch_api, a_launch_under_stream_capture_becomes_a_kernel_node) {
  dim3 const grid{2, 1, 1};
  dim3 const block{8, 4, 1};
  int tag = 40;
  void* args[] = {&out_, &dims_, &tag};
  cudaGraph_t graph{};
  SIM_TEST_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  cudaLaunchConfig_t const config = config_of(grid, block, 32 * sizeof(int), stream_, nullptr, 0);
  cudaError_t const launched = cudaLaunchKernelExC(&config, recorder(), args);
  cudaError_t const cooperative =
      cudaLaunchCooperativeKernel(recorder(), grid, block, args, 32 * sizeof(int), stream_);
  SIM_TEST_TRY(cudaStreamEndCapture(stream_, &graph));
  ASSERT_EQ(launched, cudaSuccess);
  ASSERT_EQ(cooperative, cudaSuccess);
  std::vector<unsigned> const dims = sim_testing::copy_to_host(dims_, 6, stream_);
  EXPECT_EQ(dims, std::vector<unsigned>(6, 0U)) << "a captured launch ran";

  std::size_t count = 0;
  SIM_TEST_TRY(cudaGraphGetNodes(graph, nullptr, &count));
  ASSERT_EQ(count, 2U);
  std::vector<cudaGraphNode_t> nodes(count);
  SIM_TEST_TRY(cudaGraphGetNodes(graph, nodes.data(), &count));
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    SIM_TEST_TRY(cudaGraphNodeGetType(node, &type));
    EXPECT_EQ(type, cudaGraphNodeTypeKernel);
    cudaKernelNodeParams params{};
    SIM_TEST_TRY(cudaGraphKernelNodeGetParams(node, &params));
    EXPECT_EQ(params.gridDim.x, grid.x);
    EXPECT_EQ(params.blockDim.x, block.x);
    EXPECT_EQ(params.blockDim.y, block.y);
    EXPECT_EQ(params.sharedMemBytes, 32 * sizeof(int));
  }
  tag = 0;
  cudaGraphExec_t exec{};
  SIM_TEST_TRY(cudaGraphInstantiate(&exec, graph, 0));
  SIM_TEST_TRY(cudaGraphLaunch(exec, stream_));
  expect_recorded(grid, block, 40);
  SIM_TEST_TRY(cudaGraphExecDestroy(exec));
  SIM_TEST_TRY(cudaGraphDestroy(graph));
}

// cudaLaunchAttributePriority is "Valid for streams, graph nodes, launches": a captured launch's
// kernel node keeps the launch's priority.
TEST_F(kernel_launch_api, a_captured_launch_keeps_its_priority_on_its_kernel_node) {
  int least = 0;
  int greatest = 0;
  SIM_TEST_TRY(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaLaunchAttribute priority{};
  priority.id = cudaLaunchAttributePriority;
  priority.val.priority = greatest;
  int tag = 5;
  void* args[] = {&out_, &dims_, &tag};
  cudaLaunchConfig_t const config =
      config_of(dim3{1}, dim3{4}, 4 * sizeof(int), stream_, &priority, 1);
  cudaGraph_t graph{};
  SIM_TEST_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  cudaError_t const launched = cudaLaunchKernelExC(&config, recorder(), args);
  SIM_TEST_TRY(cudaStreamEndCapture(stream_, &graph));
  ASSERT_EQ(launched, cudaSuccess);
  std::size_t count = 1;
  cudaGraphNode_t node{};
  SIM_TEST_TRY(cudaGraphGetNodes(graph, &node, &count));
  ASSERT_EQ(count, 1U);
  cudaLaunchAttributeValue value{};
  SIM_TEST_TRY(cudaGraphKernelNodeGetAttribute(node, cudaLaunchAttributePriority, &value));
  EXPECT_EQ(value.priority, greatest);
  cudaGraphExec_t exec{};
  SIM_TEST_TRY(cudaGraphInstantiate(&exec, graph, 0));
  SIM_TEST_TRY(cudaGraphLaunch(exec, stream_));
  expect_recorded(dim3{1}, dim3{4}, 5);
  SIM_TEST_TRY(cudaGraphExecDestroy(exec));
  SIM_TEST_TRY(cudaGraphDestroy(graph));
}

// cudaGetKernel: "the device kernel corresponding to the entry function"; a cudaKernel_t may be
// passed where the runtime takes the entry function (cudaFuncGetName: "If func is not a device
// entry function, then it is assumed to be a cudaKernel_t"): it names the same kernel and
// launches it with cudaLaunchKernelExC.
TEST_F(kernel_launch_api, a_kernel_handle_names_and_launches_its_kernel) {
  cudaKernel_t kernel{};
  SIM_TEST_TRY(cudaGetKernel(&kernel, recorder()));
  ASSERT_NE(kernel, nullptr);
  cudaKernel_t again{};
  SIM_TEST_TRY(cudaGetKernel(&again, recorder()));
  EXPECT_EQ(again, kernel);
  char const* by_function = nullptr;
  char const* by_kernel = nullptr;
  SIM_TEST_TRY(cudaFuncGetName(&by_function, recorder()));
  SIM_TEST_TRY(cudaFuncGetName(&by_kernel, reinterpret_cast<void const*>(kernel)));
  ASSERT_NE(by_kernel, nullptr);
  EXPECT_STREQ(by_kernel, by_function);

  dim3 const grid{2, 1, 1};
  dim3 const block{16, 1, 1};
  int tag = 600;
  void* args[] = {&out_, &dims_, &tag};
  cudaLaunchConfig_t const config = config_of(grid, block, 16 * sizeof(int), stream_, nullptr, 0);
  SIM_TEST_TRY(cudaLaunchKernelExC(&config, reinterpret_cast<void const*>(kernel), args));
  expect_recorded(grid, block, 600);
}

// cudaGetFuncBySymbol: "Returns in functionPtr the device entry function corresponding to the
// symbol", the same function each time.
TEST_F(kernel_launch_api, the_function_of_a_symbol_is_one_function) {
  cudaFunction_t function{};
  SIM_TEST_TRY(cudaGetFuncBySymbol(&function, recorder()));
  ASSERT_NE(function, nullptr);
  cudaFunction_t again{};
  SIM_TEST_TRY(cudaGetFuncBySymbol(&again, recorder()));
  EXPECT_EQ(again, function);
}

// The headers list only cudaSuccess for cudaGetKernel and cudaGetFuncBySymbol: the simulated
// device refuses a null result (cudaErrorInvalidValue) and a null function
// (cudaErrorInvalidDeviceFunction); a GPU run answers what a GPU returns.
TEST_F(kernel_launch_api, probe_kernel_and_function_handles_refuse_null_pointers) {
  EXPECT_EQ(cudaGetKernel(nullptr, recorder()), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  cudaKernel_t kernel{};
  EXPECT_EQ(cudaGetKernel(&kernel, nullptr), cudaErrorInvalidDeviceFunction);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDeviceFunction);
  EXPECT_EQ(cudaGetFuncBySymbol(nullptr, recorder()), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  cudaFunction_t function{};
  EXPECT_EQ(cudaGetFuncBySymbol(&function, nullptr), cudaErrorInvalidDeviceFunction);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDeviceFunction);
}
