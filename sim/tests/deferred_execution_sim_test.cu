// Deferred and interleaved execution: queued work completes only when the host waits for it or
// the device is advanced, so queries, staged copies, stream-ordered frees and event waits take
// the paths they take on a GPU that is still busy.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include "sim_test.hpp"
#include <graphstep/sim/sim.hpp>
#include <set>
#include <vector>

#include "sim_test_kernels.cuh"

namespace gs = graphstep;

namespace {

__global__ void add_one(float* x, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) x[i] += 1.0F;
}

class deferred_execution : public ::testing::Test {
 protected:
  void SetUp() override {
    gs::sim::set_execution_mode(gs::sim::execution_mode::deferred);
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&a_, cudaStreamNonBlocking));
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&b_, cudaStreamNonBlocking));
    SIM_TEST_TRY(cudaMalloc(&x_, bytes));
    SIM_TEST_TRY(cudaMalloc(&y_, bytes));
    SIM_TEST_TRY(cudaMemsetAsync(x_, 0, bytes, a_));
    SIM_TEST_TRY(cudaMemsetAsync(y_, 0, bytes, a_));
    SIM_TEST_TRY(cudaStreamSynchronize(a_));
  }
  void TearDown() override {
    SIM_TEST_EXPECT_SUCCESS(cudaDeviceSynchronize());
    SIM_TEST_EXPECT_SUCCESS(cudaFree(x_));
    SIM_TEST_EXPECT_SUCCESS(cudaFree(y_));
    SIM_TEST_EXPECT_SUCCESS(cudaStreamDestroy(a_));
    SIM_TEST_EXPECT_SUCCESS(cudaStreamDestroy(b_));
    gs::sim::set_execution_mode(gs::sim::execution_mode::immediate);
  }
  [[nodiscard]] std::vector<float> read(float const* device) const {
    std::vector<float> host(n);
    SIM_TEST_TRY(cudaMemcpy(host.data(), device, bytes, cudaMemcpyDeviceToHost));
    return host;
  }

  static constexpr int n = 256;
  static constexpr std::size_t bytes = sizeof(float) * n;
  cudaStream_t a_{};
  cudaStream_t b_{};
  float* x_{};
  float* y_{};
};

}  // namespace

TEST_F(deferred_execution, work_waits_until_the_device_is_advanced_or_the_host_waits) {
  cudaEvent_t done{};
  SIM_TEST_TRY(cudaEventCreate(&done));
  add_one<<<1, n, 0, a_>>>(x_, n);
  add_one<<<1, n, 0, a_>>>(x_, n);
  SIM_TEST_TRY(cudaEventRecord(done, a_));
  EXPECT_EQ(gs::sim::queued_operations(), 3U);
  EXPECT_EQ(cudaStreamQuery(a_), cudaErrorNotReady);
  EXPECT_EQ(cudaEventQuery(done), cudaErrorNotReady);
  float elapsed = 0.0F;
  EXPECT_EQ(cudaEventElapsedTime(&elapsed, done, done), cudaErrorNotReady);
  static_cast<void>(cudaGetLastError());

  EXPECT_EQ(gs::sim::advance(1), 1U);  // the first launch only
  EXPECT_EQ(cudaStreamQuery(a_), cudaErrorNotReady);
  SIM_TEST_TRY(cudaEventSynchronize(done));  // runs the rest
  EXPECT_EQ(gs::sim::queued_operations(), 0U);
  EXPECT_EQ(cudaStreamQuery(a_), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(done), cudaSuccess);
  EXPECT_EQ(read(x_)[n - 1], 2.0F);
  SIM_TEST_TRY(cudaEventDestroy(done));
}

// A GPU finishes queued work while the host polls, so a loop that polls until the work is done
// (a watchdog's, NCCL's asynchronous error checks) ends there; here it ends too, and the work
// is still seen running at first.
TEST_F(deferred_execution, a_host_that_polls_sees_the_work_finish) {
  cudaEvent_t done{};
  SIM_TEST_TRY(cudaEventCreate(&done));
  add_one<<<1, n, 0, a_>>>(x_, n);
  add_one<<<1, n, 0, a_>>>(x_, n);
  SIM_TEST_TRY(cudaEventRecord(done, a_));
  int polls = 0;
  while (cudaEventQuery(done) == cudaErrorNotReady) {
    ASSERT_LT(++polls, 10000) << "polling the event never saw its work finish";
  }
  EXPECT_GT(polls, 1);  // seen running first
  EXPECT_EQ(gs::sim::queued_operations(), 0U);
  add_one<<<1, n, 0, b_>>>(y_, n);
  polls = 0;
  while (cudaStreamQuery(b_) == cudaErrorNotReady) {
    ASSERT_LT(++polls, 10000) << "polling the stream never saw its work finish";
  }
  EXPECT_GT(polls, 1);
  EXPECT_EQ(gs::sim::queued_operations(), 0U);
  EXPECT_EQ(read(x_)[n - 1], 2.0F);
  EXPECT_EQ(read(y_)[0], 1.0F);
  SIM_TEST_EXPECT_SUCCESS(cudaEventDestroy(done));
}

TEST_F(deferred_execution, an_event_wait_holds_the_waiting_stream_back) {
  cudaEvent_t written{};
  SIM_TEST_TRY(cudaEventCreateWithFlags(&written, cudaEventDisableTiming));
  add_one<<<1, n, 0, a_>>>(x_, n);
  SIM_TEST_TRY(cudaEventRecord(written, a_));
  SIM_TEST_TRY(cudaStreamWaitEvent(b_, written, 0));
  sim_testing::copy_kernel<<<1, n, 0, b_>>>(x_, y_, n);
  // Waiting for b runs a's work first: the copy sees the increment.
  SIM_TEST_TRY(cudaStreamSynchronize(b_));
  EXPECT_EQ(read(y_)[0], 1.0F);
  SIM_TEST_TRY(cudaEventDestroy(written));
}

TEST_F(deferred_execution, a_copy_from_pageable_memory_is_staged_when_it_is_enqueued) {
  std::vector<float> host(n, 5.0F);
  SIM_TEST_TRY(cudaMemcpyAsync(x_, host.data(), bytes, cudaMemcpyHostToDevice, a_));
  host.assign(n, 7.0F);  // too late: "copied to a staging buffer immediately"
  SIM_TEST_TRY(cudaStreamSynchronize(a_));
  EXPECT_EQ(read(x_)[0], 5.0F);
}

TEST_F(deferred_execution, a_copy_to_pageable_memory_has_landed_when_it_returns) {
  add_one<<<1, n, 0, a_>>>(x_, n);
  std::vector<float> host(n, -1.0F);
  SIM_TEST_TRY(cudaMemcpyAsync(host.data(), x_, bytes, cudaMemcpyDeviceToHost, a_));
  EXPECT_EQ(host[n - 1], 1.0F);  // no synchronization: the call returned after the copy
}

TEST_F(deferred_execution, a_copy_to_pinned_memory_lands_only_when_it_runs) {
  float* pinned = nullptr;
  SIM_TEST_TRY(cudaMallocHost(&pinned, bytes));
  pinned[0] = -1.0F;
  add_one<<<1, n, 0, a_>>>(x_, n);
  SIM_TEST_TRY(cudaMemcpyAsync(pinned, x_, bytes, cudaMemcpyDeviceToHost, a_));
  EXPECT_EQ(pinned[0], -1.0F);  // a host read before synchronizing sees the old value
  SIM_TEST_TRY(cudaStreamSynchronize(a_));
  EXPECT_EQ(pinned[0], 1.0F);
  SIM_TEST_TRY(cudaFreeHost(pinned));
}

TEST_F(deferred_execution, a_stream_ordered_free_gives_memory_back_when_the_stream_reaches_it) {
  float* temporary = nullptr;
  SIM_TEST_TRY(cudaMallocAsync(&temporary, bytes, a_));
  std::size_t free_before = 0;
  std::size_t total = 0;
  SIM_TEST_TRY(cudaMemGetInfo(&free_before, &total));
  SIM_TEST_TRY(cudaMemsetAsync(temporary, 0, bytes, a_));
  add_one<<<1, n, 0, a_>>>(temporary, n);  // still queued when the free is enqueued
  sim_testing::copy_kernel<<<1, n, 0, a_>>>(temporary, y_, n);
  SIM_TEST_TRY(cudaFreeAsync(temporary, a_));
  std::size_t free_queued = 0;
  SIM_TEST_TRY(cudaMemGetInfo(&free_queued, &total));
  EXPECT_EQ(free_queued, free_before);
  SIM_TEST_TRY(cudaStreamSynchronize(a_));  // the kernels run before the free
  std::size_t free_after = 0;
  SIM_TEST_TRY(cudaMemGetInfo(&free_after, &total));
  EXPECT_GT(free_after, free_before);
  EXPECT_EQ(read(y_)[0], 1.0F);
}

TEST_F(deferred_execution, a_queued_launch_runs_the_executable_as_it_was_launched) {
  cudaStream_t capturing{};
  SIM_TEST_TRY(cudaStreamCreateWithFlags(&capturing, cudaStreamNonBlocking));
  cudaGraph_t graph{};
  SIM_TEST_TRY(cudaStreamBeginCapture(capturing, cudaStreamCaptureModeThreadLocal));
  add_one<<<1, n, 0, capturing>>>(x_, n);
  SIM_TEST_TRY(cudaStreamEndCapture(capturing, &graph));
  cudaGraphExec_t exec{};
  SIM_TEST_TRY(cudaGraphInstantiate(&exec, graph, 0));
  SIM_TEST_TRY(cudaGraphLaunch(exec, a_));
  SIM_TEST_TRY(cudaGraphLaunch(exec, a_));
  // Destroyed while in flight: "freed asynchronously on completion" (cudaGraphExecDestroy).
  SIM_TEST_TRY(cudaGraphExecDestroy(exec));
  SIM_TEST_TRY(cudaGraphDestroy(graph));
  EXPECT_EQ(gs::sim::queued_operations(), 2U);
  SIM_TEST_TRY(cudaStreamSynchronize(a_));
  EXPECT_EQ(read(x_)[0], 2.0F);
  SIM_TEST_TRY(cudaStreamDestroy(capturing));
}

// cudaEventRecord "captures in event the contents of stream at the time of this call": an event
// last recorded in a capture is an ordinary event again from the call that records it outside
// one, not from the moment that record runs, and a record that runs later does not undo a
// capture's record made in between.
TEST_F(deferred_execution, an_events_capture_state_follows_the_order_of_its_records) {
  cudaEvent_t event{};
  SIM_TEST_TRY(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  cudaStream_t capturing{};
  SIM_TEST_TRY(cudaStreamCreateWithFlags(&capturing, cudaStreamNonBlocking));
  auto const capture_a_record = [&] {
    cudaGraph_t graph{};
    SIM_TEST_TRY(cudaStreamBeginCapture(capturing, cudaStreamCaptureModeThreadLocal));
    add_one<<<1, n, 0, capturing>>>(x_, n);
    SIM_TEST_TRY(cudaEventRecord(event, capturing));
    SIM_TEST_TRY(cudaStreamEndCapture(capturing, &graph));
    SIM_TEST_TRY(cudaGraphDestroy(graph));
  };

  capture_a_record();
  add_one<<<1, n, 0, a_>>>(x_, n);
  SIM_TEST_TRY(cudaEventRecord(event, a_));  // queued behind the launch
  EXPECT_EQ(gs::sim::queued_operations(), 2U);
  EXPECT_EQ(cudaStreamWaitEvent(b_, event, 0), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(event), cudaErrorNotReady);
  static_cast<void>(cudaGetLastError());
  SIM_TEST_TRY(cudaStreamSynchronize(b_));
  EXPECT_EQ(cudaEventQuery(event), cudaSuccess);

  add_one<<<1, n, 0, a_>>>(x_, n);
  SIM_TEST_TRY(cudaEventRecord(event, a_));
  capture_a_record();  // recorded in a capture after the queued record was issued
  while (gs::sim::advance() > 0) {
  }
  EXPECT_EQ(cudaEventQuery(event), cudaErrorCapturedEvent);
  static_cast<void>(cudaGetLastError());
  SIM_TEST_TRY(cudaStreamSynchronize(a_));
  EXPECT_EQ(read(x_)[0], 2.0F);  // the captures' launches never ran
  SIM_TEST_TRY(cudaStreamDestroy(capturing));
  SIM_TEST_TRY(cudaEventDestroy(event));
}

TEST_F(deferred_execution, the_queue_is_bounded_as_a_gpus_launch_queue_is) {
  for (int i = 0; i < 3000; ++i) add_one<<<1, n, 0, a_>>>(x_, n);
  EXPECT_LE(gs::sim::queued_operations(), 1024U);
  SIM_TEST_TRY(cudaStreamSynchronize(a_));
  EXPECT_EQ(read(x_)[0], 3000.0F);
}

// A read on stream b that does not wait for a's writes: each seed completes the work in another
// order, and some orders show the bug in the result itself, not only to the race checker.
TEST(interleaved_execution, seeds_complete_unordered_work_in_different_orders) {
  gs::sim::race_mode const before = gs::sim::current_race_mode();
  gs::sim::set_race_mode(gs::sim::race_mode::report);
  int const n = 64;
  std::size_t const bytes = sizeof(float) * n;
  cudaStream_t a{};
  cudaStream_t b{};
  float* x = nullptr;
  float* y = nullptr;
  SIM_TEST_TRY(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  SIM_TEST_TRY(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  SIM_TEST_TRY(cudaMalloc(&x, bytes));
  SIM_TEST_TRY(cudaMalloc(&y, bytes));
  std::set<float> seen;
  for (std::uint64_t seed = 1; seed <= 16; ++seed) {
    SIM_TEST_TRY(cudaMemset(x, 0, bytes));
    SIM_TEST_TRY(cudaDeviceSynchronize());
    gs::sim::set_execution_mode(gs::sim::execution_mode::interleaved, seed);
    for (int i = 0; i < 4; ++i) add_one<<<1, n, 0, a>>>(x, n);
    sim_testing::copy_kernel<<<1, n, 0, b>>>(x, y, n);  // no wait on a: unordered
    SIM_TEST_TRY(cudaDeviceSynchronize());
    gs::sim::set_execution_mode(gs::sim::execution_mode::immediate);
    float copied = 0.0F;
    SIM_TEST_TRY(cudaMemcpy(&copied, y, sizeof copied, cudaMemcpyDeviceToHost));
    seen.insert(copied);
  }
  EXPECT_GT(seen.size(), 1U);
  EXPECT_FALSE(gs::sim::races().empty());
  gs::sim::set_race_mode(before);
  SIM_TEST_TRY(cudaFree(x));
  SIM_TEST_TRY(cudaFree(y));
  SIM_TEST_TRY(cudaStreamDestroy(a));
  SIM_TEST_TRY(cudaStreamDestroy(b));
}

TEST(interleaved_execution, ordered_work_gives_the_same_result_on_every_seed) {
  int const n = 64;
  std::size_t const bytes = sizeof(float) * n;
  cudaStream_t a{};
  cudaStream_t b{};
  cudaEvent_t written{};
  float* x = nullptr;
  float* y = nullptr;
  SIM_TEST_TRY(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  SIM_TEST_TRY(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  SIM_TEST_TRY(cudaEventCreateWithFlags(&written, cudaEventDisableTiming));
  SIM_TEST_TRY(cudaMalloc(&x, bytes));
  SIM_TEST_TRY(cudaMalloc(&y, bytes));
  for (std::uint64_t seed = 1; seed <= 16; ++seed) {
    SIM_TEST_TRY(cudaMemset(x, 0, bytes));
    SIM_TEST_TRY(cudaDeviceSynchronize());
    gs::sim::set_execution_mode(gs::sim::execution_mode::interleaved, seed);
    for (int i = 0; i < 4; ++i) add_one<<<1, n, 0, a>>>(x, n);
    SIM_TEST_TRY(cudaEventRecord(written, a));
    SIM_TEST_TRY(cudaStreamWaitEvent(b, written, 0));
    sim_testing::copy_kernel<<<1, n, 0, b>>>(x, y, n);
    float copied = 0.0F;
    SIM_TEST_TRY(cudaMemcpyAsync(&copied, y, sizeof copied, cudaMemcpyDeviceToHost, b));
    gs::sim::set_execution_mode(gs::sim::execution_mode::immediate);
    EXPECT_EQ(copied, 4.0F) << "seed " << seed;
  }
  SIM_TEST_TRY(cudaFree(x));
  SIM_TEST_TRY(cudaFree(y));
  SIM_TEST_TRY(cudaEventDestroy(written));
  SIM_TEST_TRY(cudaStreamDestroy(a));
  SIM_TEST_TRY(cudaStreamDestroy(b));
}
