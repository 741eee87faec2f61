#pragma once

// How the simulator_cost benchmarks time a step on the simulated device: the wall time per
// iteration as manual time, and the medians of three steps' CPU time (every host thread's: the
// simulator's work is CPU work) and wall time with the race checker on and off and with each
// grid's blocks on one host thread, for the counters compared in the same run; and what one
// step's kernels did (graphstep::sim::current_kernel_counts), with where its time goes.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <ctime>
#include <graphstep/sim/sim.hpp>

namespace bench {

inline double cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

inline double wall_seconds() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// One step's time: the process's CPU time (every host thread's) and the time a user waits.
struct step_time {
  double cpu{};
  double wall{};
};

// The median CPU time and the median wall time of three runs of `work`.
template <typename Work>
step_time median_step(Work&& work) {
  std::array<double, 3> cpu{};
  std::array<double, 3> wall{};
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    double const cpu_start = cpu_seconds();
    double const wall_start = wall_seconds();
    work();
    wall[i] = wall_seconds() - wall_start;
    cpu[i] = cpu_seconds() - cpu_start;
  }
  std::sort(cpu.begin(), cpu.end());
  std::sort(wall.begin(), wall.end());
  return {cpu[1], wall[1]};
}

struct simulated_cost {
  step_time checked;     // the race checker and the block threads as the process set them
  step_time unchecked;   // the same with the race checker off
  step_time one_thread;  // the race checker as set, every grid's blocks on one host thread
  unsigned block_threads{};
  graphstep::sim::kernel_counts counts;  // what one step's kernels did
};

// The CPU time of one thread at one __syncthreads on one host thread, in nanoseconds, measured
// now (simulator_barrier_bench.cu): what a step's barrier arrivals cost, estimated.
double ns_per_thread_barrier();

// While it lives, every grid's blocks run on one host thread; the setting is as it was after.
class one_block_thread {
 public:
  one_block_thread() {
    graphstep::sim::block_threads_setting one = before_;
    one.threads = 1;
    graphstep::sim::set_block_threads(one);
  }
  one_block_thread(one_block_thread const&) = delete;
  one_block_thread& operator=(one_block_thread const&) = delete;
  one_block_thread(one_block_thread&&) = delete;
  one_block_thread& operator=(one_block_thread&&) = delete;
  ~one_block_thread() { graphstep::sim::set_block_threads(before_); }

 private:
  graphstep::sim::block_threads_setting before_{graphstep::sim::current_block_threads()};
};

// Warms up with one `step`, times one per iteration of `state` (manual time: wall time), then
// measures the median step as the process set the simulator, with the race checker off, and
// with each grid's blocks on one host thread (and sets both back).
template <typename Step>
simulated_cost time_simulated_steps(benchmark::State& state, Step&& step) {
  step();
  for (auto _ : state) {
    double const start = wall_seconds();
    step();
    state.SetIterationTime(wall_seconds() - start);
  }
  simulated_cost cost;
  graphstep::sim::kernel_counts const before = graphstep::sim::current_kernel_counts();
  step();
  cost.counts = graphstep::sim::current_kernel_counts() - before;
  cost.checked = median_step(step);
  graphstep::sim::race_mode const mode = graphstep::sim::current_race_mode();
  graphstep::sim::set_race_mode(graphstep::sim::race_mode::off);
  cost.unchecked = median_step(step);
  graphstep::sim::set_race_mode(mode);
  cost.block_threads = graphstep::sim::current_block_threads().threads;
  one_block_thread const one;
  cost.one_thread = median_step(step);
  return cost;
}

// The counters both simulator_cost benchmarks report: the host's step (plain C++, one thread,
// CPU time) beside the simulated one.
inline void report_cost(benchmark::State& state, simulated_cost const& cost, double host) {
  state.counters["host_ms"] = host * 1e3;
  state.counters["simulated_ms"] = cost.checked.cpu * 1e3;
  state.counters["vs_host"] = cost.checked.cpu / host;
  state.counters["simulated_wall_ms"] = cost.checked.wall * 1e3;
  state.counters["vs_host_wall"] = cost.checked.wall / host;
  state.counters["race_check_off_ms"] = cost.unchecked.cpu * 1e3;
  state.counters["race_checker_cost"] = cost.checked.cpu / cost.unchecked.cpu;
  state.counters["block_threads"] = cost.block_threads;
  state.counters["one_thread_wall_ms"] = cost.one_thread.wall * 1e3;
  // One host thread against one: the simulator's own cost, without what sharing a grid's blocks
  // adds (hand-offs, and on a virtual machine the time a host takes a busy core away).
  state.counters["one_thread_cpu_ms"] = cost.one_thread.cpu * 1e3;
  state.counters["vs_host_one_thread"] = cost.one_thread.cpu / host;
  // Where a step's CPU time goes, estimated: its barrier arrivals at what one costs in a kernel
  // that does little else (on one host thread, as the step they are compared with); the race
  // checker's recording as what turning it off saves; the rest is the kernels' own code and
  // the simulator's launches, copies and library calls.
  state.counters["gpu_threads"] = static_cast<double>(cost.counts.threads);
  state.counters["barrier_waits"] = static_cast<double>(cost.counts.barrier_waits);
  state.counters["fiber_switches"] = static_cast<double>(cost.counts.fiber_switches);
  double const barriers =
      static_cast<double>(cost.counts.barrier_waits) * ns_per_thread_barrier() * 1e-9;
  double const barrier_share = barriers / cost.one_thread.cpu;
  double const access_share = 1.0 - cost.unchecked.cpu / cost.checked.cpu;
  state.counters["barrier_share"] = barrier_share;
  state.counters["access_share"] = access_share;
  state.counters["kernel_and_rest_share"] = 1.0 - barrier_share - access_share;
  state.counters["block_threads_speedup"] = cost.one_thread.wall / cost.checked.wall;
}

}  // namespace bench
