#pragma once

// The captures in which graphstep::nccl recorded a collective of several ranks. Replaying such
// a graph waits for the peers, so verify_replay, which runs one rank's step alone, refuses it
// before anything runs. The graph cannot tell by itself: the runtime API does not describe a
// library's kernel nodes (cudaGraphKernelNodeGetParams fails for a kernel of another library's
// module, cudaErrorNotSupported on the simulated device), so NCCL's kernels go unnamed.

#include <cstdint>

namespace graphstep::diagnostics::detail {

/// @brief Notes that the capture `capture_sequence` (`cudaStreamGetCaptureInfo`'s id; 0, an
/// unknown capture, is ignored) recorded a collective of several ranks.
void note_captured_collective(std::uint64_t capture_sequence);

/// @brief Whether a collective of several ranks was noted for that capture.
[[nodiscard]] bool captured_a_collective(std::uint64_t capture_sequence);

}  // namespace graphstep::diagnostics::detail
