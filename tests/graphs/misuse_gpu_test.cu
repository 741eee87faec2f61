// Misuse that users of CUDA graphs run into, provoked on purpose: each ends in a clear error or
// in documented, correct behaviour.

#include <cublasLt.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device.hpp>
#include <graphstep/cuda/event.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_mode.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/log.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/cublaslt_multiply.hpp"
#include "common/error_message.hpp"
#include "common/gpu_test.hpp"

namespace gs = graphstep;

namespace {

__global__ void increment_kernel(float* x) {
  *x += 1.0F;
}

class misuse_test : public gs::testing::gpu_test {};

float read(float const* device) {
  float value = 0.0F;
  GRAPHSTEP_CUDA_TRY(cudaMemcpy(&value, device, sizeof value, cudaMemcpyDeviceToHost));
  return value;
}

// Three device floats: A = 2, B = 3, D = 0.
class library_capture_test : public misuse_test {
 protected:
  void SetUp() override {
    misuse_test::SetUp();
    if (IsSkipped()) return;
    ASSERT_EQ(cublasLtCreate(&handle_), CUBLAS_STATUS_SUCCESS);
    GRAPHSTEP_CUDA_TRY(cudaMalloc(&values_, 3 * sizeof(float)));
    float const initial[3] = {2.0F, 3.0F, 0.0F};
    gs::testing::copy_to_device(values_, initial, sizeof initial);
  }
  void TearDown() override {
    if (values_ != nullptr) static_cast<void>(cudaFree(values_));
    if (handle_ != nullptr) static_cast<void>(cublasLtDestroy(handle_));
  }
  cublasStatus_t multiply_on(cudaStream_t stream) {
    return gs::testing::multiply_1x1(handle_, values_ + 2, values_, values_ + 1, stream);
  }
  float product() const { return read(values_ + 2); }

  cublasLtHandle_t handle_{};
  float* values_{};
};

// Collects the errors graphstep logs while it lives.
class logged_errors {
 public:
  logged_errors()
      : previous_{gs::set_log_sink([this](gs::log_level level, std::string_view message) {
          std::lock_guard const lock{mutex_};
          if (level == gs::log_level::error) messages_.emplace_back(message);
        })} {}
  ~logged_errors() { static_cast<void>(gs::set_log_sink(std::move(previous_))); }
  logged_errors(logged_errors const&) = delete;
  logged_errors& operator=(logged_errors const&) = delete;
  logged_errors(logged_errors&&) = delete;
  logged_errors& operator=(logged_errors&&) = delete;

  std::string all() {
    std::lock_guard const lock{mutex_};
    std::string text;
    for (std::string const& message : messages_) text += message + '\n';
    return text;
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> messages_;
  gs::log_sink previous_;
};

}  // namespace

TEST_F(library_capture_test, a_library_call_that_breaks_the_capture_is_named_with_its_cuda_call) {
  gs::cuda::stream stream;
  gs::graphs::graph_exec g;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  std::string const message = gs::testing::message_of<gs::capture_error>([&] {
    gs::graphs::capture(g, stream, [&] { status = multiply_on(nullptr); },
                        {gs::graphs::capture_mode::this_thread, "step"});
  });
  EXPECT_NE(message.find("capture 'step'"), std::string::npos) << message;
  if (gs::testing::simulated_device) {
    EXPECT_EQ(status, CUBLAS_STATUS_EXECUTION_FAILED);
    EXPECT_NE(message.find("cudaLaunchKernel, made inside cublasLtMatmul, broke it: the library "
                           "issued its work to the legacy default stream"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("Give it the capturing stream"), std::string::npos) << message;
  } else {
    // Only CUPTI's callbacks see which call broke it on a GPU: the error says how to ask.
    EXPECT_NE(message.find("GRAPHSTEP_CAPTURE_DIAGNOSTICS=1"), std::string::npos) << message;
  }
  // The fix the error names works: the same call given the capturing stream.
  gs::graphs::capture(g, stream,
                      [&] { ASSERT_EQ(multiply_on(stream.get()), CUBLAS_STATUS_SUCCESS); });
  g.replay(stream);
  stream.synchronize();
  EXPECT_EQ(product(), 6.0F);
}

TEST_F(library_capture_test, a_plain_cuda_call_that_breaks_the_capture_is_named_without_a_library) {
  gs::cuda::stream stream;
  gs::graphs::graph_exec g;
  std::string const message = gs::testing::message_of<gs::capture_error>([&] {
    gs::graphs::capture(g, stream, [&] {
      ASSERT_EQ(multiply_on(stream.get()), CUBLAS_STATUS_SUCCESS);
      static_cast<void>(cudaStreamSynchronize(stream.get()));
    });
  });
  if (gs::testing::simulated_device) {
    EXPECT_NE(message.find("cudaStreamSynchronize broke it: a call inside the scope cannot be "
                           "captured"),
              std::string::npos)
        << message;
    EXPECT_EQ(message.find("made inside"), std::string::npos) << message;
  }
}

TEST_F(library_capture_test,
       a_library_status_thrown_inside_the_capture_logs_the_call_that_broke_it) {
  gs::cuda::stream stream;
  gs::graphs::graph_exec g;
  logged_errors errors;
  // A trainer's own check, throwing on a library's status.
  EXPECT_THROW(gs::graphs::capture(g, stream,
                                   [&] {
                                     if (multiply_on(nullptr) != CUBLAS_STATUS_SUCCESS) {
                                       throw std::runtime_error{"cuBLAS error 13"};
                                     }
                                   }),
               std::runtime_error);
  EXPECT_TRUE(g.empty());
  EXPECT_FALSE(gs::cuda::stream_view{stream}.is_capturing());
  if (gs::testing::simulated_device) {
    std::string const logged = errors.all();
    EXPECT_NE(logged.find("was broken before the code inside it threw: cudaLaunchKernel, made "
                          "inside cublasLtMatmul, broke it"),
              std::string::npos)
        << logged;
  }
  // A body that throws for its own reasons, with the capture intact, logs nothing.
  gs::graphs::graph_exec other;
  std::string const before = errors.all();
  EXPECT_THROW(gs::graphs::capture(other, stream, [] { throw std::runtime_error{"unrelated"}; }),
               std::runtime_error);
  EXPECT_EQ(errors.all(), before);
}

// A C trainer checks a library's status with exit(), from inside the capture: the process's
// last words name the scope and, where known, the call that broke it and the fix.
TEST_F(library_capture_test, a_process_exiting_inside_a_broken_capture_says_which_call_broke_it) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  char const* const expected =
      gs::testing::simulated_device
          ? "capture 'step' on stream .* was still open when the process exited; "
            "cudaLaunchKernel, made inside cublasLtMatmul, broke it: the library issued its "
            "work to the legacy default stream"
          : "capture 'step' on stream .* was still open when the process exited. If a call "
            "inside it failed, run with GRAPHSTEP_CAPTURE_DIAGNOSTICS=1";
  auto const exit_inside_a_broken_capture = [this] {
    gs::cuda::stream stream;
    gs::graphs::graph_exec g;
    gs::graphs::capture_scope scope{g, stream, {gs::graphs::capture_mode::this_thread, "step"}};
    if (multiply_on(nullptr) != CUBLAS_STATUS_SUCCESS) {
      std::fprintf(stderr, "[cuBLAS ERROR]: 13\n");
      std::exit(EXIT_FAILURE);
    }
    std::exit(0);
  };
  EXPECT_EXIT(exit_inside_a_broken_capture(), ::testing::ExitedWithCode(EXIT_FAILURE), expected);
}

TEST_F(misuse_test, one_graph_replayed_on_two_streams_runs_one_replay_at_a_time) {
  gs::cuda::stream a;
  gs::cuda::stream b;
  float* x = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaMalloc(&x, sizeof(float)));
  // Cleared before either stream replays: cudaMemset alone runs on the legacy stream, which
  // non-blocking streams do not wait for.
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(x, 0, sizeof(float), a.get()));
  a.synchronize();
  gs::graphs::graph_exec g;
  gs::graphs::capture(g, a, [&] {
    for (int i = 0; i < 50; ++i) increment_kernel<<<1, 1, 0, a.get()>>>(x);
  });
  for (int i = 0; i < 100; ++i) g.replay(i % 2 ? a : b);  // CUDA orders launches of one graph
  GRAPHSTEP_CUDA_TRY(cudaDeviceSynchronize());
  EXPECT_EQ(read(x), 5000.0F);
  GRAPHSTEP_CUDA_TRY(cudaFree(x));
}

TEST_F(misuse_test, another_threads_unsafe_call_breaks_a_global_capture_only) {
  gs::cuda::stream stream;
  float* x = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaMalloc(&x, sizeof(float)));
  for (auto mode : {gs::graphs::capture_mode::global, gs::graphs::capture_mode::this_thread}) {
    gs::graphs::graph_exec g;
    auto const attempt = [&] {
      gs::graphs::capture(g, stream,
                          [&] {
                            increment_kernel<<<1, 1, 0, stream.get()>>>(x);
                            // A background thread (a logger, a watchdog) allocates while the
                            // capture runs.
                            std::thread other{[] {
                              void* p = nullptr;
                              if (cudaMalloc(&p, 256) == cudaSuccess)
                                static_cast<void>(cudaFree(p));
                              static_cast<void>(cudaGetLastError());
                            }};
                            other.join();
                          },
                          {mode, "background thread"});
    };
    if (mode == gs::graphs::capture_mode::global) {
      EXPECT_THROW(attempt(), gs::capture_error);
      EXPECT_TRUE(g.empty());
    } else {
      EXPECT_NO_THROW(attempt());
      EXPECT_FALSE(g.empty());
    }
  }
  GRAPHSTEP_CUDA_TRY(cudaFree(x));
}

TEST_F(misuse_test, replaying_on_another_device_is_a_usage_error) {
  if (gs::cuda::device_count() < 2) GTEST_SKIP() << "needs 2 GPUs";
  float* x = nullptr;
  gs::graphs::graph_exec g;
  {
    gs::cuda::device_guard const on{0};
    gs::cuda::stream stream;
    GRAPHSTEP_CUDA_TRY(cudaMalloc(&x, sizeof(float)));
    gs::graphs::capture(g, stream, [&] { increment_kernel<<<1, 1, 0, stream.get()>>>(x); });
  }
  gs::cuda::device_guard const on{1};
  gs::cuda::stream other;
  EXPECT_THROW(g.replay(other), gs::usage_error);
  gs::cuda::device_guard const back{0};
  GRAPHSTEP_CUDA_TRY(cudaFree(x));
}

// The current device is the graph's, but the stream is another device's: CUDA would refuse the
// launch with a bare cudaErrorInvalidValue.
TEST_F(misuse_test, replaying_on_a_stream_of_another_device_names_both_devices) {
  if (gs::cuda::device_count() < 2) GTEST_SKIP() << "needs 2 GPUs";
  gs::cuda::device_guard const on_first{0};
  gs::cuda::stream stream;
  float* x = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaMalloc(&x, sizeof(float)));
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(x, 0, sizeof(float), stream.get()));
  gs::graphs::graph_exec g;
  gs::graphs::capture(g, stream, [&] { increment_kernel<<<1, 1, 0, stream.get()>>>(x); });
  std::optional<gs::cuda::stream> second_devices;
  {
    gs::cuda::device_guard const on_second{1};
    second_devices.emplace();
  }
  std::string const message = gs::testing::message_of([&] { g.replay(*second_devices); });
  EXPECT_NE(message.find("captured on device 0, the stream belongs to device 1: replay on a "
                         "stream of device 0"),
            std::string::npos)
      << message;
  EXPECT_EQ(g.replay_count(), 0U);
  g.replay(stream);  // the refusal left the graph and the device usable
  stream.synchronize();
  EXPECT_EQ(read(x), 1.0F);
  GRAPHSTEP_CUDA_TRY(cudaFree(x));
}

TEST_F(misuse_test, a_sync_by_a_library_inside_the_capture_names_the_scope) {
  gs::cuda::stream stream;
  gs::graphs::graph_exec g;
  try {
    gs::graphs::capture(
        g, stream,
        [&] {
          static_cast<void>(cudaDeviceSynchronize());  // what some libraries do internally
        },
        {gs::graphs::capture_mode::this_thread, "library call"});
    FAIL() << "no exception";
  } catch (gs::capture_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("capture 'library call'"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(gs::cuda::stream_view{stream}.is_capturing());
}

TEST_F(misuse_test, reading_an_output_after_the_next_replay_is_caught) {
  gs::cuda::stream stream;
  float* x = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaMalloc(&x, sizeof(float)));
  gs::graphs::graph_exec g;
  gs::graphs::capture(g, stream, [&] { increment_kernel<<<1, 1, 0, stream.get()>>>(x); });
  g.replay(stream);
  auto const guard = g.guard_output("x");
  EXPECT_NO_THROW(guard.check());
  g.replay(stream);
  EXPECT_THROW(guard.check(), gs::usage_error);
  gs::graphs::graph_exec moved = std::move(g);
  auto const after_move = moved.guard_output("x");
  moved.replay(stream);
  EXPECT_FALSE(after_move.valid()) << "the count moves with the graph";
  stream.synchronize();
  GRAPHSTEP_CUDA_TRY(cudaFree(x));
}

// CUDA's rule: while a stream created without cudaStreamNonBlocking is captured, any use of the
// legacy default stream would depend on the capture, so the call fails and breaks the capture.
TEST_F(misuse_test, legacy_stream_work_breaks_the_capture_of_a_blocking_stream) {
  cudaStream_t blocking = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaStreamCreate(&blocking));
  float* x = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaMalloc(&x, sizeof(float)));
  gs::graphs::graph_exec g;
  cudaError_t legacy_launch = cudaSuccess;
  EXPECT_THROW(gs::graphs::capture(g, blocking,
                                   [&] {
                                     increment_kernel<<<1, 1, 0, blocking>>>(x);
                                     increment_kernel<<<1, 1, 0, cudaStreamLegacy>>>(x);
                                     legacy_launch = cudaGetLastError();
                                   },
                                   {gs::graphs::capture_mode::this_thread, "legacy stream"}),
               gs::capture_error);
  EXPECT_EQ(legacy_launch, cudaErrorStreamCaptureImplicit) << cudaGetErrorName(legacy_launch);
  EXPECT_TRUE(g.empty());
  EXPECT_FALSE(gs::cuda::stream_view{blocking}.is_capturing());
  GRAPHSTEP_CUDA_TRY(cudaFree(x));
  GRAPHSTEP_CUDA_TRY(cudaStreamDestroy(blocking));
}

// The trap of a trainer's step captured on a graphstep (non-blocking) stream: a cudaMemset
// without a stream inside the scope. CUDA alone runs it once, at once, and every replay leaves
// the buffer as the last replay did; graphstep refuses it by default, saying where to issue it.
TEST_F(misuse_test, a_legacy_stream_memset_inside_the_capture_of_a_graphstep_stream_is_refused) {
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  auto* accumulated = static_cast<float*>(pool.allocate(sizeof(float), stream));
  gs::graphs::graph_exec step;
  cudaError_t zeroed = cudaSuccess;
  auto const zero_then_add = [&] {
    zeroed = cudaMemset(accumulated, 0, sizeof(float));  // the legacy stream, not `stream`
    increment_kernel<<<1, 1, 0, stream.get()>>>(accumulated);
  };
  std::string message;
  try {
    gs::graphs::capture(step, stream, pool, zero_then_add, {{}, "zero then add"});
  } catch (gs::capture_error const& e) {
    message = e.what();
  }
  EXPECT_EQ(zeroed, cudaErrorStreamCaptureImplicit) << cudaGetErrorName(zeroed);
  EXPECT_NE(message.find("legacy default stream"), std::string::npos) << message;
  EXPECT_NE(message.find("Issue"), std::string::npos) << message;
  EXPECT_TRUE(step.empty());
  EXPECT_FALSE(gs::cuda::stream_view{stream}.is_capturing());

  // Issued to the captured stream, the zeroing is part of every replay.
  gs::graphs::capture(step, stream, pool, [&] {
    GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(accumulated, 0, sizeof(float), stream.get()));
    increment_kernel<<<1, 1, 0, stream.get()>>>(accumulated);
  });
  for (int i = 0; i < 3; ++i) step.replay(stream);
  stream.synchronize();
  EXPECT_EQ(read(accumulated), 1.0F);
  pool.deallocate(accumulated, stream);
}

TEST_F(misuse_test, waiting_on_an_event_recorded_outside_the_capture_breaks_it) {
  gs::cuda::stream stream;
  gs::cuda::stream producer;
  gs::cuda::event outside;
  outside.record(producer);  // before the capture, on another stream
  gs::graphs::graph_exec g;
  cudaError_t wait = cudaSuccess;
  EXPECT_THROW(gs::graphs::capture(
                   g, stream, [&] { wait = cudaStreamWaitEvent(stream.get(), outside.get(), 0); },
                   {gs::graphs::capture_mode::this_thread, "outside event"}),
               gs::capture_error);
  EXPECT_EQ(wait, cudaErrorStreamCaptureIsolation) << cudaGetErrorName(wait);
  EXPECT_TRUE(g.empty());
  EXPECT_FALSE(gs::cuda::stream_view{stream}.is_capturing());
}

// end() on another thread is refused before CUDA sees it, and the capture stays open for the
// thread that began it.
TEST_F(misuse_test, ending_a_capture_on_another_thread_is_a_usage_error_and_the_capture_goes_on) {
  gs::cuda::stream stream;
  float* x = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaMalloc(&x, sizeof(float)));
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(x, 0, sizeof(float), stream.get()));
  gs::graphs::graph_exec g;
  gs::graphs::capture_scope scope{
      g, stream, {gs::graphs::capture_mode::this_thread, "ended elsewhere"}};
  increment_kernel<<<1, 1, 0, stream.get()>>>(x);
  std::string refused;
  std::thread other{[&] { refused = gs::testing::message_of([&] { scope.end(); }); }};
  other.join();
  EXPECT_NE(refused.find("another thread"), std::string::npos) << refused;
  EXPECT_TRUE(gs::cuda::stream_view{stream}.is_capturing());
  scope.end();
  g.replay(stream);
  g.replay(stream);
  stream.synchronize();
  EXPECT_EQ(read(x), 2.0F);
  GRAPHSTEP_CUDA_TRY(cudaFree(x));
}

// The same rule across threads: another thread's legacy-stream launch breaks a global-mode
// capture of a blocking stream. A non-blocking stream (graphstep::cuda::stream) alone is not
// affected, and the other thread's work runs at once, outside the graph; graphstep refuses it by
// default (refuse_legacy_stream), which only turning that off allows.
TEST_F(misuse_test, another_threads_legacy_stream_work_breaks_only_a_blocking_capture) {
  cudaStream_t blocking = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaStreamCreate(&blocking));
  gs::cuda::stream non_blocking;
  float* x = nullptr;
  float* y = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaMalloc(&x, sizeof(float)));
  GRAPHSTEP_CUDA_TRY(cudaMalloc(&y, sizeof(float)));
  GRAPHSTEP_CUDA_TRY(cudaMemset(y, 0, sizeof(float)));
  auto const legacy_launch_from_another_thread = [y] {
    cudaError_t launched = cudaSuccess;
    std::thread other{[&] {
      increment_kernel<<<1, 1, 0, cudaStreamLegacy>>>(y);
      launched = cudaGetLastError();
    }};
    other.join();
    return launched;
  };
  struct attempt_kind {
    cudaStream_t captured;
    bool refuse_legacy_stream;
  };
  for (attempt_kind const kind :
       {attempt_kind{blocking, false}, attempt_kind{non_blocking.get(), true},
        attempt_kind{non_blocking.get(), false}}) {
    // Named copies: a lambda may not capture a structured binding before C++20.
    cudaStream_t const captured = kind.captured;
    bool const refuse = kind.refuse_legacy_stream;
    gs::graphs::graph_exec g;
    cudaError_t launched = cudaSuccess;
    gs::graphs::capture_options options{gs::graphs::capture_mode::global,
                                        "legacy stream from another thread"};
    options.refuse_legacy_stream = refuse;
    auto const attempt = [&] {
      gs::graphs::capture(
          g, captured,
          [&] {
            increment_kernel<<<1, 1, 0, captured>>>(x);
            launched = legacy_launch_from_another_thread();
          },
          options);
    };
    if (captured == blocking || refuse) {
      EXPECT_THROW(attempt(), gs::capture_error);
      EXPECT_EQ(launched, cudaErrorStreamCaptureImplicit) << cudaGetErrorName(launched);
      EXPECT_TRUE(g.empty());
    } else {
      EXPECT_NO_THROW(attempt());
      EXPECT_EQ(launched, cudaSuccess) << cudaGetErrorName(launched);
      EXPECT_FALSE(g.empty());
    }
    EXPECT_FALSE(gs::cuda::stream_view{captured}.is_capturing());
  }
  GRAPHSTEP_CUDA_TRY(cudaDeviceSynchronize());
  EXPECT_EQ(read(y), 1.0F) << "only the launch beside the non-blocking capture ran, once";
  GRAPHSTEP_CUDA_TRY(cudaFree(x));
  GRAPHSTEP_CUDA_TRY(cudaFree(y));
  GRAPHSTEP_CUDA_TRY(cudaStreamDestroy(blocking));
}
