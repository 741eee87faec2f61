// The pool's memory timeline through memory_pool and a capture_scope on the device: eager and
// captured allocations, each with its graph and capture, frees in order, and its JSON.

#include <graphstep/cuda/check.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <graphstep/memory/pool_timeline.hpp>
#include <optional>
#include <string>

#include "common/gpu_test.hpp"

namespace gs = graphstep;

namespace {

using pool_timeline_test = gs::testing::stream_pool_test;

bool contains(std::string const& text, std::string const& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_F(pool_timeline_test, records_eager_and_captured_allocations_with_their_capture) {
  pool_->begin_timeline();
  void* input = pool_->allocate(4096, *stream_);
  pool_->name_allocation(input, "input");
  std::optional<gs::graphs::graph> graph{std::in_place};
  void* output = nullptr;
  gs::graphs::capture_options options;
  options.name = "timeline step";
  gs::graphs::capture(
      *graph, *stream_, *pool_,
      [&] {
        void* scratch = pool_->allocate(1 << 16, *stream_);
        GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(scratch, 0, 1 << 16, stream_->get()));
        output = pool_->allocate(256, *stream_);
        GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(output, 0, 256, stream_->get()));
        pool_->deallocate(scratch, *stream_);
      },
      options);
  std::uint64_t const graph_id = graph->id();
  graph.reset();  // its output goes back with it
  pool_->deallocate(input, *stream_);
  gs::memory::pool_timeline const timeline = pool_->end_timeline();

  EXPECT_EQ(timeline.pool, pool_->id());
  EXPECT_FALSE(timeline.backing.empty());
  ASSERT_FALSE(timeline.segments.empty());
  ASSERT_EQ(timeline.captures.size(), 1U);
  auto const& capture = timeline.captures[0];
  EXPECT_EQ(capture.name, "timeline step");
  EXPECT_EQ(capture.graph, graph_id);
  EXPECT_TRUE(capture.committed);
  ASSERT_TRUE(capture.released_at.has_value());
  ASSERT_EQ(timeline.allocations.size(), 3U);
  auto const& in = timeline.allocations[0];
  auto const& scratch = timeline.allocations[1];
  auto const& out = timeline.allocations[2];
  EXPECT_EQ(in.name, "input");
  EXPECT_EQ(in.graph, 0U);
  EXPECT_EQ(scratch.graph, graph_id);
  EXPECT_EQ(scratch.bytes, std::size_t{1} << 16);
  EXPECT_EQ(out.graph, graph_id);
  EXPECT_EQ(out.address, reinterpret_cast<std::uintptr_t>(output));
  EXPECT_LT(capture.began_at, scratch.allocated_at);
  EXPECT_LT(*scratch.freed_at, *capture.ended_at);
  EXPECT_EQ(out.freed_at, capture.released_at);  // the output went back with its graph
  ASSERT_TRUE(in.freed_at.has_value());
  EXPECT_GT(*in.freed_at, *capture.released_at);
  for (auto const& allocation : timeline.allocations) {
    auto const& segment = timeline.segments.at(allocation.segment);
    EXPECT_EQ(allocation.address, segment.base + allocation.offset);
  }
  std::string const json = timeline.to_json();
  EXPECT_TRUE(contains(json, "\"capture\":\"timeline step\"")) << json;
  EXPECT_TRUE(contains(json, "\"name\":\"input\"")) << json;
}

TEST_F(pool_timeline_test, misuse_is_refused_by_name) {
  EXPECT_THROW(static_cast<void>(pool_->timeline()), gs::usage_error);
  pool_->begin_timeline();
  EXPECT_THROW(pool_->begin_timeline(), gs::usage_error);
  void* block = pool_->allocate(256, *stream_);
  pool_->deallocate(block, *stream_);
  try {
    pool_->name_allocation(block, "freed");
    ADD_FAILURE() << "a freed block was named";
  } catch (gs::usage_error const& e) {
    EXPECT_TRUE(contains(e.what(), "no live block of this pool starts at")) << e.what();
  }
  static_cast<void>(pool_->end_timeline());
  EXPECT_THROW(static_cast<void>(pool_->end_timeline()), gs::usage_error);
}
