// Captured shapes of several dimensions (schedule/capture_shapes.hpp): each dimension padded
// on its own list, errors that name the dimension, the capture order, and shape keys driving
// the graph cache core.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <graphstep/error.hpp>
#include <graphstep/schedule/capture_shapes.hpp>
#include <graphstep/schedule/capture_sizes.hpp>
#include <graphstep/schedule/detail/graph_cache_core.hpp>
#include <set>
#include <string>
#include <vector>

namespace gsch = graphstep::schedule;

TEST(capture_shapes, pads_each_dimension_on_its_own_list) {
  gsch::capture_shapes const p{gsch::capture_sizes{{1, 2, 4, 8}},
                               gsch::capture_sizes{{128, 256, 512}}, gsch::capture_sizes{{1, 4}}};
  auto const c = p.choose({3, 200, 2});
  EXPECT_EQ(c.captured, (gsch::shape_key{4, 256, 4}));
  EXPECT_EQ(c.padding, (gsch::shape_key{1, 56, 2}));
  EXPECT_EQ(gsch::elements_of(c.captured), 1024);
  EXPECT_EQ(gsch::describe(c.captured), "batch 4 x length 256 x 4 packed");
  auto const exact = p.choose({8, 512, 1});
  EXPECT_EQ(exact.padding, (gsch::shape_key{0, 0, 0}));
  // A choice's slot is its captured shape's position among every combination, ascending.
  std::vector<gsch::shape_key> const sizes = p.sizes();
  ASSERT_EQ(sizes.size(), 4U * 3U * 2U);
  EXPECT_TRUE(std::is_sorted(sizes.begin(), sizes.end()));
  for (gsch::shape_key const& shape :
       {gsch::shape_key{3, 200, 2}, gsch::shape_key{1, 1, 1}, gsch::shape_key{8, 512, 4}}) {
    auto const choice = p.choose(shape);
    ASSERT_LT(choice.slot, sizes.size());
    EXPECT_EQ(sizes[choice.slot], choice.captured) << gsch::describe(shape);
  }
}

TEST(capture_shapes, errors_name_the_dimension_and_the_largest_size) {
  gsch::capture_shapes const p{gsch::capture_sizes{{1, 2, 4, 8}},
                               gsch::capture_sizes{{128, 256}, gsch::size_match::exact}};
  try {
    static_cast<void>(p.choose({2, 1000, 1}));
    FAIL() << "no error";
  } catch (graphstep::usage_error const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("'sequence_length'"), std::string::npos) << what;
    EXPECT_NE(what.find("largest capture size (256)"), std::string::npos) << what;
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

TEST(capture_shapes, capture_order_has_every_combination_most_tokens_first) {
  gsch::capture_shapes const p{gsch::capture_sizes{{1, 2, 4}}, gsch::capture_sizes{{64, 128}},
                               gsch::capture_sizes{{1, 2}}};
  auto const order = p.capture_order();
  ASSERT_EQ(order.size(), 12U);
  EXPECT_EQ(order.front(), (gsch::shape_key{4, 128, 2}));
  EXPECT_EQ(order.back(), (gsch::shape_key{1, 64, 1}));
  std::set<gsch::shape_key> distinct(order.begin(), order.end());
  EXPECT_EQ(distinct.size(), order.size());
  for (std::size_t i = 1; i < order.size(); ++i) {
    EXPECT_GE(gsch::elements_of(order[i - 1]), gsch::elements_of(order[i]));
  }
}

TEST(capture_shapes, drives_the_cache_core_with_shape_keys) {
  std::vector<std::string> log;
  gsch::capture_shapes const p{gsch::capture_sizes{{2, 4}}, gsch::capture_sizes{{8, 16}}};
  std::vector<gsch::shape_key> const sizes = p.sizes();
  auto const name = [&](std::size_t slot) { return gsch::describe(sizes.at(slot)); };
  gsch::detail::cache_actions<int> a;
  a.run_eager = [&](int /*stream*/, std::size_t slot) { log.push_back("eager " + name(slot)); };
  a.capture = [&](int /*stream*/, std::size_t slot, bool) {
    log.push_back("capture " + name(slot));
    return static_cast<std::size_t>(gsch::elements_of(sizes.at(slot)));
  };
  a.replay = [&](int /*stream*/, std::size_t slot) { log.push_back("replay " + name(slot)); };
  a.update = [](std::size_t, std::size_t) { return true; };
  a.instantiate = [](int /*stream*/, std::size_t) {};
  a.release = [&](std::size_t slot) { log.push_back("release " + name(slot)); };
  a.wait_idle = [] {};
  gsch::detail::graph_cache_core<gsch::shape_key, int> core{a, sizes, 0, 64, false};
  core.serve(p.choose({3, 10, 1}).slot, 0);  // 4 x 16: 64 tokens, the whole budget
  core.serve(p.choose({1, 5, 1}).slot, 0);   // 2 x 8 evicts it
  EXPECT_EQ(log,
            (std::vector<std::string>{
                "capture batch 4 x length 16 x 1 packed", "replay batch 4 x length 16 x 1 packed",
                "capture batch 2 x length 8 x 1 packed", "release batch 4 x length 16 x 1 packed",
                "replay batch 2 x length 8 x 1 packed"}));
}
