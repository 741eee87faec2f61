#pragma once

// cuBLASLt's logger on the simulated device (cublasLt.h, "Experimental: Logger"; the cuBLAS
// documentation, "cuBLASLt Logging"): a mask of what to log (1 errors, 2 performance trace, 4
// performance hints, 8 heuristics trace, 16 API trace), set by cublasLtLoggerSetLevel or
// SetMask or read from CUBLASLT_LOG_LEVEL and CUBLASLT_LOG_MASK; the messages go to the callback
// when one is set, else to the file set or opened (CUBLASLT_LOG_FILE, "%i" becoming the process
// id), else to stdout. An error names why the simulator refused the call, so that a program can
// tell a limit of the simulator from a misuse.

#include <cublasLt.h>

#include <cstdio>
#include <string>

namespace graphstep::sim::detail::cublaslt_log {

enum class topic : int { error = 1, trace = 2, hints = 4, heuristics = 8, api = 16 };

/// Whether messages of `t` are logged now.
[[nodiscard]] bool wanted(topic t);
/// Logs `text` as `function`'s, when `t` is wanted.
void message(topic t, char const* function, std::string const& text);

/// Keeps why this thread's cuBLASLt call is about to return `status`; returns `status`.
cublasStatus_t because(cublasStatus_t status, char const* why) noexcept;
/// Ends `function`'s call: logs it (API trace) and, unless it succeeded, its status and the
/// reason kept by `because` (errors); returns `status`.
cublasStatus_t finished(char const* function, cublasStatus_t status);

cublasStatus_t set_level(int level);
void set_mask(int mask);
void set_callback(cublasLtLoggerCallback_t callback);
void set_file(std::FILE* file);
cublasStatus_t open_file(char const* path);
void force_disable();

}  // namespace graphstep::sim::detail::cublaslt_log
