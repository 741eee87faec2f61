#pragma once

/// @file graphs/capture_scope.hpp
/// @brief `capture_scope` and `capture()`: record the work issued to a stream into a `graph`.

#include <cuda_runtime_api.h>

#include <graphstep/cuda/event.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/graphs/capture_trace.hpp>
#include <graphstep/graphs/capture_mode.hpp>
#include <graphstep/graphs/graph.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/memory/pool_capture.hpp>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace graphstep::memory {
class memory_pool;
}
namespace graphstep::graphs::detail {
class capture_recorder;
struct failed_call;
struct capture_facts;
}

namespace graphstep::graphs {

namespace detail {
class legacy_stream_guard;
}

/// @brief How a capture is made.
struct capture_options {
  capture_mode mode{capture_mode::this_thread};
  /// Named in every error message, and kept by the graph.
  std::string name{"graph"};
  /// For a capture into a `graph_exec`: passed to cudaGraphInstantiateWithFlags (e.g.
  /// cudaGraphInstantiateFlagUseNodePriority).
  unsigned long long instantiate_flags{0};
  /// For a capture into a `graph_exec`: load it onto the device right after instantiation, so
  /// the first replay is not slow.
  bool upload{true};
  /// Capture diagnostics, for debugging: record every CUDA runtime and driver API call made
  /// while capturing (through CUPTI, loaded on demand). A failed capture's `capture_error` then
  /// names the call that broke it, its thread and the frame of your code that made it; work
  /// issued to the legacy default stream and copies of pageable host memory are reported as
  /// warnings (on stderr, and in `capture_scope::diagnosis()`). Slows every CUDA call while
  /// capturing. Setting GRAPHSTEP_CAPTURE_DIAGNOSTICS=1 turns it on for every capture.
  bool diagnose{false};
  /// Work issued to the legacy default stream while capturing — a `cudaMemset` or `cudaMemcpy`
  /// without a stream, a kernel launched without one — is not recorded: beside a non-blocking
  /// stream CUDA runs it once, at once, and every replay lacks it, silently. On by default:
  /// a blocking stream of graphstep's joins the capture while it runs, so CUDA refuses such
  /// work (the call returns cudaErrorStreamCaptureImplicit) and the capture ends with a
  /// `capture_error` saying so. This refuses every use of the device's legacy stream meanwhile,
  /// on any thread: turn it off when another thread must use the legacy stream during the capture.
  bool refuse_legacy_stream{true};
  /// A `memory::pool_backing::pinned_host` pool for the page-locked host blocks the step copies
  /// through (PyTorch's caching host allocator in a capture): its allocations and frees on the
  /// captured streams serve this graph, and every block the capture allocated or freed stays
  /// the graph's while it lives (no other graph and no later request of this capture takes
  /// it), so a replay's copy never reads a block recycled for other data. Not owned; null for
  /// none.
  memory::memory_pool* host_pool{nullptr};
};

/// @brief Why capture diagnostics cannot run in this process (CUPTI not found, or not
/// loadable), or "" when they can. `GRAPHSTEP_CUPTI_LIBRARY` names the library to load.
[[nodiscard]] std::string capture_diagnostics_unavailable_reason();

/// @brief The capture a `capture_scope` is making of a stream, seen from code that issues work
/// to it (graphstep::nccl): a fact noted here travels with the graph the capture makes
/// (`graph_identity::waits_for_other_processes`), and it tells whether graphstep discarded the
/// capture. Only this capture's facts: another capture, on another thread or stream, has its
/// own. Empty when no `capture_scope` captures the stream (it is not capturing, or
/// cudaStreamBeginCapture was called directly). Copyable; what it refers to lives as long as
/// a copy does.
class capture_ref {
 public:
  /// @brief Refers to no capture.
  capture_ref() noexcept;
  /// @brief The capture `stream` is part of (the capturing stream, or one forked into it):
  /// CUDA's capture id (`cudaStreamGetCaptureInfo`) names it. Empty when `stream` is not
  /// captured by a `capture_scope`.
  [[nodiscard]] static capture_ref of(cuda::stream_view stream);
  /// @brief False for an empty reference.
  explicit operator bool() const noexcept { return facts_ != nullptr; }
  /// @brief Notes that the capture recorded work that waits for other processes: a collective
  /// of several ranks (graphstep::nccl notes each it captures). Replaying that graph in one
  /// process alone, as diagnostics::verify_replay does, would wait for peers that never come,
  /// so such checks refuse it. Does nothing on an empty reference.
  void note_waits_for_other_processes() const noexcept;
  /// @brief True once graphstep discarded the capture (its body threw, or ending or
  /// instantiating it failed): what was logged during it (the collectives a communicator
  /// recorded) was never part of a graph. False while it runs, once it made a graph, and for
  /// an empty reference.
  [[nodiscard]] bool abandoned() const noexcept;

 private:
  friend class capture_scope;
  explicit capture_ref(std::shared_ptr<detail::capture_facts> facts) noexcept;
  std::shared_ptr<detail::capture_facts> facts_;
};

/// @brief Records everything issued to `stream` — and to side streams forked from it — from
/// construction to `end()` or the end of the scope, into an empty target: a `graph_exec`
/// (instantiated, and uploaded unless told not to) or a `graph` (the captured work only, to
/// instantiate later or to update an executable with).
///
/// Allocations from the `memory_pool` given here, made on the capturing stream or its forks,
/// are served at addresses that stay fixed for the graph's life; the graph keeps that memory.
///
/// If the capture is invalidated (a synchronization, a cudaMalloc, a synchronous copy beside a
/// blocking stream's capture; beside graphstep's non-blocking streams CUDA runs such a copy at
/// once and reports nothing) `end()` throws `capture_error` naming the scope, the stream, the
/// CUDA reason and the fix; and the call that broke it, with the library call that made it
/// (cublasLtMatmul, ncclAllReduce…): on the simulated device always, on a GPU when capture
/// diagnostics are on (else the error says how to turn them on). The partial graph is discarded, the pool memory of the failed capture is returned,
/// the target stays empty and the stream is usable again. A call issued to a captured stream that
/// returned an error but left the capture valid (cudaMemcpyBatchAsync under CUDA 13, refused with
/// cudaErrorStreamCaptureUnsupported) ends it the same way, the `capture_error` naming the call:
/// on the simulated device always, on a GPU when capture diagnostics are on (only CUPTI's
/// callbacks see each call's result; docs/graphs.md). If the code inside the scope throws, the
/// destructor ends the capture the same way and the exception goes on; where a call had broken
/// the capture first (a library returning an error status for it), an error is logged naming
/// that call as `end()` would.
///
/// The destructor calls `end()` when it was not called and no exception is in flight, so it may
/// throw `capture_error`; call `end()` yourself, or use `capture()`, to keep that explicit.
class capture_scope {
 public:
  /// @brief Begins capturing `stream` into `target`, which must be empty.
  /// @throws usage_error (legacy default stream, a stream already capturing, a non-empty
  /// target), no_device_error, cuda_error
  capture_scope(graph_exec& target, cuda::stream_view stream, capture_options options = {});
  /// @brief As above, with allocations on the captured streams served from `pool`.
  capture_scope(graph_exec& target, cuda::stream_view stream, memory::memory_pool& pool,
                capture_options options = {});
  /// @brief Begins capturing `stream` into `target` (not instantiated), which must be empty.
  capture_scope(graph& target, cuda::stream_view stream, capture_options options = {});
  /// @brief As above, with allocations on the captured streams served from `pool`.
  capture_scope(graph& target, cuda::stream_view stream, memory::memory_pool& pool,
                capture_options options = {});
  // NOLINTNEXTLINE(bugprone-exception-escape): a failed capture throws here, as documented
  ~capture_scope() noexcept(false);
  capture_scope(capture_scope const&) = delete;
  capture_scope& operator=(capture_scope const&) = delete;
  capture_scope(capture_scope&&) = delete;
  capture_scope& operator=(capture_scope&&) = delete;

  /// @brief Brings `side` into the capture: work issued to it from now on is recorded and runs
  /// after what was issued to the capturing stream so far. It must be joined before the end.
  /// @throws usage_error (side is the capturing stream, already forked, or legacy default)
  void fork(cuda::stream_view side);
  /// @brief Makes the capturing stream wait for everything issued to `side`; `side` leaves
  /// the capture.
  /// @throws usage_error (side was not forked)
  void join(cuda::stream_view side);
  /// @brief Ends the capture and hands the target its graph. Outside `capture_mode::relaxed`
  /// it must be called on the thread that began the capture (CUDA's rule).
  /// @throws capture_error (invalidated capture, a failed call on a captured stream, unjoined
  /// side stream, instantiation failure),
  /// usage_error (called twice; called on another thread, which leaves the capture open)
  void end();
  /// @brief The capturing stream.
  [[nodiscard]] cuda::stream_view stream() const noexcept { return stream_; }
  /// @brief What capture diagnostics found, once the capture ended (empty when they were off).
  [[nodiscard]] std::optional<capture_diagnosis> const& diagnosis() const noexcept {
    return diagnosis_;
  }

 private:
  using target_type = std::variant<graph*, graph_exec*>;
  capture_scope(target_type target, cuda::stream_view stream, memory::memory_pool* pool,
                capture_options options);
  void begin(memory::memory_pool* pool);
  void start_diagnostics();
  // The report; where `breaking` is given and empty, the call the diagnosis found broke it.
  [[nodiscard]] std::string finish_diagnostics(
      int outcome, std::optional<detail::failed_call>* breaking = nullptr);
  void log_breaking_call() noexcept;  // the body threw: name the call that broke the capture
  void abandon() noexcept;
  void note_abandoned() noexcept;  // capture_ref::abandoned() from now on
  void deliver(graph captured);
  [[nodiscard]] std::optional<detail::failed_call> first_failed_call() const;
  // The call that invalidated the capture, where known before it ends (the simulated device).
  [[nodiscard]] std::optional<detail::failed_call> breaking_call() const;
  void warn_if_empty(cudaGraph_t captured, std::size_t own_nodes) const;
  [[nodiscard]] std::string describe() const;

  target_type target_;
  cuda::stream_view stream_;
  capture_options options_;
  int uncaught_at_start_;
  bool active_{false};
  unsigned long long capture_id_{0};  // CUDA's id of the capture, 0 before it begins
  graph_identity identity_;
  std::thread::id begin_thread_;
  memory::pool_capture pool_capture_;
  memory::pool_capture host_pool_capture_;  // capture_options::host_pool's side
  std::vector<cudaStream_t> forked_;
  std::vector<cudaStream_t> sides_;  // every stream forked into the capture, joined or not
  std::vector<cuda::event> fork_events_;
  std::unique_ptr<detail::capture_recorder> recorder_;
  std::unique_ptr<detail::legacy_stream_guard> legacy_guard_;  // refuse_legacy_stream
  std::optional<capture_diagnosis> diagnosis_;
  std::shared_ptr<detail::capture_facts> facts_;  // what capture_ref::of(stream) finds
};

/// @brief A graph or an executable graph: what a capture can fill.
template <typename Target>
inline constexpr bool is_capture_target_v =
    std::is_same_v<Target, graph> || std::is_same_v<Target, graph_exec>;

/// @brief Captures what `body()` issues to `stream` into `target` (a `graph_exec`, or a
/// `graph` left uninstantiated), allocating from `pool`. If `body` throws, the capture is
/// discarded, `target` stays empty and the exception goes on.
/// @throws capture_error, usage_error, and whatever `body` throws
template <typename Target, typename Body, typename = std::enable_if_t<is_capture_target_v<Target>>>
void capture(Target& target, cuda::stream_view stream, memory::memory_pool& pool, Body&& body,
             capture_options options = {}) {
  capture_scope scope{target, stream, pool, std::move(options)};
  std::forward<Body>(body)();
  scope.end();
}

/// @brief Captures what `body()` issues to `stream` into `target` (no pool).
template <typename Target, typename Body, typename = std::enable_if_t<is_capture_target_v<Target>>>
void capture(Target& target, cuda::stream_view stream, Body&& body, capture_options options = {}) {
  capture_scope scope{target, stream, std::move(options)};
  std::forward<Body>(body)();
  scope.end();
}

}  // namespace graphstep::graphs
