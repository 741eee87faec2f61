#pragma once

// The simulated platform's shape, read once from the environment:
//   GRAPHSTEP_SIM_DEVICES     number of devices (default 1)
//   GRAPHSTEP_SIM_MEMORY_MIB  memory per device in MiB (default 16384)
//   GRAPHSTEP_SIM_RACE_CHECK  abort (default), report or off

#include <cstddef>

#include "graphstep/sim/sim.hpp"

namespace graphstep::sim::detail {
int simulated_device_count();
std::size_t simulated_memory_bytes();
race_mode initial_race_mode();
}  // namespace graphstep::sim::detail
