#pragma once

// What every handle of one communicator shares — the owning `nccl_comm` and each
// `nccl_comm_view` — and the registry through which a view made from a raw `ncclComm_t` finds
// it. Private to graphstep::nccl.
//
// One state per live communicator. The registry maps each handle to its state without keeping
// the state alive (weak references): an owner or a view keeps it alive, so
//   - an `nccl_comm` and any raw view of its handle share one state (they agree on the log of
//     captured collectives, the kinds warmed up, the slot, an abort and its reason);
//   - views of a handle graphstep does not own share a state made by the first of them, which
//     goes when the last of them goes. A communicator may be destroyed only once no view of it
//     is left (a view must not outlive its communicator), so a state never outlives its
//     communicator, and NCCL reusing the address for a new communicator finds no stale state.
// An abort or an owner's destruction removes the entry at once, as the address is then free.

#include <nccl.h>

#include <atomic>
#include <chrono>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/nccl/collective_log.hpp>
#include <graphstep/nccl/nccl_comm.hpp>
#include <graphstep/nccl/nccl_comm_view.hpp>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "nccl/detail/peer_watch.hpp"

namespace graphstep::nccl::detail {

/// Releases an owned communicator: `ncclCommDestroy`, or `ncclCommAbort` when an error was
/// seen on it (a communicator in error cannot finish its work, so destroying it would wait
/// forever). The call runs on a thread of its own: on a blocking communicator both wait until
/// every graph that captured one of its collectives is destroyed (NCCL counts captured plans as
/// persistent references; src/init.cc, commDestroySync), and the thread that releases it (a
/// watchdog, an owner going out of scope before the graphs) must never block on that.
/// `ncclCommAbort` sets the abort flag its kernels poll before it waits, so a hung collective
/// still ends at once. At exit the process waits a bounded time for releases under way.
struct comm_deleter {
  using pointer = ncclComm_t;  // unique_ptr holds the handle itself
  bool abort_on_release{false};
  void operator()(pointer handle) const noexcept;
};

/// What ncclCommGetAsyncError answers for `handle`, or the query's own failure.
[[nodiscard]] ncclResult_t async_result(ncclComm_t handle) noexcept;

/// The rank, size and device NCCL reports for a communicator; fixed for its lifetime.
struct comm_shape {
  int rank{};
  int size{};
  int device{};
};

class comm_state : public std::enable_shared_from_this<comm_state> {
  struct key {
    explicit key() = default;
  };

 public:
  /// A communicator graphstep has just created, owned from here on. Any registry entry for the
  /// address belonged to a communicator already destroyed and is replaced.
  /// @throws nccl_error (NCCL's queries fail; the handle is released)
  static std::shared_ptr<comm_state> create(ncclComm_t handle, int slot);
  /// A communicator made elsewhere, owned from here on (`nccl_comm::adopt`). When views of the
  /// handle already share a state, that state becomes owned and takes `slot`.
  /// @throws usage_error (a null handle; one an `nccl_comm` already owns: left untouched),
  /// nccl_error (NCCL's queries fail; the handle is released)
  static std::shared_ptr<comm_state> adopt(ncclComm_t handle, int slot);
  /// The state of a communicator made elsewhere, for a view (`nccl_comm_view{handle}`): the
  /// owner's or another view's when one is alive, else a new one that graphstep does not own.
  /// @throws usage_error (a null handle; one NCCL refuses as invalid), nccl_error (NCCL
  /// reports another error on it)
  static std::shared_ptr<comm_state> borrow(ncclComm_t handle);

  comm_state(key /*passkey*/, ncclComm_t handle, comm_shape shape, int slot, bool owned) noexcept;
  /// Leaves the registry; releases the handle if it is still owned and held.
  ~comm_state();
  comm_state(comm_state const&) = delete;
  comm_state& operator=(comm_state const&) = delete;

  /// The handle; null once aborted or closed.
  [[nodiscard]] ncclComm_t handle() const noexcept { return handle_.load(); }
  [[nodiscard]] int rank() const noexcept { return shape_.rank; }
  [[nodiscard]] int size() const noexcept { return shape_.size; }
  [[nodiscard]] int device() const noexcept { return shape_.device; }
  [[nodiscard]] int slot() const noexcept { return slot_.load(); }
  [[nodiscard]] bool owned() const noexcept { return owned_.load(); }
  [[nodiscard]] bool aborted() const noexcept { return aborted_.load(); }

  /// Aborts the communicator (`ncclCommAbort`, also of one graphstep does not own: nothing
  /// else releases a hung collective); later calls on it throw. The first reason is kept.
  void abort(std::string const& reason) noexcept;
  /// The owner's release (`~nccl_comm`): destroys the communicator, or aborts it when an error
  /// was seen on it. Views left over then throw usage_error instead of touching freed memory.
  /// The peer watch says goodbye only when `in_order` and no error was seen: a rank closing
  /// its communicator while it unwinds from an error is a lost rank to its peers.
  void close(bool in_order) noexcept;
  /// Watches the other ranks' processes for the communicator's life: a peer whose process
  /// ends aborts the communicator at once, naming it. The handler `watch` was made with must
  /// come from `abort_when_a_peer_is_lost`.
  void watch_peers(std::unique_ptr<peer_watch> watch) noexcept;
  /// The handler for this state's peer watch: aborts the communicator with the reason.
  [[nodiscard]] peer_lost_handler abort_when_a_peer_is_lost();
  /// The recorded reason, if the communicator was aborted.
  [[nodiscard]] std::optional<std::string> failure_reason() const;
  /// @throws nccl_error with the recorded reason once the communicator was aborted;
  /// usage_error once its owner destroyed it
  void throw_if_aborted(char const* what) const;

  /// Calls `call(handle)` while holding the enqueue lock, which `abort` and `close` also take,
  /// so a watchdog thread never frees the communicator under the call. On a non-blocking
  /// communicator the call may answer ncclInProgress: then this waits until NCCL reports the
  /// work issued (see wait_until_ready). A failed call marks the communicator for an abort on
  /// release (it is in doubt). Inside a group_guard, the communicator joins the guard's list.
  /// @throws nccl_error (aborted: see throw_if_aborted; the call failed: named `call_name`),
  /// usage_error (destroyed)
  template <typename Call>
  void enqueue(char const* what, char const* call_name, Call&& call) {
    ncclResult_t status = ncclSuccess;
    {
      std::lock_guard<std::timed_mutex> lock{enqueue_mutex_};
      throw_if_aborted(what);
      status = std::forward<Call>(call)(handle_.load());
    }
    if (status == ncclInProgress) {
      wait_until_ready(what, call_name);
    } else if (status != ncclSuccess) {
      fail(status, call_name);
    } else {
      joined_group();
    }
  }

  /// Polls ncclCommGetAsyncError until the communicator's last operation is done. The enqueue
  /// lock is held only for each poll, so an abort from another thread (a watchdog) can end the
  /// wait at any point; NCCL documents non-blocking communicators as the way to abort "at any
  /// point, during initialization, communication or when finalizing" (NCCL user guide, Fault
  /// Tolerance). Unbounded otherwise: a peer that never issues its part holds it until then.
  /// @throws nccl_error (aborted meanwhile; NCCL reports an error, named `call_name`),
  /// usage_error (destroyed meanwhile)
  void wait_until_ready(char const* what, char const* call_name);

  /// NCCL's asynchronous error, read only when the enqueue lock is free within `wait` (a call
  /// stuck inside NCCL holds it) and the communicator is alive; none otherwise.
  [[nodiscard]] std::optional<ncclResult_t> async_error(std::chrono::milliseconds wait) noexcept;

  /// Whether a collective of `kind` ran eagerly on the communicator (a capture needs it).
  [[nodiscard]] bool warmed_up(collective_kind kind) const;
  /// A collective of `kind` ran eagerly.
  void ran_eagerly(collective_kind kind);
  /// A collective was captured, in `capture` (empty when no capture_scope of graphstep made it).
  void captured(collective_record const& record, graphs::capture_ref capture);
  /// The collectives captured since the last `take_captured`, less those of captures graphstep
  /// discarded since (their graphs never run).
  [[nodiscard]] collective_log captured() const;
  /// The same; the log starts afresh.
  [[nodiscard]] collective_log take_captured();

 private:
  static std::shared_ptr<comm_state> make_owned(ncclComm_t handle, int slot);
  [[noreturn]] void fail(ncclResult_t status, char const* call_name);
  void joined_group();     // inside an open group_guard on this thread: the guard waits for it
  void forget() noexcept;  // leaves the registry, if the entry for key_ is this state's

  ncclComm* const key_;  // the handle this state is registered under, kept after a release
  comm_shape const shape_;
  std::atomic<ncclComm_t> handle_;
  std::atomic<int> slot_;
  std::atomic<bool> owned_;
  std::atomic<bool> abort_on_release_{false};
  std::atomic<bool> aborted_{false};
  std::atomic<bool> closed_{false};
  std::mutex watch_mutex_;
  std::unique_ptr<peer_watch> peer_watch_;  // guarded by watch_mutex_
  // Held while a call enqueues work on the handle, and by abort and close.
  std::timed_mutex enqueue_mutex_;
  mutable std::mutex failure_mutex_;
  std::string failure_;  // guarded by failure_mutex_; the first reason the communicator died
  mutable std::mutex log_mutex_;
  [[nodiscard]] collective_log kept_captured() const;  // with log_mutex_ held
  // Guarded by log_mutex_: what was captured, and the capture each record belongs to.
  std::vector<std::pair<collective_record, graphs::capture_ref>> captured_;
  std::set<int> warmed_up_;  // guarded by log_mutex_; collective kinds already run eagerly
};

/// The communicators whose collectives the innermost open group_guard of this thread issued:
/// when its ncclGroupEnd answers ncclInProgress (a non-blocking group), each is waited for.
class group_members {
 public:
  /// A group_guard opens (guards nest; the outermost one's ncclGroupEnd launches).
  static void open();
  /// The outermost guard closes: its members, each once; none for an inner guard.
  [[nodiscard]] static std::vector<std::shared_ptr<comm_state>> close();
  /// `state` issued a collective inside the open guard; nothing when no guard is open.
  static void add(std::shared_ptr<comm_state> state);
};

/// The library's way to a handle's state and back; the public classes keep it private.
struct comm_access {
  [[nodiscard]] static comm_state& state(nccl_comm_view const& view) noexcept {
    return *view.state_;
  }
  [[nodiscard]] static nccl_comm_view view(std::shared_ptr<comm_state> state) noexcept {
    return nccl_comm_view{std::move(state)};
  }
  [[nodiscard]] static nccl_comm comm(std::shared_ptr<comm_state> state) noexcept {
    return nccl_comm{std::move(state)};
  }
};

}  // namespace graphstep::nccl::detail
