// The host side of the capture diagnostics that runs without a GPU: loading CUPTI (every
// failure says what was tried and what to do).

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <graphstep/graphs/capture_scope.hpp>
#include <optional>
#include <string>
#include <vector>

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

// A shared library that is certainly not CUPTI: the C library (the CUDA runtime is one too, but
// on the simulated device it is part of the test binary, which cannot be loaded).
std::string c_library_path() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void const*>(&::dlopen), &info) == 0 || info.dli_fname == nullptr) {
    return {};
  }
  return info.dli_fname;
}

}  // namespace

TEST(capture_diagnostics, a_missing_cupti_says_what_was_tried_and_what_to_do) {
  scoped_environment const env{"GRAPHSTEP_CUPTI_LIBRARY", "/nonexistent/libcupti.so.13"};
  std::string const reason = graphstep::graphs::capture_diagnostics_unavailable_reason();
  EXPECT_TRUE(contains(reason, "need CUPTI")) << reason;
  EXPECT_TRUE(contains(reason, "/nonexistent/libcupti.so.13")) << reason;
  EXPECT_TRUE(contains(reason, "GRAPHSTEP_CUPTI_LIBRARY")) << reason;
}

TEST(capture_diagnostics, a_library_without_the_callback_api_is_refused) {
  std::string const library = c_library_path();
  ASSERT_FALSE(library.empty());
  scoped_environment const env{"GRAPHSTEP_CUPTI_LIBRARY", library.c_str()};
  std::string const reason = graphstep::graphs::capture_diagnostics_unavailable_reason();
  EXPECT_TRUE(contains(reason, "lacks the CUPTI callback API")) << reason;
  EXPECT_TRUE(contains(reason, library)) << reason;
}

TEST(capture_diagnostics, cupti_is_found_beside_the_cuda_runtime) {
  std::string const runtime = cuda_runtime_path();
  std::string const directory = runtime.substr(0, runtime.rfind('/'));
  std::string const beside = directory + "/libcupti.so." + std::to_string(CUDART_VERSION / 1000);
  if (::access(beside.c_str(), R_OK) != 0) {
    GTEST_SKIP() << "this toolkit keeps CUPTI elsewhere than " << beside;
  }
  if (std::getenv("GRAPHSTEP_CUPTI_LIBRARY") != nullptr) {
    GTEST_SKIP() << "GRAPHSTEP_CUPTI_LIBRARY is set: the search is not used";
  }
  EXPECT_EQ(graphstep::graphs::capture_diagnostics_unavailable_reason(), "");
}
