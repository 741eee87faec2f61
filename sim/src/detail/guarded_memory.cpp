#include "detail/guarded_memory.hpp"

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iterator>
#include <mutex>
#include <set>
#include <utility>

namespace graphstep::sim::detail {
namespace {

// cudaMalloc returns memory "suitably aligned for any kind of variable": 256 bytes on every GPU
// (cudaMalloc in cuda_runtime_api.h; the CUDA Programming Guide's "Device Memory Accesses").
constexpr std::size_t allocation_alignment = 256;
// Larger allocations are not filled with 0xFF: touching every page of them costs the host more
// than the check is worth.
constexpr std::size_t poison_limit = std::size_t{256} << 20;
// How many freed allocations stay inaccessible. Each is one kernel mapping (the default limit is
// 65 530 per process), so the quarantine holds the most recent ones, not all.
constexpr std::size_t quarantine_entries = 4096;

std::size_t page_bytes() {
  static auto const page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

std::size_t round_up(std::size_t bytes, std::size_t unit) {
  return (bytes + unit - 1) / unit * unit;
}

// Read by the fault handler: kept for the whole process, guarded by the platform lock.
std::deque<allocation>& quarantine() {
  // NOLINTNEXTLINE(cppcoreguidelines-owning-memory): never destroyed, like the platform
  static auto* const retired = new std::deque<allocation>;
  return *retired;
}

thread_local char const* kernel_on_this_thread = nullptr;
thread_local int kernel_device_on_this_thread = -1;
// Nesting of device_work (graph launches run nodes that run nodes); guarded by the platform lock.
int device_work_depth = 0;
// This thread runs the device work (only it may open device memory on a fault).
thread_local bool device_work_on_this_thread = false;

bool is_device_memory(allocation const& a) {
  return a.kind == memory_kind::device || a.kind == memory_kind::graph ||
         a.kind == memory_kind::virtual_reservation;
}

// The pages that hold an allocation's bytes: between the guard pages, or the mapped range.
std::pair<std::uintptr_t, std::size_t> data_pages(allocation const& a) {
  if (a.mapping_bytes > 0) return {a.mapping + page_bytes(), a.mapping_bytes - 2 * page_bytes()};
  return {a.base, a.bytes};
}

void close_data_pages(allocation const& a) {
  auto const [start, bytes] = data_pages(a);
  static_cast<void>(mprotect(reinterpret_cast<void*>(start), bytes, PROT_NONE));
}

// Device memory opens lazily, a piece at a time: it stays closed while device work runs until
// the work touches it; the fault handler then opens the piece touched (open_on_fault), and the
// end of the work closes what was opened. Changing a page's protection costs in proportion to the
// pages of the range (its page table entries), so opening and closing every allocation around
// every operation cost more than most kernels; this costs in proportion to what the work touches.
constexpr std::size_t piece_bytes = std::size_t{1} << 20;

struct open_piece {
  std::uintptr_t start{};
  std::size_t bytes{};
  int protection{};
};

// The pieces open now, in a fixed array: the fault handler adds to it and must not allocate.
// Guarded by the platform lock, which the thread running device work holds.
std::array<open_piece, 1024> open_pieces{};
std::size_t open_count = 0;

void close_open_pieces() {
  for (std::size_t i = 0; i < open_count; ++i) {
    static_cast<void>(
        mprotect(reinterpret_cast<void*>(open_pieces[i].start), open_pieces[i].bytes, PROT_NONE));
  }
  open_count = 0;
}

open_piece const* open_piece_holding(std::uintptr_t address) {
  for (std::size_t i = 0; i < open_count; ++i) {
    if (address - open_pieces[i].start < open_pieces[i].bytes) return &open_pieces[i];
  }
  return nullptr;
}

// Closes the open pieces of one allocation (its protection changed, or a kernel may not reach it).
void close_pieces_of(allocation const& a) {
  auto const [start, bytes] = data_pages(a);
  std::size_t kept = 0;
  for (std::size_t i = 0; i < open_count; ++i) {
    open_piece const piece = open_pieces[i];
    if (piece.start - start < bytes) {
      static_cast<void>(mprotect(reinterpret_cast<void*>(piece.start), piece.bytes, PROT_NONE));
    } else {
      open_pieces[kept++] = piece;
    }
  }
  open_count = kept;
}
struct sigaction previous_action {};
// Taken by the fault handler while it opens or describes: lock-free, so a handler may spin on it.
std::atomic_flag fault_turn = ATOMIC_FLAG_INIT;

char const* kind_name(memory_kind kind) {
  switch (kind) {
    case memory_kind::pinned_host: return "pinned host allocation";
    case memory_kind::graph: return "graph allocation";
    case memory_kind::virtual_reservation: return "mapped virtual memory";
    case memory_kind::device: break;
  }
  return "device allocation";
}

bool write_fault(void const* context) {
#if defined(__x86_64__)
  // Bit 1 of the page-fault error code: the access was a write.
  auto const* user = static_cast<ucontext_t const*>(context);
  return (user->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#else
  static_cast<void>(context);
  return false;
#endif
}

bool inside_mapping(allocation const& a, std::uintptr_t address) {
  return a.mapping_bytes > 0 && address >= a.mapping && address < a.mapping + a.mapping_bytes;
}

// Addresses below this are a null pointer plus an offset: Linux maps nothing there
// (vm.mmap_min_addr is 64 KiB by default).
constexpr std::uintptr_t null_page_limit = std::uintptr_t{64} << 10;

// Describes a fault at `address` if it is one of the simulator's: host code in device memory, a
// guard page of a live allocation, freed memory still in quarantine, or a kernel reaching through
// a null pointer. Called with the platform lock held.
bool describe_fault(std::uintptr_t address, char* text, std::size_t size, char const* access) {
  char const* who = kernel_on_this_thread != nullptr ? kernel_on_this_thread : "host code";
  char const* prefix = kernel_on_this_thread != nullptr ? "kernel " : "";
  if (kernel_on_this_thread != nullptr && address < null_page_limit) {
    static_cast<void>(std::snprintf(
        text, size,
        "graphstep simulated device: kernel %s: %s at 0x%" PRIxPTR ", %" PRIuPTR
        " bytes past a null pointer (a GPU reports cudaErrorIllegalAddress; compute-sanitizer's "
        "memcheck names it)\n",
        kernel_on_this_thread, access, address, address));
    return true;
  }
  for (auto const& [base, a] : state().allocations) {
    if (is_device_memory(a) && kernel_on_this_thread != nullptr && address >= a.base &&
        address < a.base + a.bytes && !accessible_from(a, kernel_device_on_this_thread)) {
      char const* remedy =
          a.pool != nullptr
              ? "grant it to the pool with cudaMemPoolSetAccess (peer access does not reach "
                "memory pools)"
              : "enable peer access (cudaDeviceEnablePeerAccess) or, for mapped virtual memory, "
                "grant it with cuMemSetAccess";
      static_cast<void>(std::snprintf(
          text, size,
          "graphstep simulated device: kernel %s on device %d: %s of memory of device %d at "
          "0x%" PRIxPTR ", offset %" PRIuPTR " in the %zu-byte %s at 0x%" PRIxPTR
          ", which device %d may not access: %s (a GPU reports cudaErrorIllegalAddress)\n",
          kernel_on_this_thread, kernel_device_on_this_thread, access, a.device, address,
          address - a.base, a.bytes, kind_name(a.kind), a.base, kernel_device_on_this_thread,
          remedy));
      return true;
    }
    if (is_device_memory(a) && kernel_on_this_thread == nullptr && device_work_depth == 0 &&
        address >= a.base && address < a.base + a.bytes) {
      static_cast<void>(std::snprintf(
          text, size,
          "graphstep simulated device: host code: %s of device memory at 0x%" PRIxPTR
          ", offset %" PRIuPTR " in the %zu-byte %s at 0x%" PRIxPTR
          ": device memory is not accessible from the host (a GPU faults too); copy it with "
          "cudaMemcpy, or use pinned host memory\n",
          access, address, address - a.base, a.bytes, kind_name(a.kind), a.base));
      return true;
    }
    if (!inside_mapping(a, address)) continue;
    auto const offset = static_cast<std::intptr_t>(address - a.base);
    static_cast<void>(std::snprintf(
        text, size,
        "graphstep simulated device: %s%s: out-of-bounds %s at 0x%" PRIxPTR ", offset %" PRIdPTR
        " in the %zu-byte %s at 0x%" PRIxPTR
        " (a GPU reports cudaErrorIllegalAddress; compute-sanitizer's memcheck names it)\n",
        prefix, who, access, address, offset, a.bytes, kind_name(a.kind), a.base));
    return true;
  }
  for (auto it = quarantine().rbegin(); it != quarantine().rend(); ++it) {
    if (!inside_mapping(*it, address)) continue;
    static_cast<void>(
        std::snprintf(text, size,
                      "graphstep simulated device: %s%s: %s at 0x%" PRIxPTR
                      " after free: inside the freed %zu-byte %s at 0x%" PRIxPTR
                      " (a GPU reports cudaErrorIllegalAddress or reads stale memory)\n",
                      prefix, who, access, address, it->bytes, kind_name(it->kind), it->base));
    return true;
  }
  return false;
}

// Device work on this thread touched closed device memory that it may reach: opens the piece
// around `address` and returns true (the access runs again and succeeds). Called with the
// platform lock held.
bool open_on_fault(std::uintptr_t address, bool write) {
  if (!device_work_on_this_thread || device_work_depth == 0) return false;
  if (open_piece const* const piece = open_piece_holding(address)) {
    // Open already: by another thread running blocks of the same grid after this access
    // faulted (it runs again), or with a protection that does not allow the access.
    return (piece->protection & (write ? PROT_WRITE : PROT_READ)) != 0;
  }
  // The allocation whose data pages hold the address: the last one based at or before it, or
  // the next one when the address is in the alignment slack before that one's base.
  auto const holds = [address](allocation const& a) {
    auto const [start, bytes] = data_pages(a);
    return address - start < bytes;
  };
  auto const& allocations = state().allocations;
  auto const next = allocations.upper_bound(address);
  allocation const* found = nullptr;
  if (next != allocations.end() && holds(next->second)) found = &next->second;
  if (found == nullptr && next != allocations.begin() && holds(std::prev(next)->second)) {
    found = &std::prev(next)->second;
  }
  if (found == nullptr) return false;
  allocation const& a = *found;
  if (!is_device_memory(a) || a.device_protection == PROT_NONE) return false;
  if (kernel_on_this_thread != nullptr && !accessible_from(a, kernel_device_on_this_thread)) {
    return false;
  }
  auto const [start, bytes] = data_pages(a);
  std::uintptr_t const piece_start = start + (address - start) / piece_bytes * piece_bytes;
  std::size_t const piece_size = std::min(piece_bytes, start + bytes - piece_start);
  if (open_count == open_pieces.size()) close_open_pieces();  // full: start over
  if (mprotect(reinterpret_cast<void*>(piece_start), piece_size, a.device_protection) != 0) {
    return false;
  }
  open_pieces[open_count++] = open_piece{piece_start, piece_size, a.device_protection};
  return true;
}

void on_fault(int signal, siginfo_t* info, void* context) {
  auto const address = reinterpret_cast<std::uintptr_t>(info->si_addr);
  std::array<char, 512> text{};
  bool ours = false;
  auto& mutex = state().mutex;
  // Kernels run with the lock held by this thread (recursive) or lent to it; host code may
  // fault while another thread holds it, and then the fault is passed on unnamed. The threads
  // running one grid's blocks share the lock, and may fault at once: they take turns here.
  if (mutex.try_lock()) {
    while (fault_turn.test_and_set(std::memory_order_acquire)) {
    }
    bool const write = write_fault(context);
    bool const opened = open_on_fault(address, write);
    ours = !opened && describe_fault(address, text.data(), text.size(), write ? "write" : "read");
    fault_turn.clear(std::memory_order_release);
    mutex.unlock();
    if (opened) return;
  }
  if (ours) {
    static_cast<void>(write(STDERR_FILENO, text.data(), std::strlen(text.data())));
    std::abort();
  }
  // Not ours: the handler installed before runs when the access faults again.
  static_cast<void>(sigaction(signal, &previous_action, nullptr));
}

void install_fault_handler() {
  static std::once_flag installed;
  std::call_once(installed, [] {
    struct sigaction action {};
    action.sa_sigaction = on_fault;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    static_cast<void>(sigaction(SIGSEGV, &action, &previous_action));
  });
}

}  // namespace

allocation map_guarded(std::size_t bytes, memory_kind kind, int device) {
  install_fault_handler();
  std::size_t const page = page_bytes();
  std::size_t const aligned = round_up(bytes, allocation_alignment);
  std::size_t const span = round_up(aligned, page);
  // A guard page on each side: the one after catches overruns, the one before keeps the
  // allocation from touching a neighbour's accessible pages.
  std::size_t const mapping_bytes = span + 2 * page;
  void* mapping =
      mmap(nullptr, mapping_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapping == MAP_FAILED) return {};
  auto const start = reinterpret_cast<std::uintptr_t>(mapping);
  if (mprotect(reinterpret_cast<void*>(start + page), span, PROT_READ | PROT_WRITE) != 0) {
    munmap(mapping, mapping_bytes);
    return {};
  }
  allocation a;
  a.base = start + page + (span - aligned);  // ends where the trailing guard page begins
  a.bytes = bytes;
  a.kind = kind;
  a.device = device;
  a.mapping = start;
  a.mapping_bytes = mapping_bytes;
  if (bytes <= poison_limit) {
#if defined(MADV_POPULATE_WRITE)
    // The pages made in one call, not a page fault for each (about a third less time for
    // 32 MiB); a kernel without the advice (before Linux 5.14) refuses it and they fault in.
    static_cast<void>(madvise(reinterpret_cast<void*>(start + page), span, MADV_POPULATE_WRITE));
#endif
    std::memset(reinterpret_cast<void*>(a.base), 0xFF, bytes);
  }
  if (is_device_memory(a)) apply_protection(a);
  return a;
}

void apply_protection(allocation const& a) {
  if (!is_device_memory(a)) return;
  // Closed, whatever the time: device work opens it with its new protection when it touches it.
  close_pieces_of(a);
  close_data_pages(a);
}

device_work::device_work() {
  if (device_work_depth++ == 0) {
    install_fault_handler();  // it opens what the work touches
    device_work_on_this_thread = true;
  }
}

device_work::~device_work() {
  if (--device_work_depth == 0) {
    close_open_pieces();
    device_work_on_this_thread = false;
  }
}

host_code_inside_device_work::host_code_inside_device_work()
    : depth_{std::exchange(device_work_depth, 0)},
      kernel_{std::exchange(kernel_on_this_thread, nullptr)},
      kernel_device_{std::exchange(kernel_device_on_this_thread, -1)} {
  if (depth_ > 0) {
    close_open_pieces();
    device_work_on_this_thread = false;
  }
}

host_code_inside_device_work::~host_code_inside_device_work() {
  device_work_depth = depth_;
  kernel_on_this_thread = kernel_;
  // Other work may have run on this thread meanwhile (a parked collective resumes later).
  kernel_device_on_this_thread = kernel_device_;
  if (depth_ > 0) device_work_on_this_thread = true;
}

void retire_guarded(allocation const& freed) {
  if (freed.mapping_bytes == 0) return;
  // Replacing the pages drops their contents; the addresses stay reserved and inaccessible.
  void* const replaced =
      mmap(reinterpret_cast<void*>(freed.mapping), freed.mapping_bytes, PROT_NONE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  if (replaced == MAP_FAILED) {
    munmap(reinterpret_cast<void*>(freed.mapping), freed.mapping_bytes);
    return;
  }
  auto& retired = quarantine();
  retired.push_back(freed);
  retired.back().backing.reset();
  if (retired.size() > quarantine_entries) {
    allocation const& oldest = retired.front();
    munmap(reinterpret_cast<void*>(oldest.mapping), oldest.mapping_bytes);
    retired.pop_front();
  }
}

bool accessible_from(allocation const& a, int device) {
  switch (a.kind) {
    case memory_kind::pinned_host: return true;
    case memory_kind::virtual_reservation: {
      auto const granted = a.access_by_device.find(device);
      return granted != a.access_by_device.end() && granted->second != PROT_NONE;
    }
    case memory_kind::device:
    case memory_kind::graph: break;
  }
  if (a.device == device) return true;
  if (a.pool != nullptr) {
    // Pool memory is reached as cudaMemPoolSetAccess allows: "memory pool allocation
    // accessibility does not follow cudaDeviceEnablePeerAccess" (CUDA Programming Guide, "Stream
    // Ordered Memory Allocator", "Device Accessibility for Multi-GPU Support").
    auto const granted = a.pool->access_by_device.find(device);
    return granted != a.pool->access_by_device.end() &&
           granted->second != cudaMemAccessFlagsProtNone;
  }
  return state().peer_access.count({device, a.device}) > 0;
}

device_work_identity device_work_here() noexcept {
  return {kernel_on_this_thread, kernel_device_on_this_thread};
}

lent_device_work::lent_device_work(device_work_identity const& work) noexcept
    : outer_{device_work_here()}, outer_work_{device_work_on_this_thread} {
  kernel_on_this_thread = work.kernel;
  kernel_device_on_this_thread = work.device;
  device_work_on_this_thread = true;
}

lent_device_work::~lent_device_work() {
  kernel_on_this_thread = outer_.kernel;
  kernel_device_on_this_thread = outer_.device;
  device_work_on_this_thread = outer_work_;
}

running_kernel::running_kernel(char const* name, int device)
    : outer_{kernel_on_this_thread}, outer_device_{kernel_device_on_this_thread} {
  install_fault_handler();  // a kernel given only null or host pointers is named too
  kernel_on_this_thread = name;
  kernel_device_on_this_thread = device;
  // What earlier work of this window opened and this kernel may not reach closes; the fault
  // handler opens nothing it may not reach.
  for (auto const& [base, a] : state().allocations) {
    if (is_device_memory(a) && !accessible_from(a, device)) close_pieces_of(a);
  }
}

running_kernel::~running_kernel() {
  kernel_on_this_thread = outer_;
  kernel_device_on_this_thread = outer_device_;
}

namespace {
// Graph allocations a launch has made and nobody has freed yet (by base address).
std::set<std::uintptr_t>& allocated_graph_memory() {
  // NOLINTNEXTLINE(cppcoreguidelines-owning-memory): never destroyed, like the platform
  static auto* const allocated = new std::set<std::uintptr_t>;
  return *allocated;
}
}  // namespace

graph_allocation_state graph_allocation(void const* base) {
  return allocated_graph_memory().count(reinterpret_cast<std::uintptr_t>(base)) != 0
             ? graph_allocation_state::allocated
             : graph_allocation_state::not_allocated;
}

void set_graph_allocation(void const* base, graph_allocation_state now) {
  auto const address = reinterpret_cast<std::uintptr_t>(base);
  if (now == graph_allocation_state::allocated) {
    allocated_graph_memory().insert(address);
  } else {
    allocated_graph_memory().erase(address);
  }
}

}  // namespace graphstep::sim::detail
