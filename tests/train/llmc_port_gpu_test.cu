// A trainer written the way llm.c writes one (llmc_trainer.cuh: one flat parameter buffer, its
// own token buffers, kernels in a header, cuBLASLt called directly, a host schedule), ported to
// graphstep by the glue between the "graphstep glue" marks: the whole step one graph over the
// trainer's own memory, the schedule's scalars set on the captured AdamW launch beside the loop,
// exact checkpoint and resume. The port must agree with the trainer's own loop bit for bit, and
// a resumed run with an uninterrupted one. tests/train/count_glue.py counts the glue (at most
// 60 lines, a test of its own).

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/graphs/kernel_node_tags.hpp>
#include <graphstep/memory/host_readback.hpp>
#include <graphstep/memory/parameter_buffer.hpp>
#include <graphstep/memory/step_input.hpp>
#include <graphstep/parameter_layout.hpp>
#include <graphstep/train/checkpoint.hpp>
#include <graphstep/train/device_checkpoint.hpp>
#include <string>
#include <utility>
#include <vector>

#include "common/gpu_test.hpp"
#include "train/llmc_trainer.cuh"

namespace gs = graphstep;

namespace {

// graphstep glue begin
// The trainer's flat buffers as they are: its tensors at the offsets model_init gave them.
gs::parameter_layout layout_of(llmc::model const& mdl) {
  auto layout = gs::parameter_layout::adopting(mdl.num_parameters * sizeof(float));
  std::int64_t const V = mdl.cfg.vocab, C = mdl.cfg.channels;
  layout.add_at({"wte", {V, C}, gs::dtype::float32}, 0);
  layout.add_at({"wproj", {V, C}, gs::dtype::float32}, mdl.param_sizes[0] * sizeof(float));
  layout.add_at({"bproj", {V}, gs::dtype::float32}, 2 * mdl.param_sizes[0] * sizeof(float));
  return layout;
}

// Weights and AdamW's moments, and the step to go on from.
void save(llmc::model const& mdl, int next_step, std::string const& path, gs::cuda::stream_view s) {
  gs::train::checkpoint state;
  for (auto [name, memory] : {std::pair{"params", mdl.params_memory}, {"m", mdl.m_memory},
                              {"v", mdl.v_memory}}) {
    auto const buffer = gs::memory::parameter_buffer::adopt(
        layout_of(mdl), memory, mdl.num_parameters * sizeof(float));
    gs::train::add_device_tensors(state, name, buffer, s);
  }
  state.add_value("step", next_step);
  state.save(path);
}

int load(llmc::model& mdl, std::string const& path, gs::cuda::stream_view s) {
  auto const state = gs::train::checkpoint::load(path);
  for (auto [name, memory] : {std::pair{"params", mdl.params_memory}, {"m", mdl.m_memory},
                              {"v", mdl.v_memory}}) {
    auto const buffer = gs::memory::parameter_buffer::adopt(
        layout_of(mdl), memory, mdl.num_parameters * sizeof(float));
    gs::train::load_device_tensors(state, name, buffer, s);
  }
  return state.value<int>("step");
}

// llmc::train's loop, one graph a step.
void graphed_train(llmc::model& mdl, int first, int last, int steps, std::vector<float>& losses,
                   gs::cuda::stream_view stream) {
  std::size_t const positions = static_cast<std::size_t>(mdl.cfg.positions);
  auto inputs = gs::memory::step_input<int>::adopt(mdl.inputs, positions);
  auto targets = gs::memory::step_input<int>::adopt(mdl.targets, positions);
  auto loss = gs::memory::host_readback<float>::adopt(mdl.mean_loss);
  gs::graphs::kernel_node_tags tags;
  gs::graphs::graph_exec step;
  gs::graphs::capture(step, stream, [&] {
    llmc::model_forward(mdl, stream.get());
    llmc::model_zero_grad(mdl, stream.get());
    llmc::model_backward(mdl, stream.get());
    llmc::model_update(mdl, 0.0F, 1, stream.get());
    tags.tag("adamw", stream, llmc::adamw_kernel);
  });
  auto& adamw = tags.node("adamw", llmc::adamw_kernel);
  std::vector<int> in(positions), out(positions);
  for (int s = first; s < last; ++s) {
    llmc::next_batch(s, mdl.cfg, in.data(), out.data());
    inputs.upload(in, stream);
    targets.upload(out, stream);
    adamw.set_argument<5>(step, llmc::learning_rate_at(s, steps));
    adamw.set_argument<8>(step, 1.0F - std::pow(0.9F, static_cast<float>(s + 1)));
    adamw.set_argument<9>(step, 1.0F - std::pow(0.95F, static_cast<float>(s + 1)));
    step.replay(stream);
    losses.push_back(loss.value(loss.enqueue(stream)));
  }
}
// graphstep glue end

class llmc_port_test : public gs::testing::gpu_test {};

std::vector<float> weights_of(llmc::model const& mdl) {
  std::vector<float> host(mdl.num_parameters);
  LLMC_CHECK(cudaDeviceSynchronize());
  LLMC_CHECK(cudaMemcpy(host.data(), mdl.params_memory, host.size() * sizeof(float),
                        cudaMemcpyDeviceToHost));
  return host;
}

// Bit for bit: the same float bits, not values within a tolerance.
bool same_bits(std::vector<float> const& a, std::vector<float> const& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

constexpr int steps = 8;
constexpr int checkpoint_at = 5;

}  // namespace

TEST_F(llmc_port_test, graphed_steps_agree_with_the_trainers_own_loop_bit_for_bit) {
  gs::cuda::stream stream;
  llmc::model eager{};
  llmc::model graphed{};
  llmc::model_init(eager, llmc::config{}, 42);
  llmc::model_init(graphed, llmc::config{}, 42);
  std::vector<float> eager_losses;
  std::vector<float> graphed_losses;
  llmc::train(eager, 0, steps, steps, eager_losses, stream.get());
  graphed_train(graphed, 0, steps, steps, graphed_losses, stream);
  ASSERT_EQ(graphed_losses.size(), static_cast<std::size_t>(steps));
  EXPECT_TRUE(same_bits(eager_losses, graphed_losses));
  EXPECT_TRUE(same_bits(weights_of(eager), weights_of(graphed)));
  // It learns: the schedule and the step's scalars reached the graph.
  EXPECT_LT(graphed_losses.back(), graphed_losses.front());
  llmc::model_free(eager);
  llmc::model_free(graphed);
}

TEST_F(llmc_port_test, a_resumed_run_agrees_with_an_uninterrupted_one_bit_for_bit) {
  gs::cuda::stream stream;
  std::string const path = ::testing::TempDir() + "llmc_port_checkpoint.bin";
  llmc::model whole{};
  llmc::model first{};
  llmc::model resumed{};
  llmc::model_init(whole, llmc::config{}, 7);
  llmc::model_init(first, llmc::config{}, 7);
  llmc::model_init(resumed, llmc::config{}, 99);  // other weights: the load must replace them
  std::vector<float> whole_losses;
  graphed_train(whole, 0, steps, steps, whole_losses, stream);
  std::vector<float> losses;
  graphed_train(first, 0, checkpoint_at, steps, losses, stream);
  save(first, checkpoint_at, path, stream);
  int const next = load(resumed, path, stream);
  EXPECT_EQ(next, checkpoint_at);
  graphed_train(resumed, next, steps, steps, losses, stream);
  EXPECT_TRUE(same_bits(losses, whole_losses));
  EXPECT_TRUE(same_bits(weights_of(resumed), weights_of(whole)));
  std::remove(path.c_str());
  llmc::model_free(whole);
  llmc::model_free(first);
  llmc::model_free(resumed);
}
