// Races planted around event nodes added by hand to a graph, each beside its correctly ordered
// twin, which must pass: a record node records its dependencies only, not the whole launch
// (cudaGraphAddEventRecordNode: "Each launch of the graph will record event to capture execution
// of the node's dependencies"), and a wait node orders only the nodes behind it
// (cudaGraphAddEventWaitNode: "The graph node will wait for all work captured in event").

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <graphstep/sim/race_report.hpp>
#include <graphstep/sim/sim.hpp>
#include <string>
#include <vector>

#include "sim_test.hpp"

namespace gs = graphstep;

namespace {

class graph_event_node_races : public ::testing::Test {
 protected:
  void SetUp() override {
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&a_, cudaStreamNonBlocking));
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&b_, cudaStreamNonBlocking));
    SIM_TEST_TRY(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
    SIM_TEST_TRY(cudaMalloc(&x_, bytes));
    SIM_TEST_TRY(cudaMalloc(&y_, bytes));
    SIM_TEST_TRY(cudaDeviceSynchronize());
    SIM_TEST_TRY(cudaGraphCreate(&graph_, 0));
  }
  void TearDown() override {
    SIM_TEST_EXPECT_SUCCESS(cudaDeviceSynchronize());
    if (exec_ != nullptr) SIM_TEST_EXPECT_SUCCESS(cudaGraphExecDestroy(exec_));
    SIM_TEST_EXPECT_SUCCESS(cudaGraphDestroy(graph_));
    SIM_TEST_EXPECT_SUCCESS(cudaFree(x_));
    SIM_TEST_EXPECT_SUCCESS(cudaFree(y_));
    SIM_TEST_EXPECT_SUCCESS(cudaEventDestroy(event_));
    SIM_TEST_EXPECT_SUCCESS(cudaStreamDestroy(a_));
    SIM_TEST_EXPECT_SUCCESS(cudaStreamDestroy(b_));
  }
  [[nodiscard]] std::vector<std::string> new_races() const { return races_.found(); }
  cudaGraphNode_t add_memset(void* to, cudaGraphNode_t const* after = nullptr,
                             std::size_t after_count = 0) {
    cudaMemsetParams params{};
    params.dst = to;
    params.value = 1;
    params.elementSize = 1;
    params.width = bytes;
    params.height = 1;
    cudaGraphNode_t node{};
    SIM_TEST_TRY(cudaGraphAddMemsetNode(&node, graph_, after, after_count, &params));
    return node;
  }
  void instantiate() { SIM_TEST_TRY(cudaGraphInstantiate(&exec_, graph_, 0)); }
  bool names(std::string const& race, void const* range) const {
    char start[32];
    static_cast<void>(std::snprintf(start, sizeof start, "[%p, ", range));
    return race.find(start) != std::string::npos;
  }

  static constexpr std::size_t bytes = 256;
  cudaStream_t a_{};
  cudaStream_t b_{};
  cudaEvent_t event_{};
  void* x_{};
  void* y_{};
  cudaGraph_t graph_{};
  cudaGraphExec_t exec_{};
  gs::sim::race_report races_;  // later tests stop at their first race again
};

}  // namespace

TEST_F(graph_event_node_races, a_node_beside_a_record_node_is_not_ordered_by_its_event) {
  cudaGraphNode_t const set_x = add_memset(x_);
  add_memset(y_);  // a root beside the record node
  cudaGraphNode_t record{};
  ASSERT_EQ(cudaGraphAddEventRecordNode(&record, graph_, &set_x, 1, event_), cudaSuccess);
  instantiate();
  SIM_TEST_TRY(cudaGraphLaunch(exec_, a_));
  SIM_TEST_TRY(cudaStreamWaitEvent(b_, event_, 0));
  SIM_TEST_TRY(cudaMemsetAsync(x_, 2, bytes, b_));
  SIM_TEST_TRY(cudaMemsetAsync(y_, 2, bytes, b_));
  auto const found = new_races();
  ASSERT_EQ(found.size(), 1U);
  EXPECT_TRUE(names(found[0], y_)) << found[0];
}

TEST_F(graph_event_node_races, the_record_nodes_dependencies_are_ordered_by_its_event) {
  cudaGraphNode_t const sets[] = {add_memset(x_), add_memset(y_)};
  cudaGraphNode_t record{};
  ASSERT_EQ(cudaGraphAddEventRecordNode(&record, graph_, sets, 2, event_), cudaSuccess);
  instantiate();
  SIM_TEST_TRY(cudaGraphLaunch(exec_, a_));
  SIM_TEST_TRY(cudaStreamWaitEvent(b_, event_, 0));
  SIM_TEST_TRY(cudaMemsetAsync(x_, 2, bytes, b_));
  SIM_TEST_TRY(cudaMemsetAsync(y_, 2, bytes, b_));
  EXPECT_TRUE(new_races().empty());
}

TEST_F(graph_event_node_races, a_node_not_behind_a_wait_node_is_not_ordered_after_the_event) {
  cudaGraphNode_t wait{};
  ASSERT_EQ(cudaGraphAddEventWaitNode(&wait, graph_, nullptr, 0, event_), cudaSuccess);
  add_memset(x_, &wait, 1);
  add_memset(y_);  // a root: not behind the wait node
  instantiate();
  SIM_TEST_TRY(cudaMemsetAsync(x_, 2, bytes, b_));
  SIM_TEST_TRY(cudaMemsetAsync(y_, 2, bytes, b_));
  SIM_TEST_TRY(cudaEventRecord(event_, b_));
  SIM_TEST_TRY(cudaGraphLaunch(exec_, a_));
  auto const found = new_races();
  ASSERT_EQ(found.size(), 1U);
  EXPECT_TRUE(names(found[0], y_)) << found[0];
}

TEST_F(graph_event_node_races, the_nodes_behind_a_wait_node_are_ordered_after_the_event) {
  cudaGraphNode_t wait{};
  ASSERT_EQ(cudaGraphAddEventWaitNode(&wait, graph_, nullptr, 0, event_), cudaSuccess);
  cudaGraphNode_t const set_x = add_memset(x_, &wait, 1);
  add_memset(y_, &set_x, 1);
  instantiate();
  SIM_TEST_TRY(cudaMemsetAsync(x_, 2, bytes, b_));
  SIM_TEST_TRY(cudaMemsetAsync(y_, 2, bytes, b_));
  SIM_TEST_TRY(cudaEventRecord(event_, b_));
  SIM_TEST_TRY(cudaGraphLaunch(exec_, a_));
  EXPECT_TRUE(new_races().empty());
}

// A node keeps its event: one destroyed while a graph names it stays for the graph's launches
// (the handle is gone), so that no launch reads freed memory.
TEST_F(graph_event_node_races, an_event_destroyed_while_a_graph_names_it_stays_for_its_launches) {
  cudaEvent_t doomed{};
  SIM_TEST_TRY(cudaEventCreate(&doomed));
  cudaGraphNode_t const set_x = add_memset(x_);
  cudaGraphNode_t record{};
  ASSERT_EQ(cudaGraphAddEventRecordNode(&record, graph_, &set_x, 1, doomed), cudaSuccess);
  cudaGraphNode_t wait{};
  ASSERT_EQ(cudaGraphAddEventWaitNode(&wait, graph_, &record, 1, doomed), cudaSuccess);
  instantiate();
  SIM_TEST_TRY(cudaEventDestroy(doomed));
  EXPECT_EQ(cudaEventQuery(doomed), cudaErrorInvalidResourceHandle);
  static_cast<void>(cudaGetLastError());
  for (int launch = 0; launch < 2; ++launch) SIM_TEST_TRY(cudaGraphLaunch(exec_, a_));
  SIM_TEST_TRY(cudaStreamSynchronize(a_));
  EXPECT_TRUE(new_races().empty());
}
