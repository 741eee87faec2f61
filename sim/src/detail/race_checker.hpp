#pragma once

// The stream-race checker: every operation's reads and writes of device memory, ordered by
// vector clocks (one timeline per stream, one for the host). Two accesses to the same bytes,
// at least one a write, neither ordered before the other through stream order, events, stream
// waits, the legacy stream's implicit synchronization or host synchronization, are a race: a
// GPU may run them in either order or at once. The checker sees what CUDA promises, not what
// the simulator's in-order execution happens to do.
//
// What an operation accesses: memset and memcpy their exact ranges; a kernel, for each pointer
// argument, the address it points to (read if the pointee is const, else write), as PyTorch's
// CUDA Stream Sanitizer does with tensor arguments. Nodes of one graph launch share the launch's
// timeline: races between branches of one graph are not looked for.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace graphstep::sim::detail {

using timeline = unsigned long long;  // a stream's id; 0 is the host
using vector_clock = std::map<timeline, unsigned long long>;

void merge(vector_clock& into, vector_clock const& from);

class race_checker {
 public:
  /// An operation under way, kept while its work waits in a queue (deferred execution).
  struct operation {
    std::shared_ptr<std::string const> description;
    timeline stream{};
    unsigned long long tick{};
    vector_clock clock;
  };

  /// Starts an operation on `stream` whose work is ordered after `clock` (updated in place: the
  /// stream's clock ticks). Accesses that follow belong to it until the next operation starts.
  void begin_operation(timeline stream, vector_clock& clock, std::string description);
  /// Records that the current operation reads or writes [address, address + bytes).
  void access(void const* address, std::size_t bytes, bool write);
  /// Forgets accesses to [address, address + bytes) (memory freed after a device-wide sync).
  void forget(void const* address, std::size_t bytes);
  /// The operation under way, and making it current again when its queued work runs: the
  /// accesses it makes then belong to it, with the ordering it had when it was enqueued.
  [[nodiscard]] operation current_operation() const;
  void resume(operation const& queued);
  /// Races found so far, one line each (both operations, their streams and the range).
  [[nodiscard]] std::vector<std::string> const& races() const noexcept { return races_; }

 private:
  // An access's operation: its description is shared by the stamps that still refer to it, so
  // memory stays bounded by the shadow's size however many operations run.
  struct stamp {
    std::shared_ptr<std::string const> description;
    timeline stream{};
    unsigned long long tick{};
  };
  struct segment {
    std::uintptr_t end{};
    bool written{};
    stamp writer;
    std::vector<stamp> readers;
  };
  [[nodiscard]] static bool ordered(stamp const& earlier, vector_clock const& later);
  void report(stamp const& earlier, std::uintptr_t begin, std::uintptr_t end, bool earlier_wrote,
              bool later_writes);
  void split_at(std::uintptr_t address);

  std::map<std::uintptr_t, segment> shadow_;  // disjoint ranges by start address
  stamp current_;                             // the operation under way
  vector_clock current_clock_;                // and its clock
  std::vector<std::string> races_;
};

}  // namespace graphstep::sim::detail
