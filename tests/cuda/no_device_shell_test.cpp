// Without a visible CUDA device every public entry point fails with a clear error: never a
// crash. On a machine with a GPU these tests are skipped.

#include <gtest/gtest.h>

#include <graphstep/cuda/device.hpp>
#include <graphstep/cuda/event.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <graphstep/memory/pool_statistics.hpp>
#include <graphstep/train/mse_loss.hpp>
#include <graphstep/train/sgd.hpp>
#include <string>

#include "common/no_device.hpp"

namespace gs = graphstep;

namespace {

using no_device = graphstep::testing::no_device_test;
using graphstep::testing::expect_no_device_error;

}  // namespace

TEST_F(no_device, device_queries) {
  EXPECT_EQ(gs::cuda::device_count(), 0);
  expect_no_device_error([] { gs::cuda::require_device(); });
  expect_no_device_error([] { static_cast<void>(gs::cuda::current_device()); });
  expect_no_device_error([] { gs::cuda::device_guard guard{0}; });
}

TEST_F(no_device, handles) {
  expect_no_device_error([] { gs::cuda::stream stream; });
  expect_no_device_error([] { gs::cuda::event event; });
  expect_no_device_error([] { gs::cuda::timed_event event; });
  expect_no_device_error([] { gs::cuda::stream_view{cudaStreamPerThread}.synchronize(); });
  expect_no_device_error(
      [] { static_cast<void>(gs::cuda::stream_view{cudaStreamPerThread}.is_capturing()); });
}

TEST_F(no_device, memory_pool) {
  expect_no_device_error([] { gs::memory::memory_pool pool; });
  expect_no_device_error(
      [] { gs::memory::memory_pool pool{{gs::memory::pool_backing::device_malloc}}; });
}

TEST_F(no_device, capture) {
  gs::graphs::graph_exec g;
  expect_no_device_error([&] { gs::graphs::capture_scope scope{g, cudaStreamPerThread}; });
  EXPECT_TRUE(g.empty());
  expect_no_device_error([&] { gs::graphs::capture(g, cudaStreamPerThread, [] {}); });
}

TEST_F(no_device, an_empty_graph_is_a_usage_error_first) {
  gs::graphs::graph_exec g;
  EXPECT_THROW(g.replay(cudaStreamPerThread), gs::usage_error);
  EXPECT_THROW(g.upload(cudaStreamPerThread), gs::usage_error);
  EXPECT_THROW(static_cast<void>(g.node_counts()), gs::usage_error);
  EXPECT_THROW(g.write_dot("never.dot"), gs::usage_error);
}

TEST(capture_scope, refuses_the_legacy_default_stream_before_touching_the_device) {
  gs::graphs::graph_exec g;
  try {
    gs::graphs::capture_scope scope{g, cudaStreamLegacy};
    FAIL() << "no exception";
  } catch (gs::usage_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("legacy default stream"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(g.empty());
}

TEST_F(no_device, training_parts) {
  float* fake = reinterpret_cast<float*>(std::uintptr_t{0x1000});
  expect_no_device_error([&] {
    graphstep::train::sgd optimizer{
        {{{fake, graphstep::dtype::float32, 4}, {fake, graphstep::dtype::float32, 4}}},
        {},
        {},
        {},
        cudaStreamPerThread};
  });
  expect_no_device_error([] { graphstep::train::mse_loss loss{4, cudaStreamPerThread}; });
}
