// The host side of the capture diagnostics that runs without a GPU: backtraces and their
// names, and loading CUPTI (every failure says what was tried and what to do).

#include "diagnostics/backtrace.hpp"

#include <graphstep/capture_scope.hpp>

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

namespace gd = graphstep::diagnostics;

// Exported (the test binaries link with -rdynamic), so that its name can be looked up the way
// a user's frame is.
__attribute__((noinline)) std::vector<std::uintptr_t> diagnostics_test_user_function() {
  std::vector<std::uintptr_t> frames = graphstep::detail::current_backtrace(16);
  asm volatile("" ::: "memory");  // keeps the call from becoming a tail call
  return frames;
}

namespace {

bool contains(std::string const& text, std::string const& part) {
  return text.find(part) != std::string::npos;
}

// Sets an environment variable for one scope.
class scoped_environment {
 public:
  scoped_environment(char const* name, char const* value) : name_{name} {
    if (char const* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~scoped_environment() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  scoped_environment(scoped_environment const&) = delete;
  scoped_environment& operator=(scoped_environment const&) = delete;

 private:
  char const* name_;
  std::optional<std::string> old_;
};

std::string cuda_runtime_path() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void const*>(&cudaRuntimeGetVersion), &info) == 0 ||
      info.dli_fname == nullptr) {
    return {};
  }
  return info.dli_fname;
}

}  // namespace

TEST(capture_diagnostics, a_backtrace_names_the_users_function) {
  std::vector<std::uintptr_t> const addresses = diagnostics_test_user_function();
  ASSERT_GE(addresses.size(), 2U);
  std::vector<gd::frame> frames;
  for (std::uintptr_t address : addresses) frames.push_back(graphstep::detail::symbolize(address));
  auto const user = gd::first_user_frame(frames);
  ASSERT_TRUE(user);
  EXPECT_EQ(frames[*user].symbol, "diagnostics_test_user_function()");
  EXPECT_TRUE(contains(frames[*user].module, "graphstep_unit_tests")) << frames[*user].module;
  EXPECT_GT(frames[*user].module_offset, 0U);
  // Outer frames are GoogleTest's and the C runtime's, also looked up.
  EXPECT_TRUE(std::any_of(frames.begin(), frames.end(), [](gd::frame const& f) {
    return contains(f.symbol, "testing::");
  }));
}

TEST(capture_diagnostics, an_unknown_address_has_no_name) {
  gd::frame const f = graphstep::detail::symbolize(0x10);
  EXPECT_TRUE(f.module.empty());
  EXPECT_TRUE(f.symbol.empty());
  EXPECT_TRUE(gd::is_library_frame(f));
}

TEST(capture_diagnostics, a_missing_cupti_says_what_was_tried_and_what_to_do) {
  scoped_environment const env{"GRAPHSTEP_CUPTI_LIBRARY", "/nonexistent/libcupti.so.13"};
  std::string const reason = graphstep::capture_diagnostics_unavailable_reason();
  EXPECT_TRUE(contains(reason, "need CUPTI")) << reason;
  EXPECT_TRUE(contains(reason, "/nonexistent/libcupti.so.13")) << reason;
  EXPECT_TRUE(contains(reason, "GRAPHSTEP_CUPTI_LIBRARY")) << reason;
}

TEST(capture_diagnostics, a_library_without_the_callback_api_is_refused) {
  std::string const runtime = cuda_runtime_path();
  ASSERT_FALSE(runtime.empty());
  scoped_environment const env{"GRAPHSTEP_CUPTI_LIBRARY", runtime.c_str()};
  std::string const reason = graphstep::capture_diagnostics_unavailable_reason();
  EXPECT_TRUE(contains(reason, "lacks the CUPTI callback API")) << reason;
  EXPECT_TRUE(contains(reason, runtime)) << reason;
}

TEST(capture_diagnostics, cupti_is_found_beside_the_cuda_runtime) {
  std::string const runtime = cuda_runtime_path();
  std::string const directory = runtime.substr(0, runtime.rfind('/'));
  std::string const beside =
      directory + "/libcupti.so." + std::to_string(CUDART_VERSION / 1000);
  if (::access(beside.c_str(), R_OK) != 0) {
    GTEST_SKIP() << "this toolkit keeps CUPTI elsewhere than " << beside;
  }
  if (std::getenv("GRAPHSTEP_CUPTI_LIBRARY") != nullptr) {
    GTEST_SKIP() << "GRAPHSTEP_CUPTI_LIBRARY is set: the search is not used";
  }
  EXPECT_EQ(graphstep::capture_diagnostics_unavailable_reason(), "");
}
