#pragma once

/// @file schedule/graph_cache.hpp
/// @brief One graph per capture shape, captured on first use into one shared pool, replayed on
/// every later request it serves.
///
/// A step whose shapes vary (batch size, sequence length, number of packed sequences) cannot be
/// one graph. `graph_cache` maps each request's size to a capture size (`capture_sizes`, or
/// `capture_shapes` for several dimensions in `shape_graph_cache`), runs the first requests of a
/// capture size eagerly (warm-up), then captures its graph and replays it from then on. Every
/// graph is captured into one pool, largest first when pre-captured, so their memory is about
/// that of the largest. A memory budget evicts the least recently used graphs.
///
/// With `graph_instantiation::update_template`, capture sizes that share one topology (the same
/// kernels with other arguments, grids or copy sizes) are captured but not instantiated: one
/// executable graph, the template, is switched between them with `cudaGraphExecUpdate`, so
/// instantiation time and executable memory grow with the number of topologies instead of
/// capture sizes. A capture size whose update CUDA refuses is instantiated on its own, counted in
/// `statistics().update_refusals` and listed by `refused_sizes()`.
///
/// The decisions (warm-up, capture, eviction, update or instantiation) are made by
/// `graph_cache_core`, which is tested apart from CUDA; this class applies them to graphs.
///
/// Every graph of a cache runs on the caller's stream, one at a time (they share a pool).
/// Not thread-safe: one caller at a time.

#include <functional>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/graphs/lifecycle_options.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <graphstep/schedule/capture_shapes.hpp>
#include <graphstep/schedule/capture_sizes.hpp>
#include <graphstep/schedule/detail/graph_cache_core.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace graphstep::schedule {

/// @brief How the executables of a cache's capture sizes are made.
enum class graph_instantiation {
  each_size,        ///< every size's graph captured and instantiated on its own
  update_template,  ///< one instantiated template, switched between capture sizes by update
};

/// @brief How a graph cache works.
struct graph_cache_options {
  /// Warm-up runs and capture of each capture size; its graphs are named
  /// "<lifecycle.capture.name> size <size>".
  graphs::lifecycle_options lifecycle{};
  /// Total memory charged to cached graphs, each the pool memory it pins when it is captured
  /// (`memory_pool::bytes_pinned_by`; shared memory is charged to every graph sharing it); 0:
  /// no budget. In `update_template` mode the template capture size is never evicted and not
  /// charged, so the budget counts the other capture sizes only.
  std::size_t budget_bytes{0};
  graph_instantiation instantiation{graph_instantiation::each_size};
};

/// @brief A graph cache over the capture sizes of `Policy` (`capture_sizes` or
/// `capture_shapes`).
template <typename Policy>
class basic_graph_cache {
 public:
  using key_type = typename Policy::key_type;
  using choice_type = typename Policy::choice_type;
  /// @brief The step for one capture size: issues everything to `stream`, sized for `size`.
  using step_function = std::function<void(key_type size, cuda::stream_view stream)>;

  /// @throws usage_error (no step, negative warm-up)
  basic_graph_cache(Policy policy, step_function step, memory::memory_pool& pool,
                    graph_cache_options options = {});
  /// @brief In template mode, waits for each executable's latest replay first: the shared
  /// executable may still run work whose memory belongs to another capture size's graph.
  ~basic_graph_cache();
  basic_graph_cache(basic_graph_cache const&) = delete;
  basic_graph_cache& operator=(basic_graph_cache const&) = delete;

  /// @brief Serves one request of `size`: eagerly while its capture size warms up, then by replay.
  /// Returns the capture size and the padding used.
  /// @throws usage_error (size outside the capture sizes), capture_error, and what the step throws
  choice_type run(key_type const& size, cuda::stream_view stream);

  /// @brief Warms up and captures every capture size now, largest first.
  /// @throws capture_error, and what the step throws
  void precapture(cuda::stream_view stream);

  [[nodiscard]] cache_statistics const& statistics() const noexcept { return core_.statistics(); }
  [[nodiscard]] bool is_captured(key_type const& size) const { return core_.is_captured(size); }
  [[nodiscard]] std::size_t captured_count() const { return core_.captured_count(); }
  /// @brief Memory charged to a capture size's graph (0 when it is not captured).
  [[nodiscard]] std::size_t bytes_of(key_type const& size) const { return core_.bytes_of(size); }
  /// @brief Memory charged to every captured size's graph.
  [[nodiscard]] std::map<key_type, std::size_t> bytes_by_size() const {
    return core_.bytes_by_size();
  }
  /// @brief Capture sizes whose update CUDA refused (template mode): they have executables of their
  /// own.
  [[nodiscard]] std::set<key_type> const& refused_sizes() const noexcept {
    return core_.refused_sizes();
  }
  [[nodiscard]] Policy const& policy() const noexcept { return policy_; }

 private:
  static detail::cache_actions<cuda::stream_view> actions(basic_graph_cache& cache);
  std::size_t capture_slot(std::size_t slot, bool instantiate, cuda::stream_view stream);
  [[nodiscard]] graphs::graph const& work_of(std::size_t slot) const;

  Policy policy_;
  step_function step_;
  memory::memory_pool& pool_;
  graph_cache_options options_;
  // By slot (the capture size's position in the policy's list), empty where none is held: a request
  // finds its graph without a search.
  std::vector<graphs::graph_exec> executables_;
  // Template mode: the captured work of capture sizes that run through another's executable.
  std::vector<graphs::graph> captured_;
  detail::graph_cache_core<key_type, cuda::stream_view> core_;
};

extern template class basic_graph_cache<capture_sizes>;
extern template class basic_graph_cache<capture_shapes>;

/// @brief Capture sizes of one number (batch size, token count).
using graph_cache = basic_graph_cache<capture_sizes>;
/// @brief Capture sizes of batch size x sequence length x packed sequences.
using shape_graph_cache = basic_graph_cache<capture_shapes>;

}  // namespace graphstep::schedule
