#pragma once

// Every byte of device memory a simulated kernel reads, writes or updates atomically, for the
// stream-race checker; the same for host code run as stream work (host functions, host nodes,
// stream callbacks) and the pinned and managed memory it touches.
//
// Sources built by graphstep_cuda_sim_sources are compiled with the compiler's ThreadSanitizer
// instrumentation (-fsanitize=thread) but never linked with ThreadSanitizer's runtime: the
// simulator defines the entry points the instrumented code calls (__tsan_read4, __tsan_write8,
// __tsan_atomic32_fetch_add, ...; kernel_accesses.cpp). While a kernel runs, they record into
// the thread's kernel_accesses; at any other time they do nothing but the access itself (atomics)
// or return at once. Only memory that lies in a page of a simulator allocation is recorded: the
// kernel's locals, shared memory (thread-local here) and arguments are not device memory.

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "detail/race_checker.hpp"

namespace graphstep::sim::detail {

class kernel_accesses {
 public:
  static constexpr unsigned page_shift = 12;
  static constexpr std::size_t page_bytes = std::size_t{1} << page_shift;
  static constexpr std::size_t words_per_page = page_bytes / 64;

  /// The lowest `count` bits set (all 64 from 64 on).
  static constexpr std::uint64_t low_bits(std::size_t count) noexcept {
    return count >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << count) - 1;
  }

  /// Records an access of `bytes` bytes at `address`. Inline for the common case, an access
  /// within one 64-byte word of a page seen recently: every load and store of a kernel comes here.
  void record(std::uintptr_t address, std::size_t bytes, access_kind kind) noexcept {
    std::uintptr_t const number = address >> page_shift;
    std::size_t const offset = address & (page_bytes - 1);
    cached_page const& slot = cache_[number % cache_.size()];
    if (slot.number == number && offset % 64 + bytes <= 64) {
      if (slot.bits != nullptr) {
        slot.bits->kinds[static_cast<std::size_t>(kind)][offset / 64] |= low_bits(bytes)
                                                                         << (offset % 64);
      }
      return;
    }
    record_elsewhere(address, bytes, kind);
  }

  /// Adds what `other` recorded (another host thread's share of one grid's blocks).
  void merge(kernel_accesses const& other);

  /// Hands every maximal run of bytes to `race_checker::access`: written bytes as writes,
  /// atomically updated ones not written as updates, read ones not written as reads.
  void report_to(race_checker& checker) const;

 private:
  using page_bits = std::array<std::uint64_t, words_per_page>;
  struct page {
    // One bitmap per access_kind, indexed by it: read, write, atomic.
    std::array<page_bits, 3> kinds{};
  };
  struct cached_page {
    std::uintptr_t number{~std::uintptr_t{0}};
    page* bits{};  // null: the page holds no device memory
  };
  void record_elsewhere(std::uintptr_t address, std::size_t bytes, access_kind kind) noexcept;
  page* find(std::uintptr_t number) noexcept;

  // Direct-mapped by page number: big enough that a block's fiber stacks (the kernels' locals,
  // one page apart per thread) do not evict the device pages a kernel works on.
  std::array<cached_page, 1024> cache_{};
  std::unordered_map<std::uintptr_t, std::unique_ptr<page>> pages_;  // device pages touched
  std::unordered_set<std::uintptr_t> elsewhere_;                     // other pages touched
};

/// Whether the instrumented code calls this simulator's entry points: false when the program
/// also links ThreadSanitizer's runtime, whose entry points then win (its __tsan_init runs instead
/// of ours), and the kernels' accesses are not seen.
[[nodiscard]] bool kernel_accesses_hooked() noexcept;

/// Where the accesses of code running on this thread are recorded now, if anywhere.
[[nodiscard]] kernel_accesses* watched_here() noexcept;

/// While it lives, the accesses of code running on this thread are recorded into `into`.
class watching_kernel {
 public:
  explicit watching_kernel(kernel_accesses& into) noexcept;
  watching_kernel(watching_kernel const&) = delete;
  watching_kernel& operator=(watching_kernel const&) = delete;
  watching_kernel(watching_kernel&&) = delete;
  watching_kernel& operator=(watching_kernel&&) = delete;
  ~watching_kernel();

 private:
  kernel_accesses* outer_;
};

}  // namespace graphstep::sim::detail
