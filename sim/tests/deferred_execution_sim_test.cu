// Deferred and interleaved execution: queued work completes only when the host waits for it or
// the device is advanced, so queries, staged copies, stream-ordered frees and event waits take
// the paths they take on a GPU that is still busy.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <graphstep/cuda/check.hpp>
#include <graphstep/sim/sim.hpp>
#include <set>
#include <vector>

#include "common/test_kernels.cuh"

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
    GRAPHSTEP_CUDA_TRY(cudaStreamCreateWithFlags(&a_, cudaStreamNonBlocking));
    GRAPHSTEP_CUDA_TRY(cudaStreamCreateWithFlags(&b_, cudaStreamNonBlocking));
    GRAPHSTEP_CUDA_TRY(cudaMalloc(&x_, bytes));
    GRAPHSTEP_CUDA_TRY(cudaMalloc(&y_, bytes));
    GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(x_, 0, bytes, a_));
    GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(y_, 0, bytes, a_));
    GRAPHSTEP_CUDA_TRY(cudaStreamSynchronize(a_));
  }
  void TearDown() override {
    GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaDeviceSynchronize());
    GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaFree(x_));
    GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaFree(y_));
    GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaStreamDestroy(a_));
    GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaStreamDestroy(b_));
    gs::sim::set_execution_mode(gs::sim::execution_mode::immediate);
  }
  [[nodiscard]] std::vector<float> read(float const* device) const {
    std::vector<float> host(n);
    GRAPHSTEP_CUDA_TRY(cudaMemcpy(host.data(), device, bytes, cudaMemcpyDeviceToHost));
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
  GRAPHSTEP_CUDA_TRY(cudaEventCreate(&done));
  add_one<<<1, n, 0, a_>>>(x_, n);
  add_one<<<1, n, 0, a_>>>(x_, n);
  GRAPHSTEP_CUDA_TRY(cudaEventRecord(done, a_));
  EXPECT_EQ(gs::sim::queued_operations(), 3U);
  EXPECT_EQ(cudaStreamQuery(a_), cudaErrorNotReady);
  EXPECT_EQ(cudaEventQuery(done), cudaErrorNotReady);
  float elapsed = 0.0F;
  EXPECT_EQ(cudaEventElapsedTime(&elapsed, done, done), cudaErrorNotReady);
  static_cast<void>(cudaGetLastError());

  EXPECT_EQ(gs::sim::advance(1), 1U);  // the first launch only
  EXPECT_EQ(cudaStreamQuery(a_), cudaErrorNotReady);
  GRAPHSTEP_CUDA_TRY(cudaEventSynchronize(done));  // runs the rest
  EXPECT_EQ(gs::sim::queued_operations(), 0U);
  EXPECT_EQ(cudaStreamQuery(a_), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(done), cudaSuccess);
  EXPECT_EQ(read(x_)[n - 1], 2.0F);
  GRAPHSTEP_CUDA_TRY(cudaEventDestroy(done));
}

TEST_F(deferred_execution, an_event_wait_holds_the_waiting_stream_back) {
  cudaEvent_t written{};
  GRAPHSTEP_CUDA_TRY(cudaEventCreateWithFlags(&written, cudaEventDisableTiming));
  add_one<<<1, n, 0, a_>>>(x_, n);
  GRAPHSTEP_CUDA_TRY(cudaEventRecord(written, a_));
  GRAPHSTEP_CUDA_TRY(cudaStreamWaitEvent(b_, written, 0));
  gs::testing::copy_kernel<<<1, n, 0, b_>>>(x_, y_, n);
  // Waiting for b runs a's work first: the copy sees the increment.
  GRAPHSTEP_CUDA_TRY(cudaStreamSynchronize(b_));
  EXPECT_EQ(read(y_)[0], 1.0F);
  GRAPHSTEP_CUDA_TRY(cudaEventDestroy(written));
}

TEST_F(deferred_execution, a_copy_from_pageable_memory_is_staged_when_it_is_enqueued) {
  std::vector<float> host(n, 5.0F);
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(x_, host.data(), bytes, cudaMemcpyHostToDevice, a_));
  host.assign(n, 7.0F);  // too late: "copied to a staging buffer immediately"
  GRAPHSTEP_CUDA_TRY(cudaStreamSynchronize(a_));
  EXPECT_EQ(read(x_)[0], 5.0F);
}

TEST_F(deferred_execution, a_copy_to_pageable_memory_has_landed_when_it_returns) {
  add_one<<<1, n, 0, a_>>>(x_, n);
  std::vector<float> host(n, -1.0F);
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(host.data(), x_, bytes, cudaMemcpyDeviceToHost, a_));
  EXPECT_EQ(host[n - 1], 1.0F);  // no synchronization: the call returned after the copy
}

TEST_F(deferred_execution, a_copy_to_pinned_memory_lands_only_when_it_runs) {
  float* pinned = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaMallocHost(&pinned, bytes));
  pinned[0] = -1.0F;
  add_one<<<1, n, 0, a_>>>(x_, n);
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(pinned, x_, bytes, cudaMemcpyDeviceToHost, a_));
  EXPECT_EQ(pinned[0], -1.0F);  // a host read before synchronizing sees the old value
  GRAPHSTEP_CUDA_TRY(cudaStreamSynchronize(a_));
  EXPECT_EQ(pinned[0], 1.0F);
  GRAPHSTEP_CUDA_TRY(cudaFreeHost(pinned));
}

TEST_F(deferred_execution, a_stream_ordered_free_gives_memory_back_when_the_stream_reaches_it) {
  float* temporary = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaMallocAsync(&temporary, bytes, a_));
  std::size_t free_before = 0;
  std::size_t total = 0;
  GRAPHSTEP_CUDA_TRY(cudaMemGetInfo(&free_before, &total));
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(temporary, 0, bytes, a_));
  add_one<<<1, n, 0, a_>>>(temporary, n);  // still queued when the free is enqueued
  gs::testing::copy_kernel<<<1, n, 0, a_>>>(temporary, y_, n);
  GRAPHSTEP_CUDA_TRY(cudaFreeAsync(temporary, a_));
  std::size_t free_queued = 0;
  GRAPHSTEP_CUDA_TRY(cudaMemGetInfo(&free_queued, &total));
  EXPECT_EQ(free_queued, free_before);
  GRAPHSTEP_CUDA_TRY(cudaStreamSynchronize(a_));  // the kernels run before the free
  std::size_t free_after = 0;
  GRAPHSTEP_CUDA_TRY(cudaMemGetInfo(&free_after, &total));
  EXPECT_GT(free_after, free_before);
  EXPECT_EQ(read(y_)[0], 1.0F);
}

TEST_F(deferred_execution, a_queued_launch_runs_the_executable_as_it_was_launched) {
  cudaStream_t capturing{};
  GRAPHSTEP_CUDA_TRY(cudaStreamCreateWithFlags(&capturing, cudaStreamNonBlocking));
  cudaGraph_t graph{};
  GRAPHSTEP_CUDA_TRY(cudaStreamBeginCapture(capturing, cudaStreamCaptureModeThreadLocal));
  add_one<<<1, n, 0, capturing>>>(x_, n);
  GRAPHSTEP_CUDA_TRY(cudaStreamEndCapture(capturing, &graph));
  cudaGraphExec_t exec{};
  GRAPHSTEP_CUDA_TRY(cudaGraphInstantiate(&exec, graph, 0));
  GRAPHSTEP_CUDA_TRY(cudaGraphLaunch(exec, a_));
  GRAPHSTEP_CUDA_TRY(cudaGraphLaunch(exec, a_));
  // Destroyed while in flight: "freed asynchronously on completion" (cudaGraphExecDestroy).
  GRAPHSTEP_CUDA_TRY(cudaGraphExecDestroy(exec));
  GRAPHSTEP_CUDA_TRY(cudaGraphDestroy(graph));
  EXPECT_EQ(gs::sim::queued_operations(), 2U);
  GRAPHSTEP_CUDA_TRY(cudaStreamSynchronize(a_));
  EXPECT_EQ(read(x_)[0], 2.0F);
  GRAPHSTEP_CUDA_TRY(cudaStreamDestroy(capturing));
}

// cudaEventRecord "captures in event the contents of stream at the time of this call": an event
// last recorded in a capture is an ordinary event again from the call that records it outside
// one, not from the moment that record runs, and a record that runs later does not undo a
// capture's record made in between.
TEST_F(deferred_execution, an_events_capture_state_follows_the_order_of_its_records) {
  cudaEvent_t event{};
  GRAPHSTEP_CUDA_TRY(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  cudaStream_t capturing{};
  GRAPHSTEP_CUDA_TRY(cudaStreamCreateWithFlags(&capturing, cudaStreamNonBlocking));
  auto const capture_a_record = [&] {
    cudaGraph_t graph{};
    GRAPHSTEP_CUDA_TRY(cudaStreamBeginCapture(capturing, cudaStreamCaptureModeThreadLocal));
    add_one<<<1, n, 0, capturing>>>(x_, n);
    GRAPHSTEP_CUDA_TRY(cudaEventRecord(event, capturing));
    GRAPHSTEP_CUDA_TRY(cudaStreamEndCapture(capturing, &graph));
    GRAPHSTEP_CUDA_TRY(cudaGraphDestroy(graph));
  };

  capture_a_record();
  add_one<<<1, n, 0, a_>>>(x_, n);
  GRAPHSTEP_CUDA_TRY(cudaEventRecord(event, a_));  // queued behind the launch
  EXPECT_EQ(gs::sim::queued_operations(), 2U);
  EXPECT_EQ(cudaStreamWaitEvent(b_, event, 0), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(event), cudaErrorNotReady);
  static_cast<void>(cudaGetLastError());
  GRAPHSTEP_CUDA_TRY(cudaStreamSynchronize(b_));
  EXPECT_EQ(cudaEventQuery(event), cudaSuccess);

  add_one<<<1, n, 0, a_>>>(x_, n);
  GRAPHSTEP_CUDA_TRY(cudaEventRecord(event, a_));
  capture_a_record();  // recorded in a capture after the queued record was issued
  while (gs::sim::advance() > 0) {
  }
  EXPECT_EQ(cudaEventQuery(event), cudaErrorCapturedEvent);
  static_cast<void>(cudaGetLastError());
  GRAPHSTEP_CUDA_TRY(cudaStreamSynchronize(a_));
  EXPECT_EQ(read(x_)[0], 2.0F);  // the captures' launches never ran
  GRAPHSTEP_CUDA_TRY(cudaStreamDestroy(capturing));
  GRAPHSTEP_CUDA_TRY(cudaEventDestroy(event));
}

TEST_F(deferred_execution, the_queue_is_bounded_as_a_gpus_launch_queue_is) {
  for (int i = 0; i < 3000; ++i) add_one<<<1, n, 0, a_>>>(x_, n);
  EXPECT_LE(gs::sim::queued_operations(), 1024U);
  GRAPHSTEP_CUDA_TRY(cudaStreamSynchronize(a_));
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
  GRAPHSTEP_CUDA_TRY(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  GRAPHSTEP_CUDA_TRY(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  GRAPHSTEP_CUDA_TRY(cudaMalloc(&x, bytes));
  GRAPHSTEP_CUDA_TRY(cudaMalloc(&y, bytes));
  std::set<float> seen;
  for (std::uint64_t seed = 1; seed <= 16; ++seed) {
    GRAPHSTEP_CUDA_TRY(cudaMemset(x, 0, bytes));
    GRAPHSTEP_CUDA_TRY(cudaDeviceSynchronize());
    gs::sim::set_execution_mode(gs::sim::execution_mode::interleaved, seed);
    for (int i = 0; i < 4; ++i) add_one<<<1, n, 0, a>>>(x, n);
    gs::testing::copy_kernel<<<1, n, 0, b>>>(x, y, n);  // no wait on a: unordered
    GRAPHSTEP_CUDA_TRY(cudaDeviceSynchronize());
    gs::sim::set_execution_mode(gs::sim::execution_mode::immediate);
    float copied = 0.0F;
    GRAPHSTEP_CUDA_TRY(cudaMemcpy(&copied, y, sizeof copied, cudaMemcpyDeviceToHost));
    seen.insert(copied);
  }
  EXPECT_GT(seen.size(), 1U);
  EXPECT_FALSE(gs::sim::races().empty());
  gs::sim::set_race_mode(before);
  GRAPHSTEP_CUDA_TRY(cudaFree(x));
  GRAPHSTEP_CUDA_TRY(cudaFree(y));
  GRAPHSTEP_CUDA_TRY(cudaStreamDestroy(a));
  GRAPHSTEP_CUDA_TRY(cudaStreamDestroy(b));
}

TEST(interleaved_execution, ordered_work_gives_the_same_result_on_every_seed) {
  int const n = 64;
  std::size_t const bytes = sizeof(float) * n;
  cudaStream_t a{};
  cudaStream_t b{};
  cudaEvent_t written{};
  float* x = nullptr;
  float* y = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  GRAPHSTEP_CUDA_TRY(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  GRAPHSTEP_CUDA_TRY(cudaEventCreateWithFlags(&written, cudaEventDisableTiming));
  GRAPHSTEP_CUDA_TRY(cudaMalloc(&x, bytes));
  GRAPHSTEP_CUDA_TRY(cudaMalloc(&y, bytes));
  for (std::uint64_t seed = 1; seed <= 16; ++seed) {
    GRAPHSTEP_CUDA_TRY(cudaMemset(x, 0, bytes));
    GRAPHSTEP_CUDA_TRY(cudaDeviceSynchronize());
    gs::sim::set_execution_mode(gs::sim::execution_mode::interleaved, seed);
    for (int i = 0; i < 4; ++i) add_one<<<1, n, 0, a>>>(x, n);
    GRAPHSTEP_CUDA_TRY(cudaEventRecord(written, a));
    GRAPHSTEP_CUDA_TRY(cudaStreamWaitEvent(b, written, 0));
    gs::testing::copy_kernel<<<1, n, 0, b>>>(x, y, n);
    float copied = 0.0F;
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(&copied, y, sizeof copied, cudaMemcpyDeviceToHost, b));
    gs::sim::set_execution_mode(gs::sim::execution_mode::immediate);
    EXPECT_EQ(copied, 4.0F) << "seed " << seed;
  }
  GRAPHSTEP_CUDA_TRY(cudaFree(x));
  GRAPHSTEP_CUDA_TRY(cudaFree(y));
  GRAPHSTEP_CUDA_TRY(cudaEventDestroy(written));
  GRAPHSTEP_CUDA_TRY(cudaStreamDestroy(a));
  GRAPHSTEP_CUDA_TRY(cudaStreamDestroy(b));
}
