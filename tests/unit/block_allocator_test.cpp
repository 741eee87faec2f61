// The allocator core: best fit, split, coalesce, alignment, stream-ordered reuse and
// graph-private memory, on both region layouts the pool uses.

#include <graphstep/error.hpp>
#include <graphstep/memory/block_allocator.hpp>

#include <gtest/gtest.h>

#include <string>

namespace gm = graphstep::memory;

namespace {

constexpr std::uintptr_t base = 0x10000000;
constexpr gm::stream_id stream_a = 1;
constexpr gm::stream_id stream_b = 2;
constexpr gm::graph_id graph_g = 7;
constexpr gm::graph_id graph_h = 8;

// One region grown in place (virtual memory) or separate segments (cudaMalloc fallback).
struct growing_region {
  static void add(gm::block_allocator& a, std::size_t bytes) {
    if (!a.owns(base)) {
      a.add_region(base, bytes);
    } else {
      a.extend_region(base, bytes);
    }
  }
};
struct separate_segments {
  static void add(gm::block_allocator& a, std::size_t bytes) {
    // Each segment starts far past the end of the previous ones: never adjacent.
    a.add_region(base + a.stats().region_bytes * 4096, bytes);
  }
};

template <typename Layout>
class block_allocator_test : public ::testing::Test {
 protected:
  gm::block_allocator alloc_{256};
  void grow(std::size_t bytes) {
    Layout::add(alloc_, bytes);
    alloc_.check_invariants();
  }
  std::uintptr_t take(std::size_t bytes, gm::stream_id s = stream_a, gm::graph_id g = gm::no_graph) {
    auto b = alloc_.allocate(bytes, s, g);
    EXPECT_TRUE(b.has_value()) << "no block for " << bytes;
    alloc_.check_invariants();
    return b ? b->address : 0;
  }
  void give(std::uintptr_t address, gm::stream_id s = stream_a) {
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

template <typename Call>
std::string usage_message(Call&& call) {
  try {
    call();
  } catch (graphstep::usage_error const& e) {
    return e.what();
  }
  ADD_FAILURE() << "no usage_error";
  return {};
}

}  // namespace

TYPED_TEST(block_allocator_test, rounds_up_to_the_alignment_and_splits) {
  this->grow(4096);
  auto const a = this->alloc_.allocate(1, stream_a, gm::no_graph);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->size, 256U);
  EXPECT_EQ(a->address % 256, 0U);
  auto const stats = this->alloc_.stats();
  EXPECT_EQ(stats.bytes_in_use, 256U);
  EXPECT_EQ(stats.free_bytes, 4096U - 256U);
  EXPECT_EQ(stats.used_blocks, 1U);
  EXPECT_EQ(stats.free_blocks, 1U);
}

TYPED_TEST(block_allocator_test, best_fit_prefers_the_smallest_hole) {
  this->grow(8192);
  auto const a = this->take(1024);
  auto const b = this->take(256);
  auto const c = this->take(512);
  auto const d = this->take(256);
  static_cast<void>(b);
  static_cast<void>(d);
  this->give(a);  // a 1024 hole
  this->give(c);  // a 512 hole
  EXPECT_EQ(this->take(300), c) << "the 512 hole fits best";
  EXPECT_EQ(this->take(1000), a);
}

TYPED_TEST(block_allocator_test, freeing_coalesces_neighbours) {
  this->grow(4096);
  auto const a = this->take(1024);
  auto const b = this->take(1024);
  auto const c = this->take(1024);
  this->give(a);
  this->give(c);
  EXPECT_EQ(this->alloc_.stats().free_blocks, 2U);  // a, and c merged with the tail
  this->give(b);
  auto const stats = this->alloc_.stats();
  EXPECT_EQ(stats.free_blocks, 1U);
  EXPECT_EQ(stats.largest_free_block, 4096U);
  EXPECT_EQ(stats.fragmentation, 0.0);
}

TYPED_TEST(block_allocator_test, nothing_fits_returns_nullopt_and_growth_helps) {
  this->grow(1024);
  EXPECT_FALSE(this->alloc_.allocate(2048, stream_a, gm::no_graph));
  this->grow(2048);
  EXPECT_TRUE(this->alloc_.allocate(2048, stream_a, gm::no_graph));
  this->alloc_.check_invariants();
}

TYPED_TEST(block_allocator_test, a_block_freed_on_one_stream_waits_for_release_on_another) {
  this->grow(1024);
  auto const a = this->take(1024, stream_a);
  this->give(a, stream_a);
  EXPECT_FALSE(this->alloc_.allocate(512, stream_b, gm::no_graph)) << "not ordered yet";
  EXPECT_EQ(this->take(512, stream_a), a) << "same stream: at once";
  this->give(a, stream_a);
  this->alloc_.release_stream(stream_a);
  this->alloc_.check_invariants();
  EXPECT_EQ(this->take(512, stream_b), a);
}

TYPED_TEST(block_allocator_test, graph_memory_never_serves_eager_allocations) {
  this->grow(2048);
  auto const g1 = this->take(1024, stream_a, graph_g);
  this->give(g1, stream_a);
  this->alloc_.release_stream(stream_a);
  // Only the untouched half may serve eager work.
  auto const eager = this->alloc_.allocate(1024, stream_a, gm::no_graph);
  ASSERT_TRUE(eager);
  EXPECT_NE(eager->address, g1);
  EXPECT_FALSE(this->alloc_.allocate(1024, stream_a, gm::no_graph));
  // Another graph sharing the pool may reuse it.
  EXPECT_EQ(this->take(1024, stream_a, graph_h), g1);
  EXPECT_EQ(this->alloc_.bytes_in_use_by(graph_h), 1024U);
}

TYPED_TEST(block_allocator_test, release_graph_frees_outputs_and_clears_marks) {
  this->grow(4096);
  auto const output = this->take(1024, stream_a, graph_g);
  auto const scratch = this->take(1024, stream_a, graph_g);
  this->give(scratch, stream_a);
  EXPECT_EQ(this->alloc_.bytes_in_use_by(graph_g), 1024U);
  this->alloc_.release_graph(graph_g);
  this->alloc_.check_invariants();
  EXPECT_EQ(this->alloc_.bytes_in_use_by(graph_g), 0U);
  EXPECT_EQ(this->alloc_.stats().bytes_in_use, 0U);
  EXPECT_EQ(this->take(4096, stream_a), output) << "everything merged back and is eager-usable";
}

TYPED_TEST(block_allocator_test, marks_of_several_graphs_accumulate) {
  this->grow(1024);
  auto const a = this->take(1024, stream_a, graph_g);
  this->give(a, stream_a);
  EXPECT_EQ(this->take(1024, stream_a, graph_h), a);
  this->give(a, stream_a);
  this->alloc_.release_graph(graph_g);
  EXPECT_FALSE(this->alloc_.allocate(1024, stream_a, gm::no_graph)) << "h still replays there";
  this->alloc_.release_graph(graph_h);
  EXPECT_TRUE(this->alloc_.allocate(1024, stream_a, gm::no_graph));
}

TYPED_TEST(block_allocator_test, peak_and_fragmentation) {
  this->grow(4096);
  auto const a = this->take(1024);
  auto const b = this->take(1024);
  auto const c = this->take(1024);
  this->give(b);
  EXPECT_EQ(this->alloc_.stats().peak_bytes_in_use, 3072U);
  auto const stats = this->alloc_.stats();
  EXPECT_EQ(stats.free_bytes, 2048U);
  EXPECT_EQ(stats.largest_free_block, 1024U);
  EXPECT_DOUBLE_EQ(stats.fragmentation, 0.5);
  this->give(a);
  this->give(c);
}

TYPED_TEST(block_allocator_test, bad_requests_are_usage_errors) {
  this->grow(1024);
  auto const a = this->take(512);
  EXPECT_NE(usage_message([&] { static_cast<void>(this->alloc_.allocate(0, stream_a, 0)); })
                .find("0 bytes"),
            std::string::npos);
  EXPECT_NE(usage_message([&] {
              static_cast<void>(this->alloc_.allocate(~std::size_t{0}, stream_a, 0));
            }).find("larger than any address space"),
            std::string::npos);
  EXPECT_NE(usage_message([&] { this->alloc_.deallocate(a + 256, stream_a); })
                .find("not its start"),
            std::string::npos);
  EXPECT_NE(usage_message([&] { this->alloc_.deallocate(0x42, stream_a); }).find("foreign"),
            std::string::npos);
  this->give(a);
  EXPECT_NE(usage_message([&] { this->alloc_.deallocate(a, stream_a); }).find("double free"),
            std::string::npos);
  this->alloc_.check_invariants();
}

TEST(block_allocator, bad_regions_are_usage_errors) {
  EXPECT_THROW(gm::block_allocator{3}, graphstep::usage_error);
  EXPECT_THROW(gm::block_allocator{0}, graphstep::usage_error);
  gm::block_allocator a{256};
  EXPECT_THROW(a.add_region(base + 1, 4096), graphstep::usage_error);  // misaligned
  EXPECT_THROW(a.add_region(base, 100), graphstep::usage_error);       // holds no block
  a.add_region(base, 4096);
  EXPECT_THROW(a.add_region(base + 2048, 4096), graphstep::usage_error);  // overlap
  EXPECT_THROW(a.add_region(base - 1024, 2048), graphstep::usage_error);  // overlap
  a.add_region(base + 8192, 4096);
  EXPECT_THROW(a.extend_region(base, 8192), graphstep::usage_error);  // would reach the next
  EXPECT_THROW(a.extend_region(base + 256, 256), graphstep::usage_error);  // not a region
  EXPECT_THROW(a.extend_region(base, 100), graphstep::usage_error);        // misaligned
  a.extend_region(base, 4096);
  a.check_invariants();
  EXPECT_EQ(a.stats().region_bytes, 3U * 4096);
}

TEST(block_allocator, regions_never_merge) {
  gm::block_allocator a{256};
  a.add_region(base, 1024);
  a.add_region(base + 1024, 1024);  // adjacent, but a separate segment
  EXPECT_EQ(a.stats().free_blocks, 2U);
  EXPECT_FALSE(a.allocate(2048, stream_a, gm::no_graph));
  a.check_invariants();
}

TEST(block_allocator, growth_extends_a_free_tail_in_place) {
  gm::block_allocator a{256};
  a.add_region(base, 1024);
  auto const first = a.allocate(512, stream_a, gm::no_graph);
  a.extend_region(base, 1024);
  EXPECT_EQ(a.stats().free_blocks, 1U) << "the old tail and the growth merged";
  auto const big = a.allocate(1536, stream_a, gm::no_graph);
  ASSERT_TRUE(big);
  EXPECT_EQ(big->address, first->address + 512);
  a.check_invariants();
}

TEST(block_allocator, custom_alignment) {
  gm::block_allocator a{4096};
  a.add_region(base, 65536);
  auto const x = a.allocate(1, stream_a, gm::no_graph);
  auto const y = a.allocate(4097, stream_a, gm::no_graph);
  EXPECT_EQ(x->size, 4096U);
  EXPECT_EQ(y->size, 8192U);
  EXPECT_EQ(y->address % 4096, 0U);
  a.check_invariants();
}
