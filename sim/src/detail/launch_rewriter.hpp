#pragma once

// Plain C++: includes no CUDA header, so that the rewriting tool builds anywhere.
//
// The rewriting step that lets a CUDA source run on the simulated device: every
// `callee<<<grid, block[, shared[, stream]]>>>(args)` becomes
// `::graphstep::sim::launcher(callee, ::graphstep::sim::launch_config(grid, block, ...),
// "callee")(args)` and every `extern __shared__ T name[];` a pointer to the block's dynamic shared
// memory. Comments, string and character literals are left alone; line numbers do not change
// (the output starts with #include <graphstep/sim/device.hpp> and #line 1 "<file>").

#include <stdexcept>
#include <string>
#include <string_view>

namespace graphstep::sim::detail {

/// @brief A source the rewriter cannot parse; what() is "file:line: what is wrong".
class rewrite_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// @brief `source` (named `file_name` in messages and #line) with its launches rewritten.
/// @throws rewrite_error
std::string rewrite_launches(std::string_view source, std::string_view file_name);

}  // namespace graphstep::sim::detail
