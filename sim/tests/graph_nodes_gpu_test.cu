// Graphs built node by node from parameters: kernel nodes (cudaGraphAddKernelNode, their
// parameters and attributes), memcpy nodes (1-D and cudaMemcpy3DParms between pitched pointers)
// and memset nodes, each changed in the graph and in an executable. On the simulated device they
// check its model against cuda_runtime_api.h; on a GPU the same tests check the tests.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

#include "sim_test.hpp"

namespace {

__global__ void add_to(int* values, int count, int amount) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < count) values[i] += amount;
}

__global__ void scale(int* values, int count, int factor) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < count) values[i] *= factor;
}

class graph_nodes : public sim_testing::gpu_test {
 protected:
  static constexpr int count = 64;
  static constexpr std::size_t bytes = count * sizeof(int);

  void SetUp() override {
    gpu_test::SetUp();
    if (IsSkipped()) return;
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    SIM_TEST_TRY(cudaMalloc(&a_, bytes));
    SIM_TEST_TRY(cudaMalloc(&b_, bytes));
    SIM_TEST_TRY(cudaMemset(a_, 0, bytes));
    SIM_TEST_TRY(cudaMemset(b_, 0, bytes));
    // cudaMemset runs on the legacy stream, which a non-blocking stream does not wait for.
    SIM_TEST_TRY(cudaDeviceSynchronize());
    // A kernel node names its function by address; the simulated device knows a kernel from its
    // first launch, so each is launched once (harmless on a GPU).
    add_to<<<1, count, 0, stream_>>>(a_, count, 0);
    scale<<<1, count, 0, stream_>>>(a_, count, 1);
    SIM_TEST_TRY(cudaDeviceSynchronize());
    SIM_TEST_TRY(cudaGraphCreate(&graph_, 0));
  }
  void TearDown() override {
    if (stream_ == nullptr) return;
    SIM_TEST_EXPECT_SUCCESS(cudaDeviceSynchronize());
    for (cudaGraphExec_t exec : execs_) SIM_TEST_EXPECT_SUCCESS(cudaGraphExecDestroy(exec));
    if (graph_ != nullptr) SIM_TEST_EXPECT_SUCCESS(cudaGraphDestroy(graph_));
    SIM_TEST_EXPECT_SUCCESS(cudaFree(a_));
    SIM_TEST_EXPECT_SUCCESS(cudaFree(b_));
    SIM_TEST_EXPECT_SUCCESS(cudaStreamDestroy(stream_));
  }

  cudaGraphExec_t instantiate() {
    cudaGraphExec_t exec{};
    SIM_TEST_TRY(cudaGraphInstantiate(&exec, graph_, 0));
    execs_.push_back(exec);
    return exec;
  }
  std::vector<int> launch(cudaGraphExec_t exec, int const* read) {
    SIM_TEST_TRY(cudaGraphLaunch(exec, stream_));
    return sim_testing::copy_to_host(read, count, stream_);
  }
  cudaGraphNode_t add_kernel(void* func, int* values, int amount,
                             cudaGraphNode_t const* dependencies = nullptr,
                             std::size_t dependency_count = 0) {
    int n = count;
    void* arguments[] = {&values, &n, &amount};
    cudaKernelNodeParams params{};
    params.func = func;
    params.gridDim = dim3{1};
    params.blockDim = dim3{count};
    params.kernelParams = arguments;
    cudaGraphNode_t node{};
    SIM_TEST_TRY(cudaGraphAddKernelNode(&node, graph_, dependencies, dependency_count, &params));
    // "The kernelParams or extra array, as well as the argument values it points to, are copied
    // during this call": changing them now changes nothing.
    amount = -1000;
    values = nullptr;
    return node;
  }
  static void* add_function() { return reinterpret_cast<void*>(&add_to); }
  static void* scale_function() { return reinterpret_cast<void*>(&scale); }

  cudaStream_t stream_{};
  int* a_{};
  int* b_{};
  cudaGraph_t graph_{};
  std::vector<cudaGraphExec_t> execs_;
};

}  // namespace

TEST_F(graph_nodes, kernel_memset_and_memcpy_nodes_run_in_the_order_of_their_edges) {
  cudaMemsetParams memset{};
  memset.dst = a_;
  memset.value = 3;
  memset.elementSize = sizeof(int);
  memset.width = count;
  memset.height = 1;
  cudaGraphNode_t set{};
  ASSERT_EQ(cudaGraphAddMemsetNode(&set, graph_, nullptr, 0, &memset), cudaSuccess);
  cudaGraphNode_t const add = add_kernel(add_function(), a_, 4, &set, 1);
  cudaGraphNode_t const times = add_kernel(scale_function(), a_, 10, &add, 1);
  cudaGraphNode_t copy{};
  ASSERT_EQ(cudaGraphAddMemcpyNode1D(&copy, graph_, &times, 1, b_, a_, bytes, cudaMemcpyDefault),
            cudaSuccess);
  cudaGraphExec_t const exec = instantiate();
  EXPECT_EQ(launch(exec, b_), std::vector<int>(count, 70));  // (3 + 4) * 10
  EXPECT_EQ(launch(exec, b_), std::vector<int>(count, 70));  // the memset starts it over
  cudaGraphNodeType type{};
  ASSERT_EQ(cudaGraphNodeGetType(copy, &type), cudaSuccess);
  EXPECT_EQ(type, cudaGraphNodeTypeMemcpy);
}

// A memset node writes its value in elements of 1, 2 or 4 bytes (the low bytes, little-endian),
// `width` elements on each of `height` rows `pitch` bytes apart, and nothing between the rows.
TEST_F(graph_nodes, memset_nodes_fill_each_row_in_elements_of_their_size_and_leave_the_pitch) {
  constexpr std::size_t pitch = 64;
  constexpr std::size_t rows = 3;
  constexpr std::size_t row_bytes = 40;
  static_assert(pitch * rows <= bytes);
  for (unsigned const element : {1U, 2U, 4U}) {
    unsigned const value = element == 1 ? 0x5AU : element == 2 ? 0x1234U : 0x12345678U;
    SIM_TEST_TRY(cudaMemsetAsync(a_, 0xAB, bytes, stream_));
    cudaGraph_t graph{};
    SIM_TEST_TRY(cudaGraphCreate(&graph, 0));
    cudaMemsetParams memset{};
    memset.dst = a_;
    memset.value = value;
    memset.elementSize = element;
    memset.width = row_bytes / element;
    memset.height = rows;
    memset.pitch = pitch;
    cudaGraphNode_t node{};
    ASSERT_EQ(cudaGraphAddMemsetNode(&node, graph, nullptr, 0, &memset), cudaSuccess);
    cudaGraphExec_t exec{};
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    SIM_TEST_TRY(cudaGraphLaunch(exec, stream_));
    std::vector<unsigned char> const got =
        sim_testing::copy_to_host(reinterpret_cast<unsigned char const*>(a_), bytes, stream_);
    SIM_TEST_EXPECT_SUCCESS(cudaGraphExecDestroy(exec));
    SIM_TEST_EXPECT_SUCCESS(cudaGraphDestroy(graph));
    for (std::size_t i = 0; i < bytes; ++i) {
      bool const written = i < pitch * rows && i % pitch < row_bytes;
      unsigned const expected = written ? (value >> (8U * (i % pitch % element))) & 0xFFU : 0xABU;
      ASSERT_EQ(got[i], expected) << "byte " << i << " of a memset of " << element
                                  << "-byte elements";
    }
  }
}

TEST_F(graph_nodes, a_kernel_nodes_parameters_read_back_and_change_for_later_instantiations) {
  cudaGraphNode_t const node = add_kernel(add_function(), a_, 5);
  cudaGraphExec_t const before = instantiate();
  cudaKernelNodeParams read{};
  ASSERT_EQ(cudaGraphKernelNodeGetParams(node, &read), cudaSuccess);
  EXPECT_EQ(read.func, add_function());
  EXPECT_EQ(read.blockDim.x, static_cast<unsigned>(count));
  ASSERT_NE(read.kernelParams, nullptr);
  EXPECT_EQ(*static_cast<int**>(read.kernelParams[0]), a_);
  EXPECT_EQ(*static_cast<int*>(read.kernelParams[2]), 5);
  // Another function and other arguments: the graph changes, the executable made before not.
  int* values = b_;
  int n = count;
  int factor = 0;
  void* arguments[] = {&values, &n, &factor};
  cudaKernelNodeParams next = read;
  next.func = scale_function();
  next.kernelParams = arguments;
  ASSERT_EQ(cudaGraphKernelNodeSetParams(node, &next), cudaSuccess);
  SIM_TEST_TRY(cudaMemset(b_, 1, bytes));
  SIM_TEST_TRY(cudaDeviceSynchronize());
  EXPECT_EQ(launch(before, a_), std::vector<int>(count, 5));
  EXPECT_EQ(launch(instantiate(), b_), std::vector<int>(count, 0));
  ASSERT_EQ(cudaGraphKernelNodeGetParams(node, &read), cudaSuccess);
  EXPECT_EQ(read.func, scale_function());
}

TEST_F(graph_nodes, bad_kernel_node_parameters_are_refused) {
  int n = count;
  int amount = 1;
  void* arguments[] = {&a_, &n, &amount};
  cudaKernelNodeParams params{};
  params.func = add_function();
  params.gridDim = dim3{1};
  params.blockDim = dim3{count};
  params.kernelParams = arguments;
  cudaGraphNode_t node{};
  EXPECT_EQ(cudaGraphAddKernelNode(&node, graph_, nullptr, 0, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphAddKernelNode(&node, nullptr, nullptr, 0, &params), cudaErrorInvalidValue);
  // "The error cudaErrorInvalidValue will be returned if kernel parameters are specified with
  // both kernelParams and extra".
  void* extra[] = {nullptr};
  params.extra = extra;
  EXPECT_EQ(cudaGraphAddKernelNode(&node, graph_, nullptr, 0, &params), cudaErrorInvalidValue);
  params.extra = nullptr;
  ASSERT_EQ(cudaGraphAddKernelNode(&node, graph_, nullptr, 0, &params), cudaSuccess);
  // A memset node is not a kernel node.
  cudaMemsetParams memset{};
  memset.dst = a_;
  memset.elementSize = 1;
  memset.width = bytes;
  memset.height = 1;
  cudaGraphNode_t set{};
  ASSERT_EQ(cudaGraphAddMemsetNode(&set, graph_, nullptr, 0, &memset), cudaSuccess);
  EXPECT_EQ(cudaGraphKernelNodeSetParams(set, &params), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphKernelNodeSetParams(node, nullptr), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

// The header does not say when a configuration the device cannot launch is refused (the probe a
// GPU answers): here when the node is added, with cudaErrorInvalidValue, as a launch is.
TEST_F(graph_nodes, a_kernel_node_the_device_cannot_launch_is_refused_when_added) {
  int n = count;
  int amount = 1;
  void* arguments[] = {&a_, &n, &amount};
  cudaKernelNodeParams params{};
  params.func = add_function();
  params.gridDim = dim3{1};
  params.blockDim = dim3{4096};  // past maxThreadsPerBlock
  params.kernelParams = arguments;
  cudaGraphNode_t node{};
  EXPECT_EQ(cudaGraphAddKernelNode(&node, graph_, nullptr, 0, &params), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

TEST_F(graph_nodes, kernel_node_attributes_round_trip_and_copy) {
  cudaGraphNode_t const first = add_kernel(add_function(), a_, 1);
  cudaGraphNode_t const second = add_kernel(add_function(), a_, 1, &first, 1);
  int least = 0;
  int greatest = 0;
  SIM_TEST_TRY(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaLaunchAttributeValue value{};
  value.priority = greatest;
  ASSERT_EQ(cudaGraphKernelNodeSetAttribute(first, cudaLaunchAttributePriority, &value),
            cudaSuccess);
  value = cudaLaunchAttributeValue{};
  value.accessPolicyWindow.base_ptr = a_;
  value.accessPolicyWindow.num_bytes = bytes;
  value.accessPolicyWindow.hitRatio = 0.5F;
  value.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
  value.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  ASSERT_EQ(cudaGraphKernelNodeSetAttribute(first, cudaLaunchAttributeAccessPolicyWindow, &value),
            cudaSuccess);
  ASSERT_EQ(cudaGraphKernelNodeCopyAttributes(second, first), cudaSuccess);
  cudaLaunchAttributeValue read{};
  ASSERT_EQ(cudaGraphKernelNodeGetAttribute(second, cudaLaunchAttributePriority, &read),
            cudaSuccess);
  EXPECT_EQ(read.priority, greatest);
  ASSERT_EQ(cudaGraphKernelNodeGetAttribute(second, cudaLaunchAttributeAccessPolicyWindow, &read),
            cudaSuccess);
  EXPECT_EQ(read.accessPolicyWindow.base_ptr, static_cast<void*>(a_));
  EXPECT_EQ(read.accessPolicyWindow.num_bytes, bytes);
  EXPECT_EQ(read.accessPolicyWindow.hitRatio, 0.5F);
  EXPECT_EQ(read.accessPolicyWindow.hitProp, cudaAccessPropertyPersisting);
  EXPECT_EQ(read.accessPolicyWindow.missProp, cudaAccessPropertyStreaming);
  // The hints change nothing the kernels compute.
  EXPECT_EQ(launch(instantiate(), a_), std::vector<int>(count, 2));
  EXPECT_EQ(cudaGraphKernelNodeGetAttribute(second, cudaLaunchAttributePriority, nullptr),
            cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

// Where the header is silent (the probe a GPU answers): a priority outside
// cudaDeviceGetStreamPriorityRange is refused here, where a stream clamps it.
TEST_F(graph_nodes, a_kernel_node_priority_outside_the_devices_range_is_refused) {
  cudaGraphNode_t const node = add_kernel(add_function(), a_, 1);
  int least = 0;
  int greatest = 0;
  SIM_TEST_TRY(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaLaunchAttributeValue value{};
  value.priority = greatest - 100;
  EXPECT_EQ(cudaGraphKernelNodeSetAttribute(node, cudaLaunchAttributePriority, &value),
            cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

TEST_F(graph_nodes, a_3d_memcpy_node_copies_a_block_between_pitched_pointers) {
  // Source: 4 rows of 16 ints, pitch 64 ints; copy 3 rows of 2 ints from (x = 1 int, y = 1) to
  // the destination's (0, 2), pitch 8 ints.
  constexpr std::size_t source_pitch = 64 * sizeof(int);
  constexpr std::size_t destination_pitch = 8 * sizeof(int);
  std::vector<int> host(4 * 64);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<int>(i);
  int* source{};
  SIM_TEST_TRY(cudaMalloc(&source, host.size() * sizeof(int)));
  sim_testing::copy_to_device(source, host.data(), host.size() * sizeof(int));
  SIM_TEST_TRY(cudaMemset(b_, 0, bytes));
  SIM_TEST_TRY(cudaDeviceSynchronize());
  cudaMemcpy3DParms params{};
  params.srcPtr = cudaPitchedPtr{source, source_pitch, 16 * sizeof(int), 4};
  params.srcPos = cudaPos{sizeof(int), 1, 0};
  params.dstPtr = cudaPitchedPtr{b_, destination_pitch, 8 * sizeof(int), 8};
  params.dstPos = cudaPos{0, 2, 0};
  params.extent = cudaExtent{2 * sizeof(int), 3, 1};
  params.kind = cudaMemcpyDeviceToDevice;
  cudaGraphNode_t node{};
  ASSERT_EQ(cudaGraphAddMemcpyNode(&node, graph_, nullptr, 0, &params), cudaSuccess);
  std::vector<int> const out = launch(instantiate(), b_);
  for (int row = 0; row < 8; ++row) {
    for (int column = 0; column < 8; ++column) {
      bool const copied = row >= 2 && row < 5 && column < 2;
      int const expected = copied ? (row - 1) * 64 + 1 + column : 0;
      EXPECT_EQ(out[static_cast<std::size_t>(row * 8 + column)], expected)
          << "row " << row << " column " << column;
    }
  }
  SIM_TEST_TRY(cudaFree(source));
}

TEST_F(graph_nodes, a_3d_memcpy_node_copies_several_slices) {
  // Two slices of 2 rows of 4 ints: a whole volume, pitch 4 ints on both sides.
  std::vector<int> host(16);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<int>(i) + 1;
  sim_testing::copy_to_device(a_, host.data(), 16 * sizeof(int));
  cudaMemcpy3DParms params{};
  params.srcPtr = cudaPitchedPtr{a_, 4 * sizeof(int), 4 * sizeof(int), 2};
  params.dstPtr = cudaPitchedPtr{b_, 4 * sizeof(int), 4 * sizeof(int), 2};
  params.extent = cudaExtent{4 * sizeof(int), 2, 2};
  params.kind = cudaMemcpyDefault;
  cudaGraphNode_t node{};
  ASSERT_EQ(cudaGraphAddMemcpyNode(&node, graph_, nullptr, 0, &params), cudaSuccess);
  std::vector<int> const out = launch(instantiate(), b_);
  EXPECT_EQ(std::vector<int>(out.begin(), out.begin() + 16), host);
  cudaMemcpy3DParms read{};
  ASSERT_EQ(cudaGraphMemcpyNodeGetParams(node, &read), cudaSuccess);
  EXPECT_EQ(read.srcPtr.ptr, static_cast<void*>(a_));
  EXPECT_EQ(read.dstPtr.ptr, static_cast<void*>(b_));
  EXPECT_EQ(read.dstPtr.pitch, 4 * sizeof(int));
  EXPECT_EQ(read.extent.width, 4 * sizeof(int));
  EXPECT_EQ(read.extent.height, 2U);
  EXPECT_EQ(read.extent.depth, 2U);
  EXPECT_EQ(read.kind, cudaMemcpyDefault);
}

TEST_F(graph_nodes, a_memcpy_nodes_parameters_change_in_the_graph_not_in_earlier_executables) {
  std::vector<int> host(count, 9);
  sim_testing::copy_to_device(a_, host.data(), bytes);
  cudaGraphNode_t node{};
  ASSERT_EQ(cudaGraphAddMemcpyNode1D(&node, graph_, nullptr, 0, b_, a_, bytes / 2,
                                     cudaMemcpyDeviceToDevice),
            cudaSuccess);
  cudaMemcpy3DParms read{};
  ASSERT_EQ(cudaGraphMemcpyNodeGetParams(node, &read), cudaSuccess);
  EXPECT_EQ(read.extent.width, bytes / 2);
  EXPECT_EQ(read.extent.height, 1U);
  EXPECT_EQ(read.extent.depth, 1U);
  cudaGraphExec_t const before = instantiate();
  ASSERT_EQ(cudaGraphMemcpyNodeSetParams1D(node, b_, a_, bytes, cudaMemcpyDeviceToDevice),
            cudaSuccess);
  std::vector<int> half(count, 0);
  std::fill(half.begin(), half.begin() + count / 2, 9);
  EXPECT_EQ(launch(before, b_), half);
  EXPECT_EQ(launch(instantiate(), b_), host);
  ASSERT_EQ(cudaGraphMemcpyNodeGetParams(node, &read), cudaSuccess);
  EXPECT_EQ(read.extent.width, bytes);
  EXPECT_EQ(read.srcPtr.pitch, bytes);
  read.dstPtr.ptr = a_;
  read.srcPtr.ptr = b_;
  ASSERT_EQ(cudaGraphMemcpyNodeSetParams(node, &read), cudaSuccess);
  ASSERT_EQ(cudaGraphMemcpyNodeGetParams(node, &read), cudaSuccess);
  EXPECT_EQ(read.dstPtr.ptr, static_cast<void*>(a_));
}

TEST_F(graph_nodes, bad_memcpy_nodes_are_refused) {
  cudaGraphNode_t node{};
  // Past the end of the destination's allocation.
  EXPECT_EQ(cudaGraphAddMemcpyNode1D(&node, graph_, nullptr, 0, b_, a_, bytes + 1,
                                     cudaMemcpyDeviceToDevice),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphAddMemcpyNode(&node, graph_, nullptr, 0, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(
      cudaGraphAddMemcpyNode1D(&node, nullptr, nullptr, 0, b_, a_, bytes, cudaMemcpyDeviceToDevice),
      cudaErrorInvalidValue);
  ASSERT_EQ(
      cudaGraphAddMemcpyNode1D(&node, graph_, nullptr, 0, b_, a_, bytes, cudaMemcpyDeviceToDevice),
      cudaSuccess);
  EXPECT_EQ(cudaGraphMemcpyNodeSetParams1D(node, b_, a_, 2 * bytes, cudaMemcpyDeviceToDevice),
            cudaErrorInvalidValue);
  cudaMemcpy3DParms read{};
  EXPECT_EQ(cudaGraphMemcpyNodeGetParams(node, nullptr), cudaErrorInvalidValue);
  cudaGraphNode_t empty{};
  ASSERT_EQ(cudaGraphAddEmptyNode(&empty, graph_, nullptr, 0), cudaSuccess);
  EXPECT_EQ(cudaGraphMemcpyNodeGetParams(empty, &read), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

// The header is silent for cudaGraphAddMemcpyNode1D (the probe a GPU answers): an empty copy is
// refused here, as cudaGraphExecMemcpyNodeSetParams refuses one ("Zero-length operations are not
// supported").
TEST_F(graph_nodes, a_zero_length_memcpy_node_is_refused) {
  cudaGraphNode_t node{};
  EXPECT_EQ(cudaGraphAddMemcpyNode1D(&node, graph_, nullptr, 0, b_, a_, 0, cudaMemcpyDefault),
            cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

TEST_F(graph_nodes, an_executables_memcpy_node_copies_from_new_operands_in_later_launches) {
  std::vector<int> sevens(count, 7);
  sim_testing::copy_to_device(a_, sevens.data(), bytes);
  int* c{};
  SIM_TEST_TRY(cudaMalloc(&c, bytes));
  std::vector<int> eights(count, 8);
  sim_testing::copy_to_device(c, eights.data(), bytes);
  cudaGraphNode_t node{};
  ASSERT_EQ(
      cudaGraphAddMemcpyNode1D(&node, graph_, nullptr, 0, b_, a_, bytes, cudaMemcpyDeviceToDevice),
      cudaSuccess);
  cudaGraphExec_t const exec = instantiate();
  EXPECT_EQ(launch(exec, b_), sevens);
  ASSERT_EQ(cudaGraphExecMemcpyNodeSetParams1D(exec, node, b_, c, bytes, cudaMemcpyDeviceToDevice),
            cudaSuccess);
  EXPECT_EQ(launch(exec, b_), eights);
  // "node is also not modified by this call".
  cudaMemcpy3DParms read{};
  ASSERT_EQ(cudaGraphMemcpyNodeGetParams(node, &read), cudaSuccess);
  EXPECT_EQ(read.srcPtr.ptr, static_cast<void*>(a_));
  // The 3-D form, 1-dimensional operands.
  read.srcPtr.ptr = a_;
  ASSERT_EQ(cudaGraphExecMemcpyNodeSetParams(exec, node, &read), cudaSuccess);
  EXPECT_EQ(launch(exec, b_), sevens);
  // "Zero-length operations are not supported"; a multidimensional copy, or memory of another
  // kind ("the memory operands' mappings changed"), is cudaErrorInvalidValue.
  EXPECT_EQ(cudaGraphExecMemcpyNodeSetParams1D(exec, node, b_, c, 0, cudaMemcpyDeviceToDevice),
            cudaErrorInvalidValue);
  read.extent = cudaExtent{sizeof(int), 2, 1};
  read.srcPtr = cudaPitchedPtr{a_, 2 * sizeof(int), 2 * sizeof(int), 2};
  read.dstPtr = cudaPitchedPtr{b_, 2 * sizeof(int), 2 * sizeof(int), 2};
  EXPECT_EQ(cudaGraphExecMemcpyNodeSetParams(exec, node, &read), cudaErrorInvalidValue);
  std::vector<int> host(count);
  EXPECT_EQ(
      cudaGraphExecMemcpyNodeSetParams1D(exec, node, host.data(), a_, bytes, cudaMemcpyDefault),
      cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
  EXPECT_EQ(launch(exec, b_), sevens);
  SIM_TEST_TRY(cudaDeviceSynchronize());
  SIM_TEST_TRY(cudaFree(c));
}

TEST_F(graph_nodes, a_memset_nodes_parameters_change_in_the_graph_and_in_an_executable) {
  cudaMemsetParams params{};
  params.dst = a_;
  params.value = 0x01;
  params.elementSize = sizeof(int);
  params.width = count;
  params.height = 1;
  cudaGraphNode_t node{};
  ASSERT_EQ(cudaGraphAddMemsetNode(&node, graph_, nullptr, 0, &params), cudaSuccess);
  cudaGraphExec_t const exec = instantiate();
  EXPECT_EQ(launch(exec, a_), std::vector<int>(count, 1));
  // The executable: a new value and address, the same shape.
  cudaMemsetParams next = params;
  next.dst = b_;
  next.value = 0x02;
  ASSERT_EQ(cudaGraphExecMemsetNodeSetParams(exec, node, &next), cudaSuccess);
  EXPECT_EQ(launch(exec, b_), std::vector<int>(count, 2));
  cudaMemsetParams read{};
  ASSERT_EQ(cudaGraphMemsetNodeGetParams(node, &read), cudaSuccess);
  EXPECT_EQ(read.dst, static_cast<void*>(a_));  // "node is also not modified by this call"
  // The graph: a half-width memset of 5, for executables made from now on.
  next = params;
  next.value = 0x05;
  next.width = count / 2;
  ASSERT_EQ(cudaGraphMemsetNodeSetParams(node, &next), cudaSuccess);
  SIM_TEST_TRY(cudaMemset(a_, 0, bytes));
  SIM_TEST_TRY(cudaDeviceSynchronize());
  std::vector<int> half(count, 0);
  std::fill(half.begin(), half.begin() + count / 2, 5);
  EXPECT_EQ(launch(instantiate(), a_), half);
  ASSERT_EQ(cudaGraphMemsetNodeGetParams(node, &read), cudaSuccess);
  EXPECT_EQ(read.width, static_cast<std::size_t>(count / 2));
  // Bad input: element size 3, a span past the allocation, a null node or parameters.
  next.elementSize = 3;
  EXPECT_EQ(cudaGraphMemsetNodeSetParams(node, &next), cudaErrorInvalidValue);
  next.elementSize = sizeof(int);
  next.width = count + 1;
  EXPECT_EQ(cudaGraphMemsetNodeSetParams(node, &next), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphMemsetNodeSetParams(node, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphExecMemsetNodeSetParams(exec, node, nullptr), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

TEST_F(graph_nodes, an_executables_memset_node_keeps_its_shape) {
  // A 2-D memset: 4 rows of 8 bytes, pitch 16 ("for 2d memsets, all dimension changes are
  // rejected"; "changes in height are explicitly rejected").
  cudaMemsetParams params{};
  params.dst = a_;
  params.value = 0x01;
  params.elementSize = 1;
  params.width = 8;
  params.height = 4;
  params.pitch = 16;
  cudaGraphNode_t node{};
  ASSERT_EQ(cudaGraphAddMemsetNode(&node, graph_, nullptr, 0, &params), cudaSuccess);
  cudaGraphExec_t const exec = instantiate();
  cudaMemsetParams next = params;
  next.width = 4;
  EXPECT_EQ(cudaGraphExecMemsetNodeSetParams(exec, node, &next), cudaErrorInvalidValue);
  next = params;
  next.height = 1;
  EXPECT_EQ(cudaGraphExecMemsetNodeSetParams(exec, node, &next), cudaErrorInvalidValue);
  next = params;
  next.pitch = 32;
  EXPECT_EQ(cudaGraphExecMemsetNodeSetParams(exec, node, &next), cudaErrorInvalidValue);
  next = params;
  next.dst = b_;
  next.value = 0x7f;
  EXPECT_EQ(cudaGraphExecMemsetNodeSetParams(exec, node, &next), cudaSuccess);
  // A node of another type is not a memset node.
  cudaGraphNode_t empty{};
  ASSERT_EQ(cudaGraphAddEmptyNode(&empty, graph_, nullptr, 0), cudaSuccess);
  EXPECT_EQ(cudaGraphExecMemsetNodeSetParams(exec, empty, &next), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

// The header lets a 1-D memset "opportunistically" change its width (the probe a GPU answers):
// every dimension change is refused here, the stricter reading.
TEST_F(graph_nodes, an_executables_1d_memset_node_may_not_change_its_width) {
  cudaMemsetParams params{};
  params.dst = a_;
  params.elementSize = sizeof(int);
  params.width = count;
  params.height = 1;
  cudaGraphNode_t node{};
  ASSERT_EQ(cudaGraphAddMemsetNode(&node, graph_, nullptr, 0, &params), cudaSuccess);
  cudaGraphExec_t const exec = instantiate();
  params.width = count / 2;
  EXPECT_EQ(cudaGraphExecMemsetNodeSetParams(exec, node, &params), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

TEST_F(graph_nodes, an_executables_kernel_node_may_launch_another_function) {
  cudaGraphNode_t const node = add_kernel(add_function(), a_, 2);
  cudaGraphExec_t const exec = instantiate();
  EXPECT_EQ(launch(exec, a_), std::vector<int>(count, 2));
  // "All nodeParams fields may change": scale by 5 from now on; the graph keeps add_to.
  int* values = a_;
  int n = count;
  int factor = 5;
  void* arguments[] = {&values, &n, &factor};
  cudaKernelNodeParams params{};
  params.func = scale_function();
  params.gridDim = dim3{1};
  params.blockDim = dim3{count};
  params.kernelParams = arguments;
  ASSERT_EQ(cudaGraphExecKernelNodeSetParams(exec, node, &params), cudaSuccess);
  EXPECT_EQ(launch(exec, a_), std::vector<int>(count, 10));
  cudaKernelNodeParams read{};
  ASSERT_EQ(cudaGraphKernelNodeGetParams(node, &read), cudaSuccess);
  EXPECT_EQ(read.func, add_function());
}

TEST_F(graph_nodes, a_3d_memcpy_node_copies_a_sub_volume_slice_by_slice) {
  // Source: 3 slices of 4 rows of 4 ints. Copy 2 ints by 2 rows by 2 slices from (1 int, 1, 1)
  // to a destination of 2-int rows, 3 rows a slice (a spare row each).
  std::vector<int> host(3 * 4 * 4);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<int>(i);
  sim_testing::copy_to_device(a_, host.data(), host.size() * sizeof(int));
  cudaMemcpy3DParms params{};
  params.srcPtr = cudaPitchedPtr{a_, 4 * sizeof(int), 4 * sizeof(int), 4};
  params.srcPos = cudaPos{sizeof(int), 1, 1};
  params.dstPtr = cudaPitchedPtr{b_, 2 * sizeof(int), 2 * sizeof(int), 3};
  params.extent = cudaExtent{2 * sizeof(int), 2, 2};
  params.kind = cudaMemcpyDeviceToDevice;
  cudaGraphNode_t node{};
  ASSERT_EQ(cudaGraphAddMemcpyNode(&node, graph_, nullptr, 0, &params), cudaSuccess);
  std::vector<int> const out = launch(instantiate(), b_);
  for (int z = 0; z < 2; ++z) {
    for (int y = 0; y < 3; ++y) {
      for (int x = 0; x < 2; ++x) {
        int const expected = y < 2 ? (z + 1) * 16 + (y + 1) * 4 + (x + 1) : 0;
        EXPECT_EQ(out[static_cast<std::size_t>(z * 6 + y * 2 + x)], expected)
            << "slice " << z << " row " << y << " column " << x;
      }
    }
  }
  cudaMemcpy3DParms read{};
  ASSERT_EQ(cudaGraphMemcpyNodeGetParams(node, &read), cudaSuccess);
  EXPECT_EQ(read.dstPtr.ysize, 3U);
  EXPECT_EQ(read.srcPtr.ysize, 4U);
  EXPECT_EQ(read.extent.depth, 2U);
  // Slices that overlap: fewer rows a slice than the rows copied.
  params.dstPtr.ysize = 1;
  EXPECT_EQ(cudaGraphAddMemcpyNode(&node, graph_, nullptr, 0, &params), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}
