#include "detail/cublaslt_log.hpp"

#include <unistd.h>

#include <cstdlib>
#include <mutex>

namespace graphstep::sim::detail::cublaslt_log {

namespace {

struct logger {
  std::mutex mutex;
  bool configured{};  // the environment has been read
  int mask{};
  cublasLtLoggerCallback_t callback{};
  std::FILE* file{};
  bool owns_file{};
  bool disabled{};  // cublasLtLoggerForceDisable: for the rest of the process
};

logger& the_logger() {
  static auto* const instance = new logger;  // NOLINT(cppcoreguidelines-owning-memory)
  return *instance;
}

thread_local char const* reason = nullptr;

int mask_of_level(int level) noexcept {
  return level <= 0 ? 0 : (1 << level) - 1;  // a level logs what every level below it does
}

void close_owned(logger& l) noexcept {
  if (l.owns_file && l.file != nullptr) static_cast<void>(std::fclose(l.file));
  l.owns_file = false;
  l.file = nullptr;
}

// The path CUBLASLT_LOG_FILE names, "%i" replaced by the process id.
std::string expanded(char const* path) {
  std::string out;
  for (char const* c = path; *c != '\0'; ++c) {
    if (c[0] == '%' && c[1] == 'i') {
      out += std::to_string(static_cast<long>(getpid()));
      ++c;
    } else {
      out += *c;
    }
  }
  return out;
}

// The environment, read once, before the first use or setting; a setter wins over it.
void configure(logger& l) {
  if (l.configured) return;
  l.configured = true;
  if (char const* level = std::getenv("CUBLASLT_LOG_LEVEL"); level != nullptr) {
    l.mask = mask_of_level(std::atoi(level));  // NOLINT(cert-err34-c): 0 when not a number
  }
  if (char const* mask = std::getenv("CUBLASLT_LOG_MASK"); mask != nullptr) {
    l.mask = std::atoi(mask);  // NOLINT(cert-err34-c)
  }
  if (char const* path = std::getenv("CUBLASLT_LOG_FILE"); path != nullptr) {
    if (std::FILE* const opened = std::fopen(expanded(path).c_str(), "w"); opened != nullptr) {
      l.file = opened;
      l.owns_file = true;
    }
  }
}

char const* name_of(topic t) noexcept {
  switch (t) {
    case topic::error: return "Error";
    case topic::trace: return "Trace";
    case topic::hints: return "Hints";
    case topic::heuristics: return "Heuristics";
    case topic::api: return "Api";
  }
  return "Log";
}

}  // namespace

bool wanted(topic t) {
  logger& l = the_logger();
  std::lock_guard<std::mutex> const lock{l.mutex};
  configure(l);
  return !l.disabled && (l.mask & static_cast<int>(t)) != 0;
}

void message(topic t, char const* function, std::string const& text) {
  logger& l = the_logger();
  std::lock_guard<std::mutex> const lock{l.mutex};
  configure(l);
  if (l.disabled || (l.mask & static_cast<int>(t)) == 0) return;
  int const level = t == topic::error        ? 1
                    : t == topic::trace      ? 2
                    : t == topic::hints      ? 3
                    : t == topic::heuristics ? 4
                                             : 5;
  if (l.callback != nullptr) {
    l.callback(level, function, text.c_str());
    return;
  }
  std::FILE* const out = l.file != nullptr ? l.file : stdout;
  static_cast<void>(
      std::fprintf(out, "[cublasLt (simulated)][%s][%s] %s\n", name_of(t), function, text.c_str()));
  static_cast<void>(std::fflush(out));
}

cublasStatus_t because(cublasStatus_t status, char const* why) noexcept {
  reason = why;
  return status;
}

cublasStatus_t finished(char const* function, cublasStatus_t status) {
  char const* const why = reason;
  reason = nullptr;
  message(topic::api, function, "called");
  if (status != CUBLAS_STATUS_SUCCESS) {
    message(topic::error, function,
            std::string{cublasLtGetStatusName(status)} + (why != nullptr ? ": " : "") +
                (why != nullptr ? why : ""));
  }
  return status;
}

cublasStatus_t set_level(int level) {
  if (level < 0 || level > 5) return CUBLAS_STATUS_INVALID_VALUE;  // "one of the above levels"
  logger& l = the_logger();
  std::lock_guard<std::mutex> const lock{l.mutex};
  configure(l);
  l.mask = mask_of_level(level);
  return CUBLAS_STATUS_SUCCESS;
}

void set_mask(int mask) {
  logger& l = the_logger();
  std::lock_guard<std::mutex> const lock{l.mutex};
  configure(l);
  l.mask = mask;
}

void set_callback(cublasLtLoggerCallback_t callback) {
  logger& l = the_logger();
  std::lock_guard<std::mutex> const lock{l.mutex};
  configure(l);
  l.callback = callback;
}

void set_file(std::FILE* file) {
  logger& l = the_logger();
  std::lock_guard<std::mutex> const lock{l.mutex};
  configure(l);
  close_owned(l);
  l.file = file;
}

cublasStatus_t open_file(char const* path) {
  if (path == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  std::FILE* const opened = std::fopen(path, "w");
  // "if log file was created successfully": a path that cannot be opened for writing is refused.
  if (opened == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  logger& l = the_logger();
  std::lock_guard<std::mutex> const lock{l.mutex};
  configure(l);
  close_owned(l);
  l.file = opened;
  l.owns_file = true;
  return CUBLAS_STATUS_SUCCESS;
}

void force_disable() {
  logger& l = the_logger();
  std::lock_guard<std::mutex> const lock{l.mutex};
  configure(l);
  l.disabled = true;
}

}  // namespace graphstep::sim::detail::cublaslt_log
