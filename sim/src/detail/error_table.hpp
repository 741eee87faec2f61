#pragma once

// The name and text of every error code driver_types.h declares, for cudaGetErrorName and
// cudaGetErrorString (sim/tests/error_names_gpu_test.cpp reads the header and checks each).

#include <driver_types.h>

#include <cstring>

namespace graphstep::sim::detail {

struct error_entry {
  int code;
  char const* name;
  char const* text;
};

/// The integer a cudaError_t holds, read without loading it as the enumeration (whose values
/// outside those declared a sanitizer flags).
[[nodiscard]] inline int error_code_of(cudaError_t const& error) noexcept {
  int code = 0;
  std::memcpy(&code, &error, sizeof code);
  return code;
}

/// The entry for `code`, or null for a value driver_types.h does not declare.
[[nodiscard]] error_entry const* find_error(int code) noexcept;

}  // namespace graphstep::sim::detail
