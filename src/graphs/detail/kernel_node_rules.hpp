#pragma once

/// @file graphs/detail/kernel_node_rules.hpp
/// @brief What `kernel_node` refuses, decided from facts the CUDA shell gathers: which captured
/// node is "the launch just made", and which executable a node may update.
/// graphstep_core: plain C++, includes no CUDA header.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace graphstep::graphs::detail {

/// @brief What a capturing stream says about the work captured on it last.
struct last_capture {
  bool active{};          ///< the stream is capturing, and the capture is valid
  std::size_t nodes{};    ///< how many nodes the stream's next work would follow
  std::string node_type;  ///< the one node's type ("kernel", "memcpy", …)
  bool same_function{};   ///< a kernel node launching the function asked for
  /// its arguments can be read back (`kernelParams`, not packed in `extra`)
  bool arguments_readable{true};
};

/// @brief Why the last work captured is not a launch of the kernel asked for; "" when it is.
[[nodiscard]] std::string why_not_the_launch(last_capture const& last);

/// @brief Why a node from capture sequence `node_capture` may not be updated in `exec_name`,
/// instantiated from capture sequence `exec_capture` (0: not captured, or not known); "" when
/// it may. A node names a node of the graph an executable was instantiated from, nothing else.
[[nodiscard]] std::string why_not_this_executable(std::uint64_t node_capture,
                                                  std::uint64_t exec_capture,
                                                  std::string const& exec_name);

/// @brief Why a launch of `grid` blocks of `block` threads cannot be; "" when every extent is
/// at least 1 (CUDA's own limits are left to CUDA, which knows the device).
[[nodiscard]] std::string why_not_these_dimensions(std::array<unsigned, 3> const& grid,
                                                   std::array<unsigned, 3> const& block);

/// @brief Why a launch captured in capture sequence `capture` may not be tagged `tag`, given
/// the sequence the tag last marked a launch in (0: never); "" when it may. A tag names one
/// launch of a capture; a later capture (the step captured again) may tag its own.
[[nodiscard]] std::string why_not_this_tag(std::string const& tag, std::uint64_t capture,
                                           std::uint64_t tagged_in);

/// @brief Why no node answers `tag`, given the tags there are (in any order) and whether the
/// tag is known, and if so, whether it marks a launch of the kernel asked for; "" when one
/// does.
[[nodiscard]] std::string why_no_tagged_node(std::string const& tag, bool known, bool same_function,
                                             std::vector<std::string> tags);

}  // namespace graphstep::graphs::detail
