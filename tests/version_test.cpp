// The version: written once (version.hpp), read alike by the macros, the library, CMake's package
// and CHANGELOG.md's newest release.

#include <gtest/gtest.h>

#include <fstream>
#include <graphstep/version.hpp>
#include <string>

namespace gs = graphstep;

namespace {

std::string header_version() {
  return std::to_string(GRAPHSTEP_VERSION_MAJOR) + "." + std::to_string(GRAPHSTEP_VERSION_MINOR) +
         "." + std::to_string(GRAPHSTEP_VERSION_PATCH);
}

}  // namespace

TEST(version, the_number_orders_major_minor_and_patch) {
  EXPECT_EQ(GRAPHSTEP_VERSION, GRAPHSTEP_VERSION_MAJOR * 10000 + GRAPHSTEP_VERSION_MINOR * 100 +
                                   GRAPHSTEP_VERSION_PATCH);
  // Two digits each for minor and patch: 0.100.0 would read as 1.0.0.
  EXPECT_LT(GRAPHSTEP_VERSION_MINOR, 100);
  EXPECT_LT(GRAPHSTEP_VERSION_PATCH, 100);
}

TEST(version, the_library_reports_the_version_of_its_headers) {
  EXPECT_EQ(gs::version(), GRAPHSTEP_VERSION);
  EXPECT_EQ(std::string{gs::version_string()}, header_version());
}

TEST(version, cmake_reads_the_same_version) {
  EXPECT_EQ(std::string{GRAPHSTEP_PROJECT_VERSION}, header_version());
}

TEST(version, the_changelog_s_newest_release_is_this_version) {
  std::ifstream changelog{std::string{GRAPHSTEP_TEST_SOURCE_DIR} + "/../CHANGELOG.md"};
  ASSERT_TRUE(changelog.is_open());
  std::string line;
  std::string newest;
  while (std::getline(changelog, line)) {
    if (line.rfind("## ", 0) == 0 && line != "## Unreleased") {
      newest = line;
      break;
    }
  }
  // "## 0.1.0 — 2026-12-02": the version, then the date of the release.
  EXPECT_EQ(newest.rfind("## " + header_version() + " \u2014 ", 0), 0U)
      << "CHANGELOG.md's newest release heading is \"" << newest << "\"; version.hpp says "
      << header_version() << ": a release adds its heading, a version bump its release";
}
