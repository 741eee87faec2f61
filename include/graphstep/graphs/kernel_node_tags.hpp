#pragma once

/// @file graphs/kernel_node_tags.hpp
/// @brief `kernel_node_tags`: kernel launches of a capture marked with a tag where they are
/// launched, and found by that tag beside the training loop as `kernel_node`s, so that per-step
/// grids, seeds and scalars are set there rather than at the capture site.

#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/graphs/kernel_node.hpp>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace graphstep::graphs {

namespace detail {
/// The capture sequence of `stream`'s live capture, 0 when it is not capturing.
/// @throws cuda_error
[[nodiscard]] std::uint64_t capture_sequence_of(cuda::stream_view stream);
/// @throws usage_error (as `why_not_this_tag`)
void expect_taggable(std::string const& tag, std::uint64_t capture, std::uint64_t tagged_in);
/// @throws usage_error (as `why_no_tagged_node`)
void expect_tagged(std::string const& tag, bool known, bool same_function,
                   std::vector<std::string> tags);
}  // namespace detail

/// @brief The tagged launches of a step's capture, each a `kernel_node` found by its tag.
///
/// Where a kernel is launched (a layer's code, an optimizer's, a header of kernels), a tag
/// marks the launch right after it, on its stream: `tags.tag("adamw", stream, adamw_kernel)`.
/// Outside a capture, as when the same step runs eagerly, `tag` does nothing. After the
/// capture, the loop takes the node and sets what changes per step:
/// `tags.node("adamw", adamw_kernel).set_argument<5>(step, learning_rate)`. The node is the
/// one `last_captured_launch` takes, with its checks (the launch just captured, of that kernel;
/// an executable of that capture; extents of at least 1), and remembers what was set last, so
/// later sets keep it.
///
/// A tag names one launch of a capture: tagging twice in one capture is refused. Capturing
/// the step again and tagging anew replaces the tag's node (the earlier executable is then
/// refused by the new node, as by any node of another capture). Not thread-safe.
class kernel_node_tags {
 public:
  /// @brief Marks the launch of `kernel` just captured on `stream` as `tag`.
  /// @return true when it was tagged; false outside a capture, where nothing is recorded
  /// @throws usage_error (an empty tag; a tag that marks a launch of this capture already; and
  /// what `last_captured_launch` refuses: the last work captured on `stream` is not exactly
  /// one launch of `kernel`), cuda_error
  template <typename... Params>
  bool tag(std::string const& tag, cuda::stream_view stream, void (*kernel)(Params...)) {
    std::uint64_t const capture = detail::capture_sequence_of(stream);
    auto const found = tagged_.find(tag);
    detail::expect_taggable(tag, capture, found == tagged_.end() ? 0 : found->second.capture);
    if (capture == 0) return false;
    entry tagged{capture, reinterpret_cast<void const*>(kernel),
                 std::make_shared<kernel_node<Params...>>(last_captured_launch(stream, kernel))};
    tagged_.insert_or_assign(tag, std::move(tagged));
    return true;
  }

  /// @brief The node of the launch tagged `tag`, a launch of `kernel`: set its grid and
  /// arguments for the replays of the capture's executable. The reference stays valid until
  /// the tag marks another launch or the tags are destroyed.
  /// @throws usage_error (no launch tagged so, naming the tags there are; a launch of another
  /// kernel)
  template <typename... Params>
  [[nodiscard]] kernel_node<Params...>& node(std::string const& tag, void (*kernel)(Params...)) {
    auto const found = tagged_.find(tag);
    bool const known = found != tagged_.end();
    bool const same = known && found->second.function == reinterpret_cast<void const*>(kernel);
    if (!known || !same) detail::expect_tagged(tag, known, same, tags());
    // The same function has the same parameters: the node was made for this very type.
    return *static_cast<kernel_node<Params...>*>(found->second.node.get());
  }

  /// @brief Whether a launch is tagged `tag`.
  [[nodiscard]] bool contains(std::string const& tag) const { return tagged_.count(tag) != 0; }
  /// @brief How many tags mark a launch.
  [[nodiscard]] std::size_t size() const noexcept { return tagged_.size(); }
  /// @brief The tags, in no particular order.
  [[nodiscard]] std::vector<std::string> tags() const {
    std::vector<std::string> names;
    names.reserve(tagged_.size());
    for (auto const& tagged : tagged_) names.push_back(tagged.first);
    return names;
  }

 private:
  struct entry {
    std::uint64_t capture{};
    void const* function{};
    std::shared_ptr<void> node;  // a kernel_node<Params...> of `function`'s parameters
  };
  std::unordered_map<std::string, entry> tagged_;
};

}  // namespace graphstep::graphs
