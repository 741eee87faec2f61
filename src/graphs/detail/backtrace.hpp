#pragma once

// Host backtraces for the capture diagnostics: raw return addresses taken cheaply while
// recording, names looked up (dladdr, demangling) only for the calls that are reported.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "graphs/detail/capture_trace.hpp"

namespace graphstep::graphs::detail {

/// The return addresses of the calling thread, innermost first, without this function's frame.
[[nodiscard]] std::vector<std::uintptr_t> current_backtrace(std::size_t max_frames);

/// The module, demangled symbol and module offset of a return address.
[[nodiscard]] frame symbolize(std::uintptr_t address);

}  // namespace graphstep::graphs::detail
