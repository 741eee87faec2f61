// Failed captures leak nothing, and separate threads capture and replay their own graphs at
// the same time.

#include <future>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device_buffer.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/graphs/capture_mode.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/gpu_test.hpp"
#include "common/process_memory.hpp"

namespace gs = graphstep;
using gs::testing::resident_pages;

namespace {

__global__ void add_kernel(float* x, float value, int n) {
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += value;
}

class threads_test : public gs::testing::gpu_test {};

}  // namespace

TEST_F(threads_test, failed_captures_in_a_loop_leak_nothing) {
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  auto fail_once = [&](int i) {
    gs::graphs::graph_exec g;
    try {
      gs::graphs::capture(g, stream, pool, [&] {
        auto* x = static_cast<float*>(pool.allocate(std::size_t{1} << 20, stream));
        add_kernel<<<1, 32, 0, stream.get()>>>(x, 1.0F, 32);
        if (i % 2 == 0) throw std::runtime_error{"user code failed"};
        static_cast<void>(cudaStreamSynchronize(stream.get()));  // invalidates the capture
      });
    } catch (std::exception const&) {
    }
    EXPECT_TRUE(g.empty());
  };
  for (int i = 0; i < 50; ++i) fail_once(i);  // settle lazy allocations
  std::size_t free_before = 0;
  std::size_t total = 0;
  GRAPHSTEP_CUDA_TRY(cudaMemGetInfo(&free_before, &total));
  auto const in_use = pool.statistics().bytes_in_use;
  auto const mapped = pool.statistics().mapped_bytes;
  long const pages = resident_pages();
  for (int i = 0; i < 2000; ++i) fail_once(i);
  std::size_t free_after = 0;
  GRAPHSTEP_CUDA_TRY(cudaMemGetInfo(&free_after, &total));
  EXPECT_EQ(free_after, free_before);
  EXPECT_EQ(pool.statistics().bytes_in_use, in_use);
  EXPECT_EQ(pool.statistics().mapped_bytes, mapped);
  EXPECT_LE(resident_pages() - pages, 64);
  EXPECT_FALSE(gs::cuda::stream_view{stream}.is_capturing());
}

TEST_F(threads_test, threads_capture_and_replay_their_own_graphs_concurrently) {
  int const n = 1 << 16;
  auto worker = [&](float value, float* result) {
    gs::cuda::stream stream;
    gs::memory::memory_pool pool;
    auto* x = static_cast<float*>(pool.allocate(sizeof(float) * n, stream));
    GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(x, 0, sizeof(float) * n, stream.get()));
    gs::graphs::graph_exec g;
    for (int attempt = 0; attempt < 20; ++attempt) {
      gs::graphs::graph_exec fresh;
      gs::graphs::capture(fresh, stream, pool, [&] {
        add_kernel<<<(n + 255) / 256, 256, 0, stream.get()>>>(x, value, n);
      });  // this_thread mode: the other thread's calls do not break it
      g = std::move(fresh);
    }
    for (int i = 0; i < 500; ++i) g.replay(stream);
    GRAPHSTEP_CUDA_TRY(
        cudaMemcpyAsync(result, x + n - 1, sizeof(float), cudaMemcpyDeviceToHost, stream.get()));
    stream.synchronize();
    pool.deallocate(x, stream);
  };
  float first = 0.0F;
  float second = 0.0F;
  std::thread a{worker, 1.0F, &first};
  std::thread b{worker, 2.0F, &second};
  a.join();
  b.join();
  EXPECT_EQ(first, 500.0F);
  EXPECT_EQ(second, 1000.0F);
}

namespace {

// One thread holds a capture open while the test tears things down on another.
class capture_on_another_thread {
 public:
  capture_on_another_thread(gs::graphs::capture_mode mode, float* x, int n)
      : worker_{[this, mode, x, n] { run(mode, x, n); }} {
    began_.get_future().wait();
  }
  capture_on_another_thread(capture_on_another_thread const&) = delete;
  capture_on_another_thread& operator=(capture_on_another_thread const&) = delete;
  capture_on_another_thread(capture_on_another_thread&&) = delete;
  capture_on_another_thread& operator=(capture_on_another_thread&&) = delete;
  ~capture_on_another_thread() {
    if (worker_.joinable()) finish();
  }

  // Lets the capture issue its kernel and end; returns what ending it threw, or "".
  std::string finish() {
    may_end_.set_value();
    worker_.join();
    return failure_;
  }
  gs::graphs::graph_exec& graph() { return graph_; }
  gs::cuda::stream& stream() { return stream_; }

 private:
  void run(gs::graphs::capture_mode mode, float* x, int n) {
    gs::graphs::capture_options options;
    options.mode = mode;
    options.name = "held open";
    bool began = false;
    try {
      gs::graphs::capture_scope scope{graph_, stream_, options};
      began = true;
      began_.set_value();
      may_end_.get_future().wait();
      add_kernel<<<(n + 255) / 256, 256, 0, stream_.get()>>>(x, 1.0F, n);
      scope.end();
    } catch (std::exception const& e) {
      failure_ = e.what();
      if (!began) began_.set_value();
    }
  }

  gs::cuda::stream stream_;
  gs::graphs::graph_exec graph_;
  std::promise<void> began_;
  std::promise<void> may_end_;
  std::string failure_;
  std::thread worker_;
};

// A capture begun with the CUDA API itself, which graphstep cannot see, held open on a thread
// of its own while the test tears things down on another.
class raw_capture_on_another_thread {
 public:
  raw_capture_on_another_thread(cudaStreamCaptureMode mode, float* x, int n)
      : worker_{[this, mode, x, n] { run(mode, x, n); }} {
    began_.get_future().wait();
  }
  raw_capture_on_another_thread(raw_capture_on_another_thread const&) = delete;
  raw_capture_on_another_thread& operator=(raw_capture_on_another_thread const&) = delete;
  raw_capture_on_another_thread(raw_capture_on_another_thread&&) = delete;
  raw_capture_on_another_thread& operator=(raw_capture_on_another_thread&&) = delete;
  ~raw_capture_on_another_thread() {
    if (worker_.joinable()) finish();
  }

  // Lets the capture issue its kernel and end; returns the name of what ending it returned.
  std::string finish() {
    may_end_.set_value();
    worker_.join();
    return cudaGetErrorName(ended_);
  }

 private:
  void run(cudaStreamCaptureMode mode, float* x, int n) {
    ended_ = cudaStreamBeginCapture(stream_.get(), mode);
    began_.set_value();
    if (ended_ != cudaSuccess) return;
    may_end_.get_future().wait();
    add_kernel<<<(n + 255) / 256, 256, 0, stream_.get()>>>(x, 1.0F, n);
    cudaGraph_t graph = nullptr;
    ended_ = cudaStreamEndCapture(stream_.get(), &graph);
    if (graph != nullptr) static_cast<void>(cudaGraphDestroy(graph));
  }

  gs::cuda::stream stream_;
  std::promise<void> began_;
  std::promise<void> may_end_;
  cudaError_t ended_{cudaSuccess};
  std::thread worker_;
};

class teardown_during_capture_test
    : public gs::testing::gpu_test,
      public ::testing::WithParamInterface<gs::graphs::capture_mode> {};

}  // namespace

// A device-wide wait (cudaDeviceSynchronize) breaks every capture under way on the device, and
// a host wait breaks another thread's Global-mode capture: graphstep's own teardown must do
// neither, whatever the mode of the capture under way.
TEST_P(teardown_during_capture_test, tearing_down_leaves_another_threads_capture_intact) {
  int const n = 1024;
  gs::cuda::stream stream;
  gs::memory::memory_pool kept_pool;
  auto* x = static_cast<float*>(kept_pool.allocate(sizeof(float) * n, stream));
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(x, 0, sizeof(float) * n, stream.get()));
  stream.synchronize();

  auto pool = std::make_unique<gs::memory::memory_pool>();
  auto replayed = std::make_unique<gs::graphs::graph_exec>();
  gs::graphs::capture(*replayed, stream, *pool, [&] {
    auto* y = static_cast<float*>(pool->allocate(sizeof(float) * n, stream));
    GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(y, 0, sizeof(float) * n, stream.get()));
  });
  replayed->replay(stream);
  auto buffer = std::make_unique<gs::cuda::device_buffer>(gs::tensor_spec{{n}, gs::dtype::float32},
                                                          stream, kept_pool);
  auto const in_use_with_buffer = kept_pool.statistics().bytes_in_use;
  void* held_block = pool->allocate(sizeof(float) * n, stream);  // never given back
  static_cast<void>(held_block);

  capture_on_another_thread capture{GetParam(), x, n};
  replayed.reset();  // waits for its replay
  buffer.reset();    // its block goes back to the pool in stream order
  ::testing::internal::CaptureStderr();
  pool.reset();  // a block still held: its memory stays mapped, and the pool says so
  std::string const said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(capture.finish(), "");
  EXPECT_NE(said.find("4096 bytes never deallocated"), std::string::npos) << said;

  EXPECT_LT(kept_pool.statistics().bytes_in_use, in_use_with_buffer);
  ASSERT_FALSE(capture.graph().empty());
  capture.graph().replay(capture.stream());
  float last = 0.0F;
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(&last, x + n - 1, sizeof(float), cudaMemcpyDeviceToHost,
                                     capture.stream().get()));
  capture.stream().synchronize();
  EXPECT_EQ(last, 1.0F);
  kept_pool.deallocate(x, stream);
}

// graphstep's teardown waits on events, never on the device: a device-wide wait would break a
// capture begun with the CUDA API, which graphstep cannot see and so cannot wait for.
TEST_P(teardown_during_capture_test, tearing_down_leaves_a_capture_made_with_the_cuda_api_intact) {
  int const n = 1024;
  gs::cuda::stream stream;
  gs::cuda::stream other;
  gs::memory::memory_pool kept_pool;
  auto* x = static_cast<float*>(kept_pool.allocate(sizeof(float) * n, stream));
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(x, 0, sizeof(float) * n, stream.get()));
  stream.synchronize();

  auto pool = std::make_unique<gs::memory::memory_pool>();
  void* held_block = pool->allocate(sizeof(float) * n, stream);  // never given back
  static_cast<void>(held_block);
  auto buffer = std::make_unique<gs::cuda::device_buffer>(gs::tensor_spec{{n}, gs::dtype::float32},
                                                          stream, kept_pool);
  buffer->copy_from_device({x, gs::dtype::float32, static_cast<std::size_t>(n)}, other);
  auto const in_use_with_buffer = kept_pool.statistics().bytes_in_use;

  raw_capture_on_another_thread capture{GetParam() == gs::graphs::capture_mode::global
                                            ? cudaStreamCaptureModeGlobal
                                            : cudaStreamCaptureModeThreadLocal,
                                        x, n};
  buffer.reset();  // back to the pool on `stream`, after the copy on `other`
  ::testing::internal::CaptureStderr();
  pool.reset();  // a block still held: its memory stays mapped, and the pool says so
  std::string const said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(capture.finish(), "cudaSuccess");
  EXPECT_NE(said.find("4096 bytes never deallocated"), std::string::npos) << said;
  EXPECT_LT(kept_pool.statistics().bytes_in_use, in_use_with_buffer);
  kept_pool.deallocate(x, stream);
}

// Instantiating an executable graph is as "potentially unsafe" as a free: under another thread's
// Global capture it fails and breaks that capture unless made in Relaxed mode (an H100 with
// CUDA 13.0, docs/validation.md). graphstep instantiates Relaxed, whatever the capture under way.
TEST_P(teardown_during_capture_test, instantiating_leaves_another_threads_capture_intact) {
  int const n = 1024;
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  auto* x = static_cast<float*>(pool.allocate(sizeof(float) * n, stream));
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(x, 0, sizeof(float) * n, stream.get()));
  stream.synchronize();
  gs::graphs::graph_exec first;
  gs::graphs::capture(first, stream,
                      [&] { add_kernel<<<(n + 255) / 256, 256, 0, stream.get()>>>(x, 2.0F, n); });

  capture_on_another_thread capture{GetParam(), x, n};
  gs::graphs::graph_exec second = first.source().instantiate();
  EXPECT_EQ(capture.finish(), "");
  ASSERT_FALSE(capture.graph().empty());
  second.replay(stream);
  stream.synchronize();
  pool.deallocate(x, stream);
}

// cudaMallocAsync and cudaFreeAsync are as "potentially unsafe" as cudaMalloc and cudaFree
// beside another thread's Global capture (an H100 with CUDA 13.0, docs/validation.md):
// `cuda::device_buffer`s from the default resource (optimizer state, the loss scaler, step
// inputs, verify_replay's copies) are made and destroyed while a trainer's other thread captures.
TEST_P(teardown_during_capture_test, device_buffers_come_and_go_beside_another_threads_capture) {
  int const n = 1024;
  gs::cuda::stream stream;
  gs::cuda::device_buffer x{sizeof(float) * n, stream};
  auto* values = static_cast<float*>(x.data());
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(values, 0, sizeof(float) * n, stream.get()));
  auto doomed = std::make_unique<gs::cuda::device_buffer>(std::size_t{4096}, stream);
  stream.synchronize();

  capture_on_another_thread capture{GetParam(), values, n};
  gs::cuda::device_buffer const born{std::size_t{4096}, stream};
  doomed.reset();
  EXPECT_EQ(capture.finish(), "");
  ASSERT_FALSE(capture.graph().empty());
  capture.graph().replay(capture.stream());
  float last = 0.0F;
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(&last, values + n - 1, sizeof(float), cudaMemcpyDeviceToHost,
                                     capture.stream().get()));
  capture.stream().synchronize();
  EXPECT_EQ(last, 1.0F);
}

INSTANTIATE_TEST_SUITE_P(modes, teardown_during_capture_test,
                         ::testing::Values(gs::graphs::capture_mode::global,
                                           gs::graphs::capture_mode::this_thread),
                         [](auto const& info) {
                           return info.param == gs::graphs::capture_mode::global
                                      ? std::string{"global"}
                                      : std::string{"this_thread"};
                         });
