// graphstep_core: plain C++, includes no CUDA header.
#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <graphstep/error.hpp>
#include <graphstep/log.hpp>
#include <utility>

#include "detail/logger.hpp"

namespace graphstep {
namespace detail {
namespace {

constexpr std::array<log_level, 5> all_levels{log_level::off, log_level::error,
                                              log_level::warning, log_level::info,
                                              log_level::debug};

// Set while this thread is inside a call to a sink: a message the sink logs itself goes to
// stderr, and a sink replacement from there is refused (it would wait for itself).
thread_local bool in_sink = false;  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

void write_to_stderr(log_level level, std::string_view message) noexcept {
  // One call, so that stdio's lock keeps the line whole among other threads' output.
  while (!message.empty() && message.back() == '\n') message.remove_suffix(1);
  static_cast<void>(std::fprintf(stderr, "graphstep [%s]: %.*s\n", name(level),
                                 static_cast<int>(message.size()), message.data()));
}

}  // namespace

log_environment read_log_environment(char const* value) {
  log_environment out;
  if (value == nullptr || *value == '\0') return out;
  if (auto const level = parse_log_level(value)) {
    out.threshold = *level;
    return out;
  }
  out.problem = std::string{log_level_variable} + " is \"" + value +
                "\", which names no log level: give one of off, error, warning, info or debug "
                "(case does not matter); using warning";
  return out;
}

std::string format_log_line(log_level level, std::string_view message) {
  while (!message.empty() && message.back() == '\n') message.remove_suffix(1);
  std::string line = "graphstep [";
  line += name(level);
  line += "]: ";
  line += message;
  line += '\n';
  return line;
}

logger::logger(char const* environment_value, log_sink sink)
    : threshold_{static_cast<int>(log_level::warning)}, sink_{std::move(sink)} {
  log_environment const environment = read_log_environment(environment_value);
  threshold_.store(static_cast<int>(environment.threshold), std::memory_order_relaxed);
  // Said once: the environment is read once, when the logger is made.
  if (!environment.problem.empty()) log(log_level::warning, environment.problem);
}

void logger::set_threshold(log_level threshold) noexcept {
  threshold_.store(static_cast<int>(threshold), std::memory_order_relaxed);
}

log_level logger::threshold() const noexcept {
  return static_cast<log_level>(threshold_.load(std::memory_order_relaxed));
}

bool logger::enabled(log_level level) const noexcept {
  return level != log_level::off &&
         static_cast<int>(level) <= threshold_.load(std::memory_order_relaxed);
}

log_sink logger::set_sink(log_sink sink) {
  GRAPHSTEP_EXPECTS(!in_sink,
                    "set_log_sink was called from inside a log sink's call; replace the sink "
                    "outside of it");
  std::lock_guard const lock{sink_mutex_};
  std::swap(sink, sink_);
  return sink;
}

void logger::log(log_level level, std::string_view message) noexcept {
  if (!enabled(level)) return;
  if (in_sink) {
    write_to_stderr(level, message);
    return;
  }
  try {
    std::lock_guard const lock{sink_mutex_};
    if (!sink_) {
      write_to_stderr(level, message);
      return;
    }
    in_sink = true;
    try {
      sink_(level, message);
    } catch (std::exception const& e) {
      in_sink = false;
      write_to_stderr(log_level::error, std::string{"the log sink threw: "} + e.what());
      write_to_stderr(level, message);
    } catch (...) {
      in_sink = false;
      write_to_stderr(log_level::error, "the log sink threw an exception that is no std::exception");
      write_to_stderr(level, message);
    }
    in_sink = false;
  } catch (...) {  // the lock failed, or a message could not be built: stderr still works
    in_sink = false;
    write_to_stderr(level, message);
  }
}

logger& global_logger() {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read once, while no thread of ours sets it
  static logger instance{std::getenv(log_level_variable)};
  return instance;
}

}  // namespace detail

char const* name(log_level level) noexcept {
  switch (level) {
    case log_level::off: return "off";
    case log_level::error: return "error";
    case log_level::warning: return "warning";
    case log_level::info: return "info";
    case log_level::debug: return "debug";
  }
  return "unknown";
}

std::optional<log_level> parse_log_level(std::string_view text) noexcept {
  auto const equals = [&](std::string_view name) {
    return text.size() == name.size() &&
           std::equal(text.begin(), text.end(), name.begin(), [](char a, char b) {
             return std::tolower(static_cast<unsigned char>(a)) == b;
           });
  };
  if (equals("warn")) return log_level::warning;
  for (log_level const level : detail::all_levels) {
    if (equals(name(level))) return level;
  }
  return std::nullopt;
}

void set_log_level(log_level threshold) noexcept {
  try {
    detail::global_logger().set_threshold(threshold);
  } catch (...) {  // NOLINT(bugprone-empty-catch): the logger could not be made; nothing to set
  }
}

log_level log_threshold() noexcept {
  try {
    return detail::global_logger().threshold();
  } catch (...) {
    return log_level::warning;
  }
}

bool log_enabled(log_level level) noexcept {
  try {
    return detail::global_logger().enabled(level);
  } catch (...) {
    return level != log_level::off && level <= log_level::warning;
  }
}

log_sink set_log_sink(log_sink sink) {
  return detail::global_logger().set_sink(std::move(sink));
}

void log(log_level level, std::string_view message) noexcept {
  try {
    detail::global_logger().log(level, message);
  } catch (...) {
    detail::write_to_stderr(level, message);
  }
}

}  // namespace graphstep
