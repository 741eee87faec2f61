#pragma once

// How the simulator_cost benchmarks time a step on the simulated device: the process's CPU time
// (the simulator's work is CPU work), per iteration as manual time, and as the median of three
// steps with the race checker on and off, for the counters compared in the same run.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <ctime>
#include <graphstep/sim/sim.hpp>

namespace bench {

inline double cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// The median CPU time of three runs of `work`.
template <typename Work>
double median_cpu_seconds(Work&& work) {
  std::array<double, 3> times{};
  for (double& t : times) {
    double const start = cpu_seconds();
    work();
    t = cpu_seconds() - start;
  }
  std::sort(times.begin(), times.end());
  return times[1];
}

struct simulated_cost {
  double checked{};    // seconds per step, the race checker as the process set it
  double unchecked{};  // the same with the race checker off
};

// Warms up with one `step`, times one per iteration of `state` (manual time), then measures the
// median step with the race checker as it is and with it off (and sets it back).
template <typename Step>
simulated_cost time_simulated_steps(benchmark::State& state, Step&& step) {
  step();
  for (auto _ : state) {
    double const start = cpu_seconds();
    step();
    state.SetIterationTime(cpu_seconds() - start);
  }
  simulated_cost cost;
  cost.checked = median_cpu_seconds(step);
  graphstep::sim::race_mode const mode = graphstep::sim::current_race_mode();
  graphstep::sim::set_race_mode(graphstep::sim::race_mode::off);
  cost.unchecked = median_cpu_seconds(step);
  graphstep::sim::set_race_mode(mode);
  return cost;
}

// The counters both simulator_cost benchmarks report: the host's step beside the simulated one.
inline void report_cost(benchmark::State& state, simulated_cost const& cost, double host) {
  state.counters["host_ms"] = host * 1e3;
  state.counters["simulated_ms"] = cost.checked * 1e3;
  state.counters["vs_host"] = cost.checked / host;
  state.counters["race_check_off_ms"] = cost.unchecked * 1e3;
  state.counters["race_checker_cost"] = cost.checked / cost.unchecked;
}

}  // namespace bench
