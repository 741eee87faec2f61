// The decisions of verify_replay: region comparison by element type, launch comparison, the
// order nodes run in one prefix at a time, which graphs can be bisected, and the report.

#include "diagnostics/detail/replay_divergence.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <graphstep/diagnostics/replay_divergence.hpp>
#include <graphstep/error.hpp>
#include <limits>
#include <string>
#include <vector>

namespace gd = graphstep::diagnostics;
namespace gs = graphstep;

namespace {

bool contains(std::string const& text, std::string const& part) {
  return text.find(part) != std::string::npos;
}

template <typename T>
std::vector<unsigned char> bytes_of(std::vector<T> const& values) {
  std::vector<unsigned char> out(values.size() * sizeof(T));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

std::optional<gd::region_difference> compare(gs::dtype element,
                                             std::vector<unsigned char> const& before,
                                             std::vector<unsigned char> const& first,
                                             std::vector<unsigned char> const& second) {
  return gd::detail::compare_region("r", element, before.data(), first.data(), second.data(),
                                    before.size());
}

gd::node_description kernel(std::uintptr_t function, std::vector<std::vector<unsigned char>> args,
                            unsigned grid = 4) {
  gd::node_description n;
  n.kind = gd::node_kind::kernel;
  n.parameters_known = true;
  n.function = function;
  n.kernel_name = "scale";
  n.grid = {grid, 1, 1};
  n.block = {128, 1, 1};
  n.arguments = std::move(args);
  return n;
}

}  // namespace

TEST(replay_divergence, identical_bytes_are_no_difference_even_for_nans) {
  float const nan = std::numeric_limits<float>::quiet_NaN();
  auto const a = bytes_of(std::vector<float>{1.0F, nan, 3.0F});
  EXPECT_FALSE(compare(gs::dtype::float32, a, a, a).has_value());
}

TEST(replay_divergence, a_float_region_reports_count_offset_and_largest_differences) {
  auto const before = bytes_of(std::vector<float>{0, 0, 0, 0});
  auto const eager = bytes_of(std::vector<float>{1.0F, 2.0F, 3.0F, 4.0F});
  auto const replay = bytes_of(std::vector<float>{1.0F, 2.5F, 3.0F, 2.0F});
  auto const d = compare(gs::dtype::float32, before, eager, replay);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->differing_elements, 2U);
  EXPECT_EQ(d->first_offset, 4U);
  EXPECT_DOUBLE_EQ(d->max_abs_difference, 2.0);
  EXPECT_DOUBLE_EQ(d->max_rel_difference, 0.5);
  EXPECT_EQ(d->writer, gd::written_by::both);
}

TEST(replay_divergence, sixteen_bit_elements_are_read_as_their_type) {
  // fp16 1.0 = 0x3c00, 2.0 = 0x4000; bf16 1.0 = 0x3f80, 2.0 = 0x4000.
  auto const before = bytes_of(std::vector<std::uint16_t>{0, 0});
  auto const half =
      compare(gs::dtype::float16, before, bytes_of(std::vector<std::uint16_t>{0x3c00, 0x3c00}),
              bytes_of(std::vector<std::uint16_t>{0x3c00, 0x4000}));
  ASSERT_TRUE(half.has_value());
  EXPECT_DOUBLE_EQ(half->max_abs_difference, 1.0);
  EXPECT_EQ(half->first_offset, 2U);
  auto const brain =
      compare(gs::dtype::bfloat16, before, bytes_of(std::vector<std::uint16_t>{0x3f80, 0x3f80}),
              bytes_of(std::vector<std::uint16_t>{0x4000, 0x3f80}));
  ASSERT_TRUE(brain.has_value());
  EXPECT_DOUBLE_EQ(brain->max_abs_difference, 1.0);
  EXPECT_DOUBLE_EQ(brain->max_rel_difference, 0.5);
  // An fp16 subnormal: 0x0001 is 2^-24.
  auto const tiny = compare(gs::dtype::float16, before, bytes_of(std::vector<std::uint16_t>{0, 0}),
                            bytes_of(std::vector<std::uint16_t>{1, 0}));
  ASSERT_TRUE(tiny.has_value());
  EXPECT_DOUBLE_EQ(tiny->max_abs_difference, 1.0 / (1 << 24));
}

TEST(replay_divergence, a_nan_on_one_side_is_an_infinite_difference) {
  auto const before = bytes_of(std::vector<float>{0});
  auto const d = compare(gs::dtype::float32, before, bytes_of(std::vector<float>{1}),
                         bytes_of(std::vector<float>{std::numeric_limits<float>::quiet_NaN()}));
  ASSERT_TRUE(d.has_value());
  EXPECT_TRUE(std::isinf(d->max_abs_difference));
}

TEST(replay_divergence, says_which_run_wrote_a_region_the_other_left_alone) {
  auto const before = bytes_of(std::vector<std::int32_t>{7, 7});
  auto const untouched = before;
  auto const written = bytes_of(std::vector<std::int32_t>{7, 9});
  EXPECT_EQ(compare(gs::dtype::int32, before, untouched, written)->writer,
            gd::written_by::replay_only);
  EXPECT_EQ(compare(gs::dtype::int32, before, written, untouched)->writer,
            gd::written_by::eager_only);
}

TEST(replay_divergence, a_region_of_partial_elements_is_refused) {
  std::vector<unsigned char> const six(6, 0);
  try {
    static_cast<void>(compare(gs::dtype::float32, six, six, six));
    FAIL() << "a 6-byte float32 region was accepted";
  } catch (graphstep::usage_error const& e) {
    EXPECT_TRUE(contains(e.what(), "6 bytes")) << e.what();
    EXPECT_TRUE(contains(e.what(), "float32")) << e.what();
  }
}

TEST(replay_divergence, a_uint8_region_is_compared_as_raw_bytes) {
  std::vector<unsigned char> const before{1, 2, 3, 4};
  std::vector<unsigned char> const changed{1, 200, 3, 5};
  auto const d = compare(gs::dtype::uint8, before, before, changed);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->element, gs::dtype::uint8);
  EXPECT_EQ(d->differing_elements, 2U);
  EXPECT_EQ(d->first_offset, 1U);
  // Bytes of a struct of the user's own: a numeric difference would mean nothing.
  EXPECT_EQ(d->max_abs_difference, 0.0);
  gd::replay_report report;
  report.differences.push_back(*d);
  EXPECT_TRUE(contains(report.describe(), "4 bytes of uint8")) << report.describe();
  EXPECT_FALSE(contains(report.describe(), "largest difference")) << report.describe();
}

TEST(replay_divergence, a_region_of_no_known_dtype_is_refused) {
  std::vector<unsigned char> const four(4, 0);
  try {
    static_cast<void>(compare(static_cast<gs::dtype>(42), four, four, four));
    FAIL() << "a region of dtype 42 was accepted";
  } catch (graphstep::usage_error const& e) {
    EXPECT_TRUE(contains(e.what(), "unknown dtype (42)")) << e.what();
  }
}

TEST(replay_divergence, launches_differ_by_argument_grid_and_kernel) {
  auto const lr_then = bytes_of(std::vector<float>{0.1F});
  auto const lr_now = bytes_of(std::vector<float>{0.05F});
  auto const pointer = bytes_of(std::vector<std::uint64_t>{0x7f0000001000});
  auto const at_capture = kernel(0x1000, {pointer, lr_then});
  EXPECT_TRUE(gd::detail::compare_launches(at_capture, at_capture).empty());

  auto const frozen = gd::detail::compare_launches(at_capture, kernel(0x1000, {pointer, lr_now}));
  ASSERT_EQ(frozen.size(), 1U);
  EXPECT_EQ(frozen[0].kind, gd::launch_change::what::argument);
  EXPECT_EQ(frozen[0].argument, 1U);
  EXPECT_TRUE(contains(frozen[0].at_capture, "float 0.1")) << frozen[0].at_capture;
  EXPECT_TRUE(contains(frozen[0].now, "float 0.05")) << frozen[0].now;

  auto const grid = gd::detail::compare_launches(at_capture, kernel(0x1000, {pointer, lr_then}, 8));
  ASSERT_EQ(grid.size(), 1U);
  EXPECT_EQ(grid[0].kind, gd::launch_change::what::grid);
  EXPECT_EQ(grid[0].at_capture, "(4, 1, 1)");
  EXPECT_EQ(grid[0].now, "(8, 1, 1)");

  auto const other = gd::detail::compare_launches(at_capture, kernel(0x2000, {pointer, lr_then}));
  ASSERT_EQ(other.size(), 1U);
  EXPECT_EQ(other[0].kind, gd::launch_change::what::kernel);

  gd::node_description memset;
  memset.kind = gd::node_kind::memset;
  auto const type = gd::detail::compare_launches(at_capture, memset);
  ASSERT_EQ(type.size(), 1U);
  EXPECT_EQ(type[0].kind, gd::launch_change::what::node_type);
}

TEST(replay_divergence, parameters_two_captures_disagree_on_are_not_compared) {
  auto const scalar_then = bytes_of(std::vector<float>{0.1F});
  auto const scalar_now = bytes_of(std::vector<float>{0.2F});
  auto const padded_a = bytes_of(std::vector<std::uint64_t>{0x11, 0xaa00000000000000});
  auto const padded_b = bytes_of(std::vector<std::uint64_t>{0x11, 0xbb00000000000000});
  auto const at_capture = kernel(0x1000, {padded_a, scalar_then});
  auto now = kernel(0x1000, {padded_b, scalar_now});
  EXPECT_EQ(gd::detail::compare_launches(at_capture, now).size(), 2U);
  auto const again = kernel(0x1000, {padded_a, scalar_now});
  EXPECT_EQ(gd::detail::mark_unstable_arguments(now, again), 1U);
  EXPECT_EQ(gd::detail::mark_unstable_arguments(now, again), 0U) << "marked once";
  auto const changes = gd::detail::compare_launches(at_capture, now);
  ASSERT_EQ(changes.size(), 1U);
  EXPECT_EQ(changes[0].argument, 1U) << "the scalar, not the unstable struct";
  // Only the same kernel with as many parameters is compared.
  auto const other = kernel(0x2000, {padded_a, scalar_now});
  auto fresh = kernel(0x1000, {padded_b, scalar_now});
  EXPECT_EQ(gd::detail::mark_unstable_arguments(fresh, other), 0U);
  gd::node_description memset;
  memset.kind = gd::node_kind::memset;
  EXPECT_EQ(gd::detail::mark_unstable_arguments(fresh, memset), 0U);
}

TEST(replay_divergence, kernels_whose_parameters_cuda_hides_compare_by_kind_only) {
  auto hidden = kernel(0x1000, {});
  hidden.parameters_known = false;
  EXPECT_TRUE(gd::detail::compare_launches(hidden, kernel(0x2000, {}, 9)).empty());
}

TEST(replay_divergence, memsets_compare_destination_value_and_shape) {
  gd::node_description a;
  a.kind = gd::node_kind::memset;
  a.destination = 0x1000;
  a.element_size = 4;
  a.width = 16;
  a.height = 1;
  auto b = a;
  EXPECT_TRUE(gd::detail::compare_launches(a, b).empty());
  b.value = 1;
  auto const changes = gd::detail::compare_launches(a, b);
  ASSERT_EQ(changes.size(), 1U);
  EXPECT_EQ(changes[0].kind, gd::launch_change::what::memset);
  EXPECT_TRUE(contains(changes[0].now, "value 1")) << changes[0].now;
}

TEST(replay_divergence, argument_text_reads_four_and_eight_byte_values) {
  EXPECT_EQ(gd::detail::argument_text(bytes_of(std::vector<std::int32_t>{1})),
            "0x00000001 (int 1, float 1.4013e-45)");
  EXPECT_TRUE(contains(gd::detail::argument_text(bytes_of(std::vector<std::uint64_t>{0xabcdef})),
                       "0x0000000000abcdef (an address"));
  EXPECT_EQ(gd::detail::argument_text({0x01, 0x02}), "0x0201");
}

TEST(replay_divergence, execution_order_follows_dependencies_and_keeps_listed_order) {
  // Node 1 depends on node 0: listed order holds.
  EXPECT_EQ(gd::detail::execution_order({{}, {0}, {}}), (std::vector<std::size_t>{0, 1, 2}));
  // Node 0 depends on node 2 (listed later): 1 and 2 go first.
  EXPECT_EQ(gd::detail::execution_order({{2}, {}, {}}), (std::vector<std::size_t>{1, 2, 0}));
  EXPECT_THROW(static_cast<void>(gd::detail::execution_order({{1}, {0}})), graphstep::usage_error);
  EXPECT_THROW(static_cast<void>(gd::detail::execution_order({{5}})), graphstep::usage_error);
  EXPECT_TRUE(gd::detail::execution_order({}).empty());
}

namespace {

std::vector<gd::node_description> nodes_of(std::initializer_list<gd::node_kind> kinds) {
  std::vector<gd::node_description> nodes;
  for (gd::node_kind k : kinds) {
    nodes.emplace_back();
    nodes.back().kind = k;
  }
  return nodes;
}

// capture_if's two nodes: the kernel that hands `flag` to the handle, and the conditional node
// depending on it.
void add_capture_if(std::vector<gd::node_description>& nodes, std::uint64_t flag) {
  auto setter = kernel(0x3000, {bytes_of(std::vector<std::uint64_t>{42}),
                                bytes_of(std::vector<std::uint64_t>{flag})});
  setter.kernel_name = "graphstep::graphs::set_condition_kernel";
  nodes.push_back(setter);
  nodes.emplace_back();
  nodes.back().kind = gd::node_kind::conditional;
  nodes.back().dependencies = {nodes.size() - 2};
}

}  // namespace

TEST(replay_divergence, bisection_disables_nodes_or_runs_prefix_graphs_or_is_refused) {
  using k = gd::node_kind;
  auto const plain = nodes_of({k::kernel, k::memset, k::memcpy, k::empty, k::event_record,
                               k::event_wait, k::memory_allocation, k::memory_free});
  EXPECT_EQ(gd::detail::plan_bisection(plain, plain).method,
            gd::detail::bisection_method::disable_nodes);
  auto with_capture_if = nodes_of({k::kernel});
  add_capture_if(with_capture_if, 0x7f0000002000);
  EXPECT_EQ(gd::detail::plan_bisection(with_capture_if, with_capture_if).method,
            gd::detail::bisection_method::disable_nodes)
      << "capture_if's conditional node is switched off through its setter";
  for (k whole : {k::host_function, k::child_graph, k::other}) {
    auto const nodes = nodes_of({k::kernel, whole});
    EXPECT_EQ(gd::detail::plan_bisection(nodes, nodes).method,
              gd::detail::bisection_method::prefix_graphs)
        << gd::name(whole);
  }

  // A conditional node set some other way runs whole, and CUDA copies no graph holding one.
  auto const raw_conditional = nodes_of({k::kernel, k::conditional});
  auto const unset = gd::detail::plan_bisection(raw_conditional, raw_conditional);
  EXPECT_EQ(unset.method, gd::detail::bisection_method::refused);
  EXPECT_TRUE(contains(unset.refusal, "node 1 of the graph is a conditional node"))
      << unset.refusal;
  EXPECT_TRUE(contains(unset.refusal, "cudaErrorNotSupported")) << unset.refusal;

  // A host function in the fresh capture needs copies; the graph's conditional node forbids them.
  auto const hosted = nodes_of({k::kernel, k::host_function});
  auto const mixed = gd::detail::plan_bisection(with_capture_if, hosted);
  EXPECT_EQ(mixed.method, gd::detail::bisection_method::refused);
  EXPECT_TRUE(contains(mixed.refusal, "node 1 of the fresh capture is a host function"))
      << mixed.refusal;
  EXPECT_TRUE(contains(mixed.refusal, "node 2 of the graph is a conditional node"))
      << mixed.refusal;

  auto const allocating = nodes_of({k::kernel, k::child_graph, k::memory_allocation});
  auto const refused = gd::detail::plan_bisection(allocating, allocating);
  EXPECT_EQ(refused.method, gd::detail::bisection_method::refused);
  EXPECT_TRUE(contains(refused.refusal, "node 1 of the graph is a child graph")) << refused.refusal;
  EXPECT_TRUE(contains(refused.refusal, "node 2 of the graph is a memory allocation"))
      << refused.refusal;
}

TEST(replay_divergence, a_conditionals_flag_is_the_argument_of_the_setter_it_depends_on) {
  std::uint64_t const flag = 0x7f0000002000;
  std::uint64_t const other_flag = 0x7f0000003000;
  auto nodes = std::vector<gd::node_description>{kernel(0x1000, {})};
  add_capture_if(nodes, flag);        // setter 1, conditional 2
  add_capture_if(nodes, other_flag);  // setter 3, conditional 4
  EXPECT_EQ(gd::detail::condition_setter(nodes, 2), 1U);
  EXPECT_EQ(gd::detail::condition_flag(nodes, 2), flag);
  EXPECT_EQ(gd::detail::condition_flag(nodes, 4), other_flag);
  // Concurrent branches: both setters run before both conditional nodes.
  std::swap(nodes[2], nodes[3]);
  nodes[3].dependencies = {1};
  nodes[4].dependencies = {2};
  EXPECT_EQ(gd::detail::condition_flag(nodes, 3), flag);
  EXPECT_EQ(gd::detail::condition_flag(nodes, 4), other_flag);
  EXPECT_FALSE(gd::detail::condition_flag(nodes, 1).has_value()) << "not a conditional node";
  nodes[4].dependencies = {0};
  EXPECT_FALSE(gd::detail::condition_flag(nodes, 4).has_value())
      << "no setter among its dependencies";
  EXPECT_FALSE(gd::detail::condition_flag(nodes, 9).has_value());
}

TEST(replay_divergence, collective_kernels_are_named_by_nccls_prefix) {
  EXPECT_TRUE(gd::detail::is_collective_kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL"));
  EXPECT_FALSE(gd::detail::is_collective_kernel("scale_kernel"));
  EXPECT_FALSE(gd::detail::is_collective_kernel(""));
}

TEST(replay_divergence, node_lists_pair_up_until_a_kind_differs_or_one_ends) {
  gd::node_description k;
  k.kind = gd::node_kind::kernel;
  gd::node_description m;
  m.kind = gd::node_kind::memset;
  EXPECT_FALSE(gd::detail::first_unpaired({k, m}, {k, m}).has_value());
  EXPECT_EQ(gd::detail::first_unpaired({k, m}, {k, k}), 1U);
  EXPECT_EQ(gd::detail::first_unpaired({k}, {k, m}), 1U);
}

TEST(replay_divergence, the_report_names_the_cause_from_what_was_found) {
  gd::replay_report report;
  EXPECT_TRUE(report.identical());
  EXPECT_EQ(report.cause(), gd::divergence_cause::none);
  EXPECT_TRUE(contains(report.describe(), "identical"));

  auto const before = bytes_of(std::vector<float>{0, 0});
  report.differences.push_back(*compare(gs::dtype::float32, before,
                                        bytes_of(std::vector<float>{1, 1}),
                                        bytes_of(std::vector<float>{1, 2})));
  EXPECT_EQ(report.cause(), gd::divergence_cause::same_launches);

  report.first_unpaired = 3;
  EXPECT_EQ(report.cause(), gd::divergence_cause::changed_structure);

  gd::divergent_node node;
  node.position = 2;
  node.at_capture = kernel(0x1000, {bytes_of(std::vector<float>{0.1F})});
  node.now = kernel(0x1000, {bytes_of(std::vector<float>{0.2F})});
  node.changes = gd::detail::compare_launches(node.at_capture, node.now);
  node.regions = report.differences;
  report.first_divergent = node;
  EXPECT_EQ(report.cause(), gd::divergence_cause::frozen_argument);
  std::string const text = report.describe();
  EXPECT_TRUE(contains(text, "first node whose effect differs: node 2, kernel scale")) << text;
  EXPECT_TRUE(contains(text, "parameter 0")) << text;

  gd::divergent_node nested;
  nested.position = 4;
  nested.at_capture.kind = gd::node_kind::conditional;
  nested.now.kind = gd::node_kind::conditional;
  nested.condition_at_capture = 1U;
  nested.condition_now = 1U;
  report.first_divergent = nested;
  EXPECT_EQ(report.cause(), gd::divergence_cause::inside_nested_graph);
  report.first_divergent->condition_now = 0U;
  EXPECT_EQ(report.cause(), gd::divergence_cause::condition);
  EXPECT_TRUE(contains(report.describe(), "flag: 1 in the graph, 0 in a fresh capture"))
      << report.describe();

  report.outside_capture = report.differences;
  EXPECT_EQ(report.cause(), gd::divergence_cause::work_outside_capture);
  report.capture_failure = "cudaErrorStreamCaptureImplicit";
  EXPECT_EQ(report.cause(), gd::divergence_cause::capture_fails_now);
  EXPECT_TRUE(contains(report.describe(), "cudaErrorStreamCaptureImplicit"));
  report.eager_unreproducible = report.differences;
  EXPECT_EQ(report.cause(), gd::divergence_cause::unreproducible_eager);
  EXPECT_TRUE(contains(report.describe(), "a second eager run against the first"));
}
