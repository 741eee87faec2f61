#pragma once

/// @file nccl/nccl_comm.hpp
/// @brief `nccl_comm` (owning, move-only) and `nccl_comm_view` (non-owning).

#include <nccl.h>

#include <atomic>
#include <chrono>
#include <graphstep/nccl/collective_log.hpp>
#include <graphstep/nccl/launch_environment.hpp>
#include <graphstep/nccl/rendezvous.hpp>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace graphstep::nccl {

namespace detail {

/// Releases a communicator: `ncclCommDestroy`, or `ncclCommAbort` when an error was seen on it
/// (a communicator in error cannot finish its work, so destroying it would wait forever).
struct comm_deleter {
  using pointer = ncclComm_t;  // unique_ptr holds the handle itself
  bool abort_on_release{false};
  void operator()(pointer handle) const noexcept;
};

/// What a communicator's owner and views share: the handle, its shape, the log of captured
/// collectives, and the first failure seen on it (possibly by a watchdog thread).
struct comm_state {
  std::unique_ptr<ncclComm, comm_deleter> handle;
  int rank{};
  int size{};
  int device{};
  int slot{};
  collective_log captured;
  std::set<int> warmed_up;  // collective kinds already run eagerly
  std::atomic<bool> aborted{false};
  // Held while a call enqueues work on `handle`, and by `abort`, so a watchdog thread never
  // frees the communicator under a call of the training thread.
  std::timed_mutex enqueue_mutex;
  mutable std::mutex failure_mutex;
  std::string failure;  // guarded by failure_mutex; the first reason the communicator died

  /// Records `reason` (the first one wins) and aborts the communicator.
  void fail(std::string const& reason) noexcept;
  /// Aborts the communicator; later calls on it throw. `reason` is recorded when none was.
  void abort(std::string const& reason) noexcept;
  /// The recorded reason, if the communicator was aborted.
  [[nodiscard]] std::optional<std::string> failure_reason() const;
  /// @throws nccl_error with the recorded reason once the communicator was aborted
  void throw_if_aborted(char const* what) const;
};

}  // namespace detail

/// @brief A non-owning view of a communicator; must not outlive it. Pass by value.
class nccl_comm_view {
 public:
  explicit nccl_comm_view(detail::comm_state* state) noexcept : state_{state} {}
  /// @brief The handle; null once the communicator was aborted.
  [[nodiscard]] ncclComm_t get() const noexcept { return state_->handle.get(); }
  [[nodiscard]] int rank() const noexcept { return state_->rank; }
  [[nodiscard]] int size() const noexcept { return state_->size; }
  [[nodiscard]] int device() const noexcept { return state_->device; }
  /// @brief Which of this rank's communicators this is (`nccl_comm_options::slot`).
  [[nodiscard]] int slot() const noexcept { return state_->slot; }
  [[nodiscard]] bool aborted() const noexcept { return state_->aborted.load(); }
  /// @brief Why the communicator was aborted (rank, step, state), if it was.
  [[nodiscard]] std::optional<std::string> failure() const { return state_->failure_reason(); }
  /// @brief Collectives captured since the last `verify_captured_sequence`.
  [[nodiscard]] collective_log const& captured() const noexcept { return state_->captured; }
  [[nodiscard]] detail::comm_state& state() const noexcept { return *state_; }

 private:
  detail::comm_state* state_;
};

/// @brief How communicators are made.
struct nccl_comm_options {
  std::chrono::milliseconds rendezvous_timeout{default_rendezvous_timeout};
  /// Which of this rank's communicators this is (say 0 for data parallel, 1 for tensor
  /// parallel); recorded with every captured collective so sequences are compared per slot.
  int slot{0};
};

/// @brief An owning NCCL communicator. The handle lives in a `unique_ptr` whose deleter is
/// `ncclCommDestroy`, or `ncclCommAbort` once an error was seen; destructors never throw.
/// Move-only; a moved-from communicator is empty. Views stay valid across moves.
///
/// One GPU per process is the model NCCL recommends with CUDA graphs. `for_local_devices`
/// drives several GPUs from one process (for tests and small jobs); NCCL documents that
/// capturing collectives of several GPUs from one process can deadlock, so capture with one
/// communicator per process where possible.
class nccl_comm {
 public:
  /// @brief From the launcher's environment (see `read_launch_environment`): RANK/WORLD_SIZE/
  /// MASTER_ADDR/MASTER_PORT (the id is exchanged by graphstep's TCP rendezvous), NCCL_COMM_ID
  /// (NCCL bootstraps itself), mpirun (MPI_Bcast, in builds with MPI; MPI must be initialized),
  /// or, with no launcher variables, a one-rank communicator. Makes LOCAL_RANK's device current.
  /// @throws usage_error (bad environment, LOCAL_RANK without a GPU), nccl_error (rendezvous or
  /// NCCL failure), no_device_error
  [[nodiscard]] static nccl_comm from_environment(nccl_comm_options const& options = {});
  /// @brief From an id every rank already has (e.g. broadcast by MPI), on the current device.
  /// @throws usage_error (rank outside [0, world_size)), nccl_error, no_device_error
  [[nodiscard]] static nccl_comm from_unique_id(unique_id_bytes const& id, int rank, int world_size,
                                                nccl_comm_options const& options = {});
  /// @brief One communicator per listed local device, all in this process (ncclCommInitAll).
  /// Capturing collectives of several of them from one process can deadlock (see above).
  /// @throws usage_error (no device listed), nccl_error, no_device_error
  [[nodiscard]] static std::vector<nccl_comm> for_local_devices(std::vector<int> const& devices);
  /// @brief A fresh id (ncclGetUniqueId), on the rank that creates it. With NCCL_COMM_ID set,
  /// every rank gets the same id.
  /// @throws nccl_error
  [[nodiscard]] static unique_id_bytes new_unique_id();
  /// @brief Takes ownership of a communicator made elsewhere.
  /// @throws nccl_error (the handle is not a valid communicator)
  [[nodiscard]] static nccl_comm adopt(ncclComm_t handle, nccl_comm_options const& options = {});

  nccl_comm(nccl_comm&&) noexcept = default;
  /// @post `other` is empty
  nccl_comm& operator=(nccl_comm&& other) noexcept = default;
  ~nccl_comm() = default;
  nccl_comm(nccl_comm const&) = delete;
  nccl_comm& operator=(nccl_comm const&) = delete;

  /// @throws usage_error (a moved-from communicator)
  [[nodiscard]] nccl_comm_view view() const;
  operator nccl_comm_view() const { return view(); }  // NOLINT(google-explicit-constructor)
  [[nodiscard]] bool empty() const noexcept { return state_ == nullptr; }
  /// @brief The handle; null when empty or aborted.
  [[nodiscard]] ncclComm_t get() const noexcept {
    return state_ == nullptr ? nullptr : state_->handle.get();
  }

  /// @brief Aborts the communicator: outstanding collectives are cancelled; later calls on it
  /// throw nccl_error. Graphs that captured its collectives must not be replayed afterwards.
  void abort() noexcept;

 private:
  explicit nccl_comm(std::unique_ptr<detail::comm_state> state) noexcept
      : state_{std::move(state)} {}
  std::unique_ptr<detail::comm_state> state_;
};

}  // namespace graphstep::nccl
