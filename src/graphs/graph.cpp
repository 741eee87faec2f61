#include <atomic>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/graph.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "cuda/detail/relaxed_capture_mode.hpp"
#include "graphs/detail/graph_state.hpp"

namespace graphstep::graphs {

std::uint64_t next_graph_id() noexcept {
  static std::atomic<std::uint64_t> counter{0};
  return ++counter;  // 0 is reserved for "no graph"
}

void detail::graph_deleter::operator()(pointer handle) const noexcept {
  GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaGraphDestroy(handle));
}

graph::graph() noexcept = default;
graph::graph(graph&& other) noexcept = default;
graph& graph::operator=(graph&& other) noexcept = default;
graph::~graph() = default;
graph::graph(std::shared_ptr<detail::graph_state const> state) noexcept
    : state_{std::move(state)} {}

detail::graph_state::~graph_state() {
  // Not a device-wide wait, and Relaxed: a capture under way on any thread stays intact.
  if (completion.get() == nullptr) return;
  cuda::detail::relaxed_capture_mode const relaxed;
  GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaEventSynchronize(completion.get()));
}

graph graph::adopted(cudaGraph_t handle, graph_identity identity, memory::pool_lease memory,
                     std::optional<cuda::event> completion) {
  GRAPHSTEP_EXPECTS(handle != nullptr,
                    "graph::adopt: the cudaGraph_t of '" + identity.name + "' is null");
  std::unique_ptr<cudaGraph_t, detail::graph_deleter> owned{handle};
  if (identity.id == 0) identity.id = next_graph_id();
  auto state = std::make_shared<detail::graph_state>();
  if (completion) {
    state->completion = std::move(*completion);
    state->completion_in_graph = true;
  } else {
    // Recorded by each replay after its launch: on the graph's device, as its streams are.
    std::optional<cuda::device_guard> on_device;
    if (identity.device >= 0) on_device.emplace(identity.device);
    state->completion = cuda::event{};
  }
  state->identity = std::move(identity);
  state->memory = std::move(memory);
  state->handle = std::move(owned);
  return graph{std::move(state)};
}

graph graph::adopt(cudaGraph_t handle, graph_identity identity, memory::pool_lease memory) {
  return adopted(handle, std::move(identity), std::move(memory), std::nullopt);
}

graph graph::adopt(cudaGraph_t handle, graph_identity identity, memory::pool_lease memory,
                   cuda::event completion) {
  GRAPHSTEP_EXPECTS(completion.get() != nullptr,
                    "graph::adopt: the completion event of '" + identity.name +
                        "' was moved from; give the event the graph's last node records");
  return adopted(handle, std::move(identity), std::move(memory), std::move(completion));
}

graph_identity const& graph::identity() const {
  GRAPHSTEP_EXPECTS(state_ != nullptr,
                    "this graph is empty: it was never captured, its capture failed, or it was "
                    "moved from. Capture into it before using it");
  return state_->identity;
}

cudaGraph_t graph::get() const noexcept {
  return state_ ? state_->handle.get() : nullptr;
}

graph_exec graph::instantiate(unsigned long long flags) const {
  std::string const& what = name();  // checks that there is something to instantiate
  cudaGraphExec_t exec = nullptr;
  cudaError_t status = cudaSuccess;
  {
    // Touches no capturing stream, but is "potentially unsafe" for the capture modes: Relaxed,
    // so another thread's Global capture stays intact (docs/validation.md).
    cuda::detail::relaxed_capture_mode const relaxed;
    status = cudaGraphInstantiateWithFlags(&exec, get(), flags);
  }
  if (status != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    std::string why;
    if (status == cudaErrorInvalidValue) {
      graph_node_counts const counts = node_counts();
      // "If graph contains any allocation or free nodes, there can be at most one executable
      // graph in existence for that graph at a time" (cudaGraphInstantiate).
      if (counts.memory_alloc + counts.memory_free > 0) {
        why =
            ": it holds memory allocation or free nodes (cudaMallocAsync or cudaFreeAsync in "
            "the capture), and CUDA allows such a graph only one executable at a time: "
            "destroy the other executable of it first (graph_exec::reset), or allocate from a "
            "graphstep pool instead";
      }
    }
    throw capture_error{status, "graph '" + what +
                                    "': instantiation failed: " + cudaGetErrorName(status) + " (" +
                                    cudaGetErrorString(status) + ")" + why};
  }
  return graph_exec{exec, graph{state_}};
}

graph_node_counts graph::node_counts() const {
  static_cast<void>(identity());  // checks that there is something to count
  std::size_t count = 0;
  GRAPHSTEP_CUDA_TRY(cudaGraphGetNodes(get(), nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  if (count > 0) GRAPHSTEP_CUDA_TRY(cudaGraphGetNodes(get(), nodes.data(), &count));
  graph_node_counts counts;
  counts.total = count;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    GRAPHSTEP_CUDA_TRY(cudaGraphNodeGetType(node, &type));
    switch (type) {
      case cudaGraphNodeTypeKernel: ++counts.kernel; break;
      case cudaGraphNodeTypeMemcpy: ++counts.memcpy; break;
      case cudaGraphNodeTypeMemset: ++counts.memset; break;
      case cudaGraphNodeTypeHost: ++counts.host; break;
      case cudaGraphNodeTypeGraph: ++counts.child_graph; break;
      case cudaGraphNodeTypeEmpty: ++counts.empty; break;
      case cudaGraphNodeTypeEventRecord: ++counts.event_record; break;
      case cudaGraphNodeTypeWaitEvent: ++counts.event_wait; break;
      case cudaGraphNodeTypeMemAlloc: ++counts.memory_alloc; break;
      case cudaGraphNodeTypeMemFree: ++counts.memory_free; break;
      case cudaGraphNodeTypeConditional: ++counts.conditional; break;
      default: ++counts.other; break;
    }
  }
  if (state_->completion_in_graph && counts.event_record > 0) {
    --counts.event_record;  // graphstep's own, not the captured work's
    --counts.total;
  }
  return counts;
}

void graph::write_dot(std::string const& path, bool verbose) const {
  static_cast<void>(identity());
  GRAPHSTEP_EXPECTS(!path.empty(), "write_dot needs a file path");
  GRAPHSTEP_CUDA_TRY(cudaGraphDebugDotPrint(
      get(), path.c_str(), verbose ? static_cast<unsigned>(cudaGraphDebugDotFlagsVerbose) : 0U));
}

}  // namespace graphstep::graphs
