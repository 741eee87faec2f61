// The pool's side of a capture driven directly, as a program that captures with CUDA's own
// calls would: allocations in the capture serve the graph, a commit hands it a lease, an
// abandon gives the memory back.

#include <graphstep/cuda/check.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/graph.hpp>
#include <graphstep/memory/pool_capture.hpp>
#include <optional>
#include <string>

#include "common/gpu_test.hpp"

namespace gs = graphstep;

namespace {

using pool_capture_test = gs::testing::stream_pool_test;

}  // namespace

TEST_F(pool_capture_test, a_committed_capture_keeps_its_outputs_until_the_lease_dies) {
  std::uint64_t const id = gs::graphs::next_graph_id();
  GRAPHSTEP_CUDA_TRY(cudaStreamBeginCapture(stream_->get(), cudaStreamCaptureModeThreadLocal));
  gs::memory::pool_capture capture = pool_->open_capture(*stream_, id, "raw");
  void* output = pool_->allocate(1024, *stream_);
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(output, 0, 1024, stream_->get()));
  cudaGraph_t graph = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaStreamEndCapture(stream_->get(), &graph));
  EXPECT_EQ(capture.problem(), "");
  gs::memory::pool_lease lease = capture.commit();
  EXPECT_TRUE(lease);
  EXPECT_FALSE(capture.open());
  EXPECT_GE(pool_->bytes_held_by(id), 1024U);
  EXPECT_EQ(pool_->statistics().live_graphs, 1U);
  GRAPHSTEP_CUDA_TRY(cudaGraphDestroy(graph));
  gs::memory::pool_lease copy = lease;  // copies share one hold
  lease = {};
  EXPECT_GE(pool_->bytes_held_by(id), 1024U);
  copy = {};
  EXPECT_EQ(pool_->bytes_held_by(id), 0U);
  EXPECT_EQ(pool_->statistics().live_graphs, 0U);
}

TEST_F(pool_capture_test, committing_with_an_empty_lease_is_a_usage_error_and_keeps_it_open) {
  std::uint64_t const id = gs::graphs::next_graph_id();
  GRAPHSTEP_CUDA_TRY(cudaStreamBeginCapture(stream_->get(), cudaStreamCaptureModeThreadLocal));
  gs::memory::pool_capture capture = pool_->open_capture(*stream_, id, "two pools");
  void* output = pool_->allocate(256, *stream_);
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(output, 0, 256, stream_->get()));
  cudaGraph_t graph = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaStreamEndCapture(stream_->get(), &graph));
  try {
    static_cast<void>(capture.commit_with(gs::memory::pool_lease{}));
    ADD_FAILURE() << "commit_with took an empty lease";
  } catch (gs::usage_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("the other lease is empty"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(capture.open());
  gs::memory::pool_lease const lease = capture.commit();
  EXPECT_GE(pool_->bytes_held_by(id), 256U);
  GRAPHSTEP_CUDA_TRY(cudaGraphDestroy(graph));
}

TEST_F(pool_capture_test, an_abandoned_capture_gives_its_memory_back_at_once) {
  std::uint64_t const id = gs::graphs::next_graph_id();
  GRAPHSTEP_CUDA_TRY(cudaStreamBeginCapture(stream_->get(), cudaStreamCaptureModeThreadLocal));
  {
    gs::memory::pool_capture capture = pool_->open_capture(*stream_, id, "dropped");
    static_cast<void>(pool_->allocate(1024, *stream_));
  }  // destroyed without a commit
  cudaGraph_t graph = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaStreamEndCapture(stream_->get(), &graph));
  GRAPHSTEP_CUDA_TRY(cudaGraphDestroy(graph));
  EXPECT_EQ(pool_->bytes_held_by(id), 0U);
  EXPECT_EQ(pool_->statistics().live_graphs, 0U);
}

TEST_F(pool_capture_test, opening_on_a_stream_that_is_not_capturing_is_a_usage_error) {
  EXPECT_THROW(static_cast<void>(pool_->open_capture(*stream_, 1, "idle")), gs::usage_error);
}
