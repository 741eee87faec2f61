#pragma once

// Where a memory_pool's device memory comes from: one reserved virtual range that grows in
// place (virtual memory), or separate cudaMalloc segments. Either way, memory handed out
// never moves.

#include <cstddef>
#include <cstdint>
#include <graphstep/memory/memory_pool.hpp>
#include <memory>
#include <string>
#include <vector>

#include "memory/detail/pool_engine.hpp"

namespace graphstep::memory::detail {

class memory_backing {
 public:
  using growth = pool_device::growth;
  using growth_status = pool_device::growth_status;

  virtual ~memory_backing() = default;
  memory_backing() = default;
  memory_backing(memory_backing const&) = delete;
  memory_backing& operator=(memory_backing const&) = delete;

  /// Adds at least `bytes` (rounded up to the granularity) of device memory.
  growth_status grow(std::size_t bytes, growth& out) { return do_grow(bytes, out); }
  /// Gives back whole units of growth at the end of the region at `base` (`region_bytes`
  /// long), at most `free_bytes` of them; returns the bytes given back. The caller has waited
  /// for every use of that memory.
  virtual std::size_t shrink(std::uintptr_t base, std::size_t region_bytes,
                             std::size_t free_bytes) = 0;
  /// Smallest unit of growth.
  [[nodiscard]] virtual std::size_t granularity() const noexcept = 0;
  [[nodiscard]] virtual std::size_t reserved_bytes() const noexcept = 0;
  [[nodiscard]] virtual std::size_t mapped_bytes() const noexcept = 0;
  [[nodiscard]] virtual pool_backing kind() const noexcept = 0;

 private:
  virtual growth_status do_grow(std::size_t bytes, growth& out) = 0;
};

/// Virtual memory (cuMemAddressReserve + cuMemCreate/cuMemMap), readable and writable from
/// `device` and `peers`. Returns null, with the reason in `why_not`, where the driver or the
/// device does not support it.
std::unique_ptr<memory_backing> make_virtual_memory_backing(int device, std::size_t reserve_bytes,
                                                            std::vector<int> const& peers,
                                                            std::string& why_not);
/// Page-locked host segments (cudaHostAlloc, portable), allocated with `device` current.
std::unique_ptr<memory_backing> make_pinned_host_backing(int device);
/// cudaMalloc segments; enables peer access to `device` from each of `peers`.
std::unique_ptr<memory_backing> make_device_malloc_backing(int device,
                                                           std::vector<int> const& peers);

}  // namespace graphstep::memory::detail
