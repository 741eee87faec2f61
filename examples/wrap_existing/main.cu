// wrap_existing: an existing multi-kernel CUDA routine — kernels, a cuBLAS GEMM, a memcpy and a
// memset — captured into one graph without changing it, then replayed on new inputs and checked
// against the same routine run eagerly.

#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <graphstep/graphstep.hpp>
#include <random>
#include <vector>

#include "../common/command_line.hpp"

namespace gs = graphstep;

namespace {

// ---- the "existing" code: written without graphstep in mind ----------------------------

__global__ void scale_kernel(float* x, float factor, int n) {
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= factor;
}

__global__ void bias_relu_kernel(float* y, float const* bias, int rows, int cols) {
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < rows * cols) y[i] = fmaxf(y[i] + bias[i % cols], 0.0F);
}

__global__ void accumulate_kernel(float* total, float const* y, int n) {
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(total, y[i]);
}

struct layer_buffers {
  float* input;   // [batch, in]
  float* scaled;  // [batch, in]
  float* weight;  // [out, in]
  float* bias;    // [out]
  float* output;  // [batch, out]
  float* copy;    // [batch, out]
  float* total;   // [1]
};

// y = relu(0.5·x · Wᵀ + b); copy = y; total = Σ y. Row-major, as cuBLAS column-major yᵀ = W·xᵀ.
void existing_forward(cublasHandle_t blas, cudaStream_t stream, layer_buffers const& b, int batch,
                      int in, int out) {
  int const threads = 256;
  cudaMemcpyAsync(b.scaled, b.input, sizeof(float) * batch * in, cudaMemcpyDeviceToDevice, stream);
  scale_kernel<<<(batch * in + threads - 1) / threads, threads, 0, stream>>>(b.scaled, 0.5F,
                                                                             batch * in);
  float const one = 1.0F;
  float const zero = 0.0F;
  cublasSetStream(blas, stream);
  cublasSgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, out, batch, in, &one, b.weight, in, b.scaled, in,
              &zero, b.output, out);
  bias_relu_kernel<<<(batch * out + threads - 1) / threads, threads, 0, stream>>>(b.output, b.bias,
                                                                                  batch, out);
  cudaMemcpyAsync(b.copy, b.output, sizeof(float) * batch * out, cudaMemcpyDeviceToDevice, stream);
  cudaMemsetAsync(b.total, 0, sizeof(float), stream);
  accumulate_kernel<<<(batch * out + threads - 1) / threads, threads, 0, stream>>>(
      b.total, b.output, batch * out);
}

// ---- the graphstep side ------------------------------------------------------------------

std::vector<float> random_vector(std::size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist{-1.0F, 1.0F};
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<float> download(float const* device, std::size_t n, gs::cuda::stream_view stream) {
  std::vector<float> host(n);
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(host.data(), device, n * sizeof(float), cudaMemcpyDeviceToHost,
                                     stream.get()));
  stream.synchronize();
  return host;
}

double max_abs_difference(std::vector<float> const& a, std::vector<float> const& b) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(a[i] - b[i])));
  }
  return worst;
}

int run() {
  int const batch = 64;
  int const in = 512;
  int const out = 256;

  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  cublasHandle_t blas = nullptr;
  GRAPHSTEP_CUBLAS_TRY(cublasCreate(&blas));
  // Static buffers from the pool: the graph reads and writes these addresses on every replay.
  // Each gives its memory back to the pool when it goes (before the pool: declared after it).
  std::vector<gs::cuda::device_buffer> storage;
  storage.reserve(8);
  auto buffer = [&](std::size_t n) {
    storage.emplace_back(gs::tensor_spec{{static_cast<std::int64_t>(n)}, gs::dtype::float32},
                         stream, pool);
    return static_cast<float*>(storage.back().data());
  };
  // cuBLAS may allocate its workspace lazily; give it one from the pool so capture never has to.
  std::size_t const workspace_bytes = std::size_t{4} << 20;
  GRAPHSTEP_CUBLAS_TRY(
      cublasSetWorkspace(blas, buffer(workspace_bytes / sizeof(float)), workspace_bytes));

  layer_buffers b{};
  b.input = buffer(std::size_t(batch) * in);
  b.scaled = buffer(std::size_t(batch) * in);
  b.weight = buffer(std::size_t(out) * in);
  b.bias = buffer(out);
  b.output = buffer(std::size_t(batch) * out);
  b.copy = buffer(std::size_t(batch) * out);
  b.total = buffer(1);

  std::mt19937 rng{7};
  auto upload = [&](float* device, std::vector<float> const& host) {
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(device, host.data(), host.size() * sizeof(float),
                                       cudaMemcpyHostToDevice, stream.get()));
  };
  upload(b.weight, random_vector(std::size_t(out) * in, rng));
  upload(b.bias, random_vector(out, rng));
  upload(b.input, random_vector(std::size_t(batch) * in, rng));

  existing_forward(blas, stream.get(), b, batch, in, out);  // warm-up, eager
  stream.synchronize();

  gs::graphs::graph_exec step;
  {
    gs::graphs::capture_scope scope{
        step, stream, pool, {gs::graphs::capture_mode::this_thread, "wrap_existing"}};
    existing_forward(blas, stream.get(), b, batch, in, out);
    scope.end();
  }
  auto const nodes = step.node_counts();
  std::printf("captured %zu nodes: %zu kernels, %zu memcpy, %zu memset\n", nodes.total,
              nodes.kernel, nodes.memcpy, nodes.memset);

  double worst = 0.0;
  int const steps = 5;
  for (int i = 0; i < steps; ++i) {
    upload(b.input, random_vector(std::size_t(batch) * in, rng));  // new inputs, same address
    step.replay(stream);
    auto const graphed = download(b.copy, std::size_t(batch) * out, stream);
    auto const graphed_total = download(b.total, 1, stream);
    existing_forward(blas, stream.get(), b, batch, in, out);  // the same step, eagerly
    auto const eager = download(b.copy, std::size_t(batch) * out, stream);
    auto const eager_total = download(b.total, 1, stream);
    double const difference = max_abs_difference(graphed, eager);
    double const total_difference =
        std::fabs(graphed_total[0] - eager_total[0]) / std::max(1.0F, std::fabs(eager_total[0]));
    // The sum is accumulated with atomics, so its rounding depends on the order of additions.
    worst = std::max({worst, difference, total_difference * 0.1});
    std::printf("step %d: max |graph - eager| = %.3g, sum %.4f vs %.4f\n", i, difference,
                graphed_total[0], eager_total[0]);
  }
  GRAPHSTEP_CUBLAS_TRY(cublasDestroy(blas));
  bool const ok = worst <= 1e-5;
  std::printf("%s: graph replays %s eager results (worst difference %.3g)\n", ok ? "OK" : "FAILED",
              ok ? "match" : "do not match", worst);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  examples::command_line{
      argc, argv, "wrap_existing", "",
      "An existing multi-kernel CUDA routine (kernels, a cuBLAS GEMM, a memcpy and a memset)\n"
      "captured into one CUDA graph without changing it, then replayed on new inputs and\n"
      "checked against the same routine run eagerly. Takes no arguments.\n"}
      .expect_none();
  if (gs::cuda::device_count() == 0) {
    std::fprintf(stderr,
                 "wrap_existing: no CUDA device visible; this example needs an NVIDIA "
                 "GPU (see README.md for the CPU test suite)\n");
    return 1;
  }
  try {
    return run();
  } catch (std::exception const& e) {  // graphstep::error, or out_of_memory (a std::bad_alloc)
    std::fprintf(stderr, "wrap_existing: %s\n", e.what());
    return 1;
  }
}
