#pragma once

/// @file graphs/graph.hpp
/// @brief `graph`: captured work (a `cudaGraph_t`) and the pool memory its nodes use; not yet
/// executable. `graph::instantiate` makes a `graph_exec` of it.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/event.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/memory/pool_capture.hpp>
#include <memory>
#include <optional>
#include <string>

namespace graphstep::graphs {

class graph_exec;

namespace detail {
struct graph_state;
}  // namespace detail

/// @brief Node counts of a captured graph, by node type.
struct graph_node_counts {
  std::size_t kernel{};
  std::size_t memcpy{};
  std::size_t memset{};
  std::size_t host{};
  std::size_t child_graph{};
  std::size_t empty{};
  std::size_t event_record{};
  std::size_t event_wait{};
  std::size_t memory_alloc{};
  std::size_t memory_free{};
  std::size_t conditional{};
  std::size_t other{};
  std::size_t total{};
};

/// @brief What a graph is known by: its name in messages, the device it was captured on and a
/// process-unique id (the pool tags the graph's memory with it).
struct graph_identity {
  std::string name{"graph"};
  int device{-1};
  std::uint64_t id{};
  /// CUDA's id of the capture sequence it came from (`cudaStreamGetCaptureInfo`); 0 when it was
  /// built with the graph API or the id is not known.
  std::uint64_t capture_sequence{};
  /// The graph holds work that waits for other processes (a collective of several ranks:
  /// graphstep::nccl notes it in the capture, `capture_ref::note_waits_for_other_processes`), so
  /// one process cannot replay it alone (diagnostics::verify_replay refuses it).
  bool waits_for_other_processes{};
};

/// @brief A process-unique graph id (never 0, which means "no graph" to the pool).
[[nodiscard]] std::uint64_t next_graph_id() noexcept;

/// @brief Captured CUDA work (`cudaGraph_t`), and the pool memory its nodes read and write.
///
/// A graph comes from a capture (`capture_scope`, `capture()`) or adopts a `cudaGraph_t` built
/// with CUDA's graph API. It cannot be launched: `instantiate()` makes the executable
/// (`graph_exec`), which shares the captured work and its memory, so the graph may die first.
/// A default-constructed or moved-from graph is empty. Move-only.
class graph {
 public:
  /// @brief An empty graph, to be assigned a captured one.
  graph() noexcept;
  graph(graph&& other) noexcept;
  graph& operator=(graph&& other) noexcept;
  graph(graph const&) = delete;
  graph& operator=(graph const&) = delete;
  ~graph();

  /// @brief Takes ownership of `handle`; `memory` (from `memory::pool_capture::commit`, or
  /// empty) keeps the pool memory the nodes use for as long as the graph or an executable of it
  /// lives.
  /// @throws usage_error (null handle)
  [[nodiscard]] static graph adopt(cudaGraph_t handle, graph_identity identity,
                                   memory::pool_lease memory = {});
  /// @brief As `adopt` above, for a graph whose last node records `completion` (an external
  /// event record node that depends on every other node, as a capture by `capture_scope` puts
  /// there): each replay's end, which `graph_exec::synchronize` waits for and the pool orders
  /// other streams' replays by, so that a replay enqueues nothing after its launch (otherwise
  /// it records an event of its own right after). `node_counts` leaves that node out.
  /// @throws usage_error (null handle, `completion` moved from)
  [[nodiscard]] static graph adopt(cudaGraph_t handle, graph_identity identity,
                                   memory::pool_lease memory, cuda::event completion);

  /// @brief True for a default-constructed or moved-from graph.
  [[nodiscard]] bool empty() const noexcept { return state_ == nullptr; }
  /// @brief Lets go of the captured work and leaves the graph empty, to capture into again.
  /// Executables made from it keep the work and its memory.
  /// @post `empty()`
  void reset() noexcept { state_.reset(); }
  /// @brief Makes the executable graph (`cudaGraphInstantiateWithFlags`).
  /// @throws usage_error (empty graph), capture_error (CUDA refused the instantiation)
  [[nodiscard]] graph_exec instantiate(unsigned long long flags = 0) const;
  /// @brief Counts the captured nodes by type (graphstep's own completion record, the last node
  /// of a capture, left out).
  /// @throws usage_error (empty graph), cuda_error
  [[nodiscard]] graph_node_counts node_counts() const;
  /// @brief Writes the graph in Graphviz DOT form (`cudaGraphDebugDotPrint`), for debugging.
  /// @param verbose include kernel parameters, memcpy sizes and other details
  /// @throws usage_error (empty graph, empty path), cuda_error (e.g. the file cannot be written)
  void write_dot(std::string const& path, bool verbose = false) const;
  /// @brief The name given to the capture ("graph" unless set), used in error messages.
  /// @throws usage_error (empty graph)
  [[nodiscard]] graph_identity const& identity() const;
  [[nodiscard]] std::string const& name() const { return identity().name; }
  [[nodiscard]] std::uint64_t id() const { return identity().id; }
  [[nodiscard]] cudaGraph_t get() const noexcept;

 private:
  friend class graph_exec;  // a replay orders itself by the pool memory the graph holds
  explicit graph(std::shared_ptr<detail::graph_state const> state) noexcept;
  static graph adopted(cudaGraph_t handle, graph_identity identity, memory::pool_lease memory,
                       std::optional<cuda::event> completion);
  std::shared_ptr<detail::graph_state const> state_;
};

}  // namespace graphstep::graphs
