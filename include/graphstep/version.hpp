#pragma once

/// @file
/// @brief graphstep's version: the one place it is written (CMake reads it from here too).
///
/// Numbered as cuDNN and NCCL number theirs: GRAPHSTEP_VERSION is
/// major * 10000 + minor * 100 + patch, so that code can compare it with `>=`. Before 1.0, a new
/// minor version may break code written against the one before (CHANGELOG.md shows each break
/// with the code to write instead) and a patch version never does; the CMake package accepts a
/// request for the same major and minor version only.

#define GRAPHSTEP_VERSION_MAJOR 0
#define GRAPHSTEP_VERSION_MINOR 1
#define GRAPHSTEP_VERSION_PATCH 0
#define GRAPHSTEP_VERSION \
  (GRAPHSTEP_VERSION_MAJOR * 10000 + GRAPHSTEP_VERSION_MINOR * 100 + GRAPHSTEP_VERSION_PATCH)

namespace graphstep {

/// The version of the graphstep library the program linked, as GRAPHSTEP_VERSION numbers it.
/// Differs from GRAPHSTEP_VERSION, the version of the headers it was compiled with, when a
/// program built against one release runs with another's shared library.
[[nodiscard]] int version() noexcept;

/// The same, as text: "0.1.0".
[[nodiscard]] char const* version_string() noexcept;

}  // namespace graphstep
