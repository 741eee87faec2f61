#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <graphstep/cuda/check.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/log.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>

#include "detail/address_text.hpp"
#include "detail/logger.hpp"
#include "graphs/detail/capture_recorder.hpp"
#include "graphs/detail/capture_trace.hpp"
#include "graphs/detail/graph_state.hpp"
#include "graphs/detail/legacy_stream_guard.hpp"

namespace graphstep::graphs {

namespace detail {

// A runtime call that failed inside a capture: one issued to a captured stream that left the
// capture valid, or the call that invalidated it.
struct failed_call {
  std::string name;
  cudaError_t error{cudaSuccess};
  std::string library_call;  // the library entry point that made it; "" when the user did
};

// What is learnt about one capture while it runs; the graph it makes takes it along.
struct capture_facts {
  std::atomic<bool> waits_for_other_processes{false};
  std::atomic<bool> abandoned{false};
  std::string scope;  // the scope's describe(), for a report at exit
  cudaStream_t stream{};
};

}  // namespace detail

namespace {

// The captures capture_scopes are making now, by CUDA's capture id, so that capture_ref::of
// finds a stream's. Only open ones: what a capture learns leaves with its graph (or with the
// capture_refs that hold it), not through here.
struct open_captures {
  std::mutex mutex;
  std::unordered_map<unsigned long long, std::shared_ptr<detail::capture_facts>> by_id;
};

open_captures& open() {
  static open_captures captures;
  return captures;
}

void enter_open(unsigned long long capture_id, std::shared_ptr<detail::capture_facts> facts) {
  if (capture_id == 0) return;  // unknown: no stream can name it
  auto& captures = open();
  std::lock_guard const lock{captures.mutex};
  captures.by_id[capture_id] = std::move(facts);
}

void leave_open(unsigned long long capture_id) noexcept {
  if (capture_id == 0) return;
  auto& captures = open();
  std::lock_guard const lock{captures.mutex};
  captures.by_id.erase(capture_id);
}

cudaStreamCaptureMode to_cuda(capture_mode mode) {
  switch (mode) {
    case capture_mode::global: return cudaStreamCaptureModeGlobal;
    case capture_mode::relaxed: return cudaStreamCaptureModeRelaxed;
    case capture_mode::this_thread: break;
  }
  return cudaStreamCaptureModeThreadLocal;
}

std::string stream_name(cudaStream_t stream) {
  return graphstep::detail::pointer_text(static_cast<void const*>(stream));
}

// What a user should do about each way a capture can fail.
char const* advice_for(cudaError_t code) {
  switch (code) {
    case cudaErrorStreamCaptureInvalidated:
    case cudaErrorStreamCaptureUnsupported:
      return "a call inside the scope cannot be captured: a synchronization "
             "(cudaStreamSynchronize, cudaEventSynchronize, cudaDeviceSynchronize), a "
             "cudaMalloc/cudaFree, or work issued to the legacy default stream (a cudaMemset "
             "or cudaMemcpy without a stream, a kernel launched without one; refused while "
             "capture_options::refuse_legacy_stream is on, else it would run once and be "
             "missing from every replay). Issue the work to the captured stream, move the call "
             "before the capture, allocate from the graphstep::memory::memory_pool given to the "
             "scope, or use capture_mode::relaxed if the call is known to be safe";
    case cudaErrorStreamCaptureImplicit:
      return "work was issued to the legacy default stream while capturing (a cudaMemset or "
             "cudaMemcpy without a stream, a kernel launched without one): it would run once "
             "instead of in every replay. Issue it to the captured stream";
    case cudaErrorStreamCaptureUnjoined:
      return "work forked to a side stream was not joined back into the capturing stream: "
             "record an event on the side stream and make the capturing stream wait on it "
             "(capture_scope::join) before the scope ends";
    case cudaErrorStreamCaptureWrongThread:
      return "the capture was ended from a different thread than the one that began it in "
             "global or this_thread mode: end it on the thread that began it";
    case cudaErrorStreamCaptureIsolation:
      return "a captured stream waited on an event recorded outside the capture: record the "
             "event inside the scope, or wait for it before the capture begins";
    case cudaErrorStreamCaptureMerge:
    case cudaErrorStreamCaptureUnmatched:
      return "two captures were merged, or a capture was ended on a stream other than the one "
             "that began it: keep one capture per scope and end it on its own stream";
    default: return "see the CUDA reason above";
  }
}

#if defined(GRAPHSTEP_CUDA_SIM)
// The simulated device's queries, handed out through the driver entry point table under names
// no driver has (sim/docs/simulator.md); null where the entry point is missing.
template <typename Query>
Query simulator_query(char const* name) {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(name, &function, CUDART_VERSION, cudaEnableDefault,
                                       &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    static_cast<void>(cudaGetLastError());
    return Query{};
  }
  return reinterpret_cast<Query>(function);
}

// A failed call the simulated device noted for the capture: 1 with the call (a string literal)
// and its cudaError_t, 0 when there is none.
using simulator_failed_call_query = int (*)(cudaStream_t capturing, char const** call, int* error);

simulator_failed_call_query simulator_failed_call() {
  static auto const query =
      simulator_query<simulator_failed_call_query>("graphstepSimCaptureFailedCall");
  return query;
}

// The call that invalidated a capture, noted by the simulated device as CUPTI's callbacks see
// it on a GPU: 1 with the CUDA call, the simulated library entry point that made it (or null;
// string literals) and its cudaError_t, 0 while the capture is valid.
using simulator_invalidation_query = int (*)(cudaStream_t capturing, char const** call,
                                             char const** library_call, int* error);

simulator_invalidation_query simulator_invalidation() {
  static auto const query =
      simulator_query<simulator_invalidation_query>("graphstepSimCaptureInvalidation");
  return query;
}
#endif

// The call that invalidated the capture `capturing` takes part in, where the device noted it (the
// simulated device); on a GPU, CUPTI's callbacks tell it (capture_scope::finish_diagnostics).
std::optional<detail::failed_call> noted_breaking_call(cudaStream_t capturing) {
#if defined(GRAPHSTEP_CUDA_SIM)
  if (simulator_invalidation_query const query = simulator_invalidation(); query != nullptr) {
    char const* call = nullptr;
    char const* library_call = nullptr;
    int error = 0;
    if (query(capturing, &call, &library_call, &error) != 0 && call != nullptr) {
      return detail::failed_call{call, static_cast<cudaError_t>(error),
                                 library_call == nullptr ? "" : library_call};
    }
  }
#else
  static_cast<void>(capturing);
#endif
  return std::nullopt;
}

// Why a capture failed with `ended`, and what to do: from the call that broke it where it is
// known (the simulated device always knows it; a GPU when capture diagnostics ran).
std::string why_it_failed(std::optional<detail::failed_call> const& broken, cudaError_t ended,
                          bool call_could_be_known) {
  if (broken) {
    return detail::explain_break(broken->name, broken->library_call,
                                 static_cast<int>(broken->error), advice_for(broken->error));
  }
  std::string why = advice_for(ended);
  bool const a_call_broke_it =
      ended == cudaErrorStreamCaptureInvalidated || ended == cudaErrorStreamCaptureUnsupported;
  if (a_call_broke_it && !call_could_be_known) {
    why +=
        ". To learn which call broke it, and inside which library call, run with "
        "GRAPHSTEP_CAPTURE_DIAGNOSTICS=1 (or capture_options::diagnose)";
  }
  return why;
}

// What a user should do about a call that failed on a captured stream without ending the capture.
std::string advice_for_failed_call(std::string const& call, cudaError_t code) {
  if (code == cudaErrorStreamCaptureUnsupported) {
    return call +
           " cannot be captured (cudaMemcpyBatchAsync cannot, with CUDA 13): issue its work with "
           "a call that can (cudaMemcpyAsync for each copy) while capturing — a library that "
           "chooses the call itself needs its non-batch path inside the scope — or make the call "
           "before the capture begins";
  }
  return "its work is missing from the graph: correct the call (the error says what CUDA "
         "refused) or make it outside the capture, and check the result of every CUDA call made "
         "inside the scope";
}

// A process that exits inside a capture scope (a library's failed status checked with exit(),
// as C trainers do) never ends it: say which captures were open and, where known, which call
// broke them, instead of leaving the library's status code as the last word.
void report_captures_open_at_exit() {
  try {
    auto& captures = open();
    std::lock_guard const lock{captures.mutex};
    for (auto const& entry : captures.by_id) {
      detail::capture_facts const& facts = *entry.second;
      std::optional<detail::failed_call> const broken = noted_breaking_call(facts.stream);
      graphstep::detail::log_lazily(log_level::error, [&] {
        std::string text = facts.scope + " was still open when the process exited";
        if (broken) {
          return text + "; " + why_it_failed(broken, broken->error, true);
        }
        return text +
               ". If a call inside it failed, run with GRAPHSTEP_CAPTURE_DIAGNOSTICS=1 to learn "
               "which, and end the scope (or let it throw) before exiting";
      });
    }
  } catch (...) {
    // Nothing more can be said at exit.
  }
}

// Runs `action` when the scope is left, by return or by exception.
template <typename Action>
class on_scope_exit {
 public:
  explicit on_scope_exit(Action action) : action_{std::move(action)} {}
  ~on_scope_exit() { action_(); }
  on_scope_exit(on_scope_exit const&) = delete;
  on_scope_exit& operator=(on_scope_exit const&) = delete;
  on_scope_exit(on_scope_exit&&) = delete;
  on_scope_exit& operator=(on_scope_exit&&) = delete;

 private:
  Action action_;
};

}  // namespace

std::string capture_diagnostics_unavailable_reason() {
  return detail::capture_diagnostics_unavailable_reason();
}

capture_scope::capture_scope(graph_exec& target, cuda::stream_view stream, capture_options options)
    : capture_scope{&target, stream, nullptr, std::move(options)} {}

capture_scope::capture_scope(graph_exec& target, cuda::stream_view stream,
                             memory::memory_pool& pool, capture_options options)
    : capture_scope{&target, stream, &pool, std::move(options)} {}

capture_scope::capture_scope(graph& target, cuda::stream_view stream, capture_options options)
    : capture_scope{&target, stream, nullptr, std::move(options)} {}

capture_scope::capture_scope(graph& target, cuda::stream_view stream, memory::memory_pool& pool,
                             capture_options options)
    : capture_scope{&target, stream, &pool, std::move(options)} {}

capture_scope::capture_scope(target_type target, cuda::stream_view stream,
                             memory::memory_pool* pool, capture_options options)
    : target_{target},
      stream_{stream},
      options_{std::move(options)},
      uncaught_at_start_{std::uncaught_exceptions()} {
  begin(pool);
}

std::string capture_scope::describe() const {
  return "capture '" + options_.name + "' on stream " + stream_name(stream_.get());
}

void capture_scope::begin(memory::memory_pool* pool) {
  GRAPHSTEP_EXPECTS(!stream_.is_legacy_default(),
                    describe() +
                        ": the legacy default stream cannot be captured. Capture a "
                        "non-blocking stream (graphstep::cuda::stream) instead");
  std::visit(
      [&](auto const* target) {
        GRAPHSTEP_EXPECTS(target->empty(),
                          describe() + ": the target graph '" + target->name() +
                              "' already holds a capture. Capture into a new graph, or move "
                              "a fresh one into it first");
      },
      target_);
  GRAPHSTEP_EXPECTS(!stream_.is_capturing(),
                    describe() +
                        ": the stream is already being captured (nested capture). "
                        "End the outer capture first, or record this work as part of "
                        "the outer graph");
  identity_.name = options_.name;
  identity_.id = next_graph_id();
  GRAPHSTEP_CUDA_TRY(cudaGetDevice(&identity_.device));
  if (options_.refuse_legacy_stream) {
    legacy_guard_ = std::make_unique<detail::legacy_stream_guard>(identity_.device);
  }
  GRAPHSTEP_CUDA_TRY(cudaStreamBeginCapture(stream_.get(), to_cuda(options_.mode)));
  active_ = true;
  if (legacy_guard_) {
    try {
      legacy_guard_->enter(stream_.get());
    } catch (...) {
      abandon();
      throw;
    }
  }
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamGetCaptureInfo(stream_.get(), &status, &capture_id_) != cudaSuccess) {
    capture_id_ = 0;  // unknown: nothing logged in it can be told apart later
    static_cast<void>(cudaGetLastError());
  }
  identity_.capture_sequence = capture_id_;
  try {
    facts_ = std::make_shared<detail::capture_facts>();
    facts_->scope = describe();
    facts_->stream = stream_.get();
    enter_open(capture_id_, facts_);
    static bool const reported_at_exit = std::atexit(&report_captures_open_at_exit) == 0;
    static_cast<void>(reported_at_exit);
  } catch (...) {
    abandon();
    throw;
  }
  begin_thread_ = std::this_thread::get_id();
  if (options_.diagnose || detail::diagnostics_requested_by_environment())
    start_diagnostics();
  try {
    if (pool != nullptr) pool_capture_ = pool->open_capture(stream_, identity_.id, options_.name);
    if (memory::memory_pool* const host = options_.host_pool; host != nullptr) {
      GRAPHSTEP_EXPECTS(host != pool,
                        "capture_options::host_pool is the capture's pool too; give the "
                        "device pool as the pool and the pinned_host pool as host_pool");
      GRAPHSTEP_EXPECTS(host->backing() == memory::pool_backing::pinned_host,
                        "capture_options::host_pool must be a pool_backing::pinned_host pool; "
                        "a device pool goes in as the capture's pool");
      host_pool_capture_ = host->open_capture(stream_, identity_.id, options_.name);
    }
  } catch (usage_error const& e) {
    abandon();  // never leave the stream capturing
    throw usage_error{describe() + ": " + e.what()};
  } catch (...) {
    abandon();
    throw;
  }
}

void capture_scope::start_diagnostics() {
  try {
    recorder_ =
        std::make_unique<detail::capture_recorder>(stream_.get(), options_.mode, options_.name);
  } catch (error const& e) {
    if (options_.diagnose) {
      abandon();  // asked for explicitly: a capture without them is not what was asked
      throw error{describe() + ": " + e.what()};
    }
    static std::once_flag warned;
    std::call_once(warned, [&] {
      graphstep::detail::log_lazily(log_level::warning, [&] {
        return std::string{"GRAPHSTEP_CAPTURE_DIAGNOSTICS is set, but "} + e.what();
      });
    });
  }
}

std::string capture_scope::finish_diagnostics(int outcome,
                                              std::optional<detail::failed_call>* breaking) {
  if (!recorder_) return {};
  diagnosis_ = recorder_->diagnose(outcome);
  if (breaking != nullptr && !*breaking && diagnosis_->cause) {
    detail::api_call const& cause = recorder_->call(diagnosis_->cause->call);
    *breaking = detail::failed_call{std::string{detail::base_api_name(cause.name)},
                                    static_cast<cudaError_t>(cause.result != 0 ? cause.result
                                                                               : outcome),
                                    diagnosis_->cause->library_call};
  }
  std::string report;
  if (diagnosis_->capture_failed || !diagnosis_->warnings.empty()) {
    report = recorder_->report(*diagnosis_);
  }
  recorder_.reset();
  if (outcome == cudaSuccess && !report.empty()) {
    graphstep::detail::log_lazily(log_level::warning,
                                  [&] { return describe() + ": " + report; });
  }
  return report;
}

// NOLINTNEXTLINE(bugprone-exception-escape): ending the capture reports its failure by throwing
capture_scope::~capture_scope() noexcept(false) {
  if (!active_) return;
  if (std::uncaught_exceptions() > uncaught_at_start_) {
    // The body threw: discard the partial graph and let the exception go on. Where a call had
    // broken the capture first (a library that returns an error status for it), say which: the
    // exception itself cannot.
    log_breaking_call();
    abandon();
    return;
  }
  end();
}

void capture_scope::log_breaking_call() noexcept {
  try {
    std::optional<detail::failed_call> broken = breaking_call();
    if (!broken && recorder_) {
      static_cast<void>(finish_diagnostics(cudaErrorStreamCaptureInvalidated, &broken));
    }
    if (!broken) return;
    graphstep::detail::log_lazily(log_level::error, [&] {
      return describe() + " was broken before the code inside it threw: " +
             why_it_failed(broken, broken->error, true) + ". The partial graph was discarded";
    });
  } catch (...) {
    // A report that cannot be made must not replace the exception in flight.
  }
}

void capture_scope::fork(cuda::stream_view side) {
  GRAPHSTEP_EXPECTS(active_, describe() + ": fork() after the capture ended");
  GRAPHSTEP_EXPECTS(side != stream_ && !side.is_legacy_default(),
                    describe() +
                        ": fork() needs a side stream other than the capturing stream "
                        "and the legacy default stream");
  GRAPHSTEP_EXPECTS(std::find(forked_.begin(), forked_.end(), side.get()) == forked_.end(),
                    describe() + ": stream " + stream_name(side.get()) +
                        " was already forked; join it before forking it again");
  cuda::event& forked = fork_events_.emplace_back();
  forked.record(stream_);
  side.wait(forked);
  forked_.push_back(side.get());
  if (std::find(sides_.begin(), sides_.end(), side.get()) == sides_.end()) {
    sides_.push_back(side.get());
  }
}

void capture_scope::join(cuda::stream_view side) {
  GRAPHSTEP_EXPECTS(active_, describe() + ": join() after the capture ended");
  auto const found = std::find(forked_.begin(), forked_.end(), side.get());
  GRAPHSTEP_EXPECTS(found != forked_.end(), describe() + ": stream " + stream_name(side.get()) +
                                                " was not forked from this capture");
  cuda::event& joined = fork_events_.emplace_back();
  joined.record(side);
  stream_.wait(joined);
  forked_.erase(found);
  // The capturing stream is ordered after the side's frees: it may take those blocks now.
  for (memory::pool_capture* side_of_pool : {&pool_capture_, &host_pool_capture_}) {
    if (side_of_pool->open()) side_of_pool->join(side, stream_);
  }
}

void capture_scope::abandon() noexcept {
  active_ = false;
  note_abandoned();
  recorder_.reset();
  if (legacy_guard_) legacy_guard_->leave(stream_.get());
  cudaGraph_t partial = nullptr;
  cudaError_t const ended = cudaStreamEndCapture(stream_.get(), &partial);
  legacy_guard_.reset();  // its stream left the capture with the end, not with the join
  if (ended == cudaSuccess && partial != nullptr) {
    GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaGraphDestroy(partial));
  }
  static_cast<void>(cudaGetLastError());
  pool_capture_.abandon();
  host_pool_capture_.abandon();
}

void capture_scope::end() {
  GRAPHSTEP_EXPECTS(active_, describe() + ": end() was called after the capture had ended");
  GRAPHSTEP_EXPECTS(
      options_.mode == capture_mode::relaxed || std::this_thread::get_id() == begin_thread_,
      describe() +
          ": end() was called on another thread than the one that began "
          "the capture, which CUDA refuses outside capture_mode::relaxed. "
          "End it on the thread that began it; the capture is still open");
  if (!forked_.empty()) {
    std::ostringstream sides;
    for (cudaStream_t side : forked_) sides << ' ' << stream_name(side);
    abandon();
    throw capture_error{cudaErrorStreamCaptureUnjoined,
                        describe() + ": side stream(s)" + sides.str() +
                            " were forked but never joined: call join(side) for each before "
                            "the capture ends. The partial graph was discarded"};
  }
  active_ = false;
  // Every way out of here but a delivered graph returns the capture's pool memory: the one
  // place a failed end gives it back.
  on_scope_exit const give_back{[this] {
    pool_capture_.abandon();
    host_pool_capture_.abandon();
  }};
  bool delivered = false;
  on_scope_exit const discarded{[this, &delivered] {
    if (!delivered) note_abandoned();
  }};
  if (recorder_) recorder_->stop();  // ending the capture is not one of the calls diagnosed
  // Asked before the capture ends: the simulated device forgets a capture once it has ended.
  std::optional<detail::failed_call> const failed = first_failed_call();
  std::optional<detail::failed_call> broken = breaking_call();
  bool const call_could_be_known = broken || recorder_;
  if (legacy_guard_) legacy_guard_->leave(stream_.get());
  // The graph's last node marks the end of each replay, so that a replay enqueues nothing after
  // its launch (graph::adopt). Every side stream is joined into this one by now (else the end
  // fails), so it follows all the work. A capture already broken refuses it: the end says why.
  std::optional<cuda::event> completion;
  if (!failed) {
    completion.emplace();
    if (cudaEventRecordWithFlags(completion->get(), stream_.get(), cudaEventRecordExternal) !=
        cudaSuccess) {
      static_cast<void>(cudaGetLastError());
      completion.reset();
    }
  }
  cudaGraph_t captured = nullptr;
  cudaError_t const ended = cudaStreamEndCapture(stream_.get(), &captured);
  // Back for another capture only now: a joined stream stays in the capture until it ends, and
  // another thread's capture taking it before then would merge the two.
  legacy_guard_.reset();
  leave_open(capture_id_);  // no work joins it any more
  std::unique_ptr<cudaGraph_t, detail::graph_deleter> owned{captured};
  if (ended != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    std::string const report = finish_diagnostics(ended, &broken);
    throw capture_error{ended, describe() + " failed: " + cudaGetErrorName(ended) + " (" +
                                   cudaGetErrorString(ended) +
                                   "): " + why_it_failed(broken, ended, call_could_be_known) +
                                   ". The partial graph was discarded; the stream is usable" +
                                   (report.empty() ? "" : "\n" + report)};
  }
  if (failed) {
    // CUDA ended the capture, yet a call's work is not in the graph: never deliver it.
    static_cast<void>(cudaGetLastError());
    std::string const report = finish_diagnostics(failed->error);
    throw capture_error{failed->error,
                        describe() + " failed: " + failed->name + " returned " +
                            cudaGetErrorName(failed->error) + " (" +
                            cudaGetErrorString(failed->error) +
                            ") on a captured stream, and CUDA left the capture valid: the graph "
                            "would silently lack that call's work. " +
                            advice_for_failed_call(failed->name, failed->error) +
                            ". The graph was discarded; the stream is usable" +
                            (report.empty() ? "" : "\n" + report)};
  }
  static_cast<void>(finish_diagnostics(cudaSuccess));
  warn_if_empty(owned.get(), completion ? 1U : 0U);
  for (memory::pool_capture const* side : {&pool_capture_, &host_pool_capture_}) {
    if (!side->open()) continue;
    if (std::string problem = side->problem(); !problem.empty()) {
      throw usage_error{describe() + ": " + problem};
    }
  }
  memory::pool_lease memory;
  if (host_pool_capture_.open()) memory = host_pool_capture_.commit();
  if (pool_capture_.open()) {
    memory = memory ? pool_capture_.commit_with(std::move(memory)) : pool_capture_.commit();
  }
  identity_.waits_for_other_processes = facts_ && facts_->waits_for_other_processes.load();
  deliver(completion
              ? graph::adopt(owned.release(), identity_, std::move(memory), std::move(*completion))
              : graph::adopt(owned.release(), identity_, std::move(memory)));
  delivered = true;
}

void capture_scope::note_abandoned() noexcept {
  leave_open(capture_id_);
  if (facts_) facts_->abandoned.store(true);
}

std::optional<detail::failed_call> capture_scope::breaking_call() const {
  return noted_breaking_call(stream_.get());
}

std::optional<detail::failed_call> capture_scope::first_failed_call() const {
#if defined(GRAPHSTEP_CUDA_SIM)
  if (simulator_failed_call_query const query = simulator_failed_call(); query != nullptr) {
    char const* call = nullptr;
    int error = 0;
    if (query(stream_.get(), &call, &error) != 0 && call != nullptr) {
      return detail::failed_call{call, static_cast<cudaError_t>(error), {}};
    }
  }
#endif
  // On a GPU only CUPTI's callbacks see each call's result: the capture diagnostics' recorder.
  if (!recorder_) return std::nullopt;
  std::vector<std::uintptr_t> streams{reinterpret_cast<std::uintptr_t>(stream_.get())};
  for (cudaStream_t side : sides_) streams.push_back(reinterpret_cast<std::uintptr_t>(side));
  std::optional<detail::api_call> const call = recorder_->first_failed_call_on(streams);
  if (!call) return std::nullopt;
  return detail::failed_call{call->name, static_cast<cudaError_t>(call->result), {}};
}

void capture_scope::warn_if_empty(cudaGraph_t captured, std::size_t own_nodes) const {
  std::size_t nodes = 0;
  if (cudaGraphGetNodes(captured, nullptr, &nodes) != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    return;
  }
  // An empty graph is legal, and almost always a mistake: the work went elsewhere.
  if (nodes <= own_nodes) {
    graphstep::detail::log_lazily(log_level::warning, [&] {
      return describe() +
             " recorded no work: was it issued to another stream than the capturing one (or "
             "one not forked into it), or on another device?";
    });
  }
}

void capture_scope::deliver(graph captured) {
  if (auto* const target = std::get_if<graph*>(&target_)) {
    **target = std::move(captured);
    return;
  }
  graph_exec exec;
  try {
    exec = captured.instantiate(options_.instantiate_flags);
  } catch (capture_error const& e) {
    throw capture_error{e.code(),
                        describe() + ": instantiating the captured graph failed: " + e.what()};
  }
  if (options_.upload) exec.upload(stream_);
  *std::get<graph_exec*>(target_) = std::move(exec);
}

capture_ref::capture_ref() noexcept = default;

capture_ref::capture_ref(std::shared_ptr<detail::capture_facts> facts) noexcept
    : facts_{std::move(facts)} {}

capture_ref capture_ref::of(cuda::stream_view stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long capture_id = 0;
  if (cudaStreamGetCaptureInfo(stream.get(), &status, &capture_id) != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    return {};
  }
  if (status != cudaStreamCaptureStatusActive || capture_id == 0) return {};
  auto& captures = open();
  std::lock_guard const lock{captures.mutex};
  auto const found = captures.by_id.find(capture_id);
  return found == captures.by_id.end() ? capture_ref{} : capture_ref{found->second};
}

void capture_ref::note_waits_for_other_processes() const noexcept {
  if (facts_) facts_->waits_for_other_processes.store(true);
}

bool capture_ref::abandoned() const noexcept {
  return facts_ && facts_->abandoned.load();
}

}  // namespace graphstep::graphs
