#pragma once

// A function of the CUDA runtime or cuBLASLt that the simulated device does not model
// (sim/src/runtime_refusals.cpp, cublaslt_refusals.cpp; sim/docs/*_coverage.md): the program
// links, and the call fails by name. NCCL's refusals answer through nccl_world.hpp, which keeps
// the message for ncclGetLastError.

#include <cublas_api.h>
#include <cuda_runtime_api.h>

namespace graphstep::sim::detail {
// Prints, once per function, "graphstep simulated device: <function> is <reason>: it returns
// <answer> (<coverage page> lists what the simulator implements)".
void announce_refusal(char const* function, char const* reason, char const* answer,
                      char const* coverage_page) noexcept;
// Announces and returns cudaErrorNotSupported, which cudaGetLastError then reports as for any
// failed call.
cudaError_t refuse(char const* function, char const* reason) noexcept;
// Announces and returns CUBLAS_STATUS_NOT_SUPPORTED.
cublasStatus_t refuse_cublaslt(char const* function, char const* reason) noexcept;
}  // namespace graphstep::sim::detail
