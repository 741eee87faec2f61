// The pool's side of a capture, without a device: a pool_capture that is not open refuses to
// be committed and abandons quietly.

#include <gtest/gtest.h>

#include <graphstep/error.hpp>
#include <graphstep/memory/pool_capture.hpp>
#include <memory>
#include <type_traits>

namespace gs = graphstep;

static_assert(!std::is_copy_constructible_v<gs::memory::pool_capture>);
static_assert(std::is_nothrow_move_constructible_v<gs::memory::pool_capture>);
static_assert(std::is_copy_constructible_v<gs::memory::pool_lease>);
// A lease is a graph's memory, not any handle: nothing converts to one.
static_assert(!std::is_convertible_v<std::shared_ptr<void>, gs::memory::pool_lease>);
static_assert(!std::is_convertible_v<gs::memory::pool_lease, bool>);

TEST(pool_capture, one_that_is_not_open_refuses_a_commit_and_abandons_quietly) {
  gs::memory::pool_capture capture;
  EXPECT_FALSE(capture.open());
  EXPECT_THROW(static_cast<void>(capture.problem()), gs::usage_error);
  EXPECT_THROW(static_cast<void>(capture.commit()), gs::usage_error);
  EXPECT_NO_THROW(capture.abandon());
}

TEST(pool_lease, an_empty_one_holds_nothing_and_orders_no_replay) {
  gs::memory::pool_lease const lease;
  EXPECT_FALSE(lease);
  EXPECT_NO_THROW(lease.before_replay(gs::cuda::stream_view{cudaStreamPerThread}));
  EXPECT_NO_THROW(lease.after_replay(gs::cuda::stream_view{cudaStreamPerThread}, nullptr));
  EXPECT_TRUE(lease.replay_is_settled(gs::cuda::stream_view{cudaStreamPerThread}, nullptr));
}
