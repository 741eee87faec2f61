#include "graphstep/sim/sim.hpp"

#include "sim/detail/runtime_state.hpp"

namespace graphstep::sim {

void set_race_mode(race_mode mode) {
  detail::lock_guard const lock{detail::state().mutex};
  detail::state().race_checking = mode;
}

race_mode current_race_mode() {
  detail::lock_guard const lock{detail::state().mutex};
  return detail::state().race_checking;
}

std::vector<std::string> races() {
  detail::lock_guard const lock{detail::state().mutex};
  return detail::state().races.races();
}

}  // namespace graphstep::sim
