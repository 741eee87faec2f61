#pragma once

/// @file graphs/output_guard.hpp
/// @brief Catches the most reported confusion with graph outputs: reading a static output after
/// a later replay has overwritten it. A guard taken after a replay remembers that replay's
/// number; `check()` throws once the graph has replayed again. Plain C++.
/// graphstep_core: plain C++, includes no CUDA header.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace graphstep::graphs {

/// @brief Counts the replays of one graph; shared with the guards taken from it.
using replay_generation = std::shared_ptr<std::atomic<std::uint64_t>>;

class output_guard {
 public:
  /// @brief Remembers the current generation of `generation` for output `what`.
  output_guard(replay_generation generation, std::string what)
      : generation_{std::move(generation)},
        taken_{generation_->load(std::memory_order_relaxed)},
        what_{std::move(what)} {}

  /// @brief True while no replay has happened since the guard was taken.
  [[nodiscard]] bool valid() const noexcept {
    return generation_->load(std::memory_order_relaxed) == taken_;
  }
  /// @throws usage_error naming the output and both replays when a later replay overwrote it
  void check() const;
  /// @brief The replay number the output came from.
  [[nodiscard]] std::uint64_t generation() const noexcept { return taken_; }

 private:
  replay_generation generation_;
  std::uint64_t taken_;
  std::string what_;
};

}  // namespace graphstep::graphs
