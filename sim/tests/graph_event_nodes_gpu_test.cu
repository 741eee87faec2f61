// Event record and wait nodes added to a graph by hand (cudaGraphAddEventRecordNode,
// cudaGraphAddEventWaitNode), their events read, changed in the graph and in an executable. The
// work is kept queued (sim_testing::queued_work) so that only the documented orderings, not
// completion by chance, decide what each copy sees.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

#include "sim_test.hpp"

namespace {

__global__ void fill(int* values, int count, int value) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < count) values[i] = value;
}

class graph_event_nodes : public sim_testing::gpu_test {
 protected:
  static constexpr int count = 64;
  static constexpr std::size_t bytes = count * sizeof(int);

  void SetUp() override {
    gpu_test::SetUp();
    if (IsSkipped()) return;
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&a_, cudaStreamNonBlocking));
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&b_, cudaStreamNonBlocking));
    SIM_TEST_TRY(cudaEventCreate(&first_));
    SIM_TEST_TRY(cudaEventCreate(&second_));
    SIM_TEST_TRY(cudaMalloc(&x_, bytes));
    SIM_TEST_TRY(cudaMalloc(&y_, bytes));
    SIM_TEST_TRY(cudaMemset(x_, 0, bytes));
    SIM_TEST_TRY(cudaMemset(y_, 0, bytes));
    SIM_TEST_TRY(cudaDeviceSynchronize());
    SIM_TEST_TRY(cudaGraphCreate(&graph_, 0));
  }
  void TearDown() override {
    if (a_ == nullptr) return;
    SIM_TEST_EXPECT_SUCCESS(cudaDeviceSynchronize());
    for (cudaGraphExec_t exec : execs_) SIM_TEST_EXPECT_SUCCESS(cudaGraphExecDestroy(exec));
    SIM_TEST_EXPECT_SUCCESS(cudaGraphDestroy(graph_));
    SIM_TEST_EXPECT_SUCCESS(cudaFree(x_));
    SIM_TEST_EXPECT_SUCCESS(cudaFree(y_));
    SIM_TEST_EXPECT_SUCCESS(cudaEventDestroy(first_));
    SIM_TEST_EXPECT_SUCCESS(cudaEventDestroy(second_));
    SIM_TEST_EXPECT_SUCCESS(cudaStreamDestroy(a_));
    SIM_TEST_EXPECT_SUCCESS(cudaStreamDestroy(b_));
  }
  cudaGraphExec_t instantiate() {
    cudaGraphExec_t exec{};
    SIM_TEST_TRY(cudaGraphInstantiate(&exec, graph_, 0));
    execs_.push_back(exec);
    return exec;
  }
  cudaGraphNode_t add_copy(int* to, int const* from, cudaGraphNode_t const* after = nullptr,
                           std::size_t after_count = 0) {
    cudaGraphNode_t node{};
    SIM_TEST_TRY(cudaGraphAddMemcpyNode1D(&node, graph_, after, after_count, to, from, bytes,
                                          cudaMemcpyDeviceToDevice));
    return node;
  }

  cudaStream_t a_{};
  cudaStream_t b_{};
  cudaEvent_t first_{};
  cudaEvent_t second_{};
  int* x_{};
  int* y_{};
  cudaGraph_t graph_{};
  std::vector<cudaGraphExec_t> execs_;
};

}  // namespace

TEST_F(graph_event_nodes, a_wait_node_orders_its_dependents_after_the_events_work) {
  sim_testing::queued_work const queued;
  cudaGraphNode_t wait{};
  ASSERT_EQ(cudaGraphAddEventWaitNode(&wait, graph_, nullptr, 0, first_), cudaSuccess);
  add_copy(y_, x_, &wait, 1);
  cudaGraphExec_t const exec = instantiate();
  fill<<<1, count, 0, b_>>>(x_, count, 7);
  SIM_TEST_TRY(cudaEventRecord(first_, b_));
  SIM_TEST_TRY(cudaGraphLaunch(exec, a_));
  EXPECT_EQ(sim_testing::copy_to_host(y_, count, a_), std::vector<int>(count, 7));
}

TEST_F(graph_event_nodes, a_record_node_records_the_completion_of_its_dependencies) {
  sim_testing::queued_work const queued;
  cudaMemsetParams memset{};
  memset.dst = x_;
  memset.value = 0x01;
  memset.elementSize = 1;
  memset.width = bytes;
  memset.height = 1;
  cudaGraphNode_t set{};
  ASSERT_EQ(cudaGraphAddMemsetNode(&set, graph_, nullptr, 0, &memset), cudaSuccess);
  cudaGraphNode_t record{};
  ASSERT_EQ(cudaGraphAddEventRecordNode(&record, graph_, &set, 1, first_), cudaSuccess);
  cudaGraphExec_t const exec = instantiate();
  SIM_TEST_TRY(cudaGraphLaunch(exec, a_));
  // Another stream ordered after the event sees the memset.
  SIM_TEST_TRY(cudaStreamWaitEvent(b_, first_, 0));
  SIM_TEST_TRY(cudaMemcpyAsync(y_, x_, bytes, cudaMemcpyDeviceToDevice, b_));
  EXPECT_EQ(sim_testing::copy_to_host(y_, count, b_), std::vector<int>(count, 0x01010101));
  SIM_TEST_TRY(cudaEventSynchronize(first_));
  EXPECT_EQ(cudaEventQuery(first_), cudaSuccess);
}

TEST_F(graph_event_nodes, a_nodes_event_reads_back_and_changes_in_the_graph_and_in_an_executable) {
  cudaGraphNode_t record{};
  ASSERT_EQ(cudaGraphAddEventRecordNode(&record, graph_, nullptr, 0, first_), cudaSuccess);
  cudaGraphNode_t wait{};
  ASSERT_EQ(cudaGraphAddEventWaitNode(&wait, graph_, &record, 1, first_), cudaSuccess);
  cudaEvent_t read{};
  ASSERT_EQ(cudaGraphEventRecordNodeGetEvent(record, &read), cudaSuccess);
  EXPECT_EQ(read, first_);
  ASSERT_EQ(cudaGraphEventWaitNodeGetEvent(wait, &read), cudaSuccess);
  EXPECT_EQ(read, first_);
  cudaGraphExec_t const exec = instantiate();
  // The executable records the second event from now on; the graph keeps the first.
  ASSERT_EQ(cudaGraphExecEventRecordNodeSetEvent(exec, record, second_), cudaSuccess);
  ASSERT_EQ(cudaGraphExecEventWaitNodeSetEvent(exec, wait, second_), cudaSuccess);
  ASSERT_EQ(cudaGraphEventRecordNodeGetEvent(record, &read), cudaSuccess);
  EXPECT_EQ(read, first_);
  SIM_TEST_TRY(cudaGraphLaunch(exec, a_));
  SIM_TEST_TRY(cudaStreamSynchronize(a_));
  float milliseconds = -1.0F;
  EXPECT_EQ(cudaEventElapsedTime(&milliseconds, second_, second_), cudaSuccess);
  // The first event was never recorded.
  EXPECT_NE(cudaEventElapsedTime(&milliseconds, first_, first_), cudaSuccess);
  static_cast<void>(cudaGetLastError());
  // The graph's nodes change for later instantiations.
  ASSERT_EQ(cudaGraphEventRecordNodeSetEvent(record, second_), cudaSuccess);
  ASSERT_EQ(cudaGraphEventWaitNodeSetEvent(wait, second_), cudaSuccess);
  ASSERT_EQ(cudaGraphEventWaitNodeGetEvent(wait, &read), cudaSuccess);
  EXPECT_EQ(read, second_);
}

TEST_F(graph_event_nodes, bad_event_node_input_is_an_invalid_value) {
  cudaGraphNode_t node{};
  EXPECT_EQ(cudaGraphAddEventRecordNode(&node, nullptr, nullptr, 0, first_), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphAddEventWaitNode(nullptr, graph_, nullptr, 0, first_), cudaErrorInvalidValue);
  ASSERT_EQ(cudaGraphAddEventRecordNode(&node, graph_, nullptr, 0, first_), cudaSuccess);
  cudaEvent_t read{};
  EXPECT_EQ(cudaGraphEventRecordNodeGetEvent(node, nullptr), cudaErrorInvalidValue);
  // A record node is not a wait node.
  EXPECT_EQ(cudaGraphEventWaitNodeGetEvent(node, &read), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphEventWaitNodeSetEvent(node, second_), cudaErrorInvalidValue);
  cudaGraphExec_t const exec = instantiate();
  EXPECT_EQ(cudaGraphExecEventWaitNodeSetEvent(exec, node, second_), cudaErrorInvalidValue);
  // A node added after instantiation names none of the executable's.
  cudaGraphNode_t later{};
  ASSERT_EQ(cudaGraphAddEventRecordNode(&later, graph_, nullptr, 0, first_), cudaSuccess);
  EXPECT_EQ(cudaGraphExecEventRecordNodeSetEvent(exec, later, second_), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}
