// The graph cache's decisions, on a simulated device: warm-up before capture, pre-capture
// order, eviction under a budget, the template switched by update and the fallback when an
// update is refused, and requests of many sizes mapped to capture sizes.

#include <gtest/gtest.h>

#include <graphstep/error.hpp>
#include <graphstep/schedule/capture_sizes.hpp>
#include <graphstep/schedule/detail/graph_cache_core.hpp>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace gsch = graphstep::schedule;

namespace {

using cache_core = gsch::detail::graph_cache_core<std::int64_t, int>;

// The capture sizes of most tests: 1 to 16.
std::vector<std::int64_t> every_size() {
  std::vector<std::int64_t> sizes;
  for (std::int64_t b = 1; b <= 16; ++b) sizes.push_back(b);
  return sizes;
}

// A request of `size`, found by its slot as the graph cache finds it from the policy's choice.
gsch::detail::served_by serve(cache_core& core, std::int64_t size, int stream) {
  return core.serve(core.slot_of(size), stream);
}

// Graphs as a device would hold them: which capture sizes are captured, which have an executable,
// and whose work each executable runs. Every misuse a real device would punish fails the test.
struct fake_device {
  // The cache's capture sizes, by slot: the actions name capture sizes by their position here.
  std::vector<std::int64_t> sizes{every_size()};
  std::set<std::int64_t> captured;
  // executable -> the capture whose work it runs: {capture size, capture number}
  std::map<std::int64_t, std::pair<std::int64_t, int>> executable_runs;
  std::map<std::int64_t, int> capture_number;  // the live capture of each capture size
  int captures{};
  std::set<std::int64_t> refuse;  // capture sizes of a second topology: no update across topologies
  std::set<std::int64_t> fail_capture;
  std::vector<std::int64_t> executed;  // the work each eager run or replay did
  std::vector<std::string> log;
  bool idle{true};
  int idle_waits{};  // device-wide waits asked for
  // The stream each eager run, capture, instantiation and replay was handed, in order.
  std::vector<int> streams;
  static constexpr int request_stream = 7;
  void on_stream(int stream) { streams.push_back(stream); }

  static std::size_t bytes(std::int64_t size) { return static_cast<std::size_t>(size) * 100; }

  gsch::detail::cache_actions<int> actions() {
    gsch::detail::cache_actions<int> a;
    a.run_eager = [this](int stream, std::size_t slot) {
      std::int64_t const b = sizes.at(slot);
      on_stream(stream);
      log.push_back("eager " + std::to_string(b));
      executed.push_back(b);
      idle = false;
    };
    a.capture = [this](int stream, std::size_t slot, bool instantiate) {
      std::int64_t const b = sizes.at(slot);
      on_stream(stream);
      if (fail_capture.count(b) != 0) throw std::runtime_error{"capture invalidated"};
      EXPECT_EQ(captured.count(b), 0U) << "captured twice: " << b;
      captured.insert(b);
      capture_number[b] = ++captures;
      if (instantiate) executable_runs[b] = {b, captures};
      log.push_back((instantiate ? "capture+instantiate " : "capture ") + std::to_string(b));
      return bytes(b);
    };
    a.replay = [this](int stream, std::size_t slot) {
      std::int64_t const b = sizes.at(slot);
      on_stream(stream);
      auto found = executable_runs.find(b);
      if (found == executable_runs.end()) {
        ADD_FAILURE() << "replay of " << b << ", which has no executable";
        return;
      }
      auto const [work, number] = found->second;
      EXPECT_TRUE(captured.count(work) == 1 && capture_number[work] == number)
          << "executable " << b << " runs the released work of " << work;
      executed.push_back(work);
      idle = false;
    };
    a.update = [this](std::size_t template_slot, std::size_t slot) {
      std::int64_t const t = sizes.at(template_slot);
      std::int64_t const b = sizes.at(slot);
      EXPECT_EQ(executable_runs.count(t), 1U) << "update of " << t << " without executable";
      EXPECT_EQ(captured.count(b), 1U) << "update from " << b << ", which is not captured";
      log.push_back("update " + std::to_string(t) + "<-" + std::to_string(b));
      if (refuse.count(t) != refuse.count(b)) return false;
      executable_runs[t] = {b, capture_number[b]};
      return true;
    };
    a.instantiate = [this](int stream, std::size_t slot) {
      std::int64_t const b = sizes.at(slot);
      on_stream(stream);
      EXPECT_EQ(captured.count(b), 1U);
      EXPECT_EQ(executable_runs.count(b), 0U) << "instantiated twice: " << b;
      executable_runs[b] = {b, capture_number[b]};
      log.push_back("instantiate " + std::to_string(b));
    };
    a.release = [this](std::size_t slot) {
      std::int64_t const b = sizes.at(slot);
      for (auto const& [exec, work] : executable_runs) {
        if (exec != b && work.first == b) {
          EXPECT_TRUE(idle) << "released " << b << " while executable " << exec
                            << " may still run its work";
        }
      }
      captured.erase(b);
      executable_runs.erase(b);
      log.push_back("release " + std::to_string(b));
    };
    a.wait_idle = [this] {
      idle = true;
      ++idle_waits;
    };
    return a;
  }
};

}  // namespace

TEST(graph_cache_core, warms_up_then_captures_then_replays) {
  fake_device device;
  cache_core core{device.actions(), device.sizes, 2, 0, false};
  EXPECT_EQ(serve(core, 8, fake_device::request_stream), gsch::detail::served_by::eager);
  EXPECT_EQ(serve(core, 8, fake_device::request_stream), gsch::detail::served_by::eager);
  EXPECT_FALSE(core.is_captured(8));
  EXPECT_EQ(serve(core, 8, fake_device::request_stream), gsch::detail::served_by::capture);
  EXPECT_EQ(serve(core, 8, fake_device::request_stream), gsch::detail::served_by::replay);
  EXPECT_EQ(serve(core, 4, fake_device::request_stream), gsch::detail::served_by::eager);
  auto const& s = core.statistics();
  EXPECT_EQ(s.misses, 4U);
  EXPECT_EQ(s.eager_runs, 3U);
  EXPECT_EQ(s.captures, 1U);
  EXPECT_EQ(s.hits, 1U);
  EXPECT_GE(s.capture_seconds, 0.0);
  EXPECT_EQ(core.bytes_of(8), fake_device::bytes(8));
  EXPECT_EQ(core.bytes_of(4), 0U);
  EXPECT_EQ(device.executed, (std::vector<std::int64_t>{8, 8, 8, 8, 4}));
  EXPECT_EQ(core.captured_count(), 1U);
}

TEST(graph_cache_core, precapture_warms_up_every_size_then_captures_them_in_order) {
  fake_device device;
  cache_core core{device.actions(), device.sizes, 1, 0, false};
  serve(core, 4, fake_device::request_stream);  // warmed up already: not again
  core.precapture(gsch::capture_sizes{{1, 2, 4, 8}}.capture_order(), fake_device::request_stream);
  EXPECT_EQ(device.log,
            (std::vector<std::string>{"eager 4", "eager 8", "eager 2", "eager 1",
                                      "capture+instantiate 8", "capture+instantiate 4",
                                      "capture+instantiate 2", "capture+instantiate 1"}));
  EXPECT_EQ(core.captured_count(), 4U);
  EXPECT_EQ(core.statistics().hits, 0U);
  core.precapture({8, 4}, fake_device::request_stream);  // nothing left to do
  EXPECT_EQ(core.statistics().captures, 4U);
}

TEST(graph_cache_core, a_budget_evicts_the_least_recently_used_and_recaptures_without_warmup) {
  fake_device device;
  cache_core core{device.actions(), device.sizes, 1, 1000, false};
  for (std::int64_t b : {4, 4, 3, 3})
    serve(core, b, fake_device::request_stream);  // 400 + 300 bytes
  serve(core, 4, fake_device::request_stream);    // 3 is now the least recent
  for (std::int64_t b : {5, 5}) serve(core, b, fake_device::request_stream);  // 500 more: 3 must go
  EXPECT_FALSE(core.is_captured(3));
  EXPECT_TRUE(core.is_captured(4));
  EXPECT_TRUE(core.is_captured(5));
  EXPECT_EQ(core.statistics().evictions, 1U);
  EXPECT_EQ(device.captured, (std::set<std::int64_t>{4, 5}));
  EXPECT_EQ(core.recency(), (std::vector<std::int64_t>{4, 5}));
  EXPECT_EQ(serve(core, 3, fake_device::request_stream),
            gsch::detail::served_by::capture);  // warmed up before: captured at once
  EXPECT_EQ(device.captured, (std::set<std::int64_t>{5, 3}));
  EXPECT_EQ(core.bytes_by_size(), (std::map<std::int64_t, std::size_t>{{3, 300}, {5, 500}}));
}

TEST(graph_cache_core, a_graph_larger_than_the_budget_is_a_usage_error) {
  fake_device device;
  cache_core core{device.actions(), device.sizes, 0, 500, false};
  try {
    serve(core, 8, fake_device::request_stream);  // 800 bytes
    FAIL() << "no error";
  } catch (graphstep::usage_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("raise the budget"), std::string::npos) << e.what();
  }
  // Refused, the graph is released, not kept uncharged for the next request to replay.
  EXPECT_FALSE(core.is_captured(8));
  EXPECT_TRUE(device.captured.empty());
  EXPECT_TRUE(core.bytes_by_size().empty());
  EXPECT_THROW(serve(core, 8, fake_device::request_stream), graphstep::usage_error);
  EXPECT_TRUE(device.executed.empty());
}

TEST(graph_cache_core, the_template_is_switched_by_update_and_only_when_needed) {
  fake_device device;
  cache_core core{device.actions(), device.sizes, 0, 0, true};
  core.precapture({16, 8, 4}, fake_device::request_stream);
  EXPECT_EQ(core.template_size(), 16);
  EXPECT_EQ(device.log,
            (std::vector<std::string>{"capture+instantiate 16", "capture 8", "capture 4"}));
  device.log.clear();
  for (std::int64_t b : {8, 8, 4, 16, 16}) serve(core, b, fake_device::request_stream);
  EXPECT_EQ(device.log,
            (std::vector<std::string>{"update 16<-8", "update 16<-4", "update 16<-16"}));
  EXPECT_EQ(device.executed, (std::vector<std::int64_t>{8, 8, 4, 16, 16}));
  EXPECT_EQ(core.statistics().updates, 3U);
  EXPECT_EQ(core.statistics().update_refusals, 0U);
  EXPECT_TRUE(core.refused_sizes().empty());
  EXPECT_EQ(device.idle_waits, 0) << "switching the template waits for nothing";
}

TEST(graph_cache_core, a_refused_update_instantiates_that_size_and_is_reported) {
  fake_device device;
  device.refuse = {2};
  cache_core core{device.actions(), device.sizes, 0, 0, true};
  core.precapture({8, 2}, fake_device::request_stream);
  device.log.clear();
  for (std::int64_t b : {2, 8, 2, 2}) serve(core, b, fake_device::request_stream);
  EXPECT_EQ(device.log, (std::vector<std::string>{"update 8<-2", "instantiate 2"}));
  EXPECT_EQ(device.executed, (std::vector<std::int64_t>{2, 8, 2, 2}));
  EXPECT_EQ(core.statistics().update_refusals, 1U);
  EXPECT_EQ(core.refused_sizes(), (std::set<std::int64_t>{2}));
}

TEST(graph_cache_core, eviction_in_template_mode_waits_and_forgets_what_the_template_ran) {
  fake_device device;
  device.refuse = {5};
  cache_core core{device.actions(), device.sizes, 0, 700, true};
  serve(core, 9, fake_device::request_stream);  // the template: never charged, never evicted
  serve(core, 4, fake_device::request_stream);  // the template now runs 4's work
  serve(
      core, 5,
      fake_device::request_stream);  // 400 + 500 > 700: 4 goes while the template may still run it
  EXPECT_FALSE(core.is_captured(4));
  EXPECT_TRUE(core.is_captured(9));
  serve(core, 4,
        fake_device::request_stream);  // captured again: the template must be updated to the
                                       // new capture, not replay the work of the released one
  serve(core, 9, fake_device::request_stream);
  EXPECT_EQ(core.statistics().evictions, 2U);  // 4, then 5 to make room for 4 again
  EXPECT_EQ(device.executed, (std::vector<std::int64_t>{9, 4, 5, 4, 9}));
}

TEST(graph_cache_core, a_failed_capture_leaves_the_size_to_capture_again) {
  fake_device device;
  device.fail_capture = {4};
  cache_core core{device.actions(), device.sizes, 0, 0, false};
  EXPECT_THROW(serve(core, 4, fake_device::request_stream), std::runtime_error);
  EXPECT_FALSE(core.is_captured(4));
  EXPECT_EQ(core.statistics().captures, 0U);
  device.fail_capture.clear();
  EXPECT_EQ(serve(core, 4, fake_device::request_stream), gsch::detail::served_by::capture);
  EXPECT_TRUE(core.is_captured(4));
}

TEST(graph_cache_core, missing_actions_and_negative_warmup_are_usage_errors) {
  fake_device device;
  auto actions = device.actions();
  actions.update = nullptr;
  EXPECT_THROW((cache_core{actions, device.sizes, 0, 0, false}), graphstep::usage_error);
  EXPECT_THROW((cache_core{device.actions(), device.sizes, -1, 0, false}), graphstep::usage_error);
}

TEST(graph_cache_core, padding_is_counted_in_elements) {
  fake_device device;
  cache_core core{device.actions(), device.sizes, 0, 0, false};
  core.count_request(3, 4);
  core.count_request(8, 8);
  EXPECT_EQ(core.statistics().requested_elements, 11);
  EXPECT_EQ(core.statistics().padded_elements, 1);
  EXPECT_DOUBLE_EQ(core.statistics().pad_ratio(), 1.0 / 12.0);
}

// Random request streams in both modes, with refusals and a tight budget: every request does
// the work of its own capture size, no released work ever runs, and the budget always holds.
TEST(graph_cache_core, random_requests_always_run_their_own_size) {
  std::mt19937 random{20240611};
  for (bool share : {false, true}) {
    for (int trial = 0; trial < 20; ++trial) {
      fake_device device;
      device.refuse = {3, 7};
      std::size_t const budget = 1500;
      cache_core core{device.actions(), device.sizes, trial % 3, budget, share};
      std::uniform_int_distribution<std::int64_t> size{1, 10};
      std::size_t served = 0;
      for (int i = 0; i < 300; ++i) {
        std::int64_t const b = size(random);
        serve(core, b, fake_device::request_stream);
        ++served;
        ASSERT_EQ(device.executed.back(), b) << "request " << i << (share ? " (template)" : "");
        std::size_t charged = 0;
        for (auto const& [key, bytes] : core.bytes_by_size()) {
          if (core.template_size() != key) charged += bytes;
        }
        ASSERT_LE(charged, budget);
      }
      auto const& s = core.statistics();
      EXPECT_EQ(s.hits + s.misses, served);
      EXPECT_GT(s.evictions, 0U);
      if (share) {
        EXPECT_GT(s.updates, 0U);
        EXPECT_GT(s.update_refusals, 0U);
      } else {
        EXPECT_EQ(s.updates + s.update_refusals, 0U);
      }
    }
  }
}

// A cache keyed by every distinct size would capture once per size; mapped to capture sizes, a
// thousand distinct sizes capture one graph per capture size they reach, and the padding is
// reported.
TEST(graph_cache_core, distinct_sizes_capture_once_per_size) {
  auto const policy = gsch::capture_sizes::powers_then_steps(256, 32);
  fake_device device;
  device.sizes = policy.sizes();
  cache_core core{device.actions(), device.sizes, 0, 0, false};
  std::mt19937 random{7};
  std::uniform_int_distribution<std::int64_t> size{1, 256};
  std::set<std::int64_t> reached;
  for (int request = 0; request < 1000; ++request) {
    auto const choice = policy.choose(size(random));
    reached.insert(choice.captured);
    ASSERT_EQ(device.sizes.at(choice.slot), choice.captured);
    core.count_request(choice.captured - choice.padding, choice.captured);
    static_cast<void>(core.serve(choice.slot, fake_device::request_stream));
  }
  EXPECT_EQ(core.statistics().captures, reached.size());
  EXPECT_LE(reached.size(), policy.sizes().size());
  EXPECT_EQ(core.statistics().hits, 1000U - reached.size());
  EXPECT_GT(core.statistics().pad_ratio(), 0.0);
  EXPECT_LT(core.statistics().pad_ratio(), 0.5);
}

TEST(graph_cache_core, every_action_runs_on_the_stream_of_the_request_that_caused_it) {
  fake_device device;
  cache_core core{device.actions(), device.sizes, 1, 0, false};
  serve(core, 4, 1);  // warm-up on stream 1
  serve(core, 4, 2);  // capture and replay on stream 2
  serve(core, 4, 3);  // replay on stream 3
  EXPECT_EQ(device.streams, (std::vector<int>{1, 2, 2, 3}));
  core.precapture({8}, 5);
  EXPECT_EQ(device.streams, (std::vector<int>{1, 2, 2, 3, 5, 5}));
}

TEST(graph_cache_core, sizes_are_named_by_their_slot_and_keys_outside_them_are_refused) {
  fake_device device;
  device.sizes = {2, 8, 32};
  cache_core core{device.actions(), device.sizes, 0, 0, false};
  EXPECT_EQ(core.slot_of(8), 1U);
  EXPECT_THROW(static_cast<void>(core.slot_of(4)), graphstep::usage_error);
  EXPECT_THROW(core.serve(3, fake_device::request_stream), graphstep::usage_error);
  EXPECT_THROW(core.precapture({32, 5}, fake_device::request_stream), graphstep::usage_error);
  EXPECT_TRUE(device.log.empty()) << "a refused request or pre-capture did some work";
  EXPECT_EQ(core.serve(2, fake_device::request_stream), gsch::detail::served_by::capture);
  EXPECT_TRUE(core.is_captured(32));
  EXPECT_FALSE(core.is_captured(5));
  EXPECT_EQ(core.bytes_of(5), 0U);
  for (std::vector<std::int64_t> bad : {std::vector<std::int64_t>{8, 2}, {2, 2}}) {
    EXPECT_THROW((cache_core{device.actions(), bad, 0, 0, false}), graphstep::usage_error);
  }
}
