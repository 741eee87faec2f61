// Every error code the toolkit's driver_types.h declares has its own name from cudaGetErrorName
// and a text from cudaGetErrorString, as the CUDA runtime gives them: an error the simulated
// device returns is never "unrecognized error code" in a message. The header is read as it is
// installed, so a toolkit that adds codes shows them here.

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "sim_test.hpp"

namespace {

// (name, value) of each enumerator of enum cudaError: lines "    cudaErrorX = N," (the one
// written ", cudaErrorApiFailureBase = 10000", deprecated, is not an error a call returns).
std::vector<std::pair<std::string, int>> declared_errors() {
  std::ifstream header{GRAPHSTEP_DRIVER_TYPES_HEADER};
  std::stringstream text;
  text << header.rdbuf();
  std::string const all = text.str();
  std::size_t const begin = all.find("enum __device_builtin__ cudaError");
  std::size_t const end = all.find("};", begin);
  std::string const block = all.substr(begin, end - begin);
  std::regex const enumerator{R"(\n\s+(cuda(?:Success|Error\w+))\s*=\s*(\d+))"};
  std::vector<std::pair<std::string, int>> found;
  for (std::sregex_iterator it{block.begin(), block.end(), enumerator}, stop; it != stop; ++it) {
    found.emplace_back((*it)[1].str(), std::stoi((*it)[2].str()));
  }
  return found;
}

TEST(error_names, every_declared_error_has_its_name_and_a_text) {
  auto const errors = declared_errors();
  ASSERT_GT(errors.size(), 100U) << "driver_types.h was not read: " GRAPHSTEP_DRIVER_TYPES_HEADER;
  for (auto const& [name, value] : errors) {
    auto const code = static_cast<cudaError_t>(value);
    EXPECT_EQ(std::string{cudaGetErrorName(code)}, name) << value;
    std::string const text = cudaGetErrorString(code);
    EXPECT_FALSE(text.empty()) << name;
    EXPECT_NE(text, "unrecognized error code") << name;
  }
}

// The simulator's texts are the runtime's: the toolkit's libcudart answers cudaGetErrorString
// without a driver, so it is asked here, loaded beside the simulator.
TEST(error_names, every_text_is_the_cuda_runtimes) {
  if (!sim_testing::simulated_device) GTEST_SKIP() << "this is the CUDA runtime itself";
  void* const runtime = dlopen(GRAPHSTEP_CUDART_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (runtime == nullptr) GTEST_SKIP() << "cannot load " GRAPHSTEP_CUDART_LIBRARY ": " << dlerror();
  using text_of = char const* (*)(cudaError_t);
  auto const runtimes_text = reinterpret_cast<text_of>(dlsym(runtime, "cudaGetErrorString"));
  ASSERT_NE(runtimes_text, nullptr);
  for (auto const& [name, value] : declared_errors()) {
    auto const code = static_cast<cudaError_t>(value);
    EXPECT_STREQ(cudaGetErrorString(code), runtimes_text(code)) << name;
  }
  dlclose(runtime);
}

// 9999 lies within the enumeration's range (its largest value is 10000) and names no error.
TEST(error_names, a_value_no_error_has_is_unrecognized) {
  EXPECT_STREQ(cudaGetErrorName(static_cast<cudaError_t>(9999)), "unrecognized error code");
  EXPECT_STREQ(cudaGetErrorString(static_cast<cudaError_t>(9999)), "unrecognized error code");
}

}  // namespace
