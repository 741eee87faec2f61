#pragma once

// Memory the simulated runtime hands out (cudaMalloc, cudaMallocHost, graph allocations), laid
// out so that the faults compute-sanitizer's memcheck reports on a GPU fault here too:
//   - each allocation ends where an inaccessible guard page begins, so an access past its end
//     (beyond the 256-byte alignment slack) faults;
//   - freed memory stays reserved and inaccessible for a while (a quarantine of the most
//     recently freed allocations), so an access after cudaFree faults instead of reading
//     whatever the next allocation put there.
// A fault inside a guard page or a freed allocation is reported with the kernel that made it, the
// allocation and the distance from it, and ends the process (on a GPU the kernel fails with
// cudaErrorIllegalAddress; see docs/simulator.md). Any other fault goes to the handler that was
// installed before (the default one, or a sanitizer's).

#include <cstddef>
#include <cstdint>

#include "sim/detail/runtime_state.hpp"

namespace graphstep::sim::detail {

/// Maps `bytes` (> 0) of guarded memory filled with 0xFF bytes (cudaMalloc does not clear
/// memory). Returns the allocation to register, or base == 0 when the host is out of memory.
[[nodiscard]] allocation map_guarded(std::size_t bytes, memory_kind kind, int device);

/// Makes a live allocation inaccessible and keeps its addresses reserved for a while (the oldest
/// retired allocations are unmapped once the quarantine is full). Call with the platform lock
/// held, after it left `platform::allocations`.
void retire_guarded(allocation const& freed);

/// Names the kernel running on this thread in fault reports while it lives.
class running_kernel {
 public:
  explicit running_kernel(char const* name) noexcept;
  running_kernel(running_kernel const&) = delete;
  running_kernel& operator=(running_kernel const&) = delete;
  running_kernel(running_kernel&&) = delete;
  running_kernel& operator=(running_kernel&&) = delete;
  ~running_kernel();

 private:
  char const* outer_;
};

}  // namespace graphstep::sim::detail
