#pragma once

/// @file nccl/group_guard.hpp
/// @brief `group_guard`: ncclGroupStart/ncclGroupEnd around a scope.

namespace graphstep::nccl {

/// @brief ncclGroupStart/ncclGroupEnd around a scope: the collectives inside launch as one.
/// It takes no communicator's enqueue lock (a group may span several), so a background
/// watchdog must not abort a communicator while a group is open on it.
class group_guard {
 public:
  /// @brief Calls ncclGroupStart.
  /// @throws nccl_error
  group_guard();
  /// @brief Ends the group if `end()` was not called; a failure is reported, not thrown.
  /// When an exception leaves the scope, the group is dropped instead: none of its
  /// collectives is launched, since launching the part issued so far would pair this rank's
  /// collectives with its peers' in another order. (The peers, which issued the whole group,
  /// then wait: the watchdog or a deadline ends that.) With one rank, NCCL runs each
  /// collective as a copy when it is called, so those have run already.
  ~group_guard();
  group_guard(group_guard const&) = delete;
  group_guard& operator=(group_guard const&) = delete;
  /// @brief Calls ncclGroupEnd.
  /// @throws nccl_error, usage_error (called twice)
  void end();

 private:
  bool open_{true};
  int exceptions_at_start_;
};

}  // namespace graphstep::nccl
