// Races planted where a checker that looks only at pointer arguments, or that runs the nodes of a
// graph launch as one operation, would miss them; each beside its correctly ordered twin, which
// must pass. The kernels are written the way trainers write them: a base pointer and an index, a
// bucket at an offset of a flat gradient buffer, branches of a captured graph.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <graphstep/sim/sim.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sim_test.hpp"

#if __has_include(<nccl.h>)
#include <nccl.h>
#define GRAPHSTEP_PLANTED_RACES_NCCL 1
#endif

namespace gs = graphstep;

namespace {

__global__ void write_at(float* base, int index, float value) {
  if (blockIdx.x == 0 && threadIdx.x == 0) base[index] = value;
}

__global__ void read_at(float const* base, int index, float* out) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *out = base[index];
}

__global__ void fill_range(float* base, int begin, int end, float value) {
  int const i = begin + static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < end) base[i] = value;
}

// memcpy and memset called by name, as device code may (CUDA Programming Guide, "memcpy() and
// memset()"): GCC's instrumentation leaves them to the C library.
__global__ void copy_by_memcpy(float* to, float const* from, int count) {
  if (blockIdx.x == 0 && threadIdx.x == 0) memcpy(to, from, sizeof(float) * count);
}

__global__ void clear_by_memset(float* base, int count) {
  if (blockIdx.x == 0 && threadIdx.x == 0) memset(base, 0, sizeof(float) * count);
}

__global__ void take_ticket(unsigned* counter, unsigned* ticket) {
  if (threadIdx.x == 0) *ticket = atomicAdd(counter, 1U);
}

__global__ void add_one(unsigned* counter) {
  atomicAdd(counter, 1U);
}

// A __device__ variable: kernels reach it by name, with no pointer argument at all.
__device__ float device_scale;

__global__ void set_scale(float value) {
  if (threadIdx.x == 0) device_scale = value;
}

__global__ void scale_by_device_scale(float* out) {
  if (threadIdx.x == 0) *out = 2.0F * device_scale;
}

class planted_races : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gs::sim::kernel_accesses_instrumented) {
      GTEST_SKIP() << "this build's kernels are not instrumented (GRAPHSTEP_SIM_WATCH_ACCESSES "
                      "off, or another sanitizer instruments the build): the race checker sees "
                      "their pointer arguments only";
    }
    mode_before_ = gs::sim::current_race_mode();
    gs::sim::set_race_mode(gs::sim::race_mode::report);
    already_ = gs::sim::races().size();
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&a_, cudaStreamNonBlocking));
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&b_, cudaStreamNonBlocking));
    SIM_TEST_TRY(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
    SIM_TEST_TRY(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming));
    SIM_TEST_TRY(cudaMalloc(&x_, bytes));
    SIM_TEST_TRY(cudaMalloc(&y_, bytes));
    SIM_TEST_TRY(cudaMemset(x_, 0, bytes));
    SIM_TEST_TRY(cudaMemset(y_, 0, bytes));
    // cudaMemset is asynchronous on the legacy stream, which non-blocking streams do not wait for.
    SIM_TEST_TRY(cudaDeviceSynchronize());
  }
  void TearDown() override {
    if (a_ == nullptr) return;  // skipped
    SIM_TEST_EXPECT_SUCCESS(cudaDeviceSynchronize());
    for (cudaGraphExec_t exec : execs_) SIM_TEST_EXPECT_SUCCESS(cudaGraphExecDestroy(exec));
    SIM_TEST_EXPECT_SUCCESS(cudaFree(x_));
    SIM_TEST_EXPECT_SUCCESS(cudaFree(y_));
    SIM_TEST_EXPECT_SUCCESS(cudaEventDestroy(fork_));
    SIM_TEST_EXPECT_SUCCESS(cudaEventDestroy(join_));
    SIM_TEST_EXPECT_SUCCESS(cudaStreamDestroy(a_));
    SIM_TEST_EXPECT_SUCCESS(cudaStreamDestroy(b_));
    gs::sim::set_execution_mode(gs::sim::execution_mode::immediate);
    gs::sim::set_race_mode(mode_before_);
  }
  [[nodiscard]] std::vector<std::string> new_races() const {
    gs::sim::advance(gs::sim::queued_operations());
    auto all = gs::sim::races();
    return {all.begin() + static_cast<std::ptrdiff_t>(already_), all.end()};
  }

  // Captures `on_a` on stream a and `on_b` on stream b, forked from a at the start and joined
  // back at the end; `b_waits_for_a` adds an edge from a's work to b's.
  template <class OnA, class OnB>
  cudaGraphExec_t capture_two_branches(OnA on_a, OnB on_b, bool b_waits_for_a) {
    SIM_TEST_TRY(cudaStreamBeginCapture(a_, cudaStreamCaptureModeThreadLocal));
    SIM_TEST_TRY(cudaEventRecord(fork_, a_));
    SIM_TEST_TRY(cudaStreamWaitEvent(b_, fork_, 0));
    on_a();
    if (b_waits_for_a) {
      SIM_TEST_TRY(cudaEventRecord(fork_, a_));
      SIM_TEST_TRY(cudaStreamWaitEvent(b_, fork_, 0));
    }
    on_b();
    SIM_TEST_TRY(cudaEventRecord(join_, b_));
    SIM_TEST_TRY(cudaStreamWaitEvent(a_, join_, 0));
    cudaGraph_t graph{};
    SIM_TEST_TRY(cudaStreamEndCapture(a_, &graph));
    cudaGraphExec_t exec{};
    SIM_TEST_TRY(cudaGraphInstantiate(&exec, graph, 0));
    SIM_TEST_TRY(cudaGraphDestroy(graph));
    execs_.push_back(exec);
    return exec;
  }

  static constexpr int n = 1024;
  static constexpr std::size_t bytes = sizeof(float) * n;
  cudaStream_t a_{};
  cudaStream_t b_{};
  cudaEvent_t fork_{};
  cudaEvent_t join_{};
  float* x_{};
  float* y_{};
  std::vector<cudaGraphExec_t> execs_;
  std::size_t already_{};
  gs::sim::race_mode mode_before_{};
};

// --- an offset that is not the start of any pointer argument ---------------------------------

TEST_F(planted_races, a_write_past_the_argument_races_with_a_read_there_from_another_stream) {
  // Both touch x_[700]; the writer was given x_, the reader x_ + 512.
  write_at<<<1, 32, 0, a_>>>(x_, 700, 1.0F);
  read_at<<<1, 32, 0, b_>>>(x_ + 512, 188, y_);
  auto const found = new_races();
  ASSERT_EQ(found.size(), 1U);
  EXPECT_NE(found[0].find("write by kernel write_at"), std::string::npos) << found[0];
  EXPECT_NE(found[0].find("read by kernel read_at"), std::string::npos) << found[0];
  auto const* const cell = reinterpret_cast<unsigned char const*>(x_ + 700);
  char expected[32];
  static_cast<void>(
      std::snprintf(expected, sizeof expected, "[%p, ", static_cast<void const*>(cell)));
  EXPECT_NE(found[0].find(expected), std::string::npos) << found[0] << " should name " << expected;
}

TEST_F(planted_races, the_same_write_and_read_ordered_by_an_event_do_not_race) {
  write_at<<<1, 32, 0, a_>>>(x_, 700, 1.0F);
  SIM_TEST_TRY(cudaEventRecord(fork_, a_));
  SIM_TEST_TRY(cudaStreamWaitEvent(b_, fork_, 0));
  read_at<<<1, 32, 0, b_>>>(x_ + 512, 188, y_);
  EXPECT_TRUE(new_races().empty());
}

TEST_F(planted_races, unordered_kernels_touching_neighbouring_bytes_do_not_race) {
  write_at<<<1, 32, 0, a_>>>(x_, 700, 1.0F);
  read_at<<<1, 32, 0, b_>>>(x_ + 512, 189, y_);  // x_[701]
  write_at<<<1, 32, 0, b_>>>(x_, 699, 1.0F);
  EXPECT_TRUE(new_races().empty());
}

// --- memcpy and memset called by name in a kernel ---------------------------------------------

TEST_F(planted_races, a_kernels_memcpy_races_with_a_write_of_its_source_on_another_stream) {
  copy_by_memcpy<<<1, 32, 0, a_>>>(y_, x_ + 256, 16);  // reads x_[256, 272)
  write_at<<<1, 32, 0, b_>>>(x_, 260, 1.0F);
  auto const found = new_races();
  ASSERT_EQ(found.size(), 1U);
  EXPECT_NE(found[0].find("read by kernel copy_by_memcpy"), std::string::npos) << found[0];
  // Ordered by an event, and beside the bytes it copies: no race.
  SIM_TEST_TRY(cudaEventRecord(fork_, b_));
  SIM_TEST_TRY(cudaStreamWaitEvent(a_, fork_, 0));
  copy_by_memcpy<<<1, 32, 0, a_>>>(y_, x_ + 256, 16);
  write_at<<<1, 32, 0, b_>>>(x_, 272, 1.0F);
  EXPECT_EQ(new_races().size(), 1U);
}

TEST_F(planted_races, a_kernels_memset_races_with_a_read_on_another_stream) {
  clear_by_memset<<<1, 32, 0, a_>>>(x_ + 100, 8);  // writes x_[100, 108)
  read_at<<<1, 32, 0, b_>>>(x_, 107, y_ + 1);
  read_at<<<1, 32, 0, b_>>>(x_, 108, y_ + 2);  // just past it
  auto const found = new_races();
  ASSERT_EQ(found.size(), 1U);
  EXPECT_NE(found[0].find("write by kernel clear_by_memset"), std::string::npos) << found[0];
}

// --- a __device__ variable, named in the kernels rather than passed ---------------------------

TEST_F(planted_races, kernels_writing_and_reading_a_device_variable_unordered_race) {
  set_scale<<<1, 32, 0, a_>>>(3.0F);
  scale_by_device_scale<<<1, 32, 0, b_>>>(y_);
  auto const found = new_races();
  ASSERT_EQ(found.size(), 1U);
  EXPECT_NE(found[0].find("write by kernel set_scale"), std::string::npos) << found[0];
  EXPECT_NE(found[0].find("read by kernel scale_by_device_scale"), std::string::npos) << found[0];
}

TEST_F(planted_races, a_device_variable_written_and_read_in_event_order_does_not_race) {
  set_scale<<<1, 32, 0, a_>>>(3.0F);
  SIM_TEST_TRY(cudaEventRecord(fork_, a_));
  SIM_TEST_TRY(cudaStreamWaitEvent(b_, fork_, 0));
  scale_by_device_scale<<<1, 32, 0, b_>>>(y_);
  EXPECT_TRUE(new_races().empty());
  float out = 0.0F;
  SIM_TEST_TRY(cudaMemcpyAsync(&out, y_, sizeof out, cudaMemcpyDeviceToHost, b_));
  SIM_TEST_TRY(cudaStreamSynchronize(b_));
  EXPECT_EQ(out, 6.0F);
}

TEST_F(planted_races, a_symbol_copy_races_with_a_kernel_reading_the_variable_on_another_stream) {
  float const value = 5.0F;
  SIM_TEST_TRY(
      cudaMemcpyToSymbolAsync(device_scale, &value, sizeof value, 0, cudaMemcpyHostToDevice, a_));
  scale_by_device_scale<<<1, 32, 0, b_>>>(y_);
  auto const found = new_races();
  ASSERT_EQ(found.size(), 1U);
  EXPECT_NE(found[0].find("read by kernel scale_by_device_scale"), std::string::npos) << found[0];
}

// --- atomics ---------------------------------------------------------------------------------

TEST_F(planted_races, unordered_atomic_updates_do_not_race_and_a_plain_read_of_them_does) {
  auto* const counter = reinterpret_cast<unsigned*>(y_);
  add_one<<<4, 64, 0, a_>>>(counter);
  add_one<<<4, 64, 0, b_>>>(counter);
  EXPECT_TRUE(new_races().empty()) << "atomic updates are performed without interference";
  read_at<<<1, 32, 0, b_>>>(y_, 0, y_ + 1);  // ordered after b's updates, not a's
  auto const found = new_races();
  ASSERT_EQ(found.size(), 1U);
  EXPECT_NE(found[0].find("atomic update by kernel add_one"), std::string::npos) << found[0];
}

// --- branches of one graph -------------------------------------------------------------------

TEST_F(planted_races, two_branches_of_a_graph_writing_one_buffer_race) {
  cudaGraphExec_t const exec =
      capture_two_branches([&] { fill_range<<<n / 256, 256, 0, a_>>>(x_, 0, n, 1.0F); },
                           [&] { fill_range<<<n / 256, 256, 0, b_>>>(x_, 0, n, 2.0F); }, false);
  SIM_TEST_TRY(cudaGraphLaunch(exec, a_));
  auto const found = new_races();
  ASSERT_EQ(found.size(), 1U);
  EXPECT_NE(found[0].find("kernel fill_range (node"), std::string::npos) << found[0];
  EXPECT_NE(found[0].find("graph launch"), std::string::npos) << found[0];
}

TEST_F(planted_races, the_same_branches_joined_by_an_edge_do_not_race) {
  cudaGraphExec_t const exec =
      capture_two_branches([&] { fill_range<<<n / 256, 256, 0, a_>>>(x_, 0, n, 1.0F); },
                           [&] { fill_range<<<n / 256, 256, 0, b_>>>(x_, 0, n, 2.0F); }, true);
  SIM_TEST_TRY(cudaGraphLaunch(exec, a_));
  SIM_TEST_TRY(cudaGraphLaunch(exec, a_));  // launches of one executable are ordered
  EXPECT_TRUE(new_races().empty());
}

TEST_F(planted_races, branches_writing_disjoint_halves_do_not_race) {
  cudaGraphExec_t const exec =
      capture_two_branches([&] { fill_range<<<n / 256, 256, 0, a_>>>(x_, 0, n / 2, 1.0F); },
                           [&] { fill_range<<<n / 256, 256, 0, b_>>>(x_, n / 2, n, 2.0F); }, false);
  SIM_TEST_TRY(cudaGraphLaunch(exec, a_));
  EXPECT_TRUE(new_races().empty());
}

TEST_F(planted_races, a_graph_launch_and_an_unordered_stream_race_through_any_node) {
  cudaGraphExec_t const exec =
      capture_two_branches([&] { fill_range<<<n / 256, 256, 0, a_>>>(x_, 0, n / 2, 1.0F); },
                           [&] { fill_range<<<n / 256, 256, 0, b_>>>(x_, n / 2, n, 2.0F); }, false);
  SIM_TEST_TRY(cudaGraphLaunch(exec, a_));
  read_at<<<1, 32, 0, b_>>>(x_, n - 1, y_);  // b_ is not ordered after the launch on a_
  EXPECT_EQ(new_races().size(), 1U);
  SIM_TEST_TRY(cudaEventRecord(join_, a_));
  SIM_TEST_TRY(cudaStreamWaitEvent(b_, join_, 0));
  read_at<<<1, 32, 0, b_>>>(x_, n - 1, y_);  // now it is
  EXPECT_EQ(new_races().size(), 1U);
}

TEST_F(planted_races, graph_branches_run_in_a_seeded_random_order_when_interleaved) {
  auto* const counter = reinterpret_cast<unsigned*>(y_);
  cudaGraphExec_t const exec =
      capture_two_branches([&] { take_ticket<<<1, 32, 0, a_>>>(counter, counter + 1); },
                           [&] { take_ticket<<<1, 32, 0, b_>>>(counter, counter + 2); }, false);
  auto const first_branch_first = [&](gs::sim::execution_mode mode, std::uint64_t seed) {
    gs::sim::set_execution_mode(mode, seed);
    SIM_TEST_TRY(cudaMemsetAsync(counter, 0, 3 * sizeof(unsigned), a_));
    SIM_TEST_TRY(cudaGraphLaunch(exec, a_));
    unsigned tickets[3]{};
    SIM_TEST_TRY(
        cudaMemcpyAsync(tickets, counter, sizeof tickets, cudaMemcpyDeviceToHost, a_));
    SIM_TEST_TRY(cudaStreamSynchronize(a_));
    EXPECT_EQ(tickets[0], 2U);
    return tickets[1] == 0U;
  };
  std::set<bool> deferred;
  std::set<bool> interleaved;
  for (std::uint64_t seed = 1; seed <= 16; ++seed) {
    deferred.insert(first_branch_first(gs::sim::execution_mode::deferred, seed));
    interleaved.insert(first_branch_first(gs::sim::execution_mode::interleaved, seed));
  }
  EXPECT_EQ(deferred, std::set<bool>{true}) << "deferred mode runs nodes in creation order";
  EXPECT_EQ(interleaved, (std::set<bool>{false, true})) << "16 seeds gave one order only";
  EXPECT_TRUE(new_races().empty());
}

// --- a gradient bucket reduced while the backward pass still writes it -----------------------

#ifdef GRAPHSTEP_PLANTED_RACES_NCCL
class planted_bucket_race : public planted_races {
 protected:
  void SetUp() override {
    planted_races::SetUp();
    if (IsSkipped()) return;
    int device = 0;
    ASSERT_EQ(ncclCommInitAll(&comm_, 1, &device), ncclSuccess);
  }
  void TearDown() override {
    if (comm_ != nullptr) {
      EXPECT_EQ(ncclCommDestroy(comm_), ncclSuccess);
    }
    planted_races::TearDown();
  }
  // The backward pass writes bucket 1 (x_[512, 1024)) in two kernels on stream a, the second
  // from an offset inside the bucket; stream b reduces the bucket (into y_, so that one rank's
  // reduction still reads it) once it is told the bucket is ready: after the first kernel only
  // (the bug), or after both.
  cudaGraphExec_t capture_backward_and_reduction(bool wait_for_the_whole_bucket) {
    return capture_two_branches(
        [&] {
          fill_range<<<1, 256, 0, a_>>>(x_, 512, 768, 1.0F);
          if (!wait_for_the_whole_bucket) {
            SIM_TEST_TRY(cudaEventRecord(fork_, a_));
            SIM_TEST_TRY(cudaStreamWaitEvent(b_, fork_, 0));
          }
          fill_range<<<1, 256, 0, a_>>>(x_, 768 + 16, 768 + 32, 1.0F);
        },
        [&] {
          ASSERT_EQ(ncclAllReduce(x_ + 512, y_ + 512, 512, ncclFloat, ncclSum, comm_, b_),
                    ncclSuccess);
        },
        wait_for_the_whole_bucket);
  }
  ncclComm_t comm_{};
};

TEST_F(planted_bucket_race, a_bucket_reduced_while_the_backward_still_writes_it_races) {
  SIM_TEST_TRY(cudaGraphLaunch(capture_backward_and_reduction(false), a_));
  auto const found = new_races();
  ASSERT_FALSE(found.empty());
  EXPECT_NE(found[0].find("kernel fill_range"), std::string::npos) << found[0];
}

TEST_F(planted_bucket_race, the_bucket_reduced_after_the_backward_wrote_all_of_it_does_not_race) {
  SIM_TEST_TRY(cudaGraphLaunch(capture_backward_and_reduction(true), a_));
  EXPECT_TRUE(new_races().empty());
}
#endif

}  // namespace
