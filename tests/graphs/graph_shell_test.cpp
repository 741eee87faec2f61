// Graphs and executables without a device: what an empty one is, how ownership moves, and the
// checks made before CUDA is touched.

#include <gtest/gtest.h>

#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <type_traits>

#include "common/error_message.hpp"
#include "common/handle_traits.hpp"

namespace gs = graphstep;

namespace {

static_assert(graphstep::testing::is_move_only_v<gs::graphs::graph>);
static_assert(graphstep::testing::is_move_only_v<gs::graphs::graph_exec>);
static_assert(!std::is_copy_constructible_v<gs::graphs::capture_scope>);
static_assert(!std::is_move_constructible_v<gs::graphs::capture_scope>);
// An executable is made by a capture or by graph::instantiate, never from a raw handle.
static_assert(!std::is_constructible_v<gs::graphs::graph_exec, cudaGraphExec_t>);
static_assert(!std::is_constructible_v<gs::graphs::graph_exec, cudaGraphExec_t, gs::graphs::graph>);

}  // namespace

TEST(graph, starts_empty_with_a_unique_id) {
  gs::graphs::graph_exec const a;
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.id(), 0U) << "an empty executable runs no graph";
  EXPECT_EQ(a.name(), "graph");
  EXPECT_EQ(a.device(), -1);
  EXPECT_EQ(a.replay_count(), 0U);
  EXPECT_NE(gs::graphs::next_graph_id(), gs::graphs::next_graph_id());
  EXPECT_NE(gs::graphs::next_graph_id(), 0U);
}

TEST(graph, an_empty_graph_refuses_every_use_with_a_usage_error) {
  gs::graphs::graph const g;
  EXPECT_TRUE(g.empty());
  EXPECT_EQ(g.get(), nullptr);
  EXPECT_THROW(static_cast<void>(g.identity()), gs::usage_error);
  EXPECT_THROW(static_cast<void>(g.node_counts()), gs::usage_error);
  EXPECT_THROW(g.write_dot("graph.dot"), gs::usage_error);
  std::string const what =
      gs::testing::message_of<gs::usage_error>([&] { static_cast<void>(g.instantiate()); });
  EXPECT_NE(what.find("this graph is empty"), std::string::npos) << what;
}

TEST(graph, an_empty_executable_refuses_to_replay_before_touching_the_device) {
  gs::graphs::graph_exec exec;
  std::string const what =
      gs::testing::message_of<gs::usage_error>([&] { exec.replay(cudaStreamPerThread); });
  EXPECT_NE(what.find("graph 'graph' is empty"), std::string::npos) << what;
  EXPECT_THROW(exec.upload(cudaStreamPerThread), gs::usage_error);
  EXPECT_THROW(static_cast<void>(exec.update(gs::graphs::graph{})), gs::usage_error);
  EXPECT_THROW(static_cast<void>(exec.source()), gs::usage_error);
}

TEST(graph, adopting_a_null_handle_is_a_usage_error) {
  std::string const what = gs::testing::message_of<gs::usage_error>([] {
    static_cast<void>(gs::graphs::graph::adopt(nullptr, gs::graphs::graph_identity{"mine"}));
  });
  EXPECT_NE(what.find("the cudaGraph_t of 'mine' is null"), std::string::npos) << what;
}
