// Capture diagnostics on a GPU: CUPTI records the calls made while capturing, and a failed
// capture names the call that broke it and the function of the test that made it.

#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_mode.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/capture_trace.hpp>
#include <graphstep/graphs/graph_exec.hpp>

#include "common/cublaslt_multiply.hpp"
#include "common/gpu_test.hpp"

#if defined(GRAPHSTEP_WITH_CUPTI)

#include <cublasLt.h>
#include <cupti.h>
#include <dlfcn.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace gs = graphstep;
namespace gd = graphstep::graphs;

// The "user code" of these tests: exported (the test binaries link with -rdynamic) and not
// inlined, so that each is a frame the diagnosis can name.
__attribute__((noinline)) void diagnostics_test_synchronizes(cudaStream_t stream) {
  static_cast<void>(cudaStreamSynchronize(stream));
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void diagnostics_test_allocates() {
  void* p = nullptr;
  if (cudaMalloc(&p, 256) == cudaSuccess) static_cast<void>(cudaFree(p));
  static_cast<void>(cudaGetLastError());
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void diagnostics_test_uses_the_legacy_stream(float* x) {
  static_cast<void>(cudaMemsetAsync(x, 0, sizeof(float), nullptr));
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void diagnostics_test_copies_pageable(float* x, float const* host,
                                                                cudaStream_t stream) {
  static_cast<void>(cudaMemcpyAsync(x, host, sizeof(float), cudaMemcpyHostToDevice, stream));
  asm volatile("" ::: "memory");
}

// D = A·B of 1×1 fp32 matrices through cuBLASLt, on the legacy stream (a port that forgot to
// pass its stream).
__attribute__((noinline)) cublasStatus_t diagnostics_test_multiplies_on_the_legacy_stream(
    cublasLtHandle_t handle, float* d, float const* a, float const* b) {
  cublasStatus_t const status = graphstep::testing::multiply_1x1(handle, d, a, b, nullptr);
  asm volatile("" ::: "memory");
  return status;
}

namespace {

__global__ void add_one_kernel(float* x) {
  *x += 1.0F;
}

bool contains(std::string const& text, std::string const& part) {
  return text.find(part) != std::string::npos;
}

class capture_diagnostics_test : public gs::testing::gpu_test {
 protected:
  void SetUp() override {
    gpu_test::SetUp();
    if (IsSkipped()) return;
    GRAPHSTEP_SKIP_ON_SIMULATED_DEVICE(
        "CUPTI",
        "the diagnostics subscribe to CUPTI's callbacks of CUDA calls, which the "
        "simulator does not make");
    if (std::string const reason = gs::graphs::capture_diagnostics_unavailable_reason();
        !reason.empty()) {
      GTEST_SKIP() << reason;
    }
    GRAPHSTEP_CUDA_TRY(cudaMalloc(&x_, sizeof(float)));
    GRAPHSTEP_CUDA_TRY(cudaMemset(x_, 0, sizeof(float)));
  }
  void TearDown() override {
    if (x_ != nullptr) static_cast<void>(cudaFree(x_));
  }

  static gs::graphs::capture_options diagnosed(
      char const* name, gs::graphs::capture_mode mode = gs::graphs::capture_mode::this_thread) {
    gs::graphs::capture_options options;
    options.name = name;
    options.mode = mode;
    options.diagnose = true;
    return options;
  }

  float read() const {
    float value = 0.0F;
    GRAPHSTEP_CUDA_TRY(cudaMemcpy(&value, x_, sizeof value, cudaMemcpyDeviceToHost));
    return value;
  }

  float* x_{};
};

// Captures `body` with diagnostics; returns the capture_error's message, "" when it succeeded.
template <typename Body>
std::string capture_diagnosed(gs::graphs::graph_exec& target, gs::cuda::stream& stream,
                              gs::graphs::capture_options options,
                              std::optional<gd::capture_diagnosis>& diagnosis, Body&& body) {
  gs::graphs::capture_scope scope{target, stream, std::move(options)};
  body();
  std::string message;
  try {
    scope.end();
  } catch (gs::capture_error const& e) {
    message = e.what();
  }
  diagnosis = scope.diagnosis();
  return message;
}

}  // namespace

TEST_F(capture_diagnostics_test, names_the_synchronization_that_broke_a_capture) {
  gs::cuda::stream stream;
  gs::graphs::graph_exec g;
  std::optional<gd::capture_diagnosis> diagnosis;
  std::string const message = capture_diagnosed(g, stream, diagnosed("sync"), diagnosis, [&] {
    add_one_kernel<<<1, 1, 0, stream.get()>>>(x_);
    diagnostics_test_synchronizes(stream.get());
  });
  ASSERT_FALSE(message.empty()) << "the capture should have failed";
  EXPECT_TRUE(contains(message, "broke the capture: `cudaStreamSynchronize`")) << message;
  EXPECT_TRUE(contains(message, "on the capturing stream")) << message;
  EXPECT_TRUE(contains(message, "diagnostics_test_synchronizes")) << message;
  EXPECT_TRUE(contains(message, "<- your code")) << message;
  ASSERT_TRUE(diagnosis && diagnosis->cause);
  EXPECT_TRUE(diagnosis->capture_failed);
  // The stream is usable afterwards, and a later capture without diagnostics works.
  gs::graphs::graph_exec good;
  gs::graphs::capture(good, stream, [&] { add_one_kernel<<<1, 1, 0, stream.get()>>>(x_); });
  good.replay(stream);
  stream.synchronize();
  EXPECT_EQ(read(), 1.0F);
}

TEST_F(capture_diagnostics_test, names_another_threads_allocation_under_global_mode) {
  gs::cuda::stream stream;
  gs::graphs::graph_exec g;
  std::optional<gd::capture_diagnosis> diagnosis;
  std::string const message = capture_diagnosed(
      g, stream, diagnosed("global", gs::graphs::capture_mode::global), diagnosis, [&] {
        add_one_kernel<<<1, 1, 0, stream.get()>>>(x_);
        std::thread other{diagnostics_test_allocates};
        other.join();
      });
  ASSERT_FALSE(message.empty()) << "a cudaMalloc from any thread breaks a global capture";
  EXPECT_TRUE(contains(message, "`cudaMalloc`")) << message;
  EXPECT_TRUE(contains(message, "not the capturing thread")) << message;
  EXPECT_TRUE(contains(message, "diagnostics_test_allocates")) << message;
  ASSERT_TRUE(diagnosis && diagnosis->cause);
  EXPECT_EQ(diagnosis->threads, 2U);
}

TEST_F(capture_diagnostics_test, names_work_issued_to_the_legacy_default_stream) {
  gs::cuda::stream stream;
  gs::graphs::graph_exec g;
  std::optional<gd::capture_diagnosis> diagnosis;
  std::string const message = capture_diagnosed(g, stream, diagnosed("legacy"), diagnosis, [&] {
    add_one_kernel<<<1, 1, 0, stream.get()>>>(x_);
    diagnostics_test_uses_the_legacy_stream(x_);
  });
  ASSERT_TRUE(diagnosis);
  // Whether CUDA refuses the call or runs it outside the graph, the diagnosis names it.
  std::string const finding = diagnosis->cause              ? diagnosis->cause->explanation
                              : diagnosis->warnings.empty() ? std::string{}
                                                            : diagnosis->warnings[0].explanation;
  EXPECT_TRUE(contains(finding, "`cudaMemsetAsync` on the legacy default stream")) << finding;
  if (diagnosis->cause) {
    EXPECT_TRUE(contains(message, "diagnostics_test_uses_the_legacy_stream")) << message;
  } else {
    EXPECT_EQ(diagnosis->warnings[0].kind, gd::finding_kind::legacy_stream);
    EXPECT_TRUE(message.empty()) << message;
  }
}

// A GPU probe: the library call around the call that broke the capture is found in its
// backtrace (the outermost cuBLASLt frame); the simulated device names it without CUPTI.
TEST_F(capture_diagnostics_test, names_the_library_call_inside_which_a_capture_broke) {
  cublasLtHandle_t handle = nullptr;
  ASSERT_EQ(cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
  float* operands = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaMalloc(&operands, 3 * sizeof(float)));
  gs::cuda::stream stream;
  gs::graphs::graph_exec g;
  std::optional<gd::capture_diagnosis> diagnosis;
  std::string const message = capture_diagnosed(g, stream, diagnosed("cublaslt"), diagnosis, [&] {
    static_cast<void>(diagnostics_test_multiplies_on_the_legacy_stream(handle, operands + 2,
                                                                       operands, operands + 1));
  });
  static_cast<void>(cudaGetLastError());
  GRAPHSTEP_CUDA_TRY(cudaFree(operands));
  static_cast<void>(cublasLtDestroy(handle));
  ASSERT_FALSE(message.empty()) << "the legacy stream's use beside the capture should break it";
  ASSERT_TRUE(diagnosis && diagnosis->cause) << message;
  EXPECT_TRUE(contains(diagnosis->cause->library_call, "libcublasLt")) << message;
  EXPECT_TRUE(contains(message, "made inside")) << message;
  EXPECT_TRUE(contains(message, "diagnostics_test_multiplies_on_the_legacy_stream")) << message;
}

TEST_F(capture_diagnostics_test, names_a_copy_of_pageable_host_memory) {
  gs::cuda::stream stream;
  gs::graphs::graph_exec g;
  std::vector<float> pageable(1, 3.0F);
  std::optional<gd::capture_diagnosis> diagnosis;
  std::string const message = capture_diagnosed(g, stream, diagnosed("pageable"), diagnosis, [&] {
    diagnostics_test_copies_pageable(x_, pageable.data(), stream.get());
  });
  ASSERT_TRUE(diagnosis);
  if (diagnosis->cause) {
    EXPECT_TRUE(contains(diagnosis->cause->explanation, "pageable host memory")) << message;
  } else {
    ASSERT_EQ(diagnosis->warnings.size(), 1U) << message;
    gd::finding const& warning = diagnosis->warnings[0];
    EXPECT_EQ(warning.kind, gd::finding_kind::pageable_copy);
    EXPECT_TRUE(contains(warning.explanation, "`cudaMemcpyAsync`")) << warning.explanation;
    // The graph reads the host buffer at replay: a new value is copied each time.
    pageable[0] = 5.0F;
    g.replay(stream);
    stream.synchronize();
    EXPECT_EQ(read(), 5.0F);
  }
}

TEST_F(capture_diagnostics_test, a_clean_capture_has_no_findings_and_replays) {
  gs::cuda::stream stream;
  float* pinned = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaMallocHost(&pinned, sizeof(float)));
  *pinned = 10.0F;
  gs::graphs::graph_exec g;
  std::optional<gd::capture_diagnosis> diagnosis;
  std::string const message = capture_diagnosed(g, stream, diagnosed("clean"), diagnosis, [&] {
    GRAPHSTEP_CUDA_TRY(
        cudaMemcpyAsync(x_, pinned, sizeof(float), cudaMemcpyHostToDevice, stream.get()));
    add_one_kernel<<<1, 1, 0, stream.get()>>>(x_);
  });
  EXPECT_TRUE(message.empty()) << message;
  ASSERT_TRUE(diagnosis);
  EXPECT_FALSE(diagnosis->capture_failed);
  EXPECT_FALSE(diagnosis->cause);
  EXPECT_TRUE(diagnosis->warnings.empty());
  EXPECT_GE(diagnosis->calls_seen, 2U);  // the copy and the launch at least
  for (int i = 0; i < 3; ++i) g.replay(stream);
  stream.synchronize();
  EXPECT_EQ(read(), 11.0F);
  GRAPHSTEP_CUDA_TRY(cudaFreeHost(pinned));
}

TEST_F(capture_diagnostics_test, are_off_by_default) {
  gs::cuda::stream stream;
  gs::graphs::graph_exec g;
  gs::graphs::capture_scope scope{g, stream};
  add_one_kernel<<<1, 1, 0, stream.get()>>>(x_);
  scope.end();
  EXPECT_FALSE(scope.diagnosis());
}

TEST_F(capture_diagnostics_test, the_environment_variable_turns_them_on) {
  ::setenv("GRAPHSTEP_CAPTURE_DIAGNOSTICS", "1", 1);
  gs::cuda::stream stream;
  gs::graphs::graph_exec g;
  std::string message;
  try {
    gs::graphs::capture(g, stream, [&] { diagnostics_test_synchronizes(stream.get()); });
  } catch (gs::capture_error const& e) {
    message = e.what();
  }
  ::unsetenv("GRAPHSTEP_CAPTURE_DIAGNOSTICS");
  EXPECT_TRUE(contains(message, "broke the capture: `cudaStreamSynchronize`")) << message;
}

TEST_F(capture_diagnostics_test, captures_on_two_threads_are_diagnosed_apart) {
  // Each thread captures its own stream many times; one thread's failures never appear in the
  // other's diagnosis, and subscribing and unsubscribing as captures come and go is sound.
  float* y = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaMalloc(&y, sizeof(float)));
  GRAPHSTEP_CUDA_TRY(cudaMemset(y, 0, sizeof(float)));
  int clean_with_findings = 0;
  int broken_without_cause = 0;
  std::thread clean{[&] {
    gs::cuda::stream stream;
    for (int i = 0; i < 50; ++i) {
      gs::graphs::graph_exec g;
      std::optional<gd::capture_diagnosis> diagnosis;
      std::string const message =
          capture_diagnosed(g, stream, diagnosed("clean thread"), diagnosis,
                            [&] { add_one_kernel<<<1, 1, 0, stream.get()>>>(x_); });
      if (!message.empty() || !diagnosis || diagnosis->cause || !diagnosis->warnings.empty()) {
        ++clean_with_findings;
      }
      g.replay(stream);
    }
    stream.synchronize();
  }};
  std::thread broken{[&] {
    gs::cuda::stream stream;
    for (int i = 0; i < 50; ++i) {
      gs::graphs::graph_exec g;
      std::optional<gd::capture_diagnosis> diagnosis;
      std::string const message =
          capture_diagnosed(g, stream, diagnosed("broken thread"), diagnosis, [&] {
            add_one_kernel<<<1, 1, 0, stream.get()>>>(y);
            diagnostics_test_synchronizes(stream.get());
          });
      if (message.empty() || !diagnosis || !diagnosis->cause ||
          !contains(diagnosis->cause->explanation, "cudaStreamSynchronize")) {
        ++broken_without_cause;
      }
    }
  }};
  clean.join();
  broken.join();
  EXPECT_EQ(clean_with_findings, 0);
  EXPECT_EQ(broken_without_cause, 0);
  EXPECT_EQ(read(), 50.0F);
  GRAPHSTEP_CUDA_TRY(cudaFree(y));
}

// CUPTI takes one subscriber per process: with a profiler (here: the test itself) holding the
// callbacks, a diagnosed capture is refused with the reason, and works again once it lets go.
TEST_F(capture_diagnostics_test, another_cupti_subscriber_is_named) {
  gs::cuda::stream stream;
  gs::graphs::graph_exec loaded;
  std::optional<gd::capture_diagnosis> diagnosis;
  ASSERT_EQ(capture_diagnosed(loaded, stream, diagnosed("loads CUPTI"), diagnosis,
                              [&] { add_one_kernel<<<1, 1, 0, stream.get()>>>(x_); }),
            "");
  // The library graphstep loaded, found by its soname among the loaded objects.
  std::string const soname = "libcupti.so." + std::to_string(CUDART_VERSION / 1000);
  void* library = ::dlopen(soname.c_str(), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(library, nullptr) << ::dlerror();
  auto* subscribe = reinterpret_cast<decltype(&cuptiSubscribe)>(::dlsym(library, "cuptiSubscribe"));
  auto* unsubscribe =
      reinterpret_cast<decltype(&cuptiUnsubscribe)>(::dlsym(library, "cuptiUnsubscribe"));
  ASSERT_TRUE(subscribe != nullptr && unsubscribe != nullptr);
  CUpti_SubscriberHandle profiler{};
  auto const ignore = [](void*, CUpti_CallbackDomain, CUpti_CallbackId, void const*) {};
  ASSERT_EQ(subscribe(&profiler, ignore, nullptr), CUPTI_SUCCESS);
  std::string refused;
  {
    gs::graphs::graph_exec g;
    try {
      gs::graphs::capture_scope scope{g, stream, diagnosed("profiled")};
      scope.end();
    } catch (gs::error const& e) {
      refused = e.what();
    }
    EXPECT_TRUE(g.empty());
  }
  EXPECT_EQ(unsubscribe(profiler), CUPTI_SUCCESS);
  ::dlclose(library);
  EXPECT_TRUE(contains(refused, "cuptiSubscribe failed")) << refused;
  EXPECT_TRUE(contains(refused, "Another CUPTI client")) << refused;
  EXPECT_FALSE(gs::cuda::stream_view{stream}.is_capturing());
  gs::graphs::graph_exec again;
  EXPECT_EQ(capture_diagnosed(again, stream, diagnosed("after the profiler"), diagnosis,
                              [&] { add_one_kernel<<<1, 1, 0, stream.get()>>>(x_); }),
            "");
}

#else  // graphstep was built without CUPTI's headers

class capture_diagnostics_test : public graphstep::testing::gpu_test {};

TEST_F(capture_diagnostics_test, need_cupti_at_build_time) {
  GTEST_SKIP() << "graphstep was built without CUPTI's headers: capture diagnostics are off";
}

#endif
