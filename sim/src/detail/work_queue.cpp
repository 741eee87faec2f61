// Deferred execution: work enqueued to a stream waits in one queue, in the order it was
// enqueued, and runs when the host waits for it, when a test advances the device, or (in
// interleaved mode) at random moments. An operation may run once everything it is ordered after
// has run: its stream's earlier work and what its vector clock names (events waited for, the
// legacy stream's rule, earlier launches of the same executable, what the host had seen). Those
// are the orderings CUDA promises (CUDA Runtime API, "Stream synchronization behavior"; the
// stream-race checker keeps the same clocks), so every order this runs work in is one a GPU may.
//
// Work that waits for other processes (a collective: it completes only once every rank has
// issued it) runs on a fiber of its own. When its peers are not there yet it parks: its stream
// stops behind it, as a GPU's would behind a waiting kernel, while other streams and the host go
// on. In immediate mode such work is queued too, and whatever can run runs at every runtime call.

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <iterator>
#include <limits>
#include <thread>
#include <utility>
#include <vector>

#include "detail/block_workers.hpp"
#include "detail/fiber.hpp"
#include "detail/guarded_memory.hpp"
#include "detail/runtime_state.hpp"

namespace graphstep::sim::detail {

namespace {

thread_local parked_operation* current_parked = nullptr;  // the fiber this thread is running

unsigned long long completed_tick(timeline line) {
  auto const& completed = state().completed;
  auto const it = completed.find(line);
  return it == completed.end() ? 0 : it->second;
}

// A parked operation may go on once what it waits for holds; any other once its stream's
// previous operation has run, and everything its clock names.
bool ready(queued_work const& work) {
  if (work.parked != nullptr) {
    return !work.parked->running && work.parked->may_go_on && work.parked->may_go_on();
  }
  return std::all_of(work.operation.clock.begin(), work.operation.clock.end(),
                     [&](auto const& entry) {
                       auto const [line, tick] = entry;
                       if (line == 0) return true;  // the host's timeline: done when it was done
                       if (line == work.operation.stream) return completed_tick(line) + 1 >= tick;
                       return completed_tick(line) >= tick;
                     }) &&
         complete(work.runs_after);
}

void run_on_fiber(void* node) {
  execute(*static_cast<node_state const*>(node));
}

void finished(race_checker::operation const& operation) {
  unsigned long long& done = state().completed[operation.stream];
  done = std::max(done, operation.tick);
}

void run(std::list<queued_work>::iterator const& which) {
  auto& p = state();
  p.polls_since_progress = 0;
  p.races.resume(which->operation);
  if (which->parked == nullptr && !waits_for_other_processes(*which->node)) {
    queued_work work = std::move(*which);
    p.queued.erase(which);
    execute(*work.node);
    report_races();
    finished(work.operation);
    return;
  }
  // Stays in the queue (list positions are stable) until its fiber returns.
  if (which->parked == nullptr) {
    which->parked = std::make_unique<parked_operation>();
    which->parked->stack.start(run_on_fiber, which->node.get());
  }
  parked_operation& parked = *which->parked;
  parked.running = true;
  parked.may_go_on = nullptr;
  parked_operation* const outer = std::exchange(current_parked, &parked);
  parked.stack.resume();
  current_parked = outer;
  parked.running = false;
  report_races();
  if (!parked.stack.finished()) return;
  race_checker::operation const operation = which->operation;
  p.queued.erase(which);
  finished(operation);
}

std::list<queued_work>::iterator first_ready() {
  auto& queued = state().queued;
  return std::find_if(queued.begin(), queued.end(), ready);
}

// Nothing queued can go on: every operation waits, directly or through its stream, for a parked
// one. Lets go of the platform lock while other processes (and this one's other threads) move.
void wait_for_another_process() {
  auto& p = state();
  std::atomic<std::uint32_t>* wake = nullptr;
  std::uint32_t seen = 0;
  for (auto const& work : p.queued) {
    if (work.parked != nullptr && work.parked->wake != nullptr) {
      wake = work.parked->wake;
      seen = work.parked->wake_seen;
      break;
    }
  }
  unsigned const depth = p.mutex.release_all();
  if (wake != nullptr) {
    // FUTEX_WAIT on a shared mapping (not _PRIVATE): woken by a peer's FUTEX_WAKE, or after the
    // timeout, which bounds how late an abort on this process's other threads is noticed.
    timespec const timeout{0, 2'000'000};
    static_cast<void>(syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(wake), FUTEX_WAIT, seen,
                              &timeout, nullptr, 0));
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds{1});
  }
  p.mutex.reacquire(depth);
}

// Runs the first operation that can go on, or, when none can, waits for another process.
void run_or_wait() {
  if (auto const next = first_ready(); next != state().queued.end()) {
    run(next);
  } else {
    wait_for_another_process();
  }
}

}  // namespace

bool (*kernel_waits_for_other_processes)(kernel_task const& task) = nullptr;

bool waits_for_other_processes(graph_state const& graph) {  // NOLINT(misc-no-recursion)
  return kernel_waits_for_other_processes != nullptr &&
         std::any_of(graph.nodes.begin(), graph.nodes.end(),
                     [](auto const& node) {  // NOLINT(misc-no-recursion)
                       return waits_for_other_processes(*node);
                     });
}

bool waits_for_other_processes(node_state const& node) {  // NOLINT(misc-no-recursion)
  if (kernel_waits_for_other_processes == nullptr) return false;
  if (node.kernel != nullptr) return kernel_waits_for_other_processes(*node.kernel);
  if (node.child != nullptr && waits_for_other_processes(*node.child)) return true;
  return std::any_of(node.conditional.bodies.begin(), node.conditional.bodies.end(),
                     [](auto const& body) {  // NOLINT(misc-no-recursion)
                       return waits_for_other_processes(*body);
                     });
}

// A thread running blocks of a grid that another thread launched (block_workers.hpp) uses that
// thread's hold of the lock: the launcher waits for it, and calls from kernel code wait until
// every earlier block has finished, so no two of them run at once and they run in block order.
// The fault handler's try_lock does not wait (it must not block); it takes a lock of its own
// (guarded_memory.cpp).
void platform_mutex::lock() {
  order_after_earlier_blocks();
  if (platform_lock_lent()) return;
  if (owner_.load(std::memory_order_relaxed) == std::this_thread::get_id()) {
    ++depth_;
    return;
  }
  mutex_.lock();
  owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  depth_ = 1;
}

bool platform_mutex::try_lock() {
  if (platform_lock_lent()) return true;
  if (owner_.load(std::memory_order_relaxed) == std::this_thread::get_id()) {
    ++depth_;
    return true;
  }
  if (!mutex_.try_lock()) return false;
  owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  depth_ = 1;
  return true;
}

void platform_mutex::unlock() {
  if (platform_lock_lent()) return;
  if (--depth_ > 0) return;
  owner_.store(std::thread::id{}, std::memory_order_relaxed);
  mutex_.unlock();
}

unsigned platform_mutex::release_all() {
  // Not held by this thread: nothing to release (unlocking another's mutex is undefined).
  if (owner_.load(std::memory_order_relaxed) != std::this_thread::get_id()) return 0;
  unsigned const depth = std::exchange(depth_, 0);
  owner_.store(std::thread::id{}, std::memory_order_relaxed);
  mutex_.unlock();
  return depth;
}

void platform_mutex::reacquire(unsigned depth) {
  if (depth == 0) return;  // release_all released nothing
  mutex_.lock();
  owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  depth_ = depth;
}

bool defers(stream_state const& stream) {
  auto const& p = state();
  return (p.execution != execution_mode::immediate || !p.queued.empty()) &&
         stream.capture == nullptr;
}

bool complete(vector_clock const& clock) {
  return std::all_of(clock.begin(), clock.end(), [](auto const& entry) {
    return entry.first == 0 || completed_tick(entry.first) >= entry.second;
  });
}

void run_until_complete(vector_clock const& clock) {
  // Everything an operation is ordered after was enqueued before it, so the oldest queued
  // operation is always ready, unless it is parked waiting for another process.
  while (!complete(clock) && !state().queued.empty()) run_or_wait();
}

void run_until_at_most(std::size_t operations) {
  while (state().queued.size() > operations) run_or_wait();
}

bool run_without_waiting(vector_clock const& clock) {
  while (!complete(clock) && !state().queued.empty()) {
    auto const next = first_ready();
    if (next == state().queued.end()) return false;
    run(next);
  }
  return true;
}

std::size_t run_ready(std::size_t operations, bool at_random) {
  auto& p = state();
  std::size_t ran = 0;
  for (; ran < operations && !p.queued.empty(); ++ran) {
    if (!at_random) {
      auto const next = first_ready();
      if (next == p.queued.end()) break;
      run(next);
      continue;
    }
    std::vector<std::list<queued_work>::iterator> candidates;
    for (auto it = p.queued.begin(); it != p.queued.end(); ++it) {
      if (ready(*it)) candidates.push_back(it);
    }
    if (candidates.empty()) break;
    std::uniform_int_distribution<std::size_t> pick{0, candidates.size() - 1};
    run(candidates[pick(p.interleaving)]);
  }
  return ran;
}

void progress() {
  auto& p = state();
  if (p.queued.empty()) return;
  if (p.execution == execution_mode::immediate) {
    run_ready(std::numeric_limits<std::size_t>::max(), false);
    return;
  }
  if (p.execution != execution_mode::interleaved) return;
  // Zero, one or two operations per call: completion lags the host by a random amount.
  std::uniform_int_distribution<std::size_t> how_many{0, 2};
  run_ready(how_many(p.interleaving), true);
}

void answered_not_ready() {
  auto& p = state();
  if (p.execution != execution_mode::deferred) return;
  if (++p.polls_since_progress < polls_per_operation) return;
  p.polls_since_progress = 0;
  run_ready(1, false);
}

void wait_for_other_processes(std::function<bool()> const& may_go_on,
                              std::atomic<std::uint32_t>* wake) {
  while (!may_go_on()) {
    parked_operation* const parked = current_parked;
    if (parked == nullptr) {
      // Not on a fiber of its own (it cannot happen for work submitted to a stream): wait here,
      // without the platform lock.
      auto& p = state();
      unsigned const depth = p.mutex.release_all();
      std::this_thread::sleep_for(std::chrono::microseconds{200});
      p.mutex.reacquire(depth);
      continue;
    }
    parked->wake = wake;
    parked->wake_seen = wake != nullptr ? wake->load() : 0;
    if (may_go_on()) break;  // it changed before the word was read
    parked->may_go_on = may_go_on;
    // The host goes on while this waits: device memory closes again meanwhile.
    host_code_inside_device_work const parked_here;
    fiber::yield();
  }
}

}  // namespace graphstep::sim::detail
