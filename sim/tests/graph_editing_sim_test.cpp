// Graph editing where the simulator answers what the header leaves open, or what only it can
// show: a cycle refused when it is added, edge data it does not model, a child graph node's graph
// it will not destroy, a node added after instantiation, a launch already queued keeping its host
// node, and the race checker following edges added against creation order.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include "sim_test.hpp"
#include <graphstep/sim/sim.hpp>
#include <string>
#include <vector>

namespace gs = graphstep;

namespace {

struct tagged {
  std::vector<int>* log;
  int tag;
};

void CUDART_CB record_tag(void* data) {
  auto const* node = static_cast<tagged const*>(data);
  node->log->push_back(node->tag);
}

class graph_editing_sim : public ::testing::Test {
 protected:
  void SetUp() override {
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    SIM_TEST_TRY(cudaGraphCreate(&graph_, 0));
    for (int tag = 0; tag < 4; ++tag) tags_.push_back(tagged{&log_, tag});
  }
  void TearDown() override {
    SIM_TEST_EXPECT_SUCCESS(cudaGraphDestroy(graph_));
    SIM_TEST_EXPECT_SUCCESS(cudaStreamDestroy(stream_));
  }

  cudaGraphNode_t host_node(int tag, std::vector<cudaGraphNode_t> const& dependencies = {}) {
    cudaHostNodeParams params{};
    params.fn = record_tag;
    params.userData = &tags_[static_cast<std::size_t>(tag)];
    cudaGraphNode_t node = nullptr;
    SIM_TEST_TRY(
        cudaGraphAddHostNode(&node, graph_, dependencies.data(), dependencies.size(), &params));
    return node;
  }

  std::size_t edge_count() {
    std::size_t count = 0;
    SIM_TEST_TRY(cudaGraphGetEdges(graph_, nullptr, nullptr, nullptr, &count));
    return count;
  }

  cudaStream_t stream_{};
  cudaGraph_t graph_{};
  std::vector<int> log_;
  std::vector<tagged> tags_;
};

// The header does not say when a cycle is refused: the simulator refuses the edge that closes it
// (a node on itself too), and adds none of the call's edges.
TEST_F(graph_editing_sim, an_edge_closing_a_cycle_is_refused_and_nothing_is_added) {
  cudaGraphNode_t const a = host_node(0);
  cudaGraphNode_t const b = host_node(1, {a});
  cudaGraphNode_t const c = host_node(2);
  std::vector<cudaGraphNode_t> const from{c, b};
  std::vector<cudaGraphNode_t> const to{a, a};
  EXPECT_EQ(cudaGraphAddDependencies(graph_, from.data(), to.data(), nullptr, 2),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(edge_count(), 1U);
  EXPECT_EQ(cudaGraphAddDependencies(graph_, &a, &a, nullptr, 1), cudaErrorInvalidValue);
  // The same edge twice in one call: the second is an existing dependency.
  std::vector<cudaGraphNode_t> const twice_from{c, c};
  std::vector<cudaGraphNode_t> const twice_to{b, b};
  EXPECT_EQ(cudaGraphAddDependencies(graph_, twice_from.data(), twice_to.data(), nullptr, 2),
            cudaErrorInvalidValue);
  EXPECT_EQ(edge_count(), 1U);
  static_cast<void>(cudaGetLastError());
}

// Programmatic dependencies and ports are not modelled: refused by name, not taken as plain edges.
TEST_F(graph_editing_sim, edge_data_other_than_the_default_is_refused_by_name) {
  cudaGraphNode_t const a = host_node(0);
  cudaGraphNode_t const b = host_node(1);
  cudaGraphEdgeData programmatic{};
  programmatic.type = cudaGraphDependencyTypeProgrammatic;
  testing::internal::CaptureStderr();
  EXPECT_EQ(cudaGraphAddDependencies(graph_, &a, &b, &programmatic, 1), cudaErrorNotSupported);
  std::string const said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("cudaGraphAddDependencies with edge data"), std::string::npos) << said;
  EXPECT_EQ(edge_count(), 0U);
  // Default edge data given explicitly is a plain edge; removing it with other data names no edge.
  cudaGraphEdgeData const plain{};
  ASSERT_EQ(cudaGraphAddDependencies(graph_, &a, &b, &plain, 1), cudaSuccess);
  EXPECT_EQ(cudaGraphRemoveDependencies(graph_, &a, &b, &programmatic, 1), cudaErrorInvalidValue);
  EXPECT_EQ(edge_count(), 1U);
  ASSERT_EQ(cudaGraphRemoveDependencies(graph_, &a, &b, &plain, 1), cudaSuccess);
  EXPECT_EQ(edge_count(), 0U);
  static_cast<void>(cudaGetLastError());
}

// A child graph node's graph belongs to the node: destroying it through its handle is refused,
// and the handle goes when the node does.
TEST_F(graph_editing_sim, a_child_graph_nodes_graph_lives_and_dies_with_its_node) {
  cudaGraph_t child = nullptr;
  ASSERT_EQ(cudaGraphCreate(&child, 0), cudaSuccess);
  cudaGraphNode_t embedding = nullptr;
  ASSERT_EQ(cudaGraphAddChildGraphNode(&embedding, graph_, nullptr, 0, child), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(child), cudaSuccess);
  cudaGraph_t embedded = nullptr;
  ASSERT_EQ(cudaGraphChildGraphNodeGetGraph(embedding, &embedded), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(embedded), cudaErrorInvalidValue);
  std::size_t count = 0;
  EXPECT_EQ(cudaGraphGetNodes(embedded, nullptr, &count), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroyNode(embedding), cudaSuccess);
  EXPECT_EQ(cudaGraphGetNodes(embedded, nullptr, &count), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

// A conditional node cannot go into a child graph node's graph either ("The graph must not
// contain conditional nodes", cudaChildGraphNodeParams::graph), the stricter reading.
TEST_F(graph_editing_sim, no_conditional_node_goes_into_a_child_graph_nodes_graph) {
  cudaGraph_t child = nullptr;
  ASSERT_EQ(cudaGraphCreate(&child, 0), cudaSuccess);
  cudaGraphNode_t embedding = nullptr;
  ASSERT_EQ(cudaGraphAddChildGraphNode(&embedding, graph_, nullptr, 0, child), cudaSuccess);
  static_cast<void>(cudaGraphDestroy(child));
  cudaGraph_t embedded = nullptr;
  ASSERT_EQ(cudaGraphChildGraphNodeGetGraph(embedding, &embedded), cudaSuccess);
  cudaGraphConditionalHandle handle{};
  ASSERT_EQ(cudaGraphConditionalHandleCreate(&handle, embedded, 0, 0), cudaSuccess);
  cudaGraphNodeParams params{};
  params.type = cudaGraphNodeTypeConditional;
  params.conditional.handle = handle;
  params.conditional.type = cudaGraphCondTypeIf;
  params.conditional.size = 1;
  cudaGraphNode_t conditional = nullptr;
  EXPECT_EQ(cudaGraphAddNode(&conditional, embedded, nullptr, nullptr, 0, &params),
            cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

// A node added to the graph after instantiation is in no executable: setting it there is
// cudaErrorInvalidValue, not a read past the executable's nodes.
TEST_F(graph_editing_sim, a_node_added_after_instantiation_names_nothing_in_the_executable) {
  host_node(0);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph_, 0), cudaSuccess);
  cudaGraphNode_t const later = host_node(1);
  cudaHostNodeParams params{};
  params.fn = record_tag;
  params.userData = &tags_[2];
  EXPECT_EQ(cudaGraphExecHostNodeSetParams(exec, later, &params), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
  ASSERT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
}

// "Already enqueued or running launches of hGraphExec are not affected by this call"
// (cudaGraphExecHostNodeSetParams): a launch still queued runs the host node it was launched
// with.
TEST_F(graph_editing_sim, a_queued_launch_keeps_its_host_node) {
  cudaGraphNode_t const a = host_node(0);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph_, 0), cudaSuccess);
  gs::sim::set_execution_mode(gs::sim::execution_mode::deferred);
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  cudaHostNodeParams params{};
  params.fn = record_tag;
  params.userData = &tags_[3];
  ASSERT_EQ(cudaGraphExecHostNodeSetParams(exec, a, &params), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  EXPECT_TRUE(log_.empty());
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  gs::sim::set_execution_mode(gs::sim::execution_mode::immediate);
  EXPECT_EQ(log_, (std::vector<int>{0, 3}));
  ASSERT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
}

// The race checker orders a launch's nodes by the graph's edges, also by one added against
// creation order: two memsets of one buffer race without an edge and not with it, whichever way
// it points.
TEST_F(graph_editing_sim, the_race_checker_follows_edges_added_against_creation_order) {
  gs::sim::race_mode const before = gs::sim::current_race_mode();
  gs::sim::set_race_mode(gs::sim::race_mode::report);
  std::size_t const already = gs::sim::races().size();
  void* value = nullptr;
  ASSERT_EQ(cudaMalloc(&value, sizeof(int)), cudaSuccess);
  cudaMemsetParams params{};
  params.dst = value;
  params.elementSize = 1;
  params.width = sizeof(int);
  params.height = 1;
  params.value = 1;
  cudaGraphNode_t first = nullptr;
  ASSERT_EQ(cudaGraphAddMemsetNode(&first, graph_, nullptr, 0, &params), cudaSuccess);
  params.value = 2;
  cudaGraphNode_t second = nullptr;
  ASSERT_EQ(cudaGraphAddMemsetNode(&second, graph_, nullptr, 0, &params), cudaSuccess);
  auto const launch_and_read = [&] {
    cudaGraphExec_t exec = nullptr;
    SIM_TEST_TRY(cudaGraphInstantiate(&exec, graph_, 0));
    SIM_TEST_TRY(cudaGraphLaunch(exec, stream_));
    SIM_TEST_TRY(cudaStreamSynchronize(stream_));
    SIM_TEST_TRY(cudaGraphExecDestroy(exec));
    int host = 0;
    SIM_TEST_TRY(cudaMemcpy(&host, value, sizeof host, cudaMemcpyDeviceToHost));
    return host;
  };
  static_cast<void>(launch_and_read());
  EXPECT_EQ(gs::sim::races().size(), already + 1);  // two branches write one int
  ASSERT_EQ(cudaGraphAddDependencies(graph_, &second, &first, nullptr, 1), cudaSuccess);
  EXPECT_EQ(launch_and_read(), 0x01010101);  // first runs last
  EXPECT_EQ(gs::sim::races().size(), already + 1);
  ASSERT_EQ(cudaFree(value), cudaSuccess);
  gs::sim::set_race_mode(before);
}

}  // namespace
