// group_guard around an empty group, which NCCL runs without a device.

#include <gtest/gtest.h>

#include <graphstep/error.hpp>
#include <graphstep/nccl/collectives.hpp>
#include <type_traits>

namespace gs = graphstep;
namespace gn = graphstep::nccl;

static_assert(!std::is_copy_constructible_v<gn::group_guard>);
static_assert(!std::is_copy_assignable_v<gn::group_guard>);

TEST(group_guard, ends_once) {
  gn::group_guard group;
  group.end();
  EXPECT_THROW(group.end(), gs::usage_error);
}
