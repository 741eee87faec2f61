#pragma once

// The stream-race checker: every operation's reads and writes of device memory, ordered by
// vector clocks (one timeline per stream, one for the host). Two accesses to the same bytes,
// at least one a write, neither ordered before the other through stream order, events, stream
// waits, the legacy stream's implicit synchronization or host synchronization, are a race: a
// GPU may run them in either order or at once. The checker sees what CUDA promises, not what
// the simulator's in-order execution happens to do.
//
// What an operation accesses: memset and memcpy their exact ranges; a kernel built with
// instrumented accesses (kernel_accesses.hpp) every byte it read, wrote or updated atomically; any
// other kernel, for each pointer argument, the bytes its author named or else the address it
// points to (read if the pointee is const, else write), as PyTorch's CUDA Stream Sanitizer does
// with tensor arguments; host code run as stream work, when instrumented, every byte of pinned
// and managed memory it touched. Atomic updates do not race with each other ("performed without
// interference from other threads", CUDA C++ Programming Guide, "Atomic Functions"), only with
// plain reads and writes.
//
// The nodes of one graph launch are ordered by the graph's edges alone: each node is an operation
// of its own, on a timeline no clock outside the launch ever holds, ordered after the launch's
// clock and after its ancestors in the graph. When the launch ends, its nodes' accesses take the
// launch's own stamp: from outside, the launch is one operation on its stream. Event nodes make
// two exceptions (cudaGraphLaunch in graph_api.cpp gives the rules): a node behind an event wait
// node is also ordered after the event's work, and the nodes an event record node records take
// the stamp of a timeline of their own, which the event names and the stream does after the
// launch.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace graphstep::sim::detail {

using timeline = unsigned long long;  // a stream's id; 0 is the host
using vector_clock = std::map<timeline, unsigned long long>;

void merge(vector_clock& into, vector_clock const& from);

enum class access_kind : unsigned char { read, write, atomic };

class race_checker {
  // An access's operation: its description is shared by the stamps that still refer to it, so
  // memory stays bounded by the shadow's size however many operations run.
  struct stamp {
    std::shared_ptr<std::string const> description;
    timeline stream{};
    unsigned long long tick{};
  };

 public:
  /// An operation under way, kept while its work waits in a queue (deferred execution).
  struct operation {
    std::shared_ptr<std::string const> description;
    timeline stream{};
    unsigned long long tick{};
    vector_clock clock;
  };

  /// The nodes of one graph launch under way (see begin_graph_launch).
  class graph_launch {
   public:
    explicit graph_launch(std::size_t nodes) : nodes_{nodes} {}

   private:
    friend class race_checker;
    std::size_t nodes_;
    timeline first_{};  // node i's timeline is first_ + i
    stamp launch_;
    vector_clock clock_;
    // Every range a node accessed, to give those accesses the launch's stamp at the end.
    std::vector<std::pair<std::uintptr_t, std::uintptr_t>> touched_;
  };

  /// Starts an operation on `stream` whose work is ordered after `clock` (updated in place: the
  /// stream's clock ticks). Accesses that follow belong to it until the next operation starts.
  void begin_operation(timeline stream, vector_clock& clock, std::string description);
  /// Records that the current operation reads, writes or atomically updates
  /// [address, address + bytes).
  void access(void const* address, std::size_t bytes, access_kind kind);
  /// Forgets accesses to [address, address + bytes) (memory freed after a device-wide sync).
  void forget(void const* address, std::size_t bytes);
  /// The operation under way, and making it current again when its queued work runs: the
  /// accesses it makes then belong to it, with the ordering it had when it was enqueued.
  [[nodiscard]] operation current_operation() const;
  void resume(operation const& queued);

  /// The current operation is the launch of a graph of `launch`'s node count: its nodes become
  /// operations of their own (begin_node) until end_graph_launch.
  void begin_graph_launch(graph_launch& launch);
  /// Node `index` of `launch` runs: ordered after the launch, after the nodes whose bits are
  /// set in `ancestors` (one bit per node index; the vector must outlive the node's accesses) and
  /// after `also_after` when given (the work of events it waits for through event wait nodes).
  void begin_node(graph_launch& launch, std::size_t index,
                  std::vector<std::uint64_t> const& ancestors, std::string description,
                  vector_clock const* also_after = nullptr);
  /// A node's stamp once its launch has ended: a timeline and tick; timeline 0 for the
  /// launch's own stamp.
  using node_stamp = std::pair<timeline, unsigned long long>;
  /// The launch's nodes have run: their accesses become the launch's, or those of `stamps`
  /// (one per node index) where it names one; the launch is current again.
  void end_graph_launch(graph_launch& launch, std::vector<node_stamp> const* stamps = nullptr);
  /// Whether a node of a graph launch is the current operation.
  [[nodiscard]] bool in_graph_launch() const noexcept { return current_launch_ != nullptr; }

  /// Races found so far, one line each (both operations, their streams and the range).
  [[nodiscard]] std::vector<std::string> const& races() const noexcept { return races_; }

 private:
  struct reader {
    stamp by;
    bool atomic{};
  };
  struct segment {
    std::uintptr_t end{};
    bool written{};
    stamp writer;
    std::vector<reader> readers;  // reads and atomic updates, one of each per timeline
  };
  [[nodiscard]] bool ordered(stamp const& earlier) const;
  void report(stamp const& earlier, std::uintptr_t begin, std::uintptr_t end,
              char const* earlier_did, access_kind now);
  void split_at(std::uintptr_t address);

  std::map<std::uintptr_t, segment> shadow_;  // disjoint ranges by start address
  stamp current_;                             // the operation under way
  vector_clock current_clock_;                // and its clock
  // While a graph node is the current operation: its launch and the node's ancestors.
  graph_launch* current_launch_{};
  std::vector<std::uint64_t> const* current_ancestors_{};
  timeline next_node_timeline_{timeline{1} << 63U};  // far above every stream's id
  std::vector<std::string> races_;
};

}  // namespace graphstep::sim::detail
