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
  ~group_guard();
  group_guard(group_guard const&) = delete;
  group_guard& operator=(group_guard const&) = delete;
  /// @brief Calls ncclGroupEnd.
  /// @throws nccl_error, usage_error (called twice)
  void end();

 private:
  bool open_{true};
};

}  // namespace graphstep::nccl
