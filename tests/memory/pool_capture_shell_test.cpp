// The pool's side of a capture, without a device: a pool_capture that is not open refuses to
// be committed and abandons quietly.

#include <gtest/gtest.h>

#include <graphstep/error.hpp>
#include <graphstep/memory/pool_capture.hpp>
#include <type_traits>

namespace gs = graphstep;

static_assert(!std::is_copy_constructible_v<gs::memory::pool_capture>);
static_assert(std::is_nothrow_move_constructible_v<gs::memory::pool_capture>);

TEST(pool_capture, one_that_is_not_open_refuses_a_commit_and_abandons_quietly) {
  gs::memory::pool_capture capture;
  EXPECT_FALSE(capture.open());
  EXPECT_THROW(static_cast<void>(capture.problem()), gs::usage_error);
  EXPECT_THROW(static_cast<void>(capture.commit()), gs::usage_error);
  EXPECT_NO_THROW(capture.abandon());
}
