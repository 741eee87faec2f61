#pragma once

// The simulated platform's shape, read once from the environment:
//   GRAPHSTEP_SIM_DEVICES     number of devices (default 1)
//   GRAPHSTEP_SIM_MEMORY_MIB  memory per device in MiB (default 16384)
//   GRAPHSTEP_SIM_RACE_CHECK  abort (default), report or off
//   GRAPHSTEP_SIM_EXECUTION   immediate (default), deferred or interleaved:<seed>
//   GRAPHSTEP_SIM_BLOCK_THREADS          host threads that run a grid's blocks (default: the
//                                        host's hardware threads, at most 8)
//   GRAPHSTEP_SIM_BLOCK_THREADS_MIN_GRID GPU threads a grid needs to run on more than one host
//                                        thread (default 2048: below, waking a helper costs
//                                        more than it saves)

#include <cstddef>
#include <cstdint>

#include "graphstep/sim/sim.hpp"

namespace graphstep::sim::detail {
int simulated_device_count();
std::size_t simulated_memory_bytes();
race_mode initial_race_mode();
struct execution_setting {
  execution_mode mode{execution_mode::immediate};
  std::uint64_t seed{};
};
execution_setting initial_execution();
inline constexpr unsigned max_block_threads = 256;
inline constexpr std::size_t default_min_grid_threads = block_threads_setting{}.min_grid_threads;
block_threads_setting initial_block_threads();
}  // namespace graphstep::sim::detail
