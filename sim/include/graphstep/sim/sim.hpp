#pragma once

/// @file
/// @brief Controls of the simulated CUDA device (graphstep::cuda_sim), for tests and CI.
///
/// A program linked to graphstep::cuda_sim instead of CUDA::cudart runs its CUDA runtime calls
/// and its kernels (built through graphstep_cuda_sim_sources) on the CPU. The platform's shape
/// comes from the environment: GRAPHSTEP_SIM_DEVICES (devices, default 1),
/// GRAPHSTEP_SIM_MEMORY_MIB (memory per device, default 16384), GRAPHSTEP_SIM_RACE_CHECK
/// (`abort`, the default: the first stream race ends the process; `report`: races are printed
/// and kept for races(); `off`), GRAPHSTEP_SIM_EXECUTION (`immediate`, the default,
/// `deferred`, or `interleaved:<seed>`; see execution_mode) and GRAPHSTEP_SIM_BLOCK_THREADS and
/// GRAPHSTEP_SIM_BLOCK_THREADS_MIN_GRID (see set_block_threads). sim/docs/simulator.md lists
/// what is modelled.

#include <cstddef>
#include <cstdint>
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

/// @brief When work enqueued to a stream (outside a capture) runs.
///
/// Whatever the mode, work runs in an order CUDA allows: after everything it is ordered after
/// (stream order, event waits, the legacy stream's rule, earlier launches of the same
/// executable). Only the moment differs, and with it what queries see.
enum class execution_mode {
  /// At once, when it is enqueued (a GPU that is always idle and infinitely fast).
  immediate,
  /// Queued; it runs only when the host waits for it (a synchronization, a blocking copy,
  /// cudaFree) or when advance() runs it. cudaStreamQuery and cudaEventQuery answer
  /// cudaErrorNotReady while it waits: the not-yet-complete paths a GPU takes.
  deferred,
  /// Deferred, and at every runtime call a few queued operations whose dependencies are complete
  /// run, chosen at random from a seeded generator: another order of completion on each seed.
  interleaved
};

/// @brief Sets the execution mode (and the seed of `interleaved`). Work queued before a switch
/// to `immediate` runs first.
void set_execution_mode(execution_mode mode, std::uint64_t seed = 0);
/// @brief The execution mode.
[[nodiscard]] execution_mode current_execution_mode();
/// @brief Runs up to `operations` queued operations whose dependencies are complete (the oldest
/// first; in `interleaved` mode, chosen at random), as a GPU would advance. Returns how many ran.
std::size_t advance(std::size_t operations = 1);
/// @brief How many operations wait in the queue.
[[nodiscard]] std::size_t queued_operations();

/// @brief Who runs the blocks of a grid: up to `threads` host threads at once (1: one after
/// another), for grids of at least `min_grid_threads` GPU threads; smaller grids run on the
/// launching thread alone.
///
/// Only kernels whose source was built instrumented (graphstep_cuda_sim_sources) share their
/// blocks: what blocks share comes out as when they run one after another, in block order. Each
/// atomic or volatile access to memory other blocks can reach, and each runtime call from a
/// kernel, waits until every earlier block has finished; a fault is the lowest faulting
/// block's, and the blocks after it that have not started do not run. Kernels that communicate
/// through plain loads and stores between blocks (a race on a GPU) or print from several blocks
/// may see another order.
struct block_threads_setting {
  unsigned threads{1};
  std::size_t min_grid_threads{2048};
};

/// @brief Sets who runs a grid's blocks for the rest of the process (at first
/// GRAPHSTEP_SIM_BLOCK_THREADS, default the host's hardware threads up to 8, and
/// GRAPHSTEP_SIM_BLOCK_THREADS_MIN_GRID, default 2048). Throws std::invalid_argument when
/// `threads` is 0 or above 256.
void set_block_threads(block_threads_setting setting);
/// @brief Who runs a grid's blocks.
[[nodiscard]] block_threads_setting current_block_threads();

/// @brief What kernels have done on the simulated devices since the process started: for an
/// account of where a test's or a benchmark's time goes (sim/docs/simulator.md, "What it
/// costs"). Read it before and after the work in question and take the difference.
struct kernel_counts {
  std::uint64_t threads{};         ///< GPU threads run, every thread of every block
  std::uint64_t barrier_waits{};   ///< arrivals at __syncthreads and at warp intrinsics
  std::uint64_t fiber_switches{};  ///< host-thread switches from one stack to another
};
/// @brief The kernel counts so far, every grid that has finished included.
[[nodiscard]] kernel_counts current_kernel_counts();
/// @brief What was counted between two reads: `later - earlier`, field by field.
[[nodiscard]] inline kernel_counts operator-(kernel_counts const& later,
                                             kernel_counts const& earlier) noexcept {
  return {later.threads - earlier.threads, later.barrier_waits - earlier.barrier_waits,
          later.fiber_switches - earlier.fiber_switches};
}

/// @brief How many host threads have used `device`'s primary context: made it current with
/// cudaSetDevice, or made a runtime call that needed a context while it was current (device 0
/// on a thread that never set one, where CUDA initializes device 0's context). A thread that
/// touches device 0 by mistake costs a context's memory there on a GPU; 0 for a device that
/// does not exist.
[[nodiscard]] std::size_t threads_that_used_device(int device);

}  // namespace graphstep::sim
