// Captured work and its executables: a graph captured without instantiation, instantiated
// later; an executable updated to another graph's work; a graph built with CUDA's graph API
// adopted; ownership moving with the executable.

#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_mode.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/conditional.hpp>
#include <graphstep/graphs/graph.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/graphs/output_guard.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/gpu_test.hpp"
#include "common/test_kernels.cuh"

namespace gs = graphstep;
using gs::testing::fill_kernel;

namespace {

class graph_exec_test : public gs::testing::stream_pool_test {
 protected:
  float read(float const* device) {
    float value = 0.0F;
    GRAPHSTEP_CUDA_TRY(
        cudaMemcpyAsync(&value, device, sizeof value, cudaMemcpyDeviceToHost, stream_->get()));
    stream_->synchronize();
    return value;
  }
};

}  // namespace

TEST_F(graph_exec_test, a_graph_captured_uninstantiated_runs_once_instantiated) {
  float* x = blocks_->get(1);
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(x, 0, sizeof(float), stream_->get()));
  gs::graphs::graph g;
  gs::graphs::capture(g, *stream_, [&] { fill_kernel<<<1, 32, 0, stream_->get()>>>(x, 7.0F, 1); });
  ASSERT_FALSE(g.empty());
  EXPECT_EQ(read(x), 0.0F) << "capturing runs nothing";
  EXPECT_EQ(g.node_counts().kernel, 1U);
  gs::graphs::graph_exec exec = g.instantiate();
  EXPECT_EQ(exec.id(), g.id());
  EXPECT_EQ(exec.name(), g.name());
  exec.replay(*stream_);
  EXPECT_EQ(read(x), 7.0F);
  EXPECT_EQ(exec.replay_count(), 1U);
}

TEST_F(graph_exec_test, an_executable_outlives_the_graph_it_was_made_from) {
  gs::graphs::graph_exec exec;
  float* out = nullptr;
  {
    gs::graphs::graph g;
    gs::graphs::capture(g, *stream_, *pool_, [&] {
      out = static_cast<float*>(pool_->allocate(sizeof(float), *stream_));
      fill_kernel<<<1, 32, 0, stream_->get()>>>(out, 3.0F, 1);
    });
    exec = g.instantiate();
  }
  EXPECT_GT(pool_->bytes_held_by(exec.id()), 0U) << "the executable keeps the graph's memory";
  exec.replay(*stream_);
  EXPECT_EQ(read(out), 3.0F);
}

TEST_F(graph_exec_test, an_update_runs_the_other_graphs_work_and_a_new_topology_is_refused) {
  float* x = blocks_->get(1);
  gs::graphs::graph_exec exec;
  gs::graphs::capture(exec, *stream_,
                      [&] { fill_kernel<<<1, 32, 0, stream_->get()>>>(x, 1.0F, 1); });
  gs::graphs::graph same_shape;
  gs::graphs::capture(same_shape, *stream_,
                      [&] { fill_kernel<<<1, 32, 0, stream_->get()>>>(x, 2.0F, 1); });
  ASSERT_TRUE(exec.update(same_shape));
  exec.replay(*stream_);
  EXPECT_EQ(read(x), 2.0F);
  gs::graphs::graph two_kernels;
  gs::graphs::capture(two_kernels, *stream_, [&] {
    fill_kernel<<<1, 32, 0, stream_->get()>>>(x, 4.0F, 1);
    fill_kernel<<<1, 32, 0, stream_->get()>>>(x, 5.0F, 1);
  });
  EXPECT_FALSE(exec.update(two_kernels)) << "another topology cannot be an update";
  exec.replay(*stream_);
  EXPECT_EQ(read(x), 2.0F) << "a refused update leaves the executable as it was";
}

TEST_F(graph_exec_test, a_graph_built_with_the_graph_api_is_adopted) {
  float* x = blocks_->get(1);
  cudaGraph_t raw = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaGraphCreate(&raw, 0));
  cudaMemsetParams memset{};
  memset.dst = x;
  memset.value = 0x3F800000U;  // the bits of 1.0F
  memset.elementSize = 4;
  memset.width = 1;
  memset.height = 1;
  cudaGraphNode_t node = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaGraphAddMemsetNode(&node, raw, nullptr, 0, &memset));
  int device = 0;
  GRAPHSTEP_CUDA_TRY(cudaGetDevice(&device));
  gs::graphs::graph g = gs::graphs::graph::adopt(raw, {"built", device, 0});
  EXPECT_NE(g.id(), 0U) << "an id of 0 asks for a fresh one";
  EXPECT_EQ(g.node_counts().memset, 1U);
  gs::graphs::graph_exec exec = g.instantiate();
  exec.replay(*stream_);
  EXPECT_EQ(read(x), 1.0F);
}

TEST_F(graph_exec_test, moving_an_executable_moves_its_identity_and_replays) {
  float* x = blocks_->get(1);
  gs::graphs::graph_exec a;
  gs::graphs::capture(
      a, *stream_, [&] { fill_kernel<<<1, 32, 0, stream_->get()>>>(x, 9.0F, 1); },
      gs::graphs::capture_options{gs::graphs::capture_mode::this_thread, "a"});
  auto const id = a.id();
  a.replay(*stream_);
  gs::graphs::graph_exec b = std::move(a);
  EXPECT_EQ(b.id(), id);
  EXPECT_EQ(b.name(), "a");
  EXPECT_EQ(b.replay_count(), 1U);
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  b.replay(*stream_);
  EXPECT_EQ(read(x), 9.0F);
}

TEST_F(graph_exec_test, replaying_on_the_legacy_default_stream_is_a_usage_error) {
  float* x = blocks_->get(1);
  gs::graphs::graph_exec exec;
  gs::graphs::capture(exec, *stream_,
                      [&] { fill_kernel<<<1, 32, 0, stream_->get()>>>(x, 1.0F, 1); });
  EXPECT_THROW(exec.replay(cudaStreamLegacy), gs::usage_error);
  EXPECT_EQ(exec.replay_count(), 0U) << "nothing was launched";
}

// PyTorch's CUDAGraph.reset(), then a capture into the same object.
TEST_F(graph_exec_test, a_reset_executable_or_graph_is_captured_into_again) {
  float* x = blocks_->get(1);
  gs::graphs::graph_exec exec;
  gs::graphs::capture(exec, *stream_, *pool_,
                      [&] { fill_kernel<<<1, 32, 0, stream_->get()>>>(x, 1.0F, 1); });
  exec.replay(*stream_);
  gs::graphs::output_guard const guard = exec.guard_output("x");
  EXPECT_NO_THROW(guard.check());
  exec.reset();
  EXPECT_TRUE(exec.empty());
  EXPECT_THROW(guard.check(), gs::usage_error) << "outputs read after a reset are stale";
  exec.reset();  // resetting an empty executable does nothing
  gs::graphs::capture(exec, *stream_, *pool_,
                      [&] { fill_kernel<<<1, 32, 0, stream_->get()>>>(x, 2.0F, 1); });
  exec.replay(*stream_);
  EXPECT_EQ(read(x), 2.0F);

  gs::graphs::graph kept;
  gs::graphs::capture(kept, *stream_, *pool_,
                      [&] { fill_kernel<<<1, 32, 0, stream_->get()>>>(x, 3.0F, 1); });
  gs::graphs::graph_exec made = kept.instantiate();
  kept.reset();
  EXPECT_TRUE(kept.empty());
  made.replay(*stream_);  // the executable kept the work
  EXPECT_EQ(read(x), 3.0F);
  gs::graphs::capture(kept, *stream_, *pool_,
                      [&] { fill_kernel<<<1, 32, 0, stream_->get()>>>(x, 4.0F, 1); });
  kept.instantiate().replay(*stream_);
  EXPECT_EQ(read(x), 4.0F);
}

// PyTorch warns "The CUDA Graph is empty": the work almost always went to another stream.
TEST_F(graph_exec_test, a_capture_that_records_nothing_is_warned_about) {
  float* x = blocks_->get(1);
  gs::cuda::stream other;
  gs::graphs::graph_exec empty_step;
  gs::graphs::capture_options named;
  named.name = "misdirected";
  testing::internal::CaptureStderr();
  gs::graphs::capture(
      empty_step, *stream_, *pool_, [&] { fill_kernel<<<1, 32, 0, other.get()>>>(x, 1.0F, 1); },
      named);
  std::string const warned = testing::internal::GetCapturedStderr();
  EXPECT_NE(warned.find("'misdirected'"), std::string::npos) << warned;
  EXPECT_NE(warned.find("recorded no work"), std::string::npos) << warned;
  other.synchronize();
  gs::graphs::graph_exec step;
  testing::internal::CaptureStderr();
  gs::graphs::capture(step, *stream_, *pool_,
                      [&] { fill_kernel<<<1, 32, 0, stream_->get()>>>(x, 1.0F, 1); });
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

// A graph that allocates (cudaMallocAsync in the capture) has one executable at a time
// (cudaGraphInstantiate); the refusal says so and what to do.
TEST_F(graph_exec_test, a_graph_with_memory_nodes_has_one_executable_at_a_time) {
  gs::graphs::graph g;
  gs::graphs::capture(g, *stream_, [&] {
    float* temporary = nullptr;
    GRAPHSTEP_CUDA_TRY(cudaMallocAsync(&temporary, sizeof(float), stream_->get()));
    fill_kernel<<<1, 32, 0, stream_->get()>>>(temporary, 1.0F, 1);
    GRAPHSTEP_CUDA_TRY(cudaFreeAsync(temporary, stream_->get()));
  });
  gs::graphs::graph_exec first = g.instantiate();
  try {
    static_cast<void>(g.instantiate());
    ADD_FAILURE() << "a second executable of a graph with memory nodes";
  } catch (gs::capture_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("only one executable at a time"), std::string::npos)
        << e.what();
  }
  first.reset();
  gs::graphs::graph_exec second = g.instantiate();
  second.replay(*stream_);
  second.synchronize();
}

// A graph that allocates memory it does not free cannot be replayed again before the memory is
// freed (cudaGraphLaunch): the replay says why.
TEST_F(graph_exec_test, replaying_over_memory_an_earlier_replay_left_unfreed_is_explained) {
  float* kept = nullptr;
  gs::graphs::graph_exec exec;
  gs::graphs::capture(exec, *stream_, [&] {
    GRAPHSTEP_CUDA_TRY(cudaMallocAsync(&kept, sizeof(float), stream_->get()));
    fill_kernel<<<1, 32, 0, stream_->get()>>>(kept, 5.0F, 1);
  });
  exec.replay(*stream_);
  EXPECT_EQ(read(kept), 5.0F);
  try {
    exec.replay(*stream_);
    ADD_FAILURE() << "replayed over an unfreed allocation";
  } catch (gs::cuda_error const& e) {
    EXPECT_EQ(e.code(), static_cast<int>(cudaErrorInvalidValue));
    EXPECT_NE(std::string{e.what()}.find("left unfreed"), std::string::npos) << e.what();
  }
  GRAPHSTEP_CUDA_TRY(cudaFreeAsync(kept, stream_->get()));
  exec.replay(*stream_);
  GRAPHSTEP_CUDA_TRY(cudaFreeAsync(kept, stream_->get()));
  stream_->synchronize();
}

// An update keeps each conditional node's type and handle (cudaGraphExecUpdate: "Changing node
// parameters is not supported"): a fresh capture of the same step updates the executable (its
// handles pair with the executable's in creation order), a loop where there was a branch is
// refused and the executable runs as before.
TEST_F(graph_exec_test, an_update_across_conditional_nodes_keeps_their_kind) {
  float* x = blocks_->get(1);
  auto* flag = blocks_->get<unsigned int>(1);
  unsigned int const one = 1;
  gs::testing::copy_to_device(flag, &one, sizeof one);
  auto const branch = [&](float value) {
    gs::graphs::capture_if(*stream_, flag, [=](gs::cuda::stream_view s) {
      fill_kernel<<<1, 32, 0, s.get()>>>(x, value, 1);
    });
  };
  gs::graphs::graph_exec exec;
  gs::graphs::capture(exec, *stream_, [&] { branch(1.0F); });
  gs::graphs::graph again;
  gs::graphs::capture(again, *stream_, [&] { branch(2.0F); });
  ASSERT_TRUE(exec.update(again));
  exec.replay(*stream_);
  EXPECT_EQ(read(x), 2.0F);
  gs::graphs::graph loop;
  gs::graphs::capture(loop, *stream_, [&] {
    gs::graphs::capture_while(*stream_, flag, [=](gs::cuda::stream_view s) {
      fill_kernel<<<1, 32, 0, s.get()>>>(x, 3.0F, 1);
    });
  });
  EXPECT_FALSE(exec.update(loop)) << "a WHILE node where the executable has an IF node";
  exec.replay(*stream_);
  EXPECT_EQ(read(x), 2.0F) << "a refused update leaves the executable as it was";
}
