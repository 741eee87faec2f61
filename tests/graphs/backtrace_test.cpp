// Host backtraces and the names of their frames, as the capture diagnostics report them.

#include "graphs/detail/backtrace.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace gd = graphstep::graphs;

// Exported (the test binaries link with -rdynamic), so that its name can be looked up the way
// a user's frame is.
__attribute__((noinline)) std::vector<std::uintptr_t> diagnostics_test_user_function() {
  std::vector<std::uintptr_t> frames = graphstep::graphs::detail::current_backtrace(16);
  asm volatile("" ::: "memory");  // keeps the call from becoming a tail call
  return frames;
}

namespace {

bool contains(std::string const& text, std::string const& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST(capture_diagnostics, a_backtrace_names_the_users_function) {
  std::vector<std::uintptr_t> const addresses = diagnostics_test_user_function();
  ASSERT_GE(addresses.size(), 2U);
  std::vector<gd::detail::frame> frames;
  for (std::uintptr_t address : addresses)
    frames.push_back(graphstep::graphs::detail::symbolize(address));
  auto const user = gd::detail::first_user_frame(frames);
  ASSERT_TRUE(user);
  EXPECT_EQ(frames[*user].symbol, "diagnostics_test_user_function()");
  EXPECT_TRUE(contains(frames[*user].module, "graphstep_unit_tests")) << frames[*user].module;
  EXPECT_GT(frames[*user].module_offset, 0U);
  // Outer frames are GoogleTest's and the C runtime's, also looked up.
  EXPECT_TRUE(std::any_of(frames.begin(), frames.end(), [](gd::detail::frame const& f) {
    return contains(f.symbol, "testing::");
  }));
}

TEST(capture_diagnostics, an_unknown_address_has_no_name) {
  gd::detail::frame const f = graphstep::graphs::detail::symbolize(0x10);
  EXPECT_TRUE(f.module.empty());
  EXPECT_TRUE(f.symbol.empty());
  EXPECT_TRUE(gd::detail::is_library_frame(f));
}
