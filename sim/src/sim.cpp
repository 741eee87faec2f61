#include "graphstep/sim/sim.hpp"

#include <stdexcept>
#include <string>

#include "detail/environment.hpp"
#include "detail/runtime_state.hpp"

namespace graphstep::sim {

void set_race_mode(race_mode mode) {
  detail::lock_guard const lock{detail::state().mutex};
  detail::state().race_checking = mode;
}

race_mode current_race_mode() {
  detail::lock_guard const lock{detail::state().mutex};
  return detail::state().race_checking;
}

std::size_t threads_that_used_device(int device) {
  auto& devices = detail::state().devices;
  if (device < 0 || static_cast<std::size_t>(device) >= devices.size()) return 0;
  detail::device_state& state = *devices[static_cast<std::size_t>(device)];
  std::lock_guard<std::mutex> const lock{state.context_mutex};
  return state.context_threads.size();
}

std::vector<std::string> races() {
  detail::lock_guard const lock{detail::state().mutex};
  return detail::state().races.races();
}

void set_execution_mode(execution_mode mode, std::uint64_t seed) {
  detail::lock_guard const lock{detail::state().mutex};
  auto& p = detail::state();
  if (mode == execution_mode::immediate) {
    detail::run_ready(p.queued.size(), false);  // nothing may stay queued with nobody to run it
  }
  p.execution = mode;
  p.interleaving.seed(seed);
}

void set_block_threads(block_threads_setting setting) {
  if (setting.threads == 0 || setting.threads > detail::max_block_threads) {
    throw std::invalid_argument{
        "graphstep::sim::set_block_threads: threads is " + std::to_string(setting.threads) +
        "; give 1 (blocks one after another) to " + std::to_string(detail::max_block_threads)};
  }
  detail::lock_guard const lock{detail::state().mutex};
  detail::state().block_threads = setting;
}

block_threads_setting current_block_threads() {
  detail::lock_guard const lock{detail::state().mutex};
  return detail::state().block_threads;
}

execution_mode current_execution_mode() {
  detail::lock_guard const lock{detail::state().mutex};
  return detail::state().execution;
}

std::size_t advance(std::size_t operations) {
  detail::lock_guard const lock{detail::state().mutex};
  auto& p = detail::state();
  return detail::run_ready(operations, p.execution == execution_mode::interleaved);
}

std::size_t queued_operations() {
  detail::lock_guard const lock{detail::state().mutex};
  return detail::state().queued.size();
}

}  // namespace graphstep::sim
