#pragma once

/// @file memory/detail/block_allocator.hpp
/// @brief The bookkeeping of the memory pool: blocks over address ranges, in plain C++.
///
/// It never touches memory: it decides which address range serves a request. The CUDA shell
/// (`memory_pool`) gives it regions of device memory and applies its answers.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

namespace graphstep::memory::detail {

/// @brief Opaque identity of a stream (the shell passes the `cudaStream_t` value).
using stream_id = std::uint64_t;
/// @brief The tag of a free block that every stream may use.
inline constexpr stream_id any_stream = ~stream_id{0};
/// @brief Opaque identity of a graph; `no_graph` marks an eager allocation.
using graph_id = std::uint64_t;
/// @brief The owner of an eager allocation (made outside any capture).
inline constexpr graph_id no_graph = 0;

/// @brief A block handed out: its address and its size after rounding up to the alignment.
struct block {
  std::uintptr_t address;
  std::size_t size;
};

/// @brief Best-fit allocation with splitting and coalescing over disjoint address regions,
/// with stream-ordered reuse and graph-private memory.
///
/// - Stream order: a block freed on stream A is reusable at once by allocations on A; by other
///   streams only after `release_stream(A)`, which the shell calls once A's work is ordered
///   before later work. `allocate(…, S, …)` considers free blocks tagged S or `any_stream`.
/// - Graph-private memory: an allocation for graph g (made while g is being captured) marks its
///   block as touched by g, and the mark stays after the block is freed, for as long as g
///   lives. A free block touched by a live graph never serves an eager allocation (the graph's
///   replays still write there), but may serve any graph (graphs that share a pool are
///   promised never to run at once). `release_graph(g)` frees g's remaining blocks and clears
///   its marks. A block freed while graph g is being captured takes g's mark too: g's
///   replays use it up to that free, whoever allocated it.
/// - Sharing first: a graph's request is served from blocks other live graphs already touch
///   whenever one fits, so graphs that share a pool pile onto the same memory and leave
///   untouched memory to eager work.
/// - Best fit: the smallest eligible free block that fits, ties to the lowest address; the
///   remainder of a split keeps the block's tag and marks. When no single block fits, a run
///   of adjacent eligible free blocks with different tags or marks may serve the request (the
///   block takes the union of their marks); remainders keep their own.
/// - Adjacent free blocks of one region merge when they have the same stream tag and the same
///   set of graphs, at once and again whenever tags or marks change; regions never merge.
///
/// Not thread-safe: the shell serializes calls. `allocate` and `deallocate` take O(log n) time
/// (a request that no single block can serve costs one O(n) scan before `nullopt`);
/// `release_stream`, `release_graph` and `check_invariants` take O(n).
class block_allocator {
 public:
  /// @brief An allocator with no region yet. With `graphs_share_memory` false, memory marked by
  /// a live graph serves no request at all, not even that graph's own later ones: for host
  /// memory that the host fills while capturing, which a replay reads as it was then.
  /// @throws usage_error (alignment not a power of two)
  explicit block_allocator(std::size_t alignment = 256, bool graphs_share_memory = true);

  /// @brief Adds the region [base, base + bytes), disjoint from every other region. Its
  /// aligned part (bytes rounded down to the alignment) becomes one free block usable from
  /// every stream and touched by no graph.
  /// @throws usage_error (misaligned base, 0 bytes, a range past the end of the address space,
  /// overlap with another region)
  void add_region(std::uintptr_t base, std::size_t bytes);
  /// @brief Grows the region that starts at `base` by `extra_bytes` at its end, in place
  /// (virtual-memory growth: addresses never move). The new space is free and merges with a
  /// free tail block that is usable from every stream and touched by no graph.
  /// @throws usage_error (no region starts at `base`, 0 bytes, overlap with another region)
  void extend_region(std::uintptr_t base, std::size_t extra_bytes);

  /// @brief Serves `bytes` (rounded up to the alignment) for work ordered on `stream`, for
  /// graph `owner` (`no_graph`: an eager allocation).
  /// @return the block, or `nullopt` when nothing eligible fits (grow, or report
  /// out-of-memory)
  /// @throws usage_error (0 bytes, a size that overflows when rounded up)
  [[nodiscard]] std::optional<block> allocate(std::size_t bytes, stream_id stream, graph_id owner);
  /// @brief Frees the block that starts at `address`, ordered on `stream`; `freed_by` is the
  /// graph being captured when the free is part of its capture (`no_graph`: an eager free).
  /// @throws usage_error (a double free; an address inside a block but not its start; an
  /// address this allocator never returned), the message says which
  void deallocate(std::uintptr_t address, stream_id stream, graph_id freed_by = no_graph);

  /// @brief Blocks freed on `stream` become usable from every stream.
  void release_stream(stream_id stream);
  /// @brief Blocks freed on `from` become usable from `to` alone (`to` has been ordered after
  /// `from`'s work up to those frees).
  void retag_stream(stream_id from, stream_id to);
  /// @brief True when a free block is tagged `stream`.
  [[nodiscard]] bool holds_free_blocks_of(stream_id stream) const;
  /// @brief Graph `graph` is gone: its remaining blocks are freed (usable from every stream),
  /// its marks cleared, so the memory may serve eager allocations again. Call it once the
  /// graph's last replay has finished.
  void release_graph(graph_id graph);
  /// @brief The live block at `address`, allocated for graph `from`, now belongs to graph `to`
  /// instead: it takes `to`'s mark and drops `from`'s (a block held for a graph not yet known).
  /// @throws usage_error (no live block of `from` starts at `address`; `to` is `no_graph`)
  void transfer(std::uintptr_t address, graph_id from, graph_id to);

  /// @brief The live block at `address`, allocated for a graph, stays allocated when that graph
  /// is released: `release_graph` makes it an eager allocation instead of freeing it (a graph's
  /// output read after the graph is gone). Freeing the block first drops the request.
  /// @throws usage_error (no live block starts at `address`; an eager allocation, which
  /// outlives every graph already)
  void keep_after_graph(std::uintptr_t address);

  /// @brief A region and the bytes at its end that may leave the pool.
  struct region_tail {
    std::uintptr_t base{};
    std::size_t bytes{};       ///< the region's size, as added and extended
    std::size_t free_bytes{};  ///< its last block when free, usable from every stream and
                               ///< touched by no graph; else 0
  };
  /// @brief Every region's free tail, in address order.
  [[nodiscard]] std::vector<region_tail> free_tails() const;
  /// @brief Takes the last `bytes` off the region at `base`; with `bytes` equal to the
  /// region's size the region goes. They must lie in its free tail (`free_tails`).
  /// @throws usage_error (no region starts at `base`, 0 bytes, more than the free tail)
  void shrink_region(std::uintptr_t base, std::size_t bytes);

  /// @brief Bytes of live blocks allocated for `graph` (0 for `no_graph`).
  [[nodiscard]] std::size_t bytes_in_use_by(graph_id graph) const;
  /// @brief Bytes of every block marked by `graph`, free or not: the memory its replays use
  /// and that eager requests cannot have while it lives (0 for `no_graph`). O(n).
  [[nodiscard]] std::size_t bytes_marked_by(graph_id graph) const;
  /// @brief Every graph whose marks meet `graph`'s on some block, `graph` itself included
  /// when it marks any block; sorted. Their replays write the same memory. O(n).
  [[nodiscard]] std::vector<graph_id> graphs_sharing_memory_with(graph_id graph) const;

  /// @brief A snapshot of the allocator's sizes, in bytes.
  struct statistics {
    std::size_t region_bytes{};        ///< aligned bytes of every region
    std::size_t bytes_in_use{};        ///< live blocks
    std::size_t peak_bytes_in_use{};   ///< most bytes_in_use ever
    std::size_t free_bytes{};          ///< region_bytes - bytes_in_use
    std::size_t largest_free_block{};  ///< whatever its tag and marks
    std::size_t free_blocks{};
    std::size_t used_blocks{};
    double fragmentation{};  ///< 1 - largest_free_block / free_bytes; 0 when nothing is free
  };
  /// @brief The current sizes.
  [[nodiscard]] statistics stats() const;
  /// @brief One block, as `snapshot` reports it.
  struct block_record {
    std::uintptr_t address{};
    std::size_t size{};
    bool free{true};
    graph_id owner{no_graph};       ///< a live block's allocator: a graph, or no_graph (eager)
    bool any_stream{true};          ///< a free block: reusable from every stream now
    std::vector<graph_id> touched;  ///< live graphs whose replays write this range
    bool kept_after_graph{};        ///< a graph's output that `keep_after_graph` keeps
  };
  /// @brief One region and the blocks that tile it, in address order.
  struct region_record {
    std::uintptr_t base{};
    std::size_t bytes{};  ///< the aligned bytes its blocks tile
    std::vector<block_record> blocks;
  };
  /// @brief The block that starts at `address`, free or live; nullopt when none does.
  [[nodiscard]] std::optional<block_record> block_at(std::uintptr_t address) const;
  /// @brief Every region and block, in address order (O(n)).
  [[nodiscard]] std::vector<region_record> snapshot() const;
  /// @brief The alignment of every block's address and size.
  [[nodiscard]] std::size_t alignment() const noexcept { return alignment_; }
  /// @brief True when `address` lies inside a region.
  [[nodiscard]] bool owns(std::uintptr_t address) const noexcept;
  /// @brief Checks every internal invariant (blocks tile the regions, free index exact,
  /// compatible neighbours merged, counters right).
  /// @throws error describing the first broken invariant
  void check_invariants() const;

 private:
  struct block_info {
    std::size_t size{};
    std::uintptr_t region{};  // base of the region holding the block
    bool free{true};
    stream_id stream{any_stream};   // free blocks: where they may be reused
    graph_id owner{no_graph};       // used blocks: the graph that allocated them
    std::vector<graph_id> touched;  // sorted: live graphs whose replays write this range
    bool kept_after_graph{};        // used blocks: become eager when their owner is released
  };
  using block_map = std::map<std::uintptr_t, block_info>;
  using index_key = std::pair<stream_id, bool>;  // (stream tag, touched by a graph)
  using size_index = std::set<std::pair<std::size_t, std::uintptr_t>>;

  void index(std::uintptr_t address, block_info const& info);
  void unindex(std::uintptr_t address, block_info const& info);
  [[nodiscard]] static bool mergeable(block_info const& a, block_info const& b) noexcept;
  [[nodiscard]] bool eligible(block_info const& info, stream_id stream,
                              graph_id owner) const noexcept;
  void merge_right(block_map::iterator left);
  void coalesce_at(block_map::iterator it);
  void coalesce_all();
  [[nodiscard]] std::optional<std::uintptr_t> find_run(std::size_t size, stream_id stream,
                                                       graph_id owner) const;
  void take_run(std::uintptr_t start, std::size_t size);
  void mark_used(std::uintptr_t address, block_info& info, graph_id owner);
  [[nodiscard]] std::size_t usable(std::size_t bytes) const noexcept;
  [[nodiscard]] std::size_t free_tail(std::uintptr_t base, std::size_t bytes) const;

  std::size_t alignment_;
  bool graphs_share_memory_;
  std::map<std::uintptr_t, std::size_t> regions_;  // base -> bytes (before rounding down)
  block_map blocks_;                               // tiles the aligned part of every region
  std::map<index_key, size_index> free_;           // free blocks by tag, then (size, address)
  std::map<graph_id, std::size_t> graph_in_use_;   // live bytes by owning graph
  std::size_t region_bytes_{};
  std::size_t in_use_{};
  std::size_t peak_in_use_{};
};

}  // namespace graphstep::memory::detail
