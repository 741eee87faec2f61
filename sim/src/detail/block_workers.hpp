#pragma once

// A grid's blocks run on several host threads: the thread that launched the grid and helpers
// kept for the purpose (GRAPHSTEP_SIM_BLOCK_THREADS in all). Blocks are independent on a GPU
// ("Thread blocks are required to execute independently. It must be possible to execute blocks
// in any order, in parallel or in series", CUDA Programming Guide, "Thread Hierarchy"), but what
// they share must come out as when they run one after another, in block order, so that a seed
// names one result:
//   - blocks are taken in order, so every block before a running one has started;
//   - an effect whose order across blocks shows (an atomic or volatile access to device memory,
//     a runtime call from a kernel) waits until every earlier block has finished
//     (order_after_earlier_blocks); from then on the block runs as if alone, and later blocks
//     wait for it before such an effect of theirs;
//   - a failed block stops the blocks after it that have not started, and the lowest failed
//     block's failure is the grid's.
// The launching thread holds the platform lock and waits for the helpers; a helper's runtime
// calls from kernel code use that lock as if they held it (platform_mutex), ordered as above.

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

namespace graphstep::sim::detail {

/// The blocks of one grid, shared by the threads that run them.
class block_order {
 public:
  explicit block_order(unsigned count);
  /// The next block for this thread, in order; none when every block is taken or a block
  /// before it failed.
  std::optional<unsigned> take();
  /// Block `block`, taken by this thread, has finished (with `failure` when it failed).
  void finish(unsigned block, std::exception_ptr failure);
  /// The failure of the lowest block that failed, if any (after every thread is done).
  [[nodiscard]] std::exception_ptr first_failure() const;

 private:
  friend void order_after_earlier_blocks() noexcept;
  void wait_for_blocks_before(unsigned block);

  std::mutex mutex_;
  std::condition_variable finished_more_;
  unsigned next_{};                      // guarded by mutex_
  unsigned stop_at_;                     // guarded: no block from here on starts (one failed)
  std::vector<unsigned char> finished_;  // guarded
  unsigned finished_prefix_{};           // guarded: blocks [0, finished_prefix_) have finished
  std::exception_ptr failure_;           // guarded: the failure of block stop_at_
};

/// Runs `work(false)` on this thread and `work(true)` on up to `helpers` other threads at once
/// (fewer where threads cannot be made), and returns when every one has returned. Helpers run
/// with the platform lock lent to them (platform_mutex) and the calling thread's device work
/// (lent_device_work: faults open device memory as for the caller). `work` must not throw.
void run_on_block_threads(unsigned helpers, std::function<void(bool on_helper)> const& work);

/// Before an effect whose order across blocks shows: waits until every block before the one
/// this thread runs has finished (nothing when it runs none, or has waited already).
void order_after_earlier_blocks() noexcept;
/// Whether order_after_earlier_blocks would wait: this thread runs a block that has not waited
/// yet for the blocks before it.
[[nodiscard]] bool earlier_blocks_may_run() noexcept;
/// Runs the block `block` of `order` on this thread while it lives (what
/// order_after_earlier_blocks waits for).
class running_block {
 public:
  running_block(block_order& order, unsigned block) noexcept;
  running_block(running_block const&) = delete;
  running_block& operator=(running_block const&) = delete;
  running_block(running_block&&) = delete;
  running_block& operator=(running_block&&) = delete;
  ~running_block();
};

/// Whether this thread runs blocks for a grid another thread launched, holding the platform
/// lock on this thread's behalf.
[[nodiscard]] bool platform_lock_lent() noexcept;

}  // namespace graphstep::sim::detail
