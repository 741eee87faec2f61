// The optimizer interface, run alike on SGD, Adam and the mixed-precision AdamW through a
// `train::optimizer&`: built from a parameter layout they step as when built from the list of
// its tensors; a checkpoint round trip resumes bit for bit, refusing another layout; a
// learning rate read on the device gives the bits of the same rate set as the schedule; and
// the calls that would freeze a value into a graph are refused inside a capture.

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device_buffer.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/memory/parameter_buffer.hpp>
#include <graphstep/memory/step_input.hpp>
#include <graphstep/parameter_layout.hpp>
#include <graphstep/train/adam.hpp>
#include <graphstep/train/checkpoint.hpp>
#include <graphstep/train/device_checkpoint.hpp>
#include <graphstep/train/lr_schedule.hpp>
#include <graphstep/train/mixed_precision_adamw.hpp>
#include <graphstep/train/optimizer.hpp>
#include <graphstep/train/optimizer_options.hpp>
#include <graphstep/train/sgd.hpp>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/error_message.hpp"
#include "common/stream_test.hpp"

namespace gs = graphstep;
namespace gt = graphstep::train;
using gs::testing::message_of;

static_assert(std::is_abstract_v<gt::optimizer>);
static_assert(std::has_virtual_destructor_v<gt::optimizer>);
static_assert(!std::is_copy_constructible_v<gt::optimizer>);
static_assert(std::is_base_of_v<gt::optimizer, gt::sgd>);
static_assert(std::is_base_of_v<gt::optimizer, gt::adam>);
static_assert(std::is_base_of_v<gt::optimizer, gt::mixed_precision_adamw>);
static_assert(std::is_nothrow_move_constructible_v<gt::sgd>);
static_assert(std::is_nothrow_move_constructible_v<gt::adam>);

namespace {

using layout_factory = std::function<std::unique_ptr<gt::optimizer>(
    gs::memory::parameter_buffer&, gs::memory::parameter_buffer const&, gt::lr_schedule const&,
    gs::cuda::stream_view)>;
using list_factory = std::function<std::unique_ptr<gt::optimizer>(
    std::vector<gt::parameter> const&, gt::lr_schedule const&, gs::cuda::stream_view)>;

// One optimizer, with options that give every state buffer work to do.
struct optimizer_kind {
  std::string name;
  layout_factory from_layout;
  list_factory from_list;
};
void PrintTo(optimizer_kind const& kind, std::ostream* out) {
  *out << kind.name;
}

gt::sgd_options const sgd_settings{0.9F, 0.0F, 0.01F, true};  // Nesterov momentum, L2 decay
gt::adam_options const adam_settings{0.9F, 0.999F, 1e-8F, 0.01F};
std::vector<gt::parameter_group> const adamw_groups{{0.01F, 1.0F}};
gt::mixed_adamw_options adamw_settings() {
  gt::mixed_adamw_options options;
  options.max_grad_norm = 1.0F;
  return options;
}

std::vector<optimizer_kind> kinds() {
  return {
      {"sgd",
       [](auto& w, auto const& g, auto const& schedule, auto stream) {
         return std::make_unique<gt::sgd>(w, g, sgd_settings, schedule, nullptr, stream);
       },
       [](auto const& list, auto const& schedule, auto stream) {
         return std::make_unique<gt::sgd>(list, sgd_settings, schedule, nullptr, stream);
       }},
      {"adam",
       [](auto& w, auto const& g, auto const& schedule, auto stream) {
         return std::make_unique<gt::adam>(w, g, adam_settings, schedule, nullptr, stream);
       },
       [](auto const& list, auto const& schedule, auto stream) {
         return std::make_unique<gt::adam>(list, adam_settings, schedule, nullptr, stream);
       }},
      {"mixed_precision_adamw",
       [](auto& w, auto const& g, auto const& schedule, auto stream) {
         return std::make_unique<gt::mixed_precision_adamw>(
             w, g, adamw_groups, adamw_settings(), schedule, nullptr, stream);
       },
       [](auto const& list, auto const& schedule, auto stream) {
         return std::make_unique<gt::mixed_precision_adamw>(list, adamw_groups, adamw_settings(),
                                                            schedule, nullptr, stream);
       }},
  };
}

// A small model: three fp32 tensors (a matrix over several chunks, a bias, a vector), each on
// the layout's 256-byte boundary.
gs::parameter_layout model_layout(std::size_t tensors = 3) {
  gs::parameter_layout layout;
  layout.add({"fc.weight", {70, 1000}, gs::dtype::float32});
  if (tensors > 1) layout.add({"fc.bias", {70}, gs::dtype::float32});
  if (tensors > 2) layout.add({"scale", {33}, gs::dtype::float32});
  return layout;
}

class optimizer_interface : public gs::testing::stream_test,
                            public ::testing::WithParamInterface<optimizer_kind> {
 protected:
  // A buffer of the layout's size holding `values` (one float per 4 bytes, gaps included).
  gs::cuda::device_buffer buffer(std::vector<float> const& values) {
    gs::cuda::device_buffer device{sizeof(float) * values.size(), *stream_};
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(device.data(), values.data(), device.size(),
                                       cudaMemcpyHostToDevice, stream_->get()));
    sync();
    return device;
  }
  // A parameter buffer of `layout` holding `values`.
  gs::memory::parameter_buffer weights(gs::parameter_layout const& layout,
                                       std::vector<float> const& values) {
    gs::memory::parameter_buffer device{layout, *stream_};
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(device.data(), values.data(), device.bytes(),
                                       cudaMemcpyHostToDevice, stream_->get()));
    sync();
    return device;
  }
  std::vector<float> download(gs::memory::parameter_buffer const& device) {
    return download(device.buffer());
  }
  std::vector<float> download(gs::cuda::device_buffer const& device) {
    std::vector<float> host(device.size() / sizeof(float));
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(host.data(), device.data(), device.size(),
                                       cudaMemcpyDeviceToHost, stream_->get()));
    sync();
    return host;
  }
  static std::vector<float> random(gs::parameter_layout const& layout, float range,
                                   std::mt19937& rng) {
    std::uniform_real_distribution<float> dist{-range, range};
    std::vector<float> values(layout.buffer_bytes() / sizeof(float));
    for (float& v : values) v = dist(rng);
    return values;
  }
  // The elements of the layout's tensors in a buffer's values, the gaps between them left out.
  static std::vector<float> in_tensors(gs::parameter_layout const& layout,
                                       std::vector<float> const& values) {
    std::vector<float> elements;
    for (gs::parameter_slot const& slot : layout.slots()) {
      auto const first = values.begin() + static_cast<std::ptrdiff_t>(slot.offset);
      elements.insert(elements.end(), first, first + static_cast<std::ptrdiff_t>(slot.spec.count()));
    }
    return elements;
  }
  static std::vector<std::uint32_t> bits(std::vector<float> const& values) {
    std::vector<std::uint32_t> out(values.size());
    std::memcpy(out.data(), values.data(), sizeof(float) * values.size());
    return out;
  }
  static gt::lr_schedule warmup_cosine() {
    gt::lr_schedule schedule;
    schedule.shape = gt::lr_shape::warmup_cosine;
    schedule.base = 0.05F;
    schedule.warmup_steps = 2;
    schedule.total_steps = 8;
    return schedule;
  }
  static gt::lr_schedule constant(float rate) {
    gt::lr_schedule schedule;
    schedule.base = rate;
    return schedule;
  }
};

}  // namespace

// Built from the layout and its two buffers, the optimizer updates the layout's tensors as one
// built from the list of the same tensors does, bit for bit, graphed against eager; the steps
// are counted alike and the gaps between tensors are not written.
TEST_P(optimizer_interface, steps_from_the_layout_match_steps_from_its_tensors) {
  std::mt19937 rng{41};
  auto const layout = model_layout();
  auto const initial = random(layout, 1.0F, rng);
  auto by_layout = weights(layout, initial);
  auto by_list = buffer(initial);
  auto const gradients = weights(layout, random(layout, 1.0F, rng));
  std::vector<gt::parameter> list;
  for (gs::parameter_slot const& slot : layout.slots()) {
    auto* const gradient = static_cast<unsigned char*>(gradients.data()) + slot.byte_offset();
    list.push_back({{static_cast<unsigned char*>(by_list.data()) + slot.byte_offset(),
                     slot.spec.type(), slot.spec.count()},
                    {gradient, slot.spec.type(), slot.spec.count()},
                    slot.group});
  }
  auto const schedule = warmup_cosine();
  std::unique_ptr<gt::optimizer> const from_layout =
      GetParam().from_layout(by_layout, gradients, schedule, *stream_);
  std::unique_ptr<gt::optimizer> const from_list = GetParam().from_list(list, schedule, *stream_);
  EXPECT_STREQ(from_layout->name(), GetParam().name.c_str());
  gs::graphs::graph_exec step;
  gs::graphs::capture(step, *stream_, [&] { from_layout->step(*stream_); });
  for (int s = 1; s <= 3; ++s) {
    step.replay(*stream_);
    from_list->step(*stream_);
    ASSERT_EQ(bits(download(by_layout)), bits(download(by_list))) << "step " << s;
  }
  EXPECT_EQ(from_layout->steps_taken(*stream_), 3);
  EXPECT_EQ(from_list->steps_taken(*stream_), 3);
  auto const after = download(by_layout);
  EXPECT_NE(after[0], initial[0]) << "the step changed nothing";
  std::size_t const gap = layout.bytes_through(1) / sizeof(float) - 1;
  ASSERT_GT(gap, layout.at(1).offset + layout.at(1).spec.count() - 1);
  EXPECT_EQ(after[gap], initial[gap]) << "a gap between tensors was written";
}

// Saved after two steps to a file and restored into an optimizer over other weights (whose own
// graph, captured before, had taken a step of its own), with the model's weights: the next
// steps are the ones the saved optimizer takes, bit for bit, and both then save the same state.
// A checkpoint of a model with more tensors, or under another prefix, is refused and changes
// nothing.
TEST_P(optimizer_interface, a_restored_optimizer_takes_the_same_steps_bit_for_bit) {
  std::mt19937 rng{42};
  auto const layout = model_layout();
  auto went_on_weights = weights(layout, random(layout, 1.0F, rng));
  auto resumed_weights = weights(layout, random(layout, 3.0F, rng));
  auto const gradients = weights(layout, random(layout, 1.0F, rng));
  auto const schedule = warmup_cosine();
  std::unique_ptr<gt::optimizer> const went_on =
      GetParam().from_layout(went_on_weights, gradients, schedule, *stream_);
  std::unique_ptr<gt::optimizer> const resumed =
      GetParam().from_layout(resumed_weights, gradients, schedule, *stream_);
  gs::graphs::graph_exec went_on_step;
  gs::graphs::graph_exec resumed_step;
  gs::graphs::capture(went_on_step, *stream_, [&] { went_on->step(*stream_); });
  gs::graphs::capture(resumed_step, *stream_, [&] { resumed->step(*stream_); });
  resumed_step.replay(*stream_);  // a history of its own, which the restore replaces

  went_on_step.replay(*stream_);
  went_on_step.replay(*stream_);
  char directory[] = "/tmp/graphstep_optimizer_XXXXXX";
  ASSERT_NE(mkdtemp(directory), nullptr);
  std::string const path = std::string{directory} + "/run.ckpt";
  {
    gt::checkpoint saved;
    gt::add_device_tensors(saved, "model", went_on_weights, *stream_);
    went_on->save_to(saved, "optimizer", *stream_);
    saved.save(path);
  }
  auto const loaded = gt::checkpoint::load(path);
  std::remove(path.c_str());
  rmdir(directory);
  gt::load_device_tensors(loaded, "model", resumed_weights, *stream_);
  resumed->restore_from(loaded, "optimizer", *stream_);
  EXPECT_EQ(resumed->steps_taken(*stream_), 2);

  for (int s = 3; s <= 5; ++s) {
    went_on_step.replay(*stream_);
    resumed_step.replay(*stream_);
    ASSERT_EQ(bits(in_tensors(layout, download(resumed_weights))),
              bits(in_tensors(layout, download(went_on_weights))))
        << "step " << s;
  }
  gt::checkpoint went_on_state;
  gt::checkpoint resumed_state;
  went_on->save_to(went_on_state, "optimizer", *stream_);
  resumed->save_to(resumed_state, "optimizer", *stream_);
  ASSERT_EQ(resumed_state.entries().size(), went_on_state.entries().size());
  for (std::size_t e = 0; e < went_on_state.entries().size(); ++e) {
    EXPECT_EQ(resumed_state.entries()[e].spec.name(), went_on_state.entries()[e].spec.name());
    EXPECT_EQ(resumed_state.entries()[e].bytes, went_on_state.entries()[e].bytes)
        << went_on_state.entries()[e].spec.name();
  }

  // Another model: the first two tensors of this one. Its optimizer keeps its state.
  auto const smaller = model_layout(2);
  auto smaller_weights = weights(smaller, random(smaller, 1.0F, rng));
  auto const smaller_gradients = weights(smaller, random(smaller, 1.0F, rng));
  std::unique_ptr<gt::optimizer> const other =
      GetParam().from_layout(smaller_weights, smaller_gradients, schedule, *stream_);
  other->step(*stream_);
  // Gradients of another layout than the weights' are refused before anything is made.
  std::string const mismatched = message_of(
      [&] { static_cast<void>(GetParam().from_layout(smaller_weights, gradients, schedule, *stream_)); });
  EXPECT_NE(mismatched.find("make both buffers from the model's one layout"), std::string::npos)
      << mismatched;
  std::string const more = message_of([&] { other->restore_from(loaded, "optimizer", *stream_); });
  EXPECT_NE(more.find("more tensors"), std::string::npos) << more;
  EXPECT_NE(more.find(GetParam().name + "::restore_from"), std::string::npos) << more;
  EXPECT_EQ(other->steps_taken(*stream_), 1);
  std::string const elsewhere =
      message_of([&] { other->restore_from(loaded, "elsewhere", *stream_); });
  EXPECT_NE(elsewhere.find("elsewhere/step"), std::string::npos) << elsewhere;
  EXPECT_EQ(other->steps_taken(*stream_), 1);
}

// A learning rate the host writes to device memory before each replay gives the bits of an
// optimizer whose schedule is set to that rate before each step; given null, the optimizer
// goes back to its own schedule.
TEST_P(optimizer_interface, a_learning_rate_read_on_the_device_is_the_schedules_equal) {
  std::mt19937 rng{43};
  auto const layout = model_layout();
  auto const initial = random(layout, 1.0F, rng);
  auto fed_weights = weights(layout, initial);
  auto scheduled_weights = weights(layout, initial);
  auto const gradients = weights(layout, random(layout, 1.0F, rng));
  std::unique_ptr<gt::optimizer> const fed =
      GetParam().from_layout(fed_weights, gradients, constant(0.01F), *stream_);
  std::unique_ptr<gt::optimizer> const scheduled =
      GetParam().from_layout(scheduled_weights, gradients, constant(0.01F), *stream_);
  gs::memory::step_input<float> learning_rate{1, *stream_};
  fed->read_learning_rate_from(learning_rate.data(), *stream_);
  gs::graphs::graph_exec step;
  gs::graphs::capture(step, *stream_, [&] { fed->step(*stream_); });
  std::vector<float> const rates{0.03F, 0.002F, 0.017F};
  for (float const rate : rates) {
    learning_rate.set(rate, *stream_);
    step.replay(*stream_);
    scheduled->set_schedule(constant(rate), *stream_);
    scheduled->step(*stream_);
    ASSERT_EQ(bits(download(fed_weights)), bits(download(scheduled_weights))) << rate;
  }
  fed->read_learning_rate_from(nullptr, *stream_);
  learning_rate.set(100.0F, *stream_);  // no longer read
  step.replay(*stream_);
  scheduled->set_schedule(constant(0.01F), *stream_);
  scheduled->step(*stream_);
  EXPECT_EQ(bits(download(fed_weights)), bits(download(scheduled_weights)));
  EXPECT_EQ(fed->steps_taken(*stream_), 4);
}

// Inside a capture each host call is refused, naming the optimizer and the call, and records
// nothing: the step captured beside them still replays.
TEST_P(optimizer_interface, host_calls_inside_a_capture_are_refused_by_name) {
  std::mt19937 rng{44};
  auto const layout = model_layout();
  auto model_weights = weights(layout, random(layout, 1.0F, rng));
  auto const gradients = weights(layout, random(layout, 1.0F, rng));
  std::unique_ptr<gt::optimizer> const optimizer =
      GetParam().from_layout(model_weights, gradients, constant(0.01F), *stream_);
  gt::checkpoint saved;
  optimizer->save_to(saved, "optimizer", *stream_);
  std::vector<std::pair<std::string, std::string>> refused;
  gs::graphs::graph_exec step;
  gs::graphs::capture(step, *stream_, [&] {
    auto const say = [&](char const* call, auto&& what) {
      refused.emplace_back(call, message_of(what));
    };
    say("set_schedule", [&] { optimizer->set_schedule(constant(0.02F), *stream_); });
    say("read_learning_rate_from", [&] { optimizer->read_learning_rate_from(nullptr, *stream_); });
    say("steps_taken", [&] { static_cast<void>(optimizer->steps_taken(*stream_)); });
    gt::checkpoint into;
    say("save_to", [&] { optimizer->save_to(into, "optimizer", *stream_); });
    say("restore_from", [&] { optimizer->restore_from(saved, "optimizer", *stream_); });
    optimizer->step(*stream_);
  });
  for (auto const& [call, said] : refused) {
    EXPECT_NE(said.find(GetParam().name + "::" + call + " inside a capture"), std::string::npos)
        << said;
  }
  step.replay(*stream_);
  EXPECT_EQ(optimizer->steps_taken(*stream_), 1);
  std::string const bad = message_of([&] {
    gt::lr_schedule schedule = constant(0.01F);
    schedule.base = -1.0F;
    optimizer->set_schedule(schedule, *stream_);
  });
  EXPECT_NE(bad.find("base learning rate must be finite and non-negative"), std::string::npos)
      << bad;
}

INSTANTIATE_TEST_SUITE_P(kinds, optimizer_interface, ::testing::ValuesIn(kinds()),
                         [](auto const& info) { return info.param.name; });

// A moved-from optimizer refuses every call by name instead of touching freed state.
using optimizer_interface_moved = gs::testing::stream_test;
TEST_F(optimizer_interface_moved, a_moved_from_optimizer_refuses_its_calls) {
  auto const layout = model_layout(1);
  gs::memory::parameter_buffer weights{layout, *stream_};
  gs::memory::parameter_buffer gradients{layout, *stream_};
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(weights.data(), 0, weights.bytes(), stream_->get()));
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(gradients.data(), 0, gradients.bytes(), stream_->get()));
  gt::sgd first{weights, gradients, {}, {}, nullptr, *stream_};
  gt::sgd second = std::move(first);
  second.step(*stream_);
  EXPECT_EQ(second.steps_taken(*stream_), 1);
  // NOLINTNEXTLINE(bugprone-use-after-move,clang-analyzer-cplusplus.Move)
  std::string const said = message_of([&] { first.step(*stream_); });
  EXPECT_NE(said.find("sgd::step: this optimizer was moved from"), std::string::npos) << said;
  gt::mixed_precision_adamw adamw{weights, gradients, {{}}, {}, {}, nullptr, *stream_};
  gt::mixed_precision_adamw taken = std::move(adamw);
  // NOLINTNEXTLINE(bugprone-use-after-move,clang-analyzer-cplusplus.Move)
  EXPECT_NE(message_of([&] {
              static_cast<void>(adamw.steps_taken(*stream_));
            }).find("mixed_precision_adamw::steps_taken: this optimizer was moved from"),
            std::string::npos);
  EXPECT_EQ(taken.steps_taken(*stream_), 0);
}
