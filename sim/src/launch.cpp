// Running a grid on the host: every thread of every block, one block at a time per host thread.
//
// A block's thread 0 runs first, on a fiber. If it finishes without meeting a barrier, the
// block has none (CUDA Programming Guide, "Synchronization Functions": __syncthreads in
// conditional code is allowed only if the condition is the same across the whole block), and
// the other threads run as plain calls, one after another. If thread 0 stops at a barrier
// (__syncthreads or a warp-level intrinsic), every thread of the block runs as a fiber and the
// block advances barrier by barrier. A thread that meets a barrier the others do not, or
// finishes while others wait at one, is a divergent barrier: a fault here (on a GPU it hangs or
// gives undefined results).

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "graphstep/sim/device.hpp"  // first: it declares the built-in variables defined here
#include "detail/fiber.hpp"

// NOLINTBEGIN(cert-err58-cpp): dim3's constructor is constexpr and cannot throw
extern "C" {
thread_local uint3 threadIdx;
thread_local uint3 blockIdx;
thread_local dim3 blockDim;
thread_local dim3 gridDim;
thread_local int warpSize = 32;
}
// NOLINTEND(cert-err58-cpp)

namespace graphstep::sim::detail {

namespace {

enum class thread_status { ready, at_block_barrier, at_warp_barrier, done };

constexpr unsigned warp_lanes = 32;
constexpr std::size_t warp_slot_bytes = 16;

struct block_run {
  kernel_task const* task{};
  std::function<void()> const* body{};
  dim3 block_dim;
  unsigned threads{};
  std::vector<thread_status> status;
  std::vector<unsigned> warp_masks;  // the mask each thread waits with at a warp barrier
  std::vector<unsigned char> warp_slots;
  std::vector<unsigned char> dynamic_shared;
  std::exception_ptr failure;
  bool plain{};  // threads 1.. run as plain calls: a barrier there is divergent
};

thread_local block_run* current = nullptr;
thread_local unsigned current_thread_id = 0;
thread_local std::vector<std::unique_ptr<fiber>> fibers;  // reused from block to block

std::string where() {
  std::array<char, 160> text{};
  static_cast<void>(std::snprintf(
      text.data(), text.size(), "%s: thread (%u,%u,%u) of block (%u,%u,%u)", current->task->name(),
      threadIdx.x, threadIdx.y, threadIdx.z, blockIdx.x, blockIdx.y, blockIdx.z));
  return text.data();
}

void enter_thread(unsigned linear) {
  current_thread_id = linear;
  dim3 const& d = current->block_dim;
  threadIdx.x = linear % d.x;
  threadIdx.y = (linear / d.x) % d.y;
  threadIdx.z = linear / (d.x * d.y);
}

void fiber_entry(void* argument) {
  auto const linear = static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(argument));
  try {
    (*current->body)();
  } catch (...) {
    if (!current->failure) current->failure = std::current_exception();
  }
  current->status[linear] = thread_status::done;
}

fiber& fiber_for(unsigned linear) {
  while (fibers.size() <= linear) fibers.push_back(std::make_unique<fiber>());
  return *fibers[linear];
}

void resume(unsigned linear) {
  enter_thread(linear);
  fiber_for(linear).resume();
}

[[noreturn]] void divergent(std::string const& what) {
  throw kernel_fault{cudaErrorLaunchFailure, what};
}

// Releases the threads waiting at a barrier every thread it concerns has reached; returns
// whether any thread can run again.
bool release_barriers(block_run& run) {
  bool released = false;
  unsigned const n = run.threads;
  // Warp barriers: every existing lane in the mask is waiting.
  for (unsigned first = 0; first < n; first += warp_lanes) {
    unsigned const last = std::min(n, first + warp_lanes);
    for (unsigned t = first; t < last; ++t) {
      if (run.status[t] != thread_status::at_warp_barrier) continue;
      unsigned const mask = run.warp_masks[t];
      bool all = true;
      for (unsigned lane = 0; lane < last - first; ++lane) {
        if ((mask & (1U << lane)) == 0U) continue;
        thread_status const s = run.status[first + lane];
        if (s == thread_status::done) {
          divergent(std::string{run.task->name()} + ": lane " + std::to_string(lane) + " of warp " +
                    std::to_string(first / warp_lanes) +
                    " exited while its warp waited for it at a warp-level intrinsic");
        }
        if (s != thread_status::at_warp_barrier) all = false;
      }
      if (!all) continue;
      for (unsigned lane = 0; lane < last - first; ++lane) {
        if ((mask & (1U << lane)) != 0U) run.status[first + lane] = thread_status::ready;
      }
      released = true;
    }
  }
  if (released) return true;
  // The block barrier: every thread waits at it.
  bool any_waiting = false;
  bool any_done = false;
  bool all_waiting = true;
  for (thread_status const s : run.status) {
    any_waiting = any_waiting || s == thread_status::at_block_barrier;
    any_done = any_done || s == thread_status::done;
    all_waiting = all_waiting && s == thread_status::at_block_barrier;
  }
  if (all_waiting) {
    std::fill(run.status.begin(), run.status.end(), thread_status::ready);
    return true;
  }
  if (any_waiting && any_done) {
    divergent(std::string{run.task->name()} +
              ": some threads of a block finished while others wait at __syncthreads (a "
              "barrier inside code not every thread of the block runs)");
  }
  return false;
}

void run_block_as_fibers(block_run& run) {
  for (unsigned t = 1; t < run.threads; ++t) {
    fiber_for(t).start(&fiber_entry, reinterpret_cast<void*>(static_cast<std::uintptr_t>(t)));
    run.status[t] = thread_status::ready;
  }
  for (;;) {
    for (unsigned t = 0; t < run.threads; ++t) {
      if (run.status[t] == thread_status::ready) resume(t);
      if (run.failure) std::rethrow_exception(run.failure);
    }
    if (std::all_of(run.status.begin(), run.status.end(),
                    [](thread_status s) { return s == thread_status::done; })) {
      return;
    }
    if (!release_barriers(run)) {
      divergent(std::string{run.task->name()} +
                ": the threads of a block wait at different barriers (a deadlock on a GPU)");
    }
  }
}

void wait_at(thread_status barrier, unsigned mask) {
  if (current == nullptr) divergent("a barrier was called outside a kernel");
  if (current->plain) {
    divergent(where() +
              " reached a barrier that thread 0 of its block did not: a barrier "
              "inside code not every thread of the block runs");
  }
  current->status[current_thread_id] = barrier;
  current->warp_masks[current_thread_id] = mask;
  unsigned const me = current_thread_id;
  fiber::yield();
  enter_thread(me);
}

// A kernel launched while another runs on this host thread (from a host function) gets its own
// indices; the outer kernel's are restored after.
class saved_indices {
 public:
  saved_indices() noexcept = default;
  saved_indices(saved_indices const&) = delete;
  saved_indices& operator=(saved_indices const&) = delete;
  saved_indices(saved_indices&&) = delete;
  saved_indices& operator=(saved_indices&&) = delete;
  ~saved_indices() {
    current = block_;
    threadIdx = thread_;
    blockIdx = block_index_;
    blockDim = block_size_;
    gridDim = grid_size_;
  }

 private:
  block_run* block_{current};
  uint3 thread_{threadIdx};
  uint3 block_index_{blockIdx};
  dim3 block_size_{blockDim};
  dim3 grid_size_{gridDim};
};

}  // namespace

void run_grid(kernel_task const& task, std::function<void()> const& thread_body) {
  block_run run;
  run.task = &task;
  run.body = &thread_body;
  run.block_dim = task.block();
  run.threads = run.block_dim.x * run.block_dim.y * run.block_dim.z;
  run.status.assign(run.threads, thread_status::ready);
  run.warp_masks.assign(run.threads, 0U);
  run.warp_slots.assign(static_cast<std::size_t>(run.threads) * warp_slot_bytes, 0);
  saved_indices const restore_outer;
  current = &run;
  blockDim = task.block();
  gridDim = task.grid();
  dim3 const grid = task.grid();
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        blockIdx = uint3{x, y, z};
        // Shared memory starts as garbage, as on a GPU: 0xFF bytes (NaN for floats).
        run.dynamic_shared.assign(task.dynamic_shared_bytes(), 0xFF);
        std::fill(run.status.begin(), run.status.end(), thread_status::ready);
        run.plain = false;
        fiber_for(0).start(&fiber_entry, nullptr);
        resume(0);
        if (run.failure) std::rethrow_exception(run.failure);
        if (run.status[0] == thread_status::done) {
          run.plain = true;
          for (unsigned t = 1; t < run.threads; ++t) {
            enter_thread(t);
            thread_body();
          }
          run.plain = false;
        } else {
          run_block_as_fibers(run);
        }
      }
    }
  }
}

void sync_block() {
  wait_at(thread_status::at_block_barrier, 0U);
}

void sync_warp(unsigned mask) {
  if (current != nullptr && !current->plain) {
    unsigned const lanes =
        std::min(warp_lanes, current->threads - current_thread_id / warp_lanes * warp_lanes);
    unsigned const existing = lanes == warp_lanes ? ~0U : (1U << lanes) - 1U;
    wait_at(thread_status::at_warp_barrier, mask & existing);
    return;
  }
  wait_at(thread_status::at_warp_barrier, mask);
}

unsigned lane_id() noexcept {
  return current_thread_id % warp_lanes;
}

void* warp_slot(unsigned lane) noexcept {
  unsigned const first = current_thread_id / warp_lanes * warp_lanes;
  unsigned const thread = std::min(first + lane, current->threads - 1);
  return current->warp_slots.data() + static_cast<std::size_t>(thread) * warp_slot_bytes;
}

void* dynamic_shared_memory() noexcept {
  return current->dynamic_shared.data();
}

int sync_block_count(int predicate) {
  auto* slot = static_cast<int*>(
      static_cast<void*>(current->warp_slots.data() + current_thread_id * warp_slot_bytes));
  *slot = predicate != 0 ? 1 : 0;
  sync_block();
  int count = 0;
  for (unsigned t = 0; t < current->threads; ++t) {
    int value = 0;
    std::memcpy(&value, current->warp_slots.data() + t * warp_slot_bytes, sizeof value);
    count += value;
  }
  sync_block();  // nobody overwrites a slot before every thread has counted
  return count;
}

void trap(char const* what) {
  throw kernel_fault{cudaErrorLaunchFailure, where() + ": " + what};
}

void device_assert(char const* expression, char const* file, unsigned line) {
  throw kernel_fault{cudaErrorAssert, where() + ": assertion failed: " + expression + " (" + file +
                                          ":" + std::to_string(line) + ")"};
}

}  // namespace graphstep::sim::detail
