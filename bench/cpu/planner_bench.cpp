// The allocation planner on generated traces: planning time, and the footprint against the
// lower bound (counter footprint_ratio = slab / peak of live bytes; 1.0 is optimal). The same
// run reports, as baselines, the footprints of the classic greedy-by-size offset assignment
// (TensorFlow Lite's arena planner strategy) on the same trace: greedy_by_size_ratio with each
// tensor at the lowest offset that fits, greedy_by_size_smallest_gap_ratio in the smallest gap
// that fits (as TensorFlow Lite places them).
// Traces: synthetic layer stacks (5 allocations per layer) and transformer training steps
// (layer norms, QKV, attention scores and probabilities, MLP with GELU, residuals, backward in
// reverse, weight gradients kept to the optimizer, optimizer temporaries), up to 10^5
// allocations.
// Also the host cost of one allocate/deallocate pair in the allocator core with many blocks
// live, which is what a size-class cache for small blocks would have to beat.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <graphstep/memory/allocation_plan.hpp>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "memory/detail/block_allocator.hpp"

namespace gm = graphstep::memory;

namespace {

enum class model : std::int64_t { random_layers, transformer, cnn };

// Forward keeps each layer's activation until backward and frees its temporaries at once;
// backward walks the layers in reverse, frees each activation when its layer is done, passes a
// data gradient down and keeps weight gradients to the end (for the optimizer).
gm::allocation_trace training_trace(model shape, int layers, std::uint32_t seed) {
  std::mt19937 rng{seed};
  std::uniform_int_distribution<std::size_t> size{16 << 10, 16 << 20};
  std::vector<std::size_t> activation_bytes;
  std::vector<std::size_t> weight_bytes;
  for (int l = 0; l < layers; ++l) {
    switch (shape) {
      case model::random_layers:
        activation_bytes.push_back(size(rng));
        weight_bytes.push_back(size(rng) / 2);
        break;
      case model::transformer:  // attention / MLP blocks: a 4x wider activation every 4th
        activation_bytes.push_back(l % 4 == 1 ? 32u << 20 : 8u << 20);
        weight_bytes.push_back(l % 4 == 1 ? 16u << 20 : (4u << 20) + (12u << 10));
        break;
      case model::cnn:  // activations halve as channels double
        activation_bytes.push_back(std::size_t{64 << 20} >> (l * 6 / layers));
        weight_bytes.push_back(std::size_t{64 << 10} << (l * 6 / layers));
        break;
    }
  }
  gm::allocation_trace t;
  std::uniform_real_distribution<double> jitter{0.1, 0.5};
  std::vector<std::size_t> activations;
  for (std::size_t l = 0; l < activation_bytes.size(); ++l) {
    std::size_t const temp =
        t.record_allocate(static_cast<std::size_t>(activation_bytes[l] * jitter(rng)) + 1);
    activations.push_back(t.record_allocate(activation_bytes[l]));
    t.record_deallocate(temp);
  }
  std::size_t gradient = t.record_allocate(activation_bytes.back());
  for (std::size_t l = activation_bytes.size(); l-- > 0;) {
    static_cast<void>(t.record_allocate(weight_bytes[l]));  // weight gradient
    std::size_t const temp = t.record_allocate(weight_bytes[l] / 2 + 1);
    std::size_t const input_gradient = t.record_allocate(activation_bytes[l > 0 ? l - 1 : 0]);
    t.record_deallocate(temp);
    t.record_deallocate(gradient);
    t.record_deallocate(activations[l]);
    gradient = input_gradient;
  }
  t.record_deallocate(gradient);
  return t;
}

// A decoder-only transformer in bf16: batch, sequence, hidden width, heads, vocabulary, and
// whether attention is fused (flash attention: no sequence x sequence scores, only fp32
// log-sum-exp rows kept for the backward pass).
struct transformer_shape {
  std::size_t batch;
  std::size_t sequence;
  std::size_t hidden;
  std::size_t heads;
  std::size_t vocabulary;
  bool fused_attention;
};

constexpr std::array<transformer_shape, 3> transformer_shapes{{
    {8, 1024, 768, 12, 50304, false},   // GPT-2 small
    {4, 2048, 2048, 16, 50304, false},  // 1.3B
    {2, 4096, 4096, 32, 50304, true},   // 7B width, flash attention
}};

// Records a training step of a transformer with gradient accumulation over microbatches, in a
// one-forward-one-backward schedule: `in_flight` microbatches run forward before the first
// backward (1: plain gradient accumulation; more: a pipeline stage). With `ragged`, each
// microbatch has its own sequence length (a quarter to all of the maximum, in steps of 64), as
// with length-bucketed batches; otherwise every microbatch has the same shapes.
class transformer_step {
 public:
  transformer_step(transformer_shape shape, int layers, int microbatches, int in_flight,
                   bool ragged)
      : shape_{shape}, layers_{static_cast<std::size_t>(layers)} {
    std::mt19937 rng{11};
    std::uniform_int_distribution<std::size_t> quarters{shape.sequence / 256, shape.sequence / 64};
    for (int m = 0; m < microbatches; ++m) {
      sequences_.push_back(ragged ? quarters(rng) * 64 : shape.sequence);
    }
    parameters_ = {h() * 3 * h(), 3 * h(), h() * h(), h(), h() * 4 * h(), 4 * h(),
                   4 * h() * h(), h(),     h(),       h(), h(),           h()};
    gradients_.assign(layers_ * parameters_.size() + 1, none);  // + the tied embedding
    std::size_t forwards = 0;
    std::size_t backwards = 0;
    std::size_t const total = sequences_.size();
    while (forwards < std::min<std::size_t>(total, static_cast<std::size_t>(in_flight))) {
      forward(forwards++);
    }
    while (backwards < total) {
      backward(backwards++);
      if (forwards < total) forward(forwards++);
    }
    optimizer();
  }

  [[nodiscard]] gm::allocation_trace const& trace() const noexcept { return trace_; }

 private:
  static constexpr std::size_t none = std::numeric_limits<std::size_t>::max();
  static constexpr std::size_t element = 2;  // bf16

  // What one layer keeps from its forward pass for its backward pass.
  struct saved_layer {
    std::size_t input;  // the residual stream coming in (owned by this layer from here on)
    std::size_t ln1;
    std::size_t ln1_stats;
    std::size_t qkv;
    std::size_t probs;  // softmax probabilities, or log-sum-exp rows when fused
    std::size_t attention;
    std::size_t residual1;
    std::size_t ln2;
    std::size_t ln2_stats;
    std::size_t pre_gelu;
    std::size_t gelu;
  };
  struct saved_microbatch {
    std::size_t tokens;
    std::vector<saved_layer> layers;
    std::size_t last;  // the last layer's output
    std::size_t final_ln;
    std::size_t final_stats;
    std::size_t log_probs;
    std::size_t loss;
  };

  [[nodiscard]] std::size_t h() const noexcept { return shape_.hidden; }
  std::size_t allocate(std::size_t bytes) { return trace_.record_allocate(bytes); }
  void release(std::size_t id) { trace_.record_deallocate(id); }

  // A weight gradient: the first microbatch allocates it and keeps it for the optimizer; later
  // ones allocate a temporary and add it in.
  void gradient(std::size_t slot, std::size_t elements) {
    if (gradients_[slot] == none) {
      gradients_[slot] = allocate(elements * element);
    } else {
      release(allocate(elements * element));
    }
  }

  void forward(std::size_t m) {
    std::size_t const tokens = shape_.batch * sequences_[m];  // rows of activations
    std::size_t const row = tokens * h() * element;
    std::size_t const stats = tokens * 4 * 2;  // fp32 mean and reciprocal deviation
    std::size_t const scores =
        shape_.batch * shape_.heads * sequences_[m] * sequences_[m] * element;
    std::size_t const log_sum_exp = shape_.batch * shape_.heads * sequences_[m] * 4;
    saved_microbatch saved{};
    saved.tokens = allocate(tokens * 8);
    std::size_t x = allocate(row);  // embedding
    for (std::size_t l = 0; l < layers_; ++l) {
      saved_layer s{};
      s.input = x;
      s.ln1 = allocate(row);
      s.ln1_stats = allocate(stats);
      s.qkv = allocate(3 * row);
      if (shape_.fused_attention) {
        s.probs = allocate(log_sum_exp);
      } else {
        std::size_t const raw_scores = allocate(scores);
        s.probs = allocate(scores);  // softmax, kept for both attention matmul gradients
        release(raw_scores);
      }
      s.attention = allocate(row);
      std::size_t const projection = allocate(row);
      s.residual1 = allocate(row);
      release(projection);
      s.ln2 = allocate(row);
      s.ln2_stats = allocate(stats);
      s.pre_gelu = allocate(4 * row);
      s.gelu = allocate(4 * row);
      std::size_t const down = allocate(row);
      x = allocate(row);  // second residual: the next layer's input
      release(down);
      saved.layers.push_back(s);
    }
    saved.last = x;
    saved.final_ln = allocate(row);
    saved.final_stats = allocate(stats);
    std::size_t const logits = allocate(tokens * shape_.vocabulary * element);
    saved.log_probs = allocate(tokens * shape_.vocabulary * element);
    release(logits);
    saved.loss = allocate(4);
    saved_.push_back(std::move(saved));
  }

  void backward(std::size_t m) {
    saved_microbatch const& saved = saved_[m];
    std::size_t const tokens = shape_.batch * sequences_[m];
    std::size_t const row = tokens * h() * element;
    std::size_t const scores =
        shape_.batch * shape_.heads * sequences_[m] * sequences_[m] * element;
    std::size_t const log_sum_exp = shape_.batch * shape_.heads * sequences_[m] * 4;
    std::size_t const dlogits = allocate(tokens * shape_.vocabulary * element);
    release(saved.log_probs);
    release(saved.loss);
    std::size_t const dfinal = allocate(row);
    gradient(layers_ * parameters_.size(), shape_.vocabulary * h());  // tied embedding
    release(dlogits);
    std::size_t dy = allocate(row);  // final layer norm backward
    release(dfinal);
    release(saved.final_ln);
    release(saved.final_stats);
    release(saved.last);
    for (std::size_t l = layers_; l-- > 0;) {
      saved_layer const& s = saved.layers[l];
      std::size_t const p = l * parameters_.size();
      // MLP down and up, GELU.
      gradient(p + 6, parameters_[6]);
      gradient(p + 7, parameters_[7]);
      std::size_t const dgelu = allocate(4 * row);
      release(s.gelu);
      std::size_t const dpre = allocate(4 * row);
      release(dgelu);
      release(s.pre_gelu);
      gradient(p + 4, parameters_[4]);
      gradient(p + 5, parameters_[5]);
      std::size_t const dln2 = allocate(row);
      release(dpre);
      release(s.ln2);
      std::size_t const dres1_ln = allocate(row);
      gradient(p + 10, parameters_[10]);
      gradient(p + 11, parameters_[11]);
      release(dln2);
      release(s.ln2_stats);
      release(s.residual1);
      std::size_t const dres1 = allocate(row);  // + the residual path
      release(dres1_ln);
      release(dy);
      // Attention output projection, probabilities, scores, QKV.
      gradient(p + 2, parameters_[2]);
      gradient(p + 3, parameters_[3]);
      std::size_t const dattention = allocate(row);
      release(s.attention);
      std::size_t const dprobs = allocate(shape_.fused_attention ? log_sum_exp : scores);
      std::size_t const dqkv = allocate(3 * row);
      if (!shape_.fused_attention) {
        std::size_t const dscores = allocate(scores);
        release(dprobs);
        release(s.probs);
        release(dscores);
      } else {
        release(dprobs);  // the rows of dO . O
        release(s.probs);
      }
      release(dattention);
      gradient(p + 0, parameters_[0]);
      gradient(p + 1, parameters_[1]);
      std::size_t const dln1 = allocate(row);
      release(dqkv);
      release(s.qkv);
      release(s.ln1);
      std::size_t const dinput_ln = allocate(row);
      gradient(p + 8, parameters_[8]);
      gradient(p + 9, parameters_[9]);
      release(dln1);
      release(s.ln1_stats);
      std::size_t const dinput = allocate(row);
      release(dinput_ln);
      release(dres1);
      release(s.input);
      dy = dinput;
    }
    gradient(layers_ * parameters_.size(), shape_.vocabulary * h());  // embedding lookup
    release(dy);
    release(saved.tokens);
  }

  // Adam, one parameter at a time: fp32 temporaries for the update, then the gradient goes.
  void optimizer() {
    for (std::size_t const gradient : gradients_) {
      std::size_t const elements = trace_.bytes_of(gradient) / element;
      std::size_t const update = allocate(elements * 4);
      release(allocate(elements * 4));  // the denominator
      release(update);
      release(gradient);
    }
  }

  transformer_shape shape_;
  std::size_t layers_;
  std::vector<std::size_t> sequences_;
  std::vector<std::size_t> parameters_;  // elements of each parameter of a layer
  std::vector<std::size_t> gradients_;   // allocation id of each kept weight gradient
  std::vector<saved_microbatch> saved_;
  gm::allocation_trace trace_;
};

// Greedy by size, the offset assignment of TensorFlow Lite's arena planner (ArenaPlanner and
// SimpleMemoryArena): tensors alive over the whole trace first, then by size, largest first (ties
// in allocation order), each clear of every tensor already placed whose lifetime meets its own:
// at the lowest such offset (`gap::lowest`), or in the smallest gap between those tensors that
// holds it, else on top of them (`gap::smallest`, what TensorFlow Lite does). A plain O(n^2)
// scan over the placed tensors kept sorted by offset. Returns the slab size.
enum class gap : std::uint8_t { lowest, smallest };

std::size_t greedy_by_size_slab(gm::allocation_trace const& trace, std::size_t alignment,
                                gap rule) {
  struct tensor {
    std::size_t begin;
    std::size_t end;
    std::size_t size;
  };
  auto const& events = trace.events();
  std::vector<tensor> tensors(trace.allocation_count(), {0, events.size(), 0});
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (events[i].what == gm::trace_event::kind::allocate) {
      tensors[events[i].id].begin = i;
      tensors[events[i].id].size = (events[i].bytes + alignment - 1) / alignment * alignment;
    } else {
      tensors[events[i].id].end = i;
    }
  }
  auto whole = [&](std::size_t id) {
    return tensors[id].begin == 0 && tensors[id].end == events.size();
  };
  std::vector<std::size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (whole(a) != whole(b)) return whole(a);
    return tensors[a].size > tensors[b].size;
  });
  struct placed_tensor {
    std::size_t offset;
    std::size_t offset_end;
    std::size_t begin;
    std::size_t end;
  };
  std::vector<placed_tensor> placed;  // by offset
  std::size_t slab = 0;
  for (std::size_t id : order) {
    tensor const& me = tensors[id];
    std::size_t cursor = 0;  // the end of the conflicting tensors seen so far
    std::size_t best = std::numeric_limits<std::size_t>::max();
    std::size_t best_gap = std::numeric_limits<std::size_t>::max();
    for (placed_tensor const& other : placed) {
      if (other.begin >= me.end || me.begin >= other.end) continue;
      if (other.offset >= cursor + me.size && other.offset - cursor < best_gap) {
        best = cursor;
        best_gap = other.offset - cursor;
        if (rule == gap::lowest || best_gap == me.size) break;
      }
      cursor = std::max(cursor, other.offset_end);
    }
    std::size_t const offset = best == std::numeric_limits<std::size_t>::max() ? cursor : best;
    slab = std::max(slab, offset + me.size);
    placed_tensor const block{offset, offset + me.size, me.begin, me.end};
    placed.insert(std::upper_bound(placed.begin(), placed.end(), block,
                                   [](placed_tensor const& a, placed_tensor const& b) {
                                     return a.offset < b.offset;
                                   }),
                  block);
  }
  return slab;
}

// Times plan_allocations on `trace` and reports its footprint next to greedy by size's, with
// the lowest gap (greedy_by_size_ratio) and the smallest gap (greedy_by_size_smallest_gap_ratio),
// computed once per trace name: the O(n^2) baselines take seconds on the largest traces.
void plan_and_report(benchmark::State& state, gm::allocation_trace const& trace,
                     std::string const& name) {
  gm::allocation_plan plan;
  for (auto _ : state) {
    plan = gm::plan_allocations(trace);
    benchmark::DoNotOptimize(plan.slab_bytes);
  }
  static std::map<std::string, std::pair<std::size_t, std::size_t>> greedy_slabs;
  auto found = greedy_slabs.find(name);
  if (found == greedy_slabs.end()) {
    found = greedy_slabs
                .emplace(name, std::pair{greedy_by_size_slab(trace, plan.alignment, gap::lowest),
                                         greedy_by_size_slab(trace, plan.alignment, gap::smallest)})
                .first;
  }
  auto const peak = static_cast<double>(plan.peak_live_bytes);
  state.counters["allocations"] = static_cast<double>(trace.allocation_count());
  state.counters["footprint_ratio"] = plan.footprint_ratio();
  state.counters["greedy_by_size_ratio"] = static_cast<double>(found->second.first) / peak;
  state.counters["greedy_by_size_smallest_gap_ratio"] =
      static_cast<double>(found->second.second) / peak;
  state.counters["peak_live_GiB"] = peak / (1 << 30);
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(trace.allocation_count()));
}

// range(0): the model shape; range(1): layers (5 allocations each).
void plan_training_step(benchmark::State& state) {
  auto const trace =
      training_trace(static_cast<model>(state.range(0)), static_cast<int>(state.range(1)), 7);
  plan_and_report(
      state, trace,
      "synthetic " + std::to_string(state.range(0)) + " " + std::to_string(state.range(1)));
}

// range(0): shape (0: GPT-2 small, 1: 1.3B, 2: 7B width with flash attention); range(1): layers;
// range(2): microbatches; range(3): microbatches in flight; range(4): 1 for ragged sequence
// lengths.
void plan_transformer_step(benchmark::State& state) {
  transformer_step const step{transformer_shapes.at(static_cast<std::size_t>(state.range(0))),
                              static_cast<int>(state.range(1)), static_cast<int>(state.range(2)),
                              static_cast<int>(state.range(3)), state.range(4) != 0};
  std::string name = "transformer";
  for (int i = 0; i < 5; ++i) name += " " + std::to_string(state.range(i));
  plan_and_report(state, step.trace(), name);
}

void verify_training_step(benchmark::State& state) {
  auto const trace = training_trace(model::random_layers, static_cast<int>(state.range(0)), 7);
  auto const plan = gm::plan_allocations(trace);
  for (auto _ : state) gm::verify_plan(trace, plan);
  state.counters["allocations"] = static_cast<double>(trace.allocation_count());
}

// range(0): blocks kept live (mixed sizes, 256 B to 1 MiB) around the measured pair.
void allocator_pair(benchmark::State& state) {
  gm::detail::block_allocator alloc{256};
  alloc.add_region(std::uintptr_t{1} << 40, std::size_t{1} << 40);
  std::mt19937 rng{3};
  std::uniform_int_distribution<int> log_size{8, 20};
  std::vector<std::uintptr_t> live;
  for (std::int64_t i = 0; i < state.range(0); ++i) {
    auto const b = alloc.allocate(std::size_t{1} << log_size(rng), 1, gm::detail::no_graph);
    live.push_back(b->address);
  }
  for (std::size_t i = 0; i < live.size(); i += 2) alloc.deallocate(live[i], 1);  // holes
  std::size_t const sizes[] = {256, 4096, 65536, 1 << 20};
  std::size_t next = 0;
  for (auto _ : state) {
    auto const b = alloc.allocate(sizes[next++ % 4], 1, gm::detail::no_graph);
    benchmark::DoNotOptimize(b);
    alloc.deallocate(b->address, 1);
  }
  state.counters["free_blocks"] = static_cast<double>(alloc.stats().free_blocks);
}

}  // namespace

BENCHMARK(allocator_pair)->Arg(100)->Arg(10000)->Unit(benchmark::kNanosecond);
BENCHMARK(plan_training_step)
    ->ArgNames({"model", "layers"})
    ->ArgsProduct({{static_cast<std::int64_t>(model::random_layers),
                    static_cast<std::int64_t>(model::transformer),
                    static_cast<std::int64_t>(model::cnn)},
                   {10, 100, 500, 2000, 20000}})
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(3)
    ->ReportAggregatesOnly(true);
// About 500, 10^4 and 10^5 allocations: gradient accumulation (one microbatch in flight) and a
// pipeline stage (four in flight), with fixed and ragged sequence lengths.
BENCHMARK(plan_transformer_step)
    ->ArgNames({"shape", "layers", "microbatches", "in_flight", "ragged"})
    ->Args({0, 12, 1, 1, 0})
    ->Args({0, 24, 10, 1, 0})
    ->Args({1, 24, 10, 4, 1})
    ->Args({0, 48, 54, 1, 0})
    ->Args({1, 24, 108, 4, 0})
    ->Args({1, 24, 108, 4, 1})
    ->Args({2, 32, 8, 1, 0})
    ->Args({2, 32, 80, 4, 1})
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(3)
    ->ReportAggregatesOnly(true);
BENCHMARK(verify_training_step)->Arg(2000)->Arg(20000)->Unit(benchmark::kMillisecond);
