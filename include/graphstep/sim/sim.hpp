#pragma once

/// @file
/// @brief Controls of the simulated CUDA device (graphstep::cuda_sim), for tests and CI.
///
/// A program linked to graphstep::cuda_sim instead of CUDA::cudart runs its CUDA runtime calls
/// and its kernels (built through graphstep_cuda_sim_sources) on the CPU. The platform's shape
/// comes from the environment: GRAPHSTEP_SIM_DEVICES (devices, default 1),
/// GRAPHSTEP_SIM_MEMORY_MIB (memory per device, default 16384) and GRAPHSTEP_SIM_RACE_CHECK
/// (`abort`, the default: the first stream race ends the process; `report`: races are printed
/// and kept for races(); `off`). docs/simulator.md lists what is modelled.

#include <string>
#include <vector>

namespace graphstep::sim {

/// @brief What the stream-race checker does with an unordered conflicting pair of accesses.
enum class race_mode {
  abort,   ///< print both operations and end the process
  report,  ///< print both operations and go on; races() returns them
  off      ///< do not track accesses
};

/// @brief Sets the race checker's mode for the rest of the process.
void set_race_mode(race_mode mode);
/// @brief The race checker's mode.
[[nodiscard]] race_mode current_race_mode();
/// @brief Every race found so far, one line each: both operations, their streams, the range.
[[nodiscard]] std::vector<std::string> races();

}  // namespace graphstep::sim
