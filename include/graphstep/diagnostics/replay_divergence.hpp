#pragma once

/// @file diagnostics/replay_divergence.hpp
/// @brief The report of `verify_replay`, in plain C++: how a watched region differs between two
/// runs, what a captured node does and how its launch changed, and the first node whose effect
/// differs, with the most likely cause.
///
/// The decisions that fill it (comparing regions and launches, the order of a graph's nodes,
/// which graphs can be bisected) are internal (diagnostics/detail/replay_divergence.hpp); the
/// snapshots, the eager run, the fresh capture and the prefix replays live in the CUDA shell
/// (diagnostics/verify_replay.hpp).
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <graphstep/dtype.hpp>
#include <optional>
#include <string>
#include <vector>

namespace graphstep::diagnostics {

/// @brief Which run changed a region that ended up different.
enum class written_by : unsigned char {
  both,         ///< both runs changed it, to different values
  eager_only,   ///< the eager step wrote it; the replay left it as it was
  replay_only,  ///< the replay wrote it; the eager step left it as it was
};

/// @brief How one watched region differs between two runs that started from the same bytes.
struct region_difference {
  std::string name;
  std::size_t bytes{};
  dtype element{dtype::uint8};       ///< how its bytes are read; uint8 as raw bytes
  std::size_t first_offset{};        ///< byte offset of the first differing element
  std::size_t differing_elements{};  ///< elements whose bytes differ
  /// Largest |a - b| and |a - b| / max(|a|, |b|) over the differing elements (every element
  /// type but uint8, whose bytes are compared as bytes; infinite where one side is NaN or infinite
  /// and the other is not the same).
  double max_abs_difference{};
  double max_rel_difference{};
  written_by writer{written_by::both};
};

/// @brief A captured node's type, as far as bisection cares.
enum class node_kind : unsigned char {
  kernel,
  memset,
  memcpy,
  empty,
  event_record,
  event_wait,
  memory_allocation,
  memory_free,
  host_function,
  child_graph,
  conditional,
  other,
};
[[nodiscard]] char const* name(node_kind kind) noexcept;

/// @brief A grid or block size: `dim3`, for the plain-C++ core.
struct dims3 {
  unsigned x{1};
  unsigned y{1};
  unsigned z{1};
  friend bool operator==(dims3 const& a, dims3 const& b) noexcept {
    return a.x == b.x && a.y == b.y && a.z == b.z;
  }
  friend bool operator!=(dims3 const& a, dims3 const& b) noexcept { return !(a == b); }
};

/// @brief What a node does, read from CUDA (cudaGraphKernelNodeGetParams and kin).
struct node_description {
  node_kind kind{node_kind::other};
  // Kernel nodes. CUDA may not report a library's kernel parameters: `parameters_known` is then
  // false and only the kind and position are compared.
  bool parameters_known{false};
  std::uintptr_t function{};
  std::string kernel_name;  ///< from cudaFuncGetName; empty when unknown
  dims3 grid;
  dims3 block;
  std::size_t shared_bytes{};
  std::vector<std::vector<unsigned char>> arguments;  ///< each parameter's bytes, in order
  /// Parameters whose bytes differ between two captures of the same step: a struct's padding,
  /// an address CUDA places anew in every capture, a graph's own conditional handle. Their
  /// bytes tell nothing and are not compared; missing entries are stable.
  std::vector<bool> unstable_arguments;
  // Memset nodes.
  std::uintptr_t destination{};
  unsigned value{};
  std::size_t element_size{};
  std::size_t width{};
  std::size_t height{};
  std::size_t pitch{};
  /// The positions (in execution order) of the nodes this one depends on.
  std::vector<std::size_t> dependencies;
};

/// @brief One way a node recorded at capture differs from the one the step records now.
struct launch_change {
  enum class what : unsigned char {
    node_type,       ///< another kind of node at this position
    kernel,          ///< another kernel function ("chosen at capture")
    grid,            ///< another grid size ("chosen at capture" from a host value)
    block,           ///< another block size
    shared_memory,   ///< other dynamic shared memory
    argument_count,  ///< another number of parameters
    argument,        ///< a parameter's bytes ("frozen host value", or another buffer)
    memset,          ///< a memset's destination, value or shape
  };
  what kind{what::argument};
  std::size_t argument{};  ///< the parameter's index, for `argument`
  std::string at_capture;  ///< the value recorded at capture, as text
  std::string now;         ///< the value the step gives now, as text
};
[[nodiscard]] char const* name(launch_change::what kind) noexcept;

/// @brief What most likely made the replay differ, as named in the report.
enum class divergence_cause : unsigned char {
  none,                  ///< the replay matches the eager step
  unreproducible_eager,  ///< two eager runs from the same watched memory differ
  capture_fails_now,     ///< capturing the step again fails (its error is in the report)
  work_outside_capture,  ///< the eager step differs from a fresh capture of itself
  different_kernel,      ///< a node launches another kernel now
  launch_configuration,  ///< a grid, block or shared-memory size chosen at capture
  frozen_argument,       ///< a parameter frozen at capture (a host value, a buffer)
  changed_structure,     ///< the step records other nodes now
  condition,             ///< a conditional node's flag differs when the graphs reach it
  inside_nested_graph,   ///< inside a conditional node's body or a child graph
  same_launches,         ///< every launch is the same, yet the results differ
};
[[nodiscard]] char const* name(divergence_cause cause) noexcept;

/// @brief A node whose launch differs between the graph and a fresh capture.
struct changed_node {
  std::size_t position{};  ///< in execution order, from 0
  node_description at_capture;
  node_description now;
  std::vector<launch_change> changes;
};

/// @brief The first node after which the watched memory differs between the graph and a fresh
/// capture, each run one prefix at a time from the same snapshot.
struct divergent_node {
  std::size_t position{};
  node_description at_capture;
  node_description now;
  std::vector<launch_change> changes;
  std::vector<region_difference> regions;
  /// For a conditional node of `capture_if`/`capture_while`: its flag when each graph reached
  /// it (the condition it decided on).
  std::optional<unsigned> condition_at_capture;
  std::optional<unsigned> condition_now;
};

/// @brief What `verify_replay` found.
struct replay_report {
  /// The eager step against the graph's replay, region by region; empty when identical.
  std::vector<region_difference> differences;
  /// The message of the error a fresh capture of the step raised, or "".
  std::string capture_failure;
  /// The eager step against a replay of a fresh capture of it: work the step issues outside
  /// the capture (the legacy default stream, a stream that is not joined) shows up here.
  std::vector<region_difference> outside_capture;
  std::size_t nodes_at_capture{};
  std::size_t nodes_now{};
  /// Where the node lists stop pairing up, if they do.
  std::optional<std::size_t> first_unpaired;
  /// Every paired node whose launch differs.
  std::vector<changed_node> changed;
  /// Parameters left out of the comparison because two captures of the step disagree on them.
  std::size_t unstable_arguments{};
  /// A second eager run against the first, from the same watched memory: when they differ the
  /// step reads state that is neither watched nor restored, and nothing further is compared.
  std::vector<region_difference> eager_unreproducible;
  /// The first node whose effect on the watched memory differs, when bisection ran and found
  /// one.
  std::optional<divergent_node> first_divergent;
  /// Why bisection did not run, or "".
  std::string bisection_skipped;

  [[nodiscard]] bool identical() const noexcept { return differences.empty(); }
  /// @brief The most likely cause, from everything above.
  [[nodiscard]] divergence_cause cause() const noexcept;
  /// @brief The report as text: "identical", or each difference, the cause and the node.
  [[nodiscard]] std::string describe() const;
};

}  // namespace graphstep::diagnostics
