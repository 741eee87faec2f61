#pragma once

/// @file diagnostics/verify_replay.hpp
/// @brief `verify_replay`: does replaying a captured step compute what running the step
/// eagerly computes now, and if not, which node is the first to differ and why.
///
/// A debugging tool, not for the training loop: it runs the step several times and copies the
/// watched memory to the host between runs.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/diagnostics/replay_divergence.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph.hpp>
#include <graphstep/tensor.hpp>
#include <string>
#include <utility>
#include <vector>

namespace graphstep::memory {
class memory_pool;
}

namespace graphstep::diagnostics {

/// @brief The elements of `span` (a typed `cuda::device_buffer`'s `view()`, say) as a watched
/// region named `name`: a one-dimensional `tensor_view`, read as its dtype (a uint8 span as raw
/// bytes: a struct of your own, say). A view with a name already (a parameter buffer's tensor)
/// is watched as it is.
/// @throws usage_error (what `tensor_view` refuses: a null or misaligned pointer)
[[nodiscard]] tensor_view watch(std::string name, device_span const& span);

/// @brief How `verify_replay` captures the step again.
struct verify_options {
  /// For the fresh capture of the step: the options the graph was captured with (mode, name,
  /// `refuse_legacy_stream`).
  graphs::capture_options capture{};
  /// The pool the graph's capture allocated from, if any: the fresh capture allocates from it.
  memory::memory_pool* pool{nullptr};
  /// Find the first node whose effect differs when the results differ (runs the graph and the
  /// fresh capture once per node).
  bool bisect{true};
  /// Called on the stream before every run and at the end, after the watched regions are put
  /// back: restores state the step changes that no region holds, e.g. a
  /// `train::capture_safe_rng`'s `restore` of a `save` taken before the call.
  std::function<void(cuda::stream_view)> before_each_run;
};

/// @brief Runs `step(stream)` eagerly and replays `graph`, each from the same contents of the
/// watched regions, and compares the regions. A watched region is a named `tensor_view` of
/// device memory the step reads or writes at the same address in every run: its parameters,
/// optimizer state, inputs and outputs (static buffers, `step_input`s, buffers of your own);
/// its elements are compared as its dtype. Memory the step allocates anew each run cannot be
/// compared and is not watched. When they differ, it also captures the step
/// again and compares that capture with `graph`: node by node (kernel, grid, block, shared
/// memory, each parameter's bytes, memsets), the eager step against a replay of the fresh
/// capture (work outside the capture), and, with `options.bisect`, both graphs one prefix of
/// nodes at a time from the same contents (CUDA's cudaGraphNodeSetEnabled), to name the first
/// node after which the watched memory differs.
///
/// The step is called once eagerly when the results agree; when they differ, once more
/// eagerly (a step that computes differently from the same watched memory is reported as such)
/// and twice under capture (parameters two captures disagree on, like a struct's padding, are
/// not compared). It must issue the same work each time for the same host state. Every run starts
/// from the watched regions' contents at the call (and `options.before_each_run`), and they are put
/// back when it returns; other memory the step writes is written by every run, so state it reads
/// and changes must be watched or restored by `before_each_run`. The device is synchronized between
/// runs (cudaDeviceSynchronize: work the step leaves on other streams counts as the eager step's),
/// so no other thread may be capturing meanwhile. Memory the graph allocates and leaves allocated
/// (a CUDA graph allocation, `cudaMallocAsync` in the capture without its free) is freed after
/// each run, the last included: do not free a pointer to it afterwards.
/// @throws usage_error (an empty graph; a legacy or capturing stream; a region that is null,
/// empty, unnamed, overlapping another or named twice; no region; a graph holding
/// NCCL collectives, which need their peers: verify each rank's step with its collectives
/// replaced, or compare ranks' results instead), cuda_error, and whatever `step` throws
[[nodiscard]] replay_report verify_replay(cuda::stream_view stream,
                                          std::function<void(cuda::stream_view)> const& step,
                                          graphs::graph const& graph,
                                          std::vector<tensor_view> const& regions,
                                          verify_options const& options = {});

}  // namespace graphstep::diagnostics
