// Reading a graph back and running part of it: a node's dependencies, a memset node's
// parameters, a kernel's name and parameter layout, and nodes of an executable disabled and
// enabled again. On the simulated device they check its model against the documentation; on a
// GPU the same tests check the tests.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <vector>

#include "sim_test.hpp"

namespace {

__global__ void add_one(int* value) {
  if (threadIdx.x == 0 && blockIdx.x == 0) *value += 1;
}

__global__ void layout_probe(char tag, double weight, int count, int* out) {
  if (threadIdx.x == 0 && blockIdx.x == 0) *out = tag + count + static_cast<int>(weight);
}

class graph_introspection : public sim_testing::gpu_test {
 protected:
  void SetUp() override {
    gpu_test::SetUp();
    if (IsSkipped()) return;
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    SIM_TEST_TRY(cudaMalloc(&value_, sizeof(int)));
    SIM_TEST_TRY(cudaMemset(value_, 0, sizeof(int)));
    SIM_TEST_TRY(cudaDeviceSynchronize());
  }
  void TearDown() override {
    if (exec_ != nullptr) static_cast<void>(cudaGraphExecDestroy(exec_));
    if (graph_ != nullptr) static_cast<void>(cudaGraphDestroy(graph_));
    if (value_ != nullptr) static_cast<void>(cudaFree(value_));
    if (stream_ != nullptr) static_cast<void>(cudaStreamDestroy(stream_));
  }

  // memset(value, 0) → add_one → add_one, captured and instantiated.
  void capture_three_nodes() {
    SIM_TEST_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    SIM_TEST_TRY(cudaMemsetAsync(value_, 0, sizeof(int), stream_));
    add_one<<<1, 32, 0, stream_>>>(value_);
    add_one<<<1, 32, 0, stream_>>>(value_);
    SIM_TEST_TRY(cudaStreamEndCapture(stream_, &graph_));
    SIM_TEST_TRY(cudaGraphInstantiate(&exec_, graph_, 0));
    std::size_t count = 3;
    nodes_.resize(count);
    SIM_TEST_TRY(cudaGraphGetNodes(graph_, nodes_.data(), &count));
    ASSERT_EQ(count, 3U);
  }

  cudaGraphNode_t node_of_type(cudaGraphNodeType wanted, int skip = 0) {
    for (cudaGraphNode_t node : nodes_) {
      cudaGraphNodeType type{};
      SIM_TEST_TRY(cudaGraphNodeGetType(node, &type));
      if (type == wanted && skip-- == 0) return node;
    }
    return nullptr;
  }

  int replay() {
    SIM_TEST_TRY(cudaGraphLaunch(exec_, stream_));
    SIM_TEST_TRY(cudaStreamSynchronize(stream_));
    int host = -1;
    SIM_TEST_TRY(cudaMemcpy(&host, value_, sizeof host, cudaMemcpyDeviceToHost));
    return host;
  }

  // graph_ built by hand: an empty node, then an IF node whose body is left empty.
  void build_graph_with_conditional_node() {
    SIM_TEST_TRY(cudaGraphCreate(&graph_, 0));
    cudaGraphNode_t empty = nullptr;
    SIM_TEST_TRY(cudaGraphAddEmptyNode(&empty, graph_, nullptr, 0));
    cudaGraphConditionalHandle handle{};
    SIM_TEST_TRY(cudaGraphConditionalHandleCreate(&handle, graph_, 0, 0));
    cudaGraphNodeParams params{};
    params.type = cudaGraphNodeTypeConditional;
    params.conditional.handle = handle;
    params.conditional.type = cudaGraphCondTypeIf;
    params.conditional.size = 1;
    cudaGraphNode_t conditional = nullptr;
    SIM_TEST_TRY(cudaGraphAddNode(&conditional, graph_, &empty, nullptr, 1, &params));
  }

  cudaStream_t stream_{};
  int* value_{};
  cudaGraph_t graph_{};
  cudaGraphExec_t exec_{};
  std::vector<cudaGraphNode_t> nodes_;
};

}  // namespace

TEST_F(graph_introspection, a_nodes_dependencies_are_listed_and_padded_with_null) {
  capture_three_nodes();
  cudaGraphNode_t const memset = node_of_type(cudaGraphNodeTypeMemset);
  cudaGraphNode_t const first = node_of_type(cudaGraphNodeTypeKernel, 0);
  cudaGraphNode_t const second = node_of_type(cudaGraphNodeTypeKernel, 1);
  std::size_t count = 0;
  ASSERT_EQ(cudaGraphNodeGetDependencies(memset, nullptr, nullptr, &count), cudaSuccess);
  EXPECT_EQ(count, 0U);
  ASSERT_EQ(cudaGraphNodeGetDependencies(second, nullptr, nullptr, &count), cudaSuccess);
  ASSERT_EQ(count, 1U);
  // "If pNumDependencies is higher than the actual number of dependencies, the remaining
  // entries in pDependencies will be set to NULL".
  std::vector<cudaGraphNode_t> found(3, memset);
  std::vector<cudaGraphEdgeData> edges(3);
  count = 3;
  ASSERT_EQ(cudaGraphNodeGetDependencies(second, found.data(), edges.data(), &count), cudaSuccess);
  EXPECT_EQ(count, 1U);
  EXPECT_EQ(found[0], first);
  EXPECT_EQ(found[1], nullptr);
  EXPECT_EQ(edges[0].type, cudaGraphDependencyTypeDefault);
  // "If edgeData is non-NULL, then pDependencies must be as well."
  EXPECT_EQ(cudaGraphNodeGetDependencies(second, nullptr, edges.data(), &count),
            cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

TEST_F(graph_introspection, a_memset_nodes_parameters_read_back) {
  capture_three_nodes();
  cudaMemsetParams params{};
  ASSERT_EQ(cudaGraphMemsetNodeGetParams(node_of_type(cudaGraphNodeTypeMemset), &params),
            cudaSuccess);
  EXPECT_EQ(params.dst, static_cast<void*>(value_));
  EXPECT_EQ(params.value, 0U);
  EXPECT_EQ(params.width * params.elementSize, sizeof(int));
  EXPECT_EQ(cudaGraphMemsetNodeGetParams(node_of_type(cudaGraphNodeTypeKernel), &params),
            cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

TEST_F(graph_introspection, a_kernels_name_and_parameter_layout_read_back) {
  int* out = value_;
  layout_probe<<<1, 32, 0, stream_>>>('a', 1.0, 2, out);
  SIM_TEST_TRY(cudaStreamSynchronize(stream_));
  auto const* function = reinterpret_cast<void const*>(&layout_probe);
  char const* name = nullptr;
  ASSERT_EQ(cudaFuncGetName(&name, function), cudaSuccess);
  ASSERT_NE(name, nullptr);
  EXPECT_NE(std::string{name}.find("layout_probe"), std::string::npos) << name;
  // char, double, int, pointer: each at the next offset aligned to its size.
  std::vector<std::size_t> const offsets{0, 8, 16, 24};
  std::vector<std::size_t> const sizes{1, 8, 4, 8};
  for (std::size_t i = 0; i < offsets.size(); ++i) {
    std::size_t offset = 0;
    std::size_t size = 0;
    ASSERT_EQ(cudaFuncGetParamInfo(function, i, &offset, &size), cudaSuccess) << i;
    EXPECT_EQ(offset, offsets[i]) << "parameter " << i;
    EXPECT_EQ(size, sizes[i]) << "parameter " << i;
  }
  std::size_t offset = 0;
  std::size_t size = 0;
  // "paramIndex must be less than the number of parameters that func takes."
  EXPECT_NE(cudaFuncGetParamInfo(function, 4, &offset, &size), cudaSuccess);
  static_cast<void>(cudaGetLastError());
  EXPECT_EQ(cudaFuncGetName(nullptr, function), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

// "Disabled nodes are functionally equivalent to empty nodes until they are reenabled"
// (cudaGraphNodeSetEnabled).
TEST_F(graph_introspection, disabled_nodes_do_nothing_until_enabled_again) {
  capture_three_nodes();
  cudaGraphNode_t const second = node_of_type(cudaGraphNodeTypeKernel, 1);
  EXPECT_EQ(replay(), 2);
  ASSERT_EQ(cudaGraphNodeSetEnabled(exec_, second, 0), cudaSuccess);
  unsigned enabled = 1;
  ASSERT_EQ(cudaGraphNodeGetEnabled(exec_, second, &enabled), cudaSuccess);
  EXPECT_EQ(enabled, 0U);
  EXPECT_EQ(replay(), 1);
  // A disabled memset leaves the value: the kernel adds to what the last replay left.
  ASSERT_EQ(cudaGraphNodeSetEnabled(exec_, node_of_type(cudaGraphNodeTypeMemset), 0), cudaSuccess);
  EXPECT_EQ(replay(), 2);
  ASSERT_EQ(cudaGraphNodeSetEnabled(exec_, second, 1), cudaSuccess);
  ASSERT_EQ(cudaGraphNodeSetEnabled(exec_, node_of_type(cudaGraphNodeTypeMemset), 1), cudaSuccess);
  EXPECT_EQ(replay(), 2);
}

TEST_F(graph_introspection, only_kernel_memset_and_memcpy_nodes_of_the_source_graph_toggle) {
  capture_three_nodes();
  cudaGraphNode_t empty = nullptr;
  ASSERT_EQ(cudaGraphAddEmptyNode(&empty, graph_, nullptr, 0), cudaSuccess);
  cudaGraphExec_t with_empty = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&with_empty, graph_, 0), cudaSuccess);
  // "Currently only kernel, memset and memcpy nodes are supported."
  EXPECT_EQ(cudaGraphNodeSetEnabled(with_empty, empty, 0), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
  // The node must come from the graph the executable was instantiated from.
  cudaGraph_t other = nullptr;
  ASSERT_EQ(cudaGraphClone(&other, graph_), cudaSuccess);
  std::size_t count = 0;
  ASSERT_EQ(cudaGraphGetNodes(other, nullptr, &count), cudaSuccess);
  std::vector<cudaGraphNode_t> other_nodes(count);
  ASSERT_EQ(cudaGraphGetNodes(other, other_nodes.data(), &count), cudaSuccess);
  EXPECT_EQ(cudaGraphNodeSetEnabled(exec_, other_nodes[0], 0), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
  static_cast<void>(cudaGraphDestroy(other));
  static_cast<void>(cudaGraphExecDestroy(with_empty));
}

// "Cloning is not supported for graphs which contain memory allocation nodes, memory free
// nodes, or conditional nodes" (cudaGraphClone); an H100 with CUDA 13.0 answers
// cudaErrorNotSupported.
TEST_F(graph_introspection, a_graph_holding_a_conditional_node_cannot_be_cloned) {
  // Without a conditional node, a graph holding a child graph clones.
  cudaGraph_t plain = nullptr;
  ASSERT_EQ(cudaGraphCreate(&plain, 0), cudaSuccess);
  cudaGraphNode_t empty = nullptr;
  ASSERT_EQ(cudaGraphAddEmptyNode(&empty, plain, nullptr, 0), cudaSuccess);
  cudaGraph_t outer = nullptr;
  ASSERT_EQ(cudaGraphCreate(&outer, 0), cudaSuccess);
  cudaGraphNode_t child = nullptr;
  ASSERT_EQ(cudaGraphAddChildGraphNode(&child, outer, nullptr, 0, plain), cudaSuccess);
  cudaGraph_t cloned = nullptr;
  ASSERT_EQ(cudaGraphClone(&cloned, outer), cudaSuccess);
  ASSERT_NE(cloned, nullptr);
  std::size_t count = 0;
  ASSERT_EQ(cudaGraphGetNodes(cloned, nullptr, &count), cudaSuccess);
  EXPECT_EQ(count, 1U);
  static_cast<void>(cudaGraphDestroy(cloned));
  static_cast<void>(cudaGraphDestroy(outer));
  static_cast<void>(cudaGraphDestroy(plain));

  build_graph_with_conditional_node();
  cudaGraph_t untouched = graph_;  // any value the call must not overwrite
  cudaGraph_t refused = untouched;
  EXPECT_EQ(cudaGraphClone(&refused, graph_), cudaErrorNotSupported);
  EXPECT_EQ(refused, untouched);
  static_cast<void>(cudaGetLastError());
}

// The same note forbids cloning graphs with memory allocation and free nodes; the error CUDA
// gives is not documented, cudaErrorNotSupported as for conditional nodes is assumed.
TEST_F(graph_introspection, a_graph_holding_memory_nodes_cannot_be_cloned) {
  SIM_TEST_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
  void* temporary = nullptr;
  SIM_TEST_TRY(cudaMallocAsync(&temporary, 256, stream_));
  SIM_TEST_TRY(cudaFreeAsync(temporary, stream_));
  cudaGraph_t allocating = nullptr;
  SIM_TEST_TRY(cudaStreamEndCapture(stream_, &allocating));
  cudaGraph_t refused = allocating;
  EXPECT_EQ(cudaGraphClone(&refused, allocating), cudaErrorNotSupported);
  EXPECT_EQ(refused, allocating);
  static_cast<void>(cudaGetLastError());
  static_cast<void>(cudaGraphDestroy(allocating));
}

// "If childGraph contains allocation nodes, free nodes, or conditional nodes, this call will
// return an error" (cudaGraphAddChildGraphNode, whose only error listed is
// cudaErrorInvalidValue); "The graph must not contain conditional nodes"
// (cudaChildGraphNodeParams::graph, for cudaGraphAddNode).
TEST_F(graph_introspection, a_graph_holding_a_conditional_node_cannot_become_a_child_graph) {
  build_graph_with_conditional_node();
  cudaGraph_t parent = nullptr;
  ASSERT_EQ(cudaGraphCreate(&parent, 0), cudaSuccess);
  cudaGraphNode_t untouched = nullptr;  // a node of graph_: any value the calls must not overwrite
  std::size_t one = 1;
  ASSERT_EQ(cudaGraphGetNodes(graph_, &untouched, &one), cudaSuccess);
  ASSERT_NE(untouched, nullptr);
  cudaGraphNode_t node = untouched;
  EXPECT_EQ(cudaGraphAddChildGraphNode(&node, parent, nullptr, 0, graph_), cudaErrorInvalidValue);
  EXPECT_EQ(node, untouched);
  static_cast<void>(cudaGetLastError());
  cudaGraphNodeParams params{};
  params.type = cudaGraphNodeTypeGraph;
  params.graph.graph = graph_;
  EXPECT_EQ(cudaGraphAddNode(&node, parent, nullptr, nullptr, 0, &params), cudaErrorInvalidValue);
  EXPECT_EQ(node, untouched);
  static_cast<void>(cudaGetLastError());
  std::size_t count = 0;
  ASSERT_EQ(cudaGraphGetNodes(parent, nullptr, &count), cudaSuccess);
  EXPECT_EQ(count, 0U);
  static_cast<void>(cudaGraphDestroy(parent));
}
