// ddp: a data-parallel training loop whose whole step — loss and gradients, gradient averaging
// across ranks bucket by bucket, SGD — is one captured graph. Each rank fits the same
// parameters to its own targets; averaged gradients keep every rank's parameters identical,
// which the example checks at the end.
//
//   by hand:   RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 ddp &
//              RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 ddp
//   torchrun:  torchrun --nproc-per-node=2 --no-python ddp
//   mpirun:    mpirun -np 2 ddp        (when graphstep was built where MPI is installed)
//   one GPU:   ddp

#include <cuda_runtime_api.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <graphstep/graphstep.hpp>
#include <graphstep/nccl.hpp>
#include <vector>

#include "../common/command_line.hpp"
#include "../common/data_parallel_launch.hpp"

namespace gs = graphstep;
namespace gn = graphstep::nccl;
namespace gt = graphstep::train;

namespace {

int run() {
  // The bootstrap follows from the launcher's variables (RANK/MASTER_*, NCCL_COMM_ID, mpirun).
  auto const launch = gn::read_launch_environment(gn::process_environment());
  std::printf("%s\n", gn::describe(launch).c_str());
  gn::nccl_comm comm = gn::communicator_from_environment();
  auto const view = comm.view();
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;

  // Parameter tensors (256 KiB each), listed in the order backward produces their gradients;
  // buckets of two tensors after a first bucket of one.
  std::size_t const elements = std::size_t{1} << 16;
  std::vector<std::size_t> const counts(4, elements);
  auto const plan =
      gn::plan_buckets(gs::dtype::float32, counts, std::size_t{512} << 10, std::size_t{256} << 10);
  // Every buffer from the pool, given back when it goes (before the pool: declared after it).
  std::vector<gs::cuda::device_buffer> storage;
  storage.reserve(2 * counts.size() + 3);
  auto floats = [&](std::size_t n) {
    storage.emplace_back(gs::tensor_spec{{static_cast<std::int64_t>(n)}, gs::dtype::float32},
                         stream, pool);
    return static_cast<float*>(storage.back().data());
  };
  float* const gradients = floats(plan.buffer_count);
  gs::device_span const all_gradients = storage.back().view();
  float* const loss = floats(counts.size());
  std::vector<float*> params;
  std::vector<float*> targets;
  std::vector<gt::mse_loss> losses;
  std::vector<gt::parameter> parameters;
  for (std::size_t t = 0; t < counts.size(); ++t) {
    std::size_t const n = counts[t];
    params.push_back(floats(n));
    targets.push_back(floats(n));
    std::vector<float> const zeros(n, 0.0F);
    std::vector<float> const target(n, 1.0F + 0.5F * static_cast<float>(view.rank()));
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(params[t], zeros.data(), n * sizeof(float),
                                       cudaMemcpyHostToDevice, stream.get()));
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(targets[t], target.data(), n * sizeof(float),
                                       cudaMemcpyHostToDevice, stream.get()));
    stream.synchronize();
    losses.emplace_back(n, stream);
    parameters.push_back(
        {{params[t], gs::dtype::float32, n}, all_gradients.subspan(plan.offsets[t], n)});
  }
  // The loss is a mean over the elements, so its gradient carries a 1/elements factor.
  gt::lr_schedule schedule;
  schedule.base = 0.25F * static_cast<float>(elements);
  gt::sgd optimizer{parameters, gt::sgd_options{0.5F}, schedule, {}, stream};
  gn::bucketed_all_reduce reducer{view, all_gradients, plan};

  auto train_step = [&] {
    std::size_t next_bucket = 0;
    for (std::size_t t = 0; t < counts.size(); ++t) {
      float* gradient = gradients + plan.offsets[t];
      std::size_t const n = losses[t].count();
      losses[t].forward_backward(
          {params[t], gs::dtype::float32, n}, {targets[t], gs::dtype::float32, n},
          {gradient, gs::dtype::float32, n}, {loss + t, gs::dtype::float32, 1}, stream);
      // Average a bucket as soon as its last gradient is written: overlaps the rest.
      while (next_bucket < plan.buckets.size() && plan.buckets[next_bucket].last == t + 1) {
        reducer.bucket_ready(next_bucket++, stream);
      }
    }
    reducer.join(stream);
    optimizer.step(stream);
  };
  // Every step runs guarded: a rank that dies, stops or issues other collectives ends the others
  // with an nccl_error within 60 s instead of a silent hang (a background watchdog also catches
  // a hang while this thread is blocked in a launch).
  gn::step_guard guard{view, {std::chrono::seconds{60}, std::chrono::seconds{60}}};
  guard.step(stream, train_step);  // eager warm-up: NCCL connects here, never inside the capture
  guard.wait();

  gs::graphs::graph_exec step;
  gs::graphs::capture(step, stream, pool, train_step,
                      {gs::graphs::capture_mode::this_thread, "ddp step"});
  guard.captured(stream);  // every rank captured the same collectives
  auto const nodes = step.node_counts();
  std::printf("rank %d of %d: one graph of %zu nodes per step, %zu gradient buckets\n", view.rank(),
              view.size(), nodes.total, plan.buckets.size());

  std::vector<float> host_loss(counts.size());
  for (int i = 1; i <= 30; ++i) {
    guard.replay(step, stream);
    guard.wait();
    if (i % 10 == 0) {
      GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(host_loss.data(), loss, sizeof(float) * counts.size(),
                                         cudaMemcpyDeviceToHost, stream.get()));
      stream.synchronize();
      std::printf("rank %d step %2d  local loss %.5f\n", view.rank(), i, host_loss.back());
    }
  }

  // Averaged gradients keep every replica identical: compare a checksum across ranks.
  std::vector<float> values(counts.back());
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(values.data(), params.back(), values.size() * sizeof(float),
                                     cudaMemcpyDeviceToHost, stream.get()));
  stream.synchronize();
  double sum = 0.0;
  for (float v : values) sum += v;
  float const mine = static_cast<float>(sum / static_cast<double>(values.size()));
  float* const checks = floats(static_cast<std::size_t>(view.size()) + 1);
  GRAPHSTEP_CUDA_TRY(
      cudaMemcpyAsync(checks, &mine, sizeof mine, cudaMemcpyHostToDevice, stream.get()));
  guard.step(stream, [&] {
    gn::all_gather({checks, gs::dtype::float32, 1},
                   {checks + 1, gs::dtype::float32, static_cast<std::size_t>(view.size())}, view,
                   stream);
  });
  guard.wait();
  std::vector<float> all(static_cast<std::size_t>(view.size()));
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(all.data(), checks + 1, sizeof(float) * all.size(),
                                     cudaMemcpyDeviceToHost, stream.get()));
  stream.synchronize();
  bool in_sync = true;
  for (float v : all) in_sync = in_sync && v == all.front();
  // The parameters converge to the mean of the ranks' targets.
  float const mean_target = 1.0F + 0.25F * static_cast<float>(view.size() - 1);
  bool const converged = std::abs(mine - mean_target) < 1e-2F;
  std::printf("rank %d: parameters %s across ranks; mean %.4f (target mean %.4f): %s\n",
              view.rank(), in_sync ? "identical" : "DIFFERENT", mine, mean_target,
              in_sync && converged ? "OK" : "FAILED");
  return in_sync && converged ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  examples::command_line{
      argc, argv, "ddp", "",
      "A data-parallel training loop whose whole step (loss and gradients, gradient averaging\n"
      "across ranks bucket by bucket, SGD) is one captured CUDA graph. Each rank fits the same\n"
      "parameters to its own targets; at the end it checks that every rank's parameters are\n"
      "identical. Takes no arguments; the launcher's variables say which rank it is:\n"
      "\n"
      "  by hand:   RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 ddp &\n"
      "             RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 ddp\n"
      "  torchrun:  torchrun --nproc-per-node=2 --no-python ddp\n"
      "  srun:      srun --ntasks=2 ddp\n"
      "  mpirun:    mpirun -np 2 ddp   (in builds with MPI)\n"
      "  one GPU:   ddp\n"}
      .expect_none();
  if (gs::cuda::device_count() == 0) {
    std::fprintf(stderr, "ddp: no CUDA device visible; this example needs an NVIDIA GPU\n");
    return 1;
  }
  try {
    examples::data_parallel_launch const launch{argc, argv};  // MPI, when mpirun started it
    return run();
  } catch (std::exception const& e) {  // graphstep::error, or out_of_memory (a std::bad_alloc)
    std::fprintf(stderr, "ddp: %s\n", e.what());
    return 1;
  }
}
