#pragma once

// A GPT-2-style decoder language model as static buffers, GEMMs and an optimizer:
// token + position embedding, pre-norm blocks (layer norm, causal self-attention through one
// fused qkv projection, output projection, residual; layer norm, fc1 + GELU fused into its
// GEMM, fc2, residual), a final layer norm, the output projection tied to the token embedding,
// and cross-entropy. bf16 weights, activations and gradients with fp32 math and fp32 master
// weights in the AdamW (global-norm clipping on the device). `step()` issues one whole training
// step; it allocates nothing and synchronizes nothing, so it can be captured. With K
// micro-batches (`micro_batches`), a step runs K forward and backward passes in a device loop
// (train::micro_batch_loop), each on its own batch of tokens, adds their gradients into one
// buffer, then hands it to the all-reduce hook and the optimizer once. Shared by
// examples/transformer_lm and the transformer benchmark.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device_buffer.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/dtype_conversion.hpp>
#include <graphstep/error.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <graphstep/memory/parameter_buffer.hpp>
#include <graphstep/memory/step_input.hpp>
#include <graphstep/ops/attention.hpp>
#include <graphstep/ops/attention_cudnn.hpp>
#include <graphstep/ops/cross_entropy.hpp>
#include <graphstep/ops/embedding.hpp>
#include <graphstep/ops/gemm_gelu.hpp>
#include <graphstep/ops/gemm_problem.hpp>
#include <graphstep/ops/layer_norm.hpp>
#include <graphstep/parameter_layout.hpp>
#include <graphstep/train/checkpoint.hpp>
#include <graphstep/train/device_checkpoint.hpp>
#include <graphstep/train/lr_schedule.hpp>
#include <graphstep/train/micro_batch_loop.hpp>
#include <graphstep/train/mixed_precision_adamw.hpp>
#include <graphstep/train/optimizer_options.hpp>
#include <graphstep/train/run_settings.hpp>
#include <initializer_list>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace transformer_example {

namespace gs = graphstep;
namespace go = graphstep::ops;
namespace gt = graphstep::train;

// Which attention runs: cuDNN's fused attention where this build has it and cuDNN takes the
// layer, else the plain kernels (automatic); or one of them, refused when it cannot run.
enum class attention_path { automatic, plain, cudnn };

struct transformer_config {
  int layers{12};
  int channels{768};
  int heads{12};
  int batch{1};
  int sequence{128};
  int vocab{50257};
  std::uint64_t seed{1337};  // of the weights, the same on every rank
  int data_stream{0};        // which batch of tokens: ranks of a data-parallel run differ
  float learning_rate{3e-4F};
  attention_path attention{attention_path::automatic};
  // K: the micro-batches of one optimizer step, each `batch` sequences of its own, their
  // gradients accumulated (the step's batch is K x batch sequences).
  int micro_batches{1};
  // An optimizer step whose gradient norm exceeds it (or is not finite) is skipped on the
  // device; infinity: never.
  float skip_norm{std::numeric_limits<float>::infinity()};

  // The output projection's vocabulary rounded up to a multiple of 64 (GPT-2's 50257 becomes
  // 50304), which keeps its GEMMs on aligned fast paths; the extra rows are never a token.
  [[nodiscard]] int padded_vocab() const { return (vocab + 63) / 64 * 64; }
  [[nodiscard]] int head_dim() const { return channels / heads; }

  // Says what is wrong with a configuration, or nothing.
  [[nodiscard]] std::string problem() const {
    if (layers <= 0 || channels <= 0 || heads <= 0 || batch <= 0 || sequence <= 0 || vocab <= 1) {
      return "layers, width, heads, batch and sequence must be positive and the vocabulary "
             "larger than 1";
    }
    if (channels % heads != 0) {
      return "the width (" + std::to_string(channels) + ") must be a multiple of the heads (" +
             std::to_string(heads) + ")";
    }
    if (head_dim() % 8 != 0 || head_dim() > 256) {
      return "width / heads (the head dimension, " + std::to_string(head_dim()) +
             ") must be a multiple of 8 and at most 256";
    }
    return {};
  }
};

constexpr gs::dtype bf16 = gs::dtype::bfloat16;
constexpr float layer_norm_epsilon = 1e-5F;

// A tensor of the model: its index in the model's parameter layout, whose slot says what it is
// (name, shape, dtype, group) and where it lies in the parameter buffer (and, at the same
// offset, in the gradient buffer).
using tensor = std::size_t;

class transformer {
 public:
  transformer(transformer_config const& c, gs::memory::memory_pool& pool,
              gs::cuda::stream_view stream, go::cublaslt_handle const& handle)
      : c_{c}, pool_{pool}, stream_{stream} {
    if (auto const p = c.problem(); !p.empty()) throw gs::usage_error(p);
    std::size_t const rows = tokens_per_step();
    std::size_t const C = channels();
    std::size_t const vp = static_cast<std::size_t>(c.padded_vocab());
    layout_parameters();

    weights_.emplace(layout_, stream_, pool_);
    gradients_buffer_.emplace(layout_, stream_, pool_);
    parameters_ = zeroed(*weights_);
    gradients_ = zeroed(*gradients_buffer_);
    if (c.micro_batches != 1) {  // each micro-batch's gradients are added into a second buffer
      accumulated_.emplace(layout_, stream_, pool_);
      static_cast<void>(zeroed(*accumulated_));
      loop_.emplace(c.micro_batches, *accumulated_, stream_, pool_);
    }
    tokens_ = static_cast<std::int32_t*>(allocate(rows * sizeof(std::int32_t)));
    targets_ = static_cast<std::int32_t*>(allocate(rows * sizeof(std::int32_t)));
    loss_ = static_cast<float*>(allocate(sizeof(float)));

    layers_.resize(static_cast<std::size_t>(c.layers));
    residual_.push_back(buffer(rows * C));  // the embedding's output
    for (auto& a : layers_) {
      a.ln1 = buffer(rows * C);
      a.ln1_mean = floats(rows);
      a.ln1_rstd = floats(rows);
      a.qkv = buffer(rows * 3 * C);
      a.attention = buffer(rows * C);
      a.logsumexp = floats(static_cast<std::size_t>(c.batch) * c.heads * c.sequence);
      a.residual_mid = buffer(rows * C);
      a.ln2 = buffer(rows * C);
      a.ln2_mean = floats(rows);
      a.ln2_rstd = floats(rows);
      a.fc1_pre = buffer(rows * 4 * C);
      a.fc1_out = buffer(rows * 4 * C);
      residual_.push_back(buffer(rows * C));
    }
    lnf_ = buffer(rows * C);
    lnf_mean_ = floats(rows);
    lnf_rstd_ = floats(rows);
    logits_ = buffer(rows * vp);
    projection_ = buffer(rows * C);
    d_residual_ = buffer(rows * C);
    d_normed_ = buffer(rows * C);
    d_attention_ = buffer(rows * C);
    d_qkv_ = buffer(rows * 3 * C);
    d_fc1_ = buffer(rows * 4 * C);

    attention_shape_ = {c.batch, c.sequence, c.heads, c.head_dim()};
    cross_entropy_shape_ = {static_cast<std::int64_t>(rows), c.vocab, c.padded_vocab()};
    layer_norm_workspace_bytes_ =
        go::layer_norm_backward_workspace_size(static_cast<std::int64_t>(rows), c.channels);
    layer_norm_workspace_ = allocate(layer_norm_workspace_bytes_);
    attention_workspace_bytes_ = go::attention_backward_workspace_size(attention_shape_);
    attention_workspace_ = allocate(attention_workspace_bytes_);
    cross_entropy_workspace_bytes_ = go::cross_entropy_workspace_size(cross_entropy_shape_);
    cross_entropy_workspace_ = allocate(cross_entropy_workspace_bytes_);

    initialize_weights_and_data();
    make_attention();
    make_gemms(handle);
    make_optimizer();
    stream.synchronize();
  }

  transformer(transformer const&) = delete;
  transformer& operator=(transformer const&) = delete;
  transformer(transformer&&) = delete;
  transformer& operator=(transformer&&) = delete;
  ~transformer() = default;

  // One training step: forward, loss, backward, (hook: e.g. gradient all-reduce), clip + AdamW.
  // With micro-batches: the gradients zeroed, then K forward and backward passes in a device
  // loop adding into them, then the hook (the all-reduce, once per step) and the optimizer.
  void step() {
    if (loop_ && gradients_finished_) {
      // The last micro-batch after the loop, where its backward may hand each finished bucket
      // to the all-reduce, which then overlaps the rest of it.
      loop_->run(
          stream_, loss_, [this](gs::cuda::stream_view on) { micro_batch(on, false); },
          [this](gs::cuda::stream_view on) { micro_batch(on, true); });
    } else if (loop_) {
      loop_->run(stream_, loss_, [this](gs::cuda::stream_view on) { micro_batch(on, false); });
    } else {
      forward_backward();
    }
    if (after_backward_) after_backward_(stream_);
    optimizer_->step(stream_);
  }

  // With micro-batches, the step as K + 1 launches, as a trainer replaying a one-micro-batch
  // graph issues it (the baseline of the device loop): after one `begin_accumulation`, K
  // `accumulate_micro_batch` and one `finish_accumulated_step`, which begins the next step.
  void begin_accumulation() { accumulating().begin(stream_); }
  void accumulate_micro_batch() {
    accumulating().pass(stream_, loss_,
                        [this](gs::cuda::stream_view on) { micro_batch(on, false); });
  }
  void finish_accumulated_step() {
    if (after_backward_) after_backward_(stream_);
    optimizer_->step(stream_);
    accumulating().begin(stream_);
  }

  // The loss and every gradient of the current weights, without changing them.
  void forward_backward() {
    forward();
    backward();
  }

  // The loss of the last step, the mean of its micro-batches' (synchronizes the stream).
  float loss() {
    float value = 0.0F;
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(&value, loss_buffer(), sizeof value, cudaMemcpyDeviceToHost,
                                       stream_.get()));
    stream_.synchronize();
    return value;
  }

  // Elements of the parameter buffer, and of the gradient buffer (each tensor starts on a
  // 64-element boundary; the gaps are zero).
  [[nodiscard]] std::size_t parameter_count() const { return parameter_count_; }
  // All parameters and all gradients, bf16, each in one buffer of the layout (so a
  // data-parallel run can average the gradients in buckets, and compare the weights across
  // ranks).
  [[nodiscard]] gs::memory::parameter_buffer const& weights() const { return *weights_; }
  // The gradients the optimizer reads: with micro-batches, their sum (the one forward_backward
  // writes is the last micro-batch's alone).
  [[nodiscard]] gs::memory::parameter_buffer const& gradients() const {
    return accumulated_ ? *accumulated_ : *gradients_buffer_;
  }
  [[nodiscard]] int micro_batches() const { return c_.micro_batches; }
  // Where each tensor lies in those buffers, in the order the backward finishes the gradients
  // (see set_gradients_finished): what the data-parallel bucket plan, the optimizer and the
  // checkpoint take.
  [[nodiscard]] gs::parameter_layout const& layout() const { return layout_; }
  [[nodiscard]] bool fused_gelu() const { return layers_.front().fc1->fused(); }
  // Which attention runs, and why the plain kernels where cuDNN's was possible but not taken.
  [[nodiscard]] std::string const& attention_description() const { return attention_; }
  [[nodiscard]] float const* loss_buffer() const { return loop_ ? loop_->loss() : loss_; }
  // The optimizer's global gradient norm and count of skipped steps, in device memory.
  [[nodiscard]] float const* gradient_norm_buffer() const { return optimizer_->gradient_norm(); }
  [[nodiscard]] std::uint32_t const* skipped_steps_buffer() const {
    return optimizer_->skipped_steps();
  }
  void set_after_backward(std::function<void(gs::cuda::stream_view)> hook) {
    after_backward_ = std::move(hook);
  }
  // Called in the backward each time more gradients are final for this step, with their extent:
  // the gradient buffer's first `count` bf16 elements, once the work issued to the stream so far
  // has run (after the final norm and after each layer). A data-parallel run starts reducing
  // those gradients there, while the backward goes on. With micro-batches it is not called: the
  // gradients are final only after the last micro-batch, and the after-backward hook reduces
  // them all, once per step.
  void set_gradients_finished(std::function<void(std::size_t count, gs::cuda::stream_view)> hook) {
    gradients_finished_ = std::move(hook);
  }
  // Everything a step carries to the next: each weight tensor under "model/<name>" (bf16,
  // [count]) and the optimizer's master weights, moments and step count under "optimizer/".
  // Between steps; synchronizes the stream.
  void save_to(gt::checkpoint& into) const {
    gt::add_device_tensors(into, "model", *weights_, stream_);
    optimizer_->save_to(into, "optimizer", stream_);
  }
  // Loads what save_to wrote; a checkpoint of another model (a tensor missing, of another size)
  // is refused naming the tensor, before anything is copied. Graphs captured before it replay
  // from the loaded state.
  void restore_from(gt::checkpoint const& from) {
    for (gs::parameter_slot const& slot : layout_.slots()) {  // before anything changes
      static_cast<void>(from.tensor(slot.spec.renamed("model/" + slot.spec.name())));
    }
    optimizer_->restore_from(from, "optimizer", stream_);  // checks its own entries first
    gt::load_device_tensors(from, "model", *weights_, stream_);
  }
  // What a step computes beyond the dtypes and shapes of the tensors save_to writes (those
  // restore_from checks): a run resumed with other settings would not go on with the saved one.
  // Not here, as not the model's: the number of data-parallel ranks, and the number of steps to
  // train (which a resume may raise: the schedule is constant). Not checked at all: the GPU and
  // the libraries' versions, on which cuBLASLt's choice of algorithm depends.
  [[nodiscard]] gt::run_settings settings() const {
    gt::run_settings s;
    s.add("layers", c_.layers).add("width", c_.channels).add("heads", c_.heads);
    s.add("batch", c_.batch).add("sequence", c_.sequence).add("vocabulary", c_.vocab);
    s.add("seed", c_.seed);
    s.add("micro-batches per step", c_.micro_batches);
    s.add("skip norm", static_cast<double>(c_.skip_norm));
    s.add("precision", "bf16 weights, activations and gradients, fp32 master weights");
    s.add("attention", cudnn_.has_value() ? "cuDNN fused attention" : "plain CUDA kernels");
    s.add("GELU", fused_gelu() ? "fused into fc1's GEMM" : "a separate kernel");
    gt::lr_schedule const schedule = learning_rate_schedule();
    s.add("learning rate", schedule.base);
    s.add("learning-rate schedule", schedule_name(schedule.shape));
    s.add("warm-up steps", schedule.warmup_steps)
        .add("schedule's total steps", schedule.total_steps);
    s.add("final learning-rate fraction", schedule.final_fraction);
    s.add("decay steps", schedule.decay_steps);
    gt::mixed_adamw_options const options = optimizer_options();
    s.add("AdamW beta1", options.beta1).add("AdamW beta2", options.beta2);
    s.add("AdamW epsilon", options.epsilon).add("gradient clipping norm", options.max_grad_norm);
    for (std::size_t g = 0; g < parameter_groups().size(); ++g) {
      s.add("weight decay of group " + std::to_string(g), parameter_groups()[g].weight_decay);
    }
    return s;
  }
  // Optimizer steps taken so far (synchronizes the stream).
  [[nodiscard]] std::int64_t steps_taken() const { return optimizer_->steps_taken(stream_); }

  // Every tensor, in model order: token embedding, position embedding, each layer's ln1
  // weight and bias, qkv weight and bias, proj weight and bias, ln2 weight and bias, fc1
  // weight and bias, fc2 weight and bias, then the final norm's weight and bias. Their offsets
  // follow the backward's order instead (layout_parameters).
  [[nodiscard]] std::vector<gs::parameter_slot> const& tensors() const { return tensors_; }
  // The batch: input tokens and next-token targets, [batch, sequence] each.
  [[nodiscard]] std::vector<std::int32_t> const& input_tokens() const { return host_tokens_; }
  [[nodiscard]] std::vector<std::int32_t> const& target_tokens() const { return host_targets_; }

 private:
  struct layer_parameters {
    tensor ln1_weight, ln1_bias, qkv_weight, qkv_bias, proj_weight, proj_bias, ln2_weight, ln2_bias,
        fc1_weight, fc1_bias, fc2_weight, fc2_bias;
  };
  // What a layer keeps from its forward for its backward, and its GEMMs.
  struct layer_activations {
    std::uint16_t *ln1{}, *qkv{}, *attention{}, *residual_mid{}, *ln2{}, *fc1_pre{}, *fc1_out{};
    float *ln1_mean{}, *ln1_rstd{}, *ln2_mean{}, *ln2_rstd{}, *logsumexp{};
    std::optional<go::gemm> qkv_gemm, proj, fc1, fc2;
    std::optional<go::cudnn_attention> cudnn_attention;  // when cuDNN's attention runs
    std::optional<go::gemm> fc2_weight_grad, fc2_data_grad, fc1_weight_grad, fc1_data_grad,
        proj_weight_grad, proj_data_grad, qkv_weight_grad, qkv_data_grad;
  };

  [[nodiscard]] std::size_t tokens_per_step() const {
    return static_cast<std::size_t>(c_.batch) * static_cast<std::size_t>(c_.sequence);
  }
  [[nodiscard]] std::size_t channels() const { return static_cast<std::size_t>(c_.channels); }
  [[nodiscard]] std::int64_t rows() const { return static_cast<std::int64_t>(tokens_per_step()); }

  // The tensors are listed in model order (tensors()), and laid out in the buffers in the order
  // the backward finishes their gradients: the final norm's first, then each layer from the last
  // (fc2, fc1, ln2, proj, qkv, ln1), the embeddings last (the embedding backward finishes the
  // tied token table's gradient). So the gradients the backward has finished are always a prefix
  // of the gradient buffer, and a data-parallel run's buckets can be reduced as it goes.
  void layout_parameters() {
    std::size_t const C = channels();
    // Each tensor's slot starts on a 128-byte boundary, so every tensor is aligned for the
    // 16-byte accesses of the GEMMs and kernels whatever the sizes before it. Weight decay for
    // matrices and embeddings (group 0), none for biases and norms (group 1).
    auto place = [this](std::string name, std::size_t count, bool decays) {
      return layout_.add({std::move(name), {static_cast<std::int64_t>(count)}, bf16},
                         decays ? 0U : 1U);
    };
    lnf_weight_ = place("final norm weight", C, false);
    lnf_bias_ = place("final norm bias", C, false);
    layer_parameters_.resize(static_cast<std::size_t>(c_.layers));
    for (std::size_t l = layer_parameters_.size(); l-- > 0;) {
      std::string const n = "layer " + std::to_string(l) + " ";
      layer_parameters& p = layer_parameters_[l];
      p.fc2_weight = place(n + "fc2 weight", 4 * C * C, true);
      p.fc2_bias = place(n + "fc2 bias", C, false);
      p.fc1_weight = place(n + "fc1 weight", 4 * C * C, true);
      p.fc1_bias = place(n + "fc1 bias", 4 * C, false);
      p.ln2_weight = place(n + "ln2 weight", C, false);
      p.ln2_bias = place(n + "ln2 bias", C, false);
      p.proj_weight = place(n + "proj weight", C * C, true);
      p.proj_bias = place(n + "proj bias", C, false);
      p.qkv_weight = place(n + "qkv weight", 3 * C * C, true);
      p.qkv_bias = place(n + "qkv bias", 3 * C, false);
      p.ln1_weight = place(n + "ln1 weight", C, false);
      p.ln1_bias = place(n + "ln1 bias", C, false);
    }
    position_embedding_ =
        place("position embedding", static_cast<std::size_t>(c_.sequence) * C, true);
    token_embedding_ =
        place("token embedding", static_cast<std::size_t>(c_.padded_vocab()) * C, true);
    parameter_count_ = layout_.buffer_bytes() / sizeof(std::uint16_t);

    std::vector<tensor> order{token_embedding_, position_embedding_};
    for (auto const& p : layer_parameters_) {
      order.insert(order.end(),
                   {p.ln1_weight, p.ln1_bias, p.qkv_weight, p.qkv_bias, p.proj_weight, p.proj_bias,
                    p.ln2_weight, p.ln2_bias, p.fc1_weight, p.fc1_bias, p.fc2_weight, p.fc2_bias});
    }
    order.insert(order.end(), {lnf_weight_, lnf_bias_});
    for (tensor t : order) tensors_.push_back(layout_.at(t));
  }
  // Elements from the gradient buffer's start to the end of t's slot.
  [[nodiscard]] std::size_t finished_through(tensor t) const {
    return layout_.bytes_through(t) / sizeof(std::uint16_t);
  }
  [[nodiscard]] std::uint16_t* value(tensor t) const { return parameters_ + layout_.at(t).offset; }
  [[nodiscard]] std::uint16_t* grad(tensor t) const { return gradients_ + layout_.at(t).offset; }
  // A bf16 activation of `width` columns, [rows, width], as the ops take it.
  [[nodiscard]] gs::device_span rows_of(std::uint16_t* data, std::int64_t width) const {
    return {data, bf16, tokens_per_step() * static_cast<std::size_t>(width)};
  }
  [[nodiscard]] gs::device_span activation(std::uint16_t* data) const {
    return rows_of(data, c_.channels);
  }
  // One int32 id per row: the tokens and the targets.
  [[nodiscard]] gs::device_span ids(std::int32_t* data) const {
    return {data, gs::dtype::int32, tokens_per_step()};
  }
  // The fused projection's [rows, 3C] bf16 output, and attention's fp32 [B, H, T] statistics.
  [[nodiscard]] gs::device_span qkv(std::uint16_t* data) const {
    return rows_of(data, 3 * std::int64_t{c_.channels});
  }
  [[nodiscard]] gs::device_span logsumexp(float* data) const {
    return {data, gs::dtype::float32, tokens_per_step() * static_cast<std::size_t>(c_.heads)};
  }
  // A per-row fp32 statistic of layer norm.
  [[nodiscard]] gs::device_span statistic(float* data) const {
    return {data, gs::dtype::float32, tokens_per_step()};
  }
  [[nodiscard]] gs::device_span value_span(tensor t) const {
    return {value(t), bf16, layout_.at(t).spec.count()};
  }
  [[nodiscard]] gs::device_span grad_span(tensor t) const {
    return {grad(t), bf16, layout_.at(t).spec.count()};
  }

  // Weights as GPT-2 initializes them (normal, σ = 0.02; biases zero; norms one and zero); the
  // data is one fixed batch of random token sequences, the targets each input shifted by one,
  // so the loss falls from about ln(vocab) as the model learns the batch.
  void initialize_weights_and_data() {
    std::mt19937_64 rng{c_.seed};
    std::normal_distribution<float> normal{0.0F, 0.02F};
    std::vector<std::uint16_t> host(parameter_count_, 0);
    // The first `count` elements of t (all of them by default).
    auto fill_normal = [&](tensor t, std::size_t count = 0) {
      gs::parameter_slot const& slot = layout_.at(t);
      for (std::size_t i = 0; i < (count != 0 ? count : slot.spec.count()); ++i) {
        host[slot.offset + i] = graphstep::bfloat16_nearest_even(normal(rng));
      }
    };
    auto fill_ones = [&](tensor t) {
      gs::parameter_slot const& slot = layout_.at(t);
      for (std::size_t i = 0; i < slot.spec.count(); ++i) {
        host[slot.offset + i] = graphstep::bfloat16_nearest_even(1.0F);
      }
    };
    // The padded rows of the token table stay zero: no token selects them.
    fill_normal(token_embedding_, static_cast<std::size_t>(c_.vocab) * channels());
    fill_normal(position_embedding_);
    for (auto const& p : layer_parameters_) {
      fill_ones(p.ln1_weight);
      fill_normal(p.qkv_weight);
      fill_normal(p.proj_weight);
      fill_ones(p.ln2_weight);
      fill_normal(p.fc1_weight);
      fill_normal(p.fc2_weight);
    }
    fill_ones(lnf_weight_);
    upload(parameters_, host.data(), host.size() * sizeof(std::uint16_t));

    std::seed_seq data_seed{static_cast<std::uint32_t>(c_.seed),
                            static_cast<std::uint32_t>(c_.seed >> 32U),
                            static_cast<std::uint32_t>(c_.data_stream)};
    rng.seed(data_seed);
    // K micro-batches of `batch` sequences, one after another: the first is the batch a run
    // without micro-batches trains on.
    std::size_t const rows = tokens_per_step();
    std::size_t const all_rows = rows * static_cast<std::size_t>(c_.micro_batches);
    std::uniform_int_distribution<std::int32_t> token{0, c_.vocab - 1};
    std::vector<std::int32_t> inputs(all_rows);
    std::vector<std::int32_t> targets(all_rows);
    for (int b = 0; b < c_.batch * c_.micro_batches; ++b) {
      std::int32_t previous = token(rng);
      for (int t = 0; t < c_.sequence; ++t) {
        std::size_t const i = static_cast<std::size_t>(b) * c_.sequence + t;
        inputs[i] = previous;
        previous = token(rng);
        targets[i] = previous;
      }
    }
    upload(tokens_, inputs.data(), rows * sizeof(std::int32_t));
    upload(targets_, targets.data(), rows * sizeof(std::int32_t));
    if (loop_) {  // all K, at fixed addresses, for the loop to select from
      all_tokens_.emplace(all_rows, stream_, pool_);
      all_targets_.emplace(all_rows, stream_, pool_);
      all_tokens_->upload(inputs, stream_);
      all_targets_->upload(targets, stream_);
    }
    inputs.resize(rows);
    targets.resize(rows);
    host_tokens_ = std::move(inputs);
    host_targets_ = std::move(targets);
  }

  // cuDNN's fused attention for every layer, or the plain kernels (see attention_path).
  void make_attention() {
    attention_ = "plain CUDA kernels";
    if (c_.attention == attention_path::plain) return;
    auto refuse = [&](std::string const& reason) {
      if (c_.attention == attention_path::cudnn) {
        throw gs::usage_error("cuDNN's attention cannot run: " + reason);
      }
      attention_ += " (cuDNN's fused attention: " + reason + ")";
    };
    if (auto const available = go::cudnn_attention_available(); !available.fused) {
      return refuse(available.reason);
    }
    std::vector<go::cudnn_attention_operands> operands;
    for (auto& a : layers_) {
      operands.push_back({qkv(a.qkv), activation(a.attention), logsumexp(a.logsumexp),
                          activation(d_attention_), qkv(d_qkv_)});
      auto const support = go::cudnn_attention::can_implement(attention_shape_, operands.back());
      if (!support.fused) return refuse(support.reason);
    }
    cudnn_.emplace();
    std::size_t workspace_bytes = 0;
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      layers_[l].cudnn_attention.emplace(*cudnn_, attention_shape_, operands[l]);
      workspace_bytes = std::max(workspace_bytes, layers_[l].cudnn_attention->workspace_size());
    }
    // The attention workspace serves every layer: they run one after another on one stream.
    if (workspace_bytes > attention_workspace_bytes_) {
      attention_workspace_ = allocate(workspace_bytes);
      attention_workspace_bytes_ = workspace_bytes;
    }
    attention_ = "cuDNN fused attention";
  }

  void make_gemms(go::cublaslt_handle const& handle) {
    std::int64_t const m = rows();
    std::int64_t const C = c_.channels;
    std::int64_t const vp = c_.padded_vocab();
    workspace_bytes_ = go::gemm::workspace_size();
    workspace_ = allocate(workspace_bytes_);
    auto gemm = [&](go::gemm_kind kind, std::int64_t n, std::int64_t k,
                    go::gemm_operands const& operands, std::optional<go::gemm>& into) {
      // GELU or a bias epilogue that cuBLASLt cannot fuse for these operands runs as kernels.
      go::gemm_options options;
      options.allow_unfused = true;
      into.emplace(handle, go::gemm_problem{kind, m, n, k, bf16, go::gemm_math::standard}, operands,
                   workspace_, workspace_bytes_, options, stream_);
    };
    using kind = go::gemm_kind;
    gs::device_span const none;
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      auto& a = layers_[l];
      auto const& p = layer_parameters_[l];
      gemm(kind::forward_bias, 3 * C, C,
           {rows_of(a.ln1, C), value_span(p.qkv_weight), rows_of(a.qkv, 3 * C),
            value_span(p.qkv_bias), none, none},
           a.qkv_gemm);
      gemm(kind::forward_bias, C, C,
           {rows_of(a.attention, C), value_span(p.proj_weight), rows_of(projection_, C),
            value_span(p.proj_bias), none, none},
           a.proj);
      gemm(kind::forward_bias_gelu, 4 * C, C,
           {rows_of(a.ln2, C), value_span(p.fc1_weight), rows_of(a.fc1_out, 4 * C),
            value_span(p.fc1_bias), rows_of(a.fc1_pre, 4 * C), none},
           a.fc1);
      gemm(kind::forward_bias, C, 4 * C,
           {rows_of(a.fc1_out, 4 * C), value_span(p.fc2_weight), rows_of(projection_, C),
            value_span(p.fc2_bias), none, none},
           a.fc2);
      gemm(kind::backward_weight_bias, C, 4 * C,
           {rows_of(d_residual_, C), rows_of(a.fc1_out, 4 * C), grad_span(p.fc2_weight), none, none,
            grad_span(p.fc2_bias)},
           a.fc2_weight_grad);
      // Through fc2 into fc1's pre-activation, GELU′ and fc1's bias gradient in the epilogue.
      gemm(kind::backward_data_gelu, C, 4 * C,
           {rows_of(d_residual_, C), value_span(p.fc2_weight), rows_of(d_fc1_, 4 * C), none,
            rows_of(a.fc1_pre, 4 * C), grad_span(p.fc1_bias)},
           a.fc2_data_grad);
      gemm(kind::backward_weight, 4 * C, C,
           {rows_of(d_fc1_, 4 * C), rows_of(a.ln2, C), grad_span(p.fc1_weight), none, none, none},
           a.fc1_weight_grad);
      gemm(kind::backward_data, 4 * C, C,
           {rows_of(d_fc1_, 4 * C), value_span(p.fc1_weight), rows_of(d_normed_, C), none, none,
            none},
           a.fc1_data_grad);
      gemm(kind::backward_weight_bias, C, C,
           {rows_of(d_residual_, C), rows_of(a.attention, C), grad_span(p.proj_weight), none, none,
            grad_span(p.proj_bias)},
           a.proj_weight_grad);
      gemm(kind::backward_data, C, C,
           {rows_of(d_residual_, C), value_span(p.proj_weight), rows_of(d_attention_, C), none,
            none, none},
           a.proj_data_grad);
      gemm(kind::backward_weight_bias, 3 * C, C,
           {rows_of(d_qkv_, 3 * C), rows_of(a.ln1, C), grad_span(p.qkv_weight), none, none,
            grad_span(p.qkv_bias)},
           a.qkv_weight_grad);
      gemm(kind::backward_data, 3 * C, C,
           {rows_of(d_qkv_, 3 * C), value_span(p.qkv_weight), rows_of(d_normed_, C), none, none,
            none},
           a.qkv_data_grad);
    }
    // The tied output projection: logits = lnf · wteᵀ over the padded vocabulary.
    gemm(kind::forward, vp, C,
         {rows_of(lnf_, C), value_span(token_embedding_), rows_of(logits_, vp), none, none, none},
         logits_gemm_);
    gemm(kind::backward_weight, vp, C,
         {rows_of(logits_, vp), rows_of(lnf_, C), grad_span(token_embedding_), none, none, none},
         logits_weight_grad_);
    gemm(kind::backward_data, vp, C,
         {rows_of(logits_, vp), value_span(token_embedding_), rows_of(d_normed_, C), none, none,
          none},
         logits_data_grad_);
  }

  static char const* schedule_name(gt::lr_shape shape) {
    switch (shape) {
      case gt::lr_shape::constant: return "constant";
      case gt::lr_shape::linear_warmup: return "linear warm-up";
      case gt::lr_shape::warmup_cosine: return "warm-up, cosine decay";
      case gt::lr_shape::warmup_linear: return "warm-up, linear decay";
      case gt::lr_shape::warmup_stable_decay: return "warm-up, stable, decay";
    }
    return "unknown";
  }
  // The optimizer's settings, here once for make_optimizer and settings().
  [[nodiscard]] gt::mixed_adamw_options optimizer_options() const {
    gt::mixed_adamw_options options;
    options.beta1 = 0.9F;
    options.beta2 = 0.95F;
    options.epsilon = 1e-8F;
    options.max_grad_norm = 1.0F;
    options.skip_norm = c_.skip_norm;
    return options;
  }
  [[nodiscard]] gt::lr_schedule learning_rate_schedule() const {
    gt::lr_schedule schedule;
    schedule.base = c_.learning_rate;
    return schedule;
  }
  // Group 0 decays (matrices and embeddings), group 1 does not (biases and norms).
  static std::vector<gt::parameter_group> const& parameter_groups() {
    static std::vector<gt::parameter_group> const groups{{0.1F, 1.0F}, {0.0F, 1.0F}};
    return groups;
  }
  void make_optimizer() {
    optimizer_.emplace(*weights_, accumulated_ ? *accumulated_ : *gradients_buffer_,
                       parameter_groups(), optimizer_options(), learning_rate_schedule(), nullptr,
                       stream_, pool_);
  }

  void forward() {
    std::int64_t const m = rows();
    std::int64_t const C = c_.channels;
    go::launch_embedding_forward(activation(residual_.front()), ids(tokens_),
                                 value_span(token_embedding_), value_span(position_embedding_),
                                 {c_.batch, c_.sequence, c_.vocab, C}, stream_);
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      auto& a = layers_[l];
      auto const& p = layer_parameters_[l];
      go::launch_layer_norm_forward(activation(a.ln1), statistic(a.ln1_mean), statistic(a.ln1_rstd),
                                    activation(residual_[l]), value_span(p.ln1_weight),
                                    value_span(p.ln1_bias), m, C, layer_norm_epsilon, stream_);
      a.qkv_gemm->run(stream_);
      if (a.cudnn_attention) {
        a.cudnn_attention->forward(attention_workspace_, attention_workspace_bytes_, stream_);
      } else {
        go::launch_causal_attention_forward(activation(a.attention), logsumexp(a.logsumexp),
                                            qkv(a.qkv), attention_shape_, stream_);
      }
      a.proj->run(stream_);
      go::launch_add(activation(a.residual_mid), activation(residual_[l]), activation(projection_),
                     stream_);
      go::launch_layer_norm_forward(activation(a.ln2), statistic(a.ln2_mean), statistic(a.ln2_rstd),
                                    activation(a.residual_mid), value_span(p.ln2_weight),
                                    value_span(p.ln2_bias), m, C, layer_norm_epsilon, stream_);
      a.fc1->run(stream_);
      a.fc2->run(stream_);
      go::launch_add(activation(residual_[l + 1]), activation(a.residual_mid),
                     activation(projection_), stream_);
    }
    go::launch_layer_norm_forward(activation(lnf_), statistic(lnf_mean_), statistic(lnf_rstd_),
                                  activation(residual_.back()), value_span(lnf_weight_),
                                  value_span(lnf_bias_), m, C, layer_norm_epsilon, stream_);
    logits_gemm_->run(stream_);
    // The loss and its gradient, written over the logits.
    gs::device_span const logits = rows_of(logits_, cross_entropy_shape_.padded_vocab);
    go::launch_cross_entropy_forward_backward(
        {loss_, gs::dtype::float32, 1}, logits, logits, ids(targets_), cross_entropy_shape_,
        loop_ ? loop_->loss_weight() : 1.0F, cross_entropy_workspace_,
        cross_entropy_workspace_bytes_, stream_);
  }

  void layer_norm_backward(std::uint16_t* d_input, tensor weight, tensor bias, std::uint16_t* input,
                           float* mean, float* rstd, bool accumulate) {
    go::launch_layer_norm_backward(
        activation(d_input), grad_span(weight), grad_span(bias), activation(d_normed_),
        activation(input), value_span(weight), statistic(mean), statistic(rstd), rows(),
        c_.channels, accumulate, layer_norm_workspace_, layer_norm_workspace_bytes_, stream_);
  }

  void backward() {
    logits_weight_grad_->run(stream_);  // writes the token table's gradient first
    logits_data_grad_->run(stream_);
    layer_norm_backward(d_residual_, lnf_weight_, lnf_bias_, residual_.back(), lnf_mean_, lnf_rstd_,
                        false);
    finished(finished_through(lnf_bias_));
    for (std::size_t l = layers_.size(); l-- > 0;) {
      auto& a = layers_[l];
      auto const& p = layer_parameters_[l];
      a.fc2_weight_grad->run(stream_);
      a.fc2_data_grad->run(stream_);
      a.fc1_weight_grad->run(stream_);
      a.fc1_data_grad->run(stream_);
      layer_norm_backward(d_residual_, p.ln2_weight, p.ln2_bias, a.residual_mid, a.ln2_mean,
                          a.ln2_rstd, true);
      a.proj_weight_grad->run(stream_);
      a.proj_data_grad->run(stream_);
      if (a.cudnn_attention) {
        a.cudnn_attention->backward(attention_workspace_, attention_workspace_bytes_, stream_);
      } else {
        go::launch_causal_attention_backward(qkv(d_qkv_), activation(d_attention_), qkv(a.qkv),
                                             activation(a.attention), logsumexp(a.logsumexp),
                                             attention_shape_, attention_workspace_,
                                             attention_workspace_bytes_, stream_);
      }
      a.qkv_weight_grad->run(stream_);
      a.qkv_data_grad->run(stream_);
      layer_norm_backward(d_residual_, p.ln1_weight, p.ln1_bias, residual_[l], a.ln1_mean,
                          a.ln1_rstd, true);
      finished(finished_through(p.ln1_bias));
    }
    // The embedding's part of the tied token table is added to the output projection's.
    go::launch_embedding_backward(grad_span(token_embedding_), grad_span(position_embedding_),
                                  activation(d_residual_), ids(tokens_),
                                  {c_.batch, c_.sequence, c_.vocab, c_.channels}, true, stream_);
  }

  gt::micro_batch_loop const& accumulating() const {
    if (!loop_)
      throw gs::usage_error("the step is one micro-batch: there is nothing to accumulate");
    return *loop_;
  }

  // The backward has finished the gradients' first `count` elements. With micro-batches they
  // are final only in the last one: that slice is then added into the sum, and handed on.
  void finished(std::size_t count) {
    if (!gradients_finished_) return;
    if (loop_) {
      if (!added_through_) return;
      accumulate(*added_through_, count);
    }
    gradients_finished_(count, stream_);
  }

  // sum[from, to) += the micro-batch's gradients[from, to), on the current stream.
  void accumulate(std::size_t from, std::size_t to) {
    if (to <= from) return;
    auto* const sum = static_cast<std::uint16_t*>(accumulated_->data()) + from;
    gs::device_span const into{sum, bf16, to - from};
    go::launch_add(into, into, {gradients_ + from, bf16, to - from}, stream_);
    if (added_through_) added_through_ = to;
  }

  // One micro-batch: its tokens (slice *index of all K), forward, backward (its gradients carry
  // 1/K), and its gradients added into the accumulated ones. Everything goes to `on`: in the
  // loop's body its stream (captured, the conditional node's own); the last one, run after the
  // loop, adds each slice as the backward finishes it (see finished).
  void micro_batch(gs::cuda::stream_view on, bool last) {
    gs::cuda::stream_view const outer = stream_;
    stream_ = on;
    if (last) added_through_ = 0;
    try {
      std::size_t const rows = tokens_per_step();
      loop_->select(*all_tokens_, tokens_, rows, on);
      loop_->select(*all_targets_, targets_, rows, on);
      forward_backward();
      accumulate(added_through_.value_or(0), parameter_count_);
    } catch (...) {
      stream_ = outer;
      added_through_.reset();
      throw;
    }
    stream_ = outer;
    added_through_.reset();
  }

  // Pool memory, zeroed (so no step reads what it did not write, and padding stays zero), given
  // back when the model goes.
  void* allocate(std::size_t bytes) {
    void* const p = allocations_.emplace_back(bytes, stream_, pool_).data();
    GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(p, 0, bytes, stream_.get()));
    return p;
  }
  std::uint16_t* zeroed(gs::memory::parameter_buffer const& b) {
    GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(b.data(), 0, b.bytes(), stream_.get()));
    return static_cast<std::uint16_t*>(b.data());
  }
  std::uint16_t* buffer(std::size_t count) {
    return static_cast<std::uint16_t*>(allocate(count * sizeof(std::uint16_t)));
  }
  float* floats(std::size_t count) { return static_cast<float*>(allocate(count * sizeof(float))); }
  void upload(void* device, void const* host, std::size_t bytes) {
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_.get()));
    stream_.synchronize();  // the host buffer goes when this returns
  }

  transformer_config c_;
  gs::memory::memory_pool& pool_;
  gs::cuda::stream_view stream_;
  // The model's pool memory, each block given back in stream order when the model goes:
  // declared before the GEMMs and the optimizer that use it, so destroyed after them, and also
  // when the constructor throws.
  std::vector<gs::cuda::device_buffer> allocations_;
  // The weights and the gradients, laid out by layout_, from the pool too; with micro-batches
  // the accumulated gradients, the loop and every micro-batch's tokens.
  std::optional<gs::memory::parameter_buffer> weights_, gradients_buffer_, accumulated_;
  std::optional<gt::micro_batch_loop> loop_;
  std::optional<gs::memory::step_input<std::int32_t>> all_tokens_, all_targets_;
  std::function<void(gs::cuda::stream_view)> after_backward_;
  std::function<void(std::size_t, gs::cuda::stream_view)> gradients_finished_;
  // In the last micro-batch: how far its gradients were added into the sum.
  std::optional<std::size_t> added_through_;

  gs::parameter_layout layout_{128};
  std::size_t parameter_count_{};
  std::vector<gs::parameter_slot> tensors_;  // in model order
  tensor token_embedding_, position_embedding_, lnf_weight_, lnf_bias_;
  std::vector<layer_parameters> layer_parameters_;
  std::uint16_t* parameters_{};
  std::uint16_t* gradients_{};
  std::int32_t* tokens_{};
  std::int32_t* targets_{};
  std::vector<std::int32_t> host_tokens_, host_targets_;
  float* loss_{};

  // residual_[l] is the input of layer l; residual_.back() the last layer's output.
  std::vector<std::uint16_t*> residual_;
  // Before the layers, whose cuDNN attention layers use it: members are destroyed in reverse order.
  std::optional<go::cudnn_handle> cudnn_;
  std::vector<layer_activations> layers_;
  std::uint16_t *lnf_{}, *logits_{}, *projection_{};
  float *lnf_mean_{}, *lnf_rstd_{};
  // Gradients flowing back, shared by the layers: the residual stream's, a layer norm's
  // output's, the attention output's, qkv's and fc1's pre-activation's.
  std::uint16_t *d_residual_{}, *d_normed_{}, *d_attention_{}, *d_qkv_{}, *d_fc1_{};

  go::attention_shape attention_shape_{};
  go::cross_entropy_shape cross_entropy_shape_{};
  void* workspace_{};
  std::size_t workspace_bytes_{};
  void* layer_norm_workspace_{};
  std::size_t layer_norm_workspace_bytes_{};
  void* attention_workspace_{};
  std::size_t attention_workspace_bytes_{};
  void* cross_entropy_workspace_{};
  std::size_t cross_entropy_workspace_bytes_{};
  std::optional<go::gemm> logits_gemm_, logits_weight_grad_, logits_data_grad_;
  std::string attention_;
  std::optional<gt::mixed_precision_adamw> optimizer_;
};

}  // namespace transformer_example
