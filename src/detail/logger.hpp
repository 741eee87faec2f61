#pragma once

// The state behind graphstep's log functions (graphstep/log.hpp): a threshold and a sink. The
// library has one, made at the first use from GRAPHSTEP_LOG_LEVEL; tests make their own, to
// check what an environment value does without changing the process's environment.
// Plain C++, for the core and the shell alike.

#include <atomic>
#include <graphstep/log.hpp>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

namespace graphstep::detail {

/// The name of the environment variable that sets the threshold.
inline constexpr char const* log_level_variable = "GRAPHSTEP_LOG_LEVEL";

/// The threshold an environment value asks for, and what was wrong with it (empty when
/// nothing): no value means `warning`; a value that names no level means `warning` too, and the
/// problem says which values it may take.
struct log_environment {
  log_level threshold{log_level::warning};
  std::string problem;
};
[[nodiscard]] log_environment read_log_environment(char const* value);

/// One line, as the default sink writes it: "graphstep [warning]: <message>\n" (a final newline
/// of the message is not doubled).
[[nodiscard]] std::string format_log_line(log_level level, std::string_view message);

class logger {
 public:
  /// The threshold from `environment_value` (GRAPHSTEP_LOG_LEVEL's value, or null). A value
  /// that names no level is reported once, here, through `sink` (empty: stderr).
  explicit logger(char const* environment_value, log_sink sink = {});

  void set_threshold(log_level threshold) noexcept;
  [[nodiscard]] log_level threshold() const noexcept;
  [[nodiscard]] bool enabled(log_level level) const noexcept;
  log_sink set_sink(log_sink sink);
  void log(log_level level, std::string_view message) noexcept;

 private:
  std::atomic<int> threshold_;
  std::mutex sink_mutex_;  // one call to the sink at a time; replacing it waits for the call
  log_sink sink_;          // empty: stderr
};

/// The library's logger, made at its first use.
[[nodiscard]] logger& global_logger();

}  // namespace graphstep::detail

namespace graphstep::detail {

/// Logs the message `build()` makes, building it only when `level` passes the threshold. Never
/// throws, so destructors may call it: a message that cannot be built (no memory) is replaced
/// by one that says so.
template <class Build>
void log_lazily(log_level level, Build&& build) noexcept {
  if (!log_enabled(level)) return;
  try {
    graphstep::log(level, std::forward<Build>(build)());
  } catch (...) {
    graphstep::log(level, "a message could not be built (out of memory?)");
  }
}

}  // namespace graphstep::detail
