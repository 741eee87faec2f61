// Graph nodes through the generic and remaining forms: memory allocation nodes added by hand,
// cudaGraphAddNode, cudaGraphNodeSetParams and cudaGraphExecNodeSetParams, a child graph node
// updated in an executable, cudaGraphInstantiateWithParams, and user objects owned by graphs.

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <thread>
#include <vector>

#include "sim_test.hpp"

namespace {

__global__ void add_to(int* values, int count, int amount) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < count) values[i] += amount;
}

class graph_node_params : public sim_testing::gpu_test {
 protected:
  static constexpr int count = 32;
  static constexpr std::size_t bytes = count * sizeof(int);

  void SetUp() override {
    gpu_test::SetUp();
    if (IsSkipped()) return;
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    SIM_TEST_TRY(cudaMalloc(&out_, bytes));
    SIM_TEST_TRY(cudaMemset(out_, 0, bytes));
    SIM_TEST_TRY(cudaDeviceSynchronize());
    add_to<<<1, count, 0, stream_>>>(out_, count, 0);  // known to the simulated device
    SIM_TEST_TRY(cudaStreamSynchronize(stream_));
    SIM_TEST_TRY(cudaGraphCreate(&graph_, 0));
  }
  void TearDown() override {
    if (stream_ == nullptr) return;
    SIM_TEST_EXPECT_SUCCESS(cudaDeviceSynchronize());
    for (cudaGraphExec_t exec : execs_) SIM_TEST_EXPECT_SUCCESS(cudaGraphExecDestroy(exec));
    if (graph_ != nullptr) SIM_TEST_EXPECT_SUCCESS(cudaGraphDestroy(graph_));
    SIM_TEST_EXPECT_SUCCESS(cudaFree(out_));
    SIM_TEST_EXPECT_SUCCESS(cudaStreamDestroy(stream_));
  }
  cudaGraphExec_t instantiate() {
    cudaGraphExec_t exec{};
    SIM_TEST_TRY(cudaGraphInstantiate(&exec, graph_, 0));
    execs_.push_back(exec);
    return exec;
  }
  std::vector<int> launch(cudaGraphExec_t exec) {
    SIM_TEST_TRY(cudaGraphLaunch(exec, stream_));
    return sim_testing::copy_to_host(out_, count, stream_);
  }
  static cudaMemsetParams memset_of(void* to, unsigned value) {
    cudaMemsetParams params{};
    params.dst = to;
    params.value = value;
    params.elementSize = sizeof(int);
    params.width = count;
    params.height = 1;
    return params;
  }
  int device() {
    int current = 0;
    SIM_TEST_TRY(cudaGetDevice(&current));
    return current;
  }
  cudaMemAllocNodeParams alloc_params(std::size_t size) {
    cudaMemAllocNodeParams params{};
    params.poolProps.allocType = cudaMemAllocationTypePinned;
    params.poolProps.location.type = cudaMemLocationTypeDevice;
    params.poolProps.location.id = device();
    params.bytesize = size;
    return params;
  }

  cudaStream_t stream_{};
  int* out_{};
  cudaGraph_t graph_{};
  std::vector<cudaGraphExec_t> execs_;
};

}  // namespace

TEST_F(graph_node_params, a_memory_allocation_node_added_by_hand_gives_memory_to_its_graph) {
  cudaMemAllocNodeParams params = alloc_params(bytes);
  cudaGraphNode_t alloc{};
  ASSERT_EQ(cudaGraphAddMemAllocNode(&alloc, graph_, nullptr, 0, &params), cudaSuccess);
  ASSERT_NE(params.dptr, nullptr);
  cudaMemsetParams const set = memset_of(params.dptr, 6);
  cudaGraphNode_t fill{};
  ASSERT_EQ(cudaGraphAddMemsetNode(&fill, graph_, &alloc, 1, &set), cudaSuccess);
  cudaGraphNode_t copy{};
  ASSERT_EQ(cudaGraphAddMemcpyNode1D(&copy, graph_, &fill, 1, out_, params.dptr, bytes,
                                     cudaMemcpyDeviceToDevice),
            cudaSuccess);
  cudaGraphNode_t free_node{};
  ASSERT_EQ(cudaGraphAddMemFreeNode(&free_node, graph_, &copy, 1, params.dptr), cudaSuccess);
  cudaMemAllocNodeParams read{};
  ASSERT_EQ(cudaGraphMemAllocNodeGetParams(alloc, &read), cudaSuccess);
  EXPECT_EQ(read.dptr, params.dptr);
  EXPECT_EQ(read.bytesize, bytes);
  cudaGraphExec_t const exec = instantiate();
  EXPECT_EQ(launch(exec), std::vector<int>(count, 6));
  EXPECT_EQ(launch(exec), std::vector<int>(count, 6));  // freed by its graph, allocated again
}

TEST_F(graph_node_params, bad_memory_allocation_nodes_are_invalid_values) {
  cudaGraphNode_t node{};
  cudaMemAllocNodeParams params = alloc_params(bytes);
  EXPECT_EQ(cudaGraphAddMemAllocNode(&node, graph_, nullptr, 0, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphAddMemAllocNode(&node, nullptr, nullptr, 0, &params), cudaErrorInvalidValue);
  params.poolProps.allocType = cudaMemAllocationTypeInvalid;
  EXPECT_EQ(cudaGraphAddMemAllocNode(&node, graph_, nullptr, 0, &params), cudaErrorInvalidValue);
  params = alloc_params(bytes);
  params.poolProps.location.id = 1 << 20;  // no such device
  EXPECT_EQ(cudaGraphAddMemAllocNode(&node, graph_, nullptr, 0, &params), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

// The header does not say (the probe a GPU answers): an allocation node of 0 bytes is refused
// here, the stricter reading.
TEST_F(graph_node_params, an_empty_memory_allocation_node_is_refused) {
  cudaGraphNode_t node{};
  cudaMemAllocNodeParams params = alloc_params(0);
  EXPECT_EQ(cudaGraphAddMemAllocNode(&node, graph_, nullptr, 0, &params), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

TEST_F(graph_node_params, generic_parameters_add_and_change_nodes) {
  int n = count;
  int amount = 3;
  void* arguments[] = {&out_, &n, &amount};
  cudaGraphNodeParams params{};
  params.type = cudaGraphNodeTypeKernel;
  params.kernel.func = reinterpret_cast<void*>(&add_to);
  params.kernel.gridDim = dim3{1};
  params.kernel.blockDim = dim3{count};
  params.kernel.kernelParams = arguments;
  cudaGraphNode_t kernel{};
  ASSERT_EQ(cudaGraphAddNode(&kernel, graph_, nullptr, nullptr, 0, &params), cudaSuccess);
  cudaGraphExec_t const exec = instantiate();
  EXPECT_EQ(launch(exec), std::vector<int>(count, 3));
  // The executable adds 10 from now on; the graph still adds 3.
  amount = 10;
  ASSERT_EQ(cudaGraphExecNodeSetParams(exec, kernel, &params), cudaSuccess);
  EXPECT_EQ(launch(exec), std::vector<int>(count, 13));
  amount = 100;
  ASSERT_EQ(cudaGraphNodeSetParams(kernel, &params), cudaSuccess);
  EXPECT_EQ(launch(instantiate()), std::vector<int>(count, 113));
  // "The node type specified by nodeParams->type must match the type of node."
  cudaGraphNodeParams other{};
  other.type = cudaGraphNodeTypeEmpty;
  EXPECT_EQ(cudaGraphNodeSetParams(kernel, &other), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphExecNodeSetParams(exec, kernel, &other), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphNodeSetParams(kernel, nullptr), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

TEST_F(graph_node_params, generic_parameters_of_memset_memcpy_and_event_nodes) {
  cudaGraphNodeParams set{};
  set.type = cudaGraphNodeTypeMemset;
  set.memset.dst = out_;
  set.memset.value = 4;
  set.memset.elementSize = sizeof(int);
  set.memset.width = count;
  set.memset.height = 1;
  cudaGraphNode_t memset{};
  ASSERT_EQ(cudaGraphAddNode(&memset, graph_, nullptr, nullptr, 0, &set), cudaSuccess);
  int* scratch{};
  SIM_TEST_TRY(cudaMalloc(&scratch, bytes));
  cudaGraphNodeParams copy{};
  copy.type = cudaGraphNodeTypeMemcpy;
  copy.memcpy.copyParams.srcPtr = cudaPitchedPtr{out_, bytes, bytes, 1};
  copy.memcpy.copyParams.dstPtr = cudaPitchedPtr{scratch, bytes, bytes, 1};
  copy.memcpy.copyParams.extent = cudaExtent{bytes, 1, 1};
  copy.memcpy.copyParams.kind = cudaMemcpyDeviceToDevice;
  cudaGraphNode_t memcpy{};
  ASSERT_EQ(cudaGraphAddNode(&memcpy, graph_, &memset, nullptr, 1, &copy), cudaSuccess);
  cudaEvent_t event{};
  SIM_TEST_TRY(cudaEventCreate(&event));
  cudaGraphNodeParams record{};
  record.type = cudaGraphNodeTypeEventRecord;
  record.eventRecord.event = event;
  cudaGraphNode_t recorder{};
  ASSERT_EQ(cudaGraphAddNode(&recorder, graph_, &memcpy, nullptr, 1, &record), cudaSuccess);
  cudaGraphExec_t const exec = instantiate();
  set.memset.value = 8;
  ASSERT_EQ(cudaGraphExecNodeSetParams(exec, memset, &set), cudaSuccess);
  EXPECT_EQ(launch(exec), std::vector<int>(count, 8));
  EXPECT_EQ(sim_testing::copy_to_host(scratch, count, stream_), std::vector<int>(count, 8));
  SIM_TEST_TRY(cudaEventSynchronize(event));
  EXPECT_EQ(cudaEventQuery(event), cudaSuccess);
  // A memcpy node's generic parameters: "flags: Must be zero".
  copy.memcpy.flags = 1;
  EXPECT_EQ(cudaGraphNodeSetParams(memcpy, &copy), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
  SIM_TEST_TRY(cudaDeviceSynchronize());
  SIM_TEST_TRY(cudaEventDestroy(event));
  SIM_TEST_TRY(cudaFree(scratch));
}

TEST_F(graph_node_params, memory_node_parameters_cannot_change) {
  cudaMemAllocNodeParams params = alloc_params(bytes);
  cudaGraphNode_t alloc{};
  ASSERT_EQ(cudaGraphAddMemAllocNode(&alloc, graph_, nullptr, 0, &params), cudaSuccess);
  cudaGraphNode_t free_node{};
  ASSERT_EQ(cudaGraphAddMemFreeNode(&free_node, graph_, &alloc, 1, params.dptr), cudaSuccess);
  cudaGraphNodeParams generic{};
  generic.type = cudaGraphNodeTypeMemFree;
  generic.free.dptr = params.dptr;
  // "Modifying parameters is not supported for node types cudaGraphNodeTypeMemAlloc and
  // cudaGraphNodeTypeMemFree"; in an executable, "API unsupported".
  EXPECT_EQ(cudaGraphNodeSetParams(free_node, &generic), cudaErrorNotSupported);
  cudaGraphExec_t const exec = instantiate();
  EXPECT_EQ(cudaGraphExecNodeSetParams(exec, free_node, &generic), cudaErrorNotSupported);
  static_cast<void>(cudaGetLastError());
}

TEST_F(graph_node_params, an_executables_child_graph_node_takes_a_graph_of_the_same_shape) {
  cudaGraph_t child{};
  SIM_TEST_TRY(cudaGraphCreate(&child, 0));
  cudaMemsetParams set = memset_of(out_, 1);
  cudaGraphNode_t inner{};
  ASSERT_EQ(cudaGraphAddMemsetNode(&inner, child, nullptr, 0, &set), cudaSuccess);
  cudaGraphNode_t node{};
  ASSERT_EQ(cudaGraphAddChildGraphNode(&node, graph_, nullptr, 0, child), cudaSuccess);
  cudaGraphExec_t const exec = instantiate();
  EXPECT_EQ(launch(exec), std::vector<int>(count, 1));
  set.value = 2;
  ASSERT_EQ(cudaGraphMemsetNodeSetParams(inner, &set), cudaSuccess);
  ASSERT_EQ(cudaGraphExecChildGraphNodeSetParams(exec, node, child), cudaSuccess);
  EXPECT_EQ(launch(exec), std::vector<int>(count, 2));
  // "The topology of childGraph, as well as the node insertion order, must match".
  cudaGraphNode_t extra{};
  ASSERT_EQ(cudaGraphAddEmptyNode(&extra, child, nullptr, 0), cudaSuccess);
  EXPECT_EQ(cudaGraphExecChildGraphNodeSetParams(exec, node, child), cudaErrorInvalidValue);
  // A node that is not a child graph node.
  cudaGraphNode_t empty{};
  ASSERT_EQ(cudaGraphAddEmptyNode(&empty, graph_, nullptr, 0), cudaSuccess);
  EXPECT_EQ(cudaGraphExecChildGraphNodeSetParams(exec, empty, child), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
  EXPECT_EQ(launch(exec), std::vector<int>(count, 2));
  SIM_TEST_TRY(cudaGraphDestroy(child));
}

TEST_F(graph_node_params, instantiate_with_params_reports_its_result_and_uploads) {
  cudaMemsetParams const set = memset_of(out_, 5);
  cudaGraphNode_t node{};
  ASSERT_EQ(cudaGraphAddMemsetNode(&node, graph_, nullptr, 0, &set), cudaSuccess);
  cudaGraphInstantiateParams params{};
  params.flags = cudaGraphInstantiateFlagUpload;
  params.uploadStream = stream_;
  params.result_out = cudaGraphInstantiateError;
  cudaGraphExec_t exec{};
  ASSERT_EQ(cudaGraphInstantiateWithParams(&exec, graph_, &params), cudaSuccess);
  execs_.push_back(exec);
  EXPECT_EQ(params.result_out, cudaGraphInstantiateSuccess);
  EXPECT_EQ(launch(exec), std::vector<int>(count, 5));
  unsigned long long flags = 1;
  ASSERT_EQ(cudaGraphExecGetFlags(exec, &flags), cudaSuccess);
  EXPECT_EQ(flags, 0ULL);  // the upload flag "will not be returned"
  params.flags = cudaGraphInstantiateFlagDeviceLaunch | cudaGraphInstantiateFlagAutoFreeOnLaunch;
  cudaGraphExec_t refused{};
  EXPECT_NE(cudaGraphInstantiateWithParams(&refused, graph_, &params), cudaSuccess);
  EXPECT_NE(params.result_out, cudaGraphInstantiateSuccess);
  EXPECT_EQ(cudaGraphInstantiateWithParams(&refused, graph_, nullptr), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

namespace {

std::atomic<int> destroyed{0};

void count_destruction(void* /*data*/) {
  destroyed.fetch_add(1);
}

// A GPU runs destructors on an internal thread: wait for it a while.
bool destroyed_within_a_second(int expected) {
  for (int i = 0; i < 1000 && destroyed.load() != expected; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds{1});
  }
  return destroyed.load() == expected;
}

}  // namespace

TEST_F(graph_node_params, a_user_object_is_destroyed_when_its_last_reference_goes) {
  destroyed = 0;
  cudaUserObject_t object{};
  ASSERT_EQ(
      cudaUserObjectCreate(&object, nullptr, count_destruction, 2, cudaUserObjectNoDestructorSync),
      cudaSuccess);
  ASSERT_EQ(cudaUserObjectRetain(object, 1), cudaSuccess);  // three, the caller's
  // Two of them move to the graph; the graph creates one more of its own.
  ASSERT_EQ(cudaGraphRetainUserObject(graph_, object, 2, cudaGraphUserObjectMove), cudaSuccess);
  ASSERT_EQ(cudaGraphRetainUserObject(graph_, object, 1, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphReleaseUserObject(graph_, object, 1), cudaSuccess);
  ASSERT_EQ(cudaUserObjectRelease(object, 1), cudaSuccess);  // the caller's last
  cudaMemsetParams const set = memset_of(out_, 1);
  cudaGraphNode_t node{};
  ASSERT_EQ(cudaGraphAddMemsetNode(&node, graph_, nullptr, 0, &set), cudaSuccess);
  cudaGraphExec_t exec{};
  SIM_TEST_TRY(cudaGraphInstantiate(&exec, graph_, 0));  // the executable owns references too
  SIM_TEST_TRY(cudaGraphDestroy(graph_));
  graph_ = nullptr;
  SIM_TEST_TRY(cudaGraphLaunch(exec, stream_));
  SIM_TEST_TRY(cudaStreamSynchronize(stream_));
  EXPECT_EQ(destroyed.load(), 0);
  SIM_TEST_TRY(cudaGraphExecDestroy(exec));
  SIM_TEST_TRY(cudaDeviceSynchronize());
  EXPECT_TRUE(destroyed_within_a_second(1));
}

TEST_F(graph_node_params, bad_user_object_input_is_an_invalid_value) {
  destroyed = 0;
  cudaUserObject_t object{};
  // "Currently it is required to pass cudaUserObjectNoDestructorSync".
  EXPECT_EQ(cudaUserObjectCreate(&object, nullptr, count_destruction, 1, 0), cudaErrorInvalidValue);
  EXPECT_EQ(
      cudaUserObjectCreate(nullptr, nullptr, count_destruction, 1, cudaUserObjectNoDestructorSync),
      cudaErrorInvalidValue);
  ASSERT_EQ(
      cudaUserObjectCreate(&object, nullptr, count_destruction, 1, cudaUserObjectNoDestructorSync),
      cudaSuccess);
  // Counts "Must be nonzero"; flags other than cudaGraphUserObjectMove.
  EXPECT_EQ(cudaUserObjectRetain(object, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphRetainUserObject(graph_, object, 0, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphRetainUserObject(graph_, object, 1, 2), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphRetainUserObject(nullptr, object, 1, 0), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
  ASSERT_EQ(cudaUserObjectRelease(object, 1), cudaSuccess);
  EXPECT_TRUE(destroyed_within_a_second(1));
}

// The header does not say whether the destructor may be null (the probe a GPU answers): refused
// here, the stricter reading.
TEST_F(graph_node_params, a_user_object_without_a_destructor_is_refused) {
  cudaUserObject_t object{};
  EXPECT_EQ(cudaUserObjectCreate(&object, nullptr, nullptr, 1, cudaUserObjectNoDestructorSync),
            cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}
