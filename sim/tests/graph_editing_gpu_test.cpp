// Reading a graph's shape back and editing it: root nodes, edges, dependent nodes, dependencies
// added and removed, a child graph node's graph, host node parameters in a graph and in an
// executable. Host nodes record the order they run in, so the edges are checked by running them.
// On the simulated device they check its model against cuda_runtime_api.h; on a GPU the same tests
// check the tests.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "sim_test.hpp"

namespace {

// What a host node appends its tag to (host functions may not call CUDA; they may write host
// memory).
struct run_log {
  std::vector<int> order;
};

struct tagged {
  run_log* log;
  int tag;
};

void CUDART_CB record_tag(void* data) {
  auto const* node = static_cast<tagged const*>(data);
  node->log->order.push_back(node->tag);
}

void CUDART_CB record_tag_times_ten(void* data) {
  auto const* node = static_cast<tagged const*>(data);
  node->log->order.push_back(node->tag * 10);
}

class graph_editing : public sim_testing::gpu_test {
 protected:
  void SetUp() override {
    gpu_test::SetUp();
    if (IsSkipped()) return;
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    SIM_TEST_TRY(cudaGraphCreate(&graph_, 0));
    for (int tag = 0; tag < 4; ++tag) tags_.push_back(tagged{&log_, tag});
  }
  void TearDown() override {
    if (exec_ != nullptr) static_cast<void>(cudaGraphExecDestroy(exec_));
    if (graph_ != nullptr) static_cast<void>(cudaGraphDestroy(graph_));
    if (stream_ != nullptr) static_cast<void>(cudaStreamDestroy(stream_));
  }

  // A host node recording `tag`, after `dependencies`.
  cudaGraphNode_t host_node(int tag, std::vector<cudaGraphNode_t> const& dependencies = {},
                            cudaGraph_t graph = nullptr) {
    cudaHostNodeParams params{};
    params.fn = record_tag;
    params.userData = &tags_[static_cast<std::size_t>(tag)];
    cudaGraphNode_t node = nullptr;
    SIM_TEST_TRY(cudaGraphAddHostNode(&node, graph != nullptr ? graph : graph_,
                                            dependencies.data(), dependencies.size(), &params));
    return node;
  }

  // Instantiates graph_ (again), launches it once and returns the tags in the order they ran.
  std::vector<int> run() {
    if (exec_ != nullptr) SIM_TEST_TRY(cudaGraphExecDestroy(exec_));
    exec_ = nullptr;
    SIM_TEST_TRY(cudaGraphInstantiate(&exec_, graph_, 0));
    return launch();
  }

  std::vector<int> launch() {
    log_.order.clear();
    SIM_TEST_TRY(cudaGraphLaunch(exec_, stream_));
    SIM_TEST_TRY(cudaStreamSynchronize(stream_));
    return log_.order;
  }

  std::vector<std::pair<cudaGraphNode_t, cudaGraphNode_t>> edges() {
    std::size_t count = 0;
    SIM_TEST_TRY(cudaGraphGetEdges(graph_, nullptr, nullptr, nullptr, &count));
    std::vector<cudaGraphNode_t> from(count);
    std::vector<cudaGraphNode_t> to(count);
    SIM_TEST_TRY(cudaGraphGetEdges(graph_, from.data(), to.data(), nullptr, &count));
    std::vector<std::pair<cudaGraphNode_t, cudaGraphNode_t>> found;
    for (std::size_t i = 0; i < count; ++i) found.emplace_back(from[i], to[i]);
    return found;
  }

  static bool holds(std::vector<std::pair<cudaGraphNode_t, cudaGraphNode_t>> const& list,
                    cudaGraphNode_t from, cudaGraphNode_t to) {
    for (auto const& edge : list) {
      if (edge.first == from && edge.second == to) return true;
    }
    return false;
  }

  cudaStream_t stream_{};
  cudaGraph_t graph_{};
  cudaGraphExec_t exec_{};
  run_log log_;
  std::vector<tagged> tags_;
};

}  // namespace

// cudaGraphGetRootNodes: the count with a null array; "If pNumRootNodes is higher than the actual
// number of root nodes, the remaining entries in pRootNodes will be set to NULL".
TEST_F(graph_editing, root_nodes_are_the_nodes_without_dependencies) {
  cudaGraphNode_t const a = host_node(0);
  host_node(1, {a});
  cudaGraphNode_t const c = host_node(2);
  std::size_t count = 0;
  ASSERT_EQ(cudaGraphGetRootNodes(graph_, nullptr, &count), cudaSuccess);
  EXPECT_EQ(count, 2U);
  std::vector<cudaGraphNode_t> roots(4, a);
  count = roots.size();
  ASSERT_EQ(cudaGraphGetRootNodes(graph_, roots.data(), &count), cudaSuccess);
  ASSERT_EQ(count, 2U);
  EXPECT_TRUE((roots[0] == a && roots[1] == c) || (roots[0] == c && roots[1] == a));
  EXPECT_EQ(roots[2], nullptr);
  EXPECT_EQ(roots[3], nullptr);
  // Fewer entries than roots: that many are filled.
  count = 1;
  ASSERT_EQ(cudaGraphGetRootNodes(graph_, roots.data(), &count), cudaSuccess);
  EXPECT_EQ(count, 1U);
  EXPECT_TRUE(roots[0] == a || roots[0] == c);

  EXPECT_EQ(cudaGraphGetRootNodes(graph_, roots.data(), nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphGetRootNodes(nullptr, roots.data(), &count), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

// cudaGraphGetEdges: "the node in to[i] has a dependency on the node in from[i]"; from and to
// both NULL give the count; extra entries are NULL; "If edgeData is non-NULL then from and to must
// be as well".
TEST_F(graph_editing, edges_list_every_dependency_once) {
  cudaGraphNode_t const a = host_node(0);
  cudaGraphNode_t const b = host_node(1, {a});
  cudaGraphNode_t const c = host_node(2, {a, b});
  auto const found = edges();
  ASSERT_EQ(found.size(), 3U);
  EXPECT_TRUE(holds(found, a, b));
  EXPECT_TRUE(holds(found, a, c));
  EXPECT_TRUE(holds(found, b, c));

  std::vector<cudaGraphNode_t> from(5, a);
  std::vector<cudaGraphNode_t> to(5, a);
  std::vector<cudaGraphEdgeData> data(5);
  data[0].type = 1;  // overwritten with the edge's (default) data
  std::size_t count = from.size();
  ASSERT_EQ(cudaGraphGetEdges(graph_, from.data(), to.data(), data.data(), &count), cudaSuccess);
  EXPECT_EQ(count, 3U);
  EXPECT_EQ(from[3], nullptr);
  EXPECT_EQ(to[4], nullptr);
  EXPECT_EQ(data[0].type, cudaGraphDependencyTypeDefault);
  EXPECT_EQ(data[0].from_port, 0U);

  count = 5;
  EXPECT_EQ(cudaGraphGetEdges(graph_, nullptr, nullptr, data.data(), &count),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphGetEdges(graph_, from.data(), to.data(), nullptr, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphGetEdges(nullptr, nullptr, nullptr, nullptr, &count), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

// cudaGraphNodeGetDependentNodes: the nodes that depend on `node`, with the padding rule; "If
// edgeData is non-NULL, then pDependentNodes must be as well".
TEST_F(graph_editing, a_nodes_dependents_are_the_nodes_that_wait_for_it) {
  cudaGraphNode_t const a = host_node(0);
  cudaGraphNode_t const b = host_node(1, {a});
  cudaGraphNode_t const c = host_node(2, {a});
  host_node(3, {b});
  std::size_t count = 0;
  ASSERT_EQ(cudaGraphNodeGetDependentNodes(a, nullptr, nullptr, &count), cudaSuccess);
  EXPECT_EQ(count, 2U);
  std::vector<cudaGraphNode_t> found(3, a);
  std::vector<cudaGraphEdgeData> data(3);
  count = found.size();
  ASSERT_EQ(cudaGraphNodeGetDependentNodes(a, found.data(), data.data(), &count), cudaSuccess);
  ASSERT_EQ(count, 2U);
  EXPECT_TRUE((found[0] == b && found[1] == c) || (found[0] == c && found[1] == b));
  EXPECT_EQ(found[2], nullptr);
  EXPECT_EQ(data[0].type, cudaGraphDependencyTypeDefault);
  ASSERT_EQ(cudaGraphNodeGetDependentNodes(c, nullptr, nullptr, &count), cudaSuccess);
  EXPECT_EQ(count, 0U);

  EXPECT_EQ(cudaGraphNodeGetDependentNodes(a, nullptr, data.data(), &count),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphNodeGetDependentNodes(a, found.data(), nullptr, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphNodeGetDependentNodes(nullptr, nullptr, nullptr, &count),
            cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

// Edges added by cudaGraphAddDependencies order the nodes, also against the order they were
// created in: with c -> b -> a added to three independent nodes, a launch runs c, b, a.
TEST_F(graph_editing, added_dependencies_order_nodes_against_their_creation_order) {
  cudaGraphNode_t const a = host_node(0);
  cudaGraphNode_t const b = host_node(1);
  cudaGraphNode_t const c = host_node(2);
  std::vector<cudaGraphNode_t> const from{c, b};
  std::vector<cudaGraphNode_t> const to{b, a};
  ASSERT_EQ(cudaGraphAddDependencies(graph_, from.data(), to.data(), nullptr, 2), cudaSuccess);
  EXPECT_EQ(run(), (std::vector<int>{2, 1, 0}));
  auto const found = edges();
  EXPECT_EQ(found.size(), 2U);
  EXPECT_TRUE(holds(found, c, b));
  EXPECT_TRUE(holds(found, b, a));
  std::size_t count = 0;
  ASSERT_EQ(cudaGraphGetRootNodes(graph_, nullptr, &count), cudaSuccess);
  EXPECT_EQ(count, 1U);
  // A clone keeps the edges, and so the order.
  cudaGraph_t cloned = nullptr;
  ASSERT_EQ(cudaGraphClone(&cloned, graph_), cudaSuccess);
  cudaGraphExec_t cloned_exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&cloned_exec, cloned, 0), cudaSuccess);
  log_.order.clear();
  ASSERT_EQ(cudaGraphLaunch(cloned_exec, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(log_.order, (std::vector<int>{2, 1, 0}));
  static_cast<void>(cudaGraphExecDestroy(cloned_exec));
  static_cast<void>(cudaGraphDestroy(cloned));
}

// "Each node in pFrom and pTo must belong to graph. If numDependencies is 0, elements in pFrom and
// pTo will be ignored. Specifying an existing dependency will return an error"
// (cudaGraphAddDependencies; cudaErrorInvalidValue is the only error listed).
TEST_F(graph_editing, adding_an_existing_or_foreign_dependency_is_refused) {
  cudaGraphNode_t const a = host_node(0);
  cudaGraphNode_t const b = host_node(1, {a});
  EXPECT_EQ(cudaGraphAddDependencies(graph_, nullptr, nullptr, nullptr, 0), cudaSuccess);
  EXPECT_EQ(cudaGraphAddDependencies(graph_, &a, &b, nullptr, 1), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
  cudaGraph_t other = nullptr;
  ASSERT_EQ(cudaGraphCreate(&other, 0), cudaSuccess);
  cudaGraphNode_t const foreign = host_node(2, {}, other);
  EXPECT_EQ(cudaGraphAddDependencies(graph_, &foreign, &b, nullptr, 1), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
  EXPECT_EQ(cudaGraphAddDependencies(nullptr, &a, &b, nullptr, 1), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
  EXPECT_EQ(edges().size(), 1U);
  static_cast<void>(cudaGraphDestroy(other));
}

// The header does not say when a cycle is refused; a GPU must refuse one by the time the graph is
// instantiated (a cycle cannot run). The simulator refuses it at cudaGraphAddDependencies
// (graph_editing_sim_test.cpp).
TEST_F(graph_editing, a_cycle_is_refused_by_instantiation_at_the_latest) {
  cudaGraphNode_t const a = host_node(0);
  cudaGraphNode_t const b = host_node(1, {a});
  cudaError_t const added = cudaGraphAddDependencies(graph_, &b, &a, nullptr, 1);
  static_cast<void>(cudaGetLastError());
  if (added == cudaSuccess) {
    cudaGraphExec_t cyclic = nullptr;
    EXPECT_NE(cudaGraphInstantiate(&cyclic, graph_, 0), cudaSuccess);
    if (cyclic != nullptr) static_cast<void>(cudaGraphExecDestroy(cyclic));
    static_cast<void>(cudaGetLastError());
  }
}

// cudaGraphRemoveDependencies: the edge goes (GetEdges, and the order of a launch no longer
// follows it); "Specifying an edge that does not exist in the graph ... results in an error".
TEST_F(graph_editing, removed_dependencies_no_longer_order_the_nodes) {
  cudaGraphNode_t const a = host_node(0);
  cudaGraphNode_t const b = host_node(1, {a});
  cudaGraphNode_t const c = host_node(2, {b});
  ASSERT_EQ(cudaGraphRemoveDependencies(graph_, &a, &b, nullptr, 1), cudaSuccess);
  auto const found = edges();
  ASSERT_EQ(found.size(), 1U);
  EXPECT_TRUE(holds(found, b, c));
  std::size_t count = 0;
  ASSERT_EQ(cudaGraphGetRootNodes(graph_, nullptr, &count), cudaSuccess);
  EXPECT_EQ(count, 2U);
  // With a no longer before b, an edge c -> a orders them b, c, a: impossible while a -> b held.
  ASSERT_EQ(cudaGraphAddDependencies(graph_, &c, &a, nullptr, 1), cudaSuccess);
  EXPECT_EQ(run(), (std::vector<int>{1, 2, 0}));

  EXPECT_EQ(cudaGraphRemoveDependencies(graph_, &a, &b, nullptr, 1), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
  EXPECT_EQ(cudaGraphRemoveDependencies(graph_, nullptr, nullptr, nullptr, 0), cudaSuccess);
  EXPECT_EQ(cudaGraphRemoveDependencies(nullptr, &b, &c, nullptr, 1), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
  EXPECT_EQ(edges().size(), 2U);
}

// "The following restrictions apply to graphs which contain allocation and/or memory free nodes:
// Nodes and edges of the graph cannot be deleted" (cudaGraphAddMemAllocNode).
TEST_F(graph_editing, edges_of_a_graph_with_memory_nodes_cannot_be_removed) {
  cudaGraph_t allocating = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  void* temporary = nullptr;
  ASSERT_EQ(cudaMallocAsync(&temporary, 256, stream_), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(temporary, 0, 256, stream_), cudaSuccess);
  ASSERT_EQ(cudaFreeAsync(temporary, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamEndCapture(stream_, &allocating), cudaSuccess);
  std::size_t count = 4;
  std::vector<cudaGraphNode_t> from(count);
  std::vector<cudaGraphNode_t> to(count);
  ASSERT_EQ(cudaGraphGetEdges(allocating, from.data(), to.data(), nullptr, &count), cudaSuccess);
  ASSERT_EQ(count, 2U);
  EXPECT_EQ(cudaGraphRemoveDependencies(allocating, from.data(), to.data(), nullptr, 1),
            cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
  ASSERT_EQ(cudaGraphGetEdges(allocating, nullptr, nullptr, nullptr, &count), cudaSuccess);
  EXPECT_EQ(count, 2U);
  static_cast<void>(cudaGraphDestroy(allocating));
}

// "Gets a handle to the embedded graph in a child graph node. This call does not clone the graph.
// Changes to the graph will be reflected in the node" (cudaGraphChildGraphNodeGetGraph): a node
// added through the handle runs when the parent runs.
TEST_F(graph_editing, a_child_graph_nodes_graph_is_the_nodes_own) {
  cudaGraph_t child = nullptr;
  ASSERT_EQ(cudaGraphCreate(&child, 0), cudaSuccess);
  host_node(1, {}, child);
  cudaGraphNode_t const first = host_node(0);
  cudaGraphNode_t embedding = nullptr;
  ASSERT_EQ(cudaGraphAddChildGraphNode(&embedding, graph_, &first, 1, child), cudaSuccess);
  // Cloned when added: a change to the original does not reach the node.
  host_node(3, {}, child);
  cudaGraph_t embedded = nullptr;
  ASSERT_EQ(cudaGraphChildGraphNodeGetGraph(embedding, &embedded), cudaSuccess);
  ASSERT_NE(embedded, nullptr);
  EXPECT_NE(embedded, child);
  std::size_t count = 0;
  ASSERT_EQ(cudaGraphGetNodes(embedded, nullptr, &count), cudaSuccess);
  EXPECT_EQ(count, 1U);
  cudaGraphNode_t inner = nullptr;
  count = 1;
  ASSERT_EQ(cudaGraphGetNodes(embedded, &inner, &count), cudaSuccess);
  host_node(2, {inner}, embedded);
  cudaGraph_t again = nullptr;
  ASSERT_EQ(cudaGraphChildGraphNodeGetGraph(embedding, &again), cudaSuccess);
  EXPECT_EQ(again, embedded);
  EXPECT_EQ(run(), (std::vector<int>{0, 1, 2}));
  static_cast<void>(cudaGraphDestroy(child));

  EXPECT_EQ(cudaGraphChildGraphNodeGetGraph(first, &again), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphChildGraphNodeGetGraph(embedding, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphChildGraphNodeGetGraph(nullptr, &again), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

// "Allocation and free nodes cannot be added to the returned graph. Attempting to do so will
// return an error" (cudaGraphChildGraphNodeGetGraph): a free node of an allocation that another
// graph made and does not free could go into any other graph, but not into this one.
TEST_F(graph_editing, no_free_node_goes_into_a_child_graph_nodes_graph) {
  cudaGraph_t allocating = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  void* kept = nullptr;
  ASSERT_EQ(cudaMallocAsync(&kept, 256, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamEndCapture(stream_, &allocating), cudaSuccess);

  cudaGraph_t child = nullptr;
  ASSERT_EQ(cudaGraphCreate(&child, 0), cudaSuccess);
  host_node(0, {}, child);
  cudaGraphNode_t embedding = nullptr;
  ASSERT_EQ(cudaGraphAddChildGraphNode(&embedding, graph_, nullptr, 0, child), cudaSuccess);
  cudaGraph_t embedded = nullptr;
  ASSERT_EQ(cudaGraphChildGraphNodeGetGraph(embedding, &embedded), cudaSuccess);
  cudaGraphNode_t freeing = nullptr;
  EXPECT_NE(cudaGraphAddMemFreeNode(&freeing, embedded, nullptr, 0, kept), cudaSuccess);
  static_cast<void>(cudaGetLastError());
  std::size_t count = 0;
  ASSERT_EQ(cudaGraphGetNodes(embedded, nullptr, &count), cudaSuccess);
  EXPECT_EQ(count, 1U);
  // The same free node goes into a graph of its own.
  ASSERT_EQ(cudaGraphAddMemFreeNode(&freeing, child, nullptr, 0, kept), cudaSuccess);
  static_cast<void>(cudaGraphDestroy(child));
  static_cast<void>(cudaGraphDestroy(allocating));
}

// cudaGraphHostNodeGetParams and cudaGraphHostNodeSetParams: the function and data read back and
// are replaced; an executable made before keeps what it was instantiated with.
TEST_F(graph_editing, a_host_nodes_parameters_read_back_and_change) {
  cudaGraphNode_t const a = host_node(0);
  cudaHostNodeParams params{};
  ASSERT_EQ(cudaGraphHostNodeGetParams(a, &params), cudaSuccess);
  EXPECT_EQ(params.fn, &record_tag);
  EXPECT_EQ(params.userData, &tags_[0]);
  EXPECT_EQ(run(), (std::vector<int>{0}));

  cudaHostNodeParams changed{};
  changed.fn = record_tag_times_ten;
  changed.userData = &tags_[3];
  ASSERT_EQ(cudaGraphHostNodeSetParams(a, &changed), cudaSuccess);
  ASSERT_EQ(cudaGraphHostNodeGetParams(a, &params), cudaSuccess);
  EXPECT_EQ(params.fn, &record_tag_times_ten);
  EXPECT_EQ(params.userData, &tags_[3]);
  EXPECT_EQ(launch(), (std::vector<int>{0}));  // the executable is a copy
  EXPECT_EQ(run(), (std::vector<int>{30}));

  cudaGraphNode_t empty = nullptr;
  ASSERT_EQ(cudaGraphAddEmptyNode(&empty, graph_, nullptr, 0), cudaSuccess);
  EXPECT_EQ(cudaGraphHostNodeGetParams(empty, &params), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphHostNodeSetParams(empty, &changed), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphHostNodeGetParams(a, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphHostNodeSetParams(a, nullptr), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

// cudaGraphExecHostNodeSetParams: "Updates the work represented by node in hGraphExec as though
// node had contained pNodeParams at instantiation ... node is also not modified by this call".
TEST_F(graph_editing, an_executables_host_node_changes_without_its_graph) {
  cudaGraphNode_t const a = host_node(0);
  cudaGraphNode_t const b = host_node(1, {a});
  EXPECT_EQ(run(), (std::vector<int>{0, 1}));
  cudaHostNodeParams changed{};
  changed.fn = record_tag_times_ten;
  changed.userData = &tags_[2];
  ASSERT_EQ(cudaGraphExecHostNodeSetParams(exec_, b, &changed), cudaSuccess);
  EXPECT_EQ(launch(), (std::vector<int>{0, 20}));
  cudaHostNodeParams params{};
  ASSERT_EQ(cudaGraphHostNodeGetParams(b, &params), cudaSuccess);
  EXPECT_EQ(params.fn, &record_tag);
  EXPECT_EQ(params.userData, &tags_[1]);

  // A node of another graph, or not a host node, or no parameters: cudaErrorInvalidValue.
  cudaGraph_t other = nullptr;
  ASSERT_EQ(cudaGraphCreate(&other, 0), cudaSuccess);
  cudaGraphNode_t const foreign = host_node(3, {}, other);
  EXPECT_EQ(cudaGraphExecHostNodeSetParams(exec_, foreign, &changed), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphExecHostNodeSetParams(exec_, b, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphExecHostNodeSetParams(nullptr, b, &changed), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
  static_cast<void>(cudaGraphDestroy(other));
  EXPECT_EQ(launch(), (std::vector<int>{0, 20}));
}
