// The graph cache's decisions, on a simulated device: warm-up before capture, pre-capture
// order, eviction under a budget, the template switched by update and the fallback when an
// update is refused, and shape buckets of several dimensions.

#include <gtest/gtest.h>

#include <graphstep/error.hpp>
#include <graphstep/schedule/bucket_policy.hpp>
#include <graphstep/schedule/detail/graph_cache_core.hpp>
#include <graphstep/schedule/shape_bucket_policy.hpp>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace gsch = graphstep::schedule;

namespace {

// Graphs as a device would hold them: which buckets are captured, which have an executable, and
// whose work each executable runs. Every misuse a real device would punish fails the test.
struct fake_device {
  std::set<std::int64_t> captured;
  // executable -> the capture whose work it runs: {bucket, capture number}
  std::map<std::int64_t, std::pair<std::int64_t, int>> executable_runs;
  std::map<std::int64_t, int> capture_number;  // the live capture of each bucket
  int captures{};
  std::set<std::int64_t> refuse;  // buckets of a second topology: no update across topologies
  std::set<std::int64_t> fail_capture;
  std::vector<std::int64_t> executed;  // the work each eager run or replay did
  std::vector<std::string> log;
  bool idle{true};

  static std::size_t bytes(std::int64_t bucket) { return static_cast<std::size_t>(bucket) * 100; }

  gsch::detail::cache_actions<std::int64_t> actions() {
    gsch::detail::cache_actions<std::int64_t> a;
    a.run_eager = [this](std::int64_t b) {
      log.push_back("eager " + std::to_string(b));
      executed.push_back(b);
      idle = false;
    };
    a.capture = [this](std::int64_t b, bool instantiate) {
      if (fail_capture.count(b) != 0) throw std::runtime_error{"capture invalidated"};
      EXPECT_EQ(captured.count(b), 0U) << "captured twice: " << b;
      captured.insert(b);
      capture_number[b] = ++captures;
      if (instantiate) executable_runs[b] = {b, captures};
      log.push_back((instantiate ? "capture+instantiate " : "capture ") + std::to_string(b));
      return bytes(b);
    };
    a.replay = [this](std::int64_t b) {
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
    a.update = [this](std::int64_t t, std::int64_t b) {
      EXPECT_EQ(executable_runs.count(t), 1U) << "update of " << t << " without executable";
      EXPECT_EQ(captured.count(b), 1U) << "update from " << b << ", which is not captured";
      log.push_back("update " + std::to_string(t) + "<-" + std::to_string(b));
      if (refuse.count(t) != refuse.count(b)) return false;
      executable_runs[t] = {b, capture_number[b]};
      return true;
    };
    a.instantiate = [this](std::int64_t b) {
      EXPECT_EQ(captured.count(b), 1U);
      EXPECT_EQ(executable_runs.count(b), 0U) << "instantiated twice: " << b;
      executable_runs[b] = {b, capture_number[b]};
      log.push_back("instantiate " + std::to_string(b));
    };
    a.release = [this](std::int64_t b) {
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
    a.wait_idle = [this] { idle = true; };
    return a;
  }
};

}  // namespace

TEST(graph_cache_core, warms_up_then_captures_then_replays) {
  fake_device device;
  gsch::detail::graph_cache_core<std::int64_t> core{device.actions(), 2, 0, false};
  EXPECT_EQ(core.serve(8), gsch::detail::served_by::eager);
  EXPECT_EQ(core.serve(8), gsch::detail::served_by::eager);
  EXPECT_FALSE(core.is_captured(8));
  EXPECT_EQ(core.serve(8), gsch::detail::served_by::capture);
  EXPECT_EQ(core.serve(8), gsch::detail::served_by::replay);
  EXPECT_EQ(core.serve(4), gsch::detail::served_by::eager);
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

TEST(graph_cache_core, precapture_follows_the_order_and_warms_up_each_bucket) {
  fake_device device;
  gsch::detail::graph_cache_core<std::int64_t> core{device.actions(), 1, 0, false};
  core.serve(4);  // warmed up already: not again
  core.precapture(gsch::bucket_policy{{1, 2, 4, 8}}.capture_order());
  EXPECT_EQ(device.log,
            (std::vector<std::string>{"eager 4", "eager 8", "capture+instantiate 8",
                                      "capture+instantiate 4", "eager 2", "capture+instantiate 2",
                                      "eager 1", "capture+instantiate 1"}));
  EXPECT_EQ(core.captured_count(), 4U);
  EXPECT_EQ(core.statistics().hits, 0U);
  core.precapture({8, 4});  // nothing left to do
  EXPECT_EQ(core.statistics().captures, 4U);
}

TEST(graph_cache_core, a_budget_evicts_the_least_recently_used_and_recaptures_without_warmup) {
  fake_device device;
  gsch::detail::graph_cache_core<std::int64_t> core{device.actions(), 1, 1000, false};
  for (std::int64_t b : {4, 4, 3, 3}) core.serve(b);  // 400 + 300 bytes
  core.serve(4);                                      // 3 is now the least recent
  for (std::int64_t b : {5, 5}) core.serve(b);        // 500 more: 3 must go
  EXPECT_FALSE(core.is_captured(3));
  EXPECT_TRUE(core.is_captured(4));
  EXPECT_TRUE(core.is_captured(5));
  EXPECT_EQ(core.statistics().evictions, 1U);
  EXPECT_EQ(device.captured, (std::set<std::int64_t>{4, 5}));
  EXPECT_EQ(core.recency(), (std::vector<std::int64_t>{4, 5}));
  EXPECT_EQ(core.serve(3), gsch::detail::served_by::capture);  // warmed up before: captured at once
  EXPECT_EQ(device.captured, (std::set<std::int64_t>{5, 3}));
  EXPECT_EQ(core.bytes_by_bucket(), (std::map<std::int64_t, std::size_t>{{3, 300}, {5, 500}}));
}

TEST(graph_cache_core, a_graph_larger_than_the_budget_is_a_usage_error) {
  fake_device device;
  gsch::detail::graph_cache_core<std::int64_t> core{device.actions(), 0, 500, false};
  try {
    core.serve(8);  // 800 bytes
    FAIL() << "no error";
  } catch (graphstep::usage_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("raise the budget"), std::string::npos) << e.what();
  }
}

TEST(graph_cache_core, the_template_is_switched_by_update_and_only_when_needed) {
  fake_device device;
  gsch::detail::graph_cache_core<std::int64_t> core{device.actions(), 0, 0, true};
  core.precapture({16, 8, 4});
  EXPECT_EQ(core.template_bucket(), 16);
  EXPECT_EQ(device.log,
            (std::vector<std::string>{"capture+instantiate 16", "capture 8", "capture 4"}));
  device.log.clear();
  for (std::int64_t b : {8, 8, 4, 16, 16}) core.serve(b);
  EXPECT_EQ(device.log,
            (std::vector<std::string>{"update 16<-8", "update 16<-4", "update 16<-16"}));
  EXPECT_EQ(device.executed, (std::vector<std::int64_t>{8, 8, 4, 16, 16}));
  EXPECT_EQ(core.statistics().updates, 3U);
  EXPECT_EQ(core.statistics().update_refusals, 0U);
  EXPECT_TRUE(core.refused_buckets().empty());
}

TEST(graph_cache_core, a_refused_update_instantiates_that_bucket_and_is_reported) {
  fake_device device;
  device.refuse = {2};
  gsch::detail::graph_cache_core<std::int64_t> core{device.actions(), 0, 0, true};
  core.precapture({8, 2});
  device.log.clear();
  for (std::int64_t b : {2, 8, 2, 2}) core.serve(b);
  EXPECT_EQ(device.log, (std::vector<std::string>{"update 8<-2", "instantiate 2"}));
  EXPECT_EQ(device.executed, (std::vector<std::int64_t>{2, 8, 2, 2}));
  EXPECT_EQ(core.statistics().update_refusals, 1U);
  EXPECT_EQ(core.refused_buckets(), (std::set<std::int64_t>{2}));
}

TEST(graph_cache_core, eviction_in_template_mode_waits_and_forgets_what_the_template_ran) {
  fake_device device;
  device.refuse = {5};
  gsch::detail::graph_cache_core<std::int64_t> core{device.actions(), 0, 700, true};
  core.serve(9);  // the template: never charged, never evicted
  core.serve(4);  // the template now runs 4's work
  core.serve(5);  // 400 + 500 > 700: 4 goes while the template may still run it
  EXPECT_FALSE(core.is_captured(4));
  EXPECT_TRUE(core.is_captured(9));
  core.serve(4);  // captured again: the template must be updated to the new capture, not
                  // replay the work of the released one
  core.serve(9);
  EXPECT_EQ(core.statistics().evictions, 2U);  // 4, then 5 to make room for 4 again
  EXPECT_EQ(device.executed, (std::vector<std::int64_t>{9, 4, 5, 4, 9}));
}

TEST(graph_cache_core, a_failed_capture_leaves_the_bucket_to_capture_again) {
  fake_device device;
  device.fail_capture = {4};
  gsch::detail::graph_cache_core<std::int64_t> core{device.actions(), 0, 0, false};
  EXPECT_THROW(core.serve(4), std::runtime_error);
  EXPECT_FALSE(core.is_captured(4));
  EXPECT_EQ(core.statistics().captures, 0U);
  device.fail_capture.clear();
  EXPECT_EQ(core.serve(4), gsch::detail::served_by::capture);
  EXPECT_TRUE(core.is_captured(4));
}

TEST(graph_cache_core, missing_actions_and_negative_warmup_are_usage_errors) {
  fake_device device;
  auto actions = device.actions();
  actions.update = nullptr;
  EXPECT_THROW((gsch::detail::graph_cache_core<std::int64_t>{actions, 0, 0, false}),
               graphstep::usage_error);
  EXPECT_THROW((gsch::detail::graph_cache_core<std::int64_t>{device.actions(), -1, 0, false}),
               graphstep::usage_error);
}

TEST(graph_cache_core, padding_is_counted_in_elements) {
  fake_device device;
  gsch::detail::graph_cache_core<std::int64_t> core{device.actions(), 0, 0, false};
  core.count_request(3, 4);
  core.count_request(8, 8);
  EXPECT_EQ(core.statistics().requested_elements, 11);
  EXPECT_EQ(core.statistics().padded_elements, 1);
  EXPECT_DOUBLE_EQ(core.statistics().pad_ratio(), 1.0 / 12.0);
}

// Random request streams in both modes, with refusals and a tight budget: every request does
// the work of its own bucket, no released work ever runs, and the budget always holds.
TEST(graph_cache_core, random_requests_always_run_their_own_bucket) {
  std::mt19937 random{20240611};
  for (bool share : {false, true}) {
    for (int trial = 0; trial < 20; ++trial) {
      fake_device device;
      device.refuse = {3, 7};
      std::size_t const budget = 1500;
      gsch::detail::graph_cache_core<std::int64_t> core{device.actions(), trial % 3, budget, share};
      std::uniform_int_distribution<std::int64_t> bucket{1, 10};
      std::size_t served = 0;
      for (int i = 0; i < 300; ++i) {
        std::int64_t const b = bucket(random);
        core.serve(b);
        ++served;
        ASSERT_EQ(device.executed.back(), b) << "request " << i << (share ? " (template)" : "");
        std::size_t charged = 0;
        for (auto const& [key, bytes] : core.bytes_by_bucket()) {
          if (core.template_bucket() != key) charged += bytes;
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

TEST(shape_bucket_policy, pads_each_dimension_on_its_own_list) {
  gsch::shape_bucket_policy const p{gsch::bucket_policy{{1, 2, 4, 8}},
                                    gsch::bucket_policy{{128, 256, 512}},
                                    gsch::bucket_policy{{1, 4}}};
  auto const c = p.choose({3, 200, 2});
  EXPECT_EQ(c.bucket, (gsch::shape_key{4, 256, 4}));
  EXPECT_EQ(c.padding, (gsch::shape_key{1, 56, 2}));
  EXPECT_EQ(gsch::bucket_elements(c.bucket), 1024);
  EXPECT_EQ(gsch::key_name(c.bucket), "batch 4 x length 256 x 4 packed");
  auto const exact = p.choose({8, 512, 1});
  EXPECT_EQ(exact.padding, (gsch::shape_key{0, 0, 0}));
}

TEST(shape_bucket_policy, errors_name_the_dimension_and_the_largest_bucket) {
  gsch::shape_bucket_policy const p{gsch::bucket_policy{{1, 2, 4, 8}},
                                    gsch::bucket_policy{{128, 256}, gsch::bucket_match::exact}};
  try {
    static_cast<void>(p.choose({2, 1000, 1}));
    FAIL() << "no error";
  } catch (graphstep::usage_error const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("'sequence_length'"), std::string::npos) << what;
    EXPECT_NE(what.find("largest bucket (256)"), std::string::npos) << what;
  }
  try {
    static_cast<void>(p.choose({16, 128, 1}));
    FAIL() << "no error";
  } catch (graphstep::usage_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("'batch'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(static_cast<void>(p.choose({2, 200, 1})), graphstep::usage_error);  // exact
  EXPECT_THROW(static_cast<void>(p.choose({2, 128, 2})), graphstep::usage_error);  // packed {1}
  EXPECT_THROW(static_cast<void>(p.choose({0, 128, 1})), graphstep::usage_error);
}

TEST(shape_bucket_policy, capture_order_has_every_combination_most_tokens_first) {
  gsch::shape_bucket_policy const p{gsch::bucket_policy{{1, 2, 4}}, gsch::bucket_policy{{64, 128}},
                                    gsch::bucket_policy{{1, 2}}};
  auto const order = p.capture_order();
  ASSERT_EQ(order.size(), 12U);
  EXPECT_EQ(order.front(), (gsch::shape_key{4, 128, 2}));
  EXPECT_EQ(order.back(), (gsch::shape_key{1, 64, 1}));
  std::set<gsch::shape_key> distinct(order.begin(), order.end());
  EXPECT_EQ(distinct.size(), order.size());
  for (std::size_t i = 1; i < order.size(); ++i) {
    EXPECT_GE(gsch::bucket_elements(order[i - 1]), gsch::bucket_elements(order[i]));
  }
}

TEST(shape_bucket_policy, drives_the_cache_core_with_shape_keys) {
  std::vector<std::string> log;
  gsch::detail::cache_actions<gsch::shape_key> a;
  a.run_eager = [&](gsch::shape_key const& k) { log.push_back("eager " + gsch::key_name(k)); };
  a.capture = [&](gsch::shape_key const& k, bool) {
    log.push_back("capture " + gsch::key_name(k));
    return static_cast<std::size_t>(gsch::bucket_elements(k));
  };
  a.replay = [&](gsch::shape_key const& k) { log.push_back("replay " + gsch::key_name(k)); };
  a.update = [](gsch::shape_key const&, gsch::shape_key const&) { return true; };
  a.instantiate = [](gsch::shape_key const&) {};
  a.release = [&](gsch::shape_key const& k) { log.push_back("release " + gsch::key_name(k)); };
  a.wait_idle = [] {};
  gsch::shape_bucket_policy const p{gsch::bucket_policy{{2, 4}}, gsch::bucket_policy{{8, 16}}};
  gsch::detail::graph_cache_core<gsch::shape_key> core{a, 0, 64, false};
  core.serve(p.choose({3, 10, 1}).bucket);  // 4 x 16: 64 tokens, the whole budget
  core.serve(p.choose({1, 5, 1}).bucket);   // 2 x 8 evicts it
  EXPECT_EQ(log,
            (std::vector<std::string>{
                "capture batch 4 x length 16 x 1 packed", "replay batch 4 x length 16 x 1 packed",
                "capture batch 2 x length 8 x 1 packed", "release batch 4 x length 16 x 1 packed",
                "replay batch 2 x length 8 x 1 packed"}));
}

// A cache keyed by every distinct size would capture once per size; mapped to buckets, a
// thousand distinct sizes capture one graph per bucket they reach, and the padding is reported.
TEST(graph_cache_core, distinct_sizes_capture_once_per_bucket) {
  fake_device device;
  gsch::detail::graph_cache_core<std::int64_t> core{device.actions(), 0, 0, false};
  auto const policy = gsch::bucket_policy::powers_then_steps(256, 32);
  std::mt19937 random{7};
  std::uniform_int_distribution<std::int64_t> size{1, 256};
  std::set<std::int64_t> reached;
  for (int request = 0; request < 1000; ++request) {
    auto const choice = policy.choose(size(random));
    reached.insert(choice.bucket);
    core.count_request(choice.bucket - choice.padding, choice.bucket);
    static_cast<void>(core.serve(choice.bucket));
  }
  EXPECT_EQ(core.statistics().captures, reached.size());
  EXPECT_LE(reached.size(), policy.buckets().size());
  EXPECT_EQ(core.statistics().hits, 1000U - reached.size());
  EXPECT_GT(core.statistics().pad_ratio(), 0.0);
  EXPECT_LT(core.statistics().pad_ratio(), 0.5);
}
