// Deferred execution: work enqueued to a stream waits in one queue, in the order it was
// enqueued, and runs when the host waits for it, when a test advances the device, or (in
// interleaved mode) at random moments. An operation may run once everything it is ordered after
// has run: its stream's earlier work and what its vector clock names (events waited for, the
// legacy stream's rule, earlier launches of the same executable, what the host had seen). Those
// are the orderings CUDA promises (CUDA Runtime API, "Stream synchronization behavior"; the
// stream-race checker keeps the same clocks), so every order this runs work in is one a GPU may.

#include <algorithm>
#include <iterator>
#include <vector>

#include "sim/detail/runtime_state.hpp"

namespace graphstep::sim::detail {
namespace {

unsigned long long completed_tick(timeline line) {
  auto const& completed = state().completed;
  auto const it = completed.find(line);
  return it == completed.end() ? 0 : it->second;
}

// Its stream's previous operation has run, and so has everything its clock names.
bool ready(queued_work const& work) {
  return std::all_of(work.operation.clock.begin(), work.operation.clock.end(),
                     [&](auto const& entry) {
                       auto const [line, tick] = entry;
                       if (line == 0) return true;  // the host's timeline: done when it was done
                       if (line == work.operation.stream) return completed_tick(line) + 1 >= tick;
                       return completed_tick(line) >= tick;
                     });
}

void run(std::deque<queued_work>::iterator const& which) {
  auto& p = state();
  queued_work work = std::move(*which);
  p.queued.erase(which);
  p.races.resume(work.operation);
  execute(*work.node);
  report_races();
  unsigned long long& done = p.completed[work.operation.stream];
  done = std::max(done, work.operation.tick);
}

}  // namespace

bool defers(stream_state const& stream) {
  return state().execution != execution_mode::immediate && stream.capture == nullptr;
}

bool complete(vector_clock const& clock) {
  return std::all_of(clock.begin(), clock.end(), [](auto const& entry) {
    return entry.first == 0 || completed_tick(entry.first) >= entry.second;
  });
}

void run_until_complete(vector_clock const& clock) {
  // Everything an operation is ordered after was enqueued before it, so the oldest queued
  // operation is always ready: each pass runs one.
  while (!complete(clock) && !state().queued.empty()) {
    auto& queued = state().queued;
    auto const first_ready = std::find_if(queued.begin(), queued.end(), ready);
    run(first_ready);
  }
}

std::size_t run_ready(std::size_t operations, bool at_random) {
  auto& p = state();
  std::size_t ran = 0;
  for (; ran < operations && !p.queued.empty(); ++ran) {
    if (!at_random) {
      run(std::find_if(p.queued.begin(), p.queued.end(), ready));
      continue;
    }
    std::vector<std::size_t> candidates;
    for (std::size_t i = 0; i < p.queued.size(); ++i) {
      if (ready(p.queued[i])) candidates.push_back(i);
    }
    std::uniform_int_distribution<std::size_t> pick{0, candidates.size() - 1};
    run(p.queued.begin() + static_cast<std::ptrdiff_t>(candidates[pick(p.interleaving)]));
  }
  return ran;
}

void interleave() {
  auto& p = state();
  if (p.execution != execution_mode::interleaved || p.queued.empty()) return;
  // Zero, one or two operations per call: completion lags the host by a random amount.
  std::uniform_int_distribution<std::size_t> how_many{0, 2};
  run_ready(how_many(p.interleaving), true);
}

}  // namespace graphstep::sim::detail
