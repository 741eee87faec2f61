#pragma once

/// @file memory/pool_statistics.hpp
/// @brief Where a pool's memory comes from, and a snapshot of its sizes: what
/// `memory_pool::statistics()` reports, counted by the pool's engine in the core.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>

namespace graphstep::memory {

/// @brief Where a pool's memory comes from.
enum class pool_backing {
  automatic,       ///< virtual memory where the device supports it, else device_malloc
  virtual_memory,  ///< one reserved address range, physical memory mapped in as it grows
  device_malloc,   ///< cudaMalloc segments (growth adds a segment; old addresses never move)
  /// Page-locked host memory (cudaHostAlloc segments, portable to every device) for
  /// asynchronous copies to and from the host. A block a capture allocated or freed is kept for
  /// its graph while the graph lives and, unlike device memory, serves no other graph and no
  /// later request of that capture: the host filled it while capturing, and each replay copies
  /// what it held then. Give it to a capture as `graphs::capture_options::host_pool`. Never
  /// chosen by `automatic`.
  pinned_host,
};

/// @brief A snapshot of a pool's memory, in bytes.
struct pool_statistics {
  pool_backing backing{pool_backing::automatic};
  std::size_t reserved_bytes{};  ///< address space held (virtual_memory), else mapped_bytes
  std::size_t mapped_bytes{};    ///< device memory actually backing the pool
  std::size_t bytes_in_use{};    ///< in live blocks, eager and graph-held
  std::size_t peak_bytes_in_use{};
  std::size_t free_bytes{};
  std::size_t largest_free_block{};
  double fragmentation{};     ///< 1 - largest_free_block / free_bytes
  std::size_t growths{};      ///< times the pool mapped or allocated more memory
  std::size_t live_graphs{};  ///< graphs that hold memory of this pool
  /// Waits made before replays: one per replay, on another stream, of a graph sharing the
  /// replayed graph's memory that had not finished (a replay may wait on several).
  std::size_t ordered_replays{};
  std::size_t trimmed_bytes{};  ///< given back to the device by `trim`, in all
};

}  // namespace graphstep::memory
