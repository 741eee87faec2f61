#pragma once

/// @file memory/memory_pool.hpp
/// @brief `memory_pool`: graph-private device memory whose blocks keep their addresses.

#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/memory_resource.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/memory/allocation_plan.hpp>
#include <graphstep/memory/pool_capture.hpp>
#include <graphstep/memory/pool_statistics.hpp>
#include <graphstep/memory/pool_timeline.hpp>
#include <memory>
#include <string>
#include <vector>

namespace graphstep::memory {

namespace detail {
class pool_state;
}

/// @brief How a pool is made.
struct pool_options {
  pool_backing backing{pool_backing::automatic};
  /// Virtual address range reserved up front (virtual_memory); 0 means the device's memory size.
  /// At most half the address space, as every size the pool takes.
  std::size_t reserve_bytes{0};
  /// The most device memory the pool may map or allocate; 0 means no budget.
  std::size_t budget_bytes{0};
  /// Alignment of every block, a power of two (256 B matches cudaMalloc) and at most the
  /// granularity the pool grows by (2 MiB for device memory on current GPUs, 64 KiB for
  /// pinned_host), on which its ranges begin.
  std::size_t alignment{256};
  /// Smallest growth step; rounded up to the allocation granularity.
  std::size_t growth_bytes{std::size_t{32} << 20};
  /// Device of the pool, 0 to cudaGetDeviceCount() - 1; -1 means the current device.
  int device{-1};
  /// Other devices whose kernels may use the pool's memory too (an output read on another GPU);
  /// each must be able to reach the pool's device (`cudaDeviceCanAccessPeer`). Virtual memory
  /// grants them access to each mapped chunk (`cuMemSetAccess`); device_malloc enables peer
  /// access from each to the pool's device (`cudaDeviceEnablePeerAccess`, for every allocation
  /// of that device, and left enabled). By default only the pool's own device may use it.
  std::vector<int> peer_devices{};
};

/// @brief One block of a pool segment, as `memory_pool::snapshot` reports it.
struct pool_block {
  void* address{};
  std::size_t bytes{};
  bool live{};  ///< allocated and not deallocated yet
  /// A live block's allocator: the id (`graph::id()`) of the graph whose capture allocated it,
  /// or 0 for an eager allocation.
  std::uint64_t graph{};
  /// A free block: any stream may take it now; else only the stream that freed it, until that
  /// stream's work is ordered before the others'.
  bool any_stream{};
  /// Live graphs whose replays write this range: eager allocations never get it meanwhile.
  std::vector<std::uint64_t> reserved_for;
  /// A graph's output that `memory_pool::keep_after_graph` keeps past its graph.
  bool kept_after_graph{};
};

/// @brief A range of device memory the pool holds, tiled by its blocks in address order
/// (PyTorch's `torch.cuda.memory_snapshot()` segments).
struct pool_segment {
  void* base{};
  std::size_t bytes{};
  std::vector<pool_block> blocks;
};

/// @brief Device memory for captured graphs, at addresses that never move.
///
/// Inside a `capture_scope` given this pool, `allocate` and `deallocate` on the capturing
/// stream (or a stream forked from it) serve the graph being captured: a block freed inside
/// the capture is reused later in the same capture, in stream order, and every block the
/// capture touched stays reserved for that graph until the graph is destroyed — the graph
/// keeps the pool's memory alive, so destroying the pool handle first is harmless. Outside a
/// capture the pool serves ordinary (eager) allocations, e.g. static inputs, and never hands
/// them memory that a live graph may still write.
///
/// Several graphs may share one pool (one graph per capture shape, captured largest first):
/// each capture reuses memory the earlier ones freed, so N such graphs take about the memory
/// of the largest, not the sum. Graphs that share memory never run at once: a replay
/// (`graph_exec::replay`) on stream B first waits for the latest replay, on another stream,
/// of each graph sharing its memory, unless that replay has completed
/// (`pool_statistics::ordered_replays` counts these waits). Graphs meant to overlap on
/// different streams overlap only where they share no memory: give them pools of their own.
/// A replay launched into a capturing stream becomes part of that capture and is not ordered.
///
/// Stream ordering: a block freed on stream A is reused at once by allocations on A; by another
/// stream B once A's work up to the free is known to be done, or after B is made to wait for it
/// (an eager request on B that nothing else serves; the host never waits). A capture on A may
/// reuse blocks freed eagerly on A before it began: replay its graph on A, or after A's work.
///
/// Planned mode: record the allocations of an eager warm-up step with `begin_trace` /
/// `end_trace`, hand the trace to `plan_next_capture`, and the next capture into this pool
/// serves every allocation at its planned offset in one slab of near-minimal size; a capture
/// that allocates differently from the warm-up raises `usage_error` naming the allocation.
/// The slab is taken by `plan_next_capture`, so the planned capture never grows the pool.
/// Unplanned captures may grow it: growth runs in Relaxed capture mode, which lets
/// `cudaMalloc` / `cuMemCreate` proceed beside captures on any thread.
///
/// A `cuda::memory_resource`: a `cuda::device_buffer` given this pool takes its memory here,
/// within the pool's budget and statistics.
///
/// Every stream given to the pool belongs to its device (`pool_options::device`): the pool
/// records its events on those streams, and CUDA records an event only on a stream of the
/// event's context. A stream of another device, a peer's included, is refused by name at its
/// first use.
///
/// Thread-safe. Move-only.
class memory_pool : public cuda::memory_resource {
 public:
  /// @throws no_device_error, cuda_error, cuda_driver_error, usage_error (bad options: each
  /// named with its value and what it may be)
  explicit memory_pool(pool_options const& options = {});
  memory_pool(memory_pool&& other) noexcept;
  memory_pool& operator=(memory_pool&& other) noexcept;
  memory_pool(memory_pool const&) = delete;
  memory_pool& operator=(memory_pool const&) = delete;
  /// @brief Releases the pool's handle; memory held by live graphs stays until they die, and
  /// when the last of them goes, the memory is given back. Memory with blocks never deallocated
  /// stays mapped instead, for the life of the process (work on some stream may still use
  /// them), and stderr says how many bytes. Buffers of the pool (`cuda::device_buffer`) must
  /// die before it: declare the pool first.
  ~memory_pool() override;

  /// @brief A block of at least `bytes`, aligned to the pool's alignment, ordered on `stream`.
  /// @throws usage_error (zero bytes or more than half the address space, moved-from pool,
  /// a stream of another device, stream capturing into a graph that was not started with this
  /// pool, planned-mode divergence), out_of_memory (budget or device exhausted: the message gives
  /// requested, in-use, reserved, budget and largest free block)
  [[nodiscard]] void* allocate(std::size_t bytes, cuda::stream_view stream);

  /// @brief Returns a block obtained from `allocate`, ordered on `stream`.
  /// @throws usage_error (double free, a pointer this pool did not return, a stream of another
  /// device)
  void deallocate(void* pointer, cuda::stream_view stream);
  /// `deallocate(pointer, bytes, stream)` of `cuda::memory_resource` too (the pool knows each
  /// block's size and ignores `bytes`).
  using cuda::memory_resource::deallocate;

  /// @brief The graph output at `output` (a block the graph's capture allocated and did not
  /// free) stays allocated when its graph is destroyed, as PyTorch's outputs outlive their
  /// graph: once the graph's last replay is over the block becomes an ordinary eager
  /// allocation, until `deallocate`. Until then it is the graph's output, which every replay
  /// rewrites. Deallocating it earlier undoes the request.
  /// @throws usage_error (moved-from pool; no live block of this pool starts at `output`; an
  /// eager allocation, which outlives every graph already)
  void keep_after_graph(void* output);

  /// @brief The work issued to `stream` up to this call uses the live block at `pointer`
  /// (PyTorch's `Tensor.record_stream`): however the block is freed later, its memory is not
  /// reused before that work is done. An eager `deallocate` on another stream makes that stream
  /// wait for it (`cudaStreamWaitEvent`, no host wait); a free inside a capture, and the
  /// release of the graph whose output it is, wait for it on the host. Work issued to `stream`
  /// after the call is not covered: record again after it.
  /// @throws usage_error (moved-from pool; no live block of this pool starts at `pointer`;
  /// `stream` capturing: order a side stream's use with a join instead; a stream of another
  /// device), cuda_error
  void record_use(void* pointer, cuda::stream_view stream);

  /// @brief Gives unused memory back to the device (PyTorch's `torch.cuda.empty_cache()`):
  /// every free range at the end of a segment that no live graph may write and no stream may
  /// still use, in whole units of growth — chunks of the reserved range mapped as the pool
  /// grew (virtual_memory; the address range stays reserved), whole cudaMalloc segments
  /// (device_malloc), whole cudaHostAlloc segments (pinned_host). Live blocks never move. Waits on
  /// the host for the eager frees still in flight first. Returns the bytes given back
  /// (`pool_statistics::trimmed_bytes` adds them up).
  /// @throws usage_error (moved-from pool; a capture into this pool under way), cuda_error,
  /// cuda_driver_error
  std::size_t trim();

  /// @brief This pool's identity, unique in the process and kept across moves (PyTorch's
  /// `graph_pool_handle()`): graphs captured with the same pool share its memory.
  /// @throws usage_error (moved-from pool)
  [[nodiscard]] std::uint64_t id() const;

  /// @throws usage_error (moved-from pool)
  [[nodiscard]] pool_statistics statistics() const;
  /// @brief Every segment of the pool and every block in it, free or live, in address order.
  /// Taken under the pool's lock: a consistent picture at one moment.
  /// @throws usage_error (moved-from pool)
  [[nodiscard]] std::vector<pool_segment> snapshot() const;
  /// @brief The live blocks, in address order: eager allocations and graphs' outputs.
  /// @throws usage_error (moved-from pool)
  [[nodiscard]] std::vector<pool_block> live_allocations() const;
  /// @brief Bytes in live blocks that belong to the graph with id `graph_id` (allocated in its
  /// capture, never freed): its outputs.
  [[nodiscard]] std::size_t bytes_held_by(std::uint64_t graph_id) const;
  /// @brief Bytes that the graph with id `graph_id` keeps from eager use while it lives: every
  /// block its capture allocated or freed, its outputs included. Graphs sharing the pool may
  /// pin the same bytes, so these figures do not add up to the pool's size.
  [[nodiscard]] std::size_t bytes_pinned_by(std::uint64_t graph_id) const;

  /// @brief Opens the pool's side of the capture that has begun on `stream` into the graph with
  /// id `graph_id` (`name` is used in messages): until it ends, `allocate` and `deallocate` on
  /// that capture's streams serve that graph.
  /// @throws usage_error (moved-from pool, `stream` not capturing, a stream of another
  /// device), cuda_error
  [[nodiscard]] pool_capture open_capture(cuda::stream_view stream, std::uint64_t graph_id,
                                          std::string name);
  /// @brief The backing chosen (automatic resolves to one of the other two).
  [[nodiscard]] pool_backing backing() const;

  /// @brief Starts recording the eager allocations of a warm-up step.
  /// @throws usage_error (already recording)
  void begin_trace();
  /// @brief Stops recording and returns the allocation sequence seen since `begin_trace`.
  /// @throws usage_error (not recording)
  [[nodiscard]] memory::allocation_trace end_trace();
  /// @brief Makes the next capture into this pool serve its allocations from a plan of
  /// `trace` (see `memory::plan_allocations`) and takes the plan's slab now, before the capture
  /// begins; returns that plan. A plan no capture has used yet is replaced and its slab given
  /// back.
  /// @throws usage_error (empty trace), out_of_memory (no room for the slab)
  memory::allocation_plan plan_next_capture(memory::allocation_trace trace);

  /// @brief Starts recording the pool's memory timeline: the segments and live blocks it holds
  /// now, then every growth, trim, allocation, free, capture and graph release, in order, with
  /// the capture each allocation belongs to (docs/memory.md#memory-timeline). Records at most
  /// `max_allocations` allocations; later ones are counted, not kept (so a long run's timeline
  /// stays bounded).
  /// @throws usage_error (moved-from pool; already recording; `max_allocations` 0)
  void begin_timeline(std::size_t max_allocations = std::size_t{1} << 20);
  /// @brief The timeline recorded so far; `to_json()` or `write_json(path)` writes it out, and
  /// scripts/plot-memory-timeline.py draws it.
  /// @throws usage_error (moved-from pool; not recording)
  [[nodiscard]] pool_timeline timeline() const;
  /// @brief Stops recording and returns the timeline.
  /// @throws usage_error (moved-from pool; not recording)
  pool_timeline end_timeline();
  /// @brief Gives the live allocation at `address` a name in the timeline ("attention
  /// workspace"); does nothing more when no timeline is being recorded.
  /// @throws usage_error (moved-from pool; no live block of this pool starts at `address`)
  void name_allocation(void* address, std::string name);

 private:
  // cuda::memory_resource: the same as allocate and deallocate above.
  void* do_allocate(std::size_t bytes, cuda::stream_view stream) override;
  void do_deallocate(void* pointer, std::size_t bytes, cuda::stream_view stream) override;
  std::shared_ptr<detail::pool_state> state_;
};

}  // namespace graphstep::memory
