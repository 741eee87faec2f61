// The decisions of the capture diagnostic mode on recorded call traces: API traits, stream
// kinds, which call broke a capture, the warnings, the user's frame and the report.

#include "graphs/detail/capture_trace.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <graphstep/graphs/capture_trace.hpp>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace gd = graphstep::graphs;
using graphstep::graphs::capture_mode;

namespace {

constexpr int unsupported = 900;
constexpr int invalidated = 901;
constexpr int implicit = 906;
constexpr std::uintptr_t capturing_stream = 0x7f00;

bool contains(std::string const& text, std::string const& part) {
  return text.find(part) != std::string::npos;
}

gd::detail::api_call call(std::string name, std::uint32_t thread = 1, int result = 0,
                          gd::detail::stream_kind stream = gd::detail::stream_kind::none) {
  gd::detail::api_call c;
  c.name = std::move(name);
  c.thread = thread;
  c.result = result;
  c.stream = stream;
  c.stream_handle = stream == gd::detail::stream_kind::capturing ? capturing_stream : 0;
  return c;
}

gd::detail::capture_context context(capture_mode mode = capture_mode::this_thread,
                                    int outcome = 0) {
  gd::detail::capture_context c;
  c.name = "step";
  c.mode = mode;
  c.capturing_thread = 1;
  c.outcome = outcome;
  return c;
}

}  // namespace

TEST(capture_trace, base_name_drops_version_and_per_thread_suffixes) {
  EXPECT_EQ(gd::detail::base_api_name("cuMemcpyHtoDAsync_v2_ptsz"), "cuMemcpyHtoDAsync");
  EXPECT_EQ(gd::detail::base_api_name("cudaLaunchKernel_v7000"), "cudaLaunchKernel");
  EXPECT_EQ(gd::detail::base_api_name("cudaEventRecordWithFlags_ptsz_v11010"),
            "cudaEventRecordWithFlags");
  EXPECT_EQ(gd::detail::base_api_name("cudaMemcpy_ptds"), "cudaMemcpy");
  EXPECT_EQ(gd::detail::base_api_name("cudaMalloc"), "cudaMalloc");
  EXPECT_EQ(gd::detail::base_api_name("cuda_v"), "cuda_v");  // no digits: not a version
  EXPECT_EQ(gd::detail::base_api_name("cuda_vx2"), "cuda_vx2");
  EXPECT_EQ(gd::detail::base_api_name(""), "");
}

TEST(capture_trace, traits_follow_what_each_call_does) {
  auto const sync = gd::detail::classify_api("cudaStreamSynchronize");
  EXPECT_TRUE(sync.synchronizes);
  EXPECT_FALSE(sync.copies || sync.manages_memory || sync.uses_default_stream);

  auto const memcpy = gd::detail::classify_api("cudaMemcpy");
  EXPECT_TRUE(memcpy.copies && memcpy.synchronizes && memcpy.uses_default_stream);
  EXPECT_FALSE(memcpy.per_thread_variant);

  auto const async_copy = gd::detail::classify_api("cudaMemcpyAsync_v3020");
  EXPECT_TRUE(async_copy.copies);
  EXPECT_FALSE(async_copy.synchronizes || async_copy.uses_default_stream);

  auto const memset = gd::detail::classify_api("cudaMemset");
  EXPECT_TRUE(memset.uses_default_stream);
  EXPECT_FALSE(memset.copies || memset.synchronizes);

  EXPECT_TRUE(gd::detail::classify_api("cudaMalloc").manages_memory);
  EXPECT_TRUE(gd::detail::classify_api("cuMemAlloc_v2").manages_memory);
  EXPECT_TRUE(gd::detail::classify_api("cudaFreeHost").manages_memory);
  EXPECT_FALSE(gd::detail::classify_api("cudaMallocAsync").manages_memory);  // captured as a node
  EXPECT_TRUE(gd::detail::classify_api("cuCtxSynchronize").synchronizes);
  EXPECT_TRUE(gd::detail::classify_api("cuMemcpyDtoH_v2").synchronizes);
  EXPECT_TRUE(gd::detail::classify_api("cudaMemcpy_ptds_v7000").per_thread_variant);

  for (char const* harmless : {"cudaLaunchKernel", "cudaGraphAddMemcpyNode", "cudaGetDevice",
                               "cudaEventRecord", "cuLaunchKernel"}) {
    auto const t = gd::detail::classify_api(harmless);
    EXPECT_FALSE(t.synchronizes || t.manages_memory || t.copies || t.uses_default_stream)
        << harmless;
  }
}

TEST(capture_trace, stream_handles_are_classified) {
  EXPECT_EQ(gd::detail::classify_stream(0, false, capturing_stream),
            gd::detail::stream_kind::legacy_default);
  EXPECT_EQ(gd::detail::classify_stream(0, true, capturing_stream), gd::detail::stream_kind::other);
  EXPECT_EQ(gd::detail::classify_stream(0x1, true, capturing_stream),
            gd::detail::stream_kind::legacy_default);
  EXPECT_EQ(gd::detail::classify_stream(0x2, false, capturing_stream),
            gd::detail::stream_kind::other);
  EXPECT_EQ(gd::detail::classify_stream(capturing_stream, false, capturing_stream),
            gd::detail::stream_kind::capturing);
  EXPECT_EQ(gd::detail::classify_stream(0x9000, false, capturing_stream),
            gd::detail::stream_kind::other);

  EXPECT_EQ(gd::detail::implicit_stream("cudaMemcpy"), gd::detail::stream_kind::legacy_default);
  EXPECT_EQ(gd::detail::implicit_stream("cudaMemset_v3020"),
            gd::detail::stream_kind::legacy_default);
  EXPECT_EQ(gd::detail::implicit_stream("cudaMemcpy_ptds_v7000"), gd::detail::stream_kind::other);
  EXPECT_EQ(gd::detail::implicit_stream("cudaMalloc"), gd::detail::stream_kind::none);
  EXPECT_EQ(gd::detail::implicit_stream("cudaMemcpyAsync"), gd::detail::stream_kind::none);
}

TEST(capture_trace, capture_errors_are_the_900_range) {
  EXPECT_FALSE(gd::detail::is_capture_error(0));
  EXPECT_FALSE(gd::detail::is_capture_error(899));
  EXPECT_FALSE(gd::detail::is_capture_error(909));
  for (int code = 900; code <= 908; ++code) EXPECT_TRUE(gd::detail::is_capture_error(code)) << code;
  EXPECT_EQ(gd::detail::capture_error_name(unsupported), "cudaErrorStreamCaptureUnsupported");
  EXPECT_EQ(gd::detail::capture_error_name(908), "cudaErrorStreamCaptureWrongThread");
  EXPECT_EQ(gd::detail::capture_error_name(2), "error 2");
}

TEST(capture_trace, notable_calls_are_those_worth_a_backtrace) {
  EXPECT_FALSE(
      gd::detail::is_notable(call("cudaLaunchKernel", 1, 0, gd::detail::stream_kind::capturing)));
  EXPECT_TRUE(gd::detail::is_notable(
      call("cudaLaunchKernel", 1, 0, gd::detail::stream_kind::legacy_default)));
  EXPECT_TRUE(gd::detail::is_notable(call("cudaLaunchKernel", 1, invalidated)));
  EXPECT_TRUE(gd::detail::is_notable(call("cudaMemcpyAsync")));
  EXPECT_TRUE(gd::detail::is_notable(call("cudaStreamSynchronize")));
  EXPECT_TRUE(gd::detail::is_notable(call("cudaMalloc")));
}

TEST(capture_trace, the_call_that_failed_with_a_capture_error_is_the_cause) {
  std::vector<gd::detail::api_call> const calls{
      call("cudaLaunchKernel", 1, 0, gd::detail::stream_kind::capturing),
      call("cudaStreamSynchronize", 1, unsupported, gd::detail::stream_kind::capturing),
      call("cudaLaunchKernel", 1, invalidated, gd::detail::stream_kind::capturing)};
  auto const d = gd::detail::diagnose(calls, context(capture_mode::this_thread, invalidated));
  ASSERT_TRUE(d.cause);
  EXPECT_TRUE(d.capture_failed);
  EXPECT_EQ(d.cause->call, 1U);
  EXPECT_EQ(d.cause->kind, gd::finding_kind::broke_capture);
  EXPECT_TRUE(contains(d.cause->explanation, "`cudaStreamSynchronize`"));
  EXPECT_TRUE(contains(d.cause->explanation, "cudaErrorStreamCaptureUnsupported"));
  EXPECT_TRUE(contains(d.cause->explanation, "synchronize after the capture"));
  EXPECT_TRUE(contains(d.cause->explanation, "the capturing thread"));
  EXPECT_TRUE(d.warnings.empty());
  EXPECT_EQ(d.calls_seen, 3U);
  EXPECT_EQ(d.threads, 1U);
}

TEST(capture_trace, a_root_error_wins_over_an_earlier_invalidated_one) {
  // In global mode another thread's cudaMalloc may invalidate the capture and return after
  // the capturing thread has already seen "invalidated".
  std::vector<gd::detail::api_call> const calls{
      call("cudaLaunchKernel", 1, invalidated, gd::detail::stream_kind::capturing),
      call("cudaMalloc", 2, unsupported)};
  auto const d = gd::detail::diagnose(calls, context(capture_mode::global, invalidated));
  ASSERT_TRUE(d.cause);
  EXPECT_EQ(d.cause->call, 1U);
  EXPECT_TRUE(contains(d.cause->explanation, "allocates or frees memory"));
  EXPECT_TRUE(contains(d.cause->explanation, "capture_mode::global"));
  EXPECT_TRUE(contains(d.cause->explanation, "not the capturing thread"));
  EXPECT_TRUE(contains(d.cause->explanation, "another thread"));
  EXPECT_EQ(d.threads, 2U);
}

TEST(capture_trace, only_invalidated_calls_name_the_first_and_say_what_is_missing) {
  std::vector<gd::detail::api_call> const calls{
      call("cudaGetDevice"),
      call("cudaLaunchKernel", 1, invalidated, gd::detail::stream_kind::capturing),
      call("cudaMemsetAsync", 1, invalidated, gd::detail::stream_kind::capturing)};
  auto const d = gd::detail::diagnose(calls, context(capture_mode::this_thread, invalidated));
  ASSERT_TRUE(d.cause);
  EXPECT_EQ(d.cause->call, 1U);
  EXPECT_TRUE(contains(d.cause->explanation, "already invalidated"));
}

TEST(capture_trace, other_threads_errors_belong_to_their_own_captures) {
  // Thread 2 breaks its own capture; this thread_local capture on thread 1 is fine.
  std::vector<gd::detail::api_call> const calls{
      call("cudaLaunchKernel", 1, 0, gd::detail::stream_kind::capturing),
      call("cudaStreamSynchronize", 2, unsupported, gd::detail::stream_kind::other),
      call("cudaMemcpy", 2, 0, gd::detail::stream_kind::legacy_default)};
  auto const d = gd::detail::diagnose(calls, context(capture_mode::this_thread, 0));
  EXPECT_FALSE(d.cause);
  EXPECT_FALSE(d.capture_failed);
  EXPECT_TRUE(d.warnings.empty());

  // Under global mode the same calls bear on the capture.
  auto const global = gd::detail::diagnose(calls, context(capture_mode::global, invalidated));
  ASSERT_TRUE(global.cause);
  EXPECT_EQ(global.cause->call, 1U);
  ASSERT_EQ(global.warnings.size(), 1U);
  EXPECT_EQ(global.warnings[0].kind, gd::finding_kind::legacy_stream);
}

TEST(capture_trace, a_failed_capture_without_errors_blames_what_its_mode_forbids) {
  std::vector<gd::detail::api_call> const calls{
      call("cudaLaunchKernel", 1, 0, gd::detail::stream_kind::capturing), call("cudaMalloc", 2),
      call("cudaMalloc", 1), call("cudaDeviceSynchronize", 1)};
  auto const this_thread =
      gd::detail::diagnose(calls, context(capture_mode::this_thread, invalidated));
  ASSERT_TRUE(this_thread.cause);
  EXPECT_EQ(this_thread.cause->call, 2U);  // not thread 2's: this_thread mode allows it

  auto const global = gd::detail::diagnose(calls, context(capture_mode::global, invalidated));
  ASSERT_TRUE(global.cause);
  EXPECT_EQ(global.cause->call, 1U);

  auto const relaxed = gd::detail::diagnose(calls, context(capture_mode::relaxed, invalidated));
  EXPECT_FALSE(relaxed.cause);  // relaxed allows every one of them
  EXPECT_TRUE(relaxed.capture_failed);
}

TEST(capture_trace, a_failed_capture_blames_legacy_stream_work) {
  std::vector<gd::detail::api_call> const calls{
      call("cudaLaunchKernel", 1, 0, gd::detail::stream_kind::capturing),
      call("cudaMemsetAsync", 1, 0, gd::detail::stream_kind::legacy_default)};
  auto const d = gd::detail::diagnose(calls, context(capture_mode::relaxed, implicit));
  ASSERT_TRUE(d.cause);
  EXPECT_EQ(d.cause->call, 1U);
  EXPECT_TRUE(contains(d.cause->explanation, "legacy default stream"));
  EXPECT_TRUE(d.warnings.empty());  // the cause is not repeated as a warning
}

TEST(capture_trace, legacy_stream_work_and_pageable_copies_are_warned_about) {
  gd::detail::api_call pageable = call("cudaMemcpyAsync", 1, 0, gd::detail::stream_kind::capturing);
  pageable.host = gd::detail::host_memory::pageable;
  pageable.host_address = 0x5000;
  gd::detail::api_call pinned = call("cudaMemcpyAsync", 1, 0, gd::detail::stream_kind::capturing);
  pinned.host = gd::detail::host_memory::pinned;
  pinned.host_address = 0x6000;
  gd::detail::api_call failed_legacy =
      call("cudaMemsetAsync", 1, 700, gd::detail::stream_kind::legacy_default);
  std::vector<gd::detail::api_call> const calls{
      call("cudaMemsetAsync", 1, 0, gd::detail::stream_kind::legacy_default), pageable, pinned,
      failed_legacy, call("cudaMemcpy", 1, 0, gd::detail::stream_kind::legacy_default)};
  auto const d = gd::detail::diagnose(calls, context());
  EXPECT_FALSE(d.cause);
  EXPECT_FALSE(d.capture_failed);
  ASSERT_EQ(d.warnings.size(), 3U);
  EXPECT_EQ(d.warnings[0].kind, gd::finding_kind::legacy_stream);
  EXPECT_EQ(d.warnings[0].call, 0U);
  EXPECT_TRUE(contains(d.warnings[0].explanation, "will not run at replay"));
  EXPECT_EQ(d.warnings[1].kind, gd::finding_kind::pageable_copy);
  EXPECT_EQ(d.warnings[1].call, 1U);
  EXPECT_TRUE(contains(d.warnings[1].explanation, "0x5000"));
  EXPECT_TRUE(contains(d.warnings[1].explanation, "pinned memory"));
  EXPECT_EQ(d.warnings[2].call, 4U);  // the failed call did no work: no warning
}

TEST(capture_trace, nothing_recorded_and_a_good_capture_is_clean) {
  auto const d = gd::detail::diagnose({}, context());
  EXPECT_FALSE(d.cause);
  EXPECT_FALSE(d.capture_failed);
  EXPECT_TRUE(d.warnings.empty());
  EXPECT_EQ(d.calls_seen, 0U);

  auto const failed = gd::detail::diagnose({}, context(capture_mode::this_thread, invalidated), 12);
  EXPECT_TRUE(failed.capture_failed);
  EXPECT_FALSE(failed.cause);
  EXPECT_EQ(failed.calls_seen, 12U);
}

TEST(capture_trace, library_frames_are_told_from_the_users) {
  auto frame = [](std::string module, std::string symbol) {
    return gd::detail::frame{0x1000, std::move(module), std::move(symbol), 0x10};
  };
  EXPECT_TRUE(gd::detail::is_library_frame(frame("/usr/lib/libcupti.so.13", "")));
  EXPECT_TRUE(
      gd::detail::is_library_frame(frame("/usr/local/cuda/lib/libcudart.so.13", "cudaMalloc")));
  EXPECT_TRUE(gd::detail::is_library_frame(frame("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "")));
  EXPECT_TRUE(gd::detail::is_library_frame(frame("/lib/libc.so.6", "__libc_start_main")));
  EXPECT_TRUE(gd::detail::is_library_frame(
      frame("/opt/app/train", "graphstep::cuda::stream_view::synchronize() const")));
  EXPECT_TRUE(gd::detail::is_library_frame(frame("/opt/app/train", "cudaLaunchKernel<char>")));
  EXPECT_TRUE(gd::detail::is_library_frame(frame("/opt/app/train", "__device_stub__Z4stepPf")));
  EXPECT_TRUE(gd::detail::is_library_frame(frame("", "")));
  EXPECT_FALSE(gd::detail::is_library_frame(frame("/opt/app/train", "train_step(float*)")));
  EXPECT_FALSE(gd::detail::is_library_frame(frame("/opt/app/train", "cuda_step()")));
  EXPECT_FALSE(
      gd::detail::is_library_frame(frame("/opt/app/train", "")));  // unexported: still yours
  EXPECT_FALSE(gd::detail::is_library_frame(frame("/opt/app/libmodel.so", "model::forward()")));

  std::vector<gd::detail::frame> const frames{
      frame("/lib/libcupti.so.13", ""), frame("/lib/libcudart.so.13", "cudaStreamSynchronize"),
      frame("/opt/app/train", "graphstep::cuda::stream_view::synchronize() const"),
      frame("/opt/app/train", "train_step(float*)"), frame("/opt/app/train", "main")};
  EXPECT_EQ(gd::detail::first_user_frame(frames), 3U);
  EXPECT_FALSE(gd::detail::first_user_frame({frames[0], frames[1]}));
  EXPECT_FALSE(gd::detail::first_user_frame({}));
}

TEST(capture_trace, the_library_call_around_a_call_is_the_librarys_outermost_frame) {
  auto frame = [](std::string module, std::string symbol) {
    return gd::detail::frame{0x1000, std::move(module), std::move(symbol), 0x10};
  };
  // cuBLASLt launches its kernel from inside its own functions, called from the user's step.
  std::vector<gd::detail::frame> const inside_cublaslt{
      frame("/lib/libcupti.so.13", ""),
      frame("/usr/lib/x86_64-linux-gnu/libcuda.so.1", ""),
      frame("/usr/local/cuda/lib64/libcublasLt.so.13", ""),
      frame("/usr/local/cuda/lib64/libcublasLt.so.13", "cublasLtSSSMatmul"),
      frame("/usr/local/cuda/lib64/libcublasLt.so.13", "cublasLtMatmul"),
      frame("/opt/app/train", "matmul_forward(float*)"),
      frame("/opt/app/train", "main"),
      frame("/usr/lib/libnccl.so.2", "ncclMain")};  // outside the user's frame: not the caller
  EXPECT_EQ(gd::detail::library_call_around(inside_cublaslt), "cublasLtMatmul (libcublasLt.so.13)");
  // A library that exports no name for the function is named by its module.
  EXPECT_EQ(gd::detail::library_call_around({frame("/lib/libcudart.so.13", "cudaMalloc"),
                                             frame("/lib/libcudnn.so.9", ""),
                                             frame("/opt/app/train", "attention()")}),
            "a call into libcudnn.so.9");
  // The runtime, the driver, graphstep and the C library are not libraries that issue work.
  EXPECT_EQ(gd::detail::library_call_around(
                {frame("/lib/libcudart.so.13", "cudaStreamSynchronize"),
                 frame("/opt/app/train", "graphstep::cuda::stream_view::synchronize() const"),
                 frame("/opt/app/train", "train_step(float*)")}),
            "");
  EXPECT_EQ(gd::detail::library_call_around({}), "");
}

TEST(capture_trace, a_break_inside_a_library_names_both_calls_and_the_fix_for_the_library) {
  std::string const wrong_stream =
      gd::detail::explain_break("cudaLaunchKernel", "cublasLtMatmul", implicit, "unused");
  EXPECT_TRUE(contains(wrong_stream, "cudaLaunchKernel, made inside cublasLtMatmul, broke it"))
      << wrong_stream;
  EXPECT_TRUE(contains(wrong_stream, "legacy default stream")) << wrong_stream;
  EXPECT_TRUE(contains(wrong_stream, "Give it the capturing stream")) << wrong_stream;
  EXPECT_FALSE(contains(wrong_stream, "unused")) << wrong_stream;

  std::string const set_up =
      gd::detail::explain_break("cudaMalloc", "ncclAllReduce", unsupported, "unused");
  EXPECT_TRUE(contains(set_up, "cudaMalloc, made inside ncclAllReduce, broke it")) << set_up;
  EXPECT_TRUE(contains(set_up, "before the capture begins (a warm-up step)")) << set_up;

  std::string const other = gd::detail::explain_break("cudaMemcpyAsync", "cublasLtMatmul", 1, "");
  EXPECT_TRUE(contains(other, "Check the status it returned")) << other;

  // Without a library, the call and the error's own fix.
  EXPECT_EQ(gd::detail::explain_break("cudaStreamSynchronize", "", unsupported,
                                      "synchronize after the capture"),
            "cudaStreamSynchronize broke it: synchronize after the capture");
}

TEST(capture_trace, the_report_names_the_cause_its_frames_and_the_warnings) {
  std::map<std::uintptr_t, gd::detail::frame> const symbols{
      {1, {1, "/lib/libcupti.so.13", "", 0x11}},
      {2, {2, "/opt/app/train", "graphstep::detail::(anonymous namespace)::on_api_call", 0x22}},
      {3, {3, "/lib/libcudart.so.13", "cudaStreamSynchronize", 0x33}},
      {4, {4, "/opt/app/train", "train_step(float*)", 0x44}},
      {5, {5, "/opt/app/train", "main", 0x55}},
      {6, {6, "/opt/app/train", "load_batch()", 0x66}}};
  auto const lookup = [&](std::uintptr_t address) { return symbols.at(address); };

  gd::detail::api_call sync =
      call("cudaStreamSynchronize", 1, unsupported, gd::detail::stream_kind::capturing);
  sync.backtrace = {1, 2, 3, 4, 5};
  gd::detail::api_call copy = call("cudaMemcpyAsync", 1, 0, gd::detail::stream_kind::capturing);
  copy.host = gd::detail::host_memory::pageable;
  copy.host_address = 0xabc0;
  copy.backtrace = {1, 3, 6};
  std::vector<gd::detail::api_call> const calls{copy, sync};
  auto const d = gd::detail::diagnose(calls, context(capture_mode::this_thread, invalidated), 40);
  std::string const report = gd::detail::format_report(d, calls, lookup);

  EXPECT_TRUE(contains(report, "40 CUDA API call(s) on 1 thread(s)")) << report;
  EXPECT_TRUE(contains(report, "38 ordinary ones not kept")) << report;
  EXPECT_TRUE(contains(report, "broke the capture: `cudaStreamSynchronize`")) << report;
  EXPECT_TRUE(contains(report, "    at train_step(float*) (train+0x44)")) << report;
  EXPECT_TRUE(contains(report, "#1 train_step(float*) (train+0x44)   <- your code")) << report;
  // The recorder's own frames (CUPTI and its callback) are not shown.
  EXPECT_TRUE(contains(report, "#0 cudaStreamSynchronize (libcudart.so.13+0x33)")) << report;
  EXPECT_FALSE(contains(report, "on_api_call")) << report;
  EXPECT_TRUE(contains(report, "warning: `cudaMemcpyAsync`")) << report;
  EXPECT_TRUE(contains(report, "at load_batch() (train+0x66)")) << report;
  EXPECT_FALSE(contains(report, "inside the library call")) << report;

  auto const limited = gd::detail::format_report(d, calls, lookup, 1);
  EXPECT_TRUE(contains(limited, "#0 cudaStreamSynchronize"));
  EXPECT_FALSE(contains(limited, "#1 "));
}

TEST(capture_trace, the_report_names_the_library_call_around_the_cause) {
  std::vector<gd::detail::api_call> const calls{
      call("cudaLaunchKernel", 1, implicit, gd::detail::stream_kind::legacy_default)};
  auto d = gd::detail::diagnose(calls, context(capture_mode::this_thread, invalidated));
  ASSERT_TRUE(d.cause);
  d.cause->library_call = "cublasLtMatmul (libcublasLt.so.13)";
  auto const lookup = [](std::uintptr_t address) { return gd::detail::frame{address, "", "", 0}; };
  std::string const report = gd::detail::format_report(d, calls, lookup);
  EXPECT_TRUE(contains(report, "inside the library call cublasLtMatmul (libcublasLt.so.13)"))
      << report;
}

TEST(capture_trace, the_report_says_when_no_call_explains_a_failure) {
  std::vector<gd::detail::api_call> const calls{
      call("cudaLaunchKernel", 1, 0, gd::detail::stream_kind::capturing)};
  auto const failed = gd::detail::diagnose(calls, context(capture_mode::this_thread, invalidated));
  auto const lookup = [](std::uintptr_t address) { return gd::detail::frame{address, "", "", 0}; };
  EXPECT_TRUE(
      contains(gd::detail::format_report(failed, calls, lookup), "no recorded call explains"));
  auto const fine = gd::detail::diagnose(calls, context());
  EXPECT_FALSE(
      contains(gd::detail::format_report(fine, calls, lookup), "no recorded call explains"));

  gd::detail::api_call no_backtrace = call("cudaMalloc", 1, unsupported);
  auto const d =
      gd::detail::diagnose({no_backtrace}, context(capture_mode::this_thread, invalidated));
  EXPECT_TRUE(
      contains(gd::detail::format_report(d, {no_backtrace}, lookup), "no backtrace was kept"));
}

TEST(capture_trace, the_trace_keeps_the_first_calls_then_notable_ones) {
  gd::detail::capture_trace trace{3};
  for (int i = 0; i < 5; ++i)
    trace.record(call("cudaLaunchKernel", 1, 0, gd::detail::stream_kind::capturing));
  for (int i = 0; i < 4; ++i) trace.record(call("cudaStreamSynchronize", 1, unsupported));
  auto const calls = trace.calls();
  EXPECT_EQ(trace.seen(), 9U);
  ASSERT_EQ(calls.size(), 6U);  // 3 first calls, then 3 notable ones (the capacity again)
  EXPECT_EQ(calls[2].sequence, 2U);
  EXPECT_EQ(calls[3].sequence, 5U);
  EXPECT_EQ(calls[3].name, "cudaStreamSynchronize");
  EXPECT_EQ(calls[5].sequence, 7U);
}

TEST(capture_trace, the_trace_takes_calls_from_several_threads) {
  gd::detail::capture_trace trace{100000};
  std::vector<std::thread> threads;
  for (std::uint32_t t = 1; t <= 4; ++t) {
    threads.emplace_back([&trace, t] {
      for (int i = 0; i < 2000; ++i) trace.record(call("cudaLaunchKernel", t));
    });
  }
  for (auto& t : threads) t.join();
  auto const calls = trace.calls();
  ASSERT_EQ(calls.size(), 8000U);
  for (std::size_t i = 0; i < calls.size(); ++i) EXPECT_EQ(calls[i].sequence, i);
  EXPECT_EQ(gd::detail::diagnose(calls, context()).threads, 4U);
}
