#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <exception>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device_buffer.hpp>
#include <graphstep/diagnostics/verify_replay.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/log.hpp>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "detail/logger.hpp"
#include "diagnostics/detail/replay_divergence.hpp"

namespace graphstep::diagnostics {

namespace {

using contents = std::vector<std::vector<unsigned char>>;  // one host copy per region

// More parameters than any kernel takes (CUDA's limit is 32,764 bytes of them).
constexpr std::size_t parameter_limit = 32764;

node_kind kind_of(cudaGraphNodeType type) noexcept {
  switch (type) {
    case cudaGraphNodeTypeKernel: return node_kind::kernel;
    case cudaGraphNodeTypeMemset: return node_kind::memset;
    case cudaGraphNodeTypeMemcpy: return node_kind::memcpy;
    case cudaGraphNodeTypeEmpty: return node_kind::empty;
    case cudaGraphNodeTypeEventRecord: return node_kind::event_record;
    case cudaGraphNodeTypeWaitEvent: return node_kind::event_wait;
    case cudaGraphNodeTypeMemAlloc: return node_kind::memory_allocation;
    case cudaGraphNodeTypeMemFree: return node_kind::memory_free;
    case cudaGraphNodeTypeHost: return node_kind::host_function;
    case cudaGraphNodeTypeGraph: return node_kind::child_graph;
    case cudaGraphNodeTypeConditional: return node_kind::conditional;
    default: return node_kind::other;
  }
}

// A query CUDA may refuse (a library kernel's parameters, a name it does not know): the
// refusal is an answer here, so it must not linger as the thread's last error.
bool answered(cudaError_t status) noexcept {
  if (status == cudaSuccess) return true;
  static_cast<void>(cudaGetLastError());
  return false;
}

void describe_kernel(cudaGraphNode_t node, node_description& out) {
  cudaKernelNodeParams params{};
  if (!answered(cudaGraphKernelNodeGetParams(node, &params))) return;
  out.function = reinterpret_cast<std::uintptr_t>(params.func);
  out.grid = {params.gridDim.x, params.gridDim.y, params.gridDim.z};
  out.block = {params.blockDim.x, params.blockDim.y, params.blockDim.z};
  out.shared_bytes = params.sharedMemBytes;
  char const* name = nullptr;
  if (answered(cudaFuncGetName(&name, params.func)) && name != nullptr) out.kernel_name = name;
  for (std::size_t i = 0; i < parameter_limit; ++i) {
    std::size_t offset = 0;
    std::size_t size = 0;
    cudaError_t const status = cudaFuncGetParamInfo(params.func, i, &offset, &size);
    if (!answered(status)) {
      // cudaErrorInvalidValue past the last parameter; anything else: the layout is unknown.
      if (status == cudaErrorInvalidValue) break;
      return;
    }
    // Arguments packed in `extra` rather than kernelParams cannot be read one by one.
    if (params.kernelParams == nullptr) return;
    auto const* first = static_cast<unsigned char const*>(params.kernelParams[i]);
    out.arguments.emplace_back(first, first + size);
  }
  out.parameters_known = true;
}

node_description describe(cudaGraphNode_t node) {
  node_description out;
  cudaGraphNodeType type{};
  GRAPHSTEP_CUDA_TRY(cudaGraphNodeGetType(node, &type));
  out.kind = kind_of(type);
  if (out.kind == node_kind::kernel) describe_kernel(node, out);
  if (out.kind == node_kind::memset) {
    cudaMemsetParams params{};
    GRAPHSTEP_CUDA_TRY(cudaGraphMemsetNodeGetParams(node, &params));
    out.destination = reinterpret_cast<std::uintptr_t>(params.dst);
    out.value = params.value;
    out.element_size = params.elementSize;
    out.width = params.width;
    out.height = params.height;
    out.pitch = params.pitch;
  }
  return out;
}

// A graph's nodes in an order they can run one after another, and what each does.
struct ordered_graph {
  std::vector<cudaGraphNode_t> nodes;
  std::vector<node_description> descriptions;
  // What its allocation nodes make and no free node of it frees: each run leaves it live.
  std::vector<void*> unfreed;
};

std::vector<void*> unfreed_allocations(ordered_graph const& g) {
  std::vector<void*> made;
  std::set<void*> freed;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    if (g.descriptions[i].kind == node_kind::memory_allocation) {
      cudaMemAllocNodeParams params{};
      GRAPHSTEP_CUDA_TRY(cudaGraphMemAllocNodeGetParams(g.nodes[i], &params));
      made.push_back(params.dptr);
    }
    if (g.descriptions[i].kind == node_kind::memory_free) {
      void* address = nullptr;
      GRAPHSTEP_CUDA_TRY(cudaGraphMemFreeNodeGetParams(g.nodes[i], &address));
      freed.insert(address);
    }
  }
  made.erase(std::remove_if(made.begin(), made.end(),
                            [&](void* address) { return freed.count(address) != 0; }),
             made.end());
  return made;
}

ordered_graph order_nodes(cudaGraph_t graph) {
  std::size_t count = 0;
  GRAPHSTEP_CUDA_TRY(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> listed(count);
  if (count > 0) GRAPHSTEP_CUDA_TRY(cudaGraphGetNodes(graph, listed.data(), &count));
  std::unordered_map<cudaGraphNode_t, std::size_t> index;
  for (std::size_t i = 0; i < listed.size(); ++i) index[listed[i]] = i;
  std::vector<std::vector<std::size_t>> dependencies(listed.size());
  for (std::size_t i = 0; i < listed.size(); ++i) {
    std::size_t n = 0;
    GRAPHSTEP_CUDA_TRY(cudaGraphNodeGetDependencies(listed[i], nullptr, nullptr, &n));
    std::vector<cudaGraphNode_t> found(n);
    if (n > 0)
      GRAPHSTEP_CUDA_TRY(cudaGraphNodeGetDependencies(listed[i], found.data(), nullptr, &n));
    for (cudaGraphNode_t d : found) dependencies[i].push_back(index.at(d));
  }
  std::vector<std::size_t> const order = detail::execution_order(dependencies);
  std::vector<std::size_t> position(order.size());
  for (std::size_t p = 0; p < order.size(); ++p) position[order[p]] = p;
  ordered_graph out;
  for (std::size_t i : order) {
    out.nodes.push_back(listed[i]);
    out.descriptions.push_back(describe(listed[i]));
    for (std::size_t d : dependencies[i])
      out.descriptions.back().dependencies.push_back(position[d]);
  }
  out.unfreed = unfreed_allocations(out);
  return out;
}

// verify_replay runs a graph several times, maybe over an allocation the caller's own replay
// left live: cudaGraphInstantiateFlagAutoFreeOnLaunch "configures a graph containing memory
// allocation nodes to automatically free any unfreed memory allocations before the graph is
// relaunched" (cudaGraphInstantiateWithFlags), where a launch without it would fail
// (cudaGraphLaunch).
constexpr unsigned long long instantiation_flags = cudaGraphInstantiateFlagAutoFreeOnLaunch;

// One run of an executable of `g`. What it leaves allocated is freed after it: no graph that
// verify_replay destroys keeps live memory ("Graph destruction does not automatically free any
// live graph-allocated memory", CUDA Programming Guide), and the caller's graph has none left
// when verify_replay returns.
void run_and_release(graphs::graph_exec& exec, ordered_graph const& g, cuda::stream_view stream) {
  exec.replay(stream);
  for (void* address : g.unfreed) GRAPHSTEP_CUDA_TRY(cudaFreeAsync(address, stream.get()));
}

void check_regions(std::vector<tensor_view> const& regions) {
  GRAPHSTEP_EXPECTS(!regions.empty(),
                    "verify_replay needs at least one watched region: the device memory the "
                    "step writes (its outputs, parameters, optimizer state)");
  std::set<std::string> names;
  std::vector<std::pair<std::uintptr_t, std::uintptr_t>> spans;
  for (tensor_view const& r : regions) {
    std::string const what = "the watched region \"" + r.name() + "\"";
    GRAPHSTEP_EXPECTS(!r.name().empty(), "the watched region " + describe(r) +
                                             " has no name; every watched region needs one for "
                                             "the report");
    GRAPHSTEP_EXPECTS(names.insert(r.name()).second, what + " is named twice: name each once");
    graphstep::detail::expect_typed_buffer(what, r.data(), r.type());
    GRAPHSTEP_EXPECTS(r.count() > 0, what + " is empty: give it a shape with elements");
    auto const begin = reinterpret_cast<std::uintptr_t>(r.data());
    spans.emplace_back(begin, begin + r.bytes());
  }
  std::sort(spans.begin(), spans.end());
  for (std::size_t i = 1; i < spans.size(); ++i) {
    GRAPHSTEP_EXPECTS(spans[i].first >= spans[i - 1].second,
                      "two watched regions overlap: restoring one would overwrite the other; "
                      "watch each byte once");
  }
}

class region_copies {
 public:
  region_copies(cuda::stream_view stream, std::vector<tensor_view> const& regions,
                std::function<void(cuda::stream_view)> const& before_each_run)
      : stream_{stream}, regions_{regions}, before_each_run_{before_each_run} {}

  [[nodiscard]] contents read() const {
    contents out;
    for (auto const& r : regions_) {
      out.emplace_back(r.bytes());
      GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(out.back().data(), r.data(), r.bytes(), cudaMemcpyDefault,
                                         stream_.get()));
    }
    stream_.synchronize();
    return out;
  }

  // Puts the watched regions back to `from`, and whatever else the caller restores.
  void restore(contents const& from) const {
    for (std::size_t i = 0; i < regions_.size(); ++i) {
      GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(regions_[i].data(), from[i].data(), regions_[i].bytes(),
                                         cudaMemcpyDefault, stream_.get()));
    }
    if (before_each_run_) before_each_run_(stream_);
    stream_.synchronize();
  }

  [[nodiscard]] std::vector<region_difference> compare(contents const& before,
                                                       contents const& first,
                                                       contents const& second) const {
    std::vector<region_difference> out;
    for (std::size_t i = 0; i < regions_.size(); ++i) {
      auto const& r = regions_[i];
      if (auto d = detail::compare_region(r.name(), r.type(), before[i].data(), first[i].data(),
                                          second[i].data(), r.bytes())) {
        out.push_back(std::move(*d));
      }
    }
    return out;
  }

 private:
  cuda::stream_view stream_;
  std::vector<tensor_view> const& regions_;
  std::function<void(cuda::stream_view)> const& before_each_run_;
};

// Points the kernel that sets a conditional node's handle at `flag` (an unsigned int in device
// memory), keeping its handle.
void set_condition_flag(cudaGraphExec_t exec, ordered_graph const& g, std::size_t setter,
                        void const* flag) {
  cudaKernelNodeParams params{};
  GRAPHSTEP_CUDA_TRY(cudaGraphKernelNodeGetParams(g.nodes[setter], &params));
  std::vector<unsigned char> handle = g.descriptions[setter].arguments[0];
  std::array<void*, 2> arguments{handle.data(), &flag};
  params.kernelParams = arguments.data();
  params.extra = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaGraphExecKernelNodeSetParams(exec, g.nodes[setter], &params));
}

// Lets the first `enabled` nodes (in execution order) run, and every node CUDA cannot disable.
// A conditional node after them is switched off through its setter, which reads `zero` instead
// of its flag; the setter itself always runs, since the handle keeps its value between launches.
void enable_prefix(cudaGraphExec_t exec, ordered_graph const& g, std::size_t enabled,
                   void const* zero) {
  std::vector<bool> setter(g.nodes.size(), false);
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    auto const s = detail::condition_setter(g.descriptions, i);
    if (!s) continue;
    setter[*s] = true;
    void const* flag = nullptr;
    if (i < enabled) {
      std::memcpy(&flag, g.descriptions[*s].arguments[1].data(), sizeof flag);
    } else {
      flag = zero;
    }
    set_condition_flag(exec, g, *s, flag);
  }
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    if (!detail::can_disable(g.descriptions[i].kind) || setter[i]) continue;
    GRAPHSTEP_CUDA_TRY(cudaGraphNodeSetEnabled(exec, g.nodes[i], i < enabled ? 1U : 0U));
  }
}

struct graph_deleter {
  void operator()(cudaGraph_t graph) const noexcept {
    GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaGraphDestroy(graph));
  }
};
struct exec_deleter {
  void operator()(cudaGraphExec_t exec) const noexcept {
    GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaGraphExecDestroy(exec));
  }
};

// Runs a copy of `source` that holds only its first `kept` nodes (in execution order).
void run_prefix_graph(cudaGraph_t source, ordered_graph const& g, std::size_t kept,
                      cuda::stream_view stream) {
  cudaGraph_t raw = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaGraphClone(&raw, source));
  std::unique_ptr<std::remove_pointer_t<cudaGraph_t>, graph_deleter> const copy{raw};
  for (std::size_t i = g.nodes.size(); i-- > kept;) {
    cudaGraphNode_t cloned = nullptr;
    GRAPHSTEP_CUDA_TRY(cudaGraphNodeFindInClone(&cloned, g.nodes[i], copy.get()));
    GRAPHSTEP_CUDA_TRY(cudaGraphDestroyNode(cloned));
  }
  cudaGraphExec_t exec = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaGraphInstantiate(&exec, copy.get(), 0));
  std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, exec_deleter> const owned{exec};
  GRAPHSTEP_CUDA_TRY(cudaGraphLaunch(exec, stream.get()));
  stream.synchronize();
}

// Runs `graph` with its first k nodes (in execution order), by the method chosen.
std::function<void(std::size_t)> prefix_runner(detail::bisection_method method,
                                               graphs::graph const& graph, ordered_graph const& g,
                                               cuda::stream_view stream, void const* zero) {
  if (method == detail::bisection_method::disable_nodes) {
    auto exec = std::make_shared<graphs::graph_exec>(graph.instantiate(instantiation_flags));
    return [exec, &g, stream, zero](std::size_t k) {
      enable_prefix(exec->get(), g, k, zero);
      run_and_release(*exec, g, stream);
    };
  }
  return [&graph, &g, stream](std::size_t k) { run_prefix_graph(graph.get(), g, k, stream); };
}

// The value of the flag `address` (an unsigned int in device memory).
unsigned read_flag(std::uintptr_t address, cuda::stream_view stream) {
  unsigned value = 0;
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(&value, reinterpret_cast<void const*>(address), sizeof value,
                                     cudaMemcpyDefault, stream.get()));
  stream.synchronize();
  return value;
}

void bisect(replay_report& report, cuda::stream_view stream, region_copies const& copies,
            contents const& before, graphs::graph const& graph, graphs::graph const& fresh,
            ordered_graph const& then, ordered_graph const& now, std::size_t paired) {
  if (paired == 0) {
    report.bisection_skipped = "the graphs have no node in common to compare";
    return;
  }
  detail::bisection_plan const plan = detail::plan_bisection(then.descriptions, now.descriptions);
  if (plan.method == detail::bisection_method::refused) {
    report.bisection_skipped = plan.refusal;
    return;
  }
  // An unsigned int 0 for switching conditional nodes off, cleared on the stream that runs them.
  cuda::device_buffer const zero{sizeof(unsigned), stream};
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(zero.data(), 0, zero.size(), stream.get()));
  auto const run_then = prefix_runner(plan.method, graph, then, stream, zero.data());
  auto const run_now = prefix_runner(plan.method, fresh, now, stream, zero.data());
  // The flags of capture_if/capture_while nodes, read just before each graph reaches them.
  std::optional<unsigned> then_flag;
  std::optional<unsigned> now_flag;
  for (std::size_t k = 1; k <= paired; ++k) {
    auto const run = [&](std::function<void(std::size_t)> const& runner, ordered_graph const& g,
                         std::optional<unsigned>& flag) {
      copies.restore(before);
      runner(k);
      GRAPHSTEP_CUDA_TRY(cudaDeviceSynchronize());
      contents out = copies.read();
      flag.reset();
      if (auto const address = detail::condition_flag(g.descriptions, k))
        flag = read_flag(*address, stream);
      return out;
    };
    std::optional<unsigned> const then_reached = then_flag;
    std::optional<unsigned> const now_reached = now_flag;
    contents const a = run(run_then, then, then_flag);
    contents const b = run(run_now, now, now_flag);
    if (auto regions = copies.compare(before, a, b); !regions.empty()) {
      divergent_node node;
      node.position = k - 1;
      node.at_capture = then.descriptions[k - 1];
      node.now = now.descriptions[k - 1];
      node.changes = detail::compare_launches(node.at_capture, node.now);
      node.regions = std::move(regions);
      node.condition_at_capture = then_reached;
      node.condition_now = now_reached;
      report.first_divergent = std::move(node);
      return;
    }
  }
}

// Captures what `step` issues now, as the graph was captured.
void capture_step(graphs::graph& into, cuda::stream_view stream,
                  std::function<void(cuda::stream_view)> const& step,
                  verify_options const& options) {
  auto const body = [&] { step(stream); };
  if (options.pool != nullptr) {
    graphs::capture(into, stream, *options.pool, body, options.capture);
  } else {
    graphs::capture(into, stream, body, options.capture);
  }
}

// The eager step against the replay and, when they differ, against a fresh capture.
void compare_runs(replay_report& report, cuda::stream_view stream,
                  std::function<void(cuda::stream_view)> const& step, graphs::graph const& graph,
                  region_copies const& copies, contents const& before, ordered_graph const& then,
                  verify_options const& options) {
  if (options.before_each_run) options.before_each_run(stream);
  step(stream);
  GRAPHSTEP_CUDA_TRY(cudaDeviceSynchronize());
  contents const eager = copies.read();
  copies.restore(before);
  {
    graphs::graph_exec exec = graph.instantiate(instantiation_flags);
    run_and_release(exec, then, stream);
    GRAPHSTEP_CUDA_TRY(cudaDeviceSynchronize());
  }
  report.differences = copies.compare(before, eager, copies.read());
  if (report.identical()) return;

  // Whatever follows compares runs from the watched memory: it means something only if the
  // eager step computes the same from it twice.
  copies.restore(before);
  step(stream);
  GRAPHSTEP_CUDA_TRY(cudaDeviceSynchronize());
  report.eager_unreproducible = copies.compare(before, eager, copies.read());
  if (!report.eager_unreproducible.empty()) return;

  // Capture the step as it is now, to compare with what was captured then; and once more, to
  // tell parameters that differ in every capture (padding, addresses placed anew) from the rest.
  copies.restore(before);
  graphs::graph fresh;
  graphs::graph again;
  try {
    capture_step(fresh, stream, step, options);
    capture_step(again, stream, step, options);
  } catch (error const& e) {
    report.capture_failure = e.what();
    return;
  }
  // Work the capture did not record (the legacy stream beside a relaxed capture) ran at once.
  GRAPHSTEP_CUDA_TRY(cudaDeviceSynchronize());
  copies.restore(before);
  ordered_graph now = order_nodes(fresh.get());
  {
    graphs::graph_exec exec = fresh.instantiate(instantiation_flags);
    run_and_release(exec, now, stream);
    GRAPHSTEP_CUDA_TRY(cudaDeviceSynchronize());
  }
  report.outside_capture = copies.compare(before, eager, copies.read());

  ordered_graph const repeated = order_nodes(again.get());
  if (!detail::first_unpaired(now.descriptions, repeated.descriptions)) {
    for (std::size_t i = 0; i < now.descriptions.size(); ++i) {
      report.unstable_arguments +=
          detail::mark_unstable_arguments(now.descriptions[i], repeated.descriptions[i]);
    }
  }
  report.nodes_now = now.nodes.size();
  report.first_unpaired = detail::first_unpaired(then.descriptions, now.descriptions);
  std::size_t const paired = report.first_unpaired.value_or(then.nodes.size());
  for (std::size_t i = 0; i < paired; ++i) {
    auto changes = detail::compare_launches(then.descriptions[i], now.descriptions[i]);
    if (!changes.empty()) {
      report.changed.push_back({i, then.descriptions[i], now.descriptions[i], std::move(changes)});
    }
  }
  if (options.bisect) {
    bisect(report, stream, copies, before, graph, fresh, then, now, paired);
  } else {
    report.bisection_skipped = "turned off (verify_options::bisect)";
  }
}

// The watched regions end as they began, also when a run fails; a failure to restore them is
// reported, not thrown over the error on its way out.
void restore_after_failure(region_copies const& copies, contents const& before) noexcept {
  try {
    copies.restore(before);
  } catch (std::exception const& e) {
    graphstep::detail::log_lazily(log_level::error, [&] {
      return std::string{"verify_replay could not restore the watched regions: "} + e.what();
    });
  }
}

}  // namespace

tensor_view watch(std::string name, device_span const& span) {
  return {span.data(),
          tensor_spec{std::move(name), {static_cast<std::int64_t>(span.count())}, span.type()}};
}

replay_report verify_replay(cuda::stream_view stream,
                            std::function<void(cuda::stream_view)> const& step,
                            graphs::graph const& graph, std::vector<tensor_view> const& regions,
                            verify_options const& options) {
  GRAPHSTEP_EXPECTS(!graph.empty(), "verify_replay needs a captured graph; this one is empty");
  GRAPHSTEP_EXPECTS(static_cast<bool>(step), "verify_replay needs the step to run eagerly");
  GRAPHSTEP_EXPECTS(!stream.is_legacy_default(),
                    "verify_replay runs the step on the stream it was captured from: pass that "
                    "stream, not the legacy default stream");
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    "verify_replay runs the step eagerly: call it outside any capture");
  check_regions(regions);
  ordered_graph const then = order_nodes(graph.get());
  for (auto const& d : then.descriptions) {
    GRAPHSTEP_EXPECTS(!detail::is_collective_kernel(d.kernel_name),
                      "graph \"" + graph.name() + "\" holds the NCCL kernel " + d.kernel_name +
                          ", which waits for its peers: verify_replay runs one rank's step "
                          "alone; verify a step without its collectives on each rank, or compare "
                          "the ranks' results");
  }
  GRAPHSTEP_EXPECTS(!graph.identity().waits_for_other_processes,
                    "graph \"" + graph.name() +
                        "\" holds an NCCL collective of several ranks, which waits for its "
                        "peers: verify_replay runs one rank's step alone; verify a step without "
                        "its collectives on each rank, or compare the ranks' results");

  region_copies const copies{stream, regions, options.before_each_run};
  contents const before = copies.read();
  replay_report report;
  report.nodes_at_capture = then.nodes.size();
  try {
    compare_runs(report, stream, step, graph, copies, before, then, options);
  } catch (...) {
    restore_after_failure(copies, before);
    throw;
  }
  copies.restore(before);
  return report;
}

}  // namespace graphstep::diagnostics
