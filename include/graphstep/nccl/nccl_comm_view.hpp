#pragma once

/// @file nccl/nccl_comm_view.hpp
/// @brief `nccl_comm_view`: the non-owning communicator handle that collectives,
/// `bucketed_all_reduce` and `watchdog` take, made from an `nccl_comm` or from a raw
/// `ncclComm_t`.

#include <nccl.h>

#include <graphstep/nccl/collective_log.hpp>
#include <memory>
#include <optional>
#include <string>

namespace graphstep::nccl {

namespace detail {
class comm_state;
struct comm_access;
}  // namespace detail

/// @brief A non-owning view of a communicator. Copies are cheap (a shared pointer). A communicator
/// made elsewhere must outlive every view of it; a view left over after its `nccl_comm` was
/// destroyed throws usage_error when used.
///
/// Every handle of one communicator — its owning `nccl_comm` and every view, however made —
/// shares one state: rank, size, device, slot, the collective kinds already run eagerly, the
/// log of captured collectives, and whether and why the communicator was aborted. A view made
/// from a raw `ncclComm_t` finds the state of the `nccl_comm` or other views of that handle that
/// are alive; if there is none, it makes one, which lasts as long as some view of it does. Keep
/// one view for as long as the communicator is used: a state made afresh has no warm-up and no
/// log, so a capture through it is refused until its collectives ran eagerly again.
class nccl_comm_view {
 public:
  /// @brief A view of a communicator made outside graphstep (`ncclCommInitRank`,
  /// `ncclCommSplit`, another library's). graphstep never destroys it, but aborts it when a
  /// `watchdog` finds it failed or hung: `ncclCommAbort` frees it, so once `aborted()` the
  /// handle must be neither used nor destroyed again. A view of a handle an `nccl_comm` owns
  /// shares that communicator's state.
  /// @throws usage_error (a null handle; one NCCL refuses as invalid: destroyed, aborted, or a
  /// non-blocking communicator still initializing), nccl_error (NCCL reports another error)
  explicit nccl_comm_view(ncclComm_t handle);

  nccl_comm_view(nccl_comm_view const&) noexcept = default;
  nccl_comm_view& operator=(nccl_comm_view const&) noexcept = default;
  /// @brief Copies: a moved-from view still refers to its communicator (a view is never empty).
  // NOLINTNEXTLINE(performance-move-constructor-init,cert-oop11-cpp): copying is the point
  nccl_comm_view(nccl_comm_view&& other) noexcept : nccl_comm_view{other} {}
  /// @brief Copies, as the move constructor.
  nccl_comm_view& operator=(nccl_comm_view&& other) noexcept { return *this = other; }
  ~nccl_comm_view() = default;

  /// @brief The handle; null once the communicator was aborted, or destroyed by its owner.
  [[nodiscard]] ncclComm_t get() const noexcept;
  /// @brief This process's rank in the communicator.
  [[nodiscard]] int rank() const noexcept;
  /// @brief The number of ranks.
  [[nodiscard]] int size() const noexcept;
  /// @brief The CUDA device the communicator runs on.
  [[nodiscard]] int device() const noexcept;
  /// @brief Which of this rank's communicators this is (`nccl_comm_options::slot`; 0 for a
  /// communicator no `nccl_comm` owns).
  [[nodiscard]] int slot() const noexcept;
  /// @brief Whether the communicator was aborted (by `nccl_comm::abort` or a watchdog).
  [[nodiscard]] bool aborted() const noexcept;
  /// @brief Why the communicator was aborted (rank, step, state), if it was.
  [[nodiscard]] std::optional<std::string> failure() const;
  /// @brief A copy of the collectives captured since the last `verify_captured_sequence`.
  [[nodiscard]] collective_log captured() const;

  /// @brief Whether two views share one communicator's state (the same communicator).
  friend bool operator==(nccl_comm_view const& a, nccl_comm_view const& b) noexcept {
    return a.state_ == b.state_;
  }
  friend bool operator!=(nccl_comm_view const& a, nccl_comm_view const& b) noexcept {
    return !(a == b);
  }

 private:
  friend struct detail::comm_access;
  explicit nccl_comm_view(std::shared_ptr<detail::comm_state> state) noexcept;
  std::shared_ptr<detail::comm_state> state_;  // never null
};

}  // namespace graphstep::nccl
