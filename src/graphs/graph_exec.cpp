#include <atomic>
#include <graphstep/cuda/check.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <optional>
#include <string>
#include <utility>

#include "cuda/detail/relaxed_capture_mode.hpp"
#include "cuda/detail/stream_device.hpp"
#include "graphs/detail/graph_state.hpp"

namespace graphstep::graphs {

namespace {
std::string const& empty_name() {
  static std::string const name{"graph"};
  return name;
}

// A failed cudaGraphLaunch of `exec`, named and explained.
[[noreturn]] void throw_launch_failure(cudaError_t status, cudaGraphExec_t exec,
                                       std::string const& name, graph const& source) {
  std::string why;
  unsigned long long flags = 0;
  if (status == cudaErrorInvalidValue && cudaGraphExecGetFlags(exec, &flags) == cudaSuccess &&
      (flags & cudaGraphInstantiateFlagAutoFreeOnLaunch) == 0ULL &&
      source.node_counts().memory_alloc > 0) {
    // "If any allocations created by graphExec remain unfreed (from a previous launch) and
    // graphExec was not instantiated with cudaGraphInstantiateFlagAutoFreeOnLaunch, the launch
    // will fail with cudaErrorInvalidValue" (cudaGraphLaunch).
    why =
        ": it allocates memory (cudaMallocAsync in the capture) that an earlier replay left "
        "unfreed; free it with cudaFreeAsync before replaying again, free it inside the "
        "captured step, or instantiate with cudaGraphInstantiateFlagAutoFreeOnLaunch";
  }
  if (why.empty()) {
    cuda::detail::throw_cuda_error(static_cast<int>(status), "cudaGraphLaunch(exec, stream)",
                                   __FILE__, __LINE__);
  }
  static_cast<void>(cudaGetLastError());  // refused: later calls must not report it again
  throw cuda_error{static_cast<int>(status), "graph '" + name +
                                                 "': replay failed: " + cudaGetErrorName(status) +
                                                 " (" + cudaGetErrorString(status) + ")" + why};
}

void expect_executable(graph_exec const& exec) {
  GRAPHSTEP_EXPECTS(!exec.empty(),
                    "graph '" + exec.name() +
                        "' is empty: it was never captured, its capture failed, or it was moved "
                        "from. Capture into it before using it");
}
}  // namespace

void detail::graph_exec_deleter::operator()(pointer handle) const noexcept {
  // "Potentially unsafe": in Global mode it would fail beside another thread's Global capture,
  // and break that capture (docs/validation.md).
  cuda::detail::relaxed_capture_mode const relaxed;
  GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaGraphExecDestroy(handle));
}

graph_exec::graph_exec() noexcept = default;

graph_exec::graph_exec(cudaGraphExec_t handle, graph source) noexcept
    : source_{std::move(source)}, exec_{handle} {}

graph_exec::graph_exec(graph_exec&& other) noexcept
    : source_{std::move(other.source_)},
      updated_from_{std::exchange(other.updated_from_, std::nullopt)},
      replays_{std::exchange(other.replays_, 0)},
      checked_stream_{std::exchange(other.checked_stream_, nullptr)},
      generation_{std::move(other.generation_)},
      exec_{std::move(other.exec_)} {}

graph_exec& graph_exec::operator=(graph_exec&& other) noexcept {
  if (this != &other) {
    release();
    source_ = std::move(other.source_);
    updated_from_ = std::exchange(other.updated_from_, std::nullopt);
    replays_ = std::exchange(other.replays_, 0);
    checked_stream_ = std::exchange(other.checked_stream_, nullptr);
    generation_ = std::move(other.generation_);
    exec_ = std::move(other.exec_);
  }
  return *this;
}

graph_exec::~graph_exec() {
  release();
}

void graph_exec::reset() noexcept {
  // Outputs read after a reset are as stale as after another replay.
  if (generation_) generation_->fetch_add(1, std::memory_order_relaxed);
  release();
}

namespace {
// Waits for the latest launch of `work` to end (its completion event's latest record). Not a
// device-wide wait, and Relaxed: a capture under way on any thread stays intact.
void wait_for_end_of(detail::graph_state const* work) noexcept {
  if (work == nullptr) return;
  cuda::detail::relaxed_capture_mode const relaxed;
  GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaEventSynchronize(work->completion.get()));
}
}  // namespace

void graph_exec::release() noexcept {
  if (replays_ > 0) {
    // A replay may still be running; its memory must not be handed out before it ends. Its work
    // is the executable's own or, after an update, another graph's (whose state, once gone,
    // waited for it already).
    wait_for_end_of(source_.state_.get());
    if (updated_from_) wait_for_end_of(updated_from_->lock().get());
  }
  exec_.reset();
  source_ = graph{};
  updated_from_.reset();
  replays_ = 0;
  checked_stream_ = nullptr;
  generation_.reset();
}

std::string const& graph_exec::name() const noexcept {
  return source_.empty() ? empty_name() : source_.identity().name;
}

int graph_exec::device() const noexcept {
  return source_.empty() ? -1 : source_.identity().device;
}

std::uint64_t graph_exec::id() const noexcept {
  return source_.empty() ? 0 : source_.identity().id;
}

graph const& graph_exec::source() const {
  expect_executable(*this);
  return source_;
}

void graph_exec::replay(cuda::stream_view stream) {
  expect_executable(*this);
  GRAPHSTEP_EXPECTS(!stream.is_legacy_default(),
                    "graph '" + name() +
                        "': replaying on the legacy default stream serializes with every other "
                        "stream; replay on a graphstep::cuda::stream");
  // CUDA refuses a launch on another device's stream with a bare cudaErrorInvalidValue. A
  // stream's device never changes: asked once per stream in a row.
  if (stream.get() != checked_stream_) expect_stream_of_device(stream);
  int current = -1;
  GRAPHSTEP_CUDA_TRY(cudaGetDevice(&current));
  if (current != device()) expect_device_current(current);
  // The work it runs: its own, or that of the graph it was last updated from.
  detail::graph_state const* work = source_.state_.get();
  std::shared_ptr<detail::graph_state const> updated;
  if (updated_from_) {
    updated = updated_from_->lock();
    GRAPHSTEP_EXPECTS(updated != nullptr,
                      "graph '" + name() +
                          "' was updated to run the work of a graph that has since been "
                          "destroyed, whose memory may already be reused: update it from a "
                          "live graph before replaying it");
    work = updated.get();
  }
  cudaEvent_t end = work->completion.get();
  // Graphs sharing pool memory must never run at once: the pool orders this launch after
  // theirs. Nothing to do, and nothing asked, when this graph's latest replay was on this
  // stream and the pool has seen no other launch since (one stream replaying, the usual case).
  bool const settled = work->completion_in_graph && work->memory.replay_is_settled(stream, end);
  // A launch into a capturing stream becomes a node of that capture and runs nothing now.
  bool const runs_now = settled || !stream.is_capturing();
  if (!settled && runs_now) work->memory.before_replay(stream);
  if (cudaError_t const status = cudaGraphLaunch(exec_.get(), stream.get());
      status != cudaSuccess) {
    if (status == cudaErrorInvalidValue && stream.get() == checked_stream_) {
      // The stream checked before may have been destroyed and its handle reused by another
      // device's stream: ask again, to name the devices rather than a bare error code.
      static_cast<void>(cudaGetLastError());
      checked_stream_ = nullptr;
      expect_stream_of_device(stream);
    }
    throw_launch_failure(status, exec_.get(), name(), source_);
  }
  if (!settled && runs_now) {
    // A graph made elsewhere has no end of its own: its replay marks it (before the pool's
    // note of it, which names the event).
    if (!work->completion_in_graph) work->completion.record(stream);
    work->memory.after_replay(stream, end);
  }
  ++replays_;
  if (generation_) generation_->fetch_add(1, std::memory_order_relaxed);
}

void graph_exec::synchronize() const {
  if (replays_ == 0) return;
  // The end of the latest replay, as release() waits for it, but reporting a failure.
  cuda::detail::relaxed_capture_mode const relaxed;
  GRAPHSTEP_CUDA_TRY(cudaEventSynchronize(source_.state_->completion.get()));
  if (updated_from_) {
    if (auto const updated = updated_from_->lock(); updated != nullptr) {
      GRAPHSTEP_CUDA_TRY(cudaEventSynchronize(updated->completion.get()));
    }
  }
}

void graph_exec::expect_stream_of_device(cuda::stream_view stream) {
  std::optional<int> const stream_device = cuda::detail::stream_device(stream.get());
  GRAPHSTEP_EXPECTS(!stream_device || *stream_device == device(),
                    "graph_exec::replay: graph '" + name() + "' was captured on device " +
                        std::to_string(device()) + ", the stream belongs to device " +
                        std::to_string(stream_device.value_or(-1)) +
                        ": replay on a stream of device " + std::to_string(device()) +
                        " (one created while that device is current)");
  checked_stream_ = stream.get();
}

void graph_exec::expect_device_current(int current) const {
  GRAPHSTEP_EXPECTS(current == device(),
                    "graph '" + name() + "' was captured on device " + std::to_string(device()) +
                        " but device " + std::to_string(current) +
                        " is current: make its device current (graphstep::cuda::device_guard) "
                        "before replaying it");
}

void graph_exec::upload(cuda::stream_view stream) const {
  expect_executable(*this);
  GRAPHSTEP_CUDA_TRY(cudaGraphUpload(exec_.get(), stream.get()));
}

bool graph_exec::update(graph const& source) {
  expect_executable(*this);
  GRAPHSTEP_EXPECTS(!source.empty(), "graph '" + name() +
                                         "': update needs a captured graph to update from, and "
                                         "the one given is empty");
  cudaGraphExecUpdateResultInfo info{};
  cudaError_t const status = cudaGraphExecUpdate(exec_.get(), source.get(), &info);
  if (status != cudaSuccess) {
    static_cast<void>(cudaGetLastError());  // refused: the executable is unchanged
    return false;
  }
  if (source.state_ == source_.state_) {
    updated_from_.reset();
  } else {
    updated_from_ = source.state_;
  }
  return true;
}

output_guard graph_exec::guard_output(std::string const& what) const {
  if (!generation_) generation_ = std::make_shared<std::atomic<std::uint64_t>>(replays_);
  return output_guard{generation_, "'" + what + "' of graph '" + name() + "'"};
}

}  // namespace graphstep::graphs
