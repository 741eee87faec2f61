// What kernel_node refuses: a "last launch" that is not exactly one launch of the kernel asked
// for, an executable from another capture, an empty launch configuration.

#include "graphs/detail/kernel_node_rules.hpp"

#include <gtest/gtest.h>

#include <string>

#include "common/error_message.hpp"

namespace gd = graphstep::graphs::detail;
using graphstep::testing::contains;

namespace {
gd::last_capture one_launch() {
  gd::last_capture last;
  last.active = true;
  last.nodes = 1;
  last.node_type = "kernel";
  last.same_function = true;
  return last;
}
}  // namespace

TEST(kernel_node_rules, one_launch_of_the_kernel_asked_for_is_the_launch) {
  EXPECT_EQ(gd::why_not_the_launch(one_launch()), "");
}

TEST(kernel_node_rules, anything_else_captured_last_is_refused_with_the_reason) {
  gd::last_capture last = one_launch();
  last.active = false;
  EXPECT_PRED2(contains, gd::why_not_the_launch(last), "the stream is not capturing");
  last = one_launch();
  last.nodes = 0;
  EXPECT_PRED2(contains, gd::why_not_the_launch(last), "nothing has been captured");
  last = one_launch();
  last.nodes = 2;
  EXPECT_PRED2(contains, gd::why_not_the_launch(last), "would follow 2 nodes (branches joined");
  last = one_launch();
  last.node_type = "memset";
  last.same_function = false;
  EXPECT_PRED2(contains, gd::why_not_the_launch(last), "is a memset node, not a kernel launch");
  last = one_launch();
  last.same_function = false;
  EXPECT_PRED2(contains, gd::why_not_the_launch(last), "launches another function");
  last = one_launch();
  last.arguments_readable = false;
  EXPECT_PRED2(contains, gd::why_not_the_launch(last), "arguments packed in `extra`");
  for (std::string const& refusal :
       {gd::why_not_the_launch(gd::last_capture{}), gd::why_not_the_launch(last)}) {
    EXPECT_PRED2(contains, refusal, "last_captured_launch: ");
  }
}

TEST(kernel_node_rules, a_node_updates_only_executables_of_its_own_capture) {
  EXPECT_EQ(gd::why_not_this_executable(7, 7, "step"), "");
  EXPECT_PRED2(contains, gd::why_not_this_executable(7, 8, "step"),
               "captured into another graph than 'step' (capture sequence 7, 'step' comes from "
               "capture sequence 8)");
  // Unknown sequences never match, not even each other.
  EXPECT_PRED2(contains, gd::why_not_this_executable(0, 0, "adopted"), "no known capture");
  EXPECT_NE(gd::why_not_this_executable(7, 0, "adopted"), "");
}

TEST(kernel_node_rules, every_extent_of_a_launch_is_at_least_one) {
  EXPECT_EQ(gd::why_not_these_dimensions({4, 1, 1}, {128, 1, 1}), "");
  EXPECT_PRED2(contains, gd::why_not_these_dimensions({4, 0, 1}, {128, 1, 1}),
               "the grid (4, 0, 1) has an empty extent");
  EXPECT_PRED2(contains, gd::why_not_these_dimensions({4, 1, 1}, {0, 1, 1}),
               "the block (0, 1, 1) has an empty extent");
}

TEST(kernel_node_rules, a_tag_names_one_launch_of_a_capture) {
  EXPECT_EQ(gd::why_not_this_tag("adamw", 7, 0), "");  // never tagged
  EXPECT_EQ(gd::why_not_this_tag("adamw", 8, 7), "");  // the step captured again
  EXPECT_PRED2(contains, gd::why_not_this_tag("adamw", 7, 7),
               "tag 'adamw' marks a launch of this capture already");
  EXPECT_PRED2(contains, gd::why_not_this_tag("", 7, 0), "the tag is empty");
}

TEST(kernel_node_rules, a_tag_finds_a_launch_of_its_kernel_or_says_which_tags_there_are) {
  EXPECT_EQ(gd::why_no_tagged_node("adamw", true, true, {"adamw"}), "");
  std::string const unknown = gd::why_no_tagged_node("adam", false, false, {"lr", "adamw"});
  EXPECT_PRED2(contains, unknown, "no launch is tagged 'adam'");
  EXPECT_PRED2(contains, unknown, "the tags are 'adamw', 'lr'");
  EXPECT_PRED2(contains, unknown, "tag(\"adam\", stream, kernel)");
  EXPECT_PRED2(contains, gd::why_no_tagged_node("adam", false, false, {}),
               "no launch is tagged at all");
  EXPECT_PRED2(contains, gd::why_no_tagged_node("adamw", true, false, {"adamw"}),
               "marks a launch of another kernel");
}
