#pragma once

/// @file sim/race_report.hpp
/// @brief A scope in which the simulated device's race checker reports races instead of ending
/// the process, and which hands back the races found since it began: what a test of code that
/// must not race needs.

#include <cstddef>
#include <graphstep/sim/sim.hpp>
#include <string>
#include <vector>

namespace graphstep::sim {

/// @brief Sets `race_mode::report` for its life and restores the mode it found. Not
/// synchronized: one at a time, on one thread.
class race_report {
 public:
  race_report() : before_{current_race_mode()} {
    set_race_mode(race_mode::report);
    already_ = races().size();
  }
  ~race_report() { set_race_mode(before_); }
  race_report(race_report const&) = delete;
  race_report& operator=(race_report const&) = delete;
  race_report(race_report&&) = delete;
  race_report& operator=(race_report&&) = delete;

  /// @brief The races found since this scope began. Races are found when work runs, so the
  /// queued work (deferred execution) runs first, with no host synchronization that would
  /// order it.
  [[nodiscard]] std::vector<std::string> found() const {
    advance(queued_operations());
    auto all = races();
    return {all.begin() + static_cast<std::ptrdiff_t>(already_), all.end()};
  }

 private:
  race_mode before_;
  std::size_t already_{};
};

}  // namespace graphstep::sim
