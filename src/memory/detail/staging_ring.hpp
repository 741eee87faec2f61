#pragma once

/// @file memory/detail/staging_ring.hpp
/// @brief The bookkeeping of a ring of host staging slots: which slot the next transfer uses,
/// which transfer a slot holds, and when a result has been overwritten.
///
/// `step_input` and `host_readback` stage transfers between host and device through `depth`
/// pinned slots, so that the host fills (or reads) one slot while the device still copies
/// another. The shell owns the memory and one event per slot; this class decides which slot
/// each transfer uses and refuses what would read stale or overwritten data.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <string>

namespace graphstep::memory::detail {

/// @brief A ring of `depth` slots used in turn. Transfers are numbered by tickets 1, 2, 3, …;
/// ticket t uses slot (t − 1) mod depth.
///
/// - `stage()` opens the next transfer: the caller fills `next_slot()` (after waiting for the
///   transfer that used that slot before, `previous_ticket_of_next_slot()`, when not 0).
///   Staging again before committing names the same slot.
/// - `commit()` closes it: the transfer was enqueued, and its ticket is returned. Committing
///   what was never staged is refused, so a slot's stale contents are never sent again by
///   mistake.
/// - `slot_of(ticket)` finds a transfer's slot while it is still there: the `depth`
///   most recent tickets. An older one was overwritten and is refused with a message that
///   says so.
///
/// Not thread-safe: the shell serializes calls.
class staging_ring {
 public:
  /// @param owner names the facility in messages ("step_input").
  /// @throws usage_error (depth 0)
  staging_ring(std::size_t depth, std::string owner);

  [[nodiscard]] std::size_t depth() const noexcept { return depth_; }
  /// @brief The slot the next transfer uses.
  [[nodiscard]] std::size_t next_slot() const noexcept {
    return static_cast<std::size_t>(committed_ % depth_);
  }
  /// @brief The ticket of the transfer that used `next_slot()` before; 0 when it is unused. Its
  /// transfer must have completed before the host writes the slot or the device copies into it.
  [[nodiscard]] std::uint64_t previous_ticket_of_next_slot() const noexcept {
    return committed_ >= depth_ ? committed_ + 1 - depth_ : 0;
  }
  /// @brief Opens the next transfer; returns `next_slot()`.
  std::size_t stage() noexcept;
  [[nodiscard]] bool staged() const noexcept { return staged_; }
  /// @throws usage_error (nothing staged): checked before the shell enqueues the transfer
  void expect_staged() const;
  /// @brief The staged transfer was enqueued: its ticket.
  /// @throws usage_error (nothing staged)
  std::uint64_t commit();
  /// @brief Tickets issued so far (the latest ticket; 0 before the first commit).
  [[nodiscard]] std::uint64_t committed() const noexcept { return committed_; }
  /// @brief The slot that holds `ticket`'s transfer.
  /// @throws usage_error (a ticket never issued, or one whose slot a later transfer reused)
  [[nodiscard]] std::size_t slot_of(std::uint64_t ticket) const;

 private:
  std::size_t depth_;
  std::string owner_;
  std::uint64_t committed_{0};
  bool staged_{false};
};

}  // namespace graphstep::memory::detail
