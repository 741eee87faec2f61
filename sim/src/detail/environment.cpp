#include "detail/environment.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace graphstep::sim::detail {
namespace {

long long read_positive(char const* name, long long fallback, long long limit) {
  char const* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  long long const value = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || value < 1 || value > limit) {
    static_cast<void>(
        std::fprintf(stderr,
                     "graphstep simulated device: %s=%s is not a whole number in [1, %lld]; using "
                     "%lld\n",
                     name, text, limit, fallback));
    return fallback;
  }
  return value;
}

}  // namespace

race_mode initial_race_mode() {
  char const* text = std::getenv("GRAPHSTEP_SIM_RACE_CHECK");
  std::string const mode = text == nullptr ? "" : text;
  if (mode.empty() || mode == "abort") return race_mode::abort;
  if (mode == "report") return race_mode::report;
  if (mode == "off") return race_mode::off;
  static_cast<void>(std::fprintf(
      stderr,
      "graphstep simulated device: GRAPHSTEP_SIM_RACE_CHECK=%s is not abort, report or "
      "off; using abort\n",
      text));
  return race_mode::abort;
}

execution_setting initial_execution() {
  char const* text = std::getenv("GRAPHSTEP_SIM_EXECUTION");
  std::string const mode = text == nullptr ? "" : text;
  if (mode.empty() || mode == "immediate") return {};
  if (mode == "deferred") return {execution_mode::deferred, 0};
  std::string const interleaved = "interleaved:";
  if (mode.compare(0, interleaved.size(), interleaved) == 0) {
    std::string const seed = mode.substr(interleaved.size());
    char* end = nullptr;
    unsigned long long const value = std::strtoull(seed.c_str(), &end, 10);
    if (!seed.empty() && *end == '\0') return {execution_mode::interleaved, value};
  }
  static_cast<void>(std::fprintf(
      stderr,
      "graphstep simulated device: GRAPHSTEP_SIM_EXECUTION=%s is not immediate, deferred or "
      "interleaved:<seed>; using immediate\n",
      text));
  return {};
}

int simulated_device_count() {
  static int const count = static_cast<int>(read_positive("GRAPHSTEP_SIM_DEVICES", 1, 16));
  return count;
}

std::size_t simulated_memory_bytes() {
  static std::size_t const bytes =
      static_cast<std::size_t>(read_positive("GRAPHSTEP_SIM_MEMORY_MIB", 16384, 1 << 20)) << 20;
  return bytes;
}

block_threads_setting initial_block_threads() {
  unsigned const hardware = std::max(1U, std::thread::hardware_concurrency());
  block_threads_setting setting;
  setting.threads = static_cast<unsigned>(
      read_positive("GRAPHSTEP_SIM_BLOCK_THREADS", std::min(hardware, 8U), max_block_threads));
  setting.min_grid_threads = static_cast<std::size_t>(
      read_positive("GRAPHSTEP_SIM_BLOCK_THREADS_MIN_GRID", default_min_grid_threads, 1LL << 40));
  return setting;
}

}  // namespace graphstep::sim::detail
