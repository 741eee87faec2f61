// Kernel launches tagged where they are launched and found by tag beside the loop: the step's
// code runs eagerly and captured alike, the loop sets a tagged launch's grid and arguments, and
// each refusal says what to do.

#include <cstdint>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/graphs/kernel_node_tags.hpp>
#include <string>
#include <vector>

#include "common/error_message.hpp"
#include "common/gpu_test.hpp"

namespace gs = graphstep;

namespace {

__global__ void fill_kernel(float* out, float value, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = value;
}

__global__ void scale_kernel(float* out, float factor, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] *= factor;
}

class kernel_node_tags_test : public gs::testing::stream_pool_test {};

using gs::testing::contains;
using gs::testing::message_of;

// A step as a C trainer writes it, deep in its own code: the launch is tagged where it is made,
// and the loop never sees the capture site.
void step_code(float* out, int n, gs::graphs::kernel_node_tags& tags, cudaStream_t stream) {
  fill_kernel<<<(n + 63) / 64, 64, 0, stream>>>(out, 1.0F, n);
  tags.tag("fill", stream, fill_kernel);
  scale_kernel<<<(n + 63) / 64, 64, 0, stream>>>(out, 2.0F, n);
  tags.tag("scale", stream, scale_kernel);
}

}  // namespace

TEST_F(kernel_node_tags_test, the_loop_sets_a_tagged_launch_found_by_its_tag) {
  int const n = 200;
  auto* out = blocks_->get(n);
  gs::graphs::kernel_node_tags tags;
  // Eagerly the tags record nothing: the same code runs with and without a capture.
  step_code(out, n, tags, stream_->get());
  EXPECT_EQ(tags.size(), 0U);
  EXPECT_EQ(gs::testing::copy_to_host(out, n, *stream_), std::vector<float>(n, 2.0F));

  gs::graphs::graph_exec step;
  gs::graphs::capture(step, *stream_, *pool_, [&] { step_code(out, n, tags, stream_->get()); });
  EXPECT_EQ(tags.size(), 2U);
  EXPECT_TRUE(tags.contains("scale"));
  EXPECT_FALSE(tags.contains("adamw"));
  for (int k = 1; k <= 3; ++k) {
    // Per step, beside the loop: a factor and a grid that covers only the first k·50 elements.
    auto& scale = tags.node("scale", scale_kernel);
    scale.set_argument<1>(step, static_cast<float>(k + 2));
    scale.set_grid(step, dim3{static_cast<unsigned>(k * 50 + 63) / 64});
    scale.set_argument<2>(step, k * 50);
    step.replay(*stream_);
    std::vector<float> expected(n, 1.0F);
    for (int i = 0; i < k * 50; ++i) expected[static_cast<std::size_t>(i)] = static_cast<float>(k + 2);
    ASSERT_EQ(gs::testing::copy_to_host(out, n, *stream_), expected) << "step " << k;
  }
  // The node remembers what was set last: a later set keeps the rest.
  EXPECT_EQ(std::get<2>(tags.node("scale", scale_kernel).arguments()), 150);
  tags.node("fill", fill_kernel).set_argument<1>(step, 0.5F);
  step.replay(*stream_);
  std::vector<float> expected(n, 0.5F);
  for (int i = 0; i < 150; ++i) expected[static_cast<std::size_t>(i)] = 2.5F;
  EXPECT_EQ(gs::testing::copy_to_host(out, n, *stream_), expected);
}

TEST_F(kernel_node_tags_test, a_step_captured_again_tags_its_own_launches) {
  int const n = 64;
  auto* out = blocks_->get(n);
  gs::graphs::kernel_node_tags tags;
  gs::graphs::graph_exec first;
  gs::graphs::capture(first, *stream_, *pool_, [&] { step_code(out, n, tags, stream_->get()); });
  gs::graphs::graph_exec second;
  gs::graphs::capture(second, *stream_, *pool_, [&] { step_code(out, n, tags, stream_->get()); });
  auto& fill = tags.node("fill", fill_kernel);
  fill.set_argument<1>(second, 4.0F);
  second.replay(*stream_);
  EXPECT_EQ(gs::testing::copy_to_host(out, n, *stream_), std::vector<float>(n, 8.0F));
  // The tag now names the second capture's launch: the first executable is refused by it.
  EXPECT_PRED2(contains, message_of([&] { fill.set_argument<1>(first, 3.0F); }),
               "captured into another graph");
}

TEST_F(kernel_node_tags_test, wrong_tags_are_refused_saying_what_to_do) {
  int const n = 32;
  auto* out = blocks_->get(n);
  gs::graphs::kernel_node_tags tags;
  gs::graphs::graph_exec step;
  EXPECT_PRED2(contains, message_of([&] {
                 gs::graphs::capture(step, *stream_, *pool_, [&] {
                   fill_kernel<<<1, 32, 0, stream_->get()>>>(out, 1.0F, n);
                   tags.tag("fill", stream_->get(), fill_kernel);
                   fill_kernel<<<1, 32, 0, stream_->get()>>>(out, 2.0F, n);
                   tags.tag("fill", stream_->get(), fill_kernel);
                 });
               }),
               "tag 'fill' marks a launch of this capture already");
  gs::graphs::kernel_node_tags fresh;
  EXPECT_PRED2(contains, message_of([&] {
                 gs::graphs::capture(step, *stream_, *pool_, [&] {
                   fill_kernel<<<1, 32, 0, stream_->get()>>>(out, 1.0F, n);
                   fresh.tag("fill", stream_->get(), scale_kernel);
                 });
               }),
               "launches another function than the one given");
  EXPECT_EQ(fresh.size(), 0U);  // a refused tag records nothing
  EXPECT_PRED2(contains, message_of([&] { fresh.tag("", stream_->get(), fill_kernel); }),
               "the tag is empty");
  gs::graphs::capture(step, *stream_, *pool_, [&] {
    fill_kernel<<<1, 32, 0, stream_->get()>>>(out, 1.0F, n);
    fresh.tag("fill", stream_->get(), fill_kernel);
  });
  EXPECT_PRED2(contains, message_of([&] { static_cast<void>(fresh.node("fil", fill_kernel)); }),
               "no launch is tagged 'fil' (the tags are 'fill')");
  EXPECT_PRED2(contains,
               message_of([&] { static_cast<void>(fresh.node("fill", scale_kernel)); }),
               "tag 'fill' marks a launch of another kernel");
  // The node's own checks hold: an empty grid is refused.
  EXPECT_PRED2(contains,
               message_of([&] { fresh.node("fill", fill_kernel).set_grid(step, dim3{0}); }),
               "has an empty extent");
}
