#pragma once

// A graph captured with the plain CUDA runtime calls, for tests of ops that must depend on the op
// alone and not on graphstep's own capture (graphs/capture_scope.hpp).

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <graphstep/cuda/check.hpp>
#include <utility>
#include <vector>

namespace graphstep::testing {

/// @brief What `work` enqueues on `stream`, captured (thread-local unless `mode` says otherwise)
/// and instantiated; owned until destruction. A `work` that throws ends the capture and
/// discards the graph before the exception goes on.
class captured_graph {
 public:
  template <typename Work>
  captured_graph(cudaStream_t stream, Work&& work)
      : captured_graph(stream, cudaStreamCaptureModeThreadLocal, std::forward<Work>(work)) {}

  template <typename Work>
  captured_graph(cudaStream_t stream, cudaStreamCaptureMode mode, Work&& work) {
    GRAPHSTEP_CUDA_TRY(cudaStreamBeginCapture(stream, mode));
    try {
      work();
    } catch (...) {
      cudaGraph_t broken = nullptr;
      static_cast<void>(cudaStreamEndCapture(stream, &broken));
      if (broken != nullptr) static_cast<void>(cudaGraphDestroy(broken));
      throw;
    }
    GRAPHSTEP_CUDA_TRY(cudaStreamEndCapture(stream, &graph_));
    GRAPHSTEP_CUDA_TRY(cudaGraphInstantiate(&exec_, graph_, 0));
  }
  ~captured_graph() {
    if (exec_ != nullptr) GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaGraphExecDestroy(exec_));
    if (graph_ != nullptr) GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaGraphDestroy(graph_));
  }
  captured_graph(captured_graph const&) = delete;
  captured_graph& operator=(captured_graph const&) = delete;
  captured_graph(captured_graph&&) = delete;
  captured_graph& operator=(captured_graph&&) = delete;

  /// Launches the graph on `stream` and waits for it.
  void replay(cudaStream_t stream) const {
    GRAPHSTEP_CUDA_TRY(cudaGraphLaunch(exec_, stream));
    GRAPHSTEP_CUDA_TRY(cudaStreamSynchronize(stream));
  }

  /// The captured graph, still owned here (for inspecting its nodes).
  [[nodiscard]] cudaGraph_t graph() const { return graph_; }

  /// The kernel nodes the capture recorded: how many launches the op made.
  [[nodiscard]] std::size_t kernel_nodes() const {
    std::size_t count = 0;
    GRAPHSTEP_CUDA_TRY(cudaGraphGetNodes(graph_, nullptr, &count));
    std::vector<cudaGraphNode_t> nodes(count);
    GRAPHSTEP_CUDA_TRY(cudaGraphGetNodes(graph_, nodes.data(), &count));
    return static_cast<std::size_t>(std::count_if(nodes.begin(), nodes.end(), [](auto node) {
      cudaGraphNodeType type{};
      GRAPHSTEP_CUDA_TRY(cudaGraphNodeGetType(node, &type));
      return type == cudaGraphNodeTypeKernel;
    }));
  }

 private:
  cudaGraph_t graph_{};
  cudaGraphExec_t exec_{};
};

}  // namespace graphstep::testing
