#pragma once

/// @file nccl/nccl_comm.hpp
/// @brief `nccl_comm`: an owning, move-only NCCL communicator, and how it is made from NCCL's
/// own constructors. Communicators made from a launcher's environment are in
/// `<graphstep/nccl/bootstrap.hpp>`.

#include <nccl.h>

#include <chrono>
#include <graphstep/nccl/nccl_comm_view.hpp>
#include <graphstep/nccl/unique_id.hpp>
#include <memory>
#include <vector>

namespace graphstep::nccl {

/// @brief How long creating a communicator waits, by default, for every rank to join.
inline constexpr std::chrono::minutes default_init_timeout{10};

/// @brief How a communicator is made.
struct nccl_comm_options {
  /// Which of this rank's communicators this is (say 0 for data parallel, 1 for tensor
  /// parallel); recorded with every captured collective so sequences are compared per slot.
  int slot{0};
  /// How long `from_unique_id` (and the bootstraps built on it) waits for every rank to join.
  /// Past it the initialization is aborted and nccl_error thrown: a rank that never starts, or
  /// one given another id, would otherwise hold the others forever. Must be positive.
  std::chrono::milliseconds init_timeout{default_init_timeout};
};

/// @brief An owning NCCL communicator. Its destructor calls `ncclCommDestroy`, or
/// `ncclCommAbort` once an error was seen on it, and never throws. Move-only; a moved-from
/// communicator is empty. Views stay valid across moves; views left over after the destruction
/// throw usage_error instead of reaching NCCL.
///
/// `from_unique_id` makes a non-blocking communicator (`ncclConfig_t::blocking = 0`), the kind
/// NCCL documents for aborting "at any point, during initialization, communication or when
/// finalizing" (user guide, Fault Tolerance): its initialization is bounded by
/// `nccl_comm_options::init_timeout`, and graphstep's calls on it wait for NCCL's
/// `ncclInProgress` with no lock held, so an abort from another thread (a watchdog) ends the
/// wait at once and never frees the communicator under a call.
///
/// One GPU per process is the model NCCL recommends with CUDA graphs. `for_local_devices`
/// drives several GPUs from one process (for tests and small jobs); NCCL documents that
/// capturing collectives of several GPUs from one process can deadlock, so capture with one
/// communicator per process where possible.
class nccl_comm {
 public:
  /// @brief From an id every rank already has (e.g. broadcast by MPI), on the current device:
  /// `ncclCommInitRankConfig` with `blocking = 0`, then a wait of at most
  /// `options.init_timeout` for every rank to join.
  /// @throws usage_error (rank outside [0, world_size); a timeout that is not positive),
  /// nccl_error (NCCL fails; the ranks did not all join in time: the initialization is
  /// aborted), no_device_error
  [[nodiscard]] static nccl_comm from_unique_id(unique_id_bytes const& id, int rank, int world_size,
                                                nccl_comm_options const& options = {});
  /// @brief One communicator per listed local device, all in this process (`ncclCommInitAll`).
  /// Capturing collectives of several of them from one process can deadlock (see above).
  /// @throws usage_error (no device listed, a device listed twice or negative), nccl_error,
  /// no_device_error
  [[nodiscard]] static std::vector<nccl_comm> for_local_devices(std::vector<int> const& devices);
  /// @brief A fresh id (`ncclGetUniqueId`), on the rank that creates it. With NCCL_COMM_ID set,
  /// every rank gets the same id.
  /// @throws nccl_error
  [[nodiscard]] static unique_id_bytes new_unique_id();
  /// @brief Takes ownership of a communicator made elsewhere. Views already made from the raw
  /// handle share the new owner's state (and take `options.slot`). To use a communicator
  /// without owning it, make an `nccl_comm_view` of the handle instead.
  /// @throws usage_error (a null handle; one an `nccl_comm` already owns, which is left
  /// alone), nccl_error (not a valid communicator; it is released)
  [[nodiscard]] static nccl_comm adopt(ncclComm_t handle, nccl_comm_options const& options = {});

  nccl_comm(nccl_comm&&) noexcept = default;
  /// @brief Releases the communicator held (as the destructor does), then takes `other`'s.
  /// @post `other` is empty
  nccl_comm& operator=(nccl_comm&& other) noexcept;
  /// @brief Releases the communicator; never throws.
  ~nccl_comm();
  nccl_comm(nccl_comm const&) = delete;
  nccl_comm& operator=(nccl_comm const&) = delete;

  /// @brief A view sharing this communicator's state.
  /// @throws usage_error (a moved-from communicator)
  [[nodiscard]] nccl_comm_view view() const;
  operator nccl_comm_view() const { return view(); }  // NOLINT(google-explicit-constructor)
  /// @brief Whether this communicator was moved from.
  [[nodiscard]] bool empty() const noexcept { return state_ == nullptr; }
  /// @brief The handle; null when empty or aborted.
  [[nodiscard]] ncclComm_t get() const noexcept;

  /// @brief Aborts the communicator: outstanding collectives are cancelled; later calls on it
  /// throw nccl_error. Graphs that captured its collectives must not be replayed afterwards.
  void abort() noexcept;

 private:
  friend struct detail::comm_access;
  explicit nccl_comm(std::shared_ptr<detail::comm_state> state) noexcept;
  std::shared_ptr<detail::comm_state> state_;
};

/// @brief The version of the NCCL library this process loaded, as ncclGetVersion reports it
/// (major * 10000 + minor * 100 + patch: 22807 for 2.28.7).
[[nodiscard]] int loaded_nccl_version();

}  // namespace graphstep::nccl
