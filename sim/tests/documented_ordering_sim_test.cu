// Orderings CUDA documents as narrower than "the whole launch" or "a synchronization": each
// planted race is one a GPU may really run, and the checker must report it; its twin, ordered the
// way the documentation says, must not be reported. Each test runs in every execution mode
// (immediate, deferred, interleaved).

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <graphstep/sim/race_report.hpp>
#include <graphstep/sim/sim.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sim_test.hpp"

namespace gs = graphstep;

namespace {

class documented_ordering : public ::testing::TestWithParam<sim_testing::execution> {
 protected:
  void SetUp() override {
    execution_.emplace(GetParam());
    races_.emplace();
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&a_, cudaStreamNonBlocking));
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&b_, cudaStreamNonBlocking));
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&c_, cudaStreamNonBlocking));
    for (cudaEvent_t* e : {&event_, &fork_, &join_}) {
      SIM_TEST_TRY(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
    }
    SIM_TEST_TRY(cudaMalloc(&x_, bytes));
    SIM_TEST_TRY(cudaMalloc(&y_, bytes));
  }
  void TearDown() override {
    SIM_TEST_EXPECT_SUCCESS(cudaDeviceSynchronize());
    if (exec_ != nullptr) SIM_TEST_EXPECT_SUCCESS(cudaGraphExecDestroy(exec_));
    SIM_TEST_EXPECT_SUCCESS(cudaFree(x_));
    SIM_TEST_EXPECT_SUCCESS(cudaFree(y_));
    for (cudaEvent_t e : {event_, fork_, join_}) SIM_TEST_EXPECT_SUCCESS(cudaEventDestroy(e));
    SIM_TEST_EXPECT_SUCCESS(cudaStreamDestroy(a_));
    SIM_TEST_EXPECT_SUCCESS(cudaStreamDestroy(b_));
    SIM_TEST_EXPECT_SUCCESS(cudaStreamDestroy(c_));
  }
  [[nodiscard]] std::vector<std::string> new_races() const { return races_->found(); }

  // Captures `work` on stream a, which may fork to stream c (fork) and join it back (join), and
  // instantiates it. Event record and wait nodes come from cudaEventRecordExternal and
  // cudaEventWaitExternal.
  template <class Work>
  void capture(Work work) {
    SIM_TEST_TRY(cudaStreamBeginCapture(a_, cudaStreamCaptureModeThreadLocal));
    work();
    cudaGraph_t graph{};
    SIM_TEST_TRY(cudaStreamEndCapture(a_, &graph));
    SIM_TEST_TRY(cudaGraphInstantiate(&exec_, graph, 0));
    SIM_TEST_TRY(cudaGraphDestroy(graph));
  }
  void fork() {
    SIM_TEST_TRY(cudaEventRecord(fork_, a_));
    SIM_TEST_TRY(cudaStreamWaitEvent(c_, fork_, 0));
  }
  void join() {
    SIM_TEST_TRY(cudaEventRecord(join_, c_));
    SIM_TEST_TRY(cudaStreamWaitEvent(a_, join_, 0));
  }
  void record_node() {
    SIM_TEST_TRY(cudaEventRecordWithFlags(event_, a_, cudaEventRecordExternal));
  }
  void wait_node() { SIM_TEST_TRY(cudaStreamWaitEvent(a_, event_, cudaEventWaitExternal)); }

  static constexpr std::size_t bytes = 256;
  cudaStream_t a_{};
  cudaStream_t b_{};
  cudaStream_t c_{};  // the captured graph's second branch
  cudaEvent_t event_{};
  cudaEvent_t fork_{};
  cudaEvent_t join_{};
  void* x_{};
  void* y_{};
  cudaGraphExec_t exec_{};
  std::optional<sim_testing::execution_scope> execution_;
  std::optional<gs::sim::race_report> races_;  // after execution_: ends before it
};

INSTANTIATE_TEST_SUITE_P(every_execution, documented_ordering,
                         ::testing::ValuesIn(sim_testing::every_execution),
                         sim_testing::execution_name);

// --- an event record node records its dependencies, not the launch ----------------------------
// cudaGraphAddEventRecordNode: "Each launch of the graph will record event to capture execution
// of the node's dependencies."

TEST_P(documented_ordering, a_node_beside_an_event_record_node_is_not_ordered_by_the_event) {
  capture([&] {
    fork();
    SIM_TEST_TRY(cudaMemsetAsync(x_, 1, bytes, a_));
    record_node();  // after the memset of x, not the memset of y on the other branch
    SIM_TEST_TRY(cudaMemsetAsync(y_, 1, bytes, c_));
    join();
  });
  SIM_TEST_TRY(cudaGraphLaunch(exec_, a_));
  SIM_TEST_TRY(cudaStreamWaitEvent(b_, event_, 0));
  SIM_TEST_TRY(cudaMemsetAsync(x_, 2, bytes, b_));
  SIM_TEST_TRY(cudaMemsetAsync(y_, 2, bytes, b_));
  auto const found = new_races();
  ASSERT_EQ(found.size(), 1U);
  EXPECT_NE(found[0].find("write by memset of 256 bytes (node"), std::string::npos) << found[0];
  char y_range[32];
  static_cast<void>(std::snprintf(y_range, sizeof y_range, "[%p, ", y_));
  EXPECT_NE(found[0].find(y_range), std::string::npos) << found[0] << " should name " << y_range;
}

TEST_P(documented_ordering, the_event_record_nodes_dependencies_are_ordered_by_the_event) {
  capture([&] {
    fork();
    SIM_TEST_TRY(cudaMemsetAsync(x_, 1, bytes, a_));
    SIM_TEST_TRY(cudaMemsetAsync(y_, 1, bytes, c_));
    join();
    record_node();  // after both branches
  });
  for (int launch = 0; launch < 2; ++launch) {
    SIM_TEST_TRY(cudaGraphLaunch(exec_, a_));
    SIM_TEST_TRY(cudaStreamWaitEvent(b_, event_, 0));
    SIM_TEST_TRY(cudaMemsetAsync(x_, 2, bytes, b_));
    SIM_TEST_TRY(cudaMemsetAsync(y_, 2, bytes, b_));
    // The next launch is ordered after b's memsets through the host.
    SIM_TEST_TRY(cudaStreamSynchronize(b_));
  }
  // Work after the launch on its own stream is ordered after all of it, as before.
  SIM_TEST_TRY(cudaGraphLaunch(exec_, a_));
  SIM_TEST_TRY(cudaMemsetAsync(y_, 3, bytes, a_));
  EXPECT_TRUE(new_races().empty());
}

__global__ void trapping(int* out) {
  if (threadIdx.x == 3) __trap();
  out[threadIdx.x] = 1;
}

// A queued launch with an event record node, skipped because a kernel before it faulted: the
// work waiting for its event still runs (with the sticky error), rather than waiting forever.
void fault_before_a_recording_launch_and_exit() {
  gs::sim::set_execution_mode(gs::sim::execution_mode::deferred);
  cudaStream_t a{};
  cudaStream_t b{};
  cudaEvent_t event{};
  int* out{};
  if (cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking) != cudaSuccess ||
      cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking) != cudaSuccess ||
      cudaEventCreateWithFlags(&event, cudaEventDisableTiming) != cudaSuccess ||
      cudaMalloc(&out, 64 * sizeof(int)) != cudaSuccess) {
    std::exit(100);
  }
  cudaGraph_t graph{};
  cudaGraphExec_t exec{};
  if (cudaStreamBeginCapture(a, cudaStreamCaptureModeThreadLocal) != cudaSuccess ||
      cudaMemsetAsync(out, 0, sizeof(int), a) != cudaSuccess ||
      cudaEventRecordWithFlags(event, a, cudaEventRecordExternal) != cudaSuccess ||
      cudaStreamEndCapture(a, &graph) != cudaSuccess ||
      cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
    std::exit(101);
  }
  trapping<<<1, 64, 0, a>>>(out);
  if (cudaGraphLaunch(exec, a) != cudaSuccess || cudaStreamWaitEvent(b, event, 0) != cudaSuccess ||
      cudaMemsetAsync(out + 1, 0, sizeof(int), b) != cudaSuccess) {
    std::exit(102);
  }
  std::exit(cudaDeviceSynchronize() == cudaErrorLaunchFailure ? 0 : 1);
}

TEST(documented_ordering_after_a_fault, work_waiting_for_a_skipped_launchs_event_still_ends) {
  EXPECT_EXIT(fault_before_a_recording_launch_and_exit(), ::testing::ExitedWithCode(0),
              "kernel trapping faulted");
}

// --- an event wait node orders its dependents, not the launch ---------------------------------
// cudaGraphAddEventWaitNode: "The graph node will wait for all work captured in event"; a graph
// node runs after its dependencies only (cudaGraphAddNode: "dependencies ... must be complete
// before the node can run"), so nodes not behind the wait are not ordered after the event.

TEST_P(documented_ordering, a_node_beside_an_event_wait_node_is_not_ordered_after_the_event) {
  capture([&] {
    fork();  // before the wait: the other branch does not wait
    wait_node();
    SIM_TEST_TRY(cudaMemsetAsync(x_, 1, bytes, a_));
    SIM_TEST_TRY(cudaMemsetAsync(y_, 1, bytes, c_));
    join();
  });
  SIM_TEST_TRY(cudaMemsetAsync(x_, 2, bytes, b_));
  SIM_TEST_TRY(cudaMemsetAsync(y_, 2, bytes, b_));
  SIM_TEST_TRY(cudaEventRecord(event_, b_));
  SIM_TEST_TRY(cudaGraphLaunch(exec_, a_));
  auto const found = new_races();
  ASSERT_EQ(found.size(), 1U);
  EXPECT_NE(found[0].find("by memset of 256 bytes (node"), std::string::npos) << found[0];
  char y_range[32];
  static_cast<void>(std::snprintf(y_range, sizeof y_range, "[%p, ", y_));
  EXPECT_NE(found[0].find(y_range), std::string::npos) << found[0] << " should name " << y_range;
}

TEST_P(documented_ordering, the_event_wait_nodes_dependents_are_ordered_after_the_event) {
  capture([&] {
    wait_node();
    fork();  // after the wait: both branches wait
    SIM_TEST_TRY(cudaMemsetAsync(x_, 1, bytes, a_));
    SIM_TEST_TRY(cudaMemsetAsync(y_, 1, bytes, c_));
    join();
  });
  SIM_TEST_TRY(cudaMemsetAsync(x_, 2, bytes, b_));
  SIM_TEST_TRY(cudaMemsetAsync(y_, 2, bytes, b_));
  SIM_TEST_TRY(cudaEventRecord(event_, b_));
  SIM_TEST_TRY(cudaGraphLaunch(exec_, a_));
  // Work after the launch on its stream follows the wait too.
  SIM_TEST_TRY(cudaMemsetAsync(x_, 3, bytes, a_));
  EXPECT_TRUE(new_races().empty());
}

// --- cudaFree of stream-ordered memory does not synchronize -----------------------------------
// cudaFree: "This API will not perform any implicit synchronization when the pointer was
// allocated with cudaMallocAsync or cudaMallocFromPoolAsync. Callers must ensure that all
// accesses to these pointer have completed before invoking cudaFree."

TEST_P(documented_ordering, cuda_free_of_stream_ordered_memory_races_with_its_pending_work) {
  void* memory{};
  SIM_TEST_TRY(cudaMallocAsync(&memory, bytes, a_));
  SIM_TEST_TRY(cudaMemsetAsync(memory, 1, bytes, a_));
  SIM_TEST_TRY(cudaFree(memory));  // nothing made the memset complete first
  auto const found = new_races();
  ASSERT_EQ(found.size(), 1U);
  EXPECT_NE(found[0].find("write by memset"), std::string::npos) << found[0];
  EXPECT_NE(found[0].find("cudaFree"), std::string::npos) << found[0];
}

TEST_P(documented_ordering, cuda_free_of_stream_ordered_memory_after_a_sync_does_not_race) {
  void* memory{};
  SIM_TEST_TRY(cudaMallocAsync(&memory, bytes, a_));
  SIM_TEST_TRY(cudaMemsetAsync(memory, 1, bytes, a_));
  SIM_TEST_TRY(cudaStreamSynchronize(a_));
  SIM_TEST_TRY(cudaFree(memory));
  EXPECT_TRUE(new_races().empty());
}

TEST_P(documented_ordering, cuda_free_of_cuda_malloc_memory_still_synchronizes) {
  // "For all other pointers, this API may perform implicit synchronization": the simulator
  // takes the synchronizing reading there, as before.
  void* memory{};
  SIM_TEST_TRY(cudaMalloc(&memory, bytes));
  SIM_TEST_TRY(cudaMemsetAsync(memory, 1, bytes, a_));
  SIM_TEST_TRY(cudaFree(memory));
  EXPECT_TRUE(new_races().empty());
}

}  // namespace
