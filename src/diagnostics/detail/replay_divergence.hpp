#pragma once

/// @file diagnostics/detail/replay_divergence.hpp
/// @brief The decisions of `verify_replay`, in plain C++: how two copies of a watched region
/// differ, how a launch recorded at capture differs from the one the step makes now, the order
/// in which a graph's nodes run one prefix at a time, and which graphs can be bisected. Internal:
/// they fill the public `replay_report` (diagnostics/replay_divergence.hpp).
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <graphstep/diagnostics/replay_divergence.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace graphstep::diagnostics::detail {

/// @brief Compares a region after two runs (`first`, `second`) that both began from `before`.
/// `first` plays the eager step and `second` the replay in `written_by`. Elements are compared
/// by their bytes: NaNs with equal bits are equal, +0 and -0 differ.
/// @return nothing when the bytes are identical.
/// @throws usage_error when `element` is no dtype or `bytes` not a whole number of elements
[[nodiscard]] std::optional<region_difference> compare_region(std::string_view name, dtype element,
                                                              unsigned char const* before,
                                                              unsigned char const* first,
                                                              unsigned char const* second,
                                                              std::size_t bytes);

/// @brief How `now` differs from `at_capture`; empty when they launch the same work with the
/// same bytes (or when CUDA reported neither's parameters). Parameters `now` marks unstable are
/// not compared.
[[nodiscard]] std::vector<launch_change> compare_launches(node_description const& at_capture,
                                                          node_description const& now);

/// @brief Marks in `now` the parameters whose bytes differ in `again`, a second capture of the
/// same step made right after; returns how many it marked. Nodes of other kinds or kernels are
/// left alone.
[[nodiscard]] std::size_t mark_unstable_arguments(node_description& now,
                                                  node_description const& again);

/// @brief The value of one kernel parameter as text: its bytes in hex, and what a 4-byte value
/// reads as (int, float) or an 8-byte one (address, double).
[[nodiscard]] std::string argument_text(std::vector<unsigned char> const& bytes);

/// @brief An order in which a graph's nodes can run one after another: every node after all of
/// its dependencies, ties kept in the order the nodes are listed. `dependencies[i]` holds the
/// indices of the nodes node i depends on.
/// @throws usage_error when an index is out of range or the dependencies form a cycle
[[nodiscard]] std::vector<std::size_t> execution_order(
    std::vector<std::vector<std::size_t>> const& dependencies);

/// @brief How a graph's nodes are run one prefix at a time.
enum class bisection_method : unsigned char {
  /// Disable the nodes after the prefix in one executable (cudaGraphNodeSetEnabled): CUDA
  /// allows it for kernel, memset and memcpy nodes, and the graph holds no other node that
  /// does work (empty, event and memory nodes do none of their own). A conditional node that
  /// graphstep's capture_if/capture_while made is switched off by pointing the kernel that
  /// sets its handle at a zero flag (cudaGraphExecKernelNodeSetParams).
  disable_nodes,
  /// Instantiate a copy of the graph without the nodes after the prefix (cudaGraphClone,
  /// cudaGraphDestroyNode), for graphs with host functions or child graphs; each runs whole,
  /// and a host function runs once in every prefix that holds it.
  prefix_graphs,
  /// Neither: the graph holds a node CUDA cannot disable, and memory nodes (from whose graphs
  /// CUDA cannot remove nodes) or conditional nodes (CUDA 13.0 copies no graph that holds one:
  /// cudaGraphClone answers cudaErrorNotSupported).
  refused,
};

/// @brief Whether CUDA can disable a node of this kind in an executable: "Currently only
/// kernel, memset and memcpy nodes are supported" (cudaGraphNodeSetEnabled).
[[nodiscard]] bool can_disable(node_kind kind) noexcept;

/// @brief The method for the graph at capture (`then`) and its fresh capture (`now`), and for
/// `refused` the reason, naming the node and the graph that holds it.
struct bisection_plan {
  bisection_method method{bisection_method::disable_nodes};
  std::string refusal;
};
[[nodiscard]] bisection_plan plan_bisection(std::vector<node_description> const& then,
                                            std::vector<node_description> const& now);

/// @brief Whether a kernel is one of NCCL's collectives (its names begin with "nccl"): such a
/// step waits for its peers, so it cannot be run alone on one rank.
[[nodiscard]] bool is_collective_kernel(std::string_view kernel_name) noexcept;

/// @brief The first position at which the two node lists stop pairing up (another kind of
/// node; another kernel at a paired position is a launch change, not a break), or the shorter
/// length when one is a prefix of the other; `nullopt` when they pair up all the way.
[[nodiscard]] std::optional<std::size_t> first_unpaired(std::vector<node_description> const& a,
                                                        std::vector<node_description> const& b);

/// @brief The position of the kernel that hands a flag to the conditional node at `position`:
/// the set_condition_kernel launch it depends on, as graphstep's `capture_if`/`capture_while`
/// records it. `nullopt` for any other node, or a conditional node set some other way.
[[nodiscard]] std::optional<std::size_t> condition_setter(
    std::vector<node_description> const& nodes, std::size_t position);

/// @brief The device address of the flag that decides the conditional node at `position`: the
/// flag parameter of its condition_setter. `nullopt` when it has none.
[[nodiscard]] std::optional<std::uintptr_t> condition_flag(
    std::vector<node_description> const& nodes, std::size_t position);

}  // namespace graphstep::diagnostics::detail
