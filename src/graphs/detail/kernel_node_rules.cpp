// graphstep_core: plain C++, includes no CUDA header.
#include "graphs/detail/kernel_node_rules.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace graphstep::graphs::detail {

namespace {
constexpr char const* right_after = ": call it inside the capture, right after the launch";

std::string text(std::array<unsigned, 3> const& extents) {
  return "(" + std::to_string(extents[0]) + ", " + std::to_string(extents[1]) + ", " +
         std::to_string(extents[2]) + ")";
}
}  // namespace

std::string why_not_the_launch(last_capture const& last) {
  std::string const who = "last_captured_launch: ";
  if (!last.active) return who + "the stream is not capturing" + right_after;
  if (last.nodes == 0) return who + "nothing has been captured on this stream yet" + right_after;
  if (last.nodes > 1) {
    return who + "the stream's next work would follow " + std::to_string(last.nodes) +
           " nodes (branches joined here), not one launch" + right_after +
           ", on the stream it was made on";
  }
  if (last.node_type != "kernel") {
    return who + "the last work captured on this stream is a " + last.node_type +
           " node, not a kernel launch" + right_after;
  }
  if (!last.same_function) {
    return who +
           "the last kernel captured on this stream launches another function than the one "
           "given: pass the kernel just launched";
  }
  if (!last.arguments_readable) {
    return who +
           "the launch passed its arguments packed in `extra`, which cannot be read back: "
           "launch it with its arguments (<<<...>>>, cudaLaunchKernel)";
  }
  return {};
}

std::string why_not_this_executable(std::uint64_t node_capture, std::uint64_t exec_capture,
                                    std::string const& exec_name) {
  if (node_capture == exec_capture && node_capture != 0) return {};
  return "kernel_node::set: this node was captured into another graph than '" + exec_name +
         "' (capture sequence " + std::to_string(node_capture) + ", '" + exec_name +
         "' comes from " +
         (exec_capture == 0 ? std::string{"no known capture"}
                            : "capture sequence " + std::to_string(exec_capture)) +
         "): take the node in the capture of the executable it updates";
}

std::string why_not_these_dimensions(std::array<unsigned, 3> const& grid,
                                     std::array<unsigned, 3> const& block) {
  for (unsigned extent : grid) {
    if (extent == 0) return "kernel_node::set: the grid " + text(grid) + " has an empty extent";
  }
  for (unsigned extent : block) {
    if (extent == 0) return "kernel_node::set: the block " + text(block) + " has an empty extent";
  }
  return {};
}

std::string why_not_this_tag(std::string const& tag, std::uint64_t capture,
                             std::uint64_t tagged_in) {
  std::string const who = "kernel_node_tags::tag: ";
  if (tag.empty()) return who + "the tag is empty: name the launch, e.g. \"adamw\"";
  if (tagged_in != 0 && tagged_in == capture) {
    return who + "tag '" + tag +
           "' marks a launch of this capture already: give each launch of a capture its own "
           "tag (a kernel launched once per layer, e.g. \"gelu/3\")";
  }
  return {};
}

std::string why_no_tagged_node(std::string const& tag, bool known, bool same_function,
                               std::vector<std::string> tags) {
  std::string const who = "kernel_node_tags::node: ";
  if (!known) {
    std::sort(tags.begin(), tags.end());
    std::string list;
    for (std::string const& t : tags) list += (list.empty() ? "'" : ", '") + t + "'";
    return who + "no launch is tagged '" + tag + "' (" +
           (tags.empty() ? std::string{"no launch is tagged at all"}
                         : "the tags are " + list) +
           "): tag the launch inside the capture, right after it, with tag(\"" + tag +
           "\", stream, kernel)";
  }
  if (!same_function) {
    return who + "tag '" + tag +
           "' marks a launch of another kernel than the one given: pass the kernel the tagged "
           "launch launched";
  }
  return {};
}

}  // namespace graphstep::graphs::detail
