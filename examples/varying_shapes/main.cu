// varying_shapes: requests of varying batch size served by a handful of captured graphs.
// Batches are padded up to capture sizes (1, 2, 4, then steps of 16 up to 256); each capture size
// is captured on first use into one shared pool and replayed after. Run with the template mode,
// capture sizes share one executable graph and are switched by update instead of instantiation.
// --memory-timeline FILE writes the pool's memory timeline of the first run (each capture size its
// own capture and scratch) as JSON; scripts/plot-memory-timeline.py draws it.

#include <cstdio>
#include <graphstep/graphstep.hpp>
#include <graphstep/schedule/graph_cache.hpp>
#include <random>
#include <string>
#include <vector>

#include "../common/command_line.hpp"

namespace gs = graphstep;
namespace gsch = graphstep::schedule;

namespace {

constexpr int features = 512;
constexpr int largest = 256;

__global__ void scale_rows_kernel(float* y, float const* x, int rows, int cols, float factor) {
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < rows * cols) y[i] = x[i] * factor + 1.0F;
}

__global__ void row_max_kernel(float* out, float const* y, int rows, int cols) {
  int const r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float best = y[r * cols];
  for (int c = 1; c < cols; ++c) best = fmaxf(best, y[r * cols + c]);
  out[r] = best;
}

// `timeline`: where to write the pool's memory timeline of this run, or empty.
int run(gsch::graph_instantiation how, std::string const& timeline) {
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  if (!timeline.empty()) pool.begin_timeline();
  // The static input and output, given back to the pool when they go (before the pool).
  gs::cuda::device_buffer input_buffer{
      {"input", {largest, features}, gs::dtype::float32}, stream, pool};
  gs::cuda::device_buffer output_buffer{{"output", {largest}, gs::dtype::float32}, stream, pool};
  auto* input = static_cast<float*>(input_buffer.data());
  auto* output = static_cast<float*>(output_buffer.data());
  std::vector<float> host_input(std::size_t(largest) * features);
  std::mt19937 rng{3};
  std::uniform_real_distribution<float> dist{-1.0F, 1.0F};
  for (float& v : host_input) v = dist(rng);
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(input, host_input.data(), host_input.size() * sizeof(float),
                                     cudaMemcpyHostToDevice, stream.get()));

  // The "model": its kernels are sized by the capture size; its scratch comes from the pool.
  auto step = [&](std::int64_t size, gs::cuda::stream_view s) {
    int const rows = static_cast<int>(size);
    auto* hidden = static_cast<float*>(pool.allocate(sizeof(float) * rows * features, s));
    pool.name_allocation(hidden, "hidden, size " + std::to_string(size));
    scale_rows_kernel<<<(rows * features + 255) / 256, 256, 0, s.get()>>>(hidden, input, rows,
                                                                          features, 2.0F);
    row_max_kernel<<<(rows + 127) / 128, 128, 0, s.get()>>>(output, hidden, rows, features);
    pool.deallocate(hidden, s);
  };
  gsch::graph_cache_options options;
  options.instantiation = how;
  gsch::graph_cache cache{gsch::capture_sizes::powers_then_steps(largest, 16), step, pool, options};

  std::geometric_distribution<int> sizes{0.02};
  bool ok = true;
  std::vector<float> got(largest);
  for (int request = 0; request < 500; ++request) {
    int const batch = 1 + std::min(sizes(rng), largest - 1);
    auto const choice = cache.run(batch, stream);
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(got.data(), output, sizeof(float) * batch,
                                       cudaMemcpyDeviceToHost, stream.get()));
    stream.synchronize();
    for (int r = 0; r < batch; ++r) {
      float best = host_input[std::size_t(r) * features] * 2.0F + 1.0F;
      for (int c = 1; c < features; ++c) {
        best = std::max(best, host_input[std::size_t(r) * features + c] * 2.0F + 1.0F);
      }
      ok = ok && got[std::size_t(r)] == best;
    }
    static_cast<void>(choice);
  }
  auto const& stats = cache.statistics();
  std::printf(
      "[%s] %llu requests: %llu replays, %llu eager warm-ups/captures, %llu graphs "
      "captured in %.1f ms (%llu executables derived by update, %llu refused), "
      "padding %.1f%%, pool %.1f MiB\n",
      how == gsch::graph_instantiation::each_size ? "each size" : "update template",
      static_cast<unsigned long long>(stats.hits + stats.misses),
      static_cast<unsigned long long>(stats.hits), static_cast<unsigned long long>(stats.misses),
      static_cast<unsigned long long>(stats.captures), stats.capture_seconds * 1e3,
      static_cast<unsigned long long>(stats.updates),
      static_cast<unsigned long long>(stats.update_refusals), 100.0 * stats.pad_ratio(),
      static_cast<double>(pool.statistics().mapped_bytes) / (1 << 20));
  std::printf("%s: every request's result checked against the host\n", ok ? "OK" : "FAILED");
  if (!timeline.empty()) {
    gs::memory::pool_timeline const recorded = pool.end_timeline();
    recorded.write_json(timeline);
    std::printf("memory timeline: %zu allocations, %zu captures, %zu segments written to %s\n",
                recorded.allocations.size(), recorded.captures.size(), recorded.segments.size(),
                timeline.c_str());
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  examples::command_line args{
      argc, argv, "varying_shapes", "[--memory-timeline FILE]",
      "Requests of varying batch size served by a handful of captured CUDA graphs: batches\n"
      "are padded up to capture sizes (1, 2, 4, then steps of 16 up to 256), each capture size "
      "captured on\n"
      "first use into one shared pool and replayed after; then again with the capture sizes "
      "sharing\n"
      "one executable graph, switched by update.\n"
      "  --memory-timeline FILE  write the pool's memory timeline of the first run (segments,\n"
      "                          each capture size's capture and scratch) to FILE as JSON;\n"
      "                          scripts/plot-memory-timeline.py draws it\n"};
  std::string timeline;
  while (args.next()) {
    if (args.flag() == "--memory-timeline") {
      timeline = args.path();
    } else {
      args.fail("unknown argument '" + args.flag() + "'");
    }
  }
  if (gs::cuda::device_count() == 0) {
    std::fprintf(stderr,
                 "varying_shapes: no CUDA device visible; this example needs an "
                 "NVIDIA GPU\n");
    return 1;
  }
#if defined(GRAPHSTEP_CUDA_SIM)
  std::printf(
      "varying_shapes: running on the simulated CUDA device (no GPU): every result is checked "
      "against the host; times are not a GPU's\n");
#endif
  try {
    int const a = run(gsch::graph_instantiation::each_size, timeline);
    int const b = run(gsch::graph_instantiation::update_template, "");
    return a != 0 ? a : b;
  } catch (std::exception const& e) {  // graphstep::error, or out_of_memory (a std::bad_alloc)
    std::fprintf(stderr, "varying_shapes: %s\n", e.what());
    return 1;
  }
}
