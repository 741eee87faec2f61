// ddp: data-parallel gradient averaging inside a captured graph. Each rank fills its gradient
// buffer with its own values, one captured step averages them bucket by bucket across ranks,
// and every rank checks the result against the known average.
//
//   torchrun-style:  RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 ddp &
//                    RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 ddp
//   one process:     ddp

#include <graphstep/graphstep.hpp>
#include <graphstep/nccl.hpp>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <vector>

namespace gs = graphstep;
namespace gn = graphstep::nccl;

namespace {

int run() {
  gn::nccl_comm comm = gn::nccl_comm::from_environment();
  auto const view = comm.view();
  std::printf("ddp: %s\n",
              gn::describe(gn::read_launch_environment(gn::process_environment())).c_str());
  gs::stream stream;
  gs::memory_pool pool;

  // Gradients of a small MLP in the order backward produces them (last layer first).
  std::vector<std::size_t> const gradient_bytes{1024 * 4, 1024 * 2048 * 4, 2048 * 4,
                                                2048 * 4096 * 4};
  auto const plan = gn::plan_buckets(gradient_bytes, std::size_t{8} << 20, std::size_t{1} << 20);
  auto* gradients = static_cast<float*>(pool.allocate(plan.buffer_bytes, stream));
  std::size_t const n = plan.buffer_bytes / sizeof(float);

  // Rank r contributes r + 1 everywhere: the average is (size + 1) / 2.
  std::vector<float> const mine(n, static_cast<float>(view.rank() + 1));
  auto refill = [&] {
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(gradients, mine.data(), plan.buffer_bytes,
                                       cudaMemcpyHostToDevice, stream.get()));
  };
  gn::bucketed_all_reduce reducer{view, gradients, plan, gs::dtype::float32};
  refill();
  reducer.all(stream);  // eager warm-up: NCCL connects here, not inside the capture

  gs::graph step;
  gs::capture(step, stream, [&] {
    for (std::size_t b = 0; b < plan.buckets.size(); ++b) reducer.bucket_ready(b, stream);
    reducer.join(stream);
  }, {gs::capture_mode::this_thread, "ddp all-reduce"});
  gn::verify_captured_sequence(view, stream);  // every rank captured the same collectives

  gn::watchdog dog{comm, std::chrono::seconds{60}};
  float const expected = static_cast<float>(view.size() + 1) / 2.0F;
  std::vector<float> result(n);
  bool ok = true;
  for (int i = 0; i < 5; ++i) {
    refill();
    step.replay(stream);
    dog.launched(stream, i);
    dog.wait();
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(result.data(), gradients, plan.buffer_bytes,
                                       cudaMemcpyDeviceToHost, stream.get()));
    stream.synchronize();
    for (float v : result) ok = ok && v == expected;
  }
  std::printf("ddp rank %d: %zu buckets, %zu MiB of gradients, averaged in one graph launch per "
              "step: %s (expected %.1f)\n",
              view.rank(), plan.buckets.size(), plan.buffer_bytes >> 20, ok ? "OK" : "FAILED",
              expected);
  return ok ? 0 : 1;
}

}  // namespace

int main() {
  if (gs::device_count() == 0) {
    std::fprintf(stderr, "ddp: no CUDA device visible; this example needs an NVIDIA GPU\n");
    return 1;
  }
  try {
    return run();
  } catch (gs::error const& e) {
    std::fprintf(stderr, "ddp: %s\n", e.what());
    return 1;
  }
}
