// Running a grid on the host: every thread of every block, one block at a time per host thread.
// A large grid's blocks are shared among host threads, in block order (block_workers.hpp).
//
// A block's threads run one after another on one fiber, without a switch between threads that
// meet no barrier; once a thread stops at a barrier (__syncthreads or a warp-level intrinsic), the
// threads after it start on fibers of their own and each runs from barrier to barrier. The
// arrival that completes a barrier releases it: the released threads run next, so the lanes of a
// warp stay together while their stacks are in cache, and the exchange of a shuffle or vote is
// made at the release, one barrier per intrinsic.
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
#include <atomic>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

// The built-in variables are defined here, where the simulator sets them: writable, unlike
// the read-only declaration kernels see (device.hpp).
// NOLINTNEXTLINE(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp): the toolkit's name
#define __STORAGE__ extern __thread
#include "detail/block_workers.hpp"
#include "detail/fiber.hpp"
#include "detail/kernel_accesses.hpp"
#include "detail/runtime_state.hpp"
#include "graphstep/sim/device.hpp"  // declares the built-in variables defined here
#include "graphstep/sim/sim.hpp"

// NOLINTBEGIN(cert-err58-cpp): dim3's constructor is constexpr and cannot throw
extern "C" {
__thread uint3 threadIdx;
__thread uint3 blockIdx;
__thread dim3 blockDim;
__thread dim3 gridDim;
__thread int warpSize = 32;
}
// NOLINTEND(cert-err58-cpp)

namespace graphstep::sim::detail {

namespace {

enum class thread_status { ready, at_block_barrier, at_warp_barrier, done };
// What a thread does at the barrier it waits at: the exchange is made when the barrier is
// released, for every thread it releases, so one barrier serves a shuffle, a vote or a count.
enum class barrier_work : unsigned char { none, exchange, ballot, count };

constexpr unsigned warp_lanes = 32;

// The threads ready to run, each at most once: released threads go to the front, so a warp that
// exchanges values runs on to its next exchange while its lanes' stacks are still in cache. A
// ring of a power-of-two size, so that a position wraps with a mask.
class ready_threads {
 public:
  void reset(unsigned threads) {
    unsigned capacity = 1;
    while (capacity < threads) capacity *= 2U;
    slots_.assign(capacity, 0U);
    wrap_ = capacity - 1U;
    head_ = 0;
    size_ = 0;
  }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  void push_back(unsigned thread) noexcept {
    slots_[(head_ + size_) & wrap_] = thread;
    ++size_;
  }
  void push_front(unsigned thread) noexcept {
    head_ = (head_ - 1U) & wrap_;
    slots_[head_] = thread;
    ++size_;
  }
  [[nodiscard]] unsigned front() const noexcept { return slots_[head_]; }
  unsigned pop_front() noexcept {
    unsigned const thread = slots_[head_];
    head_ = (head_ + 1U) & wrap_;
    --size_;
    return thread;
  }

 private:
  std::vector<unsigned> slots_;
  unsigned wrap_{};
  unsigned head_{};
  unsigned size_{};
};

// The process's kernel counts, to which each host thread adds its share of a grid at its end.
std::atomic<std::uint64_t> threads_run{0};
std::atomic<std::uint64_t> barrier_waits{0};
std::atomic<std::uint64_t> fiber_switches{0};

struct block_run {
  kernel_task const* task{};
  void (*body)(void const*){};
  void const* context{};
  dim3 block_dim;
  unsigned threads{};
  std::vector<thread_status> status;
  std::vector<uint3> thread_index;   // threadIdx of each linear index, worked out once
  std::vector<unsigned> warp_masks;  // the mask each thread waits with at a warp barrier
  std::vector<unsigned> waiting;     // per warp: the lanes waiting at a warp barrier
  // Per warp: the lanes waiting there do not all wait with one mask (code the guide leaves
  // undefined, modelled as before: each waiter's own mask decides its release).
  std::vector<unsigned char> masks_differ;
  // Per warp: a release waits for a lane outside the mask to stop (reads_a_running_outsider).
  std::vector<unsigned char> awaits_outsider;
  std::vector<unsigned> exited;             // per warp: the lanes whose threads have exited
  unsigned at_block_barrier{};              // threads waiting at __syncthreads
  unsigned done{};                          // threads that have exited
  std::vector<barrier_work> work;           // per thread, at the barrier it waits at
  std::vector<warp_value> given;     // per thread: the value (or vote) it brings to an exchange
  std::vector<warp_value> received;  // per thread: what the exchange (or ballot) gave it
  std::vector<unsigned> source;             // per thread: the lane it reads in an exchange
  std::vector<unsigned char> read_exited;   // per thread: that lane had exited
  int block_count{};                        // __syncthreads_count's result, for every thread
  ready_threads ready;
  std::vector<unsigned> released;  // the threads one release lets go, in ascending order
  std::vector<unsigned char> dynamic_shared;
  std::exception_ptr failure;
  // Thread t runs on fibers[t - fiber_base]: threads that finish without meeting a barrier share
  // fiber 0, the first thread that stops at one keeps it, and the threads after it take their own.
  // fiber_of[t] points there for the switches to look up: for thread 0 from the block's start,
  // for the others once the block runs on fibers.
  unsigned fiber_base{};
  std::vector<fiber*> fiber_of;
  bool stopped_at_barrier{};  // a thread stopped: the threads after it run on fibers of their own
  kernel_counts counts;       // this host thread's share of the grid, so far

  block_run() = default;
  block_run(block_run const&) = delete;
  block_run& operator=(block_run const&) = delete;
  block_run(block_run&&) = delete;
  block_run& operator=(block_run&&) = delete;
  // Its share of the grid joins the process's counts, a fault or not.
  ~block_run() {
    threads_run.fetch_add(counts.threads, std::memory_order_relaxed);
    barrier_waits.fetch_add(counts.barrier_waits, std::memory_order_relaxed);
    fiber_switches.fetch_add(counts.fiber_switches, std::memory_order_relaxed);
  }
};

thread_local block_run* current = nullptr;
thread_local unsigned current_thread_id = 0;
thread_local std::vector<std::unique_ptr<fiber>> fibers;  // reused from block to block

// No thread: an exit releases others and runs on no one's behalf.
constexpr unsigned no_thread = ~0U;

std::string where() {
  std::array<char, 160> text{};
  static_cast<void>(std::snprintf(
      text.data(), text.size(), "%s: thread (%u,%u,%u) of block (%u,%u,%u)", current->task->name(),
      threadIdx.x, threadIdx.y, threadIdx.z, blockIdx.x, blockIdx.y, blockIdx.z));
  return text.data();
}

void enter_thread(unsigned linear) {
  current_thread_id = linear;
  threadIdx = current->thread_index[linear];
}

fiber& fiber_for(unsigned linear) {
  while (fibers.size() <= linear) fibers.push_back(std::make_unique<fiber>());
  return *fibers[linear];
}

// A switch into the thread's fiber and, once it yields or ends, one back.
void resume(unsigned linear) {
  enter_thread(linear);
  current->counts.fiber_switches += 2;
  current->fiber_of[linear]->resume();
}

[[noreturn]] void divergent(std::string const& what) {
  throw kernel_fault{cudaErrorLaunchFailure, what};
}

// The lanes of warp `warp` that exist (the last warp of a block may be partial).
unsigned existing_lanes(block_run const& run, unsigned warp) noexcept {
  unsigned const lanes = std::min(warp_lanes, run.threads - warp * warp_lanes);
  return lanes == warp_lanes ? ~0U : (1U << lanes) - 1U;
}

// What a released thread's exchange gives it, computed when its barrier is released: every lane
// it reads has given its value by then and gives no other before this thread has read.
// `warp_exited`: the lanes of its warp that have exited or do not exist.
inline void finish_exchange(block_run& run, unsigned thread, unsigned warp_exited) {
  unsigned const first = thread / warp_lanes * warp_lanes;
  switch (run.work[thread]) {
    case barrier_work::exchange: {
      unsigned const from = run.source[thread];
      bool const gone = (warp_exited >> from & 1U) != 0U;
      // "If the target thread is inactive, the retrieved value is undefined" (CUDA Programming
      // Guide, "Warp Shuffle Functions"): the reading thread faults rather than make one up.
      run.read_exited[thread] = static_cast<unsigned char>(gone && from != thread - first);
      run.received[thread] = run.given[std::min(first + from, run.threads - 1)];
      break;
    }
    case barrier_work::ballot: {
      unsigned bits = 0;
      for (unsigned lane = 0; lane < warp_lanes; ++lane) {
        if ((run.warp_masks[thread] >> lane & 1U) == 0U || (warp_exited >> lane & 1U) != 0U) {
          continue;
        }
        if (run.given[first + lane].low != 0U) bits |= 1U << lane;
      }
      run.received[thread].low = bits;
      break;
    }
    case barrier_work::none:
    case barrier_work::count: break;
  }
}

// Makes `released` (ascending thread indices) ready. They run next, in that order, so the
// threads that met at a barrier go on together; `arriving`, when among them, is the thread
// whose arrival released them: it goes on at once when it comes first. Returns whether it does.
bool make_ready(block_run& run, std::vector<unsigned> const& released, unsigned arriving) {
  bool const goes_on = !released.empty() && released.front() == arriving;
  for (auto it = released.rbegin(); it != released.rend(); ++it) {
    run.status[*it] = thread_status::ready;
    if (goes_on && *it == arriving) continue;
    run.ready.push_front(*it);
  }
  return goes_on;
}

// Whether a lane of `lanes` (waiting at one warp barrier) shuffles from a lane outside its mask
// that is still running. Such a read is undefined on a GPU, and a fault when that lane has
// exited (finish_exchange); whether it exits is known only once it stops, at a barrier or at its
// end, so the release waits for that.
bool reads_a_running_outsider(block_run const& run, unsigned first, unsigned lanes) {
  for (unsigned bits = lanes; bits != 0U; bits &= bits - 1U) {
    unsigned const t = first + static_cast<unsigned>(__builtin_ctz(bits));
    if (run.work[t] != barrier_work::exchange) continue;
    unsigned const from = run.source[t];
    if ((run.warp_masks[t] >> from & 1U) != 0U || first + from >= run.threads) continue;
    if (run.status[first + from] == thread_status::ready) return true;
  }
  return false;
}

// Releases the threads of warp `warp` waiting at a warp barrier that every lane it concerns has
// reached or exited; returns whether `arriving` goes on at once.
bool release_warp(block_run& run, unsigned warp, unsigned arriving) {
  unsigned& waiting = run.waiting[warp];
  if (waiting == 0U) return false;
  unsigned const first = warp * warp_lanes;
  // The common case, every waiter with the arriving lane's mask: only that mask can be complete,
  // and when it names every lane still running, no waiter reads from outside it, so every
  // waiter goes without the search below.
  bool const one_mask =
      arriving != no_thread && run.masks_differ[warp] == 0U && run.awaits_outsider[warp] == 0U;
  if (one_mask && (run.warp_masks[arriving] & ~(waiting | run.exited[warp])) != 0U) return false;
  unsigned const running_lanes = existing_lanes(run, warp) & ~run.exited[warp];
  unsigned freed = 0;
  if (one_mask && (run.warp_masks[arriving] & running_lanes) == running_lanes) {
    freed = waiting;
    waiting = 0U;
  } else {
    run.awaits_outsider[warp] = 0U;
    for (unsigned pending = waiting; pending != 0U; pending &= pending - 1U) {
      auto const lane = static_cast<unsigned>(__builtin_ctz(pending));
      if ((waiting >> lane & 1U) == 0U) continue;  // released earlier in this pass
      unsigned const mask = run.warp_masks[first + lane];
      if ((mask & ~(waiting | run.exited[warp])) != 0U) continue;
      if (reads_a_running_outsider(run, first, mask & waiting)) {
        run.awaits_outsider[warp] = 1U;
        continue;
      }
      freed |= mask & waiting;
      waiting &= ~mask;
    }
    if (freed == 0U) return false;
    if (waiting == 0U) run.masks_differ[warp] = 0U;
  }
  std::vector<unsigned>& released = run.released;
  released.clear();
  for (unsigned bits = freed; bits != 0U; bits &= bits - 1U) {
    released.push_back(first + static_cast<unsigned>(__builtin_ctz(bits)));
  }
  for (unsigned const t : released) finish_exchange(run, t, ~running_lanes);
  return make_ready(run, released, arriving);
}

// Releases the block barrier once every thread that has not exited waits at it.
bool release_block(block_run& run, unsigned arriving) {
  if (run.at_block_barrier == 0 || run.at_block_barrier + run.done != run.threads) return false;
  // Every thread that has not exited waits here, so none is ready: the released threads are
  // queued in order, the arriving one going on at once when it comes first.
  int count = 0;
  bool goes_on = false;
  for (unsigned t = 0; t < run.threads; ++t) {
    if (run.status[t] != thread_status::at_block_barrier) continue;
    run.status[t] = thread_status::ready;
    if (run.work[t] == barrier_work::count) count += static_cast<int>(run.given[t].low);
    if (t == arriving && run.ready.empty()) {
      goes_on = true;
      continue;
    }
    run.ready.push_back(t);
  }
  run.block_count = count;
  run.at_block_barrier = 0;
  return goes_on;
}

// Runs thread `linear`'s body to its end, then lets the barriers its exit completes go.
void run_thread(block_run& run, unsigned linear) {
  try {
    run.body(run.context);
  } catch (...) {
    if (!run.failure) run.failure = std::current_exception();
  }
  run.status[linear] = thread_status::done;
  ++run.done;
  unsigned const warp = linear / warp_lanes;
  run.exited[warp] |= 1U << (linear % warp_lanes);
  // Threads that exit do not hold up a barrier (PTX ISA, "exit"; see the top of this file).
  if (run.waiting[warp] != 0U) release_warp(run, warp, no_thread);
  if (run.at_block_barrier != 0U) release_block(run, no_thread);
}

// The next ready thread, entered, and its fiber; the one after it is asked of the cache, as it
// runs soon.
fiber& enter_next_ready(block_run& run) {
  unsigned const next = run.ready.pop_front();
  if (!run.ready.empty()) run.fiber_of[run.ready.front()]->prefetch_stack();
  enter_thread(next);
  return *run.fiber_of[next];
}

// A thread of its own on a fiber of its own: started once an earlier thread stopped at a barrier.
// When it ends, the next ready thread runs in its place: one switch, not two through the loop of
// run_block_as_fibers (which takes over again when a fiber yields, or ends with none ready).
void fiber_entry(void* argument) {
  block_run& run = *current;
  run_thread(run, static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(argument)));
  if (fiber::hands_over && !run.failure && !run.ready.empty()) {
    ++run.counts.fiber_switches;
    fiber::finish_into(enter_next_ready(run));
  }
}

// The block's threads one after another on one fiber, without a switch between them, until one
// stops at a barrier: that one keeps the fiber (fiber_base names it) and finishes there when it
// is resumed; the threads after it get fibers of their own (run_block_as_fibers).
void sequential_entry(void* /*unused*/) {
  block_run& run = *current;
  for (unsigned t = 0; t < run.threads; ++t) {
    run.fiber_base = t;
    enter_thread(t);
    run_thread(run, t);
    if (run.failure || run.stopped_at_barrier) return;
  }
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
// each ready thread runs to its next barrier (or its end) in turn.
void run_block_as_fibers(block_run& run, unsigned first) {
  run.fiber_of[first] = &fiber_for(0);
  for (unsigned t = first + 1; t < run.threads; ++t) {
    fiber& own = fiber_for(t - first);
    own.start(&fiber_entry, reinterpret_cast<void*>(static_cast<std::uintptr_t>(t)));
    run.fiber_of[t] = &own;
    run.ready.push_back(t);
  }
  while (!run.ready.empty()) {
    resume(run.ready.pop_front());
    if (run.failure) std::rethrow_exception(run.failure);
  }
  if (run.done == run.threads) return;
  divergent(std::string{run.task->name()} + " block (" + std::to_string(blockIdx.x) + "," +
            std::to_string(blockIdx.y) + "," + std::to_string(blockIdx.z) +
            "): a barrier that can never complete: running threads wait at barriers the "
            "others never reach (a deadlock on a GPU); " +
            waiting_threads(run));
}

void run_block(block_run& run) {
  run.stopped_at_barrier = false;
  run.fiber_base = 0;
  fiber& first = fiber_for(0);
  first.start(&sequential_entry, nullptr);
  run.fiber_of[0] = &first;
  resume(0);
  if (run.failure) std::rethrow_exception(run.failure);
  if (first.finished()) return;
  run.stopped_at_barrier = true;
  run_block_as_fibers(run, run.fiber_base);
}

// The calling thread waits at a barrier; its arrival may release it and others. A thread whose
// arrival completes the barrier goes on without a switch when it comes first in the order.
void wait_at(thread_status barrier, unsigned mask, barrier_work work) {
  if (current == nullptr) divergent("a barrier was called outside a kernel");
  block_run& run = *current;
  unsigned const me = current_thread_id;
  ++run.counts.barrier_waits;
  run.status[me] = barrier;
  run.work[me] = work;
  bool goes_on = false;
  if (barrier == thread_status::at_warp_barrier) {
    run.warp_masks[me] = mask;  // read only for threads at warp barriers
    unsigned const warp = me / warp_lanes;
    if (unsigned const others = run.waiting[warp]; others != 0U) {
      auto const some_waiter = warp * warp_lanes + static_cast<unsigned>(__builtin_ctz(others));
      if (run.warp_masks[some_waiter] != mask) run.masks_differ[warp] = 1U;
    }
    run.waiting[warp] |= 1U << (me % warp_lanes);
    goes_on = release_warp(run, warp, me);
  } else {
    ++run.at_block_barrier;
    // This thread has stopped: a warp barrier that waited for it to stop may go now.
    unsigned const warp = me / warp_lanes;
    if (run.awaits_outsider[warp] != 0U) release_warp(run, warp, no_thread);
    goes_on = release_block(run, me);
  }
  if (goes_on) return;
  if (fiber::hands_over && !run.ready.empty()) {
    // The next ready thread runs in this one's place (as when a thread ends: fiber_entry).
    ++run.counts.fiber_switches;
    fiber::hand_over(enter_next_ready(run));
  } else {
    fiber::yield();
  }
  // Whoever resumed this thread entered it (resume, or the hand-over above in another thread).
}

// A warp barrier's mask, less the lanes that do not exist.
unsigned existing_in_mask(unsigned mask) {
  if (current == nullptr) return mask;
  return mask & existing_lanes(*current, current_thread_id / warp_lanes);
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

namespace {

// The state of one host thread's blocks of a grid, made once per grid and thread.
void prepare(block_run& run, kernel_task const& task, void (*thread_body)(void const*),
             void const* context) {
  run.task = &task;
  run.body = thread_body;
  run.context = context;
  run.block_dim = task.block();
  run.threads = run.block_dim.x * run.block_dim.y * run.block_dim.z;
  run.status.assign(run.threads, thread_status::ready);
  run.thread_index.resize(run.threads);
  for (unsigned t = 0; t < run.threads; ++t) {
    dim3 const& d = run.block_dim;
    run.thread_index[t] = uint3{t % d.x, (t / d.x) % d.y, t / (d.x * d.y)};
  }
  run.warp_masks.assign(run.threads, 0U);
  run.work.assign(run.threads, barrier_work::none);
  run.given.assign(run.threads, warp_value{});
  run.received.assign(run.threads, warp_value{});
  run.source.assign(run.threads, 0U);
  run.read_exited.assign(run.threads, 0U);
  run.fiber_of.assign(run.threads, nullptr);
  current = &run;
  blockDim = task.block();
  gridDim = task.grid();
}

void run_block_at(block_run& run, uint3 index) {
  unsigned const warps = (run.threads + warp_lanes - 1) / warp_lanes;
  blockIdx = index;
  // Shared memory starts as garbage, as on a GPU: 0xFF bytes (NaN for floats).
  run.dynamic_shared.assign(run.task->dynamic_shared_bytes(), 0xFF);
  std::fill(run.status.begin(), run.status.end(), thread_status::ready);
  run.waiting.assign(warps, 0U);
  run.exited.assign(warps, 0U);
  run.masks_differ.assign(warps, 0U);
  run.awaits_outsider.assign(warps, 0U);
  run.at_block_barrier = 0;
  run.done = 0;
  run.failure = nullptr;
  run.ready.reset(run.threads);
  run.counts.threads += run.threads;
  run_block(run);
}

// Block `linear` of `grid`, x fastest, as the serial loops visit them.
uint3 block_index(dim3 grid, unsigned linear) {
  return uint3{linear % grid.x, linear / grid.x % grid.y, linear / (grid.x * grid.y)};
}

// This thread's share of a grid run on several: blocks taken in order until none is left.
void run_blocks_in_order(block_order& order, kernel_task const& task,
                         void (*thread_body)(void const*), void const* context) {
  block_run run;
  saved_indices const restore_outer;
  prepare(run, task, thread_body, context);
  while (std::optional<unsigned> const block = order.take()) {
    std::exception_ptr failure;
    {
      running_block const here{order, *block};
      try {
        run_block_at(run, block_index(task.grid(), *block));
      } catch (...) {
        failure = std::current_exception();
      }
    }
    order.finish(*block, failure);
  }
}

// Whether the grid's blocks run on several host threads. Only where the kernel's source was
// instrumented: its atomic and volatile accesses then reach the simulator, which keeps them in
// block order (block_workers.hpp); elsewhere they would not.
bool shares_blocks(kernel_task const& task) {
  dim3 const grid = task.grid();
  dim3 const block = task.block();
  std::size_t const blocks = std::size_t{grid.x} * grid.y * grid.z;
  block_threads_setting const& setting = state().block_threads;
  return setting.threads > 1 && blocks > 1 && blocks <= std::numeric_limits<unsigned>::max() &&
         task.accesses_instrumented() && current == nullptr && !platform_lock_lent() &&
         blocks * block.x * block.y * block.z >= setting.min_grid_threads;
}

void run_grid_on_threads(kernel_task const& task, void (*thread_body)(void const*),
                         void const* context) {
  dim3 const grid = task.grid();
  block_order order{grid.x * grid.y * grid.z};
  kernel_accesses* const watched = watched_here();
  std::mutex helpers_done;
  // Guarded by helpers_done: what the helpers recorded, and a failure outside any block (the
  // host out of memory).
  std::vector<std::unique_ptr<kernel_accesses>> helpers_accesses;
  std::exception_ptr outside_blocks;
  run_on_block_threads(state().block_threads.threads - 1, [&](bool on_helper) {
    try {
      if (!on_helper) {
        run_blocks_in_order(order, task, thread_body, context);
        return;
      }
      std::unique_ptr<kernel_accesses> accesses;
      {
        std::optional<watching_kernel> watching;
        if (watched != nullptr) {
          accesses = std::make_unique<kernel_accesses>();
          watching.emplace(*accesses);
        }
        run_blocks_in_order(order, task, thread_body, context);
      }
      std::lock_guard<std::mutex> const lock{helpers_done};
      if (accesses) helpers_accesses.push_back(std::move(accesses));
    } catch (...) {
      std::lock_guard<std::mutex> const lock{helpers_done};
      if (!outside_blocks) outside_blocks = std::current_exception();
    }
  });
  for (auto const& accesses : helpers_accesses) watched->merge(*accesses);
  if (std::exception_ptr const failure = order.first_failure()) std::rethrow_exception(failure);
  if (outside_blocks) std::rethrow_exception(outside_blocks);
}

}  // namespace

void run_grid(kernel_task const& task, void (*thread_body)(void const*), void const* context) {
  if (shares_blocks(task)) {
    run_grid_on_threads(task, thread_body, context);
    return;
  }
  block_run run;
  saved_indices const restore_outer;
  prepare(run, task, thread_body, context);
  dim3 const grid = task.grid();
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) run_block_at(run, uint3{x, y, z});
    }
  }
}

void sync_block() {
  wait_at(thread_status::at_block_barrier, 0U, barrier_work::none);
}

void sync_warp(unsigned mask) {
  wait_at(thread_status::at_warp_barrier, existing_in_mask(mask), barrier_work::none);
}

warp_value exchange_in_warp(unsigned mask, warp_value value, unsigned from) {
  if (current == nullptr) divergent("a warp shuffle was called outside a kernel");
  block_run& run = *current;
  unsigned const me = current_thread_id;
  run.given[me] = value;
  run.source[me] = from;
  wait_at(thread_status::at_warp_barrier, existing_in_mask(mask), barrier_work::exchange);
  if (run.read_exited[me] != 0U) {
    trap("a warp shuffle read the value of a lane that has exited (undefined on a GPU)");
  }
  return run.received[me];
}

unsigned ballot_in_warp(unsigned mask, int predicate) {
  if (current == nullptr) divergent("a warp vote was called outside a kernel");
  block_run& run = *current;
  unsigned const me = current_thread_id;
  run.given[me].low = predicate != 0 ? 1U : 0U;
  // The vote counts the lanes of the mask as given, exited or not there at all count as 0.
  wait_at(thread_status::at_warp_barrier, existing_in_mask(mask), barrier_work::ballot);
  return static_cast<unsigned>(run.received[me].low);
}

unsigned lane_id() noexcept {
  return current_thread_id % warp_lanes;
}

void* dynamic_shared_memory() noexcept {
  return current->dynamic_shared.data();
}

int sync_block_count(int predicate) {
  if (current == nullptr) divergent("a barrier was called outside a kernel");
  block_run& run = *current;
  run.given[current_thread_id].low = predicate != 0 ? 1U : 0U;
  wait_at(thread_status::at_block_barrier, 0U, barrier_work::count);
  return run.block_count;
}

void trap(char const* what) {
  throw kernel_fault{cudaErrorLaunchFailure, where() + ": " + what};
}

void device_assert(char const* expression, char const* file, unsigned line) {
  throw kernel_fault{cudaErrorAssert, where() + ": assertion failed: " + expression + " (" + file +
                                          ":" + std::to_string(line) + ")"};
}

}  // namespace graphstep::sim::detail

namespace graphstep::sim {

kernel_counts current_kernel_counts() {
  return kernel_counts{detail::threads_run.load(std::memory_order_relaxed),
                       detail::barrier_waits.load(std::memory_order_relaxed),
                       detail::fiber_switches.load(std::memory_order_relaxed)};
}

}  // namespace graphstep::sim
