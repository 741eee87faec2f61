#include "detail/kernel_accesses.hpp"

#include <algorithm>
#include <atomic>
#include <iterator>
#include <mutex>
#include <utility>
#include <vector>

#include "detail/block_workers.hpp"
#include "detail/runtime_state.hpp"
#include "detail/symbol_table.hpp"

namespace graphstep::sim::detail {

namespace {

thread_local kernel_accesses* watched = nullptr;
std::atomic<bool> hooked{false};

template <std::size_t words>
void set_bits(std::array<std::uint64_t, words>& bits, std::size_t offset, std::size_t count) {
  std::size_t word = offset / 64;
  std::size_t shift = offset % 64;
  while (count > 0) {
    std::size_t const here = std::min<std::size_t>(count, 64 - shift);
    bits[word] |= kernel_accesses::low_bits(here) << shift;
    count -= here;
    ++word;
    shift = 0;
  }
}

// Whether any allocation or __device__ variable overlaps the page: allocations are disjoint and
// kept by base, so only the last one beginning before the page's end can.
bool holds_device_memory(std::uintptr_t begin, std::uintptr_t end) {
  auto const& allocations = state().allocations;
  auto it = allocations.lower_bound(end);
  if (it != allocations.begin() &&
      std::prev(it)->second.base + std::prev(it)->second.bytes > begin) {
    return true;
  }
  return symbol_overlaps(begin, end);
}

}  // namespace

kernel_accesses::page* kernel_accesses::find(std::uintptr_t number) noexcept {
  page* bits = nullptr;
  if (auto const it = pages_.find(number); it != pages_.end()) {
    bits = it->second.get();
  } else if (elsewhere_.count(number) == 0) {
    std::uintptr_t const begin = number << page_shift;
    if (holds_device_memory(begin, begin + page_bytes)) {
      bits = pages_.emplace(number, std::make_unique<page>()).first->second.get();
    } else {
      elsewhere_.insert(number);
    }
  }
  cache_[number % cache_.size()] = cached_page{number, bits};
  return bits;
}

void kernel_accesses::record_elsewhere(std::uintptr_t address, std::size_t bytes,
                                       access_kind kind) noexcept {
  while (bytes > 0) {
    std::uintptr_t const number = address >> page_shift;
    std::size_t const offset = address & (page_bytes - 1);
    std::size_t const here = std::min(bytes, page_bytes - offset);
    cached_page const& slot = cache_[number % cache_.size()];
    page* const bits = slot.number == number ? slot.bits : find(number);
    if (bits != nullptr) set_bits(bits->kinds[static_cast<std::size_t>(kind)], offset, here);
    address += here;
    bytes -= here;
  }
}

void kernel_accesses::merge(kernel_accesses const& other) {
  for (auto const& [number, theirs] : other.pages_) {
    auto& mine = pages_[number];
    if (!mine) {
      mine = std::make_unique<page>(*theirs);
      cache_[number % cache_.size()] = cached_page{};  // it may say the page holds nothing
      continue;
    }
    for (std::size_t k = 0; k < mine->kinds.size(); ++k) {
      for (std::size_t w = 0; w < words_per_page; ++w) mine->kinds[k][w] |= theirs->kinds[k][w];
    }
  }
}

void kernel_accesses::report_to(race_checker& checker) const {
  std::vector<std::uintptr_t> numbers;
  numbers.reserve(pages_.size());
  for (auto const& entry : pages_) numbers.push_back(entry.first);
  std::sort(numbers.begin(), numbers.end());
  for (access_kind const kind : {access_kind::write, access_kind::atomic, access_kind::read}) {
    std::uintptr_t run_begin = 0;
    std::uintptr_t run_end = 0;
    auto const flush = [&] {
      if (run_end > run_begin) {
        checker.access(reinterpret_cast<void const*>(run_begin), run_end - run_begin, kind);
      }
      run_begin = run_end = 0;
    };
    for (std::uintptr_t const number : numbers) {
      page const& p = *pages_.at(number);
      page_bits const& written = p.kinds[static_cast<std::size_t>(access_kind::write)];
      page_bits const& these = p.kinds[static_cast<std::size_t>(kind)];
      for (std::size_t w = 0; w < words_per_page; ++w) {
        // A written byte is reported as written only; an atomic or read one not written as such.
        std::uint64_t bits = kind == access_kind::write ? these[w] : these[w] & ~written[w];
        std::uintptr_t const word_begin = (number << page_shift) + w * 64;
        while (bits != 0) {
          auto const start = static_cast<unsigned>(__builtin_ctzll(bits));
          std::uint64_t const from_start = bits >> start;
          unsigned const length =
              ~from_start == 0 ? 64 - start : static_cast<unsigned>(__builtin_ctzll(~from_start));
          std::uintptr_t const begin = word_begin + start;
          if (run_end != begin) flush();
          if (run_end == 0) run_begin = begin;
          run_end = begin + length;
          bits &= ~(kernel_accesses::low_bits(length) << start);
        }
      }
    }
    flush();
  }
}

bool kernel_accesses_hooked() noexcept {
  return hooked.load(std::memory_order_relaxed);
}

kernel_accesses* watched_here() noexcept {
  return watched;
}

watching_kernel::watching_kernel(kernel_accesses& into) noexcept
    : outer_{std::exchange(watched, &into)} {}

watching_kernel::~watching_kernel() {
  watched = outer_;
}

namespace {

void note(void const volatile* address, std::size_t bytes, access_kind kind) noexcept {
  if (kernel_accesses* const into = watched; into != nullptr) {
    into->record(reinterpret_cast<std::uintptr_t>(address), bytes, kind);
  }
}

// An atomic or volatile access: where it reaches memory other blocks may reach (not a block's
// shared memory, a thread's locals or host memory of no allocation), the order of such accesses
// across blocks shows, and they happen in block order (block_workers.hpp).
void order_access(void const volatile* address) noexcept {
  if (!earlier_blocks_may_run()) return;
  auto const begin = reinterpret_cast<std::uintptr_t>(address);
  if (holds_device_memory(begin, begin + 1)) order_after_earlier_blocks();
}

// 16-byte atomics: the host may have no lock-free instruction for them (x86-64 without cx16),
// so they take one lock (a grid's blocks may run on several threads). Host code using 16-byte
// atomics on the same object without instrumentation would not take it.
std::mutex wide_atomics;

template <class T>
T atomic_load(T const volatile* a) {
  order_access(a);
  note(a, sizeof(T), access_kind::atomic);
  if constexpr (sizeof(T) == 16) {
    std::lock_guard<std::mutex> const lock{wide_atomics};
    return *a;
  } else {
    return __atomic_load_n(a, __ATOMIC_SEQ_CST);
  }
}

template <class T>
void atomic_store(T volatile* a, T v) {
  order_access(a);
  note(a, sizeof(T), access_kind::atomic);
  if constexpr (sizeof(T) == 16) {
    std::lock_guard<std::mutex> const lock{wide_atomics};
    *a = v;
  } else {
    __atomic_store_n(a, v, __ATOMIC_SEQ_CST);
  }
}

// Read-modify-write: `update(old)` is the new value; returns the old one.
template <class T, class Update>
T atomic_update(T volatile* a, Update update) {
  order_access(a);
  note(a, sizeof(T), access_kind::atomic);
  if constexpr (sizeof(T) == 16) {
    std::lock_guard<std::mutex> const lock{wide_atomics};
    T const old = *a;
    *a = update(old);
    return old;
  } else {
    T old = __atomic_load_n(a, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(a, &old, update(old), false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_RELAXED)) {
    }
    return old;
  }
}

// compare_exchange: stores `desired` if *a equals *expected, else loads *a into *expected.
template <class T>
bool atomic_compare_exchange(T volatile* a, T* expected, T desired) {
  order_access(a);
  note(a, sizeof(T), access_kind::atomic);
  if constexpr (sizeof(T) == 16) {
    std::lock_guard<std::mutex> const lock{wide_atomics};
    if (*a == *expected) {
      *a = desired;
      return true;
    }
    *expected = *a;
    return false;
  } else {
    return __atomic_compare_exchange_n(a, expected, desired, false, __ATOMIC_SEQ_CST,
                                       __ATOMIC_SEQ_CST);
  }
}

}  // namespace

}  // namespace graphstep::sim::detail

// The entry points ThreadSanitizer's instrumentation calls (the names and signatures of
// compiler-rt's sanitizer/tsan_interface.h and tsan_interface_atomic.h), defined here instead of
// by ThreadSanitizer's runtime. Memory orders are all taken as sequentially consistent.
// NOLINTBEGIN(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp,readability-identifier-naming)
namespace {
using graphstep::sim::detail::access_kind;
using graphstep::sim::detail::note;
using graphstep::sim::detail::order_access;
using a8 = char;
using a16 = short;
using a32 = int;
using a64 = long;
__extension__ using a128 = __int128;
using morder = int;
}  // namespace

extern "C" {

void __tsan_init() {
  graphstep::sim::detail::hooked.store(true, std::memory_order_relaxed);
}
void __tsan_func_entry(void* /*caller*/) {}
void __tsan_func_exit() {}
void __tsan_vptr_update(void** /*vptr*/, void* /*value*/) {}
void __tsan_vptr_read(void** /*vptr*/) {}
void __tsan_read_range(void* address, unsigned long bytes) {
  note(address, bytes, access_kind::read);
}
void __tsan_write_range(void* address, unsigned long bytes) {
  note(address, bytes, access_kind::write);
}

#define GRAPHSTEP_SIM_PLAIN_ACCESSES(n)           \
  void __tsan_read##n(void* address) {            \
    note(address, n, access_kind::read);          \
  }                                               \
  void __tsan_write##n(void* address) {           \
    note(address, n, access_kind::write);         \
  }                                               \
  void __tsan_unaligned_read##n(void* address) {  \
    note(address, n, access_kind::read);          \
  }                                               \
  void __tsan_unaligned_write##n(void* address) { \
    note(address, n, access_kind::write);         \
  }                                               \
  void __tsan_volatile_read##n(void* address) {   \
    order_access(address);                        \
    note(address, n, access_kind::read);          \
  }                                               \
  void __tsan_volatile_write##n(void* address) {  \
    order_access(address);                        \
    note(address, n, access_kind::write);         \
  }
GRAPHSTEP_SIM_PLAIN_ACCESSES(1)
GRAPHSTEP_SIM_PLAIN_ACCESSES(2)
GRAPHSTEP_SIM_PLAIN_ACCESSES(4)
GRAPHSTEP_SIM_PLAIN_ACCESSES(8)
GRAPHSTEP_SIM_PLAIN_ACCESSES(16)
#undef GRAPHSTEP_SIM_PLAIN_ACCESSES

// Clang's instrumentation calls these for memcpy, memmove and memset.
void* __tsan_memcpy(void* to, void const* from, unsigned long bytes) {
  note(from, bytes, access_kind::read);
  note(to, bytes, access_kind::write);
  return __builtin_memcpy(to, from, bytes);
}
void* __tsan_memmove(void* to, void const* from, unsigned long bytes) {
  note(from, bytes, access_kind::read);
  note(to, bytes, access_kind::write);
  return __builtin_memmove(to, from, bytes);
}
void* __tsan_memset(void* to, int value, unsigned long bytes) {
  note(to, bytes, access_kind::write);
  return __builtin_memset(to, value, bytes);
}

// GCC's instrumentation leaves memcpy, memmove and memset called by name (and the loops it turns
// into them, and std::copy of trivial types) to the C library, where ThreadSanitizer's runtime
// would intercept them. A target whose sources are instrumented by GCC links with --wrap for the
// three (graphstep_cuda_sim.cmake): every call from the objects of its link comes here first, and
// __real_* is the C library's. Without --wrap nothing calls these and the weak references stay
// unresolved.
void* __real_memcpy(void* to, void const* from, unsigned long bytes) __attribute__((weak));
void* __real_memmove(void* to, void const* from, unsigned long bytes) __attribute__((weak));
void* __real_memset(void* to, int value, unsigned long bytes) __attribute__((weak));
void* __wrap_memcpy(void* to, void const* from, unsigned long bytes) {
  note(from, bytes, access_kind::read);
  note(to, bytes, access_kind::write);
  return __real_memcpy(to, from, bytes);
}
void* __wrap_memmove(void* to, void const* from, unsigned long bytes) {
  note(from, bytes, access_kind::read);
  note(to, bytes, access_kind::write);
  return __real_memmove(to, from, bytes);
}
void* __wrap_memset(void* to, int value, unsigned long bytes) {
  note(to, bytes, access_kind::write);
  return __real_memset(to, value, bytes);
}

#define GRAPHSTEP_SIM_ATOMICS(n)                                                            \
  a##n __tsan_atomic##n##_load(a##n const volatile* a, morder /*order*/) {                  \
    return graphstep::sim::detail::atomic_load(a);                                          \
  }                                                                                         \
  void __tsan_atomic##n##_store(a##n volatile* a, a##n v, morder /*order*/) {               \
    graphstep::sim::detail::atomic_store(a, v);                                             \
  }                                                                                         \
  a##n __tsan_atomic##n##_exchange(a##n volatile* a, a##n v, morder /*order*/) {            \
    return graphstep::sim::detail::atomic_update(a, [v](a##n) { return v; });               \
  }                                                                                         \
  a##n __tsan_atomic##n##_fetch_add(a##n volatile* a, a##n v, morder /*order*/) {           \
    return graphstep::sim::detail::atomic_update(                                           \
        a, [v](a##n old) { return static_cast<a##n>(old + v); });                           \
  }                                                                                         \
  a##n __tsan_atomic##n##_fetch_sub(a##n volatile* a, a##n v, morder /*order*/) {           \
    return graphstep::sim::detail::atomic_update(                                           \
        a, [v](a##n old) { return static_cast<a##n>(old - v); });                           \
  }                                                                                         \
  a##n __tsan_atomic##n##_fetch_and(a##n volatile* a, a##n v, morder /*order*/) {           \
    return graphstep::sim::detail::atomic_update(                                           \
        a, [v](a##n old) { return static_cast<a##n>(old & v); });                           \
  }                                                                                         \
  a##n __tsan_atomic##n##_fetch_or(a##n volatile* a, a##n v, morder /*order*/) {            \
    return graphstep::sim::detail::atomic_update(                                           \
        a, [v](a##n old) { return static_cast<a##n>(old | v); });                           \
  }                                                                                         \
  a##n __tsan_atomic##n##_fetch_xor(a##n volatile* a, a##n v, morder /*order*/) {           \
    return graphstep::sim::detail::atomic_update(                                           \
        a, [v](a##n old) { return static_cast<a##n>(old ^ v); });                           \
  }                                                                                         \
  a##n __tsan_atomic##n##_fetch_nand(a##n volatile* a, a##n v, morder /*order*/) {          \
    return graphstep::sim::detail::atomic_update(                                           \
        a, [v](a##n old) { return static_cast<a##n>(~(old & v)); });                        \
  }                                                                                         \
  int __tsan_atomic##n##_compare_exchange_strong(a##n volatile* a, a##n* expected, a##n v,  \
                                                 morder /*order*/, morder /*on_failure*/) { \
    return graphstep::sim::detail::atomic_compare_exchange(a, expected, v) ? 1 : 0;         \
  }                                                                                         \
  int __tsan_atomic##n##_compare_exchange_weak(a##n volatile* a, a##n* expected, a##n v,    \
                                               morder /*order*/, morder /*on_failure*/) {   \
    return graphstep::sim::detail::atomic_compare_exchange(a, expected, v) ? 1 : 0;         \
  }                                                                                         \
  a##n __tsan_atomic##n##_compare_exchange_val(a##n volatile* a, a##n expected, a##n v,     \
                                               morder /*order*/, morder /*on_failure*/) {   \
    graphstep::sim::detail::atomic_compare_exchange(a, &expected, v);                       \
    return expected;                                                                        \
  }
GRAPHSTEP_SIM_ATOMICS(8)
GRAPHSTEP_SIM_ATOMICS(16)
GRAPHSTEP_SIM_ATOMICS(32)
GRAPHSTEP_SIM_ATOMICS(64)
GRAPHSTEP_SIM_ATOMICS(128)
#undef GRAPHSTEP_SIM_ATOMICS

void __tsan_atomic_thread_fence(morder /*order*/) {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
void __tsan_atomic_signal_fence(morder /*order*/) {
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

}  // extern "C"
// NOLINTEND(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp,readability-identifier-naming)
