// mlp_train: the MLP of the design — Linear 4096→2048 + GELU (fused into the GEMM), dropout
// 0.2, Linear 2048→1024, dropout 0.1, MSE, SGD — trained eagerly or with the whole step
// (forward, backward, optimizer, RNG advance) captured into one graph.
//
//   mlp_train [--mode eager|graphed|both] [--steps N] [--batch N] [--precision fp32|tf32]
//             [--unfused] [--seed S] [--print-every N] [--step-timeout S]
//             [--min-step-timeout S] [--verify]
//
// "both" runs eager and graphed from the same seed and checks that their losses agree.
// Launched as several ranks, it averages the gradients across them, every step under
// graphstep's step guard: a rank that dies ends the others at once, one that stops at the step
// deadline (20 times the median step, at least --min-step-timeout seconds, default 60; or a
// fixed --step-timeout), with an error, not a hang.
// --verify (graphed) checks the captured step with diagnostics::verify_replay before training,
// and times it against one eager step: once as it should be used (the generator restored before
// each run), and once without restoring it, so that the replay differs and the whole analysis
// (fresh capture, node comparison, bisection) runs.

#include <graphstep/graphstep.hpp>

#include "../common/command_line.hpp"
#include "mlp_model.hpp"
#if defined(MLP_TRAIN_WITH_NCCL)
#include <graphstep/nccl.hpp>

#include "../common/data_parallel_launch.hpp"
#include "../common/data_parallel_training.hpp"
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace gs = graphstep;
namespace go = graphstep::ops;

namespace {

using mlp_example::mlp;

struct settings : mlp_example::mlp_settings {
  std::string mode{"both"};
  int steps{200};
  int print_every{20};
  bool verify{false};
  bool data_parallel{false};   // the launcher started several ranks
  int step_timeout_s{0};       // data parallel: a fixed step deadline; 0 adapts to the steps
  int min_step_timeout_s{60};  // data parallel: the adaptive deadline's floor
};

settings parse(int argc, char** argv) {
  examples::command_line args{
      argc, argv, "mlp_train",
      "[--mode eager|graphed|both] [--steps N] [--batch N] [--precision fp32|tf32] [--unfused] "
      "[--seed S] [--print-every N] [--step-timeout S] [--min-step-timeout S] [--verify]",
      "Trains an MLP (Linear 4096->2048 + GELU fused into the GEMM, dropout 0.2, Linear\n"
      "2048->1024, dropout 0.1, MSE, SGD) eagerly, or with the whole step captured into one\n"
      "CUDA graph and replayed. Launched as several ranks (torchrun, mpirun, srun, or RANK,\n"
      "WORLD_SIZE, MASTER_ADDR, MASTER_PORT), it averages the gradients across them.\n"
      "\n"
      "  --mode M              eager, graphed, or both: the two from the same seed, their\n"
      "                        losses compared (default both)\n"
      "  --steps N             training steps (default 200)\n"
      "  --batch N             rows per batch (default 640)\n"
      "  --precision P         fp32 or tf32 GEMMs (default fp32)\n"
      "  --unfused             the GELU as a kernel of its own, not the GEMM's epilogue\n"
      "  --seed S              weights, data and dropout (default 2024)\n"
      "  --print-every N       print the loss every N steps (default 20)\n"
      "  --step-timeout S      data parallel: a fixed step deadline of S seconds\n"
      "  --min-step-timeout S  data parallel: the adaptive deadline (20 times the median\n"
      "                        step) is at least S seconds (default 60)\n"
      "  --verify              graphed: check the captured step with verify_replay first\n"
      "  --help                this text\n"};
  constexpr int limit = 1000000;
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
    } else if (arg == "--batch") {
      s.batch = args.positive(limit);
    } else if (arg == "--precision") {
      std::string const p = args.value();
      if (p == "fp32") {
        s.math = go::gemm_math::standard;
      } else if (p == "tf32") {
        s.math = go::gemm_math::tf32;
      } else {
        args.fail("--precision must be fp32 or tf32");
      }
    } else if (arg == "--unfused") {
      s.unfused = true;
    } else if (arg == "--seed") {
      s.seed = static_cast<std::uint64_t>(args.positive(limit));
    } else if (arg == "--print-every") {
      s.print_every = args.positive(limit);
    } else if (arg == "--step-timeout") {
      s.step_timeout_s = args.positive(limit);
    } else if (arg == "--min-step-timeout") {
      s.min_step_timeout_s = args.positive(limit);
    } else if (arg == "--verify") {
      s.verify = true;
    } else {
      args.fail("unknown argument '" + arg + "'");
    }
  }
  return s;
}

double milliseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// verify_replay on the captured step, timed against one eager step (median of 5, each followed
// by a full synchronization). The model's state is left as it was.
bool verify(mlp& model, gs::graphs::graph const& captured, gs::cuda::stream_view stream,
            gs::memory::memory_pool& pool, gs::graphs::capture_options const& capture) {
  auto const weights = model.watched();
  std::vector<std::vector<std::byte>> saved_weights;
  for (auto const& r : weights) {
    saved_weights.emplace_back(r.bytes());
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(saved_weights.back().data(), r.data(), r.bytes(),
                                       cudaMemcpyDeviceToHost, stream.get()));
  }
  gs::train::checkpoint saved_rng;
  model.rng().save_to(saved_rng, "rng", stream);
  auto const restore = [&](gs::cuda::stream_view s) {
    for (std::size_t i = 0; i < weights.size(); ++i) {
      GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(weights[i].data(), saved_weights[i].data(),
                                         weights[i].bytes(), cudaMemcpyHostToDevice, s.get()));
    }
    model.rng().restore_from(saved_rng, "rng", s);
  };
  std::vector<double> eager;
  for (int i = 0; i < 5; ++i) {
    auto const start = std::chrono::steady_clock::now();
    model.step();
    GRAPHSTEP_CUDA_TRY(cudaDeviceSynchronize());
    eager.push_back(milliseconds_since(start));
  }
  restore(stream);
  std::sort(eager.begin(), eager.end());
  double const eager_ms = eager[eager.size() / 2];

  gs::diagnostics::verify_options options;
  options.capture = capture;
  options.pool = &pool;
  options.before_each_run = [&](gs::cuda::stream_view s) {
    model.rng().restore_from(saved_rng, "rng", s);
  };
  auto const run = [&](gs::diagnostics::verify_options const& o, char const* what) {
    auto const start = std::chrono::steady_clock::now();
    auto report = gs::diagnostics::verify_replay(
        stream, [&](gs::cuda::stream_view) { model.step(); }, captured, weights, o);
    double const ms = milliseconds_since(start);
    std::printf(
        "[verify] %s: %.1f ms, %.1f eager steps (one eager step: %.2f ms, median of "
        "5)\n%s",
        what, ms, ms / eager_ms, eager_ms, report.describe().c_str());
    return report;
  };
  bool const identical = run(options, "generator restored before each run").identical();
  gs::diagnostics::verify_options drifting = options;
  drifting.before_each_run = nullptr;
  static_cast<void>(run(drifting, "generator not restored, so the replay draws other masks"));
  restore(stream);
  stream.synchronize();
  return identical;
}

std::vector<float> train(settings const& s, bool graphed) {
#if defined(MLP_TRAIN_WITH_NCCL)
  // Launched as several ranks (torchrun, mpirun, ...): average the gradients across them, every
  // step under the step guard. First: it makes the rank's device current.
  std::optional<examples::data_parallel_training> ranks;
  if (s.data_parallel)
    ranks.emplace(std::chrono::seconds{s.step_timeout_s},
                  std::chrono::seconds{s.min_step_timeout_s});
#endif
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  go::cublaslt_handle handle;
  mlp model{s, pool, stream, handle};
#if defined(MLP_TRAIN_WITH_NCCL)
  if (ranks) {
    // Buckets over the gradients' layout, in the order the backward finishes them: each bucket
    // is reduced as soon as the backward has finished it (fc2's first), the rest before the
    // update.
    auto plan = graphstep::nccl::plan_buckets(model.gradients().layout());
    std::printf("[%s] data-parallel: rank %d of %d, %zu gradient buckets\n",
                graphed ? "graphed" : "eager", ranks->comm().rank(), ranks->comm().size(),
                plan.buckets.size());
    ranks->average_gradients(model, model.gradients().span(), std::move(plan));
  }
#endif
  auto const run_step = [&](auto&& issue) {  // one step, waited for before its loss is read
#if defined(MLP_TRAIN_WITH_NCCL)
    if (ranks) return ranks->step(stream, issue);
#endif
    issue();
  };
  std::optional<gs::graphs::graph_exec> step;
  // One eager warm-up step in both modes (so their losses stay comparable): collectives
  // connect and libraries initialize here, never inside a capture.
  run_step([&] { model.step(); });
  if (graphed) {
    gs::graphs::capture_options const options{gs::graphs::capture_mode::this_thread,
                                              "mlp_train step"};
    gs::graphs::graph captured;
    gs::graphs::capture(
        captured, stream, pool, [&] { model.step(); }, options);
    if (s.verify && !verify(model, captured, stream, pool, options)) {
      throw gs::usage_error("the captured step does not replay what the eager step computes");
    }
    step.emplace(captured.instantiate());
#if defined(MLP_TRAIN_WITH_NCCL)
    if (ranks) ranks->captured(stream);  // every rank captured the same collectives
#endif
    auto const nodes = step->node_counts();
    std::printf("[graphed] one graph per step: %zu nodes (%zu kernels)\n", nodes.total,
                nodes.kernel);
  }
  std::printf("[%s] batch %d, %s, GELU %s\n", graphed ? "graphed" : "eager", s.batch,
              s.math == go::gemm_math::tf32 ? "tf32" : "fp32",
              model.fused() ? "fused into fc1's GEMM" : "as a separate kernel");
  std::vector<float> losses;
  auto const start = std::chrono::steady_clock::now();
  for (int i = 1; i <= s.steps; ++i) {
    run_step([&] { graphed ? step->replay(stream) : model.step(); });
    losses.push_back(model.loss());
    if (i % s.print_every == 0 || i == 1 || i == s.steps) {
      double const seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("[%s] step %5d/%d  loss %.6f  %.1f steps/s\n", graphed ? "graphed" : "eager", i,
                  s.steps, losses.back(), i / seconds);
    }
  }
#if defined(MLP_TRAIN_WITH_NCCL)
  if (ranks) {
    std::printf("[%s] %zu of %zu buckets were reduced while the backward ran\n",
                graphed ? "graphed" : "eager", ranks->buckets_during_backward(), ranks->buckets());
  }
#endif
  return losses;
}

}  // namespace

int main(int argc, char** argv) {
  settings s = parse(argc, argv);
  if (gs::cuda::device_count() == 0) {
    std::fprintf(stderr, "mlp_train: no CUDA device visible; this example needs an NVIDIA GPU\n");
    return 1;
  }
  try {
#if defined(MLP_TRAIN_WITH_NCCL)
    examples::data_parallel_launch const launch{argc, argv};
    s.data_parallel = launch.several_ranks();
#endif
    std::vector<float> eager;
    std::vector<float> graphed;
    if (s.mode != "graphed") eager = train(s, false);
    if (s.mode != "eager") graphed = train(s, true);
    auto const& any = graphed.empty() ? eager : graphed;
    bool const learned = any.back() < any.front();
    bool agree = true;
    if (!eager.empty() && !graphed.empty()) {
      double worst = 0.0;
      for (std::size_t i = 0; i < eager.size(); ++i) {
        worst = std::max(worst, static_cast<double>(std::fabs(eager[i] - graphed[i])) /
                                    std::max(1e-12, static_cast<double>(std::fabs(eager[i]))));
      }
      agree = worst <= 1e-5;
      std::printf("eager and graphed losses %s (worst relative difference %.3g)\n",
                  agree ? "agree" : "DIFFER", worst);
    }
    std::printf("%s: loss %.6f -> %.6f\n", learned && agree ? "OK" : "FAILED", any.front(),
                any.back());
    return learned && agree ? 0 : 1;
  } catch (std::exception const& e) {  // graphstep::error, or out_of_memory (a std::bad_alloc)
    std::fprintf(stderr, "mlp_train: %s\n", e.what());
    return 1;
  }
}
