#pragma once

/// @file log.hpp
/// @brief graphstep's messages that are not errors: warnings, notes and cleanup failures that
/// cannot be thrown (a destructor's), each with a level, filtered by a threshold and handed to a
/// sink that a program may replace.
///
/// By default messages at `warning` and above go to stderr as one line each,
/// `graphstep [warning]: ...`. The environment variable `GRAPHSTEP_LOG_LEVEL` (off, error,
/// warning, info or debug; read once, at the first use) sets the threshold, and
/// `set_log_level` overrides it. `set_log_sink` routes the messages elsewhere, e.g. into a
/// trainer's own logger.
/// graphstep_core: plain C++, includes no CUDA header.

#include <functional>
#include <optional>
#include <string_view>

namespace graphstep {

/// @brief How much a message matters, most first. `off` is a threshold only: it lets no message
/// through.
enum class log_level : int {
  off = 0,
  error = 1,    ///< something failed and could not be thrown (a cleanup in a destructor)
  warning = 2,  ///< the program goes on, but probably not as meant (the default threshold)
  info = 3,     ///< a choice graphstep made that may be worth knowing (a fallback)
  debug = 4,    ///< detail for finding a problem
};

/// @brief "off", "error", "warning", "info" or "debug".
[[nodiscard]] char const* name(log_level level) noexcept;

/// @brief The level `text` names, case-insensitively ("warn" for warning too); nullopt for
/// anything else.
[[nodiscard]] std::optional<log_level> parse_log_level(std::string_view text) noexcept;

/// @brief Receives each message that passes the threshold: its level and its text (no
/// "graphstep" prefix, no final newline). graphstep calls the sink from any thread, one call at
/// a time; a message the sink logs itself, from inside the call, goes to stderr instead.
using log_sink = std::function<void(log_level level, std::string_view message)>;

/// @brief Lets messages at `threshold` and above (more important) through; `log_level::off`
/// silences them all. Overrides `GRAPHSTEP_LOG_LEVEL`. Thread-safe.
void set_log_level(log_level threshold) noexcept;

/// @brief The threshold in force.
[[nodiscard]] log_level log_threshold() noexcept;

/// @brief Whether a message at `level` would be passed to the sink now (to skip building a
/// costly message).
[[nodiscard]] bool log_enabled(log_level level) noexcept;

/// @brief Routes every message from now on to `sink`; an empty sink restores the default (one
/// line on stderr). Returns the sink it replaces (empty for the default), so a caller can put it
/// back. Waits for a call to the old sink under way on another thread: once it returns, the old
/// sink is not called again. Thread-safe.
/// @throws usage_error (called from inside a sink's call)
log_sink set_log_sink(log_sink sink);

/// @brief Hands `message` at `level` to the sink when the threshold lets it through. Never
/// throws: a sink that throws is reported on stderr, and the message is written there too.
/// `log_level::off` is no message level; such a call does nothing.
void log(log_level level, std::string_view message) noexcept;

}  // namespace graphstep
