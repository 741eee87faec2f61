// Running a grid on the host: every thread of every block, one block at a time per host thread.
//
// A block's threads run one after another, each on a fiber. A thread that finishes without
// meeting a barrier leaves its fiber to the next thread; once a thread stops at a barrier
// (__syncthreads or a warp-level intrinsic), the threads after it start on fibers of their own and
// the block advances barrier by barrier.
//
// Threads that exit do not hold up a barrier. PTX ISA, "exit": "As threads exit, barriers waiting
// on all threads are checked to see if the exiting threads are the only threads that have not
// yet made it to a barrier{.cta} for all threads in the CTA ... If the exiting threads are holding
// up the barrier, the barrier is released"; "barrier{.cta}": the executing thread waits "for
// non-exited threads of all other warps participating in the barrier to arrive". So
// `if (threadIdx.x >= 32) return; ... __syncthreads();` completes with the threads that are left.
// The CUDA Programming Guide ("Synchronization Functions") allows __syncthreads in conditional
// code "only if the conditional evaluates identically across the entire thread block, otherwise
// the code execution is likely to hang or produce unintended side effects": threads still running
// that wait at barriers the others never reach are a deadlock on a GPU, and a kernel fault here
// (cudaErrorLaunchFailure, naming the barriers), never a hang. Warp-level intrinsics follow the
// guide's rule for them: "all non-exited threads named in mask must execute" the same intrinsic.

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
  // Thread t runs on fibers[t - fiber_base]: threads that finish without meeting a barrier share
  // fiber 0, the first thread that stops at one keeps it, and the threads after it take their own.
  unsigned fiber_base{};
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
  fiber_for(linear - current->fiber_base).resume();
}

[[noreturn]] void divergent(std::string const& what) {
  throw kernel_fault{cudaErrorLaunchFailure, what};
}

// Releases the threads waiting at a barrier every thread it concerns has reached; returns
// whether any thread can run again.
bool release_barriers(block_run& run) {
  bool released = false;
  unsigned const n = run.threads;
  // Warp barriers: every lane in the mask that exists and has not exited is waiting.
  for (unsigned first = 0; first < n; first += warp_lanes) {
    unsigned const last = std::min(n, first + warp_lanes);
    for (unsigned t = first; t < last; ++t) {
      if (run.status[t] != thread_status::at_warp_barrier) continue;
      unsigned const mask = run.warp_masks[t];
      bool all = true;
      for (unsigned lane = 0; lane < last - first; ++lane) {
        if ((mask & (1U << lane)) == 0U) continue;
        thread_status const s = run.status[first + lane];
        if (s != thread_status::at_warp_barrier && s != thread_status::done) all = false;
      }
      if (!all) continue;
      for (unsigned lane = 0; lane < last - first; ++lane) {
        if ((mask & (1U << lane)) != 0U && run.status[first + lane] != thread_status::done) {
          run.status[first + lane] = thread_status::ready;
        }
      }
      released = true;
    }
  }
  if (released) return true;
  // The block barrier: every thread that has not exited waits at it.
  bool any_waiting = false;
  bool all_arrived = true;
  for (thread_status const s : run.status) {
    any_waiting = any_waiting || s == thread_status::at_block_barrier;
    all_arrived = all_arrived && (s == thread_status::at_block_barrier || s == thread_status::done);
  }
  if (any_waiting && all_arrived) {
    for (thread_status& s : run.status) {
      if (s == thread_status::at_block_barrier) s = thread_status::ready;
    }
    return true;
  }
  return false;
}

// Which threads wait where, for the message of a barrier that can never complete.
std::string waiting_threads(block_run const& run) {
  std::string block;
  std::string warp;
  for (unsigned t = 0; t < run.threads; ++t) {
    std::string* list = nullptr;
    if (run.status[t] == thread_status::at_block_barrier) list = &block;
    if (run.status[t] == thread_status::at_warp_barrier) list = &warp;
    if (list == nullptr) continue;
    if (list->size() > 100) {
      if (list->back() != '.') *list += " ...";
      continue;
    }
    *list += (list->empty() ? "" : " ") + std::to_string(t);
  }
  return "threads at __syncthreads: [" + block + "], at a warp-level intrinsic: [" + warp +
         "] (linear thread indices)";
}

// Thread `first` stopped at a barrier: the threads after it start on fibers of their own, and
// the block runs barrier by barrier.
void run_block_as_fibers(block_run& run, unsigned first) {
  for (unsigned t = first + 1; t < run.threads; ++t) {
    fiber_for(t - first).start(&fiber_entry,
                               reinterpret_cast<void*>(static_cast<std::uintptr_t>(t)));
    run.status[t] = thread_status::ready;
  }
  for (;;) {
    for (unsigned t = first; t < run.threads; ++t) {
      if (run.status[t] == thread_status::ready) resume(t);
      if (run.failure) std::rethrow_exception(run.failure);
    }
    if (std::all_of(run.status.begin(), run.status.end(),
                    [](thread_status s) { return s == thread_status::done; })) {
      return;
    }
    if (!release_barriers(run)) {
      divergent(std::string{run.task->name()} + " block (" + std::to_string(blockIdx.x) + "," +
                std::to_string(blockIdx.y) + "," + std::to_string(blockIdx.z) +
                "): a barrier that can never complete: running threads wait at barriers the "
                "others never reach (a deadlock on a GPU); " +
                waiting_threads(run));
    }
  }
}

void run_block(block_run& run) {
  for (unsigned t = 0; t < run.threads; ++t) {
    run.fiber_base = t;
    fiber_for(0).start(&fiber_entry, reinterpret_cast<void*>(static_cast<std::uintptr_t>(t)));
    resume(t);
    if (run.failure) std::rethrow_exception(run.failure);
    if (run.status[t] != thread_status::done) {
      run_block_as_fibers(run, t);
      return;
    }
  }
}

void wait_at(thread_status barrier, unsigned mask) {
  if (current == nullptr) divergent("a barrier was called outside a kernel");
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
        run_block(run);
      }
    }
  }
}

void sync_block() {
  wait_at(thread_status::at_block_barrier, 0U);
}

void sync_warp(unsigned mask) {
  if (current != nullptr) {
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

bool lane_exited(unsigned lane) noexcept {
  unsigned const thread = current_thread_id / warp_lanes * warp_lanes + lane;
  return thread >= current->threads || current->status[thread] == thread_status::done;
}

// "If the target thread is inactive, the retrieved value is undefined" (CUDA Programming Guide,
// "Warp Shuffle Functions"): a fault here rather than a made-up value.
void check_exchange_source(unsigned source) {
  if (source != lane_id() && lane_exited(source)) {
    trap("a warp shuffle read the value of a lane that has exited (undefined on a GPU)");
  }
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
    if (current->status[t] == thread_status::done) continue;  // exited: took no part
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
