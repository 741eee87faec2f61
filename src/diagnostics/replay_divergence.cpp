// graphstep_core: plain C++, includes no CUDA header.
#include "diagnostics/detail/replay_divergence.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <graphstep/diagnostics/replay_divergence.hpp>
#include <graphstep/dtype_conversion.hpp>
#include <graphstep/error.hpp>
#include <limits>
#include <sstream>

#include "detail/address_text.hpp"

namespace graphstep::diagnostics {

namespace {

// An IEEE 754 binary16 bit pattern as float (every value is exact in binary32).
float float16_value(std::uint16_t bits) noexcept {
  int const sign = (bits & 0x8000U) != 0U ? -1 : 1;
  int const exponent = static_cast<int>((bits >> 10U) & 0x1FU);
  auto const mantissa = static_cast<float>(bits & 0x3FFU);
  if (exponent == 0x1F) {
    return mantissa == 0.0F ? static_cast<float>(sign) * std::numeric_limits<float>::infinity()
                            : std::numeric_limits<float>::quiet_NaN();
  }
  if (exponent == 0) return static_cast<float>(sign) * std::ldexp(mantissa, -24);  // subnormal
  return static_cast<float>(sign) * std::ldexp(1024.0F + mantissa, exponent - 25);
}

// The element at `at` as a double (a uint8 region is compared as bytes, never read so).
double element_value(dtype element, unsigned char const* at) noexcept {
  switch (element) {
    case dtype::int32: {
      std::int32_t value{};
      std::memcpy(&value, at, sizeof value);
      return value;
    }
    case dtype::float32: {
      float value{};
      std::memcpy(&value, at, sizeof value);
      return value;
    }
    case dtype::float16:
    case dtype::bfloat16: {
      std::uint16_t bits{};
      std::memcpy(&bits, at, sizeof bits);
      return element == dtype::float16 ? float16_value(bits) : bfloat16_to_float(bits);
    }
    case dtype::uint8: return *at;
  }
  return 0.0;
}

std::string dims_text(dims3 const& d) {
  return "(" + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " + std::to_string(d.z) + ")";
}

std::string memset_text(node_description const& n) {
  return "destination " + graphstep::detail::hex_text(n.destination) + ", value " +
         std::to_string(n.value) + ", " + std::to_string(n.width) + " x " +
         std::to_string(n.height) + " elements of " + std::to_string(n.element_size) +
         " bytes, pitch " + std::to_string(n.pitch);
}

std::string node_text(node_description const& n) {
  if (n.kind != node_kind::kernel) {
    return n.kind == node_kind::memset ? "memset (" + memset_text(n) + ")" : name(n.kind);
  }
  if (!n.parameters_known) return "kernel (its parameters are not reported by CUDA)";
  std::string text =
      "kernel " +
      (n.kernel_name.empty() ? graphstep::detail::hex_text(n.function) : n.kernel_name) +
      " <<<grid " + dims_text(n.grid) + ", block " + dims_text(n.block);
  if (n.shared_bytes != 0) text += ", " + std::to_string(n.shared_bytes) + " B shared";
  return text + ">>>";
}

void describe_region(std::ostringstream& out, region_difference const& d, char const* first,
                     char const* second) {
  out << "  " << d.name << " (" << d.bytes << " bytes of " << name(d.element)
      << "): " << d.differing_elements << " element" << (d.differing_elements == 1 ? "" : "s")
      << " differ, the first at byte " << d.first_offset;
  if (d.element != dtype::uint8) {
    out << "; largest difference " << d.max_abs_difference << " (relative " << d.max_rel_difference
        << ")";
  }
  switch (d.writer) {
    case written_by::eager_only:
      out << "; the " << first << " wrote it, the " << second << " left it unchanged";
      break;
    case written_by::replay_only:
      out << "; the " << second << " wrote it, the " << first << " left it unchanged";
      break;
    case written_by::both: break;
  }
  out << '\n';
}

void describe_changes(std::ostringstream& out, std::vector<launch_change> const& changes) {
  for (auto const& c : changes) {
    out << "      " << name(c.kind);
    if (c.kind == launch_change::what::argument) out << ' ' << c.argument;
    out << ": " << c.at_capture << " at capture, " << c.now << " now\n";
  }
}

divergence_cause cause_of(std::vector<launch_change> const& changes) noexcept {
  auto const has = [&](std::initializer_list<launch_change::what> kinds) {
    return std::any_of(changes.begin(), changes.end(), [&](launch_change const& c) {
      return std::find(kinds.begin(), kinds.end(), c.kind) != kinds.end();
    });
  };
  using what = launch_change::what;
  if (has({what::node_type, what::kernel})) return divergence_cause::different_kernel;
  if (has({what::grid, what::block, what::shared_memory})) {
    return divergence_cause::launch_configuration;
  }
  if (has({what::argument, what::argument_count, what::memset})) {
    return divergence_cause::frozen_argument;
  }
  return divergence_cause::same_launches;
}

}  // namespace

std::optional<region_difference> detail::compare_region(std::string_view name, dtype element,
                                                        unsigned char const* before,
                                                        unsigned char const* first,
                                                        unsigned char const* second,
                                                        std::size_t bytes) {
  // The messages are built only when a check refuses: every comparison passes through here.
  auto const what = [&] { return "the watched region \"" + std::string{name} + "\""; };
  if (!graphstep::detail::is_known(element)) graphstep::detail::expect_known(what(), element);
  std::size_t const size = size_in_bytes(element);
  GRAPHSTEP_EXPECTS(bytes % size == 0,
                    what() + " holds " + std::to_string(bytes) + " bytes, not a whole number of " +
                        graphstep::name(element) + " elements: give its size in bytes of whole " +
                        "elements, or watch it as uint8 (raw bytes)");
  if (bytes == 0 || std::memcmp(first, second, bytes) == 0) return std::nullopt;
  region_difference d;
  d.name = std::string{name};
  d.bytes = bytes;
  d.element = element;
  bool first_wrote = false;
  bool second_wrote = false;
  bool found = false;
  for (std::size_t at = 0; at < bytes; at += size) {
    first_wrote = first_wrote || std::memcmp(before + at, first + at, size) != 0;
    second_wrote = second_wrote || std::memcmp(before + at, second + at, size) != 0;
    if (std::memcmp(first + at, second + at, size) == 0) continue;
    if (!found) d.first_offset = at;
    found = true;
    ++d.differing_elements;
    if (element == dtype::uint8) continue;
    double const a = element_value(element, first + at);
    double const b = element_value(element, second + at);
    double const abs = std::isnan(a) || std::isnan(b) ? std::numeric_limits<double>::infinity()
                       : std::isinf(a) || std::isinf(b)
                           ? (a == b ? 0.0 : std::numeric_limits<double>::infinity())
                           : std::fabs(a - b);
    double const scale = std::max(std::fabs(a), std::fabs(b));
    double const rel = std::isinf(abs) ? abs : scale == 0.0 ? 0.0 : abs / scale;
    d.max_abs_difference = std::max(d.max_abs_difference, abs);
    d.max_rel_difference = std::max(d.max_rel_difference, rel);
  }
  d.writer = first_wrote && !second_wrote   ? written_by::eager_only
             : second_wrote && !first_wrote ? written_by::replay_only
                                            : written_by::both;
  return d;
}

char const* name(node_kind kind) noexcept {
  switch (kind) {
    case node_kind::kernel: return "kernel";
    case node_kind::memset: return "memset";
    case node_kind::memcpy: return "memcpy";
    case node_kind::empty: return "empty node";
    case node_kind::event_record: return "event record";
    case node_kind::event_wait: return "event wait";
    case node_kind::memory_allocation: return "memory allocation";
    case node_kind::memory_free: return "memory free";
    case node_kind::host_function: return "host function";
    case node_kind::child_graph: return "child graph";
    case node_kind::conditional: return "conditional node";
    case node_kind::other: return "other node";
  }
  return "node";
}

char const* name(launch_change::what kind) noexcept {
  using what = launch_change::what;
  switch (kind) {
    case what::node_type: return "node type";
    case what::kernel: return "kernel";
    case what::grid: return "grid";
    case what::block: return "block";
    case what::shared_memory: return "dynamic shared memory";
    case what::argument_count: return "number of parameters";
    case what::argument: return "parameter";
    case what::memset: return "memset";
  }
  return "launch";
}

std::string detail::argument_text(std::vector<unsigned char> const& bytes) {
  std::ostringstream out;
  out << "0x";
  // Little-endian: the most significant byte last in memory, first in the text.
  for (auto it = bytes.rbegin(); it != bytes.rend(); ++it) {
    std::array<char, 3> digits{};
    static_cast<void>(std::snprintf(digits.data(), digits.size(), "%02x", *it));
    out << digits.data();
  }
  if (bytes.size() == 4) {
    std::int32_t as_int{};
    float as_float{};
    std::memcpy(&as_int, bytes.data(), 4);
    std::memcpy(&as_float, bytes.data(), 4);
    out << " (int " << as_int << ", float " << as_float << ")";
  } else if (bytes.size() == 8) {
    double as_double{};
    std::memcpy(&as_double, bytes.data(), 8);
    out << " (an address, or double " << as_double << ")";
  }
  return out.str();
}

std::vector<launch_change> detail::compare_launches(node_description const& at_capture,
                                                    node_description const& now) {
  using what = launch_change::what;
  std::vector<launch_change> changes;
  if (at_capture.kind != now.kind) {
    changes.push_back({what::node_type, 0, name(at_capture.kind), name(now.kind)});
    return changes;
  }
  if (at_capture.kind == node_kind::memset) {
    if (at_capture.destination != now.destination || at_capture.value != now.value ||
        at_capture.element_size != now.element_size || at_capture.width != now.width ||
        at_capture.height != now.height || at_capture.pitch != now.pitch) {
      changes.push_back({what::memset, 0, memset_text(at_capture), memset_text(now)});
    }
    return changes;
  }
  if (at_capture.kind != node_kind::kernel || !at_capture.parameters_known ||
      !now.parameters_known) {
    return changes;
  }
  if (at_capture.function != now.function) {
    changes.push_back({what::kernel, 0, node_text(at_capture), node_text(now)});
    return changes;
  }
  if (at_capture.grid != now.grid) {
    changes.push_back({what::grid, 0, dims_text(at_capture.grid), dims_text(now.grid)});
  }
  if (at_capture.block != now.block) {
    changes.push_back({what::block, 0, dims_text(at_capture.block), dims_text(now.block)});
  }
  if (at_capture.shared_bytes != now.shared_bytes) {
    changes.push_back({what::shared_memory, 0, std::to_string(at_capture.shared_bytes) + " B",
                       std::to_string(now.shared_bytes) + " B"});
  }
  if (at_capture.arguments.size() != now.arguments.size()) {
    changes.push_back({what::argument_count, 0, std::to_string(at_capture.arguments.size()),
                       std::to_string(now.arguments.size())});
    return changes;
  }
  for (std::size_t i = 0; i < now.arguments.size(); ++i) {
    bool const unstable = i < now.unstable_arguments.size() && now.unstable_arguments[i];
    if (!unstable && at_capture.arguments[i] != now.arguments[i]) {
      changes.push_back({what::argument, i, argument_text(at_capture.arguments[i]),
                         argument_text(now.arguments[i])});
    }
  }
  return changes;
}

std::size_t detail::mark_unstable_arguments(node_description& now, node_description const& again) {
  if (now.kind != node_kind::kernel || again.kind != node_kind::kernel || !now.parameters_known ||
      !again.parameters_known || now.function != again.function ||
      now.arguments.size() != again.arguments.size()) {
    return 0;
  }
  now.unstable_arguments.resize(now.arguments.size(), false);
  std::size_t marked = 0;
  for (std::size_t i = 0; i < now.arguments.size(); ++i) {
    if (now.arguments[i] != again.arguments[i] && !now.unstable_arguments[i]) {
      now.unstable_arguments[i] = true;
      ++marked;
    }
  }
  return marked;
}

std::vector<std::size_t> detail::execution_order(
    std::vector<std::vector<std::size_t>> const& dependencies) {
  std::size_t const n = dependencies.size();
  std::vector<std::size_t> waiting(n, 0);
  std::vector<std::vector<std::size_t>> dependents(n);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t d : dependencies[i]) {
      if (d >= n || d == i) {
        throw usage_error("node " + std::to_string(i) + " depends on node " + std::to_string(d) +
                          (d == i ? ", itself" : ", which is not in the graph") +
                          ": the graph's edges are inconsistent");
      }
      ++waiting[i];
      dependents[d].push_back(i);
    }
  }
  // Kahn's algorithm, always taking the first ready node in listed order.
  std::vector<std::size_t> order;
  order.reserve(n);
  std::vector<bool> done(n, false);
  while (order.size() < n) {
    std::size_t next = n;
    for (std::size_t i = 0; i < n; ++i) {
      if (!done[i] && waiting[i] == 0) {
        next = i;
        break;
      }
    }
    if (next == n) {
      throw usage_error("the graph's dependencies form a cycle: no order runs its nodes");
    }
    done[next] = true;
    order.push_back(next);
    for (std::size_t d : dependents[next]) --waiting[d];
  }
  return order;
}

bool detail::can_disable(node_kind kind) noexcept {
  return kind == node_kind::kernel || kind == node_kind::memset || kind == node_kind::memcpy;
}

namespace {

bool is_condition_setter(node_description const& n) noexcept {
  return n.kind == node_kind::kernel &&
         n.kernel_name.find("set_condition_kernel") != std::string::npos &&
         n.arguments.size() == 2 && n.arguments[1].size() == sizeof(std::uint64_t);
}

// The first node of `nodes` that runs whole in every prefix that holds it: one CUDA cannot
// disable and that does work of its own, but for a conditional node whose setter can switch
// it off.
std::optional<std::size_t> first_whole(std::vector<node_description> const& nodes) {
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    switch (nodes[i].kind) {
      case node_kind::host_function:
      case node_kind::child_graph:
      case node_kind::other: return i;
      case node_kind::conditional:
        if (!detail::condition_setter(nodes, i)) return i;
        break;
      default: break;
    }
  }
  return std::nullopt;
}

std::optional<std::size_t> first_of(std::vector<node_description> const& nodes,
                                    std::initializer_list<node_kind> kinds) {
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (std::find(kinds.begin(), kinds.end(), nodes[i].kind) != kinds.end()) return i;
  }
  return std::nullopt;
}

}  // namespace

detail::bisection_plan detail::plan_bisection(std::vector<node_description> const& then,
                                              std::vector<node_description> const& now) {
  struct found {
    std::size_t position;
    node_kind kind;
    char const* graph;
  };
  auto const first = [&](auto const& in_one) -> std::optional<found> {
    if (auto i = in_one(then)) return found{*i, then[*i].kind, "the graph"};
    if (auto i = in_one(now)) return found{*i, now[*i].kind, "the fresh capture"};
    return std::nullopt;
  };
  auto const whole = first(first_whole);
  if (!whole) return {bisection_method::disable_nodes, {}};
  auto const blocking = first([](std::vector<node_description> const& nodes) {
    return first_of(nodes,
                    {node_kind::memory_allocation, node_kind::memory_free, node_kind::conditional});
  });
  if (!blocking) return {bisection_method::prefix_graphs, {}};
  auto const name = [](found const& f) {
    return std::string{"node "} + std::to_string(f.position) + " of " + f.graph + " is a " +
           diagnostics::name(f.kind);
  };
  std::string const why = blocking->kind == node_kind::conditional
                              ? ", and CUDA 13.0 copies no graph that holds one (cudaGraphClone "
                                "answers cudaErrorNotSupported)"
                              : ", so CUDA cannot remove nodes from a copy of the graph either";
  return {bisection_method::refused,
          name(*whole) +
              ", which CUDA cannot disable (only kernel, memset and memcpy nodes can be, and "
              "conditional nodes that capture_if/capture_while made), and " +
              name(*blocking) + why + "; the whole-step comparison above still holds"};
}

std::optional<std::size_t> detail::condition_setter(std::vector<node_description> const& nodes,
                                                    std::size_t position) {
  if (position >= nodes.size() || nodes[position].kind != node_kind::conditional) {
    return std::nullopt;
  }
  for (std::size_t d : nodes[position].dependencies) {
    if (d < nodes.size() && is_condition_setter(nodes[d])) return d;
  }
  return std::nullopt;
}

std::optional<std::uintptr_t> detail::condition_flag(std::vector<node_description> const& nodes,
                                                     std::size_t position) {
  auto const setter = condition_setter(nodes, position);
  if (!setter) return std::nullopt;
  std::uint64_t address{};
  std::memcpy(&address, nodes[*setter].arguments[1].data(), sizeof address);
  return static_cast<std::uintptr_t>(address);
}

bool detail::is_collective_kernel(std::string_view kernel_name) noexcept {
  return kernel_name.substr(0, 4) == "nccl";
}

std::optional<std::size_t> detail::first_unpaired(std::vector<node_description> const& a,
                                                  std::vector<node_description> const& b) {
  std::size_t const common = std::min(a.size(), b.size());
  for (std::size_t i = 0; i < common; ++i) {
    if (a[i].kind != b[i].kind) return i;
  }
  if (a.size() != b.size()) return common;
  return std::nullopt;
}

char const* name(divergence_cause cause) noexcept {
  switch (cause) {
    case divergence_cause::none: return "none: the replay matches the eager step";
    case divergence_cause::unreproducible_eager:
      return "the eager step itself computes differently from the same watched memory: it reads "
             "state that is neither watched nor restored (a generator's offset, a step count; "
             "watch it, or restore it in verify_options::before_each_run), or it is "
             "nondeterministic";
    case divergence_cause::capture_fails_now: return "capturing the step now fails";
    case divergence_cause::work_outside_capture:
      return "work outside the capture: the eager step differs from a fresh capture of itself "
             "(the legacy default stream, a stream that was not joined, a host write)";
    case divergence_cause::different_kernel:
      return "a kernel chosen at capture: the step launches another one now";
    case divergence_cause::launch_configuration:
      return "a launch configuration chosen at capture: the step launches another grid, block "
             "or shared-memory size now";
    case divergence_cause::frozen_argument:
      return "a parameter frozen at capture: a host value or a buffer the step passes "
             "differently now";
    case divergence_cause::changed_structure: return "the step records other work now";
    case divergence_cause::condition:
      return "a conditional node decides otherwise: the flag it reads differs when each graph "
             "reaches it";
    case divergence_cause::inside_nested_graph:
      return "inside a conditional node's body or a child graph, whose launches CUDA 13.0 does "
             "not report node by node; its condition agrees";
    case divergence_cause::same_launches:
      return "every launch is the same, yet the results differ (memory the step reads that is "
             "not watched or not restored, a race, nondeterministic kernels)";
  }
  return "unknown";
}

divergence_cause replay_report::cause() const noexcept {
  if (differences.empty()) return divergence_cause::none;
  if (!eager_unreproducible.empty()) return divergence_cause::unreproducible_eager;
  if (!capture_failure.empty()) return divergence_cause::capture_fails_now;
  if (!outside_capture.empty()) return divergence_cause::work_outside_capture;
  if (first_divergent) {
    if (divergence_cause const c = cause_of(first_divergent->changes);
        c != divergence_cause::same_launches) {
      return c;
    }
  }
  if (first_divergent && (first_divergent->at_capture.kind == node_kind::conditional ||
                          first_divergent->at_capture.kind == node_kind::child_graph)) {
    bool const decided_otherwise =
        first_divergent->condition_at_capture && first_divergent->condition_now &&
        *first_divergent->condition_at_capture != *first_divergent->condition_now;
    return decided_otherwise ? divergence_cause::condition : divergence_cause::inside_nested_graph;
  }
  if (!changed.empty()) return cause_of(changed.front().changes);
  if (first_unpaired) return divergence_cause::changed_structure;
  return divergence_cause::same_launches;
}

std::string replay_report::describe() const {
  std::ostringstream out;
  if (identical()) {
    out << "identical: the replay leaves every watched region as the eager step does\n";
    return out.str();
  }
  out << "the replay differs from the eager step in " << differences.size() << " watched region"
      << (differences.size() == 1 ? "" : "s") << ":\n";
  for (auto const& d : differences) describe_region(out, d, "eager step", "replay");
  out << "cause: " << name(cause()) << '\n';
  if (!eager_unreproducible.empty()) {
    out << "a second eager run against the first:\n";
    for (auto const& d : eager_unreproducible) {
      describe_region(out, d, "first eager run", "second eager run");
    }
  }
  if (!capture_failure.empty()) out << "capturing the step now fails: " << capture_failure << '\n';
  if (!outside_capture.empty()) {
    out << "the eager step against a fresh capture of it:\n";
    for (auto const& d : outside_capture) describe_region(out, d, "eager step", "fresh capture");
  }
  if (first_unpaired) {
    out << "the graph holds " << nodes_at_capture << " nodes, a fresh capture " << nodes_now
        << "; they stop pairing up at node " << *first_unpaired << '\n';
  }
  if (first_divergent) {
    out << "first node whose effect differs: node " << first_divergent->position << ", "
        << node_text(first_divergent->at_capture) << '\n';
    if (first_divergent->changes.empty()) {
      out << "    it launches the same work as a fresh capture; the memory it reads differs\n";
    } else {
      out << "    against the step now:\n";
      describe_changes(out, first_divergent->changes);
    }
    if (first_divergent->condition_at_capture && first_divergent->condition_now) {
      out << "    its condition's flag: " << *first_divergent->condition_at_capture
          << " in the graph, " << *first_divergent->condition_now << " in a fresh capture\n";
    }
    out << "    after it, the graph and a fresh capture differ in:\n";
    for (auto const& d : first_divergent->regions) {
      describe_region(out, d, "graph", "fresh capture");
    }
  }
  if (unstable_arguments > 0) {
    out << unstable_arguments << " parameter" << (unstable_arguments == 1 ? "" : "s")
        << " differ between two captures of the step (padding, addresses placed anew in every "
           "capture, conditional handles); not compared\n";
  }
  for (auto const& c : changed) {
    if (first_divergent && c.position == first_divergent->position) continue;
    out << "node " << c.position << " also launches differently now: " << node_text(c.at_capture)
        << '\n';
    describe_changes(out, c.changes);
  }
  if (!bisection_skipped.empty()) out << "no bisection: " << bisection_skipped << '\n';
  return out.str();
}

}  // namespace graphstep::diagnostics
