#pragma once

/// @file graphs/conditional_support.hpp
/// @brief Whether a CUDA driver runs conditional nodes (graphs/conditional.hpp), decided from its
/// version number alone, so that programs can ask before they capture and the rule is tested
/// on machines without a GPU.
/// graphstep_core: plain C++, includes no CUDA header.

#include <string>

namespace graphstep::graphs {

/// @brief The oldest CUDA driver with conditional nodes (12.4, as cudaDriverGetVersion says).
inline constexpr int conditional_nodes_driver_version = 12040;

/// @brief Why conditional nodes cannot run with the driver of `driver_version` (as
/// cudaDriverGetVersion reports it; 0 when there is none), or "" when they can.
[[nodiscard]] std::string conditional_nodes_unsupported_reason(int driver_version);

}  // namespace graphstep::graphs
