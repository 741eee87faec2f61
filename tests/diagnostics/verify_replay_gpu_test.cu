// verify_replay on planted failures: a host scalar frozen at capture, a grid chosen from a host
// value, a memset on the legacy stream, an output the next replay overwrites, a conditional
// node's flag or body; each is found, named by node and cause; a faithful graph is reported
// identical; graphs with host functions are bisected too; and each refusal.

#include <cstdint>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/event.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/diagnostics/replay_divergence.hpp>
#include <graphstep/diagnostics/verify_replay.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_mode.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/conditional.hpp>
#include <graphstep/graphs/graph.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/ops/gemm_gelu.hpp>
#include <graphstep/ops/gemm_problem.hpp>
#include <graphstep/train/capture_safe_rng.hpp>
#include <graphstep/train/checkpoint.hpp>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "common/error_message.hpp"
#include "common/gpu_test.hpp"

namespace gs = graphstep;
namespace gd = graphstep::diagnostics;

namespace {

__global__ void scale_kernel(float* out, float const* in, float factor, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in[i] * factor;
}

__global__ void accumulate_kernel(float* into, float const* from, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) into[i] += from[i];
}

__global__ void sum_kernel(float* total, float const* values, int n) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    float sum = 0.0F;
    for (int i = 0; i < n; ++i) sum += values[i];
    *total = sum;
  }
}

__global__ void set_flag_kernel(unsigned* flag, unsigned value) {
  if (threadIdx.x == 0 && blockIdx.x == 0) *flag = value;
}

constexpr int n = 256;
constexpr unsigned threads = 64;

unsigned blocks_for(int count) {
  return (static_cast<unsigned>(count) + threads - 1) / threads;
}

using gs::testing::contains;
using gs::testing::message_of;

// A small training step: y = x * factor; w += y; loss = sum(w).
class verify_replay_test : public gs::testing::stream_pool_test {
 protected:
  void SetUp() override {
    stream_pool_test::SetUp();
    if (IsSkipped()) return;
    x_ = allocate(n);
    y_ = allocate(n);
    w_ = allocate(n);
    loss_ = allocate(1);
    std::vector<float> values(n);
    std::iota(values.begin(), values.end(), 1.0F);
    gs::testing::copy_to_device(x_, values.data(), n * sizeof(float));
    gs::testing::copy_to_device(w_, values.data(), n * sizeof(float));
  }

  void TearDown() override {
    if (pool_) {
      for (void* p : allocated_) pool_->deallocate(p, *stream_);
      stream_->synchronize();
    }
  }

  // Zeroed device memory from the pool, given back when the test ends.
  template <typename T = float>
  T* allocate(std::size_t count) {
    void* p = pool_->allocate(count * sizeof(T), *stream_);
    allocated_.push_back(p);
    GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(p, 0, count * sizeof(T), stream_->get()));
    stream_->synchronize();
    return static_cast<T*>(p);
  }

  void step(gs::cuda::stream_view s) {
    scale_kernel<<<blocks_for(active_), threads, 0, s.get()>>>(y_, x_, factor_, n);
    accumulate_kernel<<<blocks_for(n), threads, 0, s.get()>>>(w_, y_, n);
    sum_kernel<<<1, 32, 0, s.get()>>>(loss_, w_, n);
  }

  // A step whose temporary is a CUDA graph allocation when captured (cudaMallocAsync).
  void scale_into_a_temporary(gs::cuda::stream_view s) {
    float* scaled = nullptr;
    GRAPHSTEP_CUDA_TRY(cudaMallocAsync(&scaled, n * sizeof(float), s.get()));
    scale_kernel<<<blocks_for(n), threads, 0, s.get()>>>(scaled, x_, factor_, n);
    accumulate_kernel<<<blocks_for(n), threads, 0, s.get()>>>(w_, scaled, n);
    GRAPHSTEP_CUDA_TRY(cudaFreeAsync(scaled, s.get()));
  }

  gs::graphs::graph capture_step(gs::graphs::capture_options options = {}) {
    gs::graphs::graph g;
    gs::graphs::capture(
        g, *stream_, [&] { step(*stream_); }, std::move(options));
    return g;
  }

  [[nodiscard]] std::vector<gs::tensor_view> regions() const {
    return {gd::watch("y", {y_, gs::dtype::float32, n}),
            gd::watch("w", {w_, gs::dtype::float32, n}),
            gd::watch("loss", {loss_, gs::dtype::float32, 1})};
  }

  gd::replay_report verify(gs::graphs::graph const& g, gd::verify_options const& options = {}) {
    return gd::verify_replay(
        *stream_, [&](gs::cuda::stream_view s) { step(s); }, g, regions(), options);
  }

  float* x_{};
  float* y_{};
  float* w_{};
  float* loss_{};
  float factor_{2.0F};
  int active_{n};
  std::vector<void*> allocated_;
};

gd::region_difference const* find(std::vector<gd::region_difference> const& found,
                                  std::string const& name) {
  for (auto const& d : found) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

}  // namespace

TEST_F(verify_replay_test, a_faithful_graph_is_identical_and_the_regions_are_restored) {
  auto const g = capture_step();
  auto const w_before = gs::testing::copy_to_host(w_, n, *stream_);
  auto const report = verify(g);
  EXPECT_TRUE(report.identical()) << report.describe();
  EXPECT_EQ(report.cause(), gd::divergence_cause::none);
  EXPECT_TRUE(contains(report.describe(), "identical")) << report.describe();
  EXPECT_EQ(gs::testing::copy_to_host(w_, n, *stream_), w_before);
}

// The learning-rate bug: a host scalar passed by value is frozen into the kernel node.
TEST_F(verify_replay_test, names_the_node_whose_host_scalar_was_frozen_at_capture) {
  auto const g = capture_step();
  factor_ = 3.0F;
  auto const report = verify(g);
  ASSERT_FALSE(report.identical());
  EXPECT_NE(find(report.differences, "w"), nullptr) << report.describe();
  EXPECT_NE(find(report.differences, "loss"), nullptr) << report.describe();
  EXPECT_TRUE(report.capture_failure.empty()) << report.capture_failure;
  EXPECT_TRUE(report.outside_capture.empty()) << report.describe();
  EXPECT_EQ(report.cause(), gd::divergence_cause::frozen_argument) << report.describe();
  ASSERT_TRUE(report.first_divergent.has_value()) << report.describe();
  auto const& node = *report.first_divergent;
  EXPECT_EQ(node.position, 0U);
  EXPECT_TRUE(contains(node.at_capture.kernel_name, "scale_kernel")) << node.at_capture.kernel_name;
  ASSERT_EQ(node.changes.size(), 1U) << report.describe();
  EXPECT_EQ(node.changes[0].kind, gd::launch_change::what::argument);
  EXPECT_EQ(node.changes[0].argument, 2U);
  EXPECT_TRUE(contains(node.changes[0].at_capture, "float 2")) << node.changes[0].at_capture;
  EXPECT_TRUE(contains(node.changes[0].now, "float 3")) << node.changes[0].now;
  EXPECT_NE(find(node.regions, "y"), nullptr) << report.describe();
  ASSERT_EQ(report.changed.size(), 1U) << report.describe();
  EXPECT_TRUE(contains(report.describe(), "first node whose effect differs: node 0"))
      << report.describe();
}

// A grid sized from a host value at capture covers fewer elements than the step does now.
TEST_F(verify_replay_test, names_a_grid_chosen_from_a_host_value_at_capture) {
  active_ = 64;
  auto const g = capture_step();
  active_ = n;
  auto const report = verify(g);
  ASSERT_FALSE(report.identical());
  EXPECT_EQ(report.cause(), gd::divergence_cause::launch_configuration) << report.describe();
  ASSERT_TRUE(report.first_divergent.has_value()) << report.describe();
  EXPECT_EQ(report.first_divergent->position, 0U);
  ASSERT_EQ(report.first_divergent->changes.size(), 1U) << report.describe();
  auto const& change = report.first_divergent->changes[0];
  EXPECT_EQ(change.kind, gd::launch_change::what::grid);
  EXPECT_EQ(change.at_capture, "(1, 1, 1)");
  EXPECT_EQ(change.now, "(4, 1, 1)");
  auto const* y = find(report.differences, "y");
  ASSERT_NE(y, nullptr) << report.describe();
  EXPECT_EQ(y->first_offset, 64 * sizeof(float)) << "the first element the capture's grid missed";
}

// The node that differs is named even when earlier nodes agree: here the second kernel reads
// a buffer chosen on the host, and the first one is the same.
TEST_F(verify_replay_test, names_a_later_node_and_not_the_ones_that_agree) {
  float* other = allocate(n);
  float* source = y_;
  gs::graphs::graph g;
  auto const body = [&](gs::cuda::stream_view s) {
    scale_kernel<<<blocks_for(n), threads, 0, s.get()>>>(y_, x_, factor_, n);
    accumulate_kernel<<<blocks_for(n), threads, 0, s.get()>>>(w_, source, n);
    sum_kernel<<<1, 32, 0, s.get()>>>(loss_, w_, n);
  };
  gs::graphs::capture(g, *stream_, [&] { body(*stream_); });
  source = other;  // the step reads another buffer now; the graph still reads y
  auto const report = gd::verify_replay(*stream_, body, g, regions());
  ASSERT_TRUE(report.first_divergent.has_value()) << report.describe();
  EXPECT_EQ(report.first_divergent->position, 1U) << report.describe();
  ASSERT_EQ(report.first_divergent->changes.size(), 1U);
  EXPECT_EQ(report.first_divergent->changes[0].argument, 1U);
  EXPECT_TRUE(contains(report.first_divergent->changes[0].at_capture, "an address"));
  EXPECT_EQ(find(report.first_divergent->regions, "y"), nullptr) << "node 0 agrees";
  EXPECT_NE(find(report.first_divergent->regions, "w"), nullptr) << report.describe();
}

// Double-buffered outputs: the loop swaps the buffer the step writes after each step, but the
// graph froze the first one, so each replay overwrites the output the loop still reads.
TEST_F(verify_replay_test, names_an_output_the_next_replay_overwrites) {
  float* buffers[2] = {allocate(n), allocate(n)};  // NOLINT: two device pointers
  int current = 0;
  auto const body = [&](gs::cuda::stream_view s) {
    scale_kernel<<<blocks_for(n), threads, 0, s.get()>>>(buffers[current], x_, factor_, n);
  };
  gs::graphs::graph g;
  gs::graphs::capture(g, *stream_, [&] { body(*stream_); });
  current = 1;  // the loop moves on; the last step's output in buffer 0 is still in use
  auto const report =
      gd::verify_replay(*stream_, body, g,
                        {gd::watch("output 0", {buffers[0], gs::dtype::float32, n}),
                         gd::watch("output 1", {buffers[1], gs::dtype::float32, n})});
  auto const* kept = find(report.differences, "output 0");
  ASSERT_NE(kept, nullptr) << report.describe();
  EXPECT_EQ(kept->writer, gd::written_by::replay_only);
  auto const* missed = find(report.differences, "output 1");
  ASSERT_NE(missed, nullptr) << report.describe();
  EXPECT_EQ(missed->writer, gd::written_by::eager_only);
  EXPECT_TRUE(contains(report.describe(), "the replay wrote it, the eager step left it unchanged"))
      << report.describe();
  EXPECT_EQ(report.cause(), gd::divergence_cause::frozen_argument) << report.describe();
  ASSERT_TRUE(report.first_divergent.has_value());
  EXPECT_EQ(report.first_divergent->changes.at(0).argument, 0U);
}

// A cudaMemset without a stream goes to the legacy stream: beside a non-blocking stream's
// capture CUDA runs it once, at capture, and the graph lacks it. (The step waits for it on the
// host, so that its eager run is ordered; a relaxed capture allows the wait.)
TEST_F(verify_replay_test, names_a_memset_on_the_legacy_stream) {
  gs::cuda::event const zeroed;
  auto const body = [&](gs::cuda::stream_view s) {
    GRAPHSTEP_CUDA_TRY(cudaMemset(y_, 0, n * sizeof(float)));  // the planted defect
    zeroed.record(cudaStreamLegacy);
    zeroed.synchronize();
    accumulate_kernel<<<blocks_for(n), threads, 0, s.get()>>>(y_, x_, n);
  };
  gs::graphs::capture_options allowed;
  allowed.refuse_legacy_stream = false;
  allowed.mode = gs::graphs::capture_mode::relaxed;  // lets the step wait for it
  gs::graphs::graph g;
  gs::graphs::capture(
      g, *stream_, [&] { body(*stream_); }, allowed);
  GRAPHSTEP_CUDA_TRY(cudaMemcpy(y_, w_, n * sizeof(float), cudaMemcpyDeviceToDevice));
  GRAPHSTEP_CUDA_TRY(cudaDeviceSynchronize());

  // Captured again as graphstep captures by default, the step is refused, naming the stream.
  auto const refused = gd::verify_replay(*stream_, body, g, regions());
  ASSERT_FALSE(refused.identical());
  EXPECT_EQ(refused.cause(), gd::divergence_cause::capture_fails_now) << refused.describe();
  EXPECT_TRUE(contains(refused.capture_failure, "legacy")) << refused.capture_failure;

  // Captured again as it was captured, the eager step differs from a capture of itself.
  gd::verify_options as_captured;
  as_captured.capture = allowed;
  auto const outside = gd::verify_replay(*stream_, body, g, regions(), as_captured);
  EXPECT_EQ(outside.cause(), gd::divergence_cause::work_outside_capture) << outside.describe();
  EXPECT_NE(find(outside.outside_capture, "y"), nullptr) << outside.describe();
  EXPECT_TRUE(outside.changed.empty()) << "the captured launches are the same";
}

// Temporaries of CUDA's graph allocations (cudaMallocAsync while capturing) move with every
// capture: two captures disagree on their addresses, which are not compared; the frozen scalar
// beside them is.
TEST_F(verify_replay_test, temporaries_placed_anew_in_every_capture_are_not_the_cause) {
  auto const allocating_step = [&](gs::cuda::stream_view s) { scale_into_a_temporary(s); };
  gs::graphs::graph g;
  gs::graphs::capture(g, *stream_, [&] { allocating_step(*stream_); });
  factor_ = 7.0F;
  auto const report = gd::verify_replay(*stream_, allocating_step, g, regions());
  EXPECT_EQ(report.cause(), gd::divergence_cause::frozen_argument) << report.describe();
  ASSERT_EQ(report.changed.size(), 1U) << report.describe();
  ASSERT_EQ(report.changed[0].changes.size(), 1U) << report.describe();
  EXPECT_EQ(report.changed[0].changes[0].argument, 2U) << "the scalar, not the moved output";
  ASSERT_TRUE(report.first_divergent.has_value()) << report.describe();
  EXPECT_EQ(report.first_divergent->position, 2U) << "the first node that writes watched memory";
  EXPECT_EQ(report.unstable_arguments, 2U) << "the temporary, written and read";
  EXPECT_TRUE(contains(report.describe(), "differ between two captures of the step"))
      << report.describe();
}

// A graph with memory nodes has one executable at a time (cudaGraphInstantiate): while the user
// holds one, verify_replay cannot replay the graph, and says why and what to do.
TEST_F(verify_replay_test, a_graph_with_memory_nodes_whose_executable_is_alive_is_refused_clearly) {
  auto const allocating_step = [&](gs::cuda::stream_view s) { scale_into_a_temporary(s); };
  gs::graphs::graph g;
  gs::graphs::capture(g, *stream_, [&] { allocating_step(*stream_); });
  gs::graphs::graph_exec exec = g.instantiate();
  try {
    static_cast<void>(gd::verify_replay(*stream_, allocating_step, g, regions()));
    ADD_FAILURE() << "a second executable of the graph was instantiated";
  } catch (gs::capture_error const& e) {
    EXPECT_TRUE(contains(e.what(), "only one executable at a time")) << e.what();
    EXPECT_TRUE(contains(e.what(), "graph_exec::reset")) << e.what();
  }
  exec.reset();
  EXPECT_TRUE(gd::verify_replay(*stream_, allocating_step, g, regions()).identical());
}

// A step may allocate and leave the memory to its caller (cudaMallocAsync without its
// cudaFreeAsync): each replay leaves the allocation live, and an executable may not launch over
// it unless instantiated with cudaGraphInstantiateFlagAutoFreeOnLaunch (cudaGraphLaunch).
// verify_replay instantiates its executables so and frees what each of its runs leaves: the
// step is verified, bisected node by node, and nothing of it stays allocated.
TEST_F(verify_replay_test, a_step_that_allocates_and_leaves_the_memory_allocated_is_verified) {
  std::vector<void*> eager;
  void* captured = nullptr;
  auto const allocating_step = [&](gs::cuda::stream_view s) {
    float* scaled = nullptr;
    GRAPHSTEP_CUDA_TRY(cudaMallocAsync(&scaled, n * sizeof(float), s.get()));
    scale_kernel<<<blocks_for(n), threads, 0, s.get()>>>(scaled, x_, factor_, n);
    accumulate_kernel<<<blocks_for(n), threads, 0, s.get()>>>(w_, scaled, n);
    if (s.is_capturing()) {
      captured = scaled;
    } else {
      eager.push_back(scaled);
    }
  };
  gs::graphs::graph g;
  gs::graphs::capture(g, *stream_, [&] { allocating_step(*stream_); });
  void* const graph_memory = captured;
  {
    // The caller's own replay leaves the graph's allocation live.
    gs::graphs::graph_exec exec = g.instantiate();
    exec.replay(*stream_);
    stream_->synchronize();
  }
  auto const faithful = gd::verify_replay(*stream_, allocating_step, g, regions());
  EXPECT_TRUE(faithful.identical()) << faithful.describe();

  factor_ = 7.0F;  // frozen at capture: the bisection replays the graph once per node
  auto const frozen = gd::verify_replay(*stream_, allocating_step, g, regions());
  EXPECT_EQ(frozen.cause(), gd::divergence_cause::frozen_argument) << frozen.describe();
  ASSERT_TRUE(frozen.first_divergent.has_value()) << frozen.describe();
  EXPECT_EQ(frozen.first_divergent->position, 2U) << frozen.describe();

  // Nothing of the graph's stays allocated: an executable without the flag launches at once.
  gs::graphs::graph_exec exec = g.instantiate();
  exec.replay(*stream_);
  GRAPHSTEP_CUDA_TRY(cudaFreeAsync(graph_memory, stream_->get()));
  for (void* p : eager) GRAPHSTEP_CUDA_TRY(cudaFreeAsync(p, stream_->get()));
  stream_->synchronize();
}

// A generator's offset is state the step advances that no region holds: restored before each
// run, the replay draws what the eager step drew.
TEST_F(verify_replay_test, state_outside_the_regions_is_restored_before_each_run) {
  gs::train::capture_safe_rng rng{11, *stream_};
  auto const random_step = [&](gs::cuda::stream_view s) {
    rng.uniform({y_, gs::dtype::float32, n}, -1.0F, 1.0F, s);
    rng.end_step(s);
  };
  gs::graphs::graph g;
  gs::graphs::capture(g, *stream_, [&] { random_step(*stream_); });
  gd::verify_options unrestored;
  unrestored.bisect = false;
  auto const drifted = gd::verify_replay(*stream_, random_step, g, regions(), unrestored);
  EXPECT_NE(find(drifted.differences, "y"), nullptr)
      << "the eager run advanced the generator the replay then drew from";
  EXPECT_EQ(drifted.cause(), gd::divergence_cause::unreproducible_eager) << drifted.describe();
  EXPECT_NE(find(drifted.eager_unreproducible, "y"), nullptr) << drifted.describe();

  gs::train::checkpoint saved;
  rng.save_to(saved, "rng", *stream_);
  gd::verify_options restored;
  restored.before_each_run = [&](gs::cuda::stream_view s) { rng.restore_from(saved, "rng", s); };
  auto const report = gd::verify_replay(*stream_, random_step, g, regions(), restored);
  EXPECT_TRUE(report.identical()) << report.describe();
  gs::train::checkpoint after;
  rng.save_to(after, "rng", *stream_);
  EXPECT_EQ(after.entries().front().bytes, saved.entries().front().bytes)
      << "the generator ends where it began";
}

TEST_F(verify_replay_test, bisection_can_be_turned_off) {
  auto const g = capture_step();
  factor_ = 5.0F;
  gd::verify_options quick;
  quick.bisect = false;
  auto const report = verify(g, quick);
  EXPECT_FALSE(report.first_divergent.has_value());
  EXPECT_TRUE(contains(report.bisection_skipped, "turned off")) << report.bisection_skipped;
  EXPECT_EQ(report.changed.size(), 1U) << "launches are still compared";
  EXPECT_EQ(report.cause(), gd::divergence_cause::frozen_argument) << report.describe();
}

// A host function cannot be disabled: the graph is bisected through copies of its prefixes.
TEST_F(verify_replay_test, a_graph_with_a_host_function_is_bisected_through_prefix_graphs) {
  int calls = 0;
  auto const host_step = [&](gs::cuda::stream_view s) {
    GRAPHSTEP_CUDA_TRY(cudaLaunchHostFunc(
        s.get(), [](void* count) { ++*static_cast<int*>(count); }, &calls));
    step(s);
  };
  gs::graphs::graph g;
  gs::graphs::capture(g, *stream_, [&] { host_step(*stream_); });
  factor_ = 5.0F;
  auto const report = gd::verify_replay(*stream_, host_step, g, regions());
  EXPECT_TRUE(report.bisection_skipped.empty()) << report.bisection_skipped;
  ASSERT_TRUE(report.first_divergent.has_value()) << report.describe();
  EXPECT_EQ(report.first_divergent->position, 1U) << "after the host function";
  EXPECT_EQ(report.cause(), gd::divergence_cause::frozen_argument) << report.describe();
  EXPECT_GT(calls, 2) << "the host function ran in each prefix that holds it";
}

// The step decides on the device whether to scale: the node that differs is the conditional
// node, and the report gives the flag each graph reached it with.
TEST_F(verify_replay_test, names_a_conditional_node_and_the_flag_it_decided_on) {
  auto* flag = allocate<unsigned>(1);
  unsigned enabled = 1;
  // Conditional nodes exist only in graphs: run eagerly, the step reads the flag on the host.
  auto const conditional_step = [&](gs::cuda::stream_view s) {
    set_flag_kernel<<<1, 32, 0, s.get()>>>(flag, enabled);
    auto const body = [&](gs::cuda::stream_view on) {
      scale_kernel<<<blocks_for(n), threads, 0, on.get()>>>(y_, x_, factor_, n);
    };
    if (s.is_capturing()) {
      gs::graphs::capture_if(s, flag, body);
    } else if (gs::testing::copy_to_host(flag, 1, s)[0] != 0) {
      body(s);
    }
  };
  gs::graphs::graph g;
  gs::graphs::capture(g, *stream_, [&] { conditional_step(*stream_); });

  // A host value frozen into the body: the condition agrees, the body does not.
  factor_ = 4.0F;
  auto const body = gd::verify_replay(*stream_, conditional_step, g, regions());
  ASSERT_TRUE(body.first_divergent.has_value()) << body.describe();
  EXPECT_EQ(body.first_divergent->at_capture.kind, gd::node_kind::conditional);
  EXPECT_EQ(body.first_divergent->condition_at_capture, 1U);
  EXPECT_EQ(body.first_divergent->condition_now, 1U);
  EXPECT_EQ(body.cause(), gd::divergence_cause::inside_nested_graph) << body.describe();

  // A host value frozen into the flag: the conditional node decides otherwise.
  factor_ = 2.0F;
  enabled = 0;
  auto const decided = gd::verify_replay(*stream_, conditional_step, g, regions());
  ASSERT_TRUE(decided.first_divergent.has_value()) << decided.describe();
  EXPECT_EQ(decided.first_divergent->at_capture.kind, gd::node_kind::conditional);
  EXPECT_EQ(decided.first_divergent->condition_at_capture, 1U);
  EXPECT_EQ(decided.first_divergent->condition_now, 0U);
  EXPECT_EQ(decided.cause(), gd::divergence_cause::condition) << decided.describe();
  ASSERT_EQ(decided.changed.size(), 1U) << "the flag's kernel is launched with another value";
  EXPECT_EQ(decided.changed[0].position, 0U);
  EXPECT_TRUE(contains(decided.describe(), "flag: 1 in the graph, 0 in a fresh capture"))
      << decided.describe();
}

// A step forked onto a side stream and joined, with memset and memcpy nodes: the node that
// differs is found on either branch, and a memset's frozen value is named as such.
TEST_F(verify_replay_test, finds_the_node_across_side_streams_memsets_and_copies) {
  gs::cuda::stream side;
  gs::cuda::event forked;
  gs::cuda::event joined;
  int fill = 0;
  auto const forked_step = [&](gs::cuda::stream_view s) {
    GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(loss_, fill, sizeof(float), s.get()));
    forked.record(s);
    side.view().wait(forked);
    scale_kernel<<<blocks_for(n), threads, 0, side.get()>>>(y_, x_, factor_, n);
    joined.record(side);
    GRAPHSTEP_CUDA_TRY(
        cudaMemcpyAsync(w_, x_, n * sizeof(float), cudaMemcpyDeviceToDevice, s.get()));
    s.wait(joined);
    accumulate_kernel<<<blocks_for(n), threads, 0, s.get()>>>(w_, y_, n);
  };
  gs::graphs::graph g;
  gs::graphs::capture(g, *stream_, [&] { forked_step(*stream_); });

  factor_ = 6.0F;  // the side stream's kernel
  auto const side_report = gd::verify_replay(*stream_, forked_step, g, regions());
  ASSERT_TRUE(side_report.first_divergent.has_value()) << side_report.describe();
  EXPECT_TRUE(contains(side_report.first_divergent->at_capture.kernel_name, "scale_kernel"))
      << side_report.describe();
  EXPECT_EQ(side_report.cause(), gd::divergence_cause::frozen_argument);

  factor_ = 2.0F;
  fill = 0x01;  // the memset's value
  auto const memset_report = gd::verify_replay(*stream_, forked_step, g, regions());
  ASSERT_TRUE(memset_report.first_divergent.has_value()) << memset_report.describe();
  EXPECT_EQ(memset_report.first_divergent->position, 0U);
  ASSERT_EQ(memset_report.first_divergent->changes.size(), 1U) << memset_report.describe();
  EXPECT_EQ(memset_report.first_divergent->changes[0].kind, gd::launch_change::what::memset);
  EXPECT_TRUE(contains(memset_report.first_divergent->changes[0].now, "value 1"))
      << memset_report.describe();
  EXPECT_EQ(memset_report.cause(), gd::divergence_cause::frozen_argument);
}

// cuBLASLt's kernels run in the step: bisection runs through them, and the node that differs
// after them is named. (The simulated device does not report a library kernel's parameters, so
// they are compared by kind there; a GPU reports them.)
TEST_F(verify_replay_test, runs_through_cublaslt_kernels_to_the_node_that_differs) {
  constexpr int rows = 16;
  std::size_t const workspace_bytes = gs::ops::gemm::workspace_size();
  void* workspace = allocate<unsigned char>(workspace_bytes);
  float* product = allocate(rows * rows);
  gs::ops::cublaslt_handle const handle;
  gs::ops::gemm const gemm{handle,
                           {gs::ops::gemm_kind::forward, rows, rows, rows, gs::dtype::float32},
                           {{x_, gs::dtype::float32, n},
                            {w_, gs::dtype::float32, n},
                            {product, gs::dtype::float32, rows * rows},
                            {},
                            {},
                            {}},
                           workspace,
                           workspace_bytes,
                           {},
                           *stream_};
  auto const gemm_step = [&](gs::cuda::stream_view s) {
    gemm.run(s);
    scale_kernel<<<blocks_for(rows * rows), threads, 0, s.get()>>>(y_, product, factor_,
                                                                   rows * rows);
  };
  gs::graphs::graph g;
  gs::graphs::capture(g, *stream_, [&] { gemm_step(*stream_); });
  factor_ = 0.5F;
  auto const report = gd::verify_replay(*stream_, gemm_step, g, regions());
  ASSERT_TRUE(report.first_divergent.has_value()) << report.describe();
  EXPECT_TRUE(contains(report.first_divergent->at_capture.kernel_name, "scale_kernel"))
      << report.describe();
  EXPECT_GE(report.first_divergent->position, 1U) << "after the GEMM's kernels";
  EXPECT_EQ(report.cause(), gd::divergence_cause::frozen_argument) << report.describe();
}

// A span is watched as its dtype, over its bytes: a changed weight is named through it.
TEST_F(verify_replay_test, a_span_is_watched_as_its_dtype) {
  gs::device_span const halves{w_, gs::dtype::bfloat16, 2 * std::size_t{n}};
  gs::tensor_view const region = gd::watch("w as bf16", halves);
  EXPECT_EQ(region.data(), static_cast<void*>(w_));
  EXPECT_EQ(region.name(), "w as bf16");
  EXPECT_EQ(region.bytes(), sizeof(float) * n);
  EXPECT_EQ(region.type(), gs::dtype::bfloat16);
  EXPECT_EQ(region.shape(), (std::vector<std::int64_t>{2 * n}));
  EXPECT_EQ(gd::watch("f", gs::device_span{w_, gs::dtype::float32, 4}).type(), gs::dtype::float32);
  EXPECT_EQ(gd::watch("ids", gs::device_span{w_, gs::dtype::int32, 4}).type(), gs::dtype::int32);
  gs::tensor_view const mask = gd::watch("mask", gs::device_span{w_, gs::dtype::uint8, 3});
  EXPECT_EQ(mask.type(), gs::dtype::uint8);
  EXPECT_EQ(mask.bytes(), 3U);
  auto const g = capture_step();
  auto const report =
      gd::verify_replay(*stream_, [&](gs::cuda::stream_view s) { step(s); }, g, {region});
  EXPECT_TRUE(report.identical()) << report.describe();
}

TEST_F(verify_replay_test, refuses_what_it_cannot_compare) {
  auto const g = capture_step();
  auto const run = [&](std::vector<gs::tensor_view> const& watched) {
    return message_of([&] {
      static_cast<void>(gd::verify_replay(
          *stream_, [&](gs::cuda::stream_view s) { step(s); }, g, watched));
    });
  };
  EXPECT_TRUE(contains(run({}), "at least one watched region"));
  EXPECT_TRUE(contains(run({gd::watch("w", {w_, gs::dtype::float32, n}),
                            gd::watch("w", {y_, gs::dtype::float32, n})}),
                       "named twice"));
  EXPECT_TRUE(contains(run({gd::watch("w", {w_, gs::dtype::float32, n}),
                            gd::watch("part", {w_ + 1, gs::dtype::float32, 4})}),
                       "overlap"));
  EXPECT_TRUE(contains(run({gs::tensor_view{}}), "has no name"));  // and a null pointer
  EXPECT_TRUE(contains(run({gs::tensor_view{w_, {{4}, gs::dtype::float32}}}), "has no name"));
  EXPECT_TRUE(contains(run({gs::tensor_view{w_, {"empty", {0}, gs::dtype::float32}}}), "is empty"));
  // A view that is not one: a null or misaligned pointer is refused where it is made.
  EXPECT_TRUE(contains(message_of([] {
                         static_cast<void>(gd::watch("null", {nullptr, gs::dtype::float32, 4}));
                       }),
                       "null pointer"));
  EXPECT_TRUE(contains(message_of([&] {
                         static_cast<void>(gd::watch("unaligned", {reinterpret_cast<char*>(w_) + 2,
                                                                   gs::dtype::float32, 2}));
                       }),
                       "not aligned"));
  auto const eager = [&](gs::cuda::stream_view s) { step(s); };
  EXPECT_TRUE(contains(message_of([&] {
                         static_cast<void>(
                             gd::verify_replay(cudaStreamLegacy, eager, g, regions()));
                       }),
                       "legacy default stream"));
  gs::graphs::graph const empty;
  EXPECT_TRUE(contains(
      message_of([&] { static_cast<void>(gd::verify_replay(*stream_, eager, empty, regions())); }),
      "empty"));
}

// What a capture noted travels with its graph: one whose capture recorded work that waits for
// other processes (graphstep::nccl notes a collective of several ranks) is refused, read from
// the graph itself; the same step captured without the note is checked.
TEST_F(verify_replay_test, refuses_a_graph_whose_capture_waits_for_other_processes) {
  gs::graphs::graph waits;
  gs::graphs::capture(waits, *stream_, [&] {
    step(*stream_);
    gs::graphs::capture_ref::of(*stream_).note_waits_for_other_processes();
  });
  ASSERT_TRUE(waits.identity().waits_for_other_processes);
  EXPECT_TRUE(contains(message_of([&] { static_cast<void>(verify(waits)); }),
                       "holds an NCCL collective of several ranks"));
  auto const alone = capture_step();
  EXPECT_FALSE(alone.identity().waits_for_other_processes);
  EXPECT_TRUE(verify(alone).identical());
}
