// Guards on graph outputs: valid until the next replay, then a clear error.

#include <gtest/gtest.h>

#include <graphstep/error.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/graphs/output_guard.hpp>
#include <string>

namespace gs = graphstep;

TEST(output_guard, a_later_replay_invalidates_the_output) {
  auto generation = std::make_shared<std::atomic<std::uint64_t>>(3);
  gs::graphs::output_guard const guard{generation, "'loss' of graph 'step'"};
  EXPECT_TRUE(guard.valid());
  EXPECT_NO_THROW(guard.check());
  EXPECT_EQ(guard.generation(), 3U);
  generation->fetch_add(1);
  EXPECT_FALSE(guard.valid());
  try {
    guard.check();
    FAIL() << "no error";
  } catch (gs::usage_error const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("output 'loss' of graph 'step' came from replay 3 but replay 4"),
              std::string::npos)
        << what;
  }
}

TEST(output_guard, an_empty_graph_hands_out_guards_that_stay_valid) {
  gs::graphs::graph_exec const g;
  auto const guard = g.guard_output("y");
  EXPECT_TRUE(guard.valid());
  EXPECT_EQ(guard.generation(), 0U);
}
