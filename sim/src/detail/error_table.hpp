#pragma once

// The name and text of every error code driver_types.h declares, for cudaGetErrorName and
// cudaGetErrorString (sim/tests/error_names_gpu_test.cpp reads the header and checks each).

#include <driver_types.h>

namespace graphstep::sim::detail {

struct error_entry {
  cudaError_t code;
  char const* name;
  char const* text;
};

/// The entry for `code`, or null for a value driver_types.h does not declare.
[[nodiscard]] error_entry const* find_error(cudaError_t code) noexcept;

}  // namespace graphstep::sim::detail
