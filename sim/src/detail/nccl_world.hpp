#pragma once

// The ranks of one simulated NCCL communicator and the data they exchange: a POSIX shared
// memory segment named by the unique id, so that ranks may be threads of one process or
// separate processes on this machine (launched by torchrun, mpirun or a test). The API layer
// (sim/nccl_api.cpp) checks calls against nccl.h; this part rendezvouses, moves data and reduces.
//
// A collective moves its data in exchanges of at most one slot per rank. Exchange s of a rank:
// wait until every rank has finished reading exchange s-1 (its slot is free), write its part and
// publish `posted = s`, wait until every rank has posted s, compute its output from all slots,
// publish `consumed = s`. A collective thus completes only once every rank has issued it, and
// never before: NCCL has no timeout of its own (the NCCL documentation, "Fault tolerance", and
// its source: src/init.cc, ncclCommAbort is the way out of a hung collective).

#include <nccl.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace graphstep::sim::detail::nccl {

/// What ranks do when a peer leaves (aborts, is destroyed, or its process dies) while they wait
/// for it: NCCL's transports differ, so both are modelled (GRAPHSTEP_SIM_NCCL_PEER_FAILURE).
enum class peer_failure {
  hang,         ///< wait until this rank is aborted (shared memory and NVLink transports)
  remote_error  ///< the collective ends and the asynchronous error becomes ncclRemoteError
};
[[nodiscard]] peer_failure peer_failure_mode();

enum class collective_kind : std::uint32_t {
  all_reduce,
  reduce,
  reduce_scatter,
  all_gather,
  broadcast,
  send,    ///< ncclSend: `root` is the peer
  receive  ///< ncclRecv: `root` is the peer
};
[[nodiscard]] constexpr bool point_to_point(collective_kind kind) noexcept {
  return kind == collective_kind::send || kind == collective_kind::receive;
}
[[nodiscard]] char const* name(collective_kind kind) noexcept;

/// One collective as a rank issued it; every rank must issue the same (count, type, op, root).
struct collective_call {
  collective_kind kind{};
  void const* send{};
  void* receive{};
  std::size_t count{};  ///< NCCL's count: per rank for all_gather and reduce_scatter
  ncclDataType_t type{ncclFloat32};
  ncclRedOp_t op{ncclSum};
  int root{};  ///< the root, or the peer of a send or receive
  /// A sum of inputs each rank multiplied by its own scalar first (ncclRedOpCreatePreMulSum):
  /// `op` is then ncclSum, and `scalar` the multiplier as an element of `type`, read from
  /// `scalar_on_device` when the collective runs if that is set.
  bool premultiplied{};
  std::array<unsigned char, 8> scalar{};
  void const* scalar_on_device{};
};

/// Bytes of one element; 0 for the types the simulator does not model (fp8).
[[nodiscard]] std::size_t element_bytes(ncclDataType_t type) noexcept;

/// Removes the segments of worlds that never became complete and whose ranks are all gone:
/// processes that died during the rendezvous (killed, or ended by _exit) left them, and nobody
/// else will. Called whenever an id is made or a rank joins.
void remove_abandoned_worlds() noexcept;

class world;

/// One rank's membership of a world.
class rank_link {
 public:
  /// Opens (creating when first) the world the unique id names and joins it as `rank`.
  /// Returns ncclInvalidUsage with `error` filled when the ranks disagree on the size or the rank
  /// has joined already, ncclSystemError when shared memory fails.
  static ncclResult_t join(ncclUniqueId const& id, int ranks, int rank,
                           std::unique_ptr<rank_link>& out, std::string& error);
  rank_link(rank_link const&) = delete;
  rank_link& operator=(rank_link const&) = delete;
  rank_link(rank_link&&) = delete;
  rank_link& operator=(rank_link&&) = delete;
  /// Leaves the world and unmaps it.
  ~rank_link();
  /// Peers that wait for this rank see it gone from now on (an abort).
  void leave() noexcept;

  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int ranks() const noexcept { return ranks_; }
  /// Whether every rank has joined (the rendezvous of ncclCommInitRank is over).
  [[nodiscard]] bool everyone_joined() const noexcept;
  /// The word that changes whenever a rank joins, posts, consumes or leaves (a futex word).
  [[nodiscard]] std::atomic<std::uint32_t>* wake_word() const noexcept;
  /// Blocks the calling host thread until `done()` holds, checking it whenever the wake word
  /// changes (and every 10 ms, for a peer whose process died without a word).
  template <typename Done>
  void wait_until(Done&& done) const noexcept {
    while (true) {
      std::uint32_t const seen = wake_word()->load();
      if (done()) return;
      wait_for_change(seen, 10);
    }
  }
  /// A peer that left or whose process died, or -1.
  [[nodiscard]] int departed_peer() const noexcept;

  /// NCCL connects a communicator's peers when a collective first needs an algorithm
  /// (NCCL_RUNTIME_CONNECT, on by default: ncclPrepareTasks in src/enqueue.cc, then
  /// ncclCollPreconnect in src/group.cc), through its bootstrap network, on the host thread
  /// that launches: that thread waits for the peers. Modelled per collective kind. This rank
  /// offers the connection for `kind` (idempotent; a group offers all of its kinds first).
  void offer_connection(collective_kind kind) noexcept;
  /// Blocks the calling host thread until every rank has offered `kind`. Returns
  /// ncclRemoteError when a peer left and the mode is remote_error, ncclInternalError when
  /// `stop` turns true (an abort), else ncclSuccess.
  [[nodiscard]] ncclResult_t wait_connected(collective_kind kind,
                                            std::atomic<bool> const& stop) const noexcept;

  /// Runs one collective from this rank, parking the running operation while peers are missing.
  /// Stops early (outputs unspecified) when `stop()` turns true; returns ncclRemoteError when a
  /// peer left and the mode is remote_error, else ncclSuccess.
  ncclResult_t run(collective_call const& call, std::atomic<bool> const& stop);

  /// Runs sends and receives issued together (one call, or a group's on one stream), parking
  /// while none can move. Every ordered pair of ranks has a channel: a send's message is matched
  /// with the receiver's receives from this rank in issue order, and moves through one slot a
  /// chunk at a time. All of them make progress together, so a group's exchanges in any pattern
  /// (all-to-all, a ring, to self) never wait on one another. A send completes once its peer has
  /// taken all of it. A matched pair that disagrees on count or type breaks the channel: both
  /// ends return ncclInvalidUsage with `error` naming both sides. Returns ncclRemoteError when a
  /// peer left and the mode is remote_error; ncclSuccess when `stop` turns true (an abort).
  ncclResult_t exchange(collective_call const* calls, std::size_t count,
                        std::atomic<bool> const& stop, std::string& error);

 private:
  rank_link(std::shared_ptr<world> shared, int rank, int ranks) noexcept;
  void wait_for_change(std::uint32_t seen, int timeout_ms) const noexcept;
  std::shared_ptr<world> world_;
  int rank_;
  int ranks_;
  std::uint64_t exchanges_{};  // exchanges this rank has completed
};

/// A function of nccl.h the simulated NCCL does not model (sim/src/nccl_refusals.cpp,
/// generated; sim/docs/nccl_coverage.md): prints, once per function, that it is refused, keeps
/// the message for ncclGetLastError, and returns ncclInvalidUsage (NCCL has no "not supported"
/// result).
ncclResult_t refuse(char const* function, char const* reason) noexcept;

}  // namespace graphstep::sim::detail::nccl
