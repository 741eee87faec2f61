// The allocator core: best fit, split, coalesce, alignment, stream-ordered reuse and
// graph-private memory, over both region layouts the pool uses; and every misuse, with the
// message it gets.

#include "memory/detail/block_allocator.hpp"

#include <gtest/gtest.h>

#include <graphstep/error.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "common/error_message.hpp"

namespace gm = graphstep::memory;

namespace {

constexpr std::uintptr_t base = 0x10000000;
constexpr gm::detail::stream_id stream_a = 1;
constexpr gm::detail::stream_id stream_b = 2;
constexpr gm::detail::graph_id graph_g = 7;
constexpr gm::detail::graph_id graph_h = 8;

// One region grown in place (virtual memory) or separate segments (cudaMalloc fallback).
struct growing_region {
  static void add(gm::detail::block_allocator& a, std::size_t bytes) {
    if (!a.owns(base)) {
      a.add_region(base, bytes);
    } else {
      a.extend_region(base, bytes);
    }
  }
};
struct separate_segments {
  static void add(gm::detail::block_allocator& a, std::size_t bytes) {
    // Each segment starts far past the end of the previous ones: never adjacent.
    a.add_region(base + a.stats().region_bytes * 4096, bytes);
  }
};

template <typename Layout>
class block_allocator_test : public ::testing::Test {
 protected:
  gm::detail::block_allocator alloc_{256};
  void grow(std::size_t bytes) {
    Layout::add(alloc_, bytes);
    alloc_.check_invariants();
  }
  std::uintptr_t take(std::size_t bytes, gm::detail::stream_id s = stream_a,
                      gm::detail::graph_id g = gm::detail::no_graph) {
    auto b = alloc_.allocate(bytes, s, g);
    EXPECT_TRUE(b.has_value()) << "no block for " << bytes;
    alloc_.check_invariants();
    return b ? b->address : 0;
  }
  bool fits(std::size_t bytes, gm::detail::stream_id s,
            gm::detail::graph_id g = gm::detail::no_graph) {
    // Probes without keeping the block (a block that fits comes back tagged with `s`).
    auto b = alloc_.allocate(bytes, s, g);
    if (!b) return false;
    alloc_.deallocate(b->address, s);
    alloc_.check_invariants();
    return true;
  }
  void give(std::uintptr_t address, gm::detail::stream_id s = stream_a) {
    alloc_.deallocate(address, s);
    alloc_.check_invariants();
  }
};

using layouts = ::testing::Types<growing_region, separate_segments>;
class layout_names {
 public:
  template <typename T>
  static std::string GetName(int) {
    return std::is_same_v<T, growing_region> ? "growing_region" : "separate_segments";
  }
};
TYPED_TEST_SUITE(block_allocator_test, layouts, layout_names);

using graphstep::testing::message_of;

#define EXPECT_USAGE_ERROR(call, text)                                   \
  do {                                                                   \
    std::string const gs_message_ = message_of([&] { call; });           \
    EXPECT_NE(gs_message_.find(text), std::string::npos) << gs_message_; \
  } while (0)

}  // namespace

TYPED_TEST(block_allocator_test, rounds_up_to_the_alignment_and_splits) {
  this->grow(4096);
  auto const a = this->alloc_.allocate(1, stream_a, gm::detail::no_graph);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->size, 256U);
  EXPECT_EQ(a->address % 256, 0U);
  auto const b = this->alloc_.allocate(257, stream_a, gm::detail::no_graph);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->size, 512U);
  EXPECT_EQ(b->address, a->address + 256) << "split off the front of the free block";
  auto const stats = this->alloc_.stats();
  EXPECT_EQ(stats.bytes_in_use, 768U);
  EXPECT_EQ(stats.free_bytes, 4096U - 768U);
  EXPECT_EQ(stats.used_blocks, 2U);
  EXPECT_EQ(stats.free_blocks, 1U);
  this->alloc_.check_invariants();
}

TYPED_TEST(block_allocator_test, best_fit_prefers_the_smallest_hole_then_the_lowest_address) {
  this->grow(8192);
  auto const a = this->take(1024);
  auto const b = this->take(256);
  auto const c = this->take(512);
  auto const d = this->take(256);
  auto const e = this->take(512);
  auto const f = this->take(256);
  static_cast<void>(b);
  static_cast<void>(d);
  static_cast<void>(f);
  this->give(a);  // a 1024 hole
  this->give(e);  // a 512 hole, higher
  this->give(c);  // a 512 hole, lower
  EXPECT_EQ(this->take(300), c) << "the 512 holes fit best; the lower one wins";
  EXPECT_EQ(this->take(300), e);
  EXPECT_EQ(this->take(1000), a);
}

TYPED_TEST(block_allocator_test, freeing_coalesces_neighbours) {
  this->grow(4096);
  auto const a = this->take(1024);
  auto const b = this->take(1024);
  auto const c = this->take(1024);
  this->give(a);
  this->give(c);
  EXPECT_EQ(this->alloc_.stats().free_blocks, 3U) << "a; c on stream a; the untouched tail";
  this->give(b);
  EXPECT_EQ(this->alloc_.stats().free_blocks, 2U) << "a, b and c merged (same stream)";
  this->alloc_.release_stream(stream_a);
  this->alloc_.check_invariants();
  auto const stats = this->alloc_.stats();
  EXPECT_EQ(stats.free_blocks, 1U) << "released: everything merged with the tail";
  EXPECT_EQ(stats.largest_free_block, 4096U);
  EXPECT_EQ(stats.fragmentation, 0.0);
}

TYPED_TEST(block_allocator_test, nothing_fits_returns_nullopt_and_growth_helps) {
  this->grow(1024);
  EXPECT_FALSE(this->alloc_.allocate(2048, stream_a, gm::detail::no_graph));
  this->alloc_.check_invariants();
  this->grow(2048);
  EXPECT_TRUE(this->alloc_.allocate(2048, stream_a, gm::detail::no_graph));
  this->alloc_.check_invariants();
}

TYPED_TEST(block_allocator_test, a_block_freed_on_one_stream_waits_for_release_on_another) {
  this->grow(1024);
  auto const a = this->take(1024, stream_a);
  this->give(a, stream_a);
  EXPECT_FALSE(this->alloc_.allocate(512, stream_b, gm::detail::no_graph)) << "not ordered yet";
  this->alloc_.release_stream(stream_b);  // another stream's release changes nothing
  EXPECT_FALSE(this->alloc_.allocate(512, stream_b, gm::detail::no_graph));
  EXPECT_EQ(this->take(512, stream_a), a) << "same stream: at once";
  this->give(a, stream_a);
  this->alloc_.release_stream(stream_a);
  this->alloc_.check_invariants();
  EXPECT_EQ(this->take(512, stream_b), a);
}

TYPED_TEST(block_allocator_test, a_stream_block_stays_apart_from_released_neighbours) {
  this->grow(4096);
  auto const a = this->take(2048, stream_a);
  this->give(a, stream_a);
  // [a, a+2048) is tied to stream a, the rest to every stream: merged, stream b would lose it.
  EXPECT_EQ(this->alloc_.stats().free_blocks, 2U);
  EXPECT_FALSE(this->fits(3072, stream_b));
  // Stream a may use both halves together: the request spans them, and the remainder keeps
  // its own tag, so stream b can still have it.
  auto const spanning = this->alloc_.allocate(3072, stream_a, gm::detail::no_graph);
  ASSERT_TRUE(spanning);
  this->alloc_.check_invariants();
  EXPECT_EQ(spanning->address, a);
  EXPECT_EQ(spanning->size, 3072U);
  EXPECT_EQ(this->take(1024, stream_b), a + 3072);
}

TYPED_TEST(block_allocator_test, graph_memory_never_serves_eager_allocations) {
  this->grow(2048);
  auto const g1 = this->take(1024, stream_a, graph_g);
  this->give(g1, stream_a);
  this->alloc_.release_stream(stream_a);
  // Only the untouched half may serve eager work, and no eager request may span into g's.
  EXPECT_FALSE(this->fits(2048, stream_a));
  auto const eager = this->alloc_.allocate(1024, stream_a, gm::detail::no_graph);
  ASSERT_TRUE(eager);
  EXPECT_NE(eager->address, g1);
  EXPECT_FALSE(this->alloc_.allocate(1024, stream_a, gm::detail::no_graph));
  // Another graph sharing the pool may reuse it.
  EXPECT_EQ(this->take(1024, stream_a, graph_h), g1);
  EXPECT_EQ(this->alloc_.bytes_in_use_by(graph_h), 1024U);
  EXPECT_EQ(this->alloc_.bytes_in_use_by(graph_g), 0U);
}

TYPED_TEST(block_allocator_test, a_graph_block_freed_keeps_its_mark_on_every_stream) {
  this->grow(1024);
  auto const g1 = this->take(1024, stream_a, graph_g);
  this->give(g1, stream_a);
  EXPECT_FALSE(this->fits(256, stream_a)) << "freed, same stream, but g still replays there";
  EXPECT_TRUE(this->fits(1024, stream_a, graph_g)) << "g itself may reuse it during capture";
  EXPECT_FALSE(this->fits(256, stream_b, graph_h)) << "stream order still holds for graphs";
}

TYPED_TEST(block_allocator_test, a_graph_may_span_blocks_touched_by_other_graphs) {
  this->grow(3072);
  auto const g1 = this->take(1024, stream_a, graph_g);
  this->give(g1, stream_a);
  this->alloc_.release_stream(stream_a);
  // [g1, +1024) touched by g, the rest untouched: two free blocks that may not merge.
  EXPECT_EQ(this->alloc_.stats().free_blocks, 2U);
  EXPECT_FALSE(this->fits(3072, stream_a)) << "eager work may not span g's memory";
  auto const whole = this->alloc_.allocate(3072, stream_a, graph_h);
  ASSERT_TRUE(whole) << "one region, so the two blocks are adjacent";
  this->alloc_.check_invariants();
  EXPECT_EQ(whole->address, g1);
  this->give(whole->address, stream_a);
  this->alloc_.release_stream(stream_a);
  this->alloc_.release_graph(graph_h);
  this->alloc_.check_invariants();
  EXPECT_FALSE(this->fits(256, stream_a)) << "all of it still carries g's mark";
  this->alloc_.release_graph(graph_g);
  this->alloc_.check_invariants();
  EXPECT_EQ(this->alloc_.stats().free_blocks, 1U);
  EXPECT_EQ(this->take(3072, stream_a), g1);
}

TYPED_TEST(block_allocator_test, release_graph_frees_outputs_and_clears_marks) {
  this->grow(4096);
  auto const output = this->take(1024, stream_a, graph_g);
  auto const scratch = this->take(1024, stream_a, graph_g);
  auto const other = this->take(512, stream_a, graph_h);
  this->give(scratch, stream_a);
  EXPECT_EQ(this->alloc_.bytes_in_use_by(graph_g), 1024U);
  EXPECT_EQ(this->alloc_.bytes_in_use_by(graph_h), 512U);
  this->alloc_.release_graph(graph_g);
  this->alloc_.check_invariants();
  EXPECT_EQ(this->alloc_.bytes_in_use_by(graph_g), 0U);
  EXPECT_EQ(this->alloc_.bytes_in_use_by(graph_h), 512U) << "h keeps its block";
  EXPECT_EQ(this->alloc_.stats().bytes_in_use, 512U);
  this->alloc_.release_stream(stream_a);
  EXPECT_EQ(this->take(2048, stream_b), output) << "g's memory serves eager work again";
  this->give(output, stream_b);
  this->give(other, stream_a);
  this->alloc_.release_stream(stream_a);
  this->alloc_.release_stream(stream_b);
  EXPECT_FALSE(this->fits(4096, stream_a)) << "h still marks its block";
  this->alloc_.release_graph(graph_h);
  this->alloc_.check_invariants();
  EXPECT_EQ(this->alloc_.stats().free_blocks, 1U);
  EXPECT_EQ(this->take(4096, stream_a), output) << "everything merged back";
}

TYPED_TEST(block_allocator_test, marks_of_several_graphs_accumulate) {
  this->grow(1024);
  auto const a = this->take(1024, stream_a, graph_g);
  this->give(a, stream_a);
  EXPECT_EQ(this->take(1024, stream_a, graph_h), a);
  this->give(a, stream_a);
  this->alloc_.release_graph(graph_g);
  EXPECT_FALSE(this->alloc_.allocate(1024, stream_a, gm::detail::no_graph))
      << "h still replays there";
  this->alloc_.release_graph(graph_h);
  EXPECT_TRUE(this->alloc_.allocate(1024, stream_a, gm::detail::no_graph));
  this->alloc_.check_invariants();
}

TYPED_TEST(block_allocator_test, peak_and_fragmentation) {
  this->grow(4096);
  auto const a = this->take(1024);
  auto const b = this->take(1024);
  auto const c = this->take(1024);
  this->give(b);
  this->alloc_.release_stream(stream_a);
  auto const stats = this->alloc_.stats();
  EXPECT_EQ(stats.peak_bytes_in_use, 3072U);
  EXPECT_EQ(stats.free_bytes, 2048U);
  EXPECT_EQ(stats.largest_free_block, 1024U);
  EXPECT_DOUBLE_EQ(stats.fragmentation, 0.5);
  this->give(a);
  this->give(c);
  EXPECT_EQ(this->alloc_.stats().peak_bytes_in_use, 3072U);
  EXPECT_EQ(this->alloc_.stats().bytes_in_use, 0U);
}

TYPED_TEST(block_allocator_test, bad_requests_are_usage_errors) {
  this->grow(1024);
  auto const a = this->take(512);
  EXPECT_USAGE_ERROR(static_cast<void>(this->alloc_.allocate(0, stream_a, 0)), "0 bytes");
  EXPECT_USAGE_ERROR(static_cast<void>(this->alloc_.allocate(~std::size_t{0}, stream_a, 0)),
                     "larger than any address space");
  EXPECT_USAGE_ERROR(this->alloc_.deallocate(a + 256, stream_a), "is not its start");
  EXPECT_USAGE_ERROR(this->alloc_.deallocate(0x42, stream_a), "foreign pointer");
  EXPECT_USAGE_ERROR(this->alloc_.deallocate(base + (std::size_t{1} << 40), stream_a),
                     "foreign pointer");
  this->give(a);
  EXPECT_USAGE_ERROR(this->alloc_.deallocate(a, stream_a), "double free");
  this->alloc_.check_invariants();
  EXPECT_EQ(this->alloc_.stats().bytes_in_use, 0U) << "failed calls change nothing";
}

TEST(block_allocator, bad_alignment_is_a_usage_error) {
  EXPECT_USAGE_ERROR(gm::detail::block_allocator{3}, "power of two, not 3");
  EXPECT_USAGE_ERROR(gm::detail::block_allocator{0}, "power of two, not 0");
  EXPECT_USAGE_ERROR(gm::detail::block_allocator{768}, "power of two, not 768");
  EXPECT_EQ(gm::detail::block_allocator{1}.alignment(), 1U);
}

TEST(block_allocator, bad_regions_are_usage_errors) {
  gm::detail::block_allocator a{256};
  EXPECT_USAGE_ERROR(a.add_region(base + 1, 4096), "is not aligned to 256 bytes");
  EXPECT_USAGE_ERROR(a.add_region(base, 0), "a region of 0 bytes");
  EXPECT_USAGE_ERROR(a.add_region(~std::uintptr_t{0} - 1023, 4096), "past the end");
  a.add_region(base, 4096);
  EXPECT_USAGE_ERROR(a.add_region(base + 2048, 4096), "overlaps the region at 0x10000000");
  EXPECT_USAGE_ERROR(a.add_region(base - 1024, 2048), "overlaps the region at 0x10000000");
  EXPECT_USAGE_ERROR(a.add_region(base, 4096), "overlaps");
  a.add_region(base + 8192, 4096);
  EXPECT_USAGE_ERROR(a.extend_region(base, 8192), "would overlap the region at 0x10002000");
  EXPECT_USAGE_ERROR(a.extend_region(base + 256, 256), "no region starts at 0x10000100");
  EXPECT_USAGE_ERROR(a.extend_region(base, 0), "growth of 0 bytes");
  a.check_invariants();
  EXPECT_EQ(a.stats().region_bytes, 2U * 4096) << "failed calls change nothing";
  a.extend_region(base, 4096);  // exactly up to the next region
  a.check_invariants();
  EXPECT_EQ(a.stats().region_bytes, 3U * 4096);
}

TEST(block_allocator, regions_never_merge) {
  gm::detail::block_allocator a{256};
  a.add_region(base, 1024);
  a.add_region(base + 1024, 1024);  // adjacent, but a separate segment
  EXPECT_EQ(a.stats().free_blocks, 2U);
  EXPECT_FALSE(a.allocate(2048, stream_a, gm::detail::no_graph));
  a.check_invariants();
  EXPECT_TRUE(a.owns(base));
  EXPECT_TRUE(a.owns(base + 2047));
  EXPECT_FALSE(a.owns(base + 2048));
  EXPECT_FALSE(a.owns(base - 1));
}

TEST(block_allocator, a_snapshot_lists_every_segment_and_block_with_its_state) {
  gm::detail::block_allocator a{256};
  a.add_region(base, 2048);
  a.add_region(base + 4096, 4096);  // larger: best fit serves every request from the first
  auto const eager = a.allocate(256, stream_a, gm::detail::no_graph);
  auto const output = a.allocate(512, stream_a, graph_g);
  auto const freed = a.allocate(256, stream_b, gm::detail::no_graph);
  ASSERT_TRUE(eager && output && freed);
  a.deallocate(freed->address, stream_b);  // free, but only stream b may reuse it yet
  auto const segments = a.snapshot();
  ASSERT_EQ(segments.size(), 2U);
  EXPECT_EQ(segments[0].base, base);
  EXPECT_EQ(segments[0].bytes, 2048U);
  EXPECT_EQ(segments[1].base, base + 4096);
  ASSERT_EQ(segments[1].blocks.size(), 1U);
  EXPECT_TRUE(segments[1].blocks[0].free);
  EXPECT_TRUE(segments[1].blocks[0].any_stream);
  std::size_t live = 0;
  std::size_t tiled = 0;
  std::uintptr_t next = base;
  for (auto const& b : segments[0].blocks) {
    EXPECT_EQ(b.address, next) << "blocks tile the segment in address order";
    next += b.size;
    tiled += b.size;
    if (!b.free) live += b.size;
    if (b.address == output->address) {
      EXPECT_FALSE(b.free);
      EXPECT_EQ(b.owner, graph_g);
      EXPECT_EQ(b.touched, std::vector<gm::detail::graph_id>{graph_g});
    }
    if (b.address == eager->address) {
      EXPECT_EQ(b.owner, gm::detail::no_graph);
    }
    if (b.address == freed->address) {
      EXPECT_TRUE(b.free);
      EXPECT_FALSE(b.any_stream);
    }
  }
  EXPECT_EQ(tiled, 2048U);
  EXPECT_EQ(live, a.stats().bytes_in_use);
}

TEST(block_allocator, growth_extends_a_free_tail_in_place) {
  gm::detail::block_allocator a{256};
  a.add_region(base, 1024);
  auto const first = a.allocate(512, stream_a, gm::detail::no_graph);
  ASSERT_TRUE(first);
  a.extend_region(base, 1024);
  a.check_invariants();
  EXPECT_EQ(a.stats().free_blocks, 1U) << "the old tail and the growth merged";
  auto const big = a.allocate(1536, stream_a, gm::detail::no_graph);
  ASSERT_TRUE(big);
  EXPECT_EQ(big->address, first->address + 512);
  a.check_invariants();
}

TEST(block_allocator, growth_stays_apart_from_a_tail_tied_to_a_stream_or_a_graph) {
  gm::detail::block_allocator a{256};
  a.add_region(base, 2048);
  auto const x = a.allocate(1024, stream_a, gm::detail::no_graph);
  auto const y = a.allocate(1024, stream_a, graph_g);
  ASSERT_TRUE(x && y);
  a.deallocate(y->address, stream_a);
  a.extend_region(base, 1024);
  a.check_invariants();
  EXPECT_EQ(a.stats().free_blocks, 2U) << "g's tail, on stream a, and the fresh growth";
  auto const fresh = a.allocate(1024, stream_b, gm::detail::no_graph);
  ASSERT_TRUE(fresh);
  EXPECT_EQ(fresh->address, base + 2048) << "the growth serves any stream and eager work";
  a.deallocate(fresh->address, stream_b);
  a.release_stream(stream_a);
  a.release_stream(stream_b);
  a.release_graph(graph_g);
  a.check_invariants();
  EXPECT_EQ(a.stats().free_blocks, 1U) << "once released, the tail and the growth merge";
}

TEST(block_allocator, region_sizes_need_not_be_multiples_of_the_alignment) {
  gm::detail::block_allocator a{256};
  a.add_region(base, 100);  // too small for a block yet
  a.check_invariants();
  EXPECT_EQ(a.stats().region_bytes, 0U);
  EXPECT_TRUE(a.owns(base + 99));
  EXPECT_FALSE(a.allocate(1, stream_a, gm::detail::no_graph));
  a.extend_region(base, 500);  // 600 bytes: two blocks' worth
  a.check_invariants();
  EXPECT_EQ(a.stats().region_bytes, 512U);
  a.extend_region(base, 424);  // 1024 bytes
  a.check_invariants();
  EXPECT_EQ(a.stats().region_bytes, 1024U);
  EXPECT_EQ(a.stats().free_blocks, 1U);
  EXPECT_USAGE_ERROR(a.add_region(base + 768, 256), "overlaps");
  a.add_region(base + 1024, 1000);
  EXPECT_EQ(a.stats().region_bytes, 1024U + 768U);
  a.check_invariants();
}

TEST(block_allocator, custom_alignment) {
  gm::detail::block_allocator a{4096};
  a.add_region(base, 65536);
  auto const x = a.allocate(1, stream_a, gm::detail::no_graph);
  auto const y = a.allocate(4097, stream_a, gm::detail::no_graph);
  ASSERT_TRUE(x && y);
  EXPECT_EQ(x->size, 4096U);
  EXPECT_EQ(y->size, 8192U);
  EXPECT_EQ(y->address % 4096, 0U);
  EXPECT_USAGE_ERROR(a.add_region(base + 65536 + 256, 4096), "not aligned to 4096 bytes");
  a.check_invariants();
}

TEST(block_allocator, any_stream_allocations_take_only_released_blocks) {
  gm::detail::block_allocator a{256};
  a.add_region(base, 2048);
  auto const x = a.allocate(1024, stream_a, gm::detail::no_graph);
  ASSERT_TRUE(x);
  a.deallocate(x->address, stream_a);
  auto const y = a.allocate(1024, gm::detail::any_stream, gm::detail::no_graph);
  ASSERT_TRUE(y);
  EXPECT_EQ(y->address, base + 1024) << "the block freed on stream a is not ordered yet";
  EXPECT_FALSE(a.allocate(1024, gm::detail::any_stream, gm::detail::no_graph));
  a.check_invariants();
}

TEST(block_allocator, graphs_share_memory_where_their_marks_meet) {
  gm::detail::block_allocator a{256};
  a.add_region(base, 4096);
  constexpr gm::detail::graph_id graph_k = 9;
  auto const x = a.allocate(1024, stream_a, graph_g);
  ASSERT_TRUE(x);
  a.deallocate(x->address, stream_a, graph_g);
  a.release_stream(stream_a);
  auto const y = a.allocate(1024, stream_a, graph_h);  // onto g's freed block
  ASSERT_TRUE(y);
  EXPECT_EQ(y->address, x->address);
  auto const z = a.allocate(1024, stream_a, graph_k);  // untouched memory of its own
  ASSERT_TRUE(z);
  using graphs = std::vector<gm::detail::graph_id>;
  EXPECT_EQ(a.graphs_sharing_memory_with(graph_g), (graphs{graph_g, graph_h}));
  EXPECT_EQ(a.graphs_sharing_memory_with(graph_h), (graphs{graph_g, graph_h}));
  EXPECT_EQ(a.graphs_sharing_memory_with(graph_k), (graphs{graph_k}));
  EXPECT_TRUE(a.graphs_sharing_memory_with(gm::detail::no_graph).empty());
  a.release_graph(graph_h);
  EXPECT_EQ(a.graphs_sharing_memory_with(graph_g), (graphs{graph_g}));
  a.check_invariants();
}

TEST(block_allocator, a_block_held_for_one_graph_passes_to_another) {
  gm::detail::block_allocator a{256};
  a.add_region(base, 4096);
  auto const held = a.allocate(1024, gm::detail::any_stream, graph_g);
  ASSERT_TRUE(held);
  a.transfer(held->address, graph_g, graph_h);
  EXPECT_EQ(a.bytes_in_use_by(graph_g), 0U);
  EXPECT_EQ(a.bytes_in_use_by(graph_h), 1024U);
  EXPECT_EQ(a.bytes_marked_by(graph_g), 0U);
  a.check_invariants();
  using graphstep::testing::contains;
  using graphstep::testing::message_of;
  EXPECT_TRUE(contains(message_of([&] { a.transfer(held->address, graph_g, graph_h); }),
                       "no live block of graph 7"));
  EXPECT_TRUE(contains(
      message_of([&] { a.transfer(held->address, graph_h, gm::detail::no_graph); }), "no_graph"));
  a.release_graph(graph_h);
  EXPECT_EQ(a.stats().bytes_in_use, 0U);
  a.check_invariants();
}

TEST(block_allocator, a_kept_output_becomes_an_eager_block_when_its_graph_goes) {
  gm::detail::block_allocator a{256};
  a.add_region(base, 4096);
  auto const kept = a.allocate(1024, stream_a, graph_g);
  auto const dropped = a.allocate(1024, stream_a, graph_g);
  auto const freed_first = a.allocate(1024, stream_a, graph_g);
  ASSERT_TRUE(kept && dropped && freed_first);
  a.keep_after_graph(kept->address);
  a.keep_after_graph(freed_first->address);
  a.deallocate(freed_first->address, stream_a, graph_g);  // freeing it undoes the request
  a.check_invariants();
  a.release_graph(graph_g);
  a.check_invariants();
  EXPECT_EQ(a.stats().bytes_in_use, 1024U);
  EXPECT_EQ(a.bytes_in_use_by(graph_g), 0U);
  EXPECT_EQ(a.bytes_marked_by(graph_g), 0U);
  auto const regions = a.snapshot();
  ASSERT_EQ(regions.size(), 1U);
  ASSERT_FALSE(regions[0].blocks.empty());
  auto const& first = regions[0].blocks[0];
  EXPECT_EQ(first.address, kept->address);
  EXPECT_FALSE(first.free);
  EXPECT_EQ(first.owner, gm::detail::no_graph);
  EXPECT_FALSE(first.kept_after_graph);
  // The rest went back with the graph and serves eager work; the kept block is freed as any
  // eager one.
  a.release_stream(stream_a);
  auto const eager = a.allocate(3072, stream_b, gm::detail::no_graph);
  ASSERT_TRUE(eager);
  EXPECT_EQ(eager->address, kept->address + 1024);
  a.deallocate(kept->address, stream_b);
  a.deallocate(eager->address, stream_b);
  EXPECT_EQ(a.stats().bytes_in_use, 0U);
  a.check_invariants();
}

TEST(block_allocator, only_a_graphs_live_block_can_be_kept_after_it) {
  gm::detail::block_allocator a{256};
  a.add_region(base, 4096);
  auto const eager = a.allocate(1024, stream_a, gm::detail::no_graph);
  ASSERT_TRUE(eager);
  using graphstep::testing::contains;
  using graphstep::testing::message_of;
  EXPECT_TRUE(
      contains(message_of([&] { a.keep_after_graph(eager->address); }), "is an eager allocation"));
  EXPECT_TRUE(contains(message_of([&] { a.keep_after_graph(eager->address + 1024); }),
                       "no live block starts at"));
  EXPECT_TRUE(
      contains(message_of([&] { a.keep_after_graph(base + 65536); }), "no live block starts at"));
  a.check_invariants();
}

TEST(block_allocator, a_free_tail_leaves_the_region_and_the_rest_stays) {
  gm::detail::block_allocator a{256};
  a.add_region(base, 8192);
  auto const head = a.allocate(2048, stream_a, gm::detail::no_graph);
  auto const tail = a.allocate(6144, stream_a, gm::detail::no_graph);
  ASSERT_TRUE(head && tail);
  a.deallocate(tail->address, stream_a);
  // Freed on a stream, not yet released: no other stream may have it, so it stays.
  ASSERT_EQ(a.free_tails().size(), 1U);
  EXPECT_EQ(a.free_tails()[0].free_bytes, 0U);
  a.release_stream(stream_a);
  EXPECT_EQ(a.free_tails()[0].free_bytes, 6144U);
  EXPECT_EQ(a.free_tails()[0].bytes, 8192U);
  a.shrink_region(base, 4096);
  a.check_invariants();
  EXPECT_EQ(a.stats().region_bytes, 4096U);
  EXPECT_EQ(a.free_tails()[0].free_bytes, 2048U);
  EXPECT_FALSE(a.owns(base + 4096));
  using graphstep::testing::contains;
  using graphstep::testing::message_of;
  EXPECT_TRUE(contains(message_of([&] { a.shrink_region(base, 4096); }), "not all free"));
  EXPECT_TRUE(contains(message_of([&] { a.shrink_region(base + 256, 256); }), "no region starts"));
  EXPECT_TRUE(contains(message_of([&] { a.shrink_region(base, 0); }), "cannot take 0 bytes"));
  // Growth after a shrink continues at the new end.
  a.extend_region(base, 4096);
  a.check_invariants();
  EXPECT_EQ(a.free_tails()[0].free_bytes, 6144U);
  a.deallocate(head->address, stream_a);
  a.release_stream(stream_a);
  a.shrink_region(base, 8192);  // the whole region goes
  a.check_invariants();
  EXPECT_TRUE(a.free_tails().empty());
  EXPECT_EQ(a.stats().region_bytes, 0U);
  a.add_region(base, 4096);  // and the range may come back
  a.check_invariants();
}

TEST(block_allocator, memory_a_live_graph_may_write_never_leaves) {
  gm::detail::block_allocator a{256};
  a.add_region(base, 4096);
  auto const x = a.allocate(4096, stream_a, graph_g);
  ASSERT_TRUE(x);
  a.deallocate(x->address, stream_a, graph_g);
  a.release_stream(stream_a);
  EXPECT_EQ(a.free_tails()[0].free_bytes, 0U) << "one free block, marked by the graph";
  a.release_graph(graph_g);
  EXPECT_EQ(a.free_tails()[0].free_bytes, 4096U);
}

TEST(block_allocator, without_sharing_memory_a_graph_marked_serves_nobody_until_it_goes) {
  gm::detail::block_allocator a{256, false};
  a.add_region(base, 4096);
  auto const x = a.allocate(1024, stream_a, graph_g);
  ASSERT_TRUE(x);
  a.deallocate(x->address, stream_a, graph_g);
  auto const again = a.allocate(1024, stream_a, graph_g);  // the same capture, later
  ASSERT_TRUE(again);
  EXPECT_NE(again->address, x->address);
  a.release_stream(stream_a);
  auto const other = a.allocate(1024, stream_a, graph_h);  // another graph
  ASSERT_TRUE(other);
  EXPECT_NE(other->address, x->address);
  EXPECT_TRUE(a.graphs_sharing_memory_with(graph_h) == std::vector<gm::detail::graph_id>{graph_h});
  EXPECT_FALSE(a.allocate(2048, stream_a, graph_h)) << "only the marked 1024 bytes are free";
  a.release_graph(graph_g);  // its marked block and its output come back
  auto const eager = a.allocate(2048, stream_a, gm::detail::no_graph);
  ASSERT_TRUE(eager);
  EXPECT_EQ(eager->address, x->address);
  a.check_invariants();
}
