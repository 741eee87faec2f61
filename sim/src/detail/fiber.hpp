#pragma once

// A fiber: a function run on its own stack that can stop part-way (yield) and be resumed by the
// thread that started it. The simulated device runs the threads of a block that meets at
// barriers as fibers of one host thread. On x86-64 a switch saves and restores only the
// registers the calling convention asks a callee to keep (swapcontext also saves the signal
// mask, a system call per switch); elsewhere ucontext. The stack has a guard page, so a kernel
// that overflows it faults instead of writing over another fiber's stack.

#include <cstddef>

#if defined(__SANITIZE_ADDRESS__)
#define GRAPHSTEP_SIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GRAPHSTEP_SIM_ASAN 1
#endif
#endif

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace graphstep::sim::detail {

class fiber {
 public:
  static constexpr std::size_t default_stack_bytes = std::size_t{256} << 10;

  /// The stack is reserved, not committed: pages are taken as they are touched.
  explicit fiber(std::size_t stack_bytes = default_stack_bytes);
  fiber(fiber const&) = delete;
  fiber& operator=(fiber const&) = delete;
  fiber(fiber&&) = delete;
  fiber& operator=(fiber&&) = delete;
  ~fiber();

  /// Prepares the fiber to run `entry(argument)` from the start of its stack.
  void start(void (*entry)(void*), void* argument);
  /// Runs the fiber until it yields or its entry returns.
  void resume();
  /// Called on the fiber: returns control to the thread that resumed it.
  static void yield();
  /// Whether hand_over switches fibers directly (x86-64 without AddressSanitizer, whose fiber
  /// bookkeeping follows resume and yield only); elsewhere callers yield instead.
  static constexpr bool hands_over =
#if defined(__x86_64__) && !defined(GRAPHSTEP_SIM_ASAN)
      true;
#else
      false;
#endif
  /// Called on the fiber: stops it and runs `next` (started, or stopped in yield or hand_over)
  /// in its place, one switch instead of a yield and a resume; the thread that resumed this fiber
  /// gets control back when a fiber yields or finishes. Only where hands_over.
  static void hand_over(fiber& next);
  /// Called on the fiber as its last act: it is finished, and `next` runs in its place, as in
  /// hand_over. Only where hands_over.
  [[noreturn]] static void finish_into(fiber& next);
  /// Asks the cache for the top of this stopped fiber's stack, where it resumes: the frames a
  /// switch pops and returns through.
  void prefetch_stack() const noexcept {
#if defined(__x86_64__)
    constexpr std::ptrdiff_t lines = 4;
    constexpr std::ptrdiff_t line_bytes = 64;
    auto const* top = static_cast<char const*>(stack_pointer_);
    for (std::ptrdiff_t line = 0; line < lines; ++line) {
      __builtin_prefetch(top + line * line_bytes, 1, 3);
    }
#endif
  }
  [[nodiscard]] bool finished() const noexcept {
    return finished_;
  }

 private:
  static void run_entry();
  // hand_over and finish_into: the running fiber stops, its stack pointer kept in `save`, and
  // `next` runs in its place, returning to the same thread when it yields or finishes.
  static void run_in_place(fiber& next, void** save);

  std::size_t stack_bytes_;
  void* mapping_{};  // guard page + stack
#if defined(__x86_64__)
  void* stack_pointer_{};   // where the fiber stopped
  void* caller_pointer_{};  // where the thread that resumed it stopped
#else
  ucontext_t context_{};
  ucontext_t caller_{};
#endif
  void (*entry_)(void*){};
  void* argument_{};
  bool finished_{true};
  // AddressSanitizer's bookkeeping of the stacks switched between.
  void* fake_stack_{};
  void const* caller_stack_bottom_{};
  std::size_t caller_stack_size_{};
};

}  // namespace graphstep::sim::detail
