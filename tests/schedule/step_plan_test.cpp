// Validation of a step of graphed and eager segments on several streams.

#include <gtest/gtest.h>

#include <graphstep/error.hpp>
#include <graphstep/schedule/step_plan.hpp>
#include <string>

namespace gsch = graphstep::schedule;

namespace {

gsch::step_spec pipeline() {
  gsch::step_spec spec;
  spec.streams = {"compute", "comm"};
  spec.static_inputs = {"batch"};
  spec.segments = {
      {"forward", true, "compute", {}, {"batch"}, {"activations"}},
      {"backward", true, "compute", {}, {"activations"}, {"grads"}},
      {"allreduce", true, "comm", {"backward"}, {"grads"}, {"grads"}},
      {"clip", false, "compute", {"allreduce"}, {"grads"}, {"grads"}},
      {"optimizer", true, "compute", {}, {"grads"}, {"weights"}},
  };
  return spec;
}

std::string error_of(gsch::step_spec const& spec) {
  try {
    static_cast<void>(gsch::plan_step(spec));
  } catch (graphstep::usage_error const& e) {
    return e.what();
  }
  ADD_FAILURE() << "no usage_error";
  return {};
}

}  // namespace

TEST(step_plan, waits_only_across_streams) {
  auto const plan = gsch::plan_step(pipeline());
  ASSERT_EQ(plan.cross_waits.size(), 5U);
  EXPECT_TRUE(plan.cross_waits[0].empty());
  EXPECT_EQ(plan.cross_waits[2], (std::vector<std::size_t>{1}));  // comm waits for backward
  EXPECT_EQ(plan.cross_waits[3], (std::vector<std::size_t>{2}));  // clip waits for allreduce
  EXPECT_EQ(plan.stream_of, (std::vector<std::size_t>{0, 0, 1, 0, 0}));
}

TEST(step_plan, a_cycle_is_named) {
  auto spec = pipeline();
  spec.segments[1].after = {"clip"};
  std::string const what = error_of(spec);
  EXPECT_NE(what.find("cycle"), std::string::npos) << what;
  EXPECT_NE(what.find("clip"), std::string::npos) << what;
}

TEST(step_plan, unknown_streams_and_segments_and_duplicates) {
  auto spec = pipeline();
  spec.segments[2].stream = "nccl";
  EXPECT_NE(error_of(spec).find("stream 'nccl'"), std::string::npos);
  spec = pipeline();
  spec.segments[3].after = {"allreduse"};
  EXPECT_NE(error_of(spec).find("'allreduse', which is not a segment"), std::string::npos);
  spec = pipeline();
  spec.segments[4].name = "forward";
  EXPECT_NE(error_of(spec).find("two segments are named 'forward'"), std::string::npos);
  spec = pipeline();
  spec.segments[0].name = "";
  EXPECT_NE(error_of(spec).find("has no name"), std::string::npos);
  EXPECT_THROW(static_cast<void>(gsch::plan_step({})), graphstep::usage_error);
}

TEST(step_plan, a_dependency_on_a_later_segment_must_be_reordered) {
  auto spec = pipeline();
  spec.segments[0].after = {"optimizer"};
  spec.segments[4].reads = {"batch"};  // keep the rest valid
  std::string const what = error_of(spec);
  EXPECT_NE(what.find("issued after it"), std::string::npos) << what;
}

TEST(step_plan, reads_need_a_writer_or_a_static_input) {
  auto spec = pipeline();
  spec.static_inputs.clear();
  std::string const what = error_of(spec);
  EXPECT_NE(what.find("'forward' reads 'batch', which no earlier segment writes"),
            std::string::npos)
      << what;
}

TEST(step_plan, a_read_across_streams_without_a_wait_is_a_race) {
  auto spec = pipeline();
  spec.segments[2].after.clear();  // allreduce reads grads written by backward on compute
  std::string const what = error_of(spec);
  EXPECT_NE(what.find("'allreduce' reads 'grads', written by 'backward' on another stream"),
            std::string::npos)
      << what;
}
