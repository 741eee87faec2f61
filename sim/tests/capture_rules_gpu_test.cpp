// CUDA's stream-capture and graph rules, one test per rule, written against the plain runtime
// API so that a GPU run checks the simulated device itself. Each test names its source: a doc
// comment of cuda_runtime_api.h or driver_types.h, or a section of the CUDA Programming Guide.

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "sim_test.hpp"

namespace {

class capture_rules : public sim_testing::gpu_test {
 protected:
  void SetUp() override {
    gpu_test::SetUp();
    if (IsSkipped()) return;
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
    void* memory = nullptr;
    SIM_TEST_TRY(cudaMalloc(&memory, bytes));
    x_ = static_cast<unsigned char*>(memory);
    SIM_TEST_TRY(cudaMemsetAsync(x_, 0, bytes, stream_));
    SIM_TEST_TRY(cudaStreamSynchronize(stream_));
  }
  void TearDown() override {
    if (IsSkipped()) return;
    static_cast<void>(cudaGetLastError());
    SIM_TEST_EXPECT_SUCCESS(cudaDeviceSynchronize());
    SIM_TEST_EXPECT_SUCCESS(cudaFree(x_));
    SIM_TEST_EXPECT_SUCCESS(cudaStreamDestroy(side_));
    SIM_TEST_EXPECT_SUCCESS(cudaStreamDestroy(stream_));
  }
  // The first byte of x, read back on the capture's stream.
  unsigned char first_byte() {
    unsigned char value = 0;
    SIM_TEST_TRY(cudaMemcpyAsync(&value, x_, 1, cudaMemcpyDeviceToHost, stream_));
    SIM_TEST_TRY(cudaStreamSynchronize(stream_));
    return value;
  }
  static cudaStreamCaptureStatus capture_status(cudaStream_t stream) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    SIM_TEST_TRY(cudaStreamIsCapturing(stream, &status));
    return status;
  }
  // Ends the capture on stream_, expecting `expected`; destroys a graph it returns.
  void end_expecting(cudaError_t expected) {
    cudaGraph_t graph = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(stream_, &graph), expected);
    if (expected != cudaSuccess) {
      EXPECT_EQ(graph, nullptr);
    }
    if (graph != nullptr) SIM_TEST_TRY(cudaGraphDestroy(graph));
    static_cast<void>(cudaGetLastError());
  }

  static constexpr std::size_t bytes = 256;
  cudaStream_t stream_{};
  cudaStream_t side_{};
  unsigned char* x_{};
};

// cudaStreamBeginCapture: "all operations pushed into the stream will not be executed, but will
// instead be captured into a graph".
TEST_F(capture_rules, captured_work_runs_only_when_the_graph_is_launched) {
  cudaGraph_t graph = nullptr;
  SIM_TEST_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  SIM_TEST_TRY(cudaMemsetAsync(x_, 7, bytes, stream_));
  SIM_TEST_TRY(cudaStreamEndCapture(stream_, &graph));
  EXPECT_EQ(first_byte(), 0);
  cudaGraphExec_t exec = nullptr;
  SIM_TEST_TRY(cudaGraphInstantiate(&exec, graph, 0));
  SIM_TEST_TRY(cudaGraphDestroy(graph));  // the executable does not need the graph
  SIM_TEST_TRY(cudaGraphLaunch(exec, stream_));
  EXPECT_EQ(first_byte(), 7);
  SIM_TEST_TRY(cudaGraphExecDestroy(exec));
}

// cudaStreamBeginCapture: "Capture may not be initiated if stream is cudaStreamLegacy ... and it
// may only be initiated if the stream is not already in capture mode".
TEST_F(capture_rules, capture_cannot_begin_on_the_legacy_stream_or_twice) {
  EXPECT_NE(cudaStreamBeginCapture(cudaStreamLegacy, cudaStreamCaptureModeGlobal), cudaSuccess);
  static_cast<void>(cudaGetLastError());
  SIM_TEST_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  EXPECT_NE(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
  static_cast<void>(cudaGetLastError());
  end_expecting(cudaSuccess);
}

// cudaThreadExchangeStreamCaptureMode: under Global, a thread with a capture not begun in Relaxed
// mode may not make potentially unsafe calls (cudaMalloc); the capture is invalidated and ends
// with a NULL graph (cudaStreamEndCapture; cudaErrorStreamCaptureInvalidated).
TEST_F(capture_rules, an_unsafe_call_in_a_global_capture_fails_and_invalidates_it) {
  SIM_TEST_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 64), cudaErrorStreamCaptureUnsupported);
  cudaStreamCaptureStatus status{};
  SIM_TEST_TRY(cudaStreamIsCapturing(stream_, &status));
  EXPECT_EQ(status, cudaStreamCaptureStatusInvalidated);
  EXPECT_EQ(cudaMemsetAsync(x_, 1, bytes, stream_), cudaErrorStreamCaptureInvalidated);
  end_expecting(cudaErrorStreamCaptureInvalidated);
}

// cudaThreadExchangeStreamCaptureMode: under Relaxed "the local thread is not prohibited from
// potentially unsafe API calls", whether the capture or the thread is relaxed.
TEST_F(capture_rules, relaxed_capture_or_relaxed_thread_may_allocate) {
  SIM_TEST_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 64), cudaSuccess);
  end_expecting(cudaSuccess);
  SIM_TEST_TRY(cudaFree(p));
  SIM_TEST_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  SIM_TEST_TRY(cudaThreadExchangeStreamCaptureMode(&mode));
  EXPECT_EQ(mode, cudaStreamCaptureModeGlobal) << "a thread starts in Global mode";
  EXPECT_EQ(cudaMalloc(&p, 64), cudaSuccess);
  SIM_TEST_TRY(cudaThreadExchangeStreamCaptureMode(&mode));
  end_expecting(cudaSuccess);
  SIM_TEST_TRY(cudaFree(p));
}

// cudaThreadExchangeStreamCaptureMode: under Global "any other thread [with] a concurrent capture
// sequence initiated with cudaStreamCaptureModeGlobal" prohibits unsafe calls; ThreadLocal
// captures of other threads are ignored.
TEST_F(capture_rules, another_threads_unsafe_call_breaks_only_a_global_capture) {
  for (auto mode : {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal}) {
    SIM_TEST_TRY(cudaStreamBeginCapture(stream_, mode));
    SIM_TEST_TRY(cudaMemsetAsync(x_, 1, bytes, stream_));
    cudaError_t allocated = cudaSuccess;
    void* p = nullptr;
    std::thread other{[&] {
      allocated = cudaMalloc(&p, 64);
      static_cast<void>(cudaGetLastError());
    }};
    other.join();
    if (mode == cudaStreamCaptureModeGlobal) {
      EXPECT_EQ(allocated, cudaErrorStreamCaptureUnsupported);
      end_expecting(cudaErrorStreamCaptureInvalidated);
    } else {
      EXPECT_EQ(allocated, cudaSuccess);
      end_expecting(cudaSuccess);
      SIM_TEST_TRY(cudaFree(p));
    }
  }
}

// CUDA Programming Guide, "Prohibited and Unhandled Operations": "It is invalid to synchronize or
// query the execution status of a stream which is being captured or a captured event". On an
// H100 with CUDA 13.0 (docs/validation.md) the first query or sync of a captured event is
// cudaErrorCapturedEvent and invalidates the capture, even a Relaxed one; the event is then an
// invalid value to wait for.
TEST_F(capture_rules, waiting_for_a_capturing_stream_or_a_captured_event_is_refused) {
  cudaEvent_t event = nullptr;
  SIM_TEST_TRY(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  for (bool query_first : {true, false}) {
    SIM_TEST_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
    SIM_TEST_TRY(cudaEventRecord(event, stream_));
    if (query_first) {
      EXPECT_EQ(cudaEventQuery(event), cudaErrorCapturedEvent);
      EXPECT_EQ(capture_status(stream_), cudaStreamCaptureStatusInvalidated);
      EXPECT_EQ(cudaEventSynchronize(event), cudaErrorInvalidValue);
    } else {
      EXPECT_EQ(cudaEventSynchronize(event), cudaErrorCapturedEvent);
      EXPECT_EQ(capture_status(stream_), cudaStreamCaptureStatusInvalidated);
      EXPECT_EQ(cudaEventQuery(event), cudaErrorInvalidValue);
    }
    static_cast<void>(cudaGetLastError());
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaErrorStreamCaptureUnsupported);
    end_expecting(cudaErrorStreamCaptureInvalidated);
  }
  SIM_TEST_TRY(cudaEventDestroy(event));
}

// driver_types.h: cudaErrorStreamCaptureUnmatched, "The capture was not initiated in this
// stream"; cudaErrorStreamCaptureWrongThread for a non-relaxed capture ended on another thread.
// What follows each, as an H100 with CUDA 13.0 shows (docs/validation.md): the unmatched end
// invalidates the capture; the wrong thread's end ends it, so ending it again finds a stream
// that is not capturing (cudaErrorIllegalState).
TEST_F(capture_rules, a_capture_ends_on_its_own_stream_and_thread) {
  cudaEvent_t fork = nullptr;
  SIM_TEST_TRY(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  auto end_on_another_thread = [&] {
    cudaError_t ended = cudaSuccess;
    std::thread other{[&] {
      cudaGraph_t graph = nullptr;
      ended = cudaStreamEndCapture(stream_, &graph);
      static_cast<void>(cudaGetLastError());
      if (graph != nullptr) static_cast<void>(cudaGraphDestroy(graph));
    }};
    other.join();
    return ended;
  };
  cudaGraph_t graph = nullptr;
  for (auto mode : {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal}) {
    SIM_TEST_TRY(cudaStreamBeginCapture(stream_, mode));
    SIM_TEST_TRY(cudaEventRecord(fork, stream_));
    SIM_TEST_TRY(cudaStreamWaitEvent(side_, fork, 0));
    EXPECT_EQ(cudaStreamEndCapture(side_, &graph), cudaErrorStreamCaptureUnmatched);
    static_cast<void>(cudaGetLastError());
    EXPECT_EQ(capture_status(stream_), cudaStreamCaptureStatusInvalidated);
    EXPECT_EQ(end_on_another_thread(), cudaErrorStreamCaptureInvalidated);
    EXPECT_EQ(capture_status(stream_), cudaStreamCaptureStatusNone);
    EXPECT_EQ(capture_status(side_), cudaStreamCaptureStatusNone);

    SIM_TEST_TRY(cudaStreamBeginCapture(stream_, mode));
    EXPECT_EQ(end_on_another_thread(), cudaErrorStreamCaptureWrongThread);
    EXPECT_EQ(capture_status(stream_), cudaStreamCaptureStatusNone);
    EXPECT_EQ(cudaStreamEndCapture(stream_, &graph), cudaErrorIllegalState);
    EXPECT_EQ(graph, nullptr);
    static_cast<void>(cudaGetLastError());
  }
  SIM_TEST_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
  EXPECT_EQ(end_on_another_thread(), cudaSuccess);  // Relaxed: any thread may end it
  EXPECT_EQ(capture_status(stream_), cudaStreamCaptureStatusNone);
  SIM_TEST_TRY(cudaEventDestroy(fork));
}

// cudaStreamIsCapturing: on the legacy stream while a blocking stream captures, "it will return
// cudaErrorStreamCaptureImplicit ... The blocking stream capture is not invalidated"; any real use
// of the legacy stream then is invalid (Programming Guide) and breaks the capture.
TEST_F(capture_rules, the_legacy_stream_is_unusable_beside_a_blocking_capture) {
  cudaStream_t blocking = nullptr;
  SIM_TEST_TRY(cudaStreamCreate(&blocking));
  SIM_TEST_TRY(cudaStreamBeginCapture(blocking, cudaStreamCaptureModeRelaxed));
  cudaStreamCaptureStatus status{};
  EXPECT_EQ(cudaStreamIsCapturing(cudaStreamLegacy, &status), cudaErrorStreamCaptureImplicit);
  static_cast<void>(cudaGetLastError());
  SIM_TEST_TRY(cudaStreamIsCapturing(blocking, &status));
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  EXPECT_EQ(cudaMemsetAsync(x_, 3, bytes, cudaStreamLegacy), cudaErrorStreamCaptureImplicit);
  SIM_TEST_TRY(cudaStreamIsCapturing(blocking, &status));
  EXPECT_EQ(status, cudaStreamCaptureStatusInvalidated);
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(blocking, &graph), cudaErrorStreamCaptureInvalidated);
  static_cast<void>(cudaGetLastError());
  SIM_TEST_TRY(cudaStreamDestroy(blocking));
}

// cudaStreamIsCapturing: "When a blocking stream is capturing, the legacy stream is in an
// unusable state"; a non-blocking one has no implicit dependency: legacy work runs at once.
TEST_F(capture_rules, legacy_stream_work_beside_a_non_blocking_capture_runs_eagerly) {
  SIM_TEST_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
  SIM_TEST_TRY(cudaMemsetAsync(x_, 5, bytes, cudaStreamLegacy));
  end_expecting(cudaSuccess);
  SIM_TEST_TRY(cudaDeviceSynchronize());
  EXPECT_EQ(first_byte(), 5);
}

// Programming Guide, "Prohibited and Unhandled Operations": "It is invalid to wait on a
// non-captured event from a stream which is being captured without specifying the
// cudaEventWaitExternal flag" (driver_types.h: cudaErrorStreamCaptureIsolation).
TEST_F(capture_rules, waiting_on_an_event_recorded_outside_the_capture_is_refused) {
  cudaEvent_t outside = nullptr;
  SIM_TEST_TRY(cudaEventCreateWithFlags(&outside, cudaEventDisableTiming));
  SIM_TEST_TRY(cudaEventRecord(outside, side_));
  SIM_TEST_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  EXPECT_EQ(cudaStreamWaitEvent(stream_, outside, 0), cudaErrorStreamCaptureIsolation);
  end_expecting(cudaErrorStreamCaptureInvalidated);
  SIM_TEST_TRY(cudaEventDestroy(outside));
}

// cudaGetLastError "returns the last error ... and resets it to cudaSuccess";
// cudaPeekAtLastError "does not reset the error".
TEST_F(capture_rules, the_last_error_is_kept_by_peek_and_cleared_by_get) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, std::size_t{1} << 62), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// cudaGraphExecUpdate: same topology with new parameters updates the executable; a graph whose
// nodes differ in number is refused with cudaErrorGraphExecUpdateFailure and
// cudaGraphExecUpdateErrorTopologyChanged, and the executable keeps its old parameters.
TEST_F(capture_rules, an_executable_takes_new_parameters_but_not_a_new_topology) {
  auto capture_memsets = [&](std::vector<int> const& values) {
    cudaGraph_t graph = nullptr;
    SIM_TEST_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
    for (int const value : values) SIM_TEST_TRY(cudaMemsetAsync(x_, value, bytes, stream_));
    SIM_TEST_TRY(cudaStreamEndCapture(stream_, &graph));
    return graph;
  };
  cudaGraph_t first = capture_memsets({4});
  cudaGraphExec_t exec = nullptr;
  SIM_TEST_TRY(cudaGraphInstantiate(&exec, first, 0));
  cudaGraph_t same_shape = capture_memsets({9});
  cudaGraphExecUpdateResultInfo info{};
  SIM_TEST_TRY(cudaGraphExecUpdate(exec, same_shape, &info));
  EXPECT_EQ(info.result, cudaGraphExecUpdateSuccess);
  SIM_TEST_TRY(cudaGraphLaunch(exec, stream_));
  EXPECT_EQ(first_byte(), 9);
  cudaGraph_t longer = capture_memsets({1, 2});
  EXPECT_EQ(cudaGraphExecUpdate(exec, longer, &info), cudaErrorGraphExecUpdateFailure);
  static_cast<void>(cudaGetLastError());
  EXPECT_EQ(info.result, cudaGraphExecUpdateErrorTopologyChanged);
  SIM_TEST_TRY(cudaGraphLaunch(exec, stream_));
  EXPECT_EQ(first_byte(), 9);
  for (cudaGraph_t g : {first, same_shape, longer}) SIM_TEST_TRY(cudaGraphDestroy(g));
  SIM_TEST_TRY(cudaGraphExecDestroy(exec));
}

// cudaGraphGetNodes: with nodes == NULL the count is returned; "If numNodes is higher than the
// actual number of nodes, the remaining entries in nodes will be set to NULL".
TEST_F(capture_rules, graph_nodes_are_counted_and_listed) {
  cudaGraph_t graph = nullptr;
  SIM_TEST_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  SIM_TEST_TRY(cudaMemsetAsync(x_, 1, bytes, stream_));
  SIM_TEST_TRY(cudaMemcpyAsync(x_ + 1, x_, 1, cudaMemcpyDeviceToDevice, stream_));
  SIM_TEST_TRY(cudaStreamEndCapture(stream_, &graph));
  std::size_t count = 0;
  SIM_TEST_TRY(cudaGraphGetNodes(graph, nullptr, &count));
  ASSERT_EQ(count, 2U);
  std::vector<cudaGraphNode_t> nodes(4, reinterpret_cast<cudaGraphNode_t>(std::uintptr_t{1}));
  count = nodes.size();
  SIM_TEST_TRY(cudaGraphGetNodes(graph, nodes.data(), &count));
  EXPECT_EQ(count, 2U);
  EXPECT_EQ(nodes[2], nullptr);
  EXPECT_EQ(nodes[3], nullptr);
  cudaGraphNodeType type{};
  SIM_TEST_TRY(cudaGraphNodeGetType(nodes[0], &type));
  EXPECT_EQ(type, cudaGraphNodeTypeMemset);
  SIM_TEST_TRY(cudaGraphNodeGetType(nodes[1], &type));
  EXPECT_EQ(type, cudaGraphNodeTypeMemcpy);
  SIM_TEST_TRY(cudaGraphDestroy(graph));
}

namespace {

// Runs `body` with this thread in Relaxed mode: the set-up and clean-up of a probed call.
template <class Body>
void relaxed(Body&& body) {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  SIM_TEST_TRY(cudaThreadExchangeStreamCaptureMode(&mode));
  body();
  SIM_TEST_TRY(cudaThreadExchangeStreamCaptureMode(&mode));
}

}  // namespace

// Which calls a thread in Global mode may make while another thread holds a Global capture, as an
// H100 with CUDA 13.0 answers (docs/validation.md; cudaThreadExchangeStreamCaptureMode leaves the
// "potentially unsafe" calls unlisted): instantiating or destroying an executable graph, an
// allocation or a free fail with cudaErrorStreamCaptureUnsupported and invalidate the capture;
// destroying a graph, an event or a stream does not. In Relaxed mode each of them succeeds.
// cudaMallocAsync has no recorded answer: it is taken as unsafe, like cudaFreeAsync (the
// stricter reading), and scripts/gpu-check.sh runs this test to answer it.
TEST_F(capture_rules, unsafe_calls_beside_another_threads_global_capture) {
  cudaGraph_t template_graph = nullptr;
  SIM_TEST_TRY(cudaStreamBeginCapture(side_, cudaStreamCaptureModeGlobal));
  SIM_TEST_TRY(cudaMemsetAsync(x_, 2, bytes, side_));
  SIM_TEST_TRY(cudaStreamEndCapture(side_, &template_graph));
  struct call {
    char const* name;
    bool unsafe;
    cudaError_t (*run)(cudaGraph_t);
  };
  call const calls[] = {
      {"cudaGraphInstantiate", true,
       [](cudaGraph_t g) {
         cudaGraphExec_t exec = nullptr;
         cudaError_t const e = cudaGraphInstantiate(&exec, g, 0);
         if (exec != nullptr) SIM_TEST_TRY(cudaGraphExecDestroy(exec));
         return e;
       }},
      {"cudaMalloc", true,
       [](cudaGraph_t) {
         void* p = nullptr;
         cudaError_t const e = cudaMalloc(&p, 64);
         if (p != nullptr) SIM_TEST_TRY(cudaFree(p));
         return e;
       }},
      {"cudaMallocAsync", true,
       [](cudaGraph_t) {
         cudaStream_t stream = nullptr;
         SIM_TEST_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
         void* p = nullptr;
         cudaError_t const e = cudaMallocAsync(&p, 64, stream);
         if (p != nullptr) relaxed([&] { SIM_TEST_TRY(cudaFreeAsync(p, stream)); });
         relaxed([&] { SIM_TEST_TRY(cudaStreamSynchronize(stream)); });
         SIM_TEST_TRY(cudaStreamDestroy(stream));
         return e;
       }},
      {"cudaFreeAsync", true,
       [](cudaGraph_t) {
         cudaStream_t stream = nullptr;
         SIM_TEST_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
         void* p = nullptr;
         relaxed([&] { SIM_TEST_TRY(cudaMallocAsync(&p, 64, stream)); });
         cudaError_t const e = cudaFreeAsync(p, stream);
         if (e != cudaSuccess) relaxed([&] { SIM_TEST_TRY(cudaFreeAsync(p, stream)); });
         relaxed([&] { SIM_TEST_TRY(cudaStreamSynchronize(stream)); });
         SIM_TEST_TRY(cudaStreamDestroy(stream));
         return e;
       }},
      {"cudaGraphDestroy", false,
       [](cudaGraph_t g) {
         cudaGraph_t clone = nullptr;
         SIM_TEST_TRY(cudaGraphClone(&clone, g));
         return cudaGraphDestroy(clone);
       }},
      {"cudaEventDestroy", false,
       [](cudaGraph_t) {
         cudaEvent_t event = nullptr;
         SIM_TEST_TRY(cudaEventCreate(&event));
         return cudaEventDestroy(event);
       }},
      {"cudaStreamDestroy", false,
       [](cudaGraph_t) {
         cudaStream_t stream = nullptr;
         SIM_TEST_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
         return cudaStreamDestroy(stream);
       }},
  };
  for (auto mode : {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeRelaxed}) {
    for (call const& c : calls) {
      SCOPED_TRACE(std::string{c.name} +
                   (mode == cudaStreamCaptureModeGlobal ? " in Global mode" : " in Relaxed mode"));
      SIM_TEST_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
      SIM_TEST_TRY(cudaMemsetAsync(x_, 1, bytes, stream_));
      cudaError_t result = cudaSuccess;
      std::thread other{[&] {
        cudaStreamCaptureMode exchanged = mode;
        SIM_TEST_TRY(cudaThreadExchangeStreamCaptureMode(&exchanged));
        result = c.run(template_graph);
        static_cast<void>(cudaGetLastError());
        SIM_TEST_TRY(cudaThreadExchangeStreamCaptureMode(&exchanged));
      }};
      other.join();
      bool const refused = c.unsafe && mode == cudaStreamCaptureModeGlobal;
      EXPECT_EQ(result, refused ? cudaErrorStreamCaptureUnsupported : cudaSuccess);
      end_expecting(refused ? cudaErrorStreamCaptureInvalidated : cudaSuccess);
    }
  }
  SIM_TEST_TRY(cudaGraphDestroy(template_graph));
}

// A synchronous copy or memset goes to the legacy stream. Beside a capture of a non-blocking
// stream it runs at once, in every capture mode, and leaves the capture intact; beside a
// blocking stream's capture it is cudaErrorStreamCaptureImplicit and invalidates it (an H100
// with CUDA 13.0, docs/validation.md).
TEST_F(capture_rules, synchronous_copies_run_beside_a_non_blocking_capture) {
  cudaStream_t blocking = nullptr;
  SIM_TEST_TRY(cudaStreamCreate(&blocking));
  for (auto mode : {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal,
                    cudaStreamCaptureModeRelaxed}) {
    unsigned char host = 7;
    SIM_TEST_TRY(cudaStreamBeginCapture(stream_, mode));
    SIM_TEST_TRY(cudaMemsetAsync(x_, 9, bytes, stream_));  // captured, not run
    EXPECT_EQ(cudaMemcpy(&host, x_, 1, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(host, 0) << "the copy ran at once, before any captured work";
    EXPECT_EQ(cudaMemset(x_ + 1, 3, 1), cudaSuccess);
    EXPECT_EQ(capture_status(stream_), cudaStreamCaptureStatusActive);
    end_expecting(cudaSuccess);

    SIM_TEST_TRY(cudaStreamBeginCapture(blocking, mode));
    EXPECT_EQ(cudaMemcpy(&host, x_, 1, cudaMemcpyDeviceToHost), cudaErrorStreamCaptureImplicit);
    static_cast<void>(cudaGetLastError());
    EXPECT_EQ(capture_status(blocking), cudaStreamCaptureStatusInvalidated);
    cudaGraph_t graph = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(blocking, &graph), cudaErrorStreamCaptureInvalidated);
    static_cast<void>(cudaGetLastError());
  }
  SIM_TEST_TRY(cudaStreamDestroy(blocking));
}

// --- graph memory nodes (cudaMallocAsync and cudaFreeAsync in a capture) ---------------------

// A graph of one allocation, a memset of it and, when `freed`, its free; the allocation's
// address in `memory`.
cudaGraph_t capture_allocation(cudaStream_t stream, bool freed, void*& memory) {
  cudaGraph_t graph = nullptr;
  SIM_TEST_TRY(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  SIM_TEST_TRY(cudaMallocAsync(&memory, 256, stream));
  SIM_TEST_TRY(cudaMemsetAsync(memory, 1, 256, stream));
  if (freed) SIM_TEST_TRY(cudaFreeAsync(memory, stream));
  SIM_TEST_TRY(cudaStreamEndCapture(stream, &graph));
  return graph;
}

// cudaGraphInstantiate: "If graph contains any allocation or free nodes, there can be at most one
// executable graph in existence for that graph at a time. An attempt to instantiate a second
// executable graph before destroying the first with cudaGraphExecDestroy will result in an
// error"; the only error it lists is cudaErrorInvalidValue (which error a GPU gives is an open
// question in docs/validation.md).
TEST_F(capture_rules, a_graph_with_memory_nodes_has_one_executable_at_a_time) {
  void* memory = nullptr;
  cudaGraph_t graph = capture_allocation(stream_, true, memory);
  cudaGraphExec_t first = nullptr;
  SIM_TEST_TRY(cudaGraphInstantiate(&first, graph, 0));
  cudaGraphExec_t second = nullptr;
  EXPECT_EQ(cudaGraphInstantiate(&second, graph, 0), cudaErrorInvalidValue);
  EXPECT_EQ(second, nullptr);
  static_cast<void>(cudaGetLastError());
  SIM_TEST_TRY(cudaGraphExecDestroy(first));
  SIM_TEST_TRY(cudaGraphInstantiate(&second, graph, 0));
  SIM_TEST_TRY(cudaGraphLaunch(second, stream_));
  SIM_TEST_TRY(cudaStreamSynchronize(stream_));
  SIM_TEST_TRY(cudaGraphExecDestroy(second));
  SIM_TEST_TRY(cudaGraphDestroy(graph));

  // A graph without memory nodes has as many executables as asked for.
  SIM_TEST_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  SIM_TEST_TRY(cudaMemsetAsync(x_, 1, bytes, stream_));
  SIM_TEST_TRY(cudaStreamEndCapture(stream_, &graph));
  SIM_TEST_TRY(cudaGraphInstantiate(&first, graph, 0));
  SIM_TEST_TRY(cudaGraphInstantiate(&second, graph, 0));
  for (cudaGraphExec_t exec : {first, second}) SIM_TEST_TRY(cudaGraphExecDestroy(exec));
  SIM_TEST_TRY(cudaGraphDestroy(graph));
}

// cudaGraphLaunch: "If any allocations created by graphExec remain unfreed (from a previous
// launch) and graphExec was not instantiated with cudaGraphInstantiateFlagAutoFreeOnLaunch, the
// launch will fail with cudaErrorInvalidValue". cudaGraphAddMemAllocNode: an allocation the
// graph does not free "can be freed by ... passing the allocation to cudaMemFreeAsync".
TEST_F(capture_rules, an_executable_whose_allocations_are_unfreed_cannot_launch_again) {
  void* memory = nullptr;
  cudaGraph_t graph = capture_allocation(stream_, false, memory);
  cudaGraphExec_t exec = nullptr;
  SIM_TEST_TRY(cudaGraphInstantiate(&exec, graph, 0));
  SIM_TEST_TRY(cudaGraphLaunch(exec, stream_));
  EXPECT_EQ(cudaGraphLaunch(exec, stream_), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
  SIM_TEST_TRY(cudaFreeAsync(memory, stream_));
  SIM_TEST_TRY(cudaGraphLaunch(exec, stream_));
  SIM_TEST_TRY(cudaFreeAsync(memory, stream_));
  SIM_TEST_TRY(cudaStreamSynchronize(stream_));
  SIM_TEST_TRY(cudaGraphExecDestroy(exec));

  // With cudaGraphInstantiateFlagAutoFreeOnLaunch each launch frees what the previous one left.
  SIM_TEST_TRY(
      cudaGraphInstantiateWithFlags(&exec, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch));
  for (int launch = 0; launch < 3; ++launch) SIM_TEST_TRY(cudaGraphLaunch(exec, stream_));
  SIM_TEST_TRY(cudaFreeAsync(memory, stream_));
  SIM_TEST_TRY(cudaStreamSynchronize(stream_));
  SIM_TEST_TRY(cudaGraphExecDestroy(exec));
  SIM_TEST_TRY(cudaGraphDestroy(graph));
}

// cudaGraphAddMemAllocNode: an allocation freed in its own graph "cannot be freed outside the
// owning graph". Freeing one the graph does not free, before a launch made it or a second time
// after it was freed, is refused too: the stricter reading where the documentation is silent
// (an open question in docs/validation.md). cudaFreeAsync lists cudaErrorInvalidValue.
TEST_F(capture_rules, a_graph_allocation_is_freed_once_and_outside_only_when_its_graph_does_not) {
  void* memory = nullptr;
  cudaGraph_t graph = capture_allocation(stream_, true, memory);
  cudaGraphExec_t exec = nullptr;
  SIM_TEST_TRY(cudaGraphInstantiate(&exec, graph, 0));
  SIM_TEST_TRY(cudaGraphLaunch(exec, stream_));
  EXPECT_EQ(cudaFreeAsync(memory, stream_), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
  SIM_TEST_TRY(cudaStreamSynchronize(stream_));
  SIM_TEST_TRY(cudaGraphExecDestroy(exec));
  SIM_TEST_TRY(cudaGraphDestroy(graph));

  graph = capture_allocation(stream_, false, memory);
  SIM_TEST_TRY(cudaGraphInstantiate(&exec, graph, 0));
  EXPECT_EQ(cudaFreeAsync(memory, stream_), cudaErrorInvalidValue) << "not allocated yet";
  static_cast<void>(cudaGetLastError());
  SIM_TEST_TRY(cudaGraphLaunch(exec, stream_));
  SIM_TEST_TRY(cudaFreeAsync(memory, stream_));
  EXPECT_EQ(cudaFreeAsync(memory, stream_), cudaErrorInvalidValue) << "freed twice";
  static_cast<void>(cudaGetLastError());
  SIM_TEST_TRY(cudaStreamSynchronize(stream_));
  SIM_TEST_TRY(cudaGraphExecDestroy(exec));
  SIM_TEST_TRY(cudaGraphDestroy(graph));
}

// cudaGraphAddMemAllocNode: "These allocations cannot be freed outside the owning graph, and
// they can only be freed once in the owning graph ... It is not possible to free an allocation in
// both the owning graph and another graph. If the allocation is freed in the same graph, a free
// node cannot be added to another graph. If the allocation is freed in another graph, a free node
// can no longer be added to the owning graph". cudaGraphAddMemFreeNode "will return
// cudaErrorInvalidValue if the user attempts to free: an allocation twice in the same graph; an
// address that was not returned by an allocation node; an invalid address". A captured
// cudaFreeAsync that breaks these rules is refused alike and invalidates the capture (the
// stricter reading, an open question in docs/validation.md).
TEST_F(capture_rules, an_allocation_is_freed_once_and_in_one_graph_only) {
  void* memory = nullptr;
  cudaGraph_t owner = capture_allocation(stream_, true, memory);
  cudaGraphNode_t node = nullptr;
  EXPECT_EQ(cudaGraphAddMemFreeNode(&node, owner, nullptr, 0, memory), cudaErrorInvalidValue)
      << "freed twice in its graph";
  static_cast<void>(cudaGetLastError());
  cudaGraph_t other = nullptr;
  SIM_TEST_TRY(cudaGraphCreate(&other, 0));
  EXPECT_EQ(cudaGraphAddMemFreeNode(&node, other, nullptr, 0, memory), cudaErrorInvalidValue)
      << "freed in its own graph and another";
  static_cast<void>(cudaGetLastError());
  for (void* address : {static_cast<void*>(x_), static_cast<void*>(x_ + 1),
                        static_cast<void*>(static_cast<unsigned char*>(memory) + 16),
                        static_cast<void*>(nullptr)}) {
    EXPECT_EQ(cudaGraphAddMemFreeNode(&node, other, nullptr, 0, address), cudaErrorInvalidValue)
        << "not an address an allocation node returned";
    static_cast<void>(cudaGetLastError());
  }

  // A captured second free, in the owning graph and in another.
  cudaGraph_t captured = nullptr;
  SIM_TEST_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  void* twice = nullptr;
  SIM_TEST_TRY(cudaMallocAsync(&twice, 256, stream_));
  SIM_TEST_TRY(cudaFreeAsync(twice, stream_));
  EXPECT_EQ(cudaFreeAsync(twice, stream_), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
  EXPECT_EQ(cudaStreamEndCapture(stream_, &captured), cudaErrorStreamCaptureInvalidated);
  static_cast<void>(cudaGetLastError());
  SIM_TEST_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  EXPECT_EQ(cudaFreeAsync(memory, stream_), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
  EXPECT_EQ(cudaStreamEndCapture(stream_, &captured), cudaErrorStreamCaptureInvalidated);
  static_cast<void>(cudaGetLastError());

  // An allocation its graph does not free is freed by another graph, and then no longer by its
  // own; launching the freeing graph frees it, so the owner launches again.
  void* kept = nullptr;
  cudaGraph_t allocating = capture_allocation(stream_, false, kept);
  cudaGraphNode_t freeing = nullptr;
  SIM_TEST_TRY(cudaGraphAddMemFreeNode(&freeing, other, nullptr, 0, kept));
  void* named = nullptr;
  SIM_TEST_TRY(cudaGraphMemFreeNodeGetParams(freeing, &named));
  EXPECT_EQ(named, kept);
  EXPECT_EQ(cudaGraphAddMemFreeNode(&node, allocating, nullptr, 0, kept), cudaErrorInvalidValue)
      << "freed in another graph already";
  static_cast<void>(cudaGetLastError());
  cudaGraphExec_t allocates = nullptr;
  cudaGraphExec_t frees = nullptr;
  SIM_TEST_TRY(cudaGraphInstantiate(&allocates, allocating, 0));
  SIM_TEST_TRY(cudaGraphInstantiate(&frees, other, 0));
  SIM_TEST_TRY(cudaGraphLaunch(allocates, stream_));
  SIM_TEST_TRY(cudaGraphLaunch(frees, stream_));
  SIM_TEST_TRY(cudaGraphLaunch(allocates, stream_));
  SIM_TEST_TRY(cudaFreeAsync(kept, stream_));
  SIM_TEST_TRY(cudaStreamSynchronize(stream_));
  for (cudaGraphExec_t exec : {allocates, frees}) SIM_TEST_TRY(cudaGraphExecDestroy(exec));
  for (cudaGraph_t graph : {owner, other, allocating}) SIM_TEST_TRY(cudaGraphDestroy(graph));
}

// cudaGraphMemAllocNodeGetParams returns the allocation's address and size.
TEST_F(capture_rules, an_allocation_node_gives_its_address_and_size) {
  void* memory = nullptr;
  cudaGraph_t graph = capture_allocation(stream_, true, memory);
  std::size_t count = 0;
  SIM_TEST_TRY(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  SIM_TEST_TRY(cudaGraphGetNodes(graph, nodes.data(), &count));
  int allocations = 0;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    SIM_TEST_TRY(cudaGraphNodeGetType(node, &type));
    if (type != cudaGraphNodeTypeMemAlloc) {
      cudaMemAllocNodeParams params{};
      EXPECT_EQ(cudaGraphMemAllocNodeGetParams(node, &params), cudaErrorInvalidValue);
      static_cast<void>(cudaGetLastError());
      continue;
    }
    ++allocations;
    cudaMemAllocNodeParams params{};
    SIM_TEST_TRY(cudaGraphMemAllocNodeGetParams(node, &params));
    EXPECT_EQ(params.dptr, memory);
    EXPECT_EQ(params.bytesize, 256U);
  }
  EXPECT_EQ(allocations, 1);
  SIM_TEST_TRY(cudaGraphDestroy(graph));
}

// The graphs' allocator (cuda_runtime_api.h, cudaDeviceGetGraphMemAttribute): UsedMemCurrent is
// the memory "currently associated with graphs", ReservedMemCurrent what is "currently allocated
// for use by the CUDA graphs asynchronous allocator", each with a high watermark that "can only
// be reset to zero". cudaDeviceGraphMemTrim frees "Blocks which are not in use by a graph that is
// either currently executing or scheduled to execute"; the Programming Guide ("Graph Memory
// Nodes") counts allocations not yet freed as in use, and destroying a graph does not give its
// memory back to the OS.
TEST_F(capture_rules, graph_memory_counts_live_allocations_and_trim_gives_unused_memory_back) {
  int device = 0;
  SIM_TEST_TRY(cudaGetDevice(&device));
  auto const get = [device](cudaGraphMemAttributeType attribute) {
    std::uint64_t value = 0;  // cuuint64_t
    SIM_TEST_TRY(cudaDeviceGetGraphMemAttribute(device, attribute, &value));
    return value;
  };
  SIM_TEST_TRY(cudaDeviceGraphMemTrim(device));
  std::uint64_t const used_before = get(cudaGraphMemAttrUsedMemCurrent);
  std::uint64_t const reserved_before = get(cudaGraphMemAttrReservedMemCurrent);
  EXPECT_GE(reserved_before, used_before);
  std::uint64_t zero = 0;
  SIM_TEST_TRY(cudaDeviceSetGraphMemAttribute(device, cudaGraphMemAttrUsedMemHigh, &zero));
  SIM_TEST_TRY(
      cudaDeviceSetGraphMemAttribute(device, cudaGraphMemAttrReservedMemHigh, &zero));
  EXPECT_LE(get(cudaGraphMemAttrUsedMemHigh), used_before);
  EXPECT_LE(get(cudaGraphMemAttrReservedMemHigh), reserved_before);

  constexpr std::uint64_t size = std::uint64_t{4} << 20;
  cudaGraph_t graph = nullptr;
  void* memory = nullptr;
  SIM_TEST_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  SIM_TEST_TRY(cudaMallocAsync(&memory, size, stream_));
  SIM_TEST_TRY(cudaMemsetAsync(memory, 1, size, stream_));
  SIM_TEST_TRY(cudaStreamEndCapture(stream_, &graph));
  cudaGraphExec_t exec = nullptr;
  SIM_TEST_TRY(cudaGraphInstantiate(&exec, graph, 0));
  SIM_TEST_TRY(cudaGraphLaunch(exec, stream_));
  SIM_TEST_TRY(cudaStreamSynchronize(stream_));
  EXPECT_GE(get(cudaGraphMemAttrUsedMemCurrent), used_before + size);
  EXPECT_GE(get(cudaGraphMemAttrReservedMemCurrent), get(cudaGraphMemAttrUsedMemCurrent));
  EXPECT_GE(get(cudaGraphMemAttrUsedMemHigh), get(cudaGraphMemAttrUsedMemCurrent));
  EXPECT_GE(get(cudaGraphMemAttrReservedMemHigh), get(cudaGraphMemAttrReservedMemCurrent));
  SIM_TEST_TRY(cudaDeviceGraphMemTrim(device));
  EXPECT_GE(get(cudaGraphMemAttrReservedMemCurrent), used_before + size)
      << "an allocation not yet freed is in use";

  SIM_TEST_TRY(cudaFreeAsync(memory, stream_));
  SIM_TEST_TRY(cudaStreamSynchronize(stream_));
  SIM_TEST_TRY(cudaGraphExecDestroy(exec));
  SIM_TEST_TRY(cudaGraphDestroy(graph));
  EXPECT_EQ(get(cudaGraphMemAttrUsedMemCurrent), used_before);
  EXPECT_GE(get(cudaGraphMemAttrReservedMemCurrent), used_before + size)
      << "kept by the allocator until trimmed";
  EXPECT_GE(get(cudaGraphMemAttrUsedMemHigh), used_before + size) << "the watermark stays";
  SIM_TEST_TRY(cudaDeviceGraphMemTrim(device));
  EXPECT_EQ(get(cudaGraphMemAttrReservedMemCurrent), reserved_before);
  EXPECT_GE(get(cudaGraphMemAttrReservedMemHigh), used_before + size);
}

// cudaDeviceGetGraphMemAttribute and cudaDeviceSetGraphMemAttribute list cudaErrorInvalidDevice;
// only the high watermarks may be set, and "High watermark can only be reset to zero": other
// values and attributes are refused with cudaErrorInvalidValue, and cudaDeviceGraphMemTrim's
// only error listed is cudaErrorInvalidValue (both open questions in docs/validation.md).
TEST_F(capture_rules, graph_memory_attributes_refuse_what_the_header_does_not_allow) {
  int count = 0;
  SIM_TEST_TRY(cudaGetDeviceCount(&count));
  std::uint64_t value = 0;
  for (int device : {-1, count}) {
    EXPECT_EQ(cudaDeviceGetGraphMemAttribute(device, cudaGraphMemAttrUsedMemCurrent, &value),
              cudaErrorInvalidDevice);
    EXPECT_EQ(cudaDeviceSetGraphMemAttribute(device, cudaGraphMemAttrUsedMemHigh, &value),
              cudaErrorInvalidDevice);
    EXPECT_EQ(cudaDeviceGraphMemTrim(device), cudaErrorInvalidValue);
    static_cast<void>(cudaGetLastError());
  }
  int device = 0;
  SIM_TEST_TRY(cudaGetDevice(&device));
  std::uint64_t five = 5;
  EXPECT_EQ(cudaDeviceSetGraphMemAttribute(device, cudaGraphMemAttrUsedMemHigh, &five),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceSetGraphMemAttribute(device, cudaGraphMemAttrReservedMemHigh, &five),
            cudaErrorInvalidValue);
  value = 0;
  EXPECT_EQ(cudaDeviceSetGraphMemAttribute(device, cudaGraphMemAttrUsedMemCurrent, &value),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceSetGraphMemAttribute(device, cudaGraphMemAttrReservedMemCurrent, &value),
            cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

// cudaGraphAddChildGraphNode: "If childGraph contains allocation nodes, free nodes, or
// conditional nodes, this call will return an error" (cudaErrorInvalidValue, the only one
// listed); cudaGraphAddNode refuses it too (moving the ownership to the parent,
// cudaGraphChildGraphOwnershipMove, is not modelled and refused alike).
TEST_F(capture_rules, a_graph_with_memory_nodes_cannot_become_a_child_graph) {
  void* memory = nullptr;
  cudaGraph_t child = capture_allocation(stream_, true, memory);
  cudaGraph_t parent = nullptr;
  SIM_TEST_TRY(cudaGraphCreate(&parent, 0));
  cudaGraphNode_t node = nullptr;
  EXPECT_EQ(cudaGraphAddChildGraphNode(&node, parent, nullptr, 0, child), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
  cudaGraphNodeParams params{};
  params.type = cudaGraphNodeTypeGraph;
  params.graph.graph = child;
  EXPECT_EQ(cudaGraphAddNode(&node, parent, nullptr, nullptr, 0, &params), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
  std::size_t count = 0;
  SIM_TEST_TRY(cudaGraphGetNodes(parent, nullptr, &count));
  EXPECT_EQ(count, 0U);
  SIM_TEST_TRY(cudaGraphDestroy(parent));
  SIM_TEST_TRY(cudaGraphDestroy(child));
}

// cudaGraphInstantiateWithFlags: cudaGraphInstantiateFlagDeviceLaunch "cannot be used in
// conjunction with cudaGraphInstantiateFlagAutoFreeOnLaunch"; a graph for device launch "can
// only contain kernel nodes, memcpy nodes, memset nodes, and child graph nodes" and "cannot be
// empty". The only error listed is cudaErrorInvalidValue.
TEST_F(capture_rules, instantiation_flags_the_header_forbids_together_are_refused) {
  cudaGraph_t graph = nullptr;
  SIM_TEST_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  SIM_TEST_TRY(cudaMemsetAsync(x_, 1, bytes, stream_));
  SIM_TEST_TRY(cudaStreamEndCapture(stream_, &graph));
  cudaGraphExec_t exec = nullptr;
  EXPECT_EQ(cudaGraphInstantiateWithFlags(
                &exec, graph,
                cudaGraphInstantiateFlagDeviceLaunch | cudaGraphInstantiateFlagAutoFreeOnLaunch),
            cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
  SIM_TEST_TRY(
      cudaGraphInstantiateWithFlags(&exec, graph, cudaGraphInstantiateFlagDeviceLaunch));
  SIM_TEST_TRY(cudaGraphExecDestroy(exec));
  SIM_TEST_TRY(cudaGraphDestroy(graph));

  void* memory = nullptr;
  graph = capture_allocation(stream_, true, memory);
  EXPECT_EQ(cudaGraphInstantiateWithFlags(&exec, graph, cudaGraphInstantiateFlagDeviceLaunch),
            cudaErrorInvalidValue)
      << "memory nodes cannot be launched from the device";
  static_cast<void>(cudaGetLastError());
  SIM_TEST_TRY(cudaGraphDestroy(graph));

  SIM_TEST_TRY(cudaGraphCreate(&graph, 0));
  EXPECT_EQ(cudaGraphInstantiateWithFlags(&exec, graph, cudaGraphInstantiateFlagDeviceLaunch),
            cudaErrorInvalidValue)
      << "an empty graph";
  static_cast<void>(cudaGetLastError());
  SIM_TEST_TRY(cudaGraphDestroy(graph));
}

// A graph of two IF nodes one after the other, on handles created for it in order; node k uses
// handle handles[k] (an index into those created).
cudaGraph_t conditional_graph(std::vector<int> const& handles,
                              cudaGraphConditionalNodeType type = cudaGraphCondTypeIf) {
  cudaGraph_t graph = nullptr;
  SIM_TEST_TRY(cudaGraphCreate(&graph, 0));
  std::vector<cudaGraphConditionalHandle> created(handles.size());
  for (auto& handle : created) {
    SIM_TEST_TRY(cudaGraphConditionalHandleCreate(&handle, graph, 0, 0));
  }
  cudaGraphNode_t previous = nullptr;
  for (int const index : handles) {
    cudaGraphNodeParams params{};
    params.type = cudaGraphNodeTypeConditional;
    params.conditional.handle = created[static_cast<std::size_t>(index)];
    params.conditional.type = type;
    params.conditional.size = 1;
    cudaGraphNode_t node = nullptr;
    SIM_TEST_TRY(cudaGraphAddNode(&node, graph, previous == nullptr ? nullptr : &previous,
                                        nullptr, previous == nullptr ? 0 : 1, &params));
    previous = node;
  }
  return graph;
}

// cudaGraphExecUpdate, conditional nodes: "Changing node parameters is not supported", while
// "Conditional handle flags and default values are updated as part of the graph update": the
// handles of the two graphs pair (here by creation order, as nodes pair), and a node whose
// handle is not the one paired with its executable node's handle, or whose type changed, is
// refused with cudaGraphExecUpdateErrorParametersChanged. How a GPU pairs handles is an open
// question in docs/validation.md.
TEST_F(capture_rules, an_update_keeps_each_conditional_nodes_handle_and_type) {
  cudaGraph_t original = conditional_graph({0, 1});
  cudaGraphExec_t exec = nullptr;
  SIM_TEST_TRY(cudaGraphInstantiate(&exec, original, 0));
  cudaGraphExecUpdateResultInfo info{};
  cudaGraph_t same = conditional_graph({0, 1});
  EXPECT_EQ(cudaGraphExecUpdate(exec, same, &info), cudaSuccess);
  EXPECT_EQ(info.result, cudaGraphExecUpdateSuccess);
  static_cast<void>(cudaGetLastError());

  cudaGraph_t swapped = conditional_graph({1, 0});
  EXPECT_EQ(cudaGraphExecUpdate(exec, swapped, &info), cudaErrorGraphExecUpdateFailure);
  EXPECT_EQ(info.result, cudaGraphExecUpdateErrorParametersChanged);
  static_cast<void>(cudaGetLastError());

  cudaGraph_t loops = conditional_graph({0, 1}, cudaGraphCondTypeWhile);
  EXPECT_EQ(cudaGraphExecUpdate(exec, loops, &info), cudaErrorGraphExecUpdateFailure);
  EXPECT_EQ(info.result, cudaGraphExecUpdateErrorParametersChanged);
  static_cast<void>(cudaGetLastError());
  SIM_TEST_TRY(cudaGraphExecDestroy(exec));
  for (cudaGraph_t g : {original, same, swapped, loops}) SIM_TEST_TRY(cudaGraphDestroy(g));
}

// The legacy stream beside a capturing blocking stream "is in an unusable state"
// (cudaStreamIsCapturing): a wait for an event is a use of it too, refused with
// cudaErrorStreamCaptureImplicit and invalidating the capture, as a memset there is. What a GPU
// answers for a wait is an open question in docs/validation.md.
TEST_F(capture_rules, the_legacy_stream_cannot_wait_beside_a_blocking_capture) {
  cudaEvent_t event = nullptr;
  SIM_TEST_TRY(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  SIM_TEST_TRY(cudaEventRecord(event, side_));
  cudaStream_t blocking = nullptr;
  SIM_TEST_TRY(cudaStreamCreate(&blocking));
  SIM_TEST_TRY(cudaStreamBeginCapture(blocking, cudaStreamCaptureModeRelaxed));
  EXPECT_EQ(cudaStreamWaitEvent(cudaStreamLegacy, event, 0), cudaErrorStreamCaptureImplicit);
  static_cast<void>(cudaGetLastError());
  EXPECT_EQ(capture_status(blocking), cudaStreamCaptureStatusInvalidated);
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(blocking, &graph), cudaErrorStreamCaptureInvalidated);
  static_cast<void>(cudaGetLastError());

  // Nor may it join a capture by waiting for one of its events: it cannot capture.
  SIM_TEST_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
  SIM_TEST_TRY(cudaEventRecord(event, stream_));
  EXPECT_EQ(cudaStreamWaitEvent(cudaStreamLegacy, event, 0), cudaErrorStreamCaptureImplicit);
  static_cast<void>(cudaGetLastError());
  EXPECT_EQ(capture_status(stream_), cudaStreamCaptureStatusInvalidated);
  end_expecting(cudaErrorStreamCaptureInvalidated);
  SIM_TEST_TRY(cudaStreamDestroy(blocking));
  SIM_TEST_TRY(cudaEventDestroy(event));
}

// cuMemRelease: "The memory allocation will be freed when all outstanding mappings to the memory
// are unmapped ... The generic memory handle can be freed when there are still outstanding
// mappings made with this handle": the device's free memory comes back at the unmap, not at the
// release. (Named to run alone: cudaMemGetInfo counts the whole device.)
TEST_F(capture_rules, released_memory_still_mapped_gives_unused_memory_back_only_when_unmapped) {
  auto entry = [](char const* name) {
    void* function = nullptr;
    cudaDriverEntryPointQueryResult found{};
    SIM_TEST_TRY(
        cudaGetDriverEntryPointByVersion(name, &function, 12000, cudaEnableDefault, &found));
    EXPECT_EQ(found, cudaDriverEntryPointSuccess) << name;
    return function;
  };
  auto* const create = reinterpret_cast<decltype(&cuMemCreate)>(entry("cuMemCreate"));
  auto* const release = reinterpret_cast<decltype(&cuMemRelease)>(entry("cuMemRelease"));
  auto* const reserve =
      reinterpret_cast<decltype(&cuMemAddressReserve)>(entry("cuMemAddressReserve"));
  auto* const unreserve = reinterpret_cast<decltype(&cuMemAddressFree)>(entry("cuMemAddressFree"));
  auto* const map = reinterpret_cast<decltype(&cuMemMap)>(entry("cuMemMap"));
  auto* const unmap = reinterpret_cast<decltype(&cuMemUnmap)>(entry("cuMemUnmap"));
  auto const free_bytes = [] {
    std::size_t free = 0;
    std::size_t total = 0;
    SIM_TEST_TRY(cudaDeviceSynchronize());
    SIM_TEST_TRY(cudaMemGetInfo(&free, &total));
    return free;
  };
  int device = 0;
  SIM_TEST_TRY(cudaGetDevice(&device));
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  std::size_t const size = std::size_t{64} << 20;  // a multiple of every GPU's granularity
  std::size_t const before = free_bytes();
  CUmemGenericAllocationHandle handle{};
  ASSERT_EQ(create(&handle, size, &prop, 0), CUDA_SUCCESS);
  CUdeviceptr address{};
  ASSERT_EQ(reserve(&address, size, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(map(address, size, 0, handle, 0), CUDA_SUCCESS);
  EXPECT_EQ(release(handle), CUDA_SUCCESS);
  EXPECT_LE(free_bytes(), before - size) << "still mapped: the memory is still in use";
  EXPECT_EQ(unmap(address, size), CUDA_SUCCESS);
  EXPECT_GE(free_bytes(), before - size / 2) << "unmapped and released: the memory is back";
  EXPECT_EQ(unreserve(address, size), CUDA_SUCCESS);
}

}  // namespace
