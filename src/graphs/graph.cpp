#include <atomic>
#include <graphstep/cuda/check.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/graph.hpp>
#include <utility>
#include <vector>

namespace graphstep::graphs {

namespace {
std::uint64_t next_graph_id() noexcept {
  static std::atomic<std::uint64_t> counter{0};
  return ++counter;  // 0 is reserved for "no graph"
}
}  // namespace

void detail::graph_deleter::operator()(pointer handle) const noexcept {
  GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaGraphDestroy(handle));
}

void detail::graph_exec_deleter::operator()(pointer handle) const noexcept {
  GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaGraphExecDestroy(handle));
}

graph::graph() noexcept : id_{next_graph_id()} {}

graph::graph(graph&& other) noexcept
    : id_{other.id_},
      name_{std::move(other.name_)},
      device_{other.device_},
      replays_{other.replays_},
      generation_{std::move(other.generation_)},
      memory_lease_{std::move(other.memory_lease_)},
      graph_{std::move(other.graph_)},
      exec_{std::move(other.exec_)} {
  other.id_ = next_graph_id();  // the moved-from graph is a fresh, empty one
  other.name_ = "graph";
  other.device_ = -1;
  other.replays_ = 0;
}

graph& graph::operator=(graph&& other) noexcept {
  if (this != &other) {
    release();
    id_ = other.id_;
    name_ = std::move(other.name_);
    device_ = other.device_;
    replays_ = other.replays_;
    generation_ = std::move(other.generation_);
    memory_lease_ = std::move(other.memory_lease_);
    graph_ = std::move(other.graph_);
    exec_ = std::move(other.exec_);
    other.id_ = next_graph_id();
    other.name_ = "graph";
    other.device_ = -1;
    other.replays_ = 0;
  }
  return *this;
}

graph::~graph() {
  release();
}

void graph::release() noexcept {
  exec_.reset();
  graph_.reset();
  if (memory_lease_ && replays_ > 0) {
    // A replay may still be running; its memory must not be handed out before it ends.
    GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaDeviceSynchronize());
  }
  memory_lease_.reset();
}

namespace {
void expect_captured(graph const& g) {
  GRAPHSTEP_EXPECTS(!g.empty(), "graph '" + g.name() +
                                    "' is empty: it was never captured, its capture failed, or "
                                    "it was moved from. Capture into it before using it");
}
}  // namespace

void graph::replay(cuda::stream_view stream) {
  expect_captured(*this);
  int current = -1;
  GRAPHSTEP_CUDA_TRY(cudaGetDevice(&current));
  GRAPHSTEP_EXPECTS(current == device_,
                    "graph '" + name_ + "' was captured on device " + std::to_string(device_) +
                        " but device " + std::to_string(current) +
                        " is current: make its device current (graphstep::cuda::device_guard) "
                        "before replaying it");
  GRAPHSTEP_CUDA_TRY(cudaGraphLaunch(exec_.get(), stream.value()));
  ++replays_;
  if (generation_) generation_->fetch_add(1, std::memory_order_relaxed);
}

output_guard graph::guard_output(std::string const& what) const {
  if (!generation_) generation_ = std::make_shared<std::atomic<std::uint64_t>>(replays_);
  return output_guard{generation_, "'" + what + "' of graph '" + name_ + "'"};
}

void graph::upload(cuda::stream_view stream) const {
  expect_captured(*this);
  GRAPHSTEP_CUDA_TRY(cudaGraphUpload(exec_.get(), stream.value()));
}

graph_node_counts graph::node_counts() const {
  expect_captured(*this);
  std::size_t count = 0;
  GRAPHSTEP_CUDA_TRY(cudaGraphGetNodes(graph_.get(), nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  if (count > 0) GRAPHSTEP_CUDA_TRY(cudaGraphGetNodes(graph_.get(), nodes.data(), &count));
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
  return counts;
}

void graph::instantiate(unsigned long long flags) {
  GRAPHSTEP_EXPECTS(captured(), "graph '" + name_ + "': nothing was captured to instantiate");
  GRAPHSTEP_EXPECTS(exec_ == nullptr, "graph '" + name_ + "' is already instantiated");
  cudaGraphExec_t exec = nullptr;
  cudaError_t const status = cudaGraphInstantiateWithFlags(&exec, graph_.get(), flags);
  if (status != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    throw capture_error{status, "graph '" + name_ +
                                    "': instantiation failed: " + cudaGetErrorName(status) + " (" +
                                    cudaGetErrorString(status) + ")"};
  }
  exec_.reset(exec);
}

bool graph::update_from(graph const& source) {
  expect_captured(*this);
  GRAPHSTEP_EXPECTS(source.captured(), "graph::update_from: graph '" + source.name() +
                                           "' holds no captured work to update from");
  cudaGraphExecUpdateResultInfo info{};
  cudaError_t const status = cudaGraphExecUpdate(exec_.get(), source.graph_.get(), &info);
  if (status != cudaSuccess) {
    static_cast<void>(cudaGetLastError());  // refused: the executable is unchanged
    return false;
  }
  return true;
}

void graph::write_dot(std::string const& path, bool verbose) const {
  expect_captured(*this);
  GRAPHSTEP_EXPECTS(!path.empty(), "write_dot needs a file path");
  GRAPHSTEP_CUDA_TRY(
      cudaGraphDebugDotPrint(graph_.get(), path.c_str(),
                             verbose ? static_cast<unsigned>(cudaGraphDebugDotFlagsVerbose) : 0U));
}

}  // namespace graphstep::graphs
