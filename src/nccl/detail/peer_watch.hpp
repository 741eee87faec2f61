#pragma once

/// @file nccl/detail/peer_watch.hpp
/// @brief Notices within a second that another rank's process has ended, instead of at the
/// step deadline: every rank keeps one TCP connection to rank 0 for its communicator's life.
///
/// The kernel closes a process's connections however it ends (killed, crashed, exited), and a
/// rank that closes its communicator in order says goodbye first, so a connection that closes
/// without a goodbye is a lost rank. Rank 0 tells every other rank which rank it lost; the
/// others see rank 0's own end on their connection. TCP keepalive probes (every 2 s after 5 s
/// of silence, 5 unanswered) find a host that vanished in about 15 s. A stopped or deadlocked
/// process keeps its connection open and answers the probes: only the step deadline finds it.
/// A process forked from a rank (a data loader) closes the watches' connections it inherited
/// (pthread_atfork), so that it never holds a dead rank's connection open.
/// graphstep_core: plain C++, includes no CUDA header.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace graphstep::nccl::detail {

/// @brief Called at most once, on the watch's own thread, with why a peer counts as lost.
using peer_lost_handler = std::function<void(std::string const& reason)>;

/// @brief Rank 0's listening socket, made before NCCL's id is sent so that its port can travel
/// with the id.
class peer_watch_listener {
 public:
  /// @brief Listens on a free port of every address of this host.
  /// @throws nccl_error (no port could be bound)
  peer_watch_listener();
  /// @brief Takes over a socket that already listens (rank 0's rendezvous socket, whose
  /// address every rank knows).
  explicit peer_watch_listener(int listening_fd) noexcept;
  ~peer_watch_listener();
  peer_watch_listener(peer_watch_listener&& other) noexcept;
  peer_watch_listener& operator=(peer_watch_listener&& other) noexcept;
  peer_watch_listener(peer_watch_listener const&) = delete;
  peer_watch_listener& operator=(peer_watch_listener const&) = delete;

  [[nodiscard]] int port() const noexcept { return port_; }

 private:
  friend class peer_watch;
  int fd_{-1};
  int port_{0};
};

/// @brief One rank's side of the watch, with a thread of its own. Not copyable or movable.
class peer_watch {
 public:
  /// @brief Rank 0: accepts ranks 1..world_size-1 on `listener`, each presenting `job_key` (the
  /// same on every rank of a job, e.g. a hash of NCCL's id), then watches them.
  /// @throws nccl_error naming the ranks that did not connect within `timeout`; usage_error for
  /// a world size below 2 or a timeout that is not positive. Connections that present another
  /// key or rank are dropped and counted in the message.
  [[nodiscard]] static std::unique_ptr<peer_watch> serve(peer_watch_listener listener,
                                                         int world_size, std::uint64_t job_key,
                                                         std::chrono::milliseconds timeout,
                                                         peer_lost_handler on_lost);
  /// @brief Rank `rank` (1..world_size-1): connects to rank 0 at `host:port` (retrying until
  /// `timeout`), introduces itself, and watches rank 0.
  /// @throws nccl_error (rank 0 unreachable or silent until the deadline, or it refused this
  /// rank), usage_error (a rank out of range, a timeout that is not positive)
  [[nodiscard]] static std::unique_ptr<peer_watch> join(std::string const& host, int port, int rank,
                                                        int world_size, std::uint64_t job_key,
                                                        std::chrono::milliseconds timeout,
                                                        peer_lost_handler on_lost);

  /// @brief Stops watching and says goodbye, so that this rank's end is not taken for a loss
  /// (its communicator was closed in order). Never throws; later calls do nothing.
  void leave() noexcept;
  /// @brief Stops watching. Without `leave` first, the peers count this rank as lost. May run
  /// on the watch's own thread (from the handler), which is then left to finish alone.
  ~peer_watch();
  peer_watch(peer_watch const&) = delete;
  peer_watch& operator=(peer_watch const&) = delete;

 private:
  struct peer {
    int rank;
    int fd;
  };
  peer_watch(int rank, std::vector<peer> peers, peer_lost_handler on_lost);
  void stop() noexcept;  // ends the thread and closes the wake pipe; the connections stay
  void watch();          // the thread
  [[nodiscard]] std::string lost(int rank);  // rank 0: tells the others; returns the reason

  int const rank_;
  std::vector<peer> peers_;  // rank 0: every other rank; other ranks: rank 0
  peer_lost_handler on_lost_;
  int wake_read_{-1};
  int wake_write_{-1};
  bool stopped_{false};
  std::thread thread_;
};

}  // namespace graphstep::nccl::detail
