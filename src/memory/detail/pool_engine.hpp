#pragma once

/// @file memory/detail/pool_engine.hpp
/// @brief Every decision of the memory pool, in plain C++, against a small device interface.
///
/// `memory_pool` is this engine driven by CUDA: its `pool_device` maps memory, records and
/// queries events and makes streams wait. Tests drive the same engine with host addresses and
/// events that complete when the test says, so the pool's scenarios run on any machine.
/// graphstep_core: plain C++, includes no CUDA header.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <graphstep/memory/allocation_plan.hpp>
#include <graphstep/memory/pool_statistics.hpp>
#include <graphstep/memory/pool_timeline.hpp>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "memory/detail/block_allocator.hpp"
#include "memory/detail/timeline_recorder.hpp"

namespace graphstep::memory::detail {

/// @brief Opaque identity of a capture under way (the shell passes CUDA's capture id).
using capture_id = std::uint64_t;
/// @brief Identity of an event the engine asked the device to record; the engine never reuses
/// one.
using event_id = std::uint64_t;

/// @brief What the engine needs of a device. Called with the engine's lock held.
class pool_device {
 public:
  /// @brief New device memory: a fresh region, or `bytes` more at the end of the region at
  /// `base`.
  struct growth {
    std::uintptr_t base{};
    std::size_t bytes{};
    bool extends_region{};
  };
  enum class growth_status { grown, address_range_full, device_out_of_memory };

  pool_device() = default;
  virtual ~pool_device() = default;
  pool_device(pool_device const&) = delete;
  pool_device& operator=(pool_device const&) = delete;
  pool_device(pool_device&&) = delete;
  pool_device& operator=(pool_device&&) = delete;

  /// @brief Adds `bytes` (a multiple of the granularity) of memory.
  virtual growth_status grow(std::size_t bytes, growth& out) = 0;
  /// @brief Smallest unit of growth.
  [[nodiscard]] virtual std::size_t granularity() const = 0;
  /// @brief Address space held (equal to `mapped_bytes` where memory is not reserved ahead).
  [[nodiscard]] virtual std::size_t reserved_bytes() const = 0;
  /// @brief Memory actually backing the pool.
  [[nodiscard]] virtual std::size_t mapped_bytes() const = 0;

  /// @brief Gives back memory at the end of the region at `base`, `region_bytes` long, that no
  /// block uses: at most its last `free_bytes`, in whole units of growth (a mapping goes whole).
  /// Returns the bytes given back, taken from the region's end; all of `region_bytes` when the
  /// region goes.
  virtual std::size_t shrink(std::uintptr_t base, std::size_t region_bytes,
                             std::size_t free_bytes) = 0;

  /// @brief Records event `event` on `stream` after the work issued to it so far.
  virtual void record(event_id event, stream_id stream) = 0;
  /// @brief True once the work before `event` has completed.
  [[nodiscard]] virtual bool complete(event_id event) = 0;
  /// @brief Orders the work issued to `stream` from now on after `event`.
  virtual void wait(stream_id stream, event_id event) = 0;
  /// @brief Waits on the host until the work before `event` has completed.
  virtual void synchronize(event_id event) = 0;
  /// @brief The engine no longer needs `event`.
  virtual void forget(event_id event) noexcept = 0;

  /// @brief True once the launch that recorded `launch` has completed. `launch` names an event
  /// that a graph records itself as its last node (`pool_engine::after_replay`): the engine
  /// neither records nor forgets it. By default one of the device's own events.
  [[nodiscard]] virtual bool launch_complete(event_id launch) { return complete(launch); }
  /// @brief Orders the work issued to `stream` from now on after the launch that recorded
  /// `launch`. By default one of the device's own events.
  virtual void wait_for_launch(stream_id stream, event_id launch) { wait(stream, launch); }
};

/// @brief What the engine answered the latest replay of one graph with, so that the next one,
/// on the same stream, can tell without the engine's lock that it needs nothing
/// (`pool_engine::replay_is_settled`). One per graph and pool, kept by the shell's lease.
struct replay_memo {
  std::atomic<std::uint64_t> version{0};  ///< the engine's version after that replay; 0: none
  std::atomic<stream_id> stream{0};
  std::atomic<event_id> launch{0};
};

/// @brief The largest size the pool takes, in a request or an option: half the address space.
/// No device holds that much, so a larger size is a computation gone wrong (a negative number
/// converted to `std::size_t`), and rounding it up to a granularity would overflow.
inline constexpr std::size_t largest_pool_size = std::numeric_limits<std::size_t>::max() / 2;

/// @brief How the engine sizes its growth and what it may hold.
struct pool_engine_options {
  /// Of every block: a power of two, at most the device's granularity.
  std::size_t alignment{256};
  std::size_t growth_bytes{std::size_t{32} << 20};  ///< smallest growth step
  std::size_t budget_bytes{0};                      ///< most memory mapped; 0: no budget
  /// Whether graphs reuse memory other live graphs (or their own capture) marked; off for
  /// pinned host memory, which the host fills while capturing and a replay reads as it was.
  bool graphs_share_memory{true};
};

/// @brief The pool's state machine: which block serves a request, when another stream's frees
/// become usable, what a capture tags, what a graph's lease holds, what growth and the budget
/// allow.
///
/// - Eager requests on stream S take blocks freed on S, or released to every stream. When none
///   fits, frees on other streams whose last event has completed are released; then S is made
///   to wait on the last free event of each stream that still holds free blocks, and those
///   blocks become S's (never a host wait); then the pool grows.
/// - A capture's frees are tagged with the capture and the stream they were issued on, so only
///   later work of that stream in that capture reuses them; they are released when the capture
///   ends (its streams are joined and a replay runs whole), or move to the stream a side stream
///   is joined into (`join`). A capture on stream S takes its own
///   frees first, then blocks freed eagerly on S before it began (that work precedes the capture
///   in S's order: a graph is replayed on S or after it), then released blocks; frees eagerly on
///   other streams only once their events have completed, for it never waits on eager work.
/// - Every block a capture allocates or frees is marked with its graph until the graph is
///   released; a marked block never serves an eager request.
/// - Growth asks the device for what the request lacks, rounded up to the granularity and to
///   at least `growth_bytes`, and never past the budget.
/// - Graphs whose marks meet write the same memory, so they must never run at once: before a
///   graph is launched on stream S, S waits for the latest launch of each such graph (itself
///   included) made on another stream that may still run.
/// - A planned capture's slab is taken when the plan is made, before any capture begins, so
///   the capture itself never grows the pool.
///
/// Thread-safe: one lock around every call, the device's calls included.
class pool_engine {
 public:
  /// @throws usage_error (alignment not a power of two or past the device's granularity,
  /// growth_bytes 0 or past `largest_pool_size`)
  pool_engine(pool_engine_options const& options, pool_device& device);
  pool_engine(pool_engine const&) = delete;
  pool_engine& operator=(pool_engine const&) = delete;
  pool_engine(pool_engine&&) = delete;
  pool_engine& operator=(pool_engine&&) = delete;
  /// @brief Forgets the events it still holds.
  ~pool_engine();

  /// @brief A block of at least `bytes` for work ordered on `stream`; `capture` is the capture
  /// `stream` takes part in, if any.
  /// @throws usage_error (0 bytes, a capture not begun here, planned-mode divergence),
  /// out_of_memory (the message gives requested, in-use, mapped, reserved, budget and largest
  /// free block)
  [[nodiscard]] std::uintptr_t allocate(std::size_t bytes, stream_id stream,
                                        std::optional<capture_id> capture);
  /// @brief Frees the block at `address`, ordered on `stream` (in `capture`, if any).
  /// @throws usage_error (double free, foreign address, a capture not begun here)
  void deallocate(std::uintptr_t address, stream_id stream, std::optional<capture_id> capture);

  /// @brief A capture into graph `graph` (`name` for messages) has begun on `origin`. A plan
  /// made by `plan_next_capture` goes to this capture, with its slab.
  /// @throws usage_error (the capture already begun; graph `no_graph` or `planned_graph`)
  void begin_capture(capture_id capture, graph_id graph, std::string name, stream_id origin);
  /// @brief Stream `side` of capture `capture` was joined into `into` (which waits for all of
  /// `side`'s work so far): what the capture freed on `side` is usable on `into` from now on.
  /// @throws usage_error (a capture not begun here)
  void join(capture_id capture, stream_id side, stream_id into);
  /// @brief Empty when the capture may be kept; else what went wrong.
  [[nodiscard]] std::string capture_problem(capture_id capture) const;
  /// @brief Ends the capture. On success its graph holds its memory until `release_graph`; on
  /// failure the memory returns at once. Returns the graph, or nullopt (failure, or unknown).
  std::optional<graph_id> finish_capture(capture_id capture, bool success);
  /// @brief The graph's last replay has finished: its memory returns to the pool, but for the
  /// outputs kept by `keep_after_graph`, which become eager allocations.
  void release_graph(graph_id graph) noexcept;
  /// @brief The graph's output at `address` outlives the graph: when the graph is released it
  /// becomes an eager allocation, freed by `deallocate` like any other.
  /// @throws usage_error (no live block starts there; an eager allocation)
  void keep_after_graph(std::uintptr_t address);

  /// @brief The work issued to `stream` so far uses the live block at `address` (PyTorch's
  /// `record_stream`): the block's free is ordered after that work. An eager free makes its
  /// stream wait for it; a free inside a capture, which may not wait on eager work, and the
  /// release of a graph whose output it is wait for it on the host.
  /// @throws usage_error (no live block starts at `address`)
  void record_use(std::uintptr_t address, stream_id stream);

  /// @brief Gives the device back the memory no block uses and no live graph may write: the
  /// free end of each region, in whole units of growth. Waits on the host for the eager frees
  /// still in flight first (their blocks become usable from every stream). Returns the bytes
  /// given back.
  /// @throws usage_error (a capture into the pool is under way)
  std::size_t trim();

  /// @brief Graph `graph` is about to be launched on `stream`: `stream` is made to wait for
  /// the latest launch, on another stream, of every graph that shares memory with it, unless
  /// that launch has completed. Unknown or released graphs are not ordered. Only launches on
  /// other streams are looked at, so while one stream replays every graph the cost does not
  /// grow with the number of graphs.
  void before_replay(graph_id graph, stream_id stream);
  /// @brief Graph `graph` was launched on `stream`, and the launch records `launch` as its last
  /// node (an event the shell owns and keeps while the graph lives; the engine never records
  /// nor forgets it, so a replay enqueues nothing after its launch): later launches of graphs
  /// that share its memory on other streams wait for it. Fills `memo` for the next replay.
  void after_replay(graph_id graph, stream_id stream, event_id launch, replay_memo& memo);
  /// @brief Without the lock: true when the replay of the graph `memo` belongs to, on `stream`
  /// and recording `launch`, needs neither `before_replay` nor `after_replay`: its latest replay
  /// was on `stream` with `launch`, and nothing the engine decides by has changed since: no
  /// capture ended, no graph was released, no launch was noted or forgotten, and no graph was
  /// launched on another stream (every launch on another stream it was ordered after is still
  /// before it in `stream`'s order, and the launch's event, re-recorded by each launch of its
  /// graph, still names the latest launch for replays elsewhere). A replay on one stream,
  /// after the first, costs only this.
  [[nodiscard]] bool replay_is_settled(replay_memo const& memo, stream_id stream,
                                       event_id launch) const noexcept {
    std::uint64_t const now = version_.load(std::memory_order_acquire);
    return memo.version.load(std::memory_order_relaxed) == now &&
           memo.stream.load(std::memory_order_relaxed) == stream &&
           memo.launch.load(std::memory_order_relaxed) == launch;
  }

  /// @brief A snapshot of the engine's sizes, in bytes (`backing` is the shell's to fill).
  [[nodiscard]] pool_statistics stats() const;
  /// @brief Bytes in live blocks that graph `graph` allocated in its capture (its outputs).
  [[nodiscard]] std::size_t bytes_held_by(graph_id graph) const;
  /// @brief Every region (segment) of the pool and its blocks, in address order.
  [[nodiscard]] std::vector<block_allocator::region_record> snapshot() const;
  /// @brief Bytes that graph `graph` keeps from eager use while it lives: every block its
  /// capture allocated or freed, shared with other graphs or not.
  [[nodiscard]] std::size_t bytes_pinned_by(graph_id graph) const;
  /// @brief The events of eager frees whose blocks may still be in use by work on their stream:
  /// wait for them before the pool's memory is given back.
  [[nodiscard]] std::vector<event_id> pending_free_events() const;

  void begin_trace();
  [[nodiscard]] allocation_trace end_trace();
  /// @brief Plans the next capture from `trace` and takes its slab now, outside any capture; a
  /// plan not yet used is replaced, its slab given back.
  /// @throws usage_error (an empty trace), out_of_memory (the slab)
  allocation_plan plan_next_capture(allocation_trace trace);
  /// @brief Gives back the slab of a plan no capture has used.
  void drop_next_plan() noexcept;

  /// @brief Starts recording the timeline: what the pool holds now, then every event, up to
  /// `max_allocations` allocations.
  /// @throws usage_error (already recording; `max_allocations` 0)
  void begin_timeline(std::size_t max_allocations);
  /// @brief The timeline recorded so far (`pool` and `backing` are the shell's to fill).
  /// @throws usage_error (not recording)
  [[nodiscard]] pool_timeline timeline() const;
  /// @brief Stops recording and returns the timeline.
  /// @throws usage_error (not recording)
  pool_timeline end_timeline();
  /// @brief Names the live block at `address` in the timeline (when one is recorded).
  /// @throws usage_error (no live block starts at `address`)
  void name_allocation(std::uintptr_t address, std::string name);

  /// @brief The graph that holds a planned slab until its capture begins.
  static constexpr graph_id planned_graph = ~graph_id{0};

  /// @brief The block bookkeeping, for tests and invariant checks.
  [[nodiscard]] block_allocator const& blocks() const noexcept { return blocks_; }

 private:
  struct capture_state {
    graph_id graph{};
    std::string name;
    stream_id origin{};
    std::map<stream_id, stream_id> tags;  // captured stream -> its tag in this capture
    std::optional<planned_sequence> plan;
    std::uintptr_t slab{};
  };

  capture_state& capture_of(capture_id capture, stream_id stream);
  stream_id tag_of(capture_state& capture, stream_id stream);
  std::uintptr_t allocate_in_capture(capture_state& state, std::size_t bytes, stream_id stream);
  std::uintptr_t allocate_block(std::size_t bytes, stream_id tag, graph_id owner);
  bool release_completed_streams(stream_id except);
  bool take_other_streams(stream_id stream);
  void note_eager_free(stream_id stream);
  void order_free_after_uses(std::uintptr_t address, stream_id stream, bool on_host);
  void grow(std::size_t bytes, std::size_t requested);
  [[noreturn]] void throw_out_of_memory(std::size_t requested, std::string const& reason) const;

  mutable std::mutex mutex_;
  pool_engine_options options_;
  pool_device& device_;
  block_allocator blocks_;
  std::size_t growths_{};
  std::size_t trimmed_bytes_{};
  event_id next_event_{1};
  stream_id next_capture_tag_{};
  std::unordered_map<capture_id, capture_state> captures_;
  std::unordered_set<graph_id> live_graphs_;
  // The event recorded after the last eager free on each stream that still holds blocks freed
  // there: once it completes, or once another stream waits on it, those blocks may move.
  std::map<stream_id, event_id> free_events_;
  // Live blocks used on other streams (record_use): the latest use event on each stream.
  std::map<std::uintptr_t, std::map<stream_id, event_id>> uses_;
  std::optional<allocation_trace> trace_;
  std::optional<timeline_recorder> timeline_;
  std::unordered_map<std::uintptr_t, std::size_t> traced_ids_;
  struct next_plan {
    allocation_trace trace;
    allocation_plan plan;
    std::uintptr_t slab{};
  };
  std::optional<next_plan> next_plan_;
  [[nodiscard]] std::vector<graph_id> const& sharing_with(graph_id graph);
  void forget_launch(graph_id graph, stream_id except);
  void drop_idle_streams();

  // The latest launch of each live graph (the event the launch records itself), until it is
  // known to have completed, filed under the stream it was made on: a replay on stream S looks at
  // the other streams' launches only (none while one stream replays everything), so its cost does
  // not grow with the graphs.
  std::map<stream_id, std::unordered_map<graph_id, event_id>> launches_;
  // Graphs sharing memory with each graph, sorted, cleared whenever marks change (captures
  // end, graphs are released).
  std::unordered_map<graph_id, std::vector<graph_id>> sharing_;
  std::size_t ordered_replays_{};
  // Changes (under the lock) whenever the launches, the live graphs or what they share change:
  // a replay memo of an older version is no longer settled. Starts at 1, so that 0 is none.
  std::atomic<std::uint64_t> version_{1};
  void changed() noexcept { version_.fetch_add(1, std::memory_order_release); }
};

}  // namespace graphstep::memory::detail
