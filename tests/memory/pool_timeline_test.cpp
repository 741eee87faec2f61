// The pool's memory timeline on the CPU: the engine memory_pool runs, on a device whose memory
// is address ranges, records segments, allocations, frees and captures in order, and the
// timeline's JSON says so.

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <graphstep/error.hpp>
#include <graphstep/memory/pool_timeline.hpp>
#include <sstream>
#include <string>

#include "memory/detail/pool_engine.hpp"

namespace gm = graphstep::memory::detail;
namespace memory = graphstep::memory;

namespace {

constexpr std::size_t mib = std::size_t{1} << 20;
constexpr gm::stream_id stream_a = 0x1000;

// Memory in separate segments 64 MiB apart (or one range that grows), events that complete at
// once: the timeline, not the ordering, is under test here.
class segment_device final : public gm::pool_device {
 public:
  explicit segment_device(bool one_range = false) : one_range_{one_range} {}
  growth_status grow(std::size_t bytes, growth& out) override {
    out.bytes = bytes;
    out.extends_region = one_range_ && mapped_ > 0;
    out.base = one_range_ ? base_ : base_ + segments_++ * 64 * mib;
    mapped_ += bytes;
    return growth_status::grown;
  }
  std::size_t shrink(std::uintptr_t /*base*/, std::size_t region_bytes,
                     std::size_t free_bytes) override {
    std::size_t const given_back = free_bytes >= region_bytes ? region_bytes : 0;
    mapped_ -= given_back;
    return given_back;
  }
  [[nodiscard]] std::size_t granularity() const override { return 2 * mib; }
  [[nodiscard]] std::size_t reserved_bytes() const override { return mapped_; }
  [[nodiscard]] std::size_t mapped_bytes() const override { return mapped_; }
  void record(gm::event_id /*event*/, gm::stream_id /*stream*/) override {}
  [[nodiscard]] bool complete(gm::event_id /*event*/) override { return true; }
  void wait(gm::stream_id /*stream*/, gm::event_id /*event*/) override {}
  void forget(gm::event_id /*event*/) noexcept override {}
  void synchronize(gm::event_id /*event*/) override {}

 private:
  bool one_range_;
  std::uintptr_t base_{std::uintptr_t{1} << 40};
  std::size_t segments_{};
  std::size_t mapped_{};
};

gm::pool_engine_options small_growth() {
  gm::pool_engine_options options;
  options.growth_bytes = 2 * mib;
  return options;
}

bool contains(std::string const& text, std::string const& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST(pool_timeline, records_eager_allocations_and_frees_in_order) {
  segment_device device;
  gm::pool_engine engine{small_growth(), device};
  engine.begin_timeline(100);
  auto const a = engine.allocate(1000, stream_a, std::nullopt);  // grows: event 0, then 1
  auto const b = engine.allocate(3000, stream_a, std::nullopt);  // 2
  engine.deallocate(a, stream_a, std::nullopt);                  // 3
  engine.name_allocation(b, "weights");
  memory::pool_timeline const timeline = engine.end_timeline();

  EXPECT_EQ(timeline.events, 4U);
  EXPECT_EQ(timeline.alignment, 256U);
  ASSERT_EQ(timeline.segments.size(), 1U);
  ASSERT_EQ(timeline.segments[0].sizes.size(), 1U);
  EXPECT_EQ(timeline.segments[0].sizes[0].at, 0U);
  EXPECT_EQ(timeline.segments[0].sizes[0].bytes, 2 * mib);
  ASSERT_EQ(timeline.allocations.size(), 2U);
  auto const& first = timeline.allocations[0];
  auto const& second = timeline.allocations[1];
  EXPECT_EQ(first.id, 0U);
  EXPECT_EQ(first.address, a);
  EXPECT_EQ(first.bytes, 1000U);
  EXPECT_EQ(first.segment, 0U);
  EXPECT_EQ(first.offset, a - timeline.segments[0].base);
  EXPECT_EQ(first.graph, 0U);
  EXPECT_EQ(first.allocated_at, 1U);
  EXPECT_EQ(first.freed_at, 3U);
  EXPECT_EQ(second.allocated_at, 2U);
  EXPECT_EQ(second.freed_at, std::nullopt);
  EXPECT_EQ(second.name, "weights");
  EXPECT_EQ(second.offset, b - timeline.segments[0].base);
  EXPECT_GE(second.offset, first.offset + first.bytes);  // they do not overlap
  engine.deallocate(b, stream_a, std::nullopt);
}

TEST(pool_timeline, tags_each_allocation_with_its_capture) {
  segment_device device;
  gm::pool_engine engine{small_growth(), device};
  auto const before = engine.allocate(512, stream_a, std::nullopt);
  engine.begin_timeline(100);
  engine.begin_capture(11, 7, "size 16", stream_a);
  auto const scratch = engine.allocate(4096, stream_a, 11);
  auto const output = engine.allocate(256, stream_a, 11);
  engine.deallocate(scratch, stream_a, 11);
  ASSERT_EQ(engine.finish_capture(11, true), 7U);
  engine.begin_capture(12, 8, "failed \"one\"\n", stream_a);
  auto const lost = engine.allocate(256, stream_a, 12);
  static_cast<void>(lost);
  EXPECT_EQ(engine.finish_capture(12, false), std::nullopt);
  engine.release_graph(7);
  memory::pool_timeline const timeline = engine.timeline();

  ASSERT_EQ(timeline.allocations.size(), 4U);
  auto const& existing = timeline.allocations[0];
  EXPECT_TRUE(existing.before_timeline);
  EXPECT_EQ(existing.address, before);
  EXPECT_EQ(existing.allocated_at, 0U);
  EXPECT_EQ(existing.freed_at, std::nullopt);
  ASSERT_EQ(timeline.captures.size(), 2U);
  auto const& committed = timeline.captures[0];
  EXPECT_EQ(committed.graph, 7U);
  EXPECT_EQ(committed.name, "size 16");
  EXPECT_TRUE(committed.committed);
  auto const& s = timeline.allocations[1];
  auto const& o = timeline.allocations[2];
  auto const& l = timeline.allocations[3];
  EXPECT_EQ(o.address, output);
  EXPECT_EQ(s.graph, 7U);
  EXPECT_EQ(o.graph, 7U);
  EXPECT_EQ(l.graph, 8U);
  EXPECT_LT(committed.began_at, s.allocated_at);
  EXPECT_LT(s.allocated_at, o.allocated_at);
  EXPECT_LT(o.allocated_at, *s.freed_at);  // freed inside the capture
  EXPECT_LT(*s.freed_at, *committed.ended_at);
  // The output lives until its graph is released; the failed capture's memory went back when it
  // ended.
  EXPECT_EQ(o.freed_at, committed.released_at);
  EXPECT_FALSE(timeline.captures[1].committed);
  EXPECT_EQ(l.freed_at, timeline.captures[1].ended_at);
  EXPECT_EQ(timeline.captures[1].released_at, std::nullopt);

  std::string const json = timeline.to_json();
  EXPECT_TRUE(contains(json, R"("format":"graphstep.memory_timeline","version":1)")) << json;
  EXPECT_TRUE(contains(json, R"("name":"failed \"one\"\n")")) << json;
  EXPECT_TRUE(contains(json, R"("graph":7,"capture":"size 16")")) << json;
  EXPECT_TRUE(contains(json, R"("graph":0,"capture":null)")) << json;
  EXPECT_TRUE(contains(json, R"("freed_at":null)")) << json;
  engine.deallocate(before, stream_a, std::nullopt);
  static_cast<void>(engine.end_timeline());
}

TEST(pool_timeline, an_output_kept_after_its_graph_stays_live) {
  segment_device device;
  gm::pool_engine engine{small_growth(), device};
  engine.begin_timeline(100);
  engine.begin_capture(1, 3, "step", stream_a);
  auto const output = engine.allocate(256, stream_a, 1);
  ASSERT_EQ(engine.finish_capture(1, true), 3U);
  engine.keep_after_graph(output);
  engine.release_graph(3);
  auto const kept = engine.timeline().allocations.at(0);
  EXPECT_TRUE(kept.kept_after_graph);
  EXPECT_EQ(kept.freed_at, std::nullopt);
  engine.deallocate(output, stream_a, std::nullopt);
  auto const timeline = engine.end_timeline();
  EXPECT_EQ(timeline.allocations.at(0).freed_at, timeline.events - 1);
}

TEST(pool_timeline, records_planned_allocations_at_their_offsets) {
  segment_device device;
  gm::pool_engine engine{small_growth(), device};
  engine.begin_trace();
  auto const x = engine.allocate(1024, stream_a, std::nullopt);
  auto const y = engine.allocate(1024, stream_a, std::nullopt);
  engine.deallocate(x, stream_a, std::nullopt);
  engine.deallocate(y, stream_a, std::nullopt);
  static_cast<void>(engine.plan_next_capture(engine.end_trace()));
  engine.begin_timeline(100);
  engine.begin_capture(5, 9, "planned", stream_a);
  auto const px = engine.allocate(1024, stream_a, 5);
  auto const py = engine.allocate(1024, stream_a, 5);
  engine.deallocate(px, stream_a, 5);
  engine.deallocate(py, stream_a, 5);
  ASSERT_EQ(engine.finish_capture(5, true), 9U);
  auto const timeline = engine.end_timeline();
  // The slab, taken by the plan before recording began, and the two planned allocations in it.
  ASSERT_EQ(timeline.allocations.size(), 3U);
  EXPECT_TRUE(timeline.allocations[0].before_timeline);
  for (std::size_t i = 1; i < 3; ++i) {
    EXPECT_TRUE(timeline.allocations[i].planned);
    EXPECT_EQ(timeline.allocations[i].graph, 9U);
    EXPECT_TRUE(timeline.allocations[i].freed_at.has_value());
  }
  EXPECT_EQ(timeline.allocations[1].address, px);
  EXPECT_EQ(timeline.allocations[2].address, py);
  engine.release_graph(9);
}

TEST(pool_timeline, records_segments_as_they_grow_and_are_trimmed) {
  segment_device device;
  gm::pool_engine engine{small_growth(), device};
  engine.begin_timeline(100);
  auto const a = engine.allocate(2 * mib, stream_a, std::nullopt);
  auto const b = engine.allocate(3 * mib, stream_a, std::nullopt);  // a second segment
  engine.deallocate(b, stream_a, std::nullopt);
  EXPECT_EQ(engine.trim(), 4 * mib);
  auto const timeline = engine.end_timeline();
  ASSERT_EQ(timeline.segments.size(), 2U);
  auto const& second = timeline.segments[1];
  ASSERT_EQ(second.sizes.size(), 2U);
  EXPECT_EQ(second.sizes[0].bytes, 4 * mib);
  EXPECT_EQ(second.sizes[1].bytes, 0U);  // given back whole
  EXPECT_EQ(timeline.allocations[1].segment, 1U);
  EXPECT_EQ(timeline.allocations[1].offset, 0U);
  engine.deallocate(a, stream_a, std::nullopt);

  segment_device one_range{true};
  gm::pool_engine growing{small_growth(), one_range};
  growing.begin_timeline(100);
  auto const c = growing.allocate(2 * mib, stream_a, std::nullopt);
  auto const d = growing.allocate(2 * mib, stream_a, std::nullopt);  // extends the range
  auto const extended = growing.end_timeline();
  ASSERT_EQ(extended.segments.size(), 1U);
  ASSERT_EQ(extended.segments[0].sizes.size(), 2U);
  EXPECT_EQ(extended.segments[0].sizes[1].bytes, 4 * mib);
  EXPECT_EQ(extended.allocations[1].offset, d - extended.segments[0].base);
  growing.deallocate(c, stream_a, std::nullopt);
  growing.deallocate(d, stream_a, std::nullopt);
}

TEST(pool_timeline, keeps_at_most_max_allocations_and_counts_the_rest) {
  segment_device device;
  gm::pool_engine engine{small_growth(), device};
  engine.begin_timeline(2);
  for (int i = 0; i < 5; ++i) {
    engine.deallocate(engine.allocate(256, stream_a, std::nullopt), stream_a, std::nullopt);
  }
  auto const timeline = engine.end_timeline();
  EXPECT_EQ(timeline.allocations.size(), 2U);
  EXPECT_EQ(timeline.dropped_allocations, 3U);
  EXPECT_TRUE(contains(timeline.to_json(), R"("dropped_allocations":3)"));
}

TEST(pool_timeline, misuse_is_refused_by_name) {
  segment_device device;
  gm::pool_engine engine{small_growth(), device};
  EXPECT_THROW(
      {
        try {
          static_cast<void>(engine.timeline());
        } catch (graphstep::usage_error const& e) {
          EXPECT_TRUE(contains(e.what(), "call begin_timeline")) << e.what();
          throw;
        }
      },
      graphstep::usage_error);
  EXPECT_THROW(static_cast<void>(engine.end_timeline()), graphstep::usage_error);
  EXPECT_THROW(engine.begin_timeline(0), graphstep::usage_error);
  engine.begin_timeline(10);
  EXPECT_THROW(engine.begin_timeline(10), graphstep::usage_error);
  auto const a = engine.allocate(256, stream_a, std::nullopt);
  EXPECT_THROW(engine.name_allocation(a + 256, "inside"), graphstep::usage_error);
  engine.deallocate(a, stream_a, std::nullopt);
  EXPECT_THROW(engine.name_allocation(a, "freed"), graphstep::usage_error);
}

TEST(pool_timeline, writes_its_json_to_a_file_and_says_why_it_cannot) {
  memory::pool_timeline timeline;
  timeline.backing = "device_malloc";
  timeline.segments.push_back({0x1000, {{0, 4096}}});
  std::string const path = ::testing::TempDir() + "pool_timeline_test.json";
  timeline.write_json(path);
  std::ifstream file{path};
  std::stringstream read;
  read << file.rdbuf();
  EXPECT_EQ(read.str(), timeline.to_json());
  EXPECT_TRUE(contains(read.str(), R"("base":"0x1000","sizes":[{"at":0,"bytes":4096}])"));
  try {
    timeline.write_json("/nonexistent-directory/timeline.json");
    FAIL() << "no error";
  } catch (graphstep::error const& e) {
    EXPECT_TRUE(contains(e.what(), "cannot open '/nonexistent-directory/timeline.json'"))
        << e.what();
  }
}
