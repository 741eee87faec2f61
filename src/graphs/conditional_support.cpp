// graphstep_core: plain C++, includes no CUDA header.
#include <graphstep/graphs/conditional_support.hpp>
#include <string>

namespace graphstep::graphs {

std::string conditional_nodes_unsupported_reason(int driver_version) {
  if (driver_version >= conditional_nodes_driver_version) return {};
  auto const version = [](int v) {
    return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
  };
  return "conditional nodes need a CUDA driver of " + version(conditional_nodes_driver_version) +
         " or newer, and this one is " + (driver_version > 0 ? version(driver_version) : "absent") +
         ": update the driver, or decide on the host between replays";
}

}  // namespace graphstep::graphs
