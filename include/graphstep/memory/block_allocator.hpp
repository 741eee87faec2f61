#pragma once

/// @file memory/block_allocator.hpp
/// @brief The bookkeeping of the memory pool: blocks over address ranges, in plain C++.
///
/// It never touches memory: it decides which address range serves a request. The CUDA shell
/// (`memory_pool`) gives it regions of device memory and applies its answers.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

namespace graphstep::memory {

/// @brief Opaque identity of a stream (the shell passes the `cudaStream_t` value).
using stream_id = std::uint64_t;
/// @brief The tag of a free block that every stream may use.
inline constexpr stream_id any_stream = ~stream_id{0};
/// @brief Opaque identity of a graph; `no_graph` marks an eager allocation.
using graph_id = std::uint64_t;
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
///   streams only after `release_stream(A)`.
/// - Graph-private memory: an allocation for graph g (made while g is being captured) marks its
///   block as touched by g. A free block touched by a live graph never serves an eager
///   allocation (the graph's replays still write there), but may serve any graph (graphs that
///   share a pool are promised never to run at once). `release_graph(g)` frees g's remaining
///   blocks and clears its marks.
/// - Adjacent free blocks of one region merge when they have the same set of graphs and the
///   same stream tag (a released block joins a stream's block and takes its tag); regions
///   never merge.
class block_allocator {
 public:
  /// @throws usage_error (alignment not a power of two)
  explicit block_allocator(std::size_t alignment = 256);

  /// @brief Adds a disjoint region [base, base + bytes) (bytes rounded down to the alignment).
  /// @throws usage_error (misaligned base, too small, overlap with another region)
  void add_region(std::uintptr_t base, std::size_t bytes);
  /// @brief Grows the region that starts at `base` by `extra_bytes` at its end, in place.
  /// @throws usage_error (unknown region, misaligned growth, overlap with another region)
  void extend_region(std::uintptr_t base, std::size_t extra_bytes);

  /// @brief The smallest eligible free block that fits (ties: lowest address), split to size.
  /// `nullopt` when nothing fits.
  /// @throws usage_error (0 bytes, a size that overflows when rounded up)
  [[nodiscard]] std::optional<block> allocate(std::size_t bytes, stream_id stream,
                                              graph_id owner);
  /// @brief Frees the block that starts at `address`, ordered on `stream`.
  /// @throws usage_error (double free; an address this allocator never returned)
  void deallocate(std::uintptr_t address, stream_id stream);

  /// @brief Blocks freed on `stream` become usable from every stream.
  void release_stream(stream_id stream);
  /// @brief Graph `graph` is gone: its remaining blocks are freed, its marks cleared.
  void release_graph(graph_id graph);

  /// @brief Bytes of live blocks allocated for `graph`.
  [[nodiscard]] std::size_t bytes_in_use_by(graph_id graph) const;

  struct statistics {
    std::size_t region_bytes{};
    std::size_t bytes_in_use{};
    std::size_t peak_bytes_in_use{};
    std::size_t free_bytes{};
    std::size_t largest_free_block{};
    std::size_t free_blocks{};
    std::size_t used_blocks{};
    double fragmentation{};  ///< 1 - largest_free_block / free_bytes; 0 when nothing is free
  };
  [[nodiscard]] statistics stats() const;
  [[nodiscard]] std::size_t alignment() const noexcept { return alignment_; }
  /// @brief True when `address` lies inside a region.
  [[nodiscard]] bool owns(std::uintptr_t address) const noexcept;
  /// @brief Throws `graphstep::error` describing the first broken invariant (for tests).
  void check_invariants() const;

 private:
  struct block_info {
    std::size_t size{};
    std::uintptr_t region{};          // base of the region holding the block
    bool free{true};
    stream_id stream{any_stream};     // free blocks: where they may be reused
    graph_id owner{no_graph};         // used blocks: the graph that allocated them
    std::vector<graph_id> touched;    // sorted: graphs whose replays write this range
  };
  using index_key = std::pair<stream_id, bool>;  // (stream tag, touched by a graph)
  using size_index = std::set<std::pair<std::size_t, std::uintptr_t>>;

  void index(std::uintptr_t address, block_info const& info);
  void unindex(std::uintptr_t address, block_info const& info);
  [[nodiscard]] bool mergeable(block_info const& a, block_info const& b) const;
  void merge_right(std::map<std::uintptr_t, block_info>::iterator left);
  void coalesce_at(std::uintptr_t address);
  void coalesce_all();
  void retag(std::uintptr_t address, block_info& info, stream_id stream,
             std::vector<graph_id> touched);
  [[nodiscard]] std::map<std::uintptr_t, std::size_t>::const_iterator region_at(
      std::uintptr_t address) const;

  std::size_t alignment_;
  std::map<std::uintptr_t, std::size_t> regions_;  // base -> bytes
  std::map<std::uintptr_t, block_info> blocks_;    // tiles every region
  std::map<index_key, size_index> free_;           // free blocks by tag, then (size, address)
  std::size_t region_bytes_{};
  std::size_t in_use_{};
  std::size_t peak_in_use_{};
};

}  // namespace graphstep::memory
