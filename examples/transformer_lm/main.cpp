// transformer_lm: a GPT-2-style decoder language model (token + position embedding, pre-norm
// blocks of causal self-attention and a GELU MLP, tied output projection, cross-entropy)
// trained with bf16 weights, fp32 master weights and AdamW with gradient clipping, eagerly or
// with the whole step (forward, backward, clipping, optimizer) captured once into one graph and
// replayed. The data is one batch of random token sequences made in the program.
//
//   transformer_lm [--mode eager|graphed|both] [--steps N] [--layers N] [--width N]
//                  [--heads N] [--batch N] [--sequence N] [--vocab N] [--seed S]
//                  [--attention auto|plain|cudnn] [--print-every N] [--bucket-kib N]
//                  [--save FILE] [--resume FILE] [--step-timeout S] [--min-step-timeout S]
//                  [--memory-timeline FILE] [--check-gradients] [--accumulate K]
//                  [--skip-norm X]
//
// "both" trains eager and graphed from the same seed and checks that every step's loss is the
// same bit for bit: every kernel of the step is deterministic (no floating-point atomics) and
// cuBLASLt runs the same algorithm for the same plan.
//
// Launched as several ranks (by torchrun, mpirun, or RANK, WORLD_SIZE, ...), it trains data
// parallel: each rank first says what it read of its launcher (its rank and local rank, where it
// meets the others), every rank starts from the same weights with its own batch, the gradients are
// averaged across the ranks in buckets of --bucket-kib (default 25 MiB, the first at most 1 MiB)
// inside the step (and inside its graph), each bucket as soon as the backward has finished its
// gradients, while the backward goes on; at the end every rank checks that its weights are those
// of rank 0, bit for bit. Every step runs under graphstep's step guard: a rank that dies, stops,
// or runs other collectives (another model or bucket size) ends the others with an error, not a
// hang: a rank whose process ends at once (the communicator's peer watch), any other at the step
// deadline. That adapts to the steps measured (20 times the median step, at least
// --min-step-timeout seconds, default 60); --step-timeout S fixes it at S seconds instead (and
// the check that every rank captured the same collectives waits as long).
//
// --resume loads a checkpoint (the weights, and the optimizer's master weights, moments and
// step count) and trains on from the step after the one it was saved at, up to --steps; --save
// writes one after the last step (rank 0 alone, when data parallel: every rank loads the same
// file). A run resumed at step k ends with the same state, bit for bit, as one that went on.
// A FILE ending in .safetensors is written and read as a safetensors file (the same entries, for
// numpy, PyTorch or the safetensors package to read); any other in graphstep's own format.
// The checkpoint records the run's settings and number of ranks, and a resume with others is
// refused, naming each that differs (run_settings_of).
//
// --memory-timeline FILE records the pool's memory timeline of the graphed run (of the eager one
// with --mode eager) and writes it to FILE as JSON (docs/memory.md#memory-timeline), for
// scripts/plot-memory-timeline.py to draw.
//
// --accumulate K makes each optimizer step K micro-batches of --batch sequences, each its own
// batch of tokens, whose gradients add up before one all-reduce (data parallel) and one AdamW
// step; the K passes are a device loop, one conditional node of the graph whatever K
// (train::micro_batch_loop). --skip-norm X skips, on the device, every step whose gradient norm
// is above X or not finite: its step count and learning rate wait, and the run ends by saying
// how many were skipped. Both are recorded in the checkpoint's settings.
//
// --check-gradients runs one forward and backward pass and compares the loss and every
// gradient tensor with the same model computed in fp64 on the host from graphstep's reference
// ops (models/transformer_reference.hpp), from the same bf16 weights and tokens.

#include <graphstep/graphstep.hpp>

#include "../common/command_line.hpp"
#include "transformer_model.hpp"
#include "transformer_reference.hpp"
#if defined(TRANSFORMER_LM_WITH_NCCL)
#include <graphstep/nccl.hpp>

#include "../common/data_parallel_launch.hpp"
#include "../common/data_parallel_training.hpp"
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace gs = graphstep;
namespace go = graphstep::ops;

namespace {

using transformer_example::transformer;

struct settings : transformer_example::transformer_config {
  std::string mode{"both"};
  int steps{20};
  int print_every{5};
  bool check_gradients{false};
  // Bucket size of the gradient all-reduce: PyTorch DDP's 25 MiB.
  std::size_t bucket_kib{std::size_t{25} * 1024};
  bool data_parallel{false};    // the launcher started several ranks
  std::string save;             // checkpoint written after the last step
  std::string resume;           // checkpoint loaded before the first
  int step_timeout_s{0};        // data parallel: a fixed step deadline; 0 adapts to the steps
  int min_step_timeout_s{60};   // data parallel: the adaptive deadline's floor
  std::string memory_timeline;  // the pool's memory timeline written here, as JSON
};

// --skip-norm's value: a number, which the optimizer checks (it refuses one that is not
// positive, by value).
float parse_norm(examples::command_line& args) {
  char const* const text = args.value();
  char* end = nullptr;
  float const value = std::strtof(text, &end);
  if (end == text || *end != '\0')
    args.fail(std::string{"--skip-norm takes a number, not '"} + text + "'");
  return value;
}

settings parse(int argc, char** argv) {
  examples::command_line args{
      argc, argv, "transformer_lm",
      "[--mode eager|graphed|both] [--steps N] [--layers N] [--width N] [--heads N] [--batch N] "
      "[--sequence N] [--vocab N] [--seed S] [--attention auto|plain|cudnn] [--print-every N] "
      "[--bucket-kib N] [--save FILE] [--resume FILE] [--step-timeout S] "
      "[--min-step-timeout S] [--memory-timeline FILE] [--check-gradients] [--accumulate K] "
      "[--skip-norm X]",
      "Trains a GPT-2-style language model (bf16 weights, fp32 master weights, AdamW with\n"
      "gradient clipping) on random tokens, eagerly, or with the whole step captured into\n"
      "one CUDA graph and replayed. Launched as several ranks (torchrun, mpirun, srun, or\n"
      "RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), it trains data parallel and checks at the\n"
      "end that every rank holds rank 0's weights bit for bit.\n"
      "\n"
      "  --mode M              eager, graphed, or both: the two from the same seed, every\n"
      "                        step's loss compared bit for bit (default both)\n"
      "  --steps N             the step to train up to (default 20)\n"
      "  --layers N            transformer blocks (default 12)\n"
      "  --width N             channels (default 768)\n"
      "  --heads N             attention heads; must divide the width (default 12)\n"
      "  --batch N             sequences per batch (default 1)\n"
      "  --sequence N          tokens per sequence (default 128)\n"
      "  --vocab N             vocabulary (default 50257, padded to a multiple of 64)\n"
      "  --seed S              the weights' seed, the same on every rank (default 1337)\n"
      "  --attention A         auto, plain (graphstep's kernels) or cudnn (default auto)\n"
      "  --print-every N       print the loss every N steps (default 5)\n"
      "  --bucket-kib N        data parallel: all-reduce buckets of N KiB (default 25600)\n"
      "  --save FILE           write a checkpoint after the last step (one --mode only;\n"
      "                        FILE.safetensors: as a safetensors file)\n"
      "  --resume FILE         load a checkpoint and train on from the step after it\n"
      "  --step-timeout S      data parallel: a fixed step deadline of S seconds\n"
      "  --min-step-timeout S  data parallel: the adaptive deadline (20 times the median\n"
      "                        step) is at least S seconds (default 60)\n"
      "  --memory-timeline FILE  write the pool's memory timeline of the graphed run (the\n"
      "                        eager one with --mode eager) to FILE as JSON, for\n"
      "                        scripts/plot-memory-timeline.py\n"
      "  --check-gradients     one step's loss and gradients against an fp64 host model\n"
      "  --accumulate K        K micro-batches of --batch sequences per optimizer step, their\n"
      "                        gradients accumulated in a device loop (default 1)\n"
      "  --skip-norm X         skip, on the device, every step whose gradient norm is above X\n"
      "                        or not finite (default: never)\n"
      "  --help                this text\n"};
  constexpr int limit = 10000000;
  settings s;
  while (args.next()) {
    std::string const arg = args.flag();
    if (arg == "--mode") {
      s.mode = args.value();
      if (s.mode != "eager" && s.mode != "graphed" && s.mode != "both") {
        args.fail("--mode must be eager, graphed or both");
      }
    } else if (arg == "--steps") {
      s.steps = args.positive(limit);
    } else if (arg == "--layers") {
      s.layers = args.positive(limit);
    } else if (arg == "--width") {
      s.channels = args.positive(limit);
    } else if (arg == "--heads") {
      s.heads = args.positive(limit);
    } else if (arg == "--batch") {
      s.batch = args.positive(limit);
    } else if (arg == "--sequence") {
      s.sequence = args.positive(limit);
    } else if (arg == "--vocab") {
      s.vocab = args.positive(limit);
    } else if (arg == "--seed") {
      s.seed = static_cast<std::uint64_t>(args.positive(limit));
    } else if (arg == "--attention") {
      std::string const path = args.value();
      if (path == "auto") {
        s.attention = transformer_example::attention_path::automatic;
      } else if (path == "plain") {
        s.attention = transformer_example::attention_path::plain;
      } else if (path == "cudnn") {
        s.attention = transformer_example::attention_path::cudnn;
      } else {
        args.fail("--attention must be auto, plain or cudnn");
      }
    } else if (arg == "--print-every") {
      s.print_every = args.positive(limit);
    } else if (arg == "--bucket-kib") {
      s.bucket_kib = static_cast<std::size_t>(args.positive(limit));
    } else if (arg == "--step-timeout") {
      s.step_timeout_s = args.positive(limit);
    } else if (arg == "--min-step-timeout") {
      s.min_step_timeout_s = args.positive(limit);
    } else if (arg == "--save") {
      s.save = args.path();
    } else if (arg == "--resume") {
      s.resume = args.path();
    } else if (arg == "--memory-timeline") {
      s.memory_timeline = args.path();
    } else if (arg == "--check-gradients") {
      s.check_gradients = true;
    } else if (arg == "--accumulate") {
      s.micro_batches = args.positive(limit);
    } else if (arg == "--skip-norm") {
      s.skip_norm = parse_norm(args);
    } else {
      args.fail("unknown argument '" + arg + "'");
    }
  }
  if (auto const problem = s.problem(); !problem.empty()) args.fail(problem);
  if (s.check_gradients && s.micro_batches != 1) {
    args.fail("--check-gradients checks one micro-batch's gradients: leave out --accumulate");
  }
  if ((!s.save.empty() || !s.resume.empty()) && s.mode == "both") {
    args.fail("--save and --resume need --mode eager or --mode graphed: one run, one checkpoint");
  }
  return s;
}

double milliseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// What one training run gives: its loss at every step, and the median wall time of the steps
// of its loop after the first (which loads kernels, or uploads the graph); each step ends when
// its loss is on the host, so each is a whole step.
struct run {
  std::vector<float> losses;
  double median_step_ms{0.0};
};

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  auto const middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), middle, values.end());
  return *middle;
}

#if defined(TRANSFORMER_LM_WITH_NCCL)
using data_parallel = examples::data_parallel_training;

// Whether every rank's weights are rank 0's, bit for bit (after the gradients were averaged at
// every step, they must be).
bool weights_agree_across_ranks(transformer const& model, data_parallel& ranks,
                                gs::cuda::stream_view stream) {
  gs::device_span const mine = model.weights().span();
  std::size_t const bytes = mine.bytes();
  gs::cuda::device_buffer rank0{
      {"rank 0's weights", {static_cast<std::int64_t>(mine.count())}, mine.type()}, stream};
  ranks.step(stream, [&] { gs::nccl::broadcast(mine, rank0.view(), 0, ranks.comm(), stream); });
  std::vector<std::uint8_t> theirs(bytes);
  std::vector<std::uint8_t> ours(bytes);
  GRAPHSTEP_CUDA_TRY(
      cudaMemcpyAsync(theirs.data(), rank0.data(), bytes, cudaMemcpyDeviceToHost, stream.get()));
  GRAPHSTEP_CUDA_TRY(
      cudaMemcpyAsync(ours.data(), mine.data(), bytes, cudaMemcpyDeviceToHost, stream.get()));
  stream.synchronize();
  return theirs == ours;
}

// The gradients averaged across the ranks in buckets over the model's parameter layout, whose
// slots are in the order the backward finishes them: each bucket is complete once the backward
// has passed its end.
void average_gradients(transformer& model, settings const& s, data_parallel& ranks,
                       char const* mode) {
  std::size_t const bucket_bytes = s.bucket_kib * std::size_t{1024};
  auto plan = gs::nccl::plan_buckets(model.layout(), bucket_bytes,
                                     std::min(bucket_bytes, gs::nccl::default_first_bucket_bytes));
  std::printf("[%s] data parallel: rank %d of %d, gradients averaged in %zu buckets\n", mode,
              ranks.comm().rank(), ranks.comm().size(), plan.buckets.size());
  ranks.average_gradients(model, model.gradients().span(), std::move(plan));
}

// After training: every rank's weights must be rank 0's.
void check_ranks_agree(transformer const& model, data_parallel& ranks, gs::cuda::stream_view stream,
                       char const* mode) {
  if (!weights_agree_across_ranks(model, ranks, stream)) {
    throw gs::usage_error("rank " + std::to_string(ranks.comm().rank()) +
                          "'s weights differ from rank 0's after training");
  }
  std::printf("[%s] %zu of %zu buckets were reduced while the backward ran\n", mode,
              ranks.buckets_during_backward(), ranks.buckets());
  std::printf("[%s] the weights of every rank are rank 0's, bit for bit\n", mode);
}
#endif

void describe(settings const& s, transformer const& model, char const* mode) {
  std::printf(
      "[%s] %d layers, width %d, %d heads, %d micro-batch(es) of batch %d x sequence %d per "
      "step, vocabulary %d (%d padded): %.2fM parameters; attention: %s; GELU %s\n",
      mode, s.layers, s.channels, s.heads, s.micro_batches, s.batch, s.sequence, s.vocab,
      s.padded_vocab(), static_cast<double>(model.parameter_count()) / 1e6,
      model.attention_description().c_str(),
      model.fused_gelu() ? "fused into fc1's GEMM" : "as a separate kernel");
}

// The whole step captured into one graph (after an eager first step: cuBLASLt and the kernels
// are loaded before the capture), instantiated, and described.
gs::graphs::graph_exec capture_step(transformer& model, gs::cuda::stream_view stream,
                                    gs::memory::memory_pool& pool) {
  auto const start = std::chrono::steady_clock::now();
  gs::graphs::graph captured;
  gs::graphs::capture(captured, stream, pool, [&] { model.step(); },
                      {gs::graphs::capture_mode::this_thread, "transformer_lm step"});
  double const capture_ms = milliseconds_since(start);
  auto const instantiate_start = std::chrono::steady_clock::now();
  gs::graphs::graph_exec step = captured.instantiate();
  auto const nodes = step.node_counts();
  std::printf(
      "[graphed] one graph per step: %zu nodes (%zu kernels); capture %.1f ms, "
      "instantiate %.1f ms\n",
      nodes.total, nodes.kernel, capture_ms, milliseconds_since(instantiate_start));
  return step;
}

// What a resumed run must share with the run that saved, for the resume to go on with that run:
// the model's settings (sizes, batch, seed, learning rate, optimizer, kernels) and the number of
// ranks, whose batches a step averages. Not checked: the mode (eager and graphed steps are the
// same, bit for bit), and the size of the gradient buckets, which groups the all-reduce but not
// what it averages (with more than two ranks NCCL may add in another order at another size:
// keep it for a resume that must be exact bit for bit).
gs::train::run_settings run_settings_of(transformer const& model, int world_size) {
  gs::train::run_settings settings = model.settings();
  settings.add("world size", world_size);
  return settings;
}
constexpr char const* settings_prefix = "settings";

bool is_safetensors(std::string const& path) {
  std::string const suffix = ".safetensors";
  return path.size() > suffix.size() &&
         path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The state after the last step to `path` (by rank 0 alone when data parallel: every rank's
// state is the same), and back, after checking that this run's settings are the saved run's.
void save(transformer const& model, int world_size, std::string const& path, bool writes,
          char const* mode) {
  if (!writes) return;
  gs::train::checkpoint saved;
  run_settings_of(model, world_size).save_to(saved, settings_prefix);
  model.save_to(saved);
  if (is_safetensors(path)) {
    saved.save_safetensors(path);
  } else {
    saved.save(path);
  }
  std::printf("[%s] saved the state after step %lld to %s\n", mode,
              static_cast<long long>(model.steps_taken()), path.c_str());
}
void resume(transformer& model, int world_size, std::string const& path, char const* mode) {
  gs::train::checkpoint const loaded = is_safetensors(path)
                                           ? gs::train::checkpoint::load_safetensors(path)
                                           : gs::train::checkpoint::load(path);
  if (!run_settings_of(model, world_size).check(loaded, settings_prefix)) {
    std::printf(
        "[%s] %s records no run settings (it was saved before transformer_lm recorded "
        "them): resuming without checking that this run's settings are the saved run's\n",
        mode, path.c_str());
  }
  model.restore_from(loaded);
  std::printf("[%s] resumed from %s after step %lld\n", mode, path.c_str(),
              static_cast<long long>(model.steps_taken()));
}

// The training loop: eager, or one graph replayed per step, from a checkpoint if asked.
run train(settings const& base, bool graphed) {
  char const* const mode = graphed ? "graphed" : "eager";
  settings s = base;
#if defined(TRANSFORMER_LM_WITH_NCCL)
  std::optional<data_parallel> ranks;  // first: it makes the rank's device current
  if (s.data_parallel)
    ranks.emplace(std::chrono::seconds{s.step_timeout_s},
                  std::chrono::seconds{s.min_step_timeout_s});
  if (ranks) s.data_stream = ranks->comm().rank();
#endif
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  // The timeline of one run: the graphed one, unless only the eager one runs.
  bool const records_timeline = !s.memory_timeline.empty() && (graphed || s.mode == "eager");
  if (records_timeline) pool.begin_timeline();
  go::cublaslt_handle handle;
  transformer model{s, pool, stream, handle};
  if (records_timeline) {
    pool.name_allocation(model.weights().data(), "parameters (bf16)");
    pool.name_allocation(model.gradients().data(), "gradients (bf16)");
  }
  bool writes_checkpoints = true;
  int world_size = 1;
#if defined(TRANSFORMER_LM_WITH_NCCL)
  if (ranks) average_gradients(model, s, *ranks, mode);
  writes_checkpoints = !ranks || ranks->comm().rank() == 0;
  if (ranks) world_size = ranks->comm().size();
#endif
  describe(s, model, mode);
  if (!s.resume.empty()) resume(model, world_size, s.resume, mode);
  int const resumed_steps = static_cast<int>(model.steps_taken());
  auto const run_step = [&](auto&& issue) {  // one step, waited for before its loss is read
#if defined(TRANSFORMER_LM_WITH_NCCL)
    if (ranks) return ranks->step(stream, issue);
#endif
    issue();
  };
  std::vector<float> losses;
  std::optional<gs::graphs::graph_exec> step;
  if (graphed && resumed_steps < s.steps) {
    run_step([&] { model.step(); });  // eager in both modes, so that their losses compare
    losses.push_back(model.loss());
    std::printf("[graphed] step %5d/%d  loss %.6f  (eager, before the capture)\n",
                resumed_steps + 1, s.steps, static_cast<double>(losses.back()));
    step.emplace(capture_step(model, stream, pool));
#if defined(TRANSFORMER_LM_WITH_NCCL)
    if (ranks) ranks->captured(stream);  // every rank captured the same collectives
#endif
  }
  auto const start = std::chrono::steady_clock::now();
  int const first = resumed_steps + static_cast<int>(losses.size()) + 1;
  std::vector<double> step_ms;
  for (int i = first; i <= s.steps; ++i) {
    auto const step_start = std::chrono::steady_clock::now();
    run_step([&] { graphed ? step->replay(stream) : model.step(); });
    losses.push_back(model.loss());
    if (i > first) step_ms.push_back(milliseconds_since(step_start));  // the first warms up
    if (i % s.print_every == 0 || i == first || i == s.steps) {
      std::printf("[%s] step %5d/%d  loss %.6f  %.1f ms/step\n", mode, i, s.steps,
                  static_cast<double>(losses.back()),
                  milliseconds_since(start) / static_cast<double>(i - first + 1));
    }
  }
  {  // what the device decided, read back without a synchronization of its own
    gs::memory::host_readback<std::uint32_t> skipped;
    std::uint32_t const count =
        skipped.value(skipped.enqueue(model.skipped_steps_buffer(), stream));
    std::printf(
        "[%s] %u optimizer step(s) skipped on the device (gradient norm above "
        "--skip-norm or not finite)\n",
        mode, count);
  }
  auto const memory = pool.statistics();
  std::printf("[%s] pool: %.1f MiB in use at the peak, %.1f MiB mapped\n", mode,
              static_cast<double>(memory.peak_bytes_in_use) / (1 << 20),
              static_cast<double>(memory.mapped_bytes) / (1 << 20));
#if defined(TRANSFORMER_LM_WITH_NCCL)
  if (ranks) check_ranks_agree(model, *ranks, stream, mode);
#endif
  if (!s.save.empty()) save(model, world_size, s.save, writes_checkpoints, mode);
  if (records_timeline && writes_checkpoints) {  // rank 0 alone, when data parallel
    gs::memory::pool_timeline const timeline = pool.end_timeline();
    timeline.write_json(s.memory_timeline);
    std::printf("[%s] memory timeline: %zu allocations, %zu captures, %zu segments written to %s\n",
                mode, timeline.allocations.size(), timeline.captures.size(),
                timeline.segments.size(), s.memory_timeline.c_str());
  }
  return {std::move(losses), median(std::move(step_ms))};
}

// One forward and backward pass against the fp64 host model from the same bf16 weights.
// Every activation and gradient of the device step is stored in bf16 (8 significant bits), and
// each layer rounds several times on the way forward and back: the gradients are expected
// within a few percent in norm, while a wrong operand, a missing term or a misplaced tensor is
// off by its whole size.
bool check_gradients(settings const& s) {
  constexpr double loss_bound = 1e-2;
  constexpr double gradient_bound = 5e-2;
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  go::cublaslt_handle handle;
  transformer model{s, pool, stream, handle};
  model.forward_backward();
  float const loss = model.loss();
  std::size_t const count = model.parameter_count();
  std::vector<std::uint16_t> weights(count);
  std::vector<std::uint16_t> gradients(count);
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(weights.data(), model.weights().data(),
                                     count * sizeof(std::uint16_t), cudaMemcpyDeviceToHost,
                                     stream.get()));
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(gradients.data(), model.gradients().data(),
                                     count * sizeof(std::uint16_t), cudaMemcpyDeviceToHost,
                                     stream.get()));
  stream.synchronize();
  auto const to_double = [](std::vector<std::uint16_t> const& bits) {
    std::vector<double> values(bits.size());
    for (std::size_t i = 0; i < bits.size(); ++i) {
      values[i] = gs::bfloat16_to_float(bits[i]);
    }
    return values;
  };
  auto const want = transformer_example::reference_step(
      s, model.tensors(), to_double(weights), model.input_tokens(), model.target_tokens());
  std::vector<double> const got = to_double(gradients);

  double const loss_error = std::fabs(static_cast<double>(loss) - want.loss) / want.loss;
  bool ok = loss_error <= loss_bound;
  std::printf("[check] loss %.6f, fp64 reference %.6f: relative difference %.2e (bound %.0e)\n",
              static_cast<double>(loss), want.loss, loss_error, loss_bound);
  double worst = 0.0;
  std::string worst_name;
  for (auto const& t : model.tensors()) {
    auto const slice = [&](std::vector<double> const& v) {
      return std::vector<double>(
          v.begin() + static_cast<std::ptrdiff_t>(t.offset),
          v.begin() + static_cast<std::ptrdiff_t>(t.offset + t.spec.count()));
    };
    double const error = go::reference::relative_error(slice(got), slice(want.gradients));
    if (!(error <= gradient_bound)) {
      ok = false;
      std::fprintf(stderr, "[check] %s: gradient off by %.3g (relative, bound %.0e)\n",
                   t.spec.name().c_str(), error, gradient_bound);
    }
    if (!(error <= worst)) {
      worst = error;
      worst_name = t.spec.name();
    }
  }
  std::printf(
      "[check] %zu gradient tensors against the fp64 reference: worst relative error "
      "%.2e (%s), bound %.0e: %s\n",
      model.tensors().size(), worst, worst_name.c_str(), gradient_bound, ok ? "ok" : "FAILED");
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  settings s = parse(argc, argv);
  if (gs::cuda::device_count() == 0) {
    std::fprintf(stderr,
                 "transformer_lm: no CUDA device visible; this example needs an NVIDIA GPU, or "
                 "a build for the simulated device (cmake --preset sim)\n");
    return 1;
  }
#if defined(GRAPHSTEP_CUDA_SIM)
  std::printf("transformer_lm: running on the simulated CUDA device (no GPU)\n");
#endif
  try {
#if defined(TRANSFORMER_LM_WITH_NCCL)
    examples::data_parallel_launch const launch{argc, argv};
    s.data_parallel = launch.several_ranks();
    // Which rank of which host this process is, and where it meets the others, as read.
    if (s.data_parallel) {
      std::printf("transformer_lm: %s\n", gs::nccl::describe(launch.environment()).c_str());
    }
#endif
    if (s.check_gradients) return check_gradients(s) ? 0 : 1;
    run eager_run;
    run graphed_run;
    if (s.mode != "graphed") eager_run = train(s, false);
    if (s.mode != "eager") graphed_run = train(s, true);
    std::vector<float> const& eager = eager_run.losses;
    std::vector<float> const& graphed = graphed_run.losses;
    auto const& losses = graphed.empty() ? eager : graphed;
    for (float loss : losses) {
      if (!std::isfinite(loss)) {
        std::fprintf(stderr, "transformer_lm: a loss is not finite\n");
        return 1;
      }
    }
    bool const learned = losses.size() < 2 || losses.back() < losses.front();
    int mismatches = 0;
    if (!eager.empty() && !graphed.empty()) {
      for (std::size_t i = 0; i < eager.size(); ++i) {
        if (std::memcmp(&eager[i], &graphed[i], sizeof(float)) != 0) {
          if (mismatches++ == 0) {
            std::fprintf(stderr, "transformer_lm: step %zu: eager loss %.9g, graphed %.9g\n", i + 1,
                         static_cast<double>(eager[i]), static_cast<double>(graphed[i]));
          }
        }
      }
      std::printf("eager and graphed losses %s\n",
                  mismatches == 0 ? "are the same bit for bit at every step" : "differ");
#if defined(GRAPHSTEP_CUDA_SIM)
      std::printf(
          "step times: the simulated device runs kernels on the CPU, so its step times "
          "say nothing of a GPU's; run on a GPU for the graphed/eager ratio\n");
#else
      if (graphed_run.median_step_ms > 0.0) {
        std::printf(
            "step time (median, after each loop's first step): eager %.3f ms, graphed "
            "%.3f ms: the graphed step takes %.2fx less time\n",
            eager_run.median_step_ms, graphed_run.median_step_ms,
            eager_run.median_step_ms / graphed_run.median_step_ms);
      }
#endif
    }
    if (!learned) std::fprintf(stderr, "transformer_lm: the loss did not fall\n");
    return mismatches == 0 && learned ? 0 : 1;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "transformer_lm: %s\n", e.what());
    return 1;
  }
}
