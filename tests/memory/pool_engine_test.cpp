// The memory pool's decisions on the CPU: the same engine memory_pool runs, on a device whose
// memory is address ranges and whose events complete when the test says.

#include "memory/detail/pool_engine.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <graphstep/error.hpp>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/error_message.hpp"

namespace gm = graphstep::memory::detail;

namespace {

constexpr std::size_t mib = std::size_t{1} << 20;
constexpr gm::stream_id stream_a = 0x1000;
constexpr gm::stream_id stream_b = 0x2000;

class test_device final : public gm::pool_device {
 public:
  explicit test_device(bool one_range = true) : one_range_{one_range} {}

  growth_status grow(std::size_t bytes, growth& out) override {
    grow_requests.push_back(bytes);
    if (mapped_ + bytes > range_left) return growth_status::address_range_full;
    if (mapped_ + bytes > memory_left) return growth_status::device_out_of_memory;
    out.bytes = bytes;
    out.base = one_range_ ? base_ : next_segment_;
    out.extends_region = one_range_ && mapped_ > 0;
    next_segment_ += 2 * bytes;  // separate segments leave gaps
    mapped_ += bytes;
    growths_.push_back(bytes);
    return growth_status::grown;
  }
  // As the backings do: the last growths of one range go whole, newest first; a segment goes
  // only whole.
  std::size_t shrink(std::uintptr_t base, std::size_t region_bytes,
                     std::size_t free_bytes) override {
    shrink_requests.emplace_back(base, free_bytes);
    std::size_t given_back = 0;
    if (one_range_) {
      EXPECT_EQ(region_bytes, mapped_);
      while (!growths_.empty() && given_back + growths_.back() <= free_bytes) {
        given_back += growths_.back();
        growths_.pop_back();
      }
    } else if (free_bytes >= region_bytes) {
      given_back = region_bytes;
    }
    mapped_ -= given_back;
    return given_back;
  }
  [[nodiscard]] std::size_t granularity() const override { return 2 * mib; }
  [[nodiscard]] std::size_t reserved_bytes() const override { return mapped_; }
  [[nodiscard]] std::size_t mapped_bytes() const override { return mapped_; }
  void record(gm::event_id event, gm::stream_id stream) override {
    ASSERT_EQ(events.count(event), 0U) << "event ids are never reused";
    events[event] = {stream, false};
  }
  [[nodiscard]] bool complete(gm::event_id event) override {
    ++queries;
    return events.at(event).second;
  }
  void wait(gm::stream_id stream, gm::event_id event) override {
    waits.emplace_back(stream, events.at(event).first);
  }
  void forget(gm::event_id event) noexcept override { events.erase(event); }
  // The graphs' own events, which their launches record as their last node (the latest record
  // counts): not the engine's, and written by the test's threads, so apart from `events`.
  [[nodiscard]] bool launch_complete(gm::event_id launch) override {
    ++queries;
    return launches.at(launch).done.load();
  }
  void wait_for_launch(gm::stream_id stream, gm::event_id launch) override {
    waits.emplace_back(stream, launches.at(launch).stream.load());
  }
  void relaunch(gm::event_id launch, gm::stream_id stream) {
    launches.at(launch).done.store(false);
    launches.at(launch).stream.store(stream);
  }
  void synchronize(gm::event_id event) override {
    events.at(event).second = true;
    ++host_waits;
  }

  // The GPU catches up with everything recorded on `stream`.
  void finish(gm::stream_id stream) {
    for (auto& [id, event] : events) {
      if (event.first == stream) event.second = true;
    }
    for (launch_record& launch : launches) {
      if (launch.stream.load() == stream) launch.done.store(true);
    }
  }

  std::size_t memory_left{std::size_t{1} << 40};
  std::size_t range_left{std::size_t{1} << 40};  // the reserved address range
  std::vector<std::size_t> grow_requests;
  std::map<gm::event_id, std::pair<gm::stream_id, bool>> events;        // stream, completed
  std::vector<std::pair<gm::stream_id, gm::stream_id>> waits;           // waiter, waited-on stream
  std::vector<std::pair<std::uintptr_t, std::size_t>> shrink_requests;  // base, free bytes
  std::size_t host_waits{};
  std::size_t queries{};  // calls of complete() and launch_complete()
  struct launch_record {
    std::atomic<gm::stream_id> stream{0};
    std::atomic<bool> done{false};
  };
  std::array<launch_record, 128> launches;  // by graph id
  // What a shell keeps per graph between replays (a graph's lease), by graph id.
  std::array<gm::replay_memo, 128> memos;

 private:
  bool one_range_;
  std::uintptr_t base_{std::uintptr_t{1} << 40};
  std::uintptr_t next_segment_{base_};
  std::size_t mapped_{};
  std::vector<std::size_t> growths_;
};

gm::pool_engine_options small_steps() {
  gm::pool_engine_options options;
  options.growth_bytes = 2 * mib;
  return options;
}

// One step of a model at a capture size size: activations live to the end, temporaries die at once.
void run_step(gm::pool_engine& pool, std::size_t rows, gm::stream_id stream,
              std::optional<gm::capture_id> capture) {
  std::vector<std::uintptr_t> live;
  for (int layer = 0; layer < 4; ++layer) {
    live.push_back(pool.allocate(rows * 4096, stream, capture));
    std::uintptr_t const temp = pool.allocate(rows * 1024 + 512, stream, capture);
    pool.deallocate(temp, stream, capture);
  }
  for (auto it = live.rbegin(); it != live.rend(); ++it) pool.deallocate(*it, stream, capture);
}

void capture_step(gm::pool_engine& pool, std::size_t rows, gm::graph_id graph,
                  gm::capture_id capture) {
  pool.begin_capture(capture, graph, "size " + std::to_string(rows), stream_a);
  run_step(pool, rows, stream_a, capture);
  ASSERT_EQ(pool.finish_capture(capture, true), graph);
}

// Mapped bytes for the sizes' graphs captured largest first, after every size's warm-up.
std::size_t mapped_for_sizes(std::vector<std::size_t> sizes) {
  std::sort(sizes.rbegin(), sizes.rend());
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  for (std::size_t rows : sizes) run_step(pool, rows, stream_a, std::nullopt);
  gm::graph_id graph = 1;
  for (std::size_t rows : sizes) {
    capture_step(pool, rows, graph, 100 + graph);
    ++graph;
  }
  pool.blocks().check_invariants();
  return pool.stats().mapped_bytes;
}

std::size_t mapped_for_one(std::size_t rows) {
  return mapped_for_sizes({rows});
}

}  // namespace

TEST(pool_engine, size_graphs_share_the_memory_of_the_largest) {
  std::vector<std::size_t> const sizes{1024, 512, 256, 128, 64, 32};
  std::size_t const shared = mapped_for_sizes(sizes);
  std::size_t const largest = mapped_for_one(1024);
  std::size_t sum = 0;
  for (std::size_t rows : sizes) sum += mapped_for_one(rows);
  EXPECT_LE(static_cast<double>(shared), 1.1 * static_cast<double>(largest))
      << "shared " << shared << " B, largest alone " << largest << " B, sum " << sum << " B";
}

TEST(pool_engine, thirty_log_normal_sizes_share_the_memory_of_the_largest) {
  std::mt19937 rng{11};  // NOLINT(cert-msc32-c,cert-msc51-cpp): a fixed, reproducible set
  std::lognormal_distribution<double> rows{5.0, 1.0};
  std::vector<std::size_t> sizes(32);
  for (std::size_t& size : sizes) size = static_cast<std::size_t>(rows(rng)) + 1;
  std::size_t const largest = *std::max_element(sizes.begin(), sizes.end());
  std::size_t const shared = mapped_for_sizes(sizes);
  EXPECT_LE(static_cast<double>(shared), 1.1 * static_cast<double>(mapped_for_one(largest)));
}

TEST(pool_engine, a_graph_prefers_memory_other_graphs_pin_over_untouched_memory) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  pool.begin_capture(1, 1, "first", stream_a);
  std::uintptr_t const first = pool.allocate(4 * mib, stream_a, std::optional<gm::capture_id>{1});
  pool.deallocate(first, stream_a, std::optional<gm::capture_id>{1});
  ASSERT_TRUE(pool.finish_capture(1, true));
  std::uintptr_t const eager = pool.allocate(mib, stream_a, std::nullopt);
  pool.deallocate(eager, stream_a, std::nullopt);  // untouched, free, a tighter fit
  pool.begin_capture(2, 2, "second", stream_a);
  EXPECT_EQ(pool.allocate(mib, stream_a, std::optional<gm::capture_id>{2}), first)
      << "the second graph took memory eager work needs instead of the first graph's";
  ASSERT_TRUE(pool.finish_capture(2, true));
}

TEST(pool_engine, warm_ups_between_captures_cost_one_warm_up_beside_the_largest_graph) {
  std::vector<std::size_t> const sizes{1024, 512, 256, 128, 64, 32};
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  gm::graph_id graph = 1;
  for (std::size_t rows : sizes) {  // as graph_cache::run meets them: warm up, capture
    run_step(pool, rows, stream_a, std::nullopt);
    capture_step(pool, rows, graph, 100 + graph);
    ++graph;
  }
  std::size_t const one = mapped_for_one(1024);
  EXPECT_LE(static_cast<double>(pool.stats().mapped_bytes), 2.1 * static_cast<double>(one))
      << "each capture took the memory its warm-up had just freed";
}

TEST(pool_engine, growth_asks_what_the_request_lacks_rounded_to_the_granularity) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  static_cast<void>(pool.allocate(64 * mib, stream_a, std::nullopt));
  ASSERT_EQ(device.grow_requests.size(), 1U);
  EXPECT_EQ(device.grow_requests[0], 64 * mib) << "not 64 MiB + the alignment, rounded up";
  static_cast<void>(pool.allocate(1, stream_a, std::nullopt));
  EXPECT_EQ(device.grow_requests.back(), 2 * mib) << "at least growth_bytes";
}

TEST(pool_engine, another_stream_waits_on_the_free_instead_of_growing) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  std::uintptr_t const block = pool.allocate(2 * mib, stream_a, std::nullopt);
  pool.deallocate(block, stream_a, std::nullopt);
  // Stream A's work is still running: B may have the block only after waiting for it.
  EXPECT_EQ(pool.allocate(2 * mib, stream_b, std::nullopt), block);
  EXPECT_EQ(device.waits,
            (std::vector<std::pair<gm::stream_id, gm::stream_id>>{{stream_b, stream_a}}));
  EXPECT_EQ(device.grow_requests.size(), 1U);
  pool.blocks().check_invariants();
}

TEST(pool_engine, a_completed_free_is_reused_by_another_stream_without_a_wait) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  std::uintptr_t const block = pool.allocate(2 * mib, stream_a, std::nullopt);
  pool.deallocate(block, stream_a, std::nullopt);
  device.finish(stream_a);
  EXPECT_EQ(pool.allocate(2 * mib, stream_b, std::nullopt), block);
  EXPECT_TRUE(device.waits.empty());
  EXPECT_TRUE(pool.pending_free_events().empty());
}

TEST(pool_engine, blocks_taken_from_another_stream_pass_on_only_behind_the_takers_event) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  constexpr gm::stream_id stream_c = 0x3000;
  std::uintptr_t const block = pool.allocate(mib, stream_a, std::nullopt);
  std::uintptr_t const other = pool.allocate(mib, stream_a, std::nullopt);
  pool.deallocate(block, stream_a, std::nullopt);
  pool.deallocate(other, stream_a, std::nullopt);
  static_cast<void>(pool.allocate(mib, stream_b, std::nullopt));  // B waits on A, takes both
  device.waits.clear();
  static_cast<void>(pool.allocate(mib, stream_c, std::nullopt));  // C must wait on B, not on A
  EXPECT_EQ(device.waits,
            (std::vector<std::pair<gm::stream_id, gm::stream_id>>{{stream_c, stream_b}}));
}

TEST(pool_engine, a_block_freed_in_a_capture_belongs_to_its_graph_though_allocated_eagerly) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  std::uintptr_t const input = pool.allocate(mib, stream_a, std::nullopt);
  pool.begin_capture(1, 7, "frees an input", stream_a);
  pool.deallocate(input, stream_a, std::optional<gm::capture_id>{1});
  ASSERT_TRUE(pool.finish_capture(1, true));
  device.finish(stream_a);
  EXPECT_EQ(pool.bytes_pinned_by(7), mib);
  std::uintptr_t const eager = pool.allocate(mib, stream_a, std::nullopt);
  EXPECT_NE(eager, input) << "the graph's replays still use the block up to its free";
  pool.deallocate(eager, stream_a, std::nullopt);
  pool.release_graph(7);
  EXPECT_EQ(pool.bytes_pinned_by(7), 0U);
  EXPECT_EQ(pool.allocate(mib, stream_a, std::nullopt), input);
}

TEST(pool_engine, the_end_of_a_capture_does_not_release_eager_frees_made_before_it) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  std::uintptr_t const block = pool.allocate(2 * mib, stream_a, std::nullopt);
  pool.deallocate(block, stream_a, std::nullopt);  // eager work on A still runs
  pool.begin_capture(1, 1, "empty", stream_a);
  ASSERT_TRUE(pool.finish_capture(1, true));
  EXPECT_EQ(pool.allocate(2 * mib, stream_b, std::nullopt), block);
  EXPECT_EQ(device.waits.size(), 1U) << "B took A's eager free without waiting for A";
}

TEST(pool_engine, a_capture_never_takes_another_streams_pending_eager_free) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  std::uintptr_t const block = pool.allocate(2 * mib, stream_b, std::nullopt);
  pool.deallocate(block, stream_b, std::nullopt);
  pool.begin_capture(1, 1, "on A", stream_a);
  std::uintptr_t const captured =
      pool.allocate(2 * mib, stream_a, std::optional<gm::capture_id>{1});
  EXPECT_NE(captured, block);
  EXPECT_TRUE(device.waits.empty()) << "a capture must not wait on eager work";
  device.finish(stream_b);
  std::uintptr_t const later = pool.allocate(2 * mib, stream_a, std::optional<gm::capture_id>{1});
  EXPECT_EQ(later, block) << "once B's work is done the block is free for anyone";
  ASSERT_TRUE(pool.finish_capture(1, true));
}

TEST(pool_engine, a_side_streams_capture_free_is_not_reused_by_the_origin_in_that_capture) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  pool.begin_capture(1, 1, "fork", stream_a);
  std::optional<gm::capture_id> const capture{1};
  std::uintptr_t const side = pool.allocate(2 * mib, stream_b, capture);
  pool.deallocate(side, stream_b, capture);
  EXPECT_NE(pool.allocate(2 * mib, stream_a, capture), side) << "no order between the two";
  EXPECT_EQ(pool.allocate(2 * mib, stream_b, capture), side) << "same stream, in order";
  ASSERT_TRUE(pool.finish_capture(1, true));
}

TEST(pool_engine, a_failed_capture_returns_its_memory_at_once) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  pool.begin_capture(1, 3, "fails", stream_a);
  std::uintptr_t const block = pool.allocate(mib, stream_a, std::optional<gm::capture_id>{1});
  EXPECT_FALSE(pool.finish_capture(1, false));
  EXPECT_EQ(pool.stats().bytes_in_use, 0U);
  EXPECT_EQ(pool.stats().live_graphs, 0U);
  EXPECT_EQ(pool.allocate(mib, stream_b, std::nullopt), block);
}

TEST(pool_engine, a_budget_refuses_growth_past_it_with_the_sizes) {
  test_device device;
  gm::pool_engine_options options = small_steps();
  options.budget_bytes = 4 * mib;
  gm::pool_engine pool{options, device};
  static_cast<void>(pool.allocate(3 * mib, stream_a, std::nullopt));
  try {
    static_cast<void>(pool.allocate(2 * mib, stream_a, std::nullopt));
    FAIL() << "grew past the budget";
  } catch (graphstep::out_of_memory const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("budget of 4194304 B"), std::string::npos) << what;
    EXPECT_EQ(e.sizes().budget, 4 * mib);
    EXPECT_EQ(e.sizes().requested, 2 * mib);
    EXPECT_EQ(e.sizes().in_use, 3 * mib);
    EXPECT_EQ(e.sizes().largest_free, mib);
  }
  EXPECT_EQ(pool.stats().mapped_bytes, 4 * mib);
}

TEST(pool_engine, a_device_out_of_memory_is_reported_as_such) {
  test_device device;
  device.memory_left = 4 * mib;
  gm::pool_engine pool{small_steps(), device};
  try {
    static_cast<void>(pool.allocate(8 * mib, stream_a, std::nullopt));
    FAIL() << "no error";
  } catch (graphstep::out_of_memory const& e) {
    EXPECT_NE(std::string{e.what()}.find("no memory left"), std::string::npos) << e.what();
  }
}

TEST(pool_engine, a_full_address_range_says_to_reserve_more) {
  test_device device;
  device.range_left = 4 * mib;
  gm::pool_engine pool{small_steps(), device};
  try {
    static_cast<void>(pool.allocate(8 * mib, stream_a, std::nullopt));
    FAIL() << "no error";
  } catch (graphstep::out_of_memory const& e) {
    EXPECT_NE(std::string{e.what()}.find("pool_options::reserve_bytes"), std::string::npos)
        << e.what();
  }
}

// The cudaMalloc fallback: segments that are never adjacent. Sharing, stream order and the
// invariants hold there too.
TEST(pool_engine, separate_segments_share_and_order_as_one_range_does) {
  test_device device{false};
  gm::pool_engine pool{small_steps(), device};
  for (std::size_t rows : {512, 128, 32}) run_step(pool, rows, stream_a, std::nullopt);
  gm::graph_id graph = 1;
  for (std::size_t rows : {512, 128, 32}) {
    capture_step(pool, rows, graph, 100 + graph);
    ++graph;
  }
  pool.blocks().check_invariants();
  std::size_t const shared = pool.stats().mapped_bytes;
  test_device alone_device{false};
  gm::pool_engine alone{small_steps(), alone_device};
  run_step(alone, 512, stream_a, std::nullopt);
  capture_step(alone, 512, 1, 101);
  EXPECT_LE(static_cast<double>(shared), 1.1 * static_cast<double>(alone.stats().mapped_bytes));
  std::uintptr_t const freed = pool.allocate(3 * mib, stream_a, std::nullopt);
  pool.deallocate(freed, stream_a, std::nullopt);
  EXPECT_EQ(pool.allocate(3 * mib, stream_b, std::nullopt), freed);
  EXPECT_EQ(device.waits,
            (std::vector<std::pair<gm::stream_id, gm::stream_id>>{{stream_b, stream_a}}));
  pool.blocks().check_invariants();
}

TEST(pool_engine, bad_requests_and_unknown_captures_are_refused_with_what_to_do) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  EXPECT_THROW(static_cast<void>(pool.allocate(0, stream_a, std::nullopt)), graphstep::usage_error);
  try {
    static_cast<void>(pool.allocate(8, stream_a, std::optional<gm::capture_id>{42}));
    FAIL() << "no error";
  } catch (graphstep::usage_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("Pass this pool to the graphs::capture_scope"),
              std::string::npos)
        << e.what();
  }
  pool.begin_capture(1, 1, "once", stream_a);
  EXPECT_THROW(pool.begin_capture(1, 2, "twice", stream_a), graphstep::usage_error);
  EXPECT_THROW(pool.begin_capture(2, gm::no_graph, "no graph", stream_a), graphstep::usage_error);
  EXPECT_THROW(pool.deallocate(0x1234, stream_a, std::nullopt), graphstep::usage_error);
  gm::pool_engine_options zero_growth;
  zero_growth.growth_bytes = 0;
  EXPECT_THROW((gm::pool_engine{zero_growth, device}), graphstep::usage_error);
}

TEST(pool_engine, sizes_past_any_address_space_are_refused_before_they_are_rounded) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  std::size_t const largest = std::numeric_limits<std::size_t>::max();
  for (std::size_t const bytes : {largest, largest - 2 * mib, largest / 2 + 1}) {
    try {
      static_cast<void>(pool.allocate(bytes, stream_a, std::nullopt));
      FAIL() << "no error for " << bytes;
    } catch (graphstep::usage_error const& e) {
      EXPECT_NE(std::string{e.what()}.find("a request of " + std::to_string(bytes) + " bytes"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_TRUE(device.grow_requests.empty()) << "the pool grew for a refused request";
  gm::pool_engine_options huge_growth;
  huge_growth.growth_bytes = largest;
  try {
    gm::pool_engine refused{huge_growth, device};
    FAIL() << "no error";
  } catch (graphstep::usage_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("pool_options::growth_bytes of " +
                                         std::to_string(largest) + " bytes"),
              std::string::npos)
        << e.what();
  }
  // The largest request that is not refused is served or reported as out of memory.
  device.memory_left = 4 * mib;
  EXPECT_THROW(static_cast<void>(pool.allocate(largest / 2, stream_a, std::nullopt)),
               graphstep::out_of_memory);
}

TEST(pool_engine, every_event_is_forgotten_when_the_engine_goes) {
  test_device device;
  {
    gm::pool_engine pool{small_steps(), device};
    std::uintptr_t const block = pool.allocate(mib, stream_a, std::nullopt);
    pool.deallocate(block, stream_a, std::nullopt);
    EXPECT_EQ(pool.pending_free_events().size(), 1U);
  }
  EXPECT_TRUE(device.events.empty());
}

namespace {

// Two graphs captured one after the other on one stream: the second reuses what the first
// freed, so their replays write the same memory.
void capture_two_sharing_graphs(gm::pool_engine& pool) {
  capture_step(pool, 256, 1, 101);
  capture_step(pool, 256, 2, 102);
  ASSERT_FALSE(pool.blocks().graphs_sharing_memory_with(1).empty());
  ASSERT_EQ(pool.blocks().graphs_sharing_memory_with(1), (std::vector<gm::graph_id>{1, 2}));
}

// The event graph `graph` records as its last node: the graph's own, never the engine's.
gm::event_id launch_event_of(gm::graph_id graph) {
  return graph;
}

// A replay as graph_exec::replay makes it: ordered before, launched (which re-records the
// graph's own event), noted after.
void replay(gm::pool_engine& pool, test_device& device, gm::graph_id graph, gm::stream_id stream) {
  pool.before_replay(graph, stream);
  device.relaunch(launch_event_of(graph), stream);
  pool.after_replay(graph, stream, launch_event_of(graph), device.memos.at(graph));
}

}  // namespace

TEST(pool_engine, graphs_sharing_memory_replayed_on_two_streams_never_run_at_once) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  capture_two_sharing_graphs(pool);
  replay(pool, device, 1, stream_a);
  replay(pool, device, 2, stream_b);
  ASSERT_EQ(device.waits.size(), 1U);
  EXPECT_EQ(device.waits[0], std::make_pair(stream_b, stream_a)) << "B waits for A's replay";
  replay(pool, device, 1, stream_a);  // and back: A waits for B's replay of the other graph
  ASSERT_EQ(device.waits.size(), 2U);
  EXPECT_EQ(device.waits[1], std::make_pair(stream_a, stream_b));
  EXPECT_EQ(pool.stats().ordered_replays, 2U);
}

TEST(pool_engine, a_replay_waits_neither_on_its_own_stream_nor_for_a_completed_launch) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  capture_two_sharing_graphs(pool);
  replay(pool, device, 1, stream_a);
  replay(pool, device, 2, stream_a);  // stream order already runs them one after the other
  EXPECT_TRUE(device.waits.empty());
  device.finish(stream_a);
  replay(pool, device, 1, stream_b);
  EXPECT_TRUE(device.waits.empty()) << "the launches on A have completed";
  EXPECT_EQ(pool.stats().ordered_replays, 0U);
}

TEST(pool_engine, two_launches_of_one_graph_on_two_streams_are_ordered) {
  // Two executables of one graph share all its memory; CUDA orders launches of one
  // executable only.
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  capture_step(pool, 256, 1, 101);
  replay(pool, device, 1, stream_a);
  replay(pool, device, 1, stream_b);
  ASSERT_EQ(device.waits.size(), 1U);
  EXPECT_EQ(device.waits[0], std::make_pair(stream_b, stream_a));
}

TEST(pool_engine, graphs_with_memory_of_their_own_replay_side_by_side) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  // Each capture keeps its one block: nothing is freed, so nothing is shared.
  pool.begin_capture(101, 1, "first", stream_a);
  static_cast<void>(pool.allocate(mib, stream_a, std::optional<gm::capture_id>{101}));
  ASSERT_EQ(pool.finish_capture(101, true), 1U);
  pool.begin_capture(102, 2, "second", stream_b);
  static_cast<void>(pool.allocate(mib, stream_b, std::optional<gm::capture_id>{102}));
  ASSERT_EQ(pool.finish_capture(102, true), 2U);
  replay(pool, device, 1, stream_a);
  replay(pool, device, 2, stream_b);
  EXPECT_TRUE(device.waits.empty());
}

TEST(pool_engine, a_released_graph_is_waited_for_no_more) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  capture_two_sharing_graphs(pool);
  replay(pool, device, 1, stream_a);
  std::size_t const events_before = device.events.size();
  pool.release_graph(1);
  EXPECT_EQ(device.events.size(), events_before) << "the launch's event is its graph's";
  replay(pool, device, 2, stream_b);
  EXPECT_TRUE(device.waits.empty());
  pool.before_replay(1, stream_b);  // unknown now: nothing to order
  EXPECT_TRUE(device.waits.empty());
}

namespace {

// `count` graphs captured one after the other on one stream, each reusing what the one before
// freed: every one shares memory with every other, as capture size graphs in one pool do.
void capture_sharing_graphs(gm::pool_engine& pool, gm::graph_id count) {
  for (gm::graph_id graph = 1; graph <= count; ++graph) capture_step(pool, 256, graph, 100 + graph);
  ASSERT_EQ(pool.blocks().graphs_sharing_memory_with(1).size(), count);
}

using wait_list = std::vector<std::pair<gm::stream_id, gm::stream_id>>;

}  // namespace

TEST(pool_engine, sharing_graphs_alternating_streams_wait_for_each_launch_on_the_other_stream) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  capture_sharing_graphs(pool, 4);
  replay(pool, device, 1, stream_a);
  replay(pool, device, 2, stream_b);  // after 1 on A
  EXPECT_EQ(device.waits, (wait_list{{stream_b, stream_a}}));
  replay(pool, device, 3, stream_a);  // after 2 on B; 1 is on A already
  EXPECT_EQ(device.waits.size(), 2U);
  replay(pool, device, 4, stream_b);  // after 1 and 3 on A, each not seen complete
  EXPECT_EQ(
      device.waits,
      (wait_list{
          {stream_b, stream_a}, {stream_a, stream_b}, {stream_b, stream_a}, {stream_b, stream_a}}));
  EXPECT_EQ(pool.stats().ordered_replays, 4U);
  // 2 and 4 on B, and 2 itself (another executable of it may run there), unless complete.
  replay(pool, device, 2, stream_a);
  EXPECT_EQ(device.waits.size(), 6U);
  EXPECT_EQ(device.waits.back(), std::make_pair(stream_a, stream_b));
  EXPECT_EQ(pool.stats().ordered_replays, 6U);
}

TEST(pool_engine, many_sharing_graphs_replayed_on_one_stream_never_wait_nor_query) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  gm::graph_id const graphs = 64;
  capture_sharing_graphs(pool, graphs);
  std::size_t const events_before = device.events.size();
  for (int round = 0; round < 3; ++round) {
    for (gm::graph_id graph = 1; graph <= graphs; ++graph) replay(pool, device, graph, stream_a);
  }
  EXPECT_TRUE(device.waits.empty());
  EXPECT_EQ(device.queries, 0U) << "launches on the same stream are ordered without asking";
  EXPECT_EQ(pool.stats().ordered_replays, 0U);
  // A launch records its graph's own event: the engine records none of its own for it.
  EXPECT_EQ(device.events.size(), events_before);
}

TEST(pool_engine, a_completed_launch_on_another_stream_is_not_waited_for_and_is_forgotten) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  capture_sharing_graphs(pool, 3);
  replay(pool, device, 1, stream_a);
  device.finish(stream_a);
  replay(pool, device, 2, stream_a);  // not complete
  std::size_t const events_before = device.events.size();
  replay(pool, device, 3, stream_b);
  EXPECT_EQ(device.waits, (wait_list{{stream_b, stream_a}})) << "for 2 only";
  EXPECT_EQ(pool.stats().ordered_replays, 1U);
  // 3's launch records its graph's own event: the engine records none of its own for it.
  EXPECT_EQ(device.events.size(), events_before);
  device.finish(stream_a);
  device.queries = 0;
  replay(pool, device, 3, stream_b);
  replay(pool, device, 1, stream_b);
  EXPECT_EQ(device.waits.size(), 1U) << "2 on A has completed";
  EXPECT_EQ(device.queries, 1U) << "2's launch, seen complete once, is not asked about again";
}

TEST(pool_engine, only_the_latest_launch_of_a_graph_is_waited_for) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  capture_sharing_graphs(pool, 2);
  replay(pool, device, 1, stream_a);
  replay(pool, device, 1, stream_b);  // after its own launch on A
  ASSERT_EQ(device.waits, (wait_list{{stream_b, stream_a}}));
  replay(pool, device, 2, stream_b);  // 1's latest launch is on B: no wait
  EXPECT_EQ(device.waits.size(), 1U);
  replay(pool, device, 2, stream_a);  // after 1's and its own launch on B
  EXPECT_EQ(device.waits,
            (wait_list{{stream_b, stream_a}, {stream_a, stream_b}, {stream_a, stream_b}}));
}

TEST(pool_engine, a_graph_that_shares_nothing_is_not_waited_for_on_another_stream) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  // Graph 3 keeps its one block, captured first: it shares memory with no other graph.
  pool.begin_capture(103, 3, "own", stream_a);
  static_cast<void>(pool.allocate(mib, stream_a, std::optional<gm::capture_id>{103}));
  ASSERT_EQ(pool.finish_capture(103, true), 3U);
  capture_sharing_graphs(pool, 2);
  ASSERT_EQ(pool.blocks().graphs_sharing_memory_with(3), (std::vector<gm::graph_id>{3}));
  replay(pool, device, 3, stream_a);
  replay(pool, device, 1, stream_a);
  replay(pool, device, 2, stream_b);  // after 1, not 3
  EXPECT_EQ(device.waits, (wait_list{{stream_b, stream_a}}));
  replay(pool, device, 3, stream_b);  // after its own launch on A only
  EXPECT_EQ(device.waits, (wait_list{{stream_b, stream_a}, {stream_b, stream_a}}));
  EXPECT_EQ(pool.stats().ordered_replays, 2U);
}

TEST(pool_engine, releasing_graphs_launched_on_several_streams_forgets_their_launches) {
  test_device device;
  std::size_t events_before = 0;
  {
    gm::pool_engine pool{small_steps(), device};
    capture_sharing_graphs(pool, 3);
    events_before = device.events.size();
    replay(pool, device, 1, stream_a);
    replay(pool, device, 2, stream_b);
    replay(pool, device, 3, stream_a);
    pool.release_graph(2);
    pool.release_graph(3);
    EXPECT_EQ(device.events.size(), events_before) << "the launches record the graphs' events";
    std::size_t const waits_before = device.waits.size();
    replay(pool, device, 1, stream_b);  // 1's own launch on A only
    EXPECT_EQ(device.waits.size(), waits_before + 1);
    pool.release_graph(1);
    EXPECT_EQ(device.events.size(), events_before);
  }
  EXPECT_TRUE(device.events.empty());
}

// One lock around every call: threads replaying graphs that share memory on their own streams
// at once record no event of the engine's, and order each launch after the other thread's.
TEST(pool_engine, threads_replaying_on_their_own_streams_keep_one_launch_per_graph) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  gm::graph_id const graphs = 8;
  capture_sharing_graphs(pool, graphs);
  std::size_t const events_before = device.events.size();
  auto work = [&pool, &device](gm::stream_id stream) {
    for (int i = 0; i < 2000; ++i)
      replay(pool, device, 1 + static_cast<gm::graph_id>(i) % graphs, stream);
  };
  std::thread first{work, stream_a};
  std::thread second{work, stream_b};
  first.join();
  second.join();
  EXPECT_EQ(device.events.size(), events_before) << "the launches record the graphs' events";
  EXPECT_GT(pool.stats().ordered_replays, 0U);
  for (gm::graph_id graph = 1; graph <= graphs; ++graph) pool.release_graph(graph);
  EXPECT_EQ(device.events.size(), events_before);
}

TEST(pool_engine, a_planned_capture_takes_its_slab_before_the_capture_begins) {
  // Growing the pool (cudaMalloc, cuMemCreate) inside a capture is an unsafe call there.
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  graphstep::memory::allocation_trace trace;
  std::size_t const big = trace.record_allocate(3 * mib);
  std::size_t const small = trace.record_allocate(mib);
  trace.record_deallocate(small);
  trace.record_deallocate(big);
  auto const plan = pool.plan_next_capture(trace);
  std::size_t const growths = device.grow_requests.size();
  EXPECT_GT(growths, 0U) << "the slab is taken when the plan is made";
  EXPECT_GE(pool.stats().bytes_in_use, plan.slab_bytes);
  pool.begin_capture(101, 1, "planned", stream_a);
  std::optional<gm::capture_id> const capture{101};
  std::uintptr_t const first = pool.allocate(3 * mib, stream_a, capture);
  std::uintptr_t const second = pool.allocate(mib, stream_a, capture);
  pool.deallocate(second, stream_a, capture);
  pool.deallocate(first, stream_a, capture);
  EXPECT_EQ(pool.capture_problem(101), "");
  ASSERT_EQ(pool.finish_capture(101, true), 1U);
  EXPECT_EQ(device.grow_requests.size(), growths) << "the capture grew the pool";
  EXPECT_GE(pool.bytes_held_by(1), plan.slab_bytes) << "the slab is the graph's";
  pool.release_graph(1);
  EXPECT_EQ(pool.stats().bytes_in_use, 0U);
  pool.blocks().check_invariants();
}

TEST(pool_engine, an_unused_plan_gives_its_slab_back_when_replaced_or_dropped) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  graphstep::memory::allocation_trace trace;
  trace.record_deallocate(trace.record_allocate(mib));
  static_cast<void>(pool.plan_next_capture(trace));
  std::size_t const one_slab = pool.stats().bytes_in_use;
  static_cast<void>(pool.plan_next_capture(trace));
  EXPECT_EQ(pool.stats().bytes_in_use, one_slab) << "the first slab was not given back";
  pool.drop_next_plan();
  EXPECT_EQ(pool.stats().bytes_in_use, 0U);
  EXPECT_THROW(pool.begin_capture(1, gm::pool_engine::planned_graph, "reserved id", stream_a),
               graphstep::usage_error);
  pool.blocks().check_invariants();
}

// A capture on A takes blocks freed eagerly on A before it began: that work precedes the
// capture in A's order, so neither a wait nor growth is needed.
TEST(pool_engine, a_capture_reuses_what_its_stream_freed_eagerly_before_it_began) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  std::uintptr_t const eager = pool.allocate(2 * mib, stream_a, std::nullopt);
  pool.deallocate(eager, stream_a, std::nullopt);  // its event never completes here
  pool.begin_capture(1, 1, "after eager work", stream_a);
  std::uintptr_t const captured = pool.allocate(2 * mib, stream_a, gm::capture_id{1});
  EXPECT_EQ(captured, eager);
  EXPECT_TRUE(device.waits.empty());
  EXPECT_EQ(device.grow_requests.size(), 1U);
  pool.deallocate(captured, stream_a, gm::capture_id{1});
  ASSERT_EQ(pool.finish_capture(1, true), gm::graph_id{1});
  pool.blocks().check_invariants();
}

// Planned mode through the engine: the trace of an eager step plans the capture of the same
// step, which follows it without a problem and without growing the pool.
TEST(pool_engine, a_traced_warm_up_plans_a_capture_that_follows_it) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  pool.begin_trace();
  EXPECT_THROW(pool.begin_trace(), graphstep::usage_error);
  run_step(pool, 64, stream_a, std::nullopt);
  graphstep::memory::allocation_trace trace = pool.end_trace();
  EXPECT_EQ(trace.allocation_count(), 8U);  // 4 layers: an activation and a temporary each
  EXPECT_THROW(static_cast<void>(pool.end_trace()), graphstep::usage_error);
  static_cast<void>(pool.plan_next_capture(std::move(trace)));
  std::size_t const growths = device.grow_requests.size();
  pool.begin_capture(1, 1, "planned", stream_a);
  run_step(pool, 64, stream_a, gm::capture_id{1});
  EXPECT_EQ(pool.capture_problem(1), "");
  ASSERT_EQ(pool.finish_capture(1, true), gm::graph_id{1});
  EXPECT_EQ(device.grow_requests.size(), growths);
  pool.blocks().check_invariants();
}

TEST(pool_engine, a_plan_without_allocations_or_room_for_its_slab_is_refused) {
  test_device device;
  gm::pool_engine_options options = small_steps();
  options.budget_bytes = 2 * mib;
  gm::pool_engine pool{options, device};
  EXPECT_THROW(static_cast<void>(pool.plan_next_capture(graphstep::memory::allocation_trace{})),
               graphstep::usage_error);
  graphstep::memory::allocation_trace too_large;
  static_cast<void>(too_large.record_allocate(4 * mib));
  EXPECT_THROW(static_cast<void>(pool.plan_next_capture(std::move(too_large))),
               graphstep::out_of_memory);
  EXPECT_EQ(pool.stats().bytes_in_use, 0U);
}

TEST(pool_engine, statistics_count_growths_and_live_graphs) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  EXPECT_EQ(pool.stats().growths, 0U);
  std::uintptr_t const block = pool.allocate(3 * mib, stream_a, std::nullopt);
  EXPECT_EQ(pool.stats().growths, 1U);
  EXPECT_EQ(pool.stats().mapped_bytes, 4 * mib);
  pool.deallocate(block, stream_a, std::nullopt);
  capture_step(pool, 64, 1, 1);
  EXPECT_EQ(pool.stats().live_graphs, 1U);
  pool.release_graph(1);
  EXPECT_EQ(pool.stats().live_graphs, 0U);
}

// growth_bytes is the smallest step, rounded up to the device's granularity.
TEST(pool_engine, the_smallest_growth_step_is_rounded_up_to_the_granularity) {
  test_device device;
  gm::pool_engine_options options = small_steps();
  options.growth_bytes = 3 * mib;
  gm::pool_engine pool{options, device};
  pool.deallocate(pool.allocate(1, stream_a, std::nullopt), stream_a, std::nullopt);
  EXPECT_EQ(device.grow_requests, (std::vector<std::size_t>{4 * mib}));
}

// The pool's ranges begin on granularity boundaries, so no larger alignment could be kept; an
// absurd one used to pass and then report a full address range with nothing in use.
TEST(pool_engine, an_alignment_past_the_granularity_is_refused_with_the_range_it_takes) {
  test_device device;
  gm::pool_engine_options options = small_steps();
  options.alignment = std::size_t{1} << 40;
  try {
    gm::pool_engine pool{options, device};
    ADD_FAILURE() << "an alignment of 1 TiB was accepted";
  } catch (graphstep::usage_error const& e) {
    std::string const message = e.what();
    EXPECT_NE(message.find("pool_options::alignment of 1099511627776 bytes"), std::string::npos)
        << message;
    EXPECT_NE(message.find("a power of two from 1 to 2097152"), std::string::npos) << message;
  }
  EXPECT_TRUE(device.grow_requests.empty());
  options.alignment = 2 * mib;  // the granularity itself is kept
  gm::pool_engine pool{options, device};
  std::uintptr_t const block = pool.allocate(1, stream_a, std::nullopt);
  EXPECT_EQ(block % (2 * mib), 0U);
  pool.deallocate(block, stream_a, std::nullopt);
}

// One lock around every call: threads that allocate and free on their own streams at once
// leave the blocks consistent and nothing in use.
TEST(pool_engine, threads_allocating_at_once_leave_the_blocks_consistent) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  auto work = [&pool, &device](gm::stream_id stream) {
    std::mt19937 rng{static_cast<unsigned>(stream)};  // NOLINT(cert-msc32-c,cert-msc51-cpp)
    std::uniform_int_distribution<std::size_t> bytes{1, 512 * 1024};
    std::vector<std::uintptr_t> held;
    for (int i = 0; i < 2000; ++i) {
      held.push_back(pool.allocate(bytes(rng), stream, std::nullopt));
      if (held.size() > 8) {
        pool.deallocate(held.front(), stream, std::nullopt);
        held.erase(held.begin());
      }
    }
    for (std::uintptr_t const block : held) pool.deallocate(block, stream, std::nullopt);
  };
  std::thread first{work, stream_a};
  std::thread second{work, stream_b};
  first.join();
  second.join();
  pool.blocks().check_invariants();
  EXPECT_EQ(pool.stats().bytes_in_use, 0U);
}

TEST(pool_engine, trim_gives_back_the_free_end_in_whole_growths_and_the_pool_grows_again) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  std::uintptr_t const kept = pool.allocate(2 * mib, stream_a, std::nullopt);
  std::uintptr_t const big = pool.allocate(4 * mib, stream_a, std::nullopt);  // a second growth
  ASSERT_EQ(pool.stats().mapped_bytes, 6 * mib);
  pool.deallocate(big, stream_a, std::nullopt);
  // The free is in flight on stream a: trim waits for it on the host, then gives it back.
  EXPECT_EQ(pool.trim(), 4 * mib);
  EXPECT_EQ(device.host_waits, 1U);
  EXPECT_EQ(pool.stats().mapped_bytes, 2 * mib);
  EXPECT_EQ(pool.stats().trimmed_bytes, 4 * mib);
  EXPECT_EQ(pool.stats().free_bytes, 0U);
  pool.blocks().check_invariants();
  EXPECT_EQ(pool.trim(), 0U) << "nothing left to give back";
  // The range grows again where it ended; the kept block never moved.
  std::uintptr_t const again = pool.allocate(mib, stream_b, std::nullopt);
  EXPECT_EQ(again, kept + 2 * mib);
  pool.deallocate(again, stream_b, std::nullopt);
  pool.deallocate(kept, stream_a, std::nullopt);
  // All of it free: every growth goes, and the range starts over at its base.
  std::uintptr_t const head = pool.allocate(3 * mib, stream_a, std::nullopt);
  pool.deallocate(head, stream_a, std::nullopt);
  EXPECT_EQ(pool.trim(), 4 * mib);
  EXPECT_EQ(pool.stats().mapped_bytes, 0U);
  EXPECT_EQ(pool.allocate(mib, stream_a, std::nullopt), kept) << "the range starts over";
  pool.blocks().check_invariants();
}

TEST(pool_engine, trim_keeps_what_a_live_graph_may_write_and_refuses_during_a_capture) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  pool.begin_capture(1, 5, "step", stream_a);
  std::optional<gm::capture_id> const capture{1};
  std::uintptr_t const temp = pool.allocate(2 * mib, stream_a, capture);
  pool.deallocate(temp, stream_a, capture);
  using graphstep::testing::contains;
  using graphstep::testing::message_of;
  EXPECT_TRUE(contains(message_of([&] { static_cast<void>(pool.trim()); }),
                       "a capture into this pool is under way"));
  ASSERT_EQ(pool.finish_capture(1, true), 5U);
  EXPECT_EQ(pool.trim(), 0U) << "the graph's replays still write there";
  EXPECT_EQ(pool.stats().mapped_bytes, 2 * mib);
  pool.release_graph(5);
  EXPECT_EQ(pool.trim(), 2 * mib);
  pool.blocks().check_invariants();
}

TEST(pool_engine, trim_gives_back_whole_free_segments_only) {
  test_device device{false};
  gm::pool_engine pool{small_steps(), device};
  std::uintptr_t const first = pool.allocate(2 * mib, stream_a, std::nullopt);
  std::uintptr_t const second = pool.allocate(2 * mib, stream_a, std::nullopt);
  std::uintptr_t const half = pool.allocate(mib, stream_a, std::nullopt);  // a third segment
  ASSERT_EQ(pool.stats().mapped_bytes, 6 * mib);
  pool.deallocate(second, stream_a, std::nullopt);
  EXPECT_EQ(pool.trim(), 2 * mib);
  EXPECT_EQ(pool.stats().mapped_bytes, 4 * mib);
  pool.blocks().check_invariants();
  static_cast<void>(first);
  static_cast<void>(half);
}

TEST(pool_engine, a_kept_output_outlives_its_graph_as_an_eager_block) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  pool.begin_capture(1, 5, "step", stream_a);
  std::optional<gm::capture_id> const capture{1};
  std::uintptr_t const output = pool.allocate(mib, stream_a, capture);
  std::uintptr_t const other = pool.allocate(mib, stream_a, capture);
  ASSERT_EQ(pool.finish_capture(1, true), 5U);
  pool.keep_after_graph(output);
  pool.release_graph(5);
  EXPECT_EQ(pool.stats().bytes_in_use, mib);
  EXPECT_EQ(pool.bytes_held_by(5), 0U);
  EXPECT_EQ(pool.allocate(mib, stream_b, std::nullopt), other) << "the other output went back";
  pool.deallocate(output, stream_b, std::nullopt);
  pool.blocks().check_invariants();
}

TEST(pool_engine, a_free_waits_for_the_uses_recorded_on_other_streams) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  std::uintptr_t const block = pool.allocate(mib, stream_a, std::nullopt);
  pool.record_use(block, stream_b);
  pool.record_use(block, stream_b);  // the latest use on a stream replaces the earlier
  pool.record_use(block, stream_a);  // its own stream is ordered already
  pool.deallocate(block, stream_a, std::nullopt);
  EXPECT_EQ(device.waits,
            (std::vector<std::pair<gm::stream_id, gm::stream_id>>{{stream_a, stream_b}}));
  EXPECT_EQ(device.host_waits, 0U);
  EXPECT_EQ(pool.allocate(mib, stream_a, std::nullopt), block) << "stream a reuses it at once";
  using graphstep::testing::contains;
  using graphstep::testing::message_of;
  EXPECT_TRUE(contains(message_of([&] { pool.record_use(block + 256, stream_b); }),
                       "no live block of this pool starts at"));
  pool.deallocate(block, stream_a, std::nullopt);
  EXPECT_TRUE(contains(message_of([&] { pool.record_use(block, stream_b); }),
                       "no live block of this pool starts at"));
  // Every use event was forgotten with its free: only the free events remain.
  EXPECT_EQ(device.events.size(), 1U);
}

TEST(pool_engine, a_capture_or_a_graphs_release_waits_for_recorded_uses_on_the_host) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  std::uintptr_t const input = pool.allocate(mib, stream_a, std::nullopt);
  pool.record_use(input, stream_b);
  pool.begin_capture(1, 5, "step", stream_a);
  std::optional<gm::capture_id> const capture{1};
  pool.deallocate(input, stream_a, capture);  // a capture may not wait on eager work
  EXPECT_EQ(device.host_waits, 1U);
  std::uintptr_t const output = pool.allocate(mib, stream_a, capture);
  std::uintptr_t const kept = pool.allocate(mib, stream_a, capture);
  ASSERT_EQ(pool.finish_capture(1, true), 5U);
  pool.record_use(output, stream_b);
  pool.record_use(kept, stream_b);
  pool.keep_after_graph(kept);
  pool.release_graph(5);
  EXPECT_EQ(device.host_waits, 2U) << "the output goes back; the kept block stays live";
  EXPECT_TRUE(device.waits.empty());
  pool.deallocate(kept, stream_a, std::nullopt);
  EXPECT_EQ(device.waits,
            (std::vector<std::pair<gm::stream_id, gm::stream_id>>{{stream_a, stream_b}}));
  pool.blocks().check_invariants();
}

TEST(pool_engine, a_side_streams_capture_free_serves_the_origin_after_a_join) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  pool.begin_capture(1, 1, "fork", stream_a);
  std::optional<gm::capture_id> const capture{1};
  std::uintptr_t const side = pool.allocate(2 * mib, stream_b, capture);
  pool.deallocate(side, stream_b, capture);
  pool.join(1, stream_b, stream_a);
  EXPECT_EQ(pool.allocate(2 * mib, stream_a, capture), side) << "ordered by the join";
  pool.join(1, 0x3000, stream_a);  // a stream that freed nothing: nothing to move
  ASSERT_TRUE(pool.finish_capture(1, true));
  pool.blocks().check_invariants();
}

// The shell asks `replay_is_settled` first, without the lock, and calls before_replay and
// after_replay only when it says no: each case where skipping them would lose an order says no.
TEST(pool_engine, a_replay_after_one_on_the_same_stream_is_settled_until_something_changes) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  capture_sharing_graphs(pool, 2);
  gm::event_id const one = launch_event_of(1);
  EXPECT_FALSE(pool.replay_is_settled(device.memos.at(1), stream_a, one)) << "never replayed";
  replay(pool, device, 1, stream_a);
  EXPECT_TRUE(pool.replay_is_settled(device.memos.at(1), stream_a, one));
  EXPECT_FALSE(pool.replay_is_settled(device.memos.at(1), stream_b, one)) << "another stream";
  EXPECT_FALSE(pool.replay_is_settled(device.memos.at(1), stream_a, launch_event_of(2)))
      << "another executable's work";
  // Another graph's first launch on the same stream changes the notes: asked again, and the
  // answer is again that nothing is needed.
  replay(pool, device, 2, stream_a);
  EXPECT_FALSE(pool.replay_is_settled(device.memos.at(1), stream_a, one));
  replay(pool, device, 1, stream_a);
  EXPECT_TRUE(pool.replay_is_settled(device.memos.at(1), stream_a, one));
  EXPECT_TRUE(pool.replay_is_settled(device.memos.at(2), stream_a, launch_event_of(2)))
      << "1's replay on A changed nothing 2 decides by";
  EXPECT_TRUE(device.waits.empty());
  // A launch of a sharing graph on another stream: A must wait for it next time.
  replay(pool, device, 2, stream_b);
  EXPECT_FALSE(pool.replay_is_settled(device.memos.at(1), stream_a, one));
  replay(pool, device, 1, stream_a);
  ASSERT_FALSE(device.waits.empty());
  EXPECT_EQ(device.waits.back(), std::make_pair(stream_a, stream_b));
  EXPECT_TRUE(pool.replay_is_settled(device.memos.at(1), stream_a, one))
      << "A waited for B's launch once; later work on A follows it in A's order";
  // A capture's end and a release change what graphs share.
  capture_step(pool, 256, 3, 103);
  EXPECT_FALSE(pool.replay_is_settled(device.memos.at(1), stream_a, one));
  replay(pool, device, 1, stream_a);
  pool.release_graph(3);
  EXPECT_FALSE(pool.replay_is_settled(device.memos.at(1), stream_a, one));
}

TEST(pool_engine, replays_on_one_stream_are_settled_without_asking_the_device) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  gm::graph_id const graphs = 8;
  capture_sharing_graphs(pool, graphs);
  for (gm::graph_id graph = 1; graph <= graphs; ++graph) replay(pool, device, graph, stream_a);
  // The first launches noted changed the engine after the earlier graphs' replays: each of
  // those asks once more, and is told that nothing is needed.
  std::size_t settled = 0;
  for (int round = 0; round < 3; ++round) {
    for (gm::graph_id graph = 1; graph <= graphs; ++graph) {
      if (pool.replay_is_settled(device.memos.at(graph), stream_a, launch_event_of(graph))) {
        if (round > 0) ++settled;
        device.relaunch(launch_event_of(graph), stream_a);  // the launch alone
      } else {
        replay(pool, device, graph, stream_a);
      }
    }
  }
  EXPECT_EQ(settled, 2 * graphs) << "every replay after the first round";
  EXPECT_EQ(device.queries, 0U);
  EXPECT_TRUE(device.waits.empty());
}

// Launches alternating between two streams are never settled: each must wait for the other
// stream's latest launch, even when the engine's notes stay as they were (graph 1 on A again).
TEST(pool_engine, a_graph_launched_again_on_another_stream_unsettles_the_replays_here) {
  test_device device;
  gm::pool_engine pool{small_steps(), device};
  capture_two_sharing_graphs(pool);
  replay(pool, device, 1, stream_a);
  replay(pool, device, 2, stream_b);
  replay(pool, device, 1, stream_a);
  EXPECT_FALSE(pool.replay_is_settled(device.memos.at(2), stream_b, launch_event_of(2)))
      << "1 ran again on A: 2 on B must wait for that launch";
  std::size_t const waits_before = device.waits.size();
  replay(pool, device, 2, stream_b);
  EXPECT_EQ(device.waits.size(), waits_before + 1);
  EXPECT_EQ(device.waits.back(), std::make_pair(stream_b, stream_a));
  EXPECT_FALSE(pool.replay_is_settled(device.memos.at(1), stream_a, launch_event_of(1)));
  // Once B's launches are seen complete and dropped, A's replays settle again.
  device.finish(stream_b);
  replay(pool, device, 1, stream_a);
  replay(pool, device, 1, stream_a);
  EXPECT_TRUE(pool.replay_is_settled(device.memos.at(1), stream_a, launch_event_of(1)));
}
