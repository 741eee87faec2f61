// Capture and replay against eager execution, side-stream fork/join, and every way a capture
// can fail: each leaves the stream usable.

#include <cublas_v2.h>

#include <fstream>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/event.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_mode.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <random>
#include <vector>

#include "common/gpu_test.hpp"
#include "common/process_memory.hpp"
#include "common/test_kernels.cuh"

namespace gs = graphstep;
using gs::testing::axpy_kernel;
using gs::testing::blocks_for;
using gs::testing::fill_kernel;

namespace {

class capture_test : public gs::testing::stream_pool_test {
 protected:
  std::vector<float> download(float const* device, int n) { return download(device, n, *stream_); }
  // Read back on the stream that wrote the data: another stream would race with it.
  std::vector<float> download(float const* device, int n, gs::cuda::stream_view stream) {
    std::vector<float> host(n);
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(host.data(), device, n * sizeof(float),
                                       cudaMemcpyDeviceToHost, stream.get()));
    stream.synchronize();
    return host;
  }
  void upload(float* device, std::vector<float> const& host) {
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(device, host.data(), host.size() * sizeof(float),
                                       cudaMemcpyHostToDevice, stream_->get()));
  }
  // Proof that a stream still works after a failed capture.
  void expect_stream_usable(gs::cuda::stream_view stream) {
    EXPECT_FALSE(stream.is_capturing());
    float* x = static_cast<float*>(pool_->allocate(sizeof(float) * 4, stream));
    fill_kernel<<<1, 32, 0, stream.get()>>>(x, 3.0F, 4);
    GRAPHSTEP_CUDA_TRY(cudaGetLastError());
    EXPECT_EQ(download(x, 4, stream), std::vector<float>(4, 3.0F));
    pool_->deallocate(x, stream);
  }
};

// The routine under test: kernels, a cuBLAS GEMM, a memcpy and a memset.
void routine(cublasHandle_t blas, cudaStream_t stream, float const* a, float const* b, float* c,
             float* d, int n) {
  float const one = 1.0F;
  float const zero = 0.0F;
  GRAPHSTEP_CUBLAS_TRY(cublasSetStream(blas, stream));
  GRAPHSTEP_CUBLAS_TRY(
      cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n));
  axpy_kernel<<<blocks_for(n * n), 256, 0, stream>>>(c, a, 2.0F, n * n);
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(d, 0, sizeof(float) * n * n, stream));
  axpy_kernel<<<blocks_for(n * n), 256, 0, stream>>>(d, c, 0.5F, n * n);
  GRAPHSTEP_CUDA_TRY(
      cudaMemcpyAsync(c, d, sizeof(float) * n * n, cudaMemcpyDeviceToDevice, stream));
}

}  // namespace

TEST_F(capture_test, replay_equals_eager_for_kernels_cublas_memcpy_memset) {
  int const n = 64;
  float* a = blocks_->get(std::size_t{n} * n);
  float* b = blocks_->get(std::size_t{n} * n);
  float* c = blocks_->get(std::size_t{n} * n);
  float* d = blocks_->get(std::size_t{n} * n);
  cublasHandle_t blas = nullptr;
  GRAPHSTEP_CUBLAS_TRY(cublasCreate(&blas));
  void* workspace = blocks_->get<unsigned char>(std::size_t{4} << 20);
  GRAPHSTEP_CUBLAS_TRY(cublasSetWorkspace(blas, workspace, std::size_t{4} << 20));

  std::mt19937 rng{1};
  std::uniform_real_distribution<float> dist{-1.0F, 1.0F};
  auto random = [&] {
    std::vector<float> v(n * n);
    for (auto& x : v) x = dist(rng);
    return v;
  };
  upload(a, random());
  upload(b, random());
  routine(blas, stream_->get(), a, b, c, d, n);  // warm-up
  stream_->synchronize();

  gs::graphs::graph_exec g;
  gs::graphs::capture(g, *stream_, *pool_, [&] { routine(blas, stream_->get(), a, b, c, d, n); },
                      {gs::graphs::capture_mode::this_thread, "routine"});
  ASSERT_FALSE(g.empty());
  auto const counts = g.node_counts();
  EXPECT_GE(counts.kernel, 3U);  // the GEMM and two axpy
  EXPECT_EQ(counts.memset, 1U);
  EXPECT_EQ(counts.memcpy, 1U);

  for (int step = 0; step < 3; ++step) {
    upload(a, random());
    upload(b, random());
    g.replay(*stream_);
    auto const graphed = download(c, n * n);
    routine(blas, stream_->get(), a, b, c, d, n);
    auto const eager = download(c, n * n);
    EXPECT_EQ(graphed, eager) << "step " << step;
  }
  EXPECT_EQ(g.replay_count(), 3U);
  GRAPHSTEP_CUBLAS_TRY(cublasDestroy(blas));
}

TEST_F(capture_test, side_stream_fork_join_is_captured) {
  int const n = 1 << 12;
  auto* x = blocks_->get(n);
  auto* y = blocks_->get(n);
  gs::cuda::stream side;
  gs::graphs::graph_exec g;
  {
    gs::graphs::capture_scope scope{g, *stream_, *pool_};
    fill_kernel<<<blocks_for(n), 256, 0, stream_->get()>>>(x, 1.0F, n);
    scope.fork(side);
    fill_kernel<<<blocks_for(n), 256, 0, side.get()>>>(y, 2.0F, n);  // in parallel with x
    scope.join(side);
    axpy_kernel<<<blocks_for(n), 256, 0, stream_->get()>>>(x, y, 10.0F, n);
    scope.end();
  }
  EXPECT_EQ(g.node_counts().kernel, 3U);
  g.replay(*stream_);
  EXPECT_EQ(download(x, n), std::vector<float>(n, 21.0F));
}

TEST_F(capture_test, unjoined_fork_is_a_capture_error_and_the_streams_stay_usable) {
  gs::cuda::stream side;
  gs::graphs::graph_exec g;
  float* x = blocks_->get(1);
  try {
    gs::graphs::capture_scope scope{
        g, *stream_, *pool_, {gs::graphs::capture_mode::this_thread, "unjoined"}};
    scope.fork(side);
    fill_kernel<<<1, 32, 0, side.get()>>>(x, 1.0F, 1);
    scope.end();
    FAIL() << "no exception";
  } catch (gs::capture_error const& e) {
    EXPECT_EQ(e.code(), cudaErrorStreamCaptureUnjoined);
    EXPECT_NE(std::string{e.what()}.find("unjoined"), std::string::npos) << e.what();
    EXPECT_NE(std::string{e.what()}.find("join"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(g.empty());
  expect_stream_usable(*stream_);
  expect_stream_usable(side);
}

TEST_F(capture_test, a_raw_unjoined_fork_is_reported_by_cuda) {
  gs::cuda::stream side;
  gs::cuda::event fork;
  gs::graphs::graph_exec g;
  float* x = blocks_->get(1);
  EXPECT_THROW(gs::graphs::capture(g, *stream_,
                                   [&] {
                                     fork.record(*stream_);
                                     side.view().wait(fork);
                                     fill_kernel<<<1, 32, 0, side.get()>>>(x, 1.0F, 1);
                                   }),
               gs::capture_error);
  EXPECT_TRUE(g.empty());
  expect_stream_usable(*stream_);
}

TEST_F(capture_test, synchronize_inside_capture_is_a_capture_error) {
  gs::graphs::graph_exec g;
  try {
    gs::graphs::capture(
        g, *stream_,
        [&] {
          fill_kernel<<<1, 32, 0, stream_->get()>>>(nullptr, 0.0F, 0);
          static_cast<void>(cudaStreamSynchronize(stream_->get()));  // user code ignoring the error
        },
        {gs::graphs::capture_mode::this_thread, "syncing"});
    FAIL() << "no exception";
  } catch (gs::capture_error const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("capture 'syncing'"), std::string::npos) << what;
    EXPECT_NE(what.find("synchronization"), std::string::npos) << what;
  }
  EXPECT_TRUE(g.empty());
  expect_stream_usable(*stream_);
}

#if defined(CUDART_VERSION) && CUDART_VERSION >= 13000
// A call refused on a captured stream that leaves the capture valid: under CUDA 13
// cudaMemcpyBatchAsync (rapidsai/rmm#2518). CUDA would end the capture with a graph that lacks
// the copy; the scope refuses it, naming the call. On a GPU only CUPTI's callbacks see the
// failed call, so the capture is diagnosed there.
class failed_call_test : public capture_test {
 protected:
  void SetUp() override {
    capture_test::SetUp();
    if (IsSkipped()) return;
#if !defined(GRAPHSTEP_CUDA_SIM)
    if (std::string const why = gs::graphs::capture_diagnostics_unavailable_reason();
        !why.empty()) {
      GTEST_SKIP() << "on a GPU a failed call that leaves the capture valid is seen only with "
                      "capture diagnostics: "
                   << why;
    }
    options_.diagnose = true;
#endif
  }
  // What a library that ignores the result does (rmm's callers did): a batched host-to-device
  // copy of `n` floats.
  static void batched_copy(float* device, std::vector<float> const& host, cudaStream_t stream) {
    void* destinations[] = {device};
    void const* sources[] = {host.data()};
    std::size_t sizes[] = {host.size() * sizeof(float)};
    cudaMemcpyAttributes attributes{};
    attributes.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    std::size_t first_copy = 0;
    static_cast<void>(cudaMemcpyBatchAsync(destinations, sources, sizes, 1, &attributes,
                                           &first_copy, 1, stream));
  }
  gs::graphs::capture_options options_{gs::graphs::capture_mode::this_thread, "batched"};
};

TEST_F(failed_call_test, a_batched_copy_in_the_capture_is_a_capture_error_naming_it) {
  int const n = 64;
  float* x = blocks_->get(n);
  std::vector<float> const host(n, 5.0F);
  gs::graphs::graph_exec g;
  try {
    gs::graphs::capture(
        g, *stream_, *pool_,
        [&] {
          fill_kernel<<<1, 64, 0, stream_->get()>>>(x, 1.0F, n);
          batched_copy(x, host, stream_->get());
        },
        options_);
    FAIL() << "no exception";
  } catch (gs::capture_error const& e) {
    std::string const what = e.what();
    EXPECT_EQ(e.code(), cudaErrorStreamCaptureUnsupported);
    EXPECT_NE(what.find("capture 'batched'"), std::string::npos) << what;
    EXPECT_NE(what.find("cudaMemcpyBatchAsync returned cudaErrorStreamCaptureUnsupported"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("left the capture valid"), std::string::npos) << what;
    EXPECT_NE(what.find("cudaMemcpyAsync for each copy"), std::string::npos) << what;  // the fix
  }
  EXPECT_TRUE(g.empty());
  expect_stream_usable(*stream_);
}

TEST_F(failed_call_test, a_batched_copy_on_a_forked_side_stream_is_seen_too) {
  int const n = 64;
  float* x = blocks_->get(n);
  std::vector<float> const host(n, 5.0F);
  gs::cuda::stream side;
  gs::graphs::graph g;
  try {
    gs::graphs::capture_scope scope{g, *stream_, options_};
    scope.fork(side);
    batched_copy(x, host, side.get());
    scope.join(side);
    scope.end();
    FAIL() << "no exception";
  } catch (gs::capture_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("cudaMemcpyBatchAsync"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(g.empty());
  expect_stream_usable(*stream_);
  expect_stream_usable(side);
}

// A call that fails on a stream outside the capture is not the capture's: the graph is made, and
// the capture's own copy (cudaMemcpyAsync, which can be captured) replays.
TEST_F(failed_call_test, a_clean_capture_beside_a_failed_call_elsewhere_is_unaffected) {
  int const n = 64;
  float* x = blocks_->get(n);
  std::vector<float> const host(n, 5.0F);
  gs::cuda::stream elsewhere;
  gs::graphs::graph_exec g;
  gs::graphs::capture(
      g, *stream_, *pool_,
      [&] {
        fill_kernel<<<1, 64, 0, stream_->get()>>>(x, 1.0F, n);
        GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(x, host.data(), n * sizeof(float),
                                           cudaMemcpyHostToDevice, stream_->get()));
        std::size_t empty = 0;  // refused (an empty copy), on a stream the capture does not hold
        void* destinations[] = {x};
        void const* sources[] = {host.data()};
        cudaMemcpyAttributes attributes{};
        attributes.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
        std::size_t first_copy = 0;
        EXPECT_NE(cudaMemcpyBatchAsync(destinations, sources, &empty, 1, &attributes,
                                       &first_copy, 1, elsewhere.get()),
                  cudaSuccess);
        static_cast<void>(cudaGetLastError());
      },
      options_);
  ASSERT_FALSE(g.empty());
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(x, 0, n * sizeof(float), stream_->get()));
  g.replay(*stream_);
  EXPECT_EQ(download(x, n), host);
}
#endif

TEST_F(capture_test, cuda_malloc_inside_global_capture_is_a_capture_error) {
  gs::graphs::graph_exec g;
  EXPECT_THROW(gs::graphs::capture(g, *stream_,
                                   [&] {
                                     void* p = nullptr;
                                     if (cudaMalloc(&p, 1024) == cudaSuccess)
                                       static_cast<void>(cudaFree(p));
                                   },
                                   {gs::graphs::capture_mode::global, "mallocing"}),
               gs::capture_error);
  EXPECT_TRUE(g.empty());
  expect_stream_usable(*stream_);
}

// A synchronous copy to the host goes to the legacy stream. Beside the capture of a blocking
// stream that breaks the capture: a capture_error. Beside a non-blocking stream (graphstep's
// streams) CUDA lets it run at once, in every capture mode (an H100 with CUDA 13.0,
// docs/validation.md): the host reads the data as it was before the captured work, and no
// error says so. capture_diagnostics warns of such legacy-stream work.
TEST_F(capture_test, host_read_inside_capture_is_a_capture_error) {
  float* x = blocks_->get(1);
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(x, 0, sizeof(float), stream_->get()));
  stream_->synchronize();
  cudaStream_t blocking = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaStreamCreate(&blocking));
  float host = -1.0F;
  auto read_after_a_fill = [&](cudaStream_t stream) {
    return [&host, x, stream] {
      GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(x, 0x7f, sizeof(float), stream));
      static_cast<void>(cudaMemcpy(&host, x, sizeof(float), cudaMemcpyDeviceToHost));
    };
  };
  gs::graphs::graph_exec g;
  EXPECT_THROW(gs::graphs::capture(g, gs::cuda::stream_view{blocking}, read_after_a_fill(blocking),
                                   {gs::graphs::capture_mode::global, "host read"}),
               gs::capture_error);
  EXPECT_TRUE(g.empty());
  GRAPHSTEP_CUDA_TRY(cudaStreamDestroy(blocking));

  // Beside a non-blocking stream CUDA runs the copy at once, before the captured fill; by
  // default graphstep refuses it (refuse_legacy_stream), since replays would lack it.
  EXPECT_THROW(gs::graphs::capture(g, *stream_, read_after_a_fill(stream_->get()),
                                   {gs::graphs::capture_mode::global, "host read beside"}),
               gs::capture_error);
  EXPECT_TRUE(g.empty());
  gs::graphs::capture_options allowed{gs::graphs::capture_mode::global, "host read allowed"};
  allowed.refuse_legacy_stream = false;
  gs::graphs::capture(g, *stream_, read_after_a_fill(stream_->get()), allowed);
  EXPECT_EQ(host, 0.0F) << "the copy ran at once, before the captured fill";
  EXPECT_FALSE(g.empty());
  expect_stream_usable(*stream_);
}

TEST_F(capture_test, a_throw_inside_the_scope_discards_the_graph_and_its_memory) {
  gs::graphs::graph_exec g;
  auto const before = pool_->statistics().bytes_in_use;
  EXPECT_THROW(gs::graphs::capture(g, *stream_, *pool_,
                                   [&] {
                                     static_cast<void>(pool_->allocate(1 << 20, *stream_));
                                     throw std::runtime_error{"user code failed"};
                                   }),
               std::runtime_error);
  EXPECT_TRUE(g.empty());
  EXPECT_EQ(pool_->statistics().bytes_in_use, before);
  expect_stream_usable(*stream_);
}

TEST_F(capture_test, nested_capture_is_a_usage_error) {
  gs::graphs::graph_exec outer;
  gs::graphs::graph_exec inner;
  gs::graphs::capture(outer, *stream_, [&] {
    EXPECT_THROW(gs::graphs::capture_scope(inner, *stream_), gs::usage_error);
  });
  EXPECT_TRUE(inner.empty());
  EXPECT_FALSE(outer.empty());
}

TEST_F(capture_test, capturing_into_a_full_graph_is_a_usage_error) {
  gs::graphs::graph_exec g;
  gs::graphs::capture(g, *stream_, [] {});
  EXPECT_THROW(gs::graphs::capture_scope(g, *stream_), gs::usage_error);
  expect_stream_usable(*stream_);
}

TEST_F(capture_test, moved_from_graph_replay_is_a_usage_error) {
  gs::graphs::graph_exec g;
  float* x = blocks_->get(1);
  gs::graphs::capture(g, *stream_, [&] { fill_kernel<<<1, 32, 0, stream_->get()>>>(x, 5.0F, 1); });
  gs::graphs::graph_exec moved = std::move(g);
  EXPECT_THROW(g.replay(*stream_), gs::usage_error);  // NOLINT: testing the moved-from state
  moved.replay(*stream_);
  EXPECT_EQ(download(x, 1)[0], 5.0F);
}

TEST_F(capture_test, dot_export_writes_a_graphviz_file) {
  gs::graphs::graph_exec g;
  float* x = blocks_->get(1);
  gs::graphs::capture(g, *stream_, [&] { fill_kernel<<<1, 32, 0, stream_->get()>>>(x, 1.0F, 1); });
  std::string const path = ::testing::TempDir() + "graphstep_capture_test.dot";
  g.write_dot(path, true);
  std::ifstream in{path};
  std::string const text{std::istreambuf_iterator<char>{in}, {}};
  EXPECT_NE(text.find("digraph"), std::string::npos);
}

TEST_F(capture_test, many_replays_do_not_grow_device_or_host_memory) {
  int const n = 256;
  float* x = blocks_->get(n);
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(x, 0, sizeof(float) * n, stream_->get()));  // not zero yet
  gs::graphs::graph_exec g;
  gs::graphs::capture(g, *stream_, *pool_, [&] {
    float* scratch = static_cast<float*>(pool_->allocate(sizeof(float) * n, *stream_));
    fill_kernel<<<1, 256, 0, stream_->get()>>>(scratch, 1.0F, n);
    axpy_kernel<<<1, 256, 0, stream_->get()>>>(x, scratch, 1.0F, n);
    pool_->deallocate(scratch, *stream_);
  });
  for (int i = 0; i < 1000; ++i) g.replay(*stream_);  // settle lazy allocations
  stream_->synchronize();
  std::size_t free_before = 0;
  std::size_t total = 0;
  GRAPHSTEP_CUDA_TRY(cudaMemGetInfo(&free_before, &total));
  long const pages_before = gs::testing::resident_pages();
  for (int i = 0; i < 100000; ++i) g.replay(*stream_);
  stream_->synchronize();
  std::size_t free_after = 0;
  GRAPHSTEP_CUDA_TRY(cudaMemGetInfo(&free_after, &total));
  EXPECT_EQ(free_after, free_before);
  EXPECT_LE(gs::testing::resident_pages() - pages_before, 64)
      << "host memory grew by more than 64 pages";
  EXPECT_EQ(download(x, 1)[0], 101000.0F);
}
