#pragma once

// A runtime function the simulated device does not model (sim/src/runtime_refusals.cpp,
// sim/docs/runtime_coverage.md): the program links, and the call fails by name.

#include <cuda_runtime_api.h>

namespace graphstep::sim::detail {
// Prints, once per function, "graphstep simulated device: <function> is <reason>: ..." and
// returns cudaErrorNotSupported, which cudaGetLastError then reports as for any failed call.
cudaError_t refuse(char const* function, char const* reason) noexcept;
}  // namespace graphstep::sim::detail
