#pragma once

// A check that fails because of a library defect an open issue names: it runs, and while it
// fails the test reports itself skipped with the issue's title and the first failure; once the
// defect is fixed the check passes and so does the test, with nothing to remove first.

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <string>

namespace graphstep::testing {

// Runs `checks`; if any of them fails, the calling test is skipped (GTEST_SKIP) with `issue`.
// Call it last in the test: the test goes on after it either way.
template <typename Checks>
void expect_failure_until_fixed(char const* issue, Checks checks) {
  ::testing::TestPartResultArray failures;
  {
    ::testing::ScopedFakeTestPartResultReporter const intercept{
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures};
    checks();
  }
  if (failures.size() == 0) return;
  GTEST_SKIP() << "expected to fail until \"" << issue
               << "\" is resolved; first failure: " << failures.GetTestPartResult(0).message();
}

/// The open issue that names the memory pool's defects.
inline constexpr char const* memory_pool_issue =
    "Memory pool: every promise proven on the CPU, through the code the GPU runs";

}  // namespace graphstep::testing
