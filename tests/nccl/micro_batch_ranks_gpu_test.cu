// Gradient accumulation on 2 ranks (ranks as forked processes on the simulated device, as
// tests/nccl/ranks_gpu_test.cpp runs them): the gradients all-reduced once per optimizer step,
// after the K micro-batches, so every rank decides the same. Eager and graphed end bit for bit
// alike on every rank; an inf planted in micro-batch 3 of 4 on one rank skips exactly that step
// on both, and the next step goes on.

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/memory/host_readback.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <graphstep/nccl.hpp>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "common/gpu_test.hpp"
#include "common/linear_micro_batches.cuh"

namespace gs = graphstep;
namespace gn = graphstep::nccl;
using gs::testing::micro_batches::batch;
using gs::testing::micro_batches::data_of;
using gs::testing::micro_batches::features;
using gs::testing::micro_batches::linear_run;

namespace {

// Made before the ranks are forked.
gn::unique_id_bytes& shared_unique_id() {
  static gn::unique_id_bytes id{};
  return id;
}

// Runs `body(rank)` in `ranks` child processes; each must exit 0 (its checks passed) in time.
void run_ranks(int ranks, std::function<bool(int)> const& body) {
  std::vector<pid_t> children;
  for (int rank = 0; rank < ranks; ++rank) {
    pid_t const child = fork();
    ASSERT_GE(child, 0) << "fork failed";
    if (child == 0) {
      bool ok = false;
      try {
        ok = body(rank);
      } catch (std::exception const& e) {
        std::fprintf(stderr, "rank %d threw: %s\n", rank, e.what());
      }
      std::fflush(stderr);
      _exit(ok ? 0 : 1);
    }
    children.push_back(child);
  }
  auto const deadline = std::chrono::steady_clock::now() + std::chrono::seconds{120};
  for (std::size_t rank = 0; rank < children.size(); ++rank) {
    int status = 0;
    while (waitpid(children[rank], &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        for (pid_t child : children) kill(child, SIGKILL);
        waitpid(children[rank], &status, 0);
        ADD_FAILURE() << "rank " << rank << " did not finish in time";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds{5});
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rank " << rank << " failed";
  }
}

struct step_result {
  std::uint32_t skipped{};
  std::int64_t steps_taken{};
  std::vector<float> weights;
};

// Four optimizer steps of 4 micro-batches on this rank's data, the gradients averaged across
// the ranks after the loop; rank `inf_rank` plants an inf in micro-batch index 2 at step 2.
std::vector<step_result> train(gn::nccl_comm_view comm, bool graphed, int inf_rank) {
  int const k = 4;
  int const b = 2;
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  gs::train::mixed_adamw_options options;
  options.max_grad_norm = 1.0F;
  linear_run run{k, b, options, stream};
  gs::device_span const gradients{run.gradients.data(), gs::dtype::float32,
                                  static_cast<std::size_t>(features)};
  run.after_loop = [&](gs::cuda::stream_view s) {
    gn::all_reduce(gradients, gradients, gn::reduce_op::avg, comm, s);
  };
  gs::graphs::graph_exec step;
  if (graphed) {
    run.upload(0);
    gs::graphs::capture(step, stream, pool, [&] { run.issue(stream); });
  }
  gs::memory::host_readback<std::uint32_t> skipped;
  std::vector<step_result> results;
  for (int i = 0; i < 4; ++i) {
    batch data = data_of(i + 100 * comm.rank(), k * b);
    if (i == 2 && comm.rank() == inf_rank) {
      data.x[static_cast<std::size_t>(2 * b * features + 5)] =
          std::numeric_limits<float>::infinity();
    }
    run.x_all.upload(data.x, stream);
    run.y_all.upload(data.y, stream);
    if (graphed) {
      step.replay(stream);
    } else {
      run.issue(stream);
    }
    auto const ticket = skipped.enqueue(run.optimizer->skipped_steps(), stream);
    results.push_back(
        {skipped.value(ticket), run.optimizer->steps_taken(stream), run.read(run.weights.data())});
  }
  return results;
}

class micro_batch_ranks_test : public gs::testing::gpu_test {
 protected:
  void SetUp() override {
    gs::testing::gpu_test::SetUp();
    if (IsSkipped()) return;
    // The CUDA runtime is not fork-safe once initialized: on a GPU, ranks run through a
    // launcher (examples/transformer_lm's data-parallel tests).
    if (!gs::testing::simulated_device) GTEST_SKIP() << "forked ranks run on the simulated device";
  }
};

}  // namespace

TEST_F(micro_batch_ranks_test, an_inf_on_one_rank_skips_that_step_on_every_rank_eager_and_graphed) {
  shared_unique_id() = gn::nccl_comm::new_unique_id();
  run_ranks(2, [](int rank) {
    auto comm = gn::nccl_comm::from_unique_id(shared_unique_id(), rank, 2);
    bool ok = true;
    auto expect = [&](bool holds, std::string const& what) {
      if (!holds) std::fprintf(stderr, "rank %d: %s\n", rank, what.c_str());
      ok = ok && holds;
    };
    auto const eager = train(comm.view(), false, 1);
    auto const graphed = train(comm.view(), true, 1);
    for (std::size_t i = 0; i < eager.size(); ++i) {
      expect(eager[i].weights == graphed[i].weights,
             "step " + std::to_string(i) + ": eager and graphed weights differ");
      expect(eager[i].skipped == (i >= 2 ? 1U : 0U) && graphed[i].skipped == eager[i].skipped,
             "step " + std::to_string(i) + ": skipped " + std::to_string(graphed[i].skipped));
      expect(
          graphed[i].steps_taken == static_cast<std::int64_t>(i >= 2 ? i : i + 1),
          "step " + std::to_string(i) + ": steps taken " + std::to_string(graphed[i].steps_taken));
    }
    expect(graphed[2].weights == graphed[1].weights, "the poisoned step changed the weights");
    expect(graphed[3].weights != graphed[2].weights, "the step after it did not go on");
    // Every rank holds rank 0's weights: the decision was taken on the averaged gradients.
    gs::cuda::stream stream;
    std::vector<float> mine = graphed.back().weights;
    gs::cuda::device_buffer device{sizeof(float) * mine.size(), stream};
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(device.data(), mine.data(), device.size(),
                                       cudaMemcpyHostToDevice, stream.get()));
    gs::device_span const span{device.data(), gs::dtype::float32, mine.size()};
    gn::broadcast(span, span, 0, comm.view(), stream);
    std::vector<float> const rank0 =
        gs::testing::copy_to_host(static_cast<float const*>(device.data()), mine.size(), stream);
    expect(rank0 == mine, "the weights differ from rank 0's");
    return ok;
  });
}
