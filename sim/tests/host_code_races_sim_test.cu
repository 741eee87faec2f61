// Host code run as stream work (cudaLaunchHostFunc, host nodes of a graph, cudaStreamAddCallback)
// reading or writing pinned or managed memory while device work on another stream, unordered with
// it, touches the same bytes: a race on a GPU, where the host function and the device work may run
// at once. Each planted race beside its twin ordered as CUDA documents (an event, a graph edge),
// which must pass; the checker sees the bytes the host code touched, not the whole buffer. Each
// test runs in every execution mode (immediate, deferred, interleaved).

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <graphstep/sim/race_report.hpp>
#include <graphstep/sim/sim.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sim_test.hpp"

namespace gs = graphstep;

namespace {

constexpr int count = 64;

// What a host function fills: data[first, last) = value + index.
struct fill_job {
  int* data{};
  int first{};
  int last{};
  int value{};
};

void CUDART_CB fill(void* raw) {
  auto const& job = *static_cast<fill_job const*>(raw);
  for (int i = job.first; i < job.last; ++i) job.data[i] = job.value + i;
}

// What a host function or callback adds up: the sum of data[first, last) into *sum.
struct sum_job {
  int const* data{};
  int first{};
  int last{};
  long sum{};
};

void CUDART_CB add_up(void* raw) {
  auto& job = *static_cast<sum_job*>(raw);
  job.sum = 0;
  for (int i = job.first; i < job.last; ++i) job.sum += job.data[i];
}

void CUDART_CB add_up_after(cudaStream_t /*stream*/, cudaError_t /*status*/, void* raw) {
  add_up(raw);
}

// A staging copy, as trainers write them: memcpy out of pinned memory by name.
struct copy_job {
  int const* from{};
  std::vector<int> into;
};

void CUDART_CB copy_out(void* raw) {
  auto& job = *static_cast<copy_job*>(raw);
  std::memcpy(job.into.data(), job.from, job.into.size() * sizeof(int));
}

__global__ void copy_ints(int const* from, int* to, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) to[i] = from[i];
}

class host_code_races : public ::testing::TestWithParam<sim_testing::execution> {
 protected:
  void SetUp() override {
    execution_.emplace(GetParam());
    if (!gs::sim::kernel_accesses_instrumented) {
      GTEST_SKIP() << "this build is not instrumented (GRAPHSTEP_SIM_WATCH_ACCESSES off, or "
                      "another sanitizer instruments it): host functions' accesses are not seen";
    }
    races_.emplace();
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&a_, cudaStreamNonBlocking));
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&b_, cudaStreamNonBlocking));
    SIM_TEST_TRY(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
    SIM_TEST_TRY(cudaHostAlloc(&pinned_, count * sizeof(int), cudaHostAllocDefault));
    SIM_TEST_TRY(cudaMallocManaged(&managed_, count * sizeof(int)));
    SIM_TEST_TRY(cudaMalloc(&device_, count * sizeof(int)));
    for (int i = 0; i < count; ++i) pinned_[i] = managed_[i] = i;
    SIM_TEST_TRY(cudaMemset(device_, 0, count * sizeof(int)));
    // The simulated device knows a kernel by address (kernel nodes) from its first launch.
    copy_ints<<<1, count>>>(device_, device_, count);
    SIM_TEST_TRY(cudaGetLastError());
    SIM_TEST_TRY(cudaDeviceSynchronize());
  }
  void TearDown() override {
    if (a_ == nullptr) return;  // skipped
    SIM_TEST_EXPECT_SUCCESS(cudaDeviceSynchronize());
    if (exec_ != nullptr) SIM_TEST_EXPECT_SUCCESS(cudaGraphExecDestroy(exec_));
    if (graph_ != nullptr) SIM_TEST_EXPECT_SUCCESS(cudaGraphDestroy(graph_));
    SIM_TEST_EXPECT_SUCCESS(cudaFreeHost(pinned_));
    SIM_TEST_EXPECT_SUCCESS(cudaFree(managed_));
    SIM_TEST_EXPECT_SUCCESS(cudaFree(device_));
    SIM_TEST_EXPECT_SUCCESS(cudaEventDestroy(done_));
    SIM_TEST_EXPECT_SUCCESS(cudaStreamDestroy(a_));
    SIM_TEST_EXPECT_SUCCESS(cudaStreamDestroy(b_));
  }
  [[nodiscard]] std::vector<std::string> new_races() const { return races_->found(); }
  // Whether `race` names the range starting at `address`.
  static bool names(std::string const& race, void const* address) {
    char begin[32];
    static_cast<void>(std::snprintf(begin, sizeof begin, "[%p, ", address));
    return race.find(begin) != std::string::npos;
  }
  // The host's copy into the device on stream b, kernel after kernel: reads of `from`.
  void read_on_b(int const* from) {
    copy_ints<<<1, count, 0, b_>>>(from, device_, count);
    SIM_TEST_TRY(cudaGetLastError());
  }

  cudaStream_t a_{};
  cudaStream_t b_{};
  cudaEvent_t done_{};
  int* pinned_{};
  int* managed_{};
  int* device_{};
  cudaGraph_t graph_{};
  cudaGraphExec_t exec_{};
  std::optional<sim_testing::execution_scope> execution_;
  std::optional<gs::sim::race_report> races_;  // after execution_: ends before it
};

INSTANTIATE_TEST_SUITE_P(every_execution, host_code_races,
                         ::testing::ValuesIn(sim_testing::every_execution),
                         sim_testing::execution_name);

// --- cudaLaunchHostFunc ----------------------------------------------------------------------

TEST_P(host_code_races, a_host_function_writing_pinned_memory_races_with_a_kernel_reading_it) {
  fill_job job{pinned_, 0, count, 100};
  SIM_TEST_TRY(cudaLaunchHostFunc(a_, fill, &job));
  read_on_b(pinned_);  // not ordered after the host function
  auto const found = new_races();
  ASSERT_EQ(found.size(), 1U);
  EXPECT_NE(found[0].find("host function"), std::string::npos) << found[0];
  EXPECT_TRUE(names(found[0], pinned_)) << found[0];
}

TEST_P(host_code_races, a_kernel_ordered_after_the_host_function_by_an_event_does_not_race) {
  fill_job job{pinned_, 0, count, 100};
  SIM_TEST_TRY(cudaLaunchHostFunc(a_, fill, &job));
  SIM_TEST_TRY(cudaEventRecord(done_, a_));
  SIM_TEST_TRY(cudaStreamWaitEvent(b_, done_, 0));
  read_on_b(pinned_);
  EXPECT_TRUE(new_races().empty());
  SIM_TEST_TRY(cudaStreamSynchronize(b_));
  std::vector<int> copied(count);
  SIM_TEST_TRY(cudaMemcpy(copied.data(), device_, count * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < count; ++i) ASSERT_EQ(copied[static_cast<std::size_t>(i)], 100 + i) << i;
}

TEST_P(host_code_races, only_the_bytes_a_host_function_touches_are_its_accesses) {
  // The host function writes the first half; the kernel reads the second half only.
  fill_job job{pinned_, 0, count / 2, 100};
  SIM_TEST_TRY(cudaLaunchHostFunc(a_, fill, &job));
  copy_ints<<<1, count / 2, 0, b_>>>(pinned_ + count / 2, device_, count / 2);
  SIM_TEST_TRY(cudaGetLastError());
  EXPECT_TRUE(new_races().empty());
}

TEST_P(host_code_races, a_host_function_reading_managed_memory_races_with_a_kernel_writing_it) {
  sum_job job{managed_, 0, count, 0};
  SIM_TEST_TRY(cudaLaunchHostFunc(a_, add_up, &job));
  copy_ints<<<1, count, 0, b_>>>(device_, managed_, count);  // writes managed memory
  SIM_TEST_TRY(cudaGetLastError());
  auto const found = new_races();
  ASSERT_EQ(found.size(), 1U);
  EXPECT_TRUE(names(found[0], managed_)) << found[0];
}

TEST_P(host_code_races, a_host_functions_memcpy_out_of_pinned_memory_races_with_a_copy_into_it) {
  copy_job job{pinned_, std::vector<int>(count)};
  SIM_TEST_TRY(cudaLaunchHostFunc(a_, copy_out, &job));
  SIM_TEST_TRY(cudaMemcpyAsync(pinned_, device_, count * sizeof(int), cudaMemcpyDeviceToHost, b_));
  auto const found = new_races();
  ASSERT_EQ(found.size(), 1U);
  EXPECT_NE(found[0].find("read by host function"), std::string::npos) << found[0];
  EXPECT_TRUE(names(found[0], pinned_)) << found[0];
  SIM_TEST_TRY(cudaDeviceSynchronize());
  // Ordered by an event: the same copy does not race.
  SIM_TEST_TRY(cudaLaunchHostFunc(a_, copy_out, &job));
  SIM_TEST_TRY(cudaEventRecord(done_, a_));
  SIM_TEST_TRY(cudaStreamWaitEvent(b_, done_, 0));
  SIM_TEST_TRY(cudaMemcpyAsync(pinned_, device_, count * sizeof(int), cudaMemcpyDeviceToHost, b_));
  EXPECT_EQ(new_races().size(), 1U);
}

TEST_P(host_code_races, two_host_functions_reading_the_same_memory_do_not_race) {
  sum_job first{pinned_, 0, count, 0};
  sum_job second{pinned_, 0, count, 0};
  SIM_TEST_TRY(cudaLaunchHostFunc(a_, add_up, &first));
  SIM_TEST_TRY(cudaLaunchHostFunc(b_, add_up, &second));
  EXPECT_TRUE(new_races().empty());
  EXPECT_EQ(first.sum, static_cast<long>(count) * (count - 1) / 2);
  EXPECT_EQ(second.sum, first.sum);
}

// --- host nodes of a graph --------------------------------------------------------------------

// A graph of two roots: a host node running `host` and a kernel node copying `from` into `to`,
// with an edge from the host node to the kernel node when `ordered`.
TEST_P(host_code_races, a_host_node_beside_a_kernel_node_on_the_same_bytes_races) {
  for (bool const ordered : {false, true}) {
    SCOPED_TRACE(ordered ? "ordered by an edge" : "two unordered branches");
    races_.emplace();  // the races of this pass only
    fill_job job{managed_, 0, count, 7};
    SIM_TEST_TRY(cudaGraphCreate(&graph_, 0));
    cudaHostNodeParams host{};
    host.fn = fill;
    host.userData = &job;
    cudaGraphNode_t host_node{};
    SIM_TEST_TRY(cudaGraphAddHostNode(&host_node, graph_, nullptr, 0, &host));
    int n = count;
    int const* from = managed_;
    int* to = device_;
    void* arguments[] = {&from, &to, &n};
    cudaKernelNodeParams kernel{};
    kernel.func = reinterpret_cast<void*>(copy_ints);
    kernel.gridDim = dim3{1};
    kernel.blockDim = dim3{static_cast<unsigned>(count)};
    kernel.kernelParams = arguments;
    cudaGraphNode_t kernel_node{};
    SIM_TEST_TRY(cudaGraphAddKernelNode(&kernel_node, graph_, ordered ? &host_node : nullptr,
                                        ordered ? 1 : 0, &kernel));
    SIM_TEST_TRY(cudaGraphInstantiate(&exec_, graph_, 0));
    SIM_TEST_TRY(cudaGraphLaunch(exec_, a_));
    auto const found = new_races();
    if (ordered) {
      EXPECT_TRUE(found.empty()) << found.front();
    } else {
      ASSERT_EQ(found.size(), 1U);
      EXPECT_NE(found[0].find("host function"), std::string::npos) << found[0];
      EXPECT_TRUE(names(found[0], managed_)) << found[0];
    }
    SIM_TEST_TRY(cudaStreamSynchronize(a_));
    SIM_TEST_TRY(cudaGraphExecDestroy(exec_));
    SIM_TEST_TRY(cudaGraphDestroy(graph_));
    exec_ = nullptr;
    graph_ = nullptr;
  }
}

// --- cudaStreamAddCallback --------------------------------------------------------------------

TEST_P(host_code_races, a_stream_callback_reading_pinned_memory_races_with_a_copy_into_it) {
  sum_job job{pinned_, 0, count, 0};
  SIM_TEST_TRY(cudaStreamAddCallback(a_, add_up_after, &job, 0));
  SIM_TEST_TRY(cudaMemcpyAsync(pinned_, device_, count * sizeof(int), cudaMemcpyDeviceToHost, b_));
  auto const found = new_races();
  ASSERT_EQ(found.size(), 1U);
  EXPECT_TRUE(names(found[0], pinned_)) << found[0];
}

TEST_P(host_code_races, a_stream_callback_after_the_copy_it_reads_does_not_race) {
  SIM_TEST_TRY(cudaMemcpyAsync(pinned_, device_, count * sizeof(int), cudaMemcpyDeviceToHost, b_));
  SIM_TEST_TRY(cudaEventRecord(done_, b_));
  SIM_TEST_TRY(cudaStreamWaitEvent(a_, done_, 0));
  sum_job job{pinned_, 0, count, -1};
  SIM_TEST_TRY(cudaStreamAddCallback(a_, add_up_after, &job, 0));
  EXPECT_TRUE(new_races().empty());
  SIM_TEST_TRY(cudaStreamSynchronize(a_));
  EXPECT_EQ(job.sum, 0);  // device_ was cleared: the callback read what the copy brought
}

}  // namespace
