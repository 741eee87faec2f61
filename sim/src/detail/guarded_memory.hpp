#pragma once

// Memory the simulated runtime hands out (cudaMalloc, cudaMallocHost, graph allocations), laid
// out so that the faults compute-sanitizer's memcheck reports on a GPU fault here too:
//   - each allocation ends where an inaccessible guard page begins, so an access past its end
//     (beyond the 256-byte alignment slack) faults;
//   - freed memory stays reserved and inaccessible for a while (a quarantine of the most
//     recently freed allocations), so an access after cudaFree faults instead of reading
//     whatever the next allocation put there.
//   - device memory is accessible only while device work runs (a kernel, a memset or memcpy, a
//     graph launch): host code that dereferences a device pointer faults, as it does on a GPU.
//     Work runs under the platform lock, one operation at a time, so while one thread runs
//     device work another thread's host code may still read device memory unnoticed.
// A fault inside a guard page, a freed allocation or closed device memory is reported with the
// kernel that made it, the allocation and the distance from it, and ends the process (on a GPU the
// kernel fails with cudaErrorIllegalAddress; see sim/docs/simulator.md). Any other fault goes to
// the handler that was installed before (the default one, or a sanitizer's).

#include <cstddef>
#include <cstdint>

#include "detail/runtime_state.hpp"

namespace graphstep::sim::detail {

/// Maps `bytes` (> 0) of guarded memory filled with 0xFF bytes (cudaMalloc does not clear
/// memory). Returns the allocation to register, or base == 0 when the host is out of memory.
[[nodiscard]] allocation map_guarded(std::size_t bytes, memory_kind kind, int device);

/// Makes a live allocation inaccessible and keeps its addresses reserved for a while (the oldest
/// retired allocations are unmapped once the quarantine is full). Call with the platform lock
/// held, after it left `platform::allocations`.
void retire_guarded(allocation const& freed);

/// Closes a device allocation's pages, whatever the time: device work opens them with their
/// protection when it touches them. Call after changing `device_protection`, or for new memory.
void apply_protection(allocation const& a);

/// Device work runs on this thread: device memory opens where it touches it, and the outermost
/// one closes what was opened (call with the platform lock held).
class device_work {
 public:
  device_work();
  device_work(device_work const&) = delete;
  device_work& operator=(device_work const&) = delete;
  device_work(device_work&&) = delete;
  device_work& operator=(device_work&&) = delete;
  ~device_work();
};

/// Closes device memory while host code runs from inside device work (host nodes,
/// cudaLaunchHostFunc, the host going on while a collective is parked), then lets it open again.
class host_code_inside_device_work {
 public:
  host_code_inside_device_work();
  host_code_inside_device_work(host_code_inside_device_work const&) = delete;
  host_code_inside_device_work& operator=(host_code_inside_device_work const&) = delete;
  host_code_inside_device_work(host_code_inside_device_work&&) = delete;
  host_code_inside_device_work& operator=(host_code_inside_device_work&&) = delete;
  ~host_code_inside_device_work();

 private:
  int depth_;
  char const* kernel_;
  int kernel_device_;
};

/// What the device work on this thread is: the kernel it runs, if any, and its device.
struct device_work_identity {
  char const* kernel{};
  int device{-1};
};
[[nodiscard]] device_work_identity device_work_here() noexcept;

/// Runs device work begun by another thread (a grid's blocks shared among host threads,
/// block_workers.hpp) on this one while it lives: faults open device memory and are reported
/// as that work's.
class lent_device_work {
 public:
  explicit lent_device_work(device_work_identity const& work) noexcept;
  lent_device_work(lent_device_work const&) = delete;
  lent_device_work& operator=(lent_device_work const&) = delete;
  lent_device_work(lent_device_work&&) = delete;
  lent_device_work& operator=(lent_device_work&&) = delete;
  ~lent_device_work();

 private:
  device_work_identity outer_;
  bool outer_work_;
};

/// Names the kernel running on this thread in fault reports while it lives.
class running_kernel {
 public:
  /// While a kernel runs on `device`, device memory it may not access is closed: another
  /// device's cudaMalloc memory without peer access, mapped virtual memory that cuMemSetAccess
  /// did not grant `device`. Call with the platform lock held, inside device work.
  running_kernel(char const* name, int device);
  running_kernel(running_kernel const&) = delete;
  running_kernel& operator=(running_kernel const&) = delete;
  running_kernel(running_kernel&&) = delete;
  running_kernel& operator=(running_kernel&&) = delete;
  ~running_kernel();

 private:
  char const* outer_;
  int outer_device_;
};

/// Whether a kernel on `device` may access allocation `a`.
[[nodiscard]] bool accessible_from(allocation const& a, int device);

/// The lifetime of graph allocations, apart from their backing (which lives with the graph and
/// its executables): a launch of their graph allocates them, and they are freed by a free node,
/// by cudaFreeAsync or cudaFree outside the graph, or by the next launch of an executable
/// instantiated with cudaGraphInstantiateFlagAutoFreeOnLaunch (cudaGraphAddMemAllocNode). Keyed
/// by base address; call with the platform lock held.
enum class graph_allocation_state { not_allocated, allocated };
[[nodiscard]] graph_allocation_state graph_allocation(void const* base);
void set_graph_allocation(void const* base, graph_allocation_state now);

}  // namespace graphstep::sim::detail
