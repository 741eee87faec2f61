#pragma once

/// @file graphs/conditional.hpp
/// @brief Device-decided branches and loops inside a captured graph (CUDA conditional nodes):
/// the GPU, not the host, decides whether part of a step runs, with no host synchronization.
///
/// Both calls are made inside a capture on the capturing stream. The body is captured into the
/// conditional node's own graph, on a stream of its own; it may hold kernels, memsets, memcpys
/// and nested conditionals (CUDA's rule for conditional bodies), so it must not allocate from the
/// pool or fork other streams. Needs CUDA 12.4 or newer at run time.

#include <functional>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/graphs/conditional_support.hpp>

namespace graphstep::graphs {

/// @brief Runs `body` at this point of the captured step only when `*flag` (device memory) is
/// non-zero when the step reaches it.
/// @throws usage_error (not capturing, null flag or body), cuda_error (cudaErrorNotSupported
/// from a driver older than 12.4, with `conditional_nodes_unsupported_reason`)
void capture_if(cuda::stream_view stream, unsigned int const* flag,
                std::function<void(cuda::stream_view)> const& body);

/// @brief Runs `body` while `*flag` is non-zero: the flag is read before the first iteration
/// and after each; the body must eventually clear it (e.g. a counter kernel).
/// @throws as capture_if
void capture_while(cuda::stream_view stream, unsigned int const* flag,
                   std::function<void(cuda::stream_view)> const& body);

}  // namespace graphstep::graphs
