// NCCL on the simulated device: the entry points of nccl.h that graphstep and plain NCCL
// programs use, with the semantics NCCL 2.28 documents and its source shows.
//
// - Ranks are threads or processes on this machine; the unique id names their shared memory
//   (sim/detail/nccl_world.hpp). ncclCommInitRank blocks until every rank has joined
//   (ncclCommInitRankConfig with blocking = 0 returns ncclInProgress and finishes in the
//   background; ncclCommGetAsyncError answers ncclInProgress until then).
// - A communicator whose last operation is still in progress is refused with
//   ncclInvalidArgument by every call but ncclCommGetAsyncError, abort and destroy; one with an
//   asynchronous error answers with that error (ncclCommEnsureReady, src/init.cc, called by
//   ncclCommCount, ncclCommCuDevice, ncclCommUserRank and every collective).
// - On a non-blocking communicator of several ranks, a collective (or the ncclGroupEnd of a
//   group whose last communicator is non-blocking) returns ncclInProgress and launches on a
//   thread of its own (src/group.cc: groupLaunchNonBlocking), so work issued before the
//   communicator answers ncclSuccess may land after what the host does next.
// - A collective is a kernel on the user's stream: it runs in stream order, is recorded as a
//   kernel node while the stream is capturing and runs again at every replay, reading its inputs
//   then. It completes only once every rank has issued it; meanwhile its stream waits behind it
//   and the host goes on.
// - ncclSend and ncclRecv (and all-to-all, gather and scatter, built from them) are kernels too,
//   matched per ordered pair of ranks in issue order (rank_link::exchange); a group's on one
//   communicator and stream run as one kernel, so they never wait on one another.
// - Inside ncclGroupStart/ncclGroupEnd, calls are held and launched at the outermost
//   ncclGroupEnd (nccl.h: "All calls to NCCL until ncclGroupEnd will be fused").
// - ncclCommAbort tells the communicator's kernels to exit (src/init.cc, setCommAbortFlags).
//   ncclCommAbort and ncclCommDestroy then wait, on a blocking communicator, until every graph
//   that captured one of its collectives is destroyed: NCCL counts captured plans as persistent
//   references and commDestroySync polls "until all graphs referencing us die" (src/init.cc;
//   src/enqueue.cc counts localPersistentRefs). On a non-blocking communicator they return at
//   once and that wait happens in the background.
// - A handle that was destroyed, aborted or never made is refused with ncclInvalidArgument
//   (NCCL's behaviour there is undefined: the stricter reading).

#include <arpa/inet.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "detail/nccl_world.hpp"
#include "detail/refusal.hpp"
#include "detail/runtime_state.hpp"
#include "graphstep/sim/kernel_task.hpp"

namespace graphstep::sim::detail::nccl {
namespace {

// What one communicator handle stands for; captured collectives keep it alive after the handle
// is destroyed, as NCCL's persistent plans keep theirs.
struct comm_core {
  std::unique_ptr<rank_link> link;
  int rank{};
  int ranks{};
  int device{};
  bool blocking{true};
  std::string world;         // the name of the shared segment the ranks joined
  std::uint64_t children{};  // communicators split or shrunk from this one, by this rank
  // ncclRedOpCreatePreMulSum's operators, by handle (guarded by mutex).
  struct user_op {
    ncclDataType_t type{};
    std::array<unsigned char, 8> scalar{};  // ncclScalarHostImmediate: read at creation
    void const* scalar_on_device{};         // ncclScalarDevice: read when a collective runs
  };
  std::map<int, user_op> user_ops;
  // ncclCommRegister's registrations, by handle (guarded by mutex): NCCL keeps one per range and
  // counts its registrations (src/register/register.cc, localRefs).
  struct registration {
    void const* buffer{};
    std::size_t bytes{};
    int references{};
  };
  std::map<void const*, std::unique_ptr<registration>> registrations;
  std::atomic<bool> stop{false};            // the abort flag the kernels poll
  std::atomic<std::uint32_t> connected{0};  // a bit per collective kind connected to the peers
  bool running{};  // a collective is under way (guarded by the platform lock)
  std::atomic<ncclResult_t> async_error{ncclSuccess};
  std::mutex mutex;
  std::condition_variable references_dropped;
  int persistent_references{};  // guarded by mutex: collectives held by graphs
  std::thread background;       // a non-blocking initialization or release
  int launches_in_flight{};     // guarded by mutex: non-blocking launches still on their thread
  std::condition_variable launches_done;

  comm_core() = default;
  comm_core(comm_core const&) = delete;
  comm_core& operator=(comm_core const&) = delete;
  comm_core(comm_core&&) = delete;
  comm_core& operator=(comm_core&&) = delete;
  ~comm_core() {
    if (background.joinable()) background.detach();  // only the release thread can be left
  }

  void wait_for_graphs() {
    std::unique_lock<std::mutex> lock{mutex};
    references_dropped.wait(lock, [this] { return persistent_references == 0; });
  }
  // Abort and destroy join a non-blocking group's launch first (ncclCommEnsureReady joins the
  // group job on an aborted communicator: ncclGroupJobAbort, src/group.cc).
  void wait_for_launches() {
    std::unique_lock<std::mutex> lock{mutex};
    launches_done.wait(lock, [this] { return launches_in_flight == 0; });
  }
};

}  // namespace
}  // namespace graphstep::sim::detail::nccl

// nccl.h declares the handle's type; its definition is the simulator's.
struct ncclComm {
  std::shared_ptr<graphstep::sim::detail::nccl::comm_core> core;
};

namespace graphstep::sim::detail::nccl {
namespace {

std::mutex registry_mutex;
std::set<ncclComm const*>& live_comms() {
  static auto* const comms =
      new std::set<ncclComm const*>;  // NOLINT(cppcoreguidelines-owning-memory)
  return *comms;
}

std::mutex last_error_mutex;
std::string& last_error_text() {
  static auto* const text = new std::string;  // NOLINT(cppcoreguidelines-owning-memory)
  return *text;
}

// Keeps the message for ncclGetLastError and prints it when NCCL_DEBUG asks for warnings, as
// NCCL's WARN does.
ncclResult_t warn(ncclResult_t result, std::string const& message) {
  {
    std::lock_guard<std::mutex> const lock{last_error_mutex};
    last_error_text() = message;
  }
  if (std::getenv("NCCL_DEBUG") != nullptr) {
    static_cast<void>(std::fprintf(stderr, "NCCL WARN (simulated) %s\n", message.c_str()));
  }
  return result;
}

std::shared_ptr<comm_core> core_of(ncclComm_t comm) {
  std::lock_guard<std::mutex> const lock{registry_mutex};
  if (comm == nullptr || live_comms().count(comm) == 0) return nullptr;
  return comm->core;
}

ncclResult_t invalid_comm(char const* call) {
  return warn(ncclInvalidArgument,
              std::string{call} + ": the communicator is null, destroyed or aborted");
}

ncclComm_t register_comm(std::shared_ptr<comm_core> core) {
  auto* const comm = new ncclComm{std::move(core)};  // NOLINT(cppcoreguidelines-owning-memory)
  std::lock_guard<std::mutex> const lock{registry_mutex};
  live_comms().insert(comm);
  return comm;
}

// Takes the handle out of circulation; the core lives on while graphs or kernels hold it.
std::shared_ptr<comm_core> unregister_comm(ncclComm_t comm) {
  std::lock_guard<std::mutex> const lock{registry_mutex};
  if (comm == nullptr || live_comms().erase(comm) == 0) return nullptr;
  std::shared_ptr<comm_core> core = std::move(comm->core);
  delete comm;  // NOLINT(cppcoreguidelines-owning-memory)
  return core;
}

// --- collectives as kernels ------------------------------------------------------------------

// Whether `rank` reads the send buffer and writes the receive buffer (nccl.h): broadcast reads
// it only on the root and reduce writes it only there; a send only reads, a receive only writes.
bool reads_send_buffer(collective_call const& call, int rank) {
  if (point_to_point(call.kind)) return call.kind == collective_kind::send;
  return call.kind != collective_kind::broadcast || call.root == rank;
}
bool writes_receive_buffer(collective_call const& call, int rank) {
  if (point_to_point(call.kind)) return call.kind == collective_kind::receive;
  return call.kind != collective_kind::reduce || call.root == rank;
}

// One collective, or sends and receives issued together (one call, or a group's on one stream:
// NCCL runs a group's point-to-point operations in one kernel, ncclDevKernel_SendRecv).
class collective_task final : public kernel_task {
 public:
  collective_task(std::shared_ptr<comm_core> core, std::vector<collective_call> calls,
                  bool persistent)
      : kernel_task{dim3{1}, dim3{64}, 0},
        core_{std::move(core)},
        calls_{std::move(calls)},
        persistent_{persistent},
        name_{std::string{"ncclDevKernel_"} +
              (point_to_point(calls_.front().kind) ? "SendRecv" : nccl::name(calls_.front().kind)) +
              " (simulated)"} {
    if (persistent_) {
      std::lock_guard<std::mutex> const lock{core_->mutex};
      ++core_->persistent_references;
    }
  }
  collective_task(collective_task const&) = delete;
  collective_task& operator=(collective_task const&) = delete;
  collective_task(collective_task&&) = delete;
  collective_task& operator=(collective_task&&) = delete;
  ~collective_task() override {
    if (!persistent_) return;
    std::lock_guard<std::mutex> const lock{core_->mutex};
    if (--core_->persistent_references == 0) core_->references_dropped.notify_all();
  }

  [[nodiscard]] char const* name() const noexcept override { return name_.c_str(); }
  [[nodiscard]] void const* function() const noexcept override {
    static std::array<char, 6> const kernels{};  // one address per collective, one for SendRecv
    return &kernels[std::min(static_cast<std::size_t>(calls_.front().kind), kernels.size() - 1)];
  }
  void run() const override {
    // NCCL runs one communicator's collectives one at a time, in the order they were issued
    // (src/enqueue.cc orders every launch after the communicator's previous one).
    wait_for_other_processes([this] { return !core_->running || core_->stop.load(); }, nullptr);
    if (core_->stop.load()) return;  // an aborted communicator's kernels exit at once
    core_->running = true;
    std::string error;
    ncclResult_t result = ncclSuccess;
    if (point_to_point(calls_.front().kind)) {
      result = core_->link->exchange(calls_.data(), calls_.size(), core_->stop, error);
    } else {
      collective_call call = calls_.front();
      // ncclScalarDevice: "dereferenced while the collective is running".
      if (call.scalar_on_device != nullptr) {
        std::memcpy(call.scalar.data(), call.scalar_on_device, element_bytes(call.type));
      }
      result = core_->link->run(call, core_->stop);
    }
    core_->running = false;
    if (result == ncclInvalidUsage) {
      // A matched send and receive that disagree: NCCL does not check and corrupts or hangs;
      // here both ends stop and the communicator keeps the error (the stricter reading).
      static_cast<void>(
          std::fprintf(stderr,
                       "graphstep simulated NCCL: %s; the communicator's asynchronous "
                       "error is ncclInvalidUsage\n",
                       error.c_str()));
      static_cast<void>(warn(ncclInvalidUsage, error));
    }
    if (result == ncclRemoteError || result == ncclInvalidUsage) {
      // Over success, or over a non-blocking launch still in progress (whose end keeps it).
      ncclResult_t seen = core_->async_error.load();
      while ((seen == ncclSuccess || seen == ncclInProgress) &&
             !core_->async_error.compare_exchange_weak(seen, result)) {
      }
    }
  }
  // The bytes each buffer holds (nccl.h): count elements, but nranks times as many in
  // reduce-scatter's send and all-gather's receive buffers. Broadcast reads the send buffer only
  // on the root, and reduce writes the receive buffer only there.
  // A send reads its buffer and a receive writes its own, count elements each.
  [[nodiscard]] std::vector<pointer_argument> pointer_arguments() const override {
    auto const ranks = static_cast<std::size_t>(core_->ranks);
    std::vector<pointer_argument> pointers;
    for (collective_call const& call : calls_) {
      std::size_t const bytes = call.count * element_bytes(call.type);
      if (call.send != nullptr && reads_send_buffer(call, core_->rank)) {
        pointers.push_back({call.send, true,
                            call.kind == collective_kind::reduce_scatter ? bytes * ranks : bytes});
      }
      if (call.receive != nullptr && writes_receive_buffer(call, core_->rank)) {
        pointers.push_back({call.receive, false,
                            call.kind == collective_kind::all_gather ? bytes * ranks : bytes});
      }
      if (call.scalar_on_device != nullptr) {
        pointers.push_back({call.scalar_on_device, true, element_bytes(call.type)});
      }
    }
    return pointers;
  }
  [[nodiscard]] std::shared_ptr<kernel_task const> with_configuration(
      dim3 /*grid*/, dim3 /*block*/, std::size_t /*dynamic_shared_bytes*/) const override {
    return std::make_shared<collective_task>(core_, calls_, persistent_);
  }
  // Point-to-point operations may wait with one rank too: a send to self waits for its receive.
  [[nodiscard]] bool may_wait() const noexcept {
    return core_->ranks > 1 || point_to_point(calls_.front().kind);
  }

 private:
  std::shared_ptr<comm_core> core_;
  std::vector<collective_call> calls_;
  bool persistent_;
  std::string name_;
};

// Registered with the work queue, which runs collectives that may wait on fibers of their own.
bool collective_may_wait(kernel_task const& task) {
  auto const* collective = dynamic_cast<collective_task const*>(&task);
  return collective != nullptr && collective->may_wait();
}
// NOLINTNEXTLINE(cert-err58-cpp,cppcoreguidelines-interfaces-global-init): sets a plain pointer
[[maybe_unused]] bool const registered = [] {
  kernel_waits_for_other_processes = collective_may_wait;
  return true;
}();

struct pending_launch {
  std::shared_ptr<comm_core> core;
  collective_call call;
  cudaStream_t stream{};
  std::vector<collective_call> fused;  // sends and receives of the group launched with `call`
};

// A group's sends and receives on one communicator and stream run as one kernel, launched where
// the first of them was issued: NCCL issues a group's operations together ("Group calls",
// nccl.h: ncclGroupStart), so exchanges among them in any pattern cannot wait on one another.
void fuse_point_to_point(std::vector<pending_launch>& launches) {
  std::vector<pending_launch> fused;
  for (auto& pending : launches) {
    if (point_to_point(pending.call.kind)) {
      auto const same = std::find_if(fused.begin(), fused.end(), [&](pending_launch const& p) {
        return point_to_point(p.call.kind) && p.core == pending.core && p.stream == pending.stream;
      });
      if (same != fused.end()) {
        same->fused.push_back(pending.call);
        continue;
      }
    }
    fused.push_back(std::move(pending));
  }
  launches = std::move(fused);
}

// ncclGroupStart/ncclGroupEnd of this thread: held launches, rendezvous still to finish, and
// the first error of a call inside the group.
struct group_state {
  int depth{};
  std::vector<pending_launch> launches;
  std::vector<std::shared_ptr<comm_core>> joining;
  ncclResult_t error{ncclSuccess};
  // The last communicator to join decides (ncclGroupCommJoin sets ncclGroupBlocking,
  // src/include/group.h).
  bool blocking{true};
};
thread_local group_state group;

// NCCL keeps the error of a call that fails inside a group (ncclGroupErrCheck,
// src/include/group.h, called on every collective's failure in ncclEnqueueCheck); the group's
// ncclGroupEnd then returns that error and launches none of its collectives (src/group.cc:
// ncclGroupEndInternal goes to groupCleanup).
ncclResult_t group_checked(ncclResult_t result) {
  if (group.depth > 0 && result != ncclSuccess && result != ncclInProgress) group.error = result;
  return result;
}

// The first collective of a kind connects to the peers first, blocking this host thread until
// every rank has issued one (rank_link::offer_connection).
ncclResult_t connect(pending_launch const& pending) {
  comm_core& core = *pending.core;
  std::uint32_t const bit = 1U << static_cast<std::uint32_t>(pending.call.kind);
  // Point-to-point connections (ncclP2PPreconnect) are not modelled: their kernel waits instead.
  if (core.ranks == 1 || point_to_point(pending.call.kind) || (core.connected.load() & bit) != 0) {
    return ncclSuccess;
  }
  core.link->offer_connection(pending.call.kind);
  ncclResult_t const connected = core.link->wait_connected(pending.call.kind, core.stop);
  if (connected != ncclSuccess) {
    return warn(
        connected,
        std::string{"nccl"} + name(pending.call.kind) + ": connecting to the peers failed: " +
            (connected == ncclRemoteError ? "a peer left" : "the communicator was aborted"));
  }
  core.connected.fetch_or(bit);
  return ncclSuccess;
}

// Launches a collective on its stream, as NCCL launches its kernel.
ncclResult_t launch(pending_launch const& pending) {
  if (ncclResult_t const connected = connect(pending); connected != ncclSuccess) {
    if (connected == ncclRemoteError) pending.core->async_error.store(ncclRemoteError);
    return connected;
  }
  lock_guard const lock{state().mutex};
  stream_state* const stream = find_stream(pending.stream);
  if (stream == nullptr) {
    return warn(ncclUnhandledCudaError, std::string{"nccl"} + name(pending.call.kind) +
                                            ": the stream is not a live CUDA stream");
  }
  if (stream->device != pending.core->device) {
    return warn(ncclInvalidUsage,
                std::string{"nccl"} + name(pending.call.kind) + ": the stream belongs to device " +
                    std::to_string(stream->device) + " but the communicator to device " +
                    std::to_string(pending.core->device));
  }
  bool const persistent = stream->capture != nullptr;
  cudaError_t const before = std::exchange(this_thread().last_error, cudaSuccess);
  std::vector<collective_call> calls{pending.call};
  calls.insert(calls.end(), pending.fused.begin(), pending.fused.end());
  enqueue_kernel(pending.stream,
                 std::make_shared<collective_task>(pending.core, std::move(calls), persistent));
  cudaError_t const launched = std::exchange(this_thread().last_error, before);
  if (launched != cudaSuccess) {
    this_thread().last_error = launched;
    return warn(ncclUnhandledCudaError,
                std::string{"nccl"} + name(pending.call.kind) +
                    ": launching the kernel failed: " + cudaGetErrorString(launched));
  }
  return ncclSuccess;
}

// ncclLaunchOneRank (src/device/onerank.cu) copies unless the reduction is a premultiplied
// sum, which ncclAvg on floating types is (hostToDevRedOp, src/enqueue.cc); ncclAvg on integers
// divides afterwards, by one.
bool one_rank_is_a_copy(collective_call const& call) {
  if (call.premultiplied) return false;
  bool const floating = call.type == ncclFloat16 || call.type == ncclBfloat16 ||
                        call.type == ncclFloat32 || call.type == ncclFloat64;
  bool const reduces = call.kind == collective_kind::all_reduce ||
                       call.kind == collective_kind::reduce ||
                       call.kind == collective_kind::reduce_scatter;
  return !(reduces && call.op == ncclAvg && floating);
}

// The copy of ncclLaunchOneRank: ncclCudaMemcpyAsync (src/include/alloc.h), a cudaMemcpyAsync
// of kind cudaMemcpyDefault in relaxed capture mode, so a memcpy node when captured; nothing
// when the operation is in place.
ncclResult_t copy_one_rank(char const* call_name, pending_launch const& pending) {
  {
    lock_guard const lock{state().mutex};
    stream_state const* const stream = find_stream(pending.stream);
    if (stream != nullptr && stream->device != pending.core->device) {
      return warn(ncclInvalidUsage, std::string{call_name} + ": the stream belongs to device " +
                                        std::to_string(stream->device) +
                                        " but the communicator to device " +
                                        std::to_string(pending.core->device));
    }
  }
  if (pending.call.send == pending.call.receive) return ncclSuccess;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  if (cudaError_t const exchanged = cudaThreadExchangeStreamCaptureMode(&mode);
      exchanged != cudaSuccess) {
    return warn(ncclUnhandledCudaError,
                std::string{call_name} + ": " + cudaGetErrorString(exchanged));
  }
  cudaError_t const copied = cudaMemcpyAsync(pending.call.receive, pending.call.send,
                                             pending.call.count * element_bytes(pending.call.type),
                                             cudaMemcpyDefault, pending.stream);
  static_cast<void>(cudaThreadExchangeStreamCaptureMode(&mode));
  if (copied != cudaSuccess) {
    return warn(ncclUnhandledCudaError,
                std::string{call_name} + ": the copy failed: " + cudaGetErrorString(copied));
  }
  return ncclSuccess;
}

// Launches each in turn; the first failure, or ncclSuccess.
ncclResult_t launch_all(std::vector<pending_launch> const& launches) {
  ncclResult_t result = ncclSuccess;
  for (auto const& pending : launches) {
    if (ncclResult_t const launched = launch(pending);
        launched != ncclSuccess && result == ncclSuccess) {
      result = launched;
    }
  }
  return result;
}

// A non-blocking group's launch, on a thread of its own as NCCL's groupLaunchNonBlocking: each
// communicator answers ncclInProgress until its collectives are on their streams.
ncclResult_t launch_in_background(std::vector<pending_launch> launches) {
  std::vector<std::shared_ptr<comm_core>> cores;
  for (auto const& pending : launches) {
    if (std::find(cores.begin(), cores.end(), pending.core) == cores.end()) {
      cores.push_back(pending.core);
    }
  }
  for (auto const& core : cores) {
    core->async_error.store(ncclInProgress);
    std::lock_guard<std::mutex> const lock{core->mutex};
    ++core->launches_in_flight;
  }
  auto finish = [](std::vector<std::shared_ptr<comm_core>> const& done, ncclResult_t result) {
    for (auto const& core : done) {
      ncclResult_t expected = ncclInProgress;
      core->async_error.compare_exchange_strong(expected, result);
      std::lock_guard<std::mutex> const lock{core->mutex};
      if (--core->launches_in_flight == 0) core->launches_done.notify_all();
    }
  };
  try {
    std::thread{[launches = std::move(launches), cores, finish] {
      finish(cores, launch_all(launches));
    }}.detach();
  } catch (std::system_error const&) {
    finish(cores, ncclSystemError);
    return warn(ncclSystemError, "ncclGroupEnd: no thread could be started for the launch");
  }
  return ncclInProgress;
}

// NCCL's ncclCommEnsureReady (src/init.cc).
ncclResult_t ensure_ready(comm_core const& core, char const* call) {
  ncclResult_t const state = core.async_error.load();
  if (state == ncclInProgress) {
    return warn(ncclInvalidArgument,
                std::string{call} +
                    ": Attempt to use communicator before the previous operation returned "
                    "ncclSuccess (poll ncclCommGetAsyncError until it does)");
  }
  return state;
}

bool device_pointer(void const* pointer, std::size_t bytes) {
  lock_guard const lock{state().mutex};
  return device_range_valid(pointer, bytes);
}

// A reduction handle other than a built-in one is an operator of ncclRedOpCreatePreMulSum made
// "for use only with collectives launched against comm and datatype" (nccl.h): another's, or
// one destroyed, is refused (NCCL's behaviour there is undefined), and so is another data type.
ncclResult_t resolve_reduction(comm_core& core, collective_call& call, char const* call_name) {
  if (call.op >= ncclSum && call.op < ncclNumOps) return ncclSuccess;
  std::lock_guard<std::mutex> const lock{core.mutex};
  auto const found = core.user_ops.find(static_cast<int>(call.op));
  if (found == core.user_ops.end()) {
    return warn(ncclInvalidArgument,
                std::string{call_name} + ": reduction " + std::to_string(call.op) +
                    " is neither built in nor an operator ncclRedOpCreatePreMulSum made for this "
                    "communicator (or it was destroyed)");
  }
  comm_core::user_op const& op = found->second;
  if (op.type != call.type) {
    return warn(ncclInvalidArgument, std::string{call_name} + ": reduction " +
                                         std::to_string(call.op) + " was made for data type " +
                                         std::to_string(op.type) + ", not " +
                                         std::to_string(call.type));
  }
  if (op.scalar_on_device != nullptr &&
      !device_pointer(op.scalar_on_device, element_bytes(op.type))) {
    return warn(ncclInvalidArgument, std::string{call_name} + ": the scalar of reduction " +
                                         std::to_string(call.op) +
                                         " (ncclScalarDevice) is not device memory");
  }
  call.op = ncclSum;
  call.premultiplied = true;
  call.scalar = op.scalar;
  call.scalar_on_device = op.scalar_on_device;
  return ncclSuccess;
}

ncclResult_t check_and_issue(char const* call_name, collective_call const& issued, ncclComm_t comm,
                             cudaStream_t stream) {
  std::shared_ptr<comm_core> core = core_of(comm);
  if (core == nullptr) return invalid_comm(call_name);
  if (ncclResult_t const ready = ensure_ready(*core, call_name); ready != ncclSuccess) {
    return ready;
  }
  collective_call call = issued;
  std::size_t const size = element_bytes(call.type);
  if (size == 0) {
    return warn(ncclInvalidArgument, std::string{call_name} + ": data type " +
                                         std::to_string(call.type) +
                                         " is not one the simulated NCCL models");
  }
  if (ncclResult_t const resolved = resolve_reduction(*core, call, call_name);
      resolved != ncclSuccess) {
    return resolved;
  }
  if (call.root < 0 || call.root >= core->ranks) {
    return warn(ncclInvalidArgument,
                std::string{call_name} + (point_to_point(call.kind) ? ": peer " : ": root ") +
                    std::to_string(call.root) + " is not a rank of " + std::to_string(core->ranks));
  }
  auto const ranks = static_cast<std::size_t>(core->ranks);
  std::size_t send_count = call.count;
  std::size_t receive_count = call.count;
  if (call.kind == collective_kind::reduce_scatter) send_count *= ranks;
  if (call.kind == collective_kind::all_gather) receive_count *= ranks;
  bool const reads = reads_send_buffer(call, core->rank);
  bool const writes = writes_receive_buffer(call, core->rank);
  for (auto const& [needed, pointer, bytes, role] :
       {std::tuple{reads, call.send, send_count * size, "send"},
        std::tuple{writes, static_cast<void const*>(call.receive), receive_count * size,
                   "receive"}}) {
    if (call.count > 0 && needed && !device_pointer(pointer, bytes)) {
      return warn(ncclInvalidArgument, std::string{call_name} + ": the " + role +
                                           " buffer is not " + std::to_string(bytes) +
                                           " bytes of device memory");
    }
  }
  // A collective of nothing returns at once; sends and receives of nothing are still queued
  // and so matched with their peer's, in order (taskAppend, src/enqueue.cc).
  if (call.count == 0 && !point_to_point(call.kind)) return ncclSuccess;
  pending_launch pending{std::move(core), call, stream, {}};
  // One rank: NCCL issues the work at once, inside a group too (ncclLaunchOneRank in taskAppend,
  // src/enqueue.cc): a copy, or its own kernel where the reduction premultiplies. A send to
  // self waits for its receive, as with several ranks.
  if (pending.core->ranks == 1 && !point_to_point(call.kind)) {
    return one_rank_is_a_copy(call) ? copy_one_rank(call_name, pending) : launch(pending);
  }
  if (group.depth > 0) {
    group.blocking = pending.core->blocking;
    group.launches.push_back(std::move(pending));
    return ncclSuccess;
  }
  if (!pending.core->blocking) return launch_in_background({std::move(pending)});
  return launch(pending);
}

ncclResult_t issue(char const* call_name, collective_call const& call, ncclComm_t comm,
                   cudaStream_t stream) {
  library_call_scope const inside{call_name};
  return group_checked(check_and_issue(call_name, call, comm, stream));
}

enum class block_pattern { all_to_all, gather, scatter };

// All-to-all, gather and scatter move blocks of count elements between pairs of ranks: here a
// group of sends and receives (one kernel, matched like ncclSend and ncclRecv, so that ranks that
// disagree on count or type get the mismatch error rather than corrupt data).
ncclResult_t move_blocks(char const* call_name, block_pattern pattern, void const* send,
                         void* receive, std::size_t count, ncclDataType_t type, int root,
                         ncclComm_t comm, cudaStream_t stream) {
  library_call_scope const inside{call_name};
  std::shared_ptr<comm_core> const core = core_of(comm);
  if (core == nullptr) return group_checked(invalid_comm(call_name));
  if (ncclResult_t const ready = ensure_ready(*core, call_name); ready != ncclSuccess) {
    return group_checked(ready);
  }
  if (pattern != block_pattern::all_to_all && (root < 0 || root >= core->ranks)) {
    return group_checked(warn(ncclInvalidArgument, std::string{call_name} + ": root " +
                                                       std::to_string(root) + " is not a rank of " +
                                                       std::to_string(core->ranks)));
  }
  // Like the other collectives, one of nothing returns at once (taskAppend, src/enqueue.cc).
  if (count == 0) return ncclSuccess;
  std::size_t const block = count * element_bytes(type);  // 0 for a refused type: checked below
  auto const at = [block](int rank) { return static_cast<std::size_t>(rank) * block; };
  std::vector<collective_call> calls;
  for (int peer = 0; peer < core->ranks; ++peer) {
    bool const sends = pattern == block_pattern::all_to_all ||
                       (pattern == block_pattern::gather ? peer == root : core->rank == root);
    bool const receives = pattern == block_pattern::all_to_all ||
                          (pattern == block_pattern::gather ? core->rank == root : peer == root);
    if (sends) {
      void const* const from = pattern == block_pattern::gather
                                   ? send
                                   : static_cast<unsigned char const*>(send) + at(peer);
      calls.push_back({collective_kind::send, from, nullptr, count, type, ncclSum, peer});
    }
    if (receives) {
      void* const into = pattern == block_pattern::scatter
                             ? receive
                             : static_cast<unsigned char*>(receive) + at(peer);
      calls.push_back({collective_kind::receive, nullptr, into, count, type, ncclSum, peer});
    }
  }
  static_cast<void>(ncclGroupStart());
  for (collective_call const& call : calls) {
    static_cast<void>(group_checked(check_and_issue(call_name, call, comm, stream)));
  }
  return ncclGroupEnd();
}

// The segment a NCCL_COMM_ID address names. The address is read as ncclSocketGetAddrFromString
// reads it (src/misc/socket.cc): "[<ipv6>]:<port>", or "<ipv4 or hostname>:<port>" up to the
// first ',' (parseStringList, src/misc/utils.cc; no port is port -1), resolved by getaddrinfo,
// whose first answer counts; so names of one address agree. An address that does not resolve
// is refused. NCCL ignores an IPv6 literal inet_pton rejects; refused here (the stricter way).
// NCCL reads the port with atoi: digits up to the first other character, 0 without any.
int port_number(char const* text) {
  return static_cast<int>(std::strtol(text, nullptr, 10));
}

bool segment_for_address(char const* text, std::string& name) {
  if (text == nullptr || std::strlen(text) <= 1) return false;
  std::string const pair{text};
  std::array<char, NI_MAXHOST> numeric{};
  int port = -1;
  std::string scope;
  if (pair.front() == '[') {
    std::size_t const closing = pair.find(']');
    if (closing == std::string::npos) return false;
    std::size_t const percent = pair.find('%');
    bool const link_scope = percent != std::string::npos && percent < closing;
    std::string const literal = pair.substr(1, (link_scope ? percent : closing) - 1);
    if (link_scope) scope = "%" + pair.substr(percent + 1, closing - percent - 1);
    in6_addr address{};
    if (inet_pton(AF_INET6, literal.c_str(), &address) != 1) return false;
    if (inet_ntop(AF_INET6, &address, numeric.data(), numeric.size()) == nullptr) return false;
    if (closing + 2 <= pair.size()) port = port_number(pair.c_str() + closing + 2);
  } else {
    std::size_t const end = pair.find_first_of(":,");
    std::string const host = pair.substr(0, end);
    if (host.empty()) return false;
    if (end != std::string::npos && pair[end] == ':') port = port_number(pair.c_str() + end + 1);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return false;
    int const written = getnameinfo(found->ai_addr, found->ai_addrlen, numeric.data(),
                                    numeric.size(), nullptr, 0, NI_NUMERICHOST);
    freeaddrinfo(found);
    if (written != 0) return false;
  }
  // htons(port) keeps the low 16 bits, so -1 is port 65535 there too.
  name = std::string{"/graphstep-nccl-at-"} + numeric.data() + scope + "-" +
         std::to_string(static_cast<std::uint16_t>(port));
  return true;
}

// Waits for every rank to join; a non-blocking communicator's wait runs in the background.
ncclResult_t finish_rendezvous(std::shared_ptr<comm_core> const& core) {
  auto wait = [](comm_core& c) {
    c.link->wait_until([&c] { return c.link->everyone_joined() || c.stop.load(); });
  };
  if (core->blocking) {
    wait(*core);
    return ncclSuccess;
  }
  core->async_error.store(ncclInProgress);
  core->background = std::thread{[wait, c = core.get()] {
    wait(*c);
    ncclResult_t expected = ncclInProgress;
    c->async_error.compare_exchange_strong(expected, ncclSuccess);
  }};
  return ncclInProgress;
}

ncclResult_t init_rank(ncclComm_t* comm, int nranks, ncclUniqueId const& id, int rank, int device,
                       bool blocking) {
  if (comm == nullptr) return warn(ncclInvalidArgument, "ncclCommInitRank: comm is null");
  *comm = nullptr;
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    return warn(ncclInvalidArgument, "ncclCommInitRank: rank " + std::to_string(rank) +
                                         " is not in [0, " + std::to_string(nranks) + ")");
  }
  auto core = std::make_shared<comm_core>();
  std::string error;
  if (ncclResult_t const joined = rank_link::join(id, nranks, rank, core->link, error);
      joined != ncclSuccess) {
    return warn(joined, "ncclCommInitRank: " + error);
  }
  core->rank = rank;
  core->ranks = nranks;
  core->device = device;
  core->blocking = blocking;
  core->world.assign(id.internal, strnlen(id.internal, sizeof id.internal));
  ncclResult_t result = ncclSuccess;
  if (group.depth > 0 && blocking) {
    group.joining.push_back(core);  // the rendezvous completes at ncclGroupEnd
  } else {
    result = finish_rendezvous(core);
  }
  *comm = register_comm(std::move(core));
  return result;
}

// ncclCommCount, ncclCommCuDevice and ncclCommUserRank: one fixed field of the communicator.
ncclResult_t read_shape(ncclComm_t comm, int* out, int comm_core::*field, char const* call) {
  auto const core = core_of(comm);
  if (core == nullptr) return invalid_comm(call);
  if (out == nullptr) return warn(ncclInvalidArgument, std::string{call} + ": the output is null");
  if (ncclResult_t const ready = ensure_ready(*core, call); ready != ncclSuccess) return ready;
  *out = (*core).*field;
  return ncclSuccess;
}

int current_device() {
  int device = 0;
  static_cast<void>(cudaGetDevice(&device));
  return device;
}

// Abort and destroy: take the handle away, then wait for the graphs holding its collectives.
ncclResult_t release(ncclComm_t comm, bool abort, char const* call) {
  if (comm == nullptr) return ncclSuccess;  // NCCL accepts a null communicator here
  std::shared_ptr<comm_core> core = unregister_comm(comm);
  if (core == nullptr) return invalid_comm(call);
  if (abort) {
    core->stop.store(true);  // running and parked kernels exit
    core->link->leave();     // peers see this rank gone
  }
  core->wait_for_launches();
  if (core->blocking) {
    core->wait_for_graphs();
    return ncclSuccess;
  }
  if (core->background.joinable()) core->background.join();
  std::thread{[core] { core->wait_for_graphs(); }}.detach();
  return ncclSuccess;
}

// The driver's virtual memory calls, as NCCL finds them (cudaGetDriverEntryPointByVersion).
class driver_memory {
 public:
  driver_memory()
      : granularity{entry<decltype(&cuMemGetAllocationGranularity)>(
            "cuMemGetAllocationGranularity")},
        create{entry<decltype(&cuMemCreate)>("cuMemCreate")},
        release{entry<decltype(&cuMemRelease)>("cuMemRelease")},
        reserve{entry<decltype(&cuMemAddressReserve)>("cuMemAddressReserve")},
        address_free{entry<decltype(&cuMemAddressFree)>("cuMemAddressFree")},
        map{entry<decltype(&cuMemMap)>("cuMemMap")},
        unmap{entry<decltype(&cuMemUnmap)>("cuMemUnmap")},
        set_access{entry<decltype(&cuMemSetAccess)>("cuMemSetAccess")} {}
  decltype(&cuMemGetAllocationGranularity) granularity;
  decltype(&cuMemCreate) create;
  decltype(&cuMemRelease) release;
  decltype(&cuMemAddressReserve) reserve;
  decltype(&cuMemAddressFree) address_free;
  decltype(&cuMemMap) map;
  decltype(&cuMemUnmap) unmap;
  decltype(&cuMemSetAccess) set_access;

 private:
  template <class Function>
  static Function entry(char const* name) {
    void* function = nullptr;
    cudaDriverEntryPointQueryResult found{};
    static_cast<void>(cudaGetDriverEntryPointByVersion(name, &function, CUDART_VERSION,
                                                       cudaEnableDefault, &found));
    return reinterpret_cast<Function>(function);  // the simulator defines every one of them
  }
};

// The entry points, looked up once.
driver_memory const& driver() {
  static driver_memory const found;
  return found;
}

// NCCL's CUCHECK: a driver error is ncclUnhandledCudaError.
ncclResult_t driver_checked(CUresult result, char const* call) {
  if (result == CUDA_SUCCESS) return ncclSuccess;
  return warn(ncclUnhandledCudaError, std::string{"ncclMemAlloc/ncclMemFree: "} + call +
                                          " failed with CUresult " +
                                          std::to_string(static_cast<int>(result)));
}

// ncclMemAlloc's mappings, by address.
struct mapped_allocation {
  std::size_t bytes{};
  CUmemGenericAllocationHandle handle{};
};
std::mutex allocations_mutex;
std::map<CUdeviceptr, mapped_allocation>& allocations() {
  static auto* const mapped =
      new std::map<CUdeviceptr, mapped_allocation>;  // NOLINT(cppcoreguidelines-owning-memory)
  return *mapped;
}

// NCCL_CONFIG_INITIALIZER's fields the simulator reads: only `blocking`.
ncclResult_t read_config(ncclConfig_t const* config, char const* call, bool& blocking) {
  if (config == nullptr) return ncclSuccess;
  if (config->magic != 0xcafebeef ||
      config->size < offsetof(ncclConfig_t, blocking) + sizeof(int)) {
    return warn(ncclInvalidArgument,
                std::string{call} + ": the config was not set from NCCL_CONFIG_INITIALIZER");
  }
  if (config->blocking != NCCL_CONFIG_UNDEF_INT && config->blocking != 0 && config->blocking != 1) {
    return warn(ncclInvalidArgument, std::string{call} + ": blocking must be 0 or 1, not " +
                                         std::to_string(config->blocking));
  }
  if (config->blocking != NCCL_CONFIG_UNDEF_INT) blocking = config->blocking != 0;
  return ncclSuccess;
}

// A name of a shared segment the ranks agree on without talking: its parts hashed, so that
// children of children do not grow out of the id's 128 bytes.
ncclUniqueId derived_id(std::string const& kind, std::string const& from, std::uint64_t number) {
  ncclUniqueId id{};
  static_cast<void>(std::snprintf(id.internal, sizeof id.internal, "/graphstep-nccl-%s-%016zx-%llu",
                                  kind.c_str(), std::hash<std::string>{}(from),
                                  static_cast<unsigned long long>(number)));
  return id;
}

// Where a rank of a parent communicator goes in a child: the child's id, its size and the
// rank's place; `member` false when it joins none (NCCL_SPLIT_NOCOLOR).
struct child_place {
  ncclResult_t result{ncclSuccess};
  bool member{};
  ncclUniqueId id{};
  int ranks{};
  int rank{};
};

// ncclCommSplit's members: every rank's color and key, gathered over a segment of their own
// (NCCL gathers them over its bootstrap network, not as a collective: commGetSplitInfo,
// src/init.cc), ordered by key and then by parent rank, as NCCL inserts them.
child_place split_members(comm_core& parent, int color, int key) {
  std::uint64_t const child = ++parent.children;  // every rank splits in the same order
  std::unique_ptr<rank_link> gather;
  std::string error;
  child_place place;
  if (ncclResult_t const joined = rank_link::join(derived_id("split", parent.world, child),
                                                  parent.ranks, parent.rank, gather, error);
      joined != ncclSuccess) {
    place.result = warn(joined, "ncclCommSplit: " + error);
    return place;
  }
  gather->wait_until([&] { return gather->everyone_joined() || parent.stop.load(); });
  // Rank 0's token names the child communicators, so that two splits never share a name.
  std::random_device entropy;
  std::uint64_t const token = (std::uint64_t{entropy()} << 31U) ^ entropy();  // below 2^63
  std::array<std::int64_t, 3> const mine{color, key, static_cast<std::int64_t>(token)};
  std::vector<std::int64_t> all(mine.size() * static_cast<std::size_t>(parent.ranks));
  collective_call const call{
      collective_kind::all_gather, mine.data(), all.data(), mine.size(), ncclInt64, ncclSum, 0};
  ncclResult_t ran = ncclSuccess;
  {
    lock_guard const lock{state().mutex};  // run() waits for the peers without it
    ran = gather->run(call, parent.stop);
  }
  if (ran != ncclSuccess) {
    place.result = warn(ran, "ncclCommSplit: a rank of the parent left during the split");
    return place;
  }
  if (parent.stop.load()) {
    place.result = warn(ncclInvalidUsage, "ncclCommSplit: the parent was aborted");
    return place;
  }
  if (color == NCCL_SPLIT_NOCOLOR) return place;
  std::vector<std::pair<std::int64_t, int>> members;  // (key, parent rank) of this color
  for (int r = 0; r < parent.ranks; ++r) {
    std::size_t const at = mine.size() * static_cast<std::size_t>(r);
    if (all[at] == color) members.emplace_back(all[at + 1], r);
  }
  std::stable_sort(members.begin(), members.end(),
                   [](auto const& a, auto const& b) { return a.first < b.first; });
  place.member = true;
  place.ranks = static_cast<int>(members.size());
  for (int i = 0; i < place.ranks; ++i) {
    if (members[static_cast<std::size_t>(i)].second == parent.rank) place.rank = i;
  }
  place.id = derived_id("split-" + std::to_string(all[2]) + "-" + std::to_string(color),
                        parent.world, child);
  return place;
}

// ncclCommShrink's members: the ranks not excluded, in parent order (getParentRanks,
// src/init.cc); every one of them knows the list, so no exchange is needed. `excluded` is sorted.
child_place shrink_members(comm_core& parent, int const* excluded, int count, int flags) {
  child_place place;
  if (std::binary_search(excluded, excluded + count, parent.rank)) {
    place.result =
        warn(ncclInvalidArgument, "ncclCommShrink: rank " + std::to_string(parent.rank) +
                                      " is in excludeRanksList: excluded ranks must not call it");
    return place;
  }
  // NCCL_SHRINK_ABORT: "First, terminate ongoing parent operations" (nccl.h), as an abort does.
  if (flags == NCCL_SHRINK_ABORT) parent.stop.store(true);
  std::uint64_t const child = ++parent.children;
  place.member = true;
  for (int r = 0; r < parent.ranks; ++r) {
    if (std::binary_search(excluded, excluded + count, r)) continue;
    if (r == parent.rank) place.rank = place.ranks;
    ++place.ranks;
  }
  place.id = derived_id("shrink", parent.world, child);
  return place;
}

// ncclCommSplit and ncclCommShrink: the child is a communicator of its own on the parent's
// device, NCCL_COMM_NULL until it is made (ncclCommInitChildComm, src/init.cc); without a
// config it takes the parent's.
template <class Place>
ncclResult_t make_child(ncclComm_t comm, ncclComm_t* newcomm, ncclConfig_t const* config,
                        char const* call, Place const& place_in) {
  auto const parent = core_of(comm);
  if (parent == nullptr) return invalid_comm(call);
  if (newcomm == nullptr) return warn(ncclInvalidArgument, std::string{call} + ": newcomm is null");
  if (group.depth > 0) {
    return warn(ncclInvalidUsage,
                std::string{call} +
                    " inside ncclGroupStart/ncclGroupEnd is not modelled by the simulated NCCL: "
                    "call it outside a group, from one host thread per rank");
  }
  if (ncclResult_t const ready = ensure_ready(*parent, call); ready != ncclSuccess) return ready;
  bool blocking = parent->blocking;
  if (ncclResult_t const read = read_config(config, call, blocking); read != ncclSuccess) {
    return read;
  }
  *newcomm = nullptr;
  child_place const place = place_in(*parent);
  if (place.result != ncclSuccess || !place.member) return place.result;
  return init_rank(newcomm, place.ranks, place.id, place.rank, parent->device, blocking);
}

}  // namespace

ncclResult_t refuse(char const* function, char const* reason) noexcept {
  announce_refusal(function, reason, "ncclInvalidUsage", "sim/docs/nccl_coverage.md");
  try {
    return warn(ncclInvalidUsage, std::string{function} + " is " + reason +
                                      " on the simulated device (sim/docs/nccl_coverage.md)");
  } catch (...) {  // the message is a courtesy; the result is the answer
    return ncclInvalidUsage;
  }
}

}  // namespace graphstep::sim::detail::nccl

namespace sn = graphstep::sim::detail::nccl;

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return sn::warn(ncclInvalidArgument, "ncclGetVersion: version is null");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

char const* ncclGetErrorString(ncclResult_t result) {
  // The strings of NCCL's src/misc/utils.cc (ncclGetErrorString).
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

// NCCL resets what it read of NCCL_DEBUG and NCCL_DEBUG_FILE; the simulated NCCL reads
// NCCL_DEBUG at each warning, so there is nothing to reset.
void ncclResetDebugInit() {}

char const* ncclGetLastError(ncclComm_t /*comm*/) {
  std::lock_guard<std::mutex> const lock{sn::last_error_mutex};
  return sn::last_error_text().c_str();
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (id == nullptr) return sn::warn(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is null");
  sn::remove_abandoned_worlds();
  // With NCCL_COMM_ID set, the id holds that address and a constant magic, so every process
  // derives the same one (bootstrapGetUniqueId, src/bootstrap.cc); rank 0 opens the bootstrap
  // root there when it initializes (ncclCommInitRankDev, src/init.cc).
  if (char const* const address = std::getenv("NCCL_COMM_ID"); address != nullptr) {
    std::string name;
    if (!sn::segment_for_address(address, name)) {
      return sn::warn(ncclInvalidArgument,
                      "ncclGetUniqueId: Invalid NCCL_COMM_ID, please use format: <ipv4>:<port> or "
                      "[<ipv6>]:<port> or <hostname>:<port>");
    }
    std::memset(id->internal, 0, sizeof id->internal);
    std::memcpy(id->internal, name.data(), std::min(name.size(), sizeof id->internal - 1));
    return ncclSuccess;
  }
  std::random_device entropy;
  std::uint64_t const token = (std::uint64_t{entropy()} << 32U) ^ entropy();
  std::memset(id->internal, 0, sizeof id->internal);
  static_cast<void>(std::snprintf(id->internal, sizeof id->internal, "/graphstep-nccl-%d-%016llx",
                                  static_cast<int>(getpid()),
                                  static_cast<unsigned long long>(token)));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  bool blocking = true;
  if (ncclResult_t const read = sn::read_config(config, "ncclCommInitRankConfig", blocking);
      read != ncclSuccess) {
    return read;
  }
  return sn::init_rank(comm, nranks, commId, rank, sn::current_device(), blocking);
}

// Every rank passes the same nId ids (nccl.h); they spread NCCL's bootstrap over several roots,
// which the simulator does not need: the first names the communicator.
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId* commIds, ncclConfig_t* config) {
  if (nId < 1 || commIds == nullptr) {
    return sn::warn(ncclInvalidArgument,
                    "ncclCommInitRankScalable: nId is " + std::to_string(nId) + " and commIds " +
                        (commIds == nullptr ? "null" : "given") + ": pass at least one unique id");
  }
  bool blocking = true;
  if (ncclResult_t const read = sn::read_config(config, "ncclCommInitRankScalable", blocking);
      read != ncclSuccess) {
    return read;
  }
  return sn::init_rank(newcomm, nranks, commIds[0], myrank, sn::current_device(), blocking);
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config) {
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR) {
    return sn::warn(ncclInvalidArgument, "ncclCommSplit: color " + std::to_string(color) +
                                             " is negative: pass a color >= 0, or "
                                             "NCCL_SPLIT_NOCOLOR to join no communicator");
  }
  return sn::make_child(comm, newcomm, config, "ncclCommSplit", [&](sn::comm_core& parent) {
    return sn::split_members(parent, color, key);
  });
}

// ncclMemAlloc maps device memory with the driver's virtual memory calls, as NCCL does by default
// (src/allocator.cc: cuMemCreate, cuMemAddressReserve, cuMemMap, cuMemSetAccess for the device
// and each peer that can reach it, the size rounded up to the recommended granularity), through
// the simulated driver's entry points. A null pointer or a size of 0 falls back to cudaMalloc,
// which answers for them. Such memory is not cudaMalloc's: cudaFree refuses it, ncclMemFree
// unmaps it.
ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  if (ptr == nullptr || size == 0) {
    cudaError_t const allocated = cudaMalloc(ptr, size);
    if (allocated == cudaSuccess) return ncclSuccess;
    return sn::warn(ncclUnhandledCudaError, std::string{"ncclMemAlloc: cudaMalloc failed: "} +
                                                cudaGetErrorString(allocated));
  }
  int home = 0;  // the allocating device
  int devices = 0;
  if (cudaGetDevice(&home) != cudaSuccess || cudaGetDeviceCount(&devices) != cudaSuccess) {
    return sn::warn(ncclUnhandledCudaError, "ncclMemAlloc: no current device");
  }
  sn::driver_memory const& driver = sn::driver();
  CUmemAllocationProp properties{};
  properties.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  properties.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  properties.location.id = home;
  std::size_t granularity = 0;
  if (ncclResult_t const asked = sn::driver_checked(
          driver.granularity(&granularity, &properties, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
          "cuMemGetAllocationGranularity");
      asked != ncclSuccess) {
    return asked;
  }
  std::size_t const bytes = (size + granularity - 1) / granularity * granularity;
  CUmemGenericAllocationHandle handle{};
  if (ncclResult_t const created =
          sn::driver_checked(driver.create(&handle, bytes, &properties, 0), "cuMemCreate");
      created != ncclSuccess) {
    return created;
  }
  CUdeviceptr address = 0;
  ncclResult_t result =
      sn::driver_checked(driver.reserve(&address, bytes, granularity, 0, 0), "cuMemAddressReserve");
  if (result == ncclSuccess)
    result = sn::driver_checked(driver.map(address, bytes, 0, handle, 0), "cuMemMap");
  for (int other = 0; other < devices && result == ncclSuccess; ++other) {
    int reachable = 0;  // whether `other` can reach memory of `home`
    if (other != home &&
        (cudaDeviceCanAccessPeer(&reachable, other, home) != cudaSuccess || reachable == 0)) {
      continue;
    }
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = other;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    result = sn::driver_checked(driver.set_access(address, bytes, &access, 1), "cuMemSetAccess");
  }
  if (result != ncclSuccess) {
    if (address != 0) {
      static_cast<void>(driver.unmap(address, bytes));
      static_cast<void>(driver.address_free(address, bytes));
    }
    static_cast<void>(driver.release(handle));
    return result;
  }
  {
    std::lock_guard<std::mutex> const lock{sn::allocations_mutex};
    sn::allocations()[address] = sn::mapped_allocation{bytes, handle};
  }
  *ptr = reinterpret_cast<void*>(address);
  return ncclSuccess;
}

ncclResult_t ncclMemFree(void* ptr) {
  if (ptr == nullptr) return ncclSuccess;  // NCCL falls back to cudaFree(NULL)
  sn::mapped_allocation freed{};
  {
    std::lock_guard<std::mutex> const lock{sn::allocations_mutex};
    auto const found = sn::allocations().find(reinterpret_cast<CUdeviceptr>(ptr));
    if (found == sn::allocations().end()) {
      // NCCL asks the driver for the allocation's handle, which memory of cudaMalloc has not.
      return sn::warn(ncclUnhandledCudaError,
                      "ncclMemFree: the pointer is not the start of memory ncclMemAlloc returned "
                      "(or it was freed already)");
    }
    freed = found->second;
    sn::allocations().erase(found);
  }
  sn::driver_memory const& driver = sn::driver();
  auto const address = reinterpret_cast<CUdeviceptr>(ptr);
  ncclResult_t result = sn::driver_checked(driver.unmap(address, freed.bytes), "cuMemUnmap");
  if (ncclResult_t const released = sn::driver_checked(driver.release(freed.handle), "cuMemRelease");
      result == ncclSuccess) {
    result = released;
  }
  if (ncclResult_t const unreserved =
          sn::driver_checked(driver.address_free(address, freed.bytes), "cuMemAddressFree");
      result == ncclSuccess) {
    result = unreserved;
  }
  return result;
}

// Registration only makes NCCL's transfers zero-copy: what a collective computes is the same.
// NCCL keeps one registration per range, counting repeats (src/register/register.cc); a buffer
// that is not device memory is refused here (the stricter reading).
// NOLINTNEXTLINE(misc-misplaced-const): the signature of nccl.h
ncclResult_t ncclCommRegister(ncclComm_t const comm, void* buff, size_t size, void** handle) {
  auto const core = sn::core_of(comm);
  if (core == nullptr) return sn::invalid_comm("ncclCommRegister");
  if (handle == nullptr) return sn::warn(ncclInvalidArgument, "ncclCommRegister: handle is null");
  if (buff == nullptr || size == 0 || !sn::device_pointer(buff, size)) {
    return sn::warn(ncclInvalidArgument, "ncclCommRegister: the buffer is not " +
                                             std::to_string(size) + " bytes of device memory");
  }
  std::lock_guard<std::mutex> const lock{core->mutex};
  for (auto const& [key, registered] : core->registrations) {
    if (registered->buffer == buff && registered->bytes == size) {
      ++registered->references;
      *handle = const_cast<void*>(key);  // NOLINT(cppcoreguidelines-pro-type-const-cast)
      return ncclSuccess;
    }
  }
  auto made =
      std::make_unique<sn::comm_core::registration>(sn::comm_core::registration{buff, size, 1});
  void* const key = made.get();
  core->registrations.emplace(key, std::move(made));
  *handle = key;
  return ncclSuccess;
}

// A null handle is no registration (NCCL returns success); one this communicator did not give
// is ncclInvalidUsage ("Deregister: Could not find handle", src/register/register.cc).
// NOLINTNEXTLINE(misc-misplaced-const): the signature of nccl.h
ncclResult_t ncclCommDeregister(ncclComm_t const comm, void* handle) {
  auto const core = sn::core_of(comm);
  if (core == nullptr) return sn::invalid_comm("ncclCommDeregister");
  if (handle == nullptr) return ncclSuccess;
  std::lock_guard<std::mutex> const lock{core->mutex};
  auto const found = core->registrations.find(handle);
  if (found == core->registrations.end()) {
    return sn::warn(ncclInvalidUsage, "ncclCommDeregister: Could not find handle");
  }
  if (--found->second->references == 0) core->registrations.erase(found);
  return ncclSuccess;
}

// NCCL registers a window only where the communicator supports symmetric memory (NVLink
// multicast); elsewhere it checks the arguments and answers ncclSuccess with a null window
// (src/dev_runtime.cc: "if (!comm->symmetricSupport) return ncclSuccess"). The simulated device
// has no multicast: that answer, here always.
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                    int /*winFlags*/) {
  if (sn::core_of(comm) == nullptr) return sn::invalid_comm("ncclCommWindowRegister");
  if (win == nullptr) return sn::warn(ncclInvalidArgument, "ncclCommWindowRegister: win is null");
  *win = nullptr;
  if (buff == nullptr || size == 0) {
    return sn::warn(ncclInvalidArgument,
                    "ncclCommWindowRegister: the buffer is null or its size is 0");
  }
  return ncclSuccess;
}

// A null window is none (NCCL returns success); the simulated NCCL never gives another.
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  if (sn::core_of(comm) == nullptr) return sn::invalid_comm("ncclCommWindowDeregister");
  if (win == nullptr) return ncclSuccess;
  return sn::warn(ncclInvalidArgument,
                  "ncclCommWindowDeregister: not a window ncclCommWindowRegister gave");
}

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  auto const core = sn::core_of(comm);
  if (core == nullptr) return sn::invalid_comm("ncclRedOpCreatePreMulSum");
  if (ncclResult_t const ready = sn::ensure_ready(*core, "ncclRedOpCreatePreMulSum");
      ready != ncclSuccess) {
    return ready;
  }
  std::size_t const size = sn::element_bytes(datatype);
  if (op == nullptr || scalar == nullptr || size == 0 ||
      (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)) {
    return sn::warn(
        ncclInvalidArgument,
        "ncclRedOpCreatePreMulSum: op or scalar is null, data type " + std::to_string(datatype) +
            " is not one the simulated NCCL models, or "
            "residence " +
            std::to_string(residence) + " is neither ncclScalarDevice nor ncclScalarHostImmediate");
  }
  sn::comm_core::user_op made{datatype, {}, nullptr};
  if (residence == ncclScalarHostImmediate) {
    std::memcpy(made.scalar.data(), scalar, size);  // "dereferenced before ... returns"
  } else {
    made.scalar_on_device = scalar;
  }
  // Handles are unique across communicators, so that one used with another is refused.
  static std::atomic<int> next{ncclNumOps};
  int const handle = next.fetch_add(1);
  {
    std::lock_guard<std::mutex> const lock{core->mutex};
    core->user_ops.emplace(handle, made);
  }
  *op = static_cast<ncclRedOp_t>(handle);
  return ncclSuccess;
}

// "The operator must have been created by ncclRedOpCreatePreMul with the matching communicator"
// (nccl.h); NCCL refuses a built-in one and one unknown to the communicator (src/enqueue.cc).
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  if (op >= ncclSum && op < ncclNumOps) {
    return sn::warn(ncclInvalidArgument, "ncclRedOpDestroy: operator is a NCCL builtin.");
  }
  auto const core = sn::core_of(comm);
  if (core == nullptr) return sn::invalid_comm("ncclRedOpDestroy");
  std::lock_guard<std::mutex> const lock{core->mutex};
  if (core->user_ops.erase(static_cast<int>(op)) == 0) {
    return sn::warn(ncclInvalidArgument,
                    "ncclRedOpDestroy: operator unknown to this communicator.");
  }
  return ncclSuccess;
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                            ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  if (excludeRanksList == nullptr || excludeRanksCount < 1) {
    return sn::warn(ncclInvalidArgument,
                    "ncclCommShrink: excludeRanksList is null or excludeRanksCount < 1: name at "
                    "least one rank to leave out");
  }
  if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT) {
    return sn::warn(ncclInvalidArgument,
                    "ncclCommShrink: shrinkFlags " + std::to_string(shrinkFlags) +
                        " is neither NCCL_SHRINK_DEFAULT nor NCCL_SHRINK_ABORT");
  }
  // NCCL sorts the caller's list in place (ncclCommInitChildComm, src/init.cc).
  std::sort(excludeRanksList, excludeRanksList + excludeRanksCount);
  return sn::make_child(comm, newcomm, config, "ncclCommShrink", [&](sn::comm_core& parent) {
    return sn::shrink_members(parent, excludeRanksList, excludeRanksCount, shrinkFlags);
  });
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return sn::init_rank(comm, nranks, commId, rank, sn::current_device(), true);
}

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, int const* devlist) {
  if (comms == nullptr || ndev < 1) {
    return sn::warn(ncclInvalidArgument, "ncclCommInitAll: comms is null or ndev < 1");
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
  std::vector<int> chosen(static_cast<std::size_t>(ndev));
  for (int i = 0; i < ndev; ++i) {
    int const device = devlist != nullptr ? devlist[i] : i;
    if (device < 0 || device >= devices) {
      return sn::warn(ncclInvalidArgument, "ncclCommInitAll: device " + std::to_string(device) +
                                               " does not exist (" + std::to_string(devices) +
                                               " visible)");
    }
    if (std::count(chosen.begin(), chosen.begin() + i, device) != 0) {
      // NCCL 2.28 refuses two ranks on one GPU ("Duplicate GPU detected").
      return sn::warn(ncclInvalidUsage, "ncclCommInitAll: Duplicate GPU detected: device " +
                                            std::to_string(device) + " is listed twice");
    }
    chosen[static_cast<std::size_t>(i)] = device;
  }
  ncclUniqueId id;
  static_cast<void>(ncclGetUniqueId(&id));
  // One group, as NCCL's own ncclCommInitAll: every rank joins before any waits.
  ncclGroupStart();
  ncclResult_t result = ncclSuccess;
  for (int i = 0; i < ndev && result == ncclSuccess; ++i) {
    result = sn::init_rank(&comms[i], ndev, id, i, chosen[static_cast<std::size_t>(i)], true);
  }
  ncclResult_t const ended = ncclGroupEnd();
  return result != ncclSuccess ? result : ended;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  return sn::core_of(comm) == nullptr ? sn::invalid_comm("ncclCommFinalize") : ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  return sn::release(comm, false, "ncclCommDestroy");
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  return sn::release(comm, true, "ncclCommAbort");
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  auto const core = sn::core_of(comm);
  if (core == nullptr) return sn::invalid_comm("ncclCommGetAsyncError");
  if (asyncError == nullptr) {
    return sn::warn(ncclInvalidArgument, "ncclCommGetAsyncError: asyncError is null");
  }
  *asyncError = core->async_error.load();
  return ncclSuccess;
}

// NOLINTNEXTLINE(misc-misplaced-const): the signature of nccl.h
ncclResult_t ncclCommCount(ncclComm_t const comm, int* count) {
  return sn::read_shape(comm, count, &sn::comm_core::ranks, "ncclCommCount");
}

// NOLINTNEXTLINE(misc-misplaced-const): the signature of nccl.h
ncclResult_t ncclCommCuDevice(ncclComm_t const comm, int* device) {
  return sn::read_shape(comm, device, &sn::comm_core::device, "ncclCommCuDevice");
}

// NOLINTNEXTLINE(misc-misplaced-const): the signature of nccl.h
ncclResult_t ncclCommUserRank(ncclComm_t const comm, int* rank) {
  return sn::read_shape(comm, rank, &sn::comm_core::rank, "ncclCommUserRank");
}

ncclResult_t ncclAllReduce(void const* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  return sn::issue("ncclAllReduce",
                   {sn::collective_kind::all_reduce, sendbuff, recvbuff, count, datatype, op, 0},
                   comm, stream);
}

ncclResult_t ncclReduce(void const* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return sn::issue("ncclReduce",
                   {sn::collective_kind::reduce, sendbuff, recvbuff, count, datatype, op, root},
                   comm, stream);
}

ncclResult_t ncclReduceScatter(void const* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  return sn::issue(
      "ncclReduceScatter",
      {sn::collective_kind::reduce_scatter, sendbuff, recvbuff, recvcount, datatype, op, 0}, comm,
      stream);
}

ncclResult_t ncclAllGather(void const* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return sn::issue(
      "ncclAllGather",
      {sn::collective_kind::all_gather, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0}, comm,
      stream);
}

ncclResult_t ncclBroadcast(void const* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  return sn::issue(
      "ncclBroadcast",
      {sn::collective_kind::broadcast, sendbuff, recvbuff, count, datatype, ncclSum, root}, comm,
      stream);
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

// nccl.h: "Send data from sendbuff to rank peer. Rank peer needs to call ncclRecv with the same
// datatype and the same count from this rank. This operation is blocking for the GPU. If
// multiple ncclSend and ncclRecv operations need to progress concurrently to complete, they must
// be fused within a ncclGroupStart/ncclGroupEnd section."
ncclResult_t ncclSend(void const* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return sn::issue("ncclSend",
                   {sn::collective_kind::send, sendbuff, nullptr, count, datatype, ncclSum, peer},
                   comm, stream);
}

// nccl.h: "Receive data from rank peer into recvbuff. Rank peer needs to call ncclSend with the
// same datatype and the same count to this rank."
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return sn::issue(
      "ncclRecv", {sn::collective_kind::receive, nullptr, recvbuff, count, datatype, ncclSum, peer},
      comm, stream);
}

ncclResult_t ncclGroupStart() {
  ++sn::group.depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  auto& group = sn::group;
  if (group.depth == 0) {
    return sn::warn(ncclInvalidUsage, "ncclGroupEnd: no ncclGroupStart to end");
  }
  if (--group.depth > 0) return ncclSuccess;
  graphstep::sim::detail::library_call_scope const inside{"ncclGroupEnd"};
  if (ncclResult_t const failed = std::exchange(group.error, ncclSuccess); failed != ncclSuccess) {
    group.launches.clear();  // dropped, not launched
    group.blocking = true;
    // Their initialization was dropped too: the communicators are unusable.
    for (auto const& core : std::exchange(group.joining, {})) core->async_error = failed;
    return failed;
  }
  ncclResult_t result = ncclSuccess;
  auto const joining = std::exchange(group.joining, {});
  for (auto const& core : joining) {
    if (ncclResult_t const done = sn::finish_rendezvous(core); result == ncclSuccess) {
      result = done;
    }
  }
  auto launches = std::exchange(group.launches, {});
  sn::fuse_point_to_point(launches);
  bool const blocking = std::exchange(group.blocking, true);
  // Every communicator of the group offers its connections before any waits for its peers, as
  // NCCL connects a group's communicators on threads of their own (ncclCollPreconnectFunc).
  for (auto const& pending : launches) {
    if (pending.core->ranks > 1 && !point_to_point(pending.call.kind)) {
      pending.core->link->offer_connection(pending.call.kind);
    }
  }
  if (!launches.empty() && !blocking) {
    ncclResult_t const launched = sn::launch_in_background(std::move(launches));
    return result == ncclSuccess ? launched : result;
  }
  ncclResult_t const launched = sn::launch_all(launches);
  return result == ncclSuccess ? launched : result;
}

// nccl.h, All-to-All: "Data to send to destination rank j is taken from sendbuff+j*count and
// data received from source rank i is placed at recvbuff+i*count."
ncclResult_t ncclAlltoAll(void const* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return sn::move_blocks("ncclAlltoAll", sn::block_pattern::all_to_all, sendbuff, recvbuff, count,
                         datatype, 0, comm, stream);
}

// nccl.h, Gather: "Each rank sends count elements from sendbuff to the root rank. On the root
// rank, data from rank i is placed at recvbuff + i*count."
ncclResult_t ncclGather(void const* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  return sn::move_blocks("ncclGather", sn::block_pattern::gather, sendbuff, recvbuff, count,
                         datatype, root, comm, stream);
}

// nccl.h, Scatter: "On the root rank, count elements from sendbuff+i*count are sent to rank i.
// ... Each rank receives count elements into recvbuff."
ncclResult_t ncclScatter(void const* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return sn::move_blocks("ncclScatter", sn::block_pattern::scatter, sendbuff, recvbuff, count,
                         datatype, root, comm, stream);
}

}  // extern "C"
