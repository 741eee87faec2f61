// Capture size choice, capture order and the statistics of the graph cache
// (schedule/capture_sizes.hpp).

#include <gtest/gtest.h>

#include <graphstep/error.hpp>
#include <graphstep/schedule/capture_sizes.hpp>
#include <string>

namespace gsch = graphstep::schedule;

TEST(capture_sizes, pad_up_picks_the_smallest_size_that_fits) {
  gsch::capture_sizes const p{{8, 1, 4, 2, 16, 16}};
  EXPECT_EQ(p.sizes(), (std::vector<std::int64_t>{1, 2, 4, 8, 16}));
  EXPECT_EQ(p.choose(1).captured, 1);
  EXPECT_EQ(p.choose(3).captured, 4);
  EXPECT_EQ(p.choose(3).padding, 1);
  EXPECT_EQ(p.choose(9).captured, 16);
  EXPECT_EQ(p.choose(9).padding, 7);
  EXPECT_EQ(p.choose(16).padding, 0);
  // The slot is the capture size's position in capture sizes(): a graph cache keeps its graph
  // there.
  EXPECT_EQ(p.choose(1).slot, 0U);
  EXPECT_EQ(p.choose(3).slot, 2U);
  EXPECT_EQ(p.choose(9).slot, 4U);
  EXPECT_EQ(p.capture_order(), (std::vector<std::int64_t>{16, 8, 4, 2, 1}));
}

TEST(capture_sizes, exact_matching_and_errors_name_the_fix) {
  gsch::capture_sizes const p{{128, 256, 512}, gsch::size_match::exact};
  EXPECT_EQ(p.choose(256).captured, 256);
  try {
    static_cast<void>(p.choose(300));
    FAIL() << "no error";
  } catch (graphstep::usage_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("no capture size of exactly 300"), std::string::npos);
  }
  try {
    static_cast<void>(p.choose(1000));
    FAIL() << "no error";
  } catch (graphstep::usage_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("larger than the largest capture size (512)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(static_cast<void>(p.choose(0)), graphstep::usage_error);
  EXPECT_THROW(gsch::capture_sizes({}), graphstep::usage_error);
  EXPECT_THROW(gsch::capture_sizes({0, 4}), graphstep::usage_error);
}

TEST(capture_sizes, powers_then_steps_like_inference_runners) {
  auto const p = gsch::capture_sizes::powers_then_steps(40, 8);
  EXPECT_EQ(p.sizes(), (std::vector<std::int64_t>{1, 2, 4, 8, 16, 24, 32, 40}));
  auto const odd = gsch::capture_sizes::powers_then_steps(20, 8);
  EXPECT_EQ(odd.sizes().back(), 20);
  EXPECT_EQ(odd.choose(17).captured, 20);
  EXPECT_THROW(static_cast<void>(gsch::capture_sizes::powers_then_steps(0)),
               graphstep::usage_error);
}

TEST(cache_statistics, pad_ratio) {
  gsch::cache_statistics s;
  EXPECT_EQ(s.pad_ratio(), 0.0);
  s.requested_elements = 75;
  s.padded_elements = 25;
  EXPECT_DOUBLE_EQ(s.pad_ratio(), 0.25);
}
