#pragma once

/// @file nccl/nccl_comm.hpp
/// @brief `nccl_comm` (owning, move-only) and `nccl_comm_view` (non-owning).

#include <graphstep/nccl/collective_log.hpp>
#include <graphstep/nccl/launch_environment.hpp>
#include <graphstep/nccl/rendezvous.hpp>

#include <nccl.h>

#include <chrono>
#include <memory>
#include <set>
#include <vector>

namespace graphstep::nccl {

namespace detail {
/// What a communicator's handle and views share: the handle, its shape, its captured-collective
/// log and whether it was aborted.
struct comm_state {
  ncclComm_t handle{};
  int rank{};
  int size{};
  int device{};
  bool aborted{false};
  collective_log captured;
  std::set<int> warmed_up;  // collective kinds already run eagerly
};
}  // namespace detail

/// @brief A non-owning view of a communicator; must not outlive it. Pass by value.
class nccl_comm_view {
 public:
  explicit nccl_comm_view(detail::comm_state* state) noexcept : state_{state} {}
  [[nodiscard]] ncclComm_t get() const noexcept { return state_->handle; }
  [[nodiscard]] int rank() const noexcept { return state_->rank; }
  [[nodiscard]] int size() const noexcept { return state_->size; }
  [[nodiscard]] int device() const noexcept { return state_->device; }
  [[nodiscard]] bool aborted() const noexcept { return state_->aborted; }
  /// @brief Collectives captured since the last `verify_captured_sequence`.
  [[nodiscard]] collective_log const& captured() const noexcept { return state_->captured; }
  [[nodiscard]] detail::comm_state& state() const noexcept { return *state_; }

 private:
  detail::comm_state* state_;
};

/// @brief How communicators are made.
struct nccl_comm_options {
  std::chrono::milliseconds rendezvous_timeout{default_rendezvous_timeout};
};

/// @brief An owning NCCL communicator. Destroyed with `ncclCommDestroy`, or `ncclCommAbort` once
/// an error was seen; destructors never throw. Move-only; a moved-from communicator is empty.
///
/// One GPU per process is the model NCCL recommends with CUDA graphs. `for_local_devices`
/// drives several GPUs from one process (for tests and small jobs); NCCL documents that
/// capturing collectives of several GPUs from one process can deadlock, so capture with one
/// communicator per process where possible.
class nccl_comm {
 public:
  /// @brief From the launcher's environment: RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT (the id is
  /// exchanged by graphstep's TCP rendezvous), NCCL_COMM_ID (NCCL bootstraps itself), or, with
  /// no launcher variables, a one-rank communicator. Makes LOCAL_RANK's device current.
  /// @throws usage_error (bad environment), nccl_error (rendezvous or NCCL failure),
  /// no_device_error
  [[nodiscard]] static nccl_comm from_environment(nccl_comm_options const& options = {});
  /// @brief From an id every rank already has (e.g. broadcast by MPI).
  [[nodiscard]] static nccl_comm from_unique_id(unique_id_bytes const& id, int rank,
                                                int world_size);
  /// @brief One communicator per listed local device, all in this process (ncclCommInitAll).
  [[nodiscard]] static std::vector<nccl_comm> for_local_devices(std::vector<int> const& devices);
  /// @brief A fresh id (ncclGetUniqueId), on the rank that creates it.
  [[nodiscard]] static unique_id_bytes new_unique_id();

  nccl_comm(nccl_comm&&) noexcept = default;
  nccl_comm& operator=(nccl_comm&&) noexcept;
  ~nccl_comm();

  [[nodiscard]] nccl_comm_view view() const;
  operator nccl_comm_view() const { return view(); }  // NOLINT: implicit by design
  [[nodiscard]] bool empty() const noexcept { return state_ == nullptr; }

  /// @brief Aborts the communicator: outstanding collectives are cancelled, later calls fail.
  void abort() noexcept;

 private:
  explicit nccl_comm(std::unique_ptr<detail::comm_state> state) noexcept
      : state_{std::move(state)} {}
  void destroy() noexcept;
  std::unique_ptr<detail::comm_state> state_;
};

}  // namespace graphstep::nccl
