// graphstep_core: plain C++, includes no CUDA header.
#include "nccl/detail/peer_watch.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <graphstep/error.hpp>
#include <map>
#include <utility>

#include "socket.hpp"

namespace graphstep::nccl::detail {
namespace {

using clock = socket_clock;

constexpr std::uint32_t watch_magic = 0x47535057;  // "GSPW"
constexpr std::uint32_t watch_version = 1;
constexpr int system_error = 2;  // ncclSystemError
// A connection gets this long to introduce itself, and a message this long to arrive whole.
constexpr std::chrono::seconds message_limit{2};

// What travels after the introduction: one kind and one rank, 8 bytes.
enum class message_kind : std::uint32_t {
  accepted = 1,  // rank 0 to a rank it admitted
  refused = 2,   // rank 0 to a connection it drops (another job, rank or world size)
  goodbye = 3,   // the sender closes its communicator in order
  lost = 4,      // rank 0 to the others: the rank named has ended
};
constexpr std::size_t message_bytes = 8;
// A rank's introduction: magic, version, rank, world size, the job key (two words).
constexpr std::size_t hello_bytes = 24;

[[noreturn]] void fail(std::string const& what) {
  throw nccl_error{system_error, what};
}

bool send_message(int fd, message_kind kind, int rank) {
  std::array<unsigned char, message_bytes> message{};
  put_word(message.data(), 0, static_cast<std::uint32_t>(kind));
  put_word(message.data(), 1, static_cast<std::uint32_t>(rank));
  return write_all(fd, message.data(), message.size(), clock::now() + message_limit);
}

// A peer's host that vanishes never closes the connection: keepalive probes find it.
void keep_alive(int fd) {
  int const yes = 1;
  int const idle_s = 5;
  int const interval_s = 2;
  int const probes = 5;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &yes, sizeof yes);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof idle_s);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof interval_s);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes);
}

// The watches' connections, closed in every child this process forks: a child that kept one
// open (a data loader forked from a rank, say) would hide the rank's death. Lock-free, as a
// child of a multi-threaded process may only make async-signal-safe calls. A slot holds a
// descriptor plus one, so that zero, its initial value, means empty.
constexpr std::size_t most_connections = 4096;
std::array<std::atomic<int>, most_connections> connections_to_close_in_children{};

void close_connections_in_child() {
  for (auto& slot : connections_to_close_in_children) {
    int const held = slot.load(std::memory_order_relaxed);
    if (held > 0) ::close(held - 1);
  }
}

// A connection of a watch from now on; past `most_connections` the child keeps it (the step
// deadline then remains, as before).
void track_connection(int fd) {
  static bool const registered = [] {
    return ::pthread_atfork(nullptr, nullptr, close_connections_in_child) == 0;
  }();
  static_cast<void>(registered);
  for (auto& slot : connections_to_close_in_children) {
    int empty = 0;
    if (slot.compare_exchange_strong(empty, fd + 1)) return;
  }
}

void close_connection(int& fd) {
  for (auto& slot : connections_to_close_in_children) {
    int held = fd + 1;
    if (slot.compare_exchange_strong(held, 0)) break;
  }
  ::close(std::exchange(fd, -1));
}

std::string ended(int rank) {
  return "rank " + std::to_string(rank) +
         "'s process has ended: its peer-watch connection closed without a goodbye (it was "
         "killed, crashed, exited without closing its communicator, or its host stopped "
         "answering; see its log)";
}

}  // namespace

peer_watch_listener::peer_watch_listener() {
  std::string error;
  socket_fd listener = listen_on(0, 64, error);
  if (!listener.valid()) fail("peer watch: rank 0 cannot listen on a free port: " + error);
  port_ = bound_port(listener.get());
  fd_ = listener.release();
}

peer_watch_listener::peer_watch_listener(int listening_fd) noexcept
    : fd_{listening_fd}, port_{bound_port(listening_fd)} {}

peer_watch_listener::~peer_watch_listener() {
  if (fd_ >= 0) ::close(fd_);
}

peer_watch_listener::peer_watch_listener(peer_watch_listener&& other) noexcept
    : fd_{std::exchange(other.fd_, -1)}, port_{other.port_} {}

peer_watch_listener& peer_watch_listener::operator=(peer_watch_listener&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    port_ = other.port_;
  }
  return *this;
}

std::unique_ptr<peer_watch> peer_watch::serve(peer_watch_listener listener, int world_size,
                                              std::uint64_t job_key,
                                              std::chrono::milliseconds timeout,
                                              peer_lost_handler on_lost) {
  GRAPHSTEP_EXPECTS(world_size >= 2, "peer watch: a world of " + std::to_string(world_size) +
                                         " rank(s) has no peers to watch");
  GRAPHSTEP_EXPECTS(listener.fd_ >= 0, "peer watch: the listener was moved from");
  expect_positive_timeout(timeout, "peer_watch::serve");
  auto const deadline = clock::now() + timeout;
  std::map<int, socket_fd> admitted;
  int dropped = 0;
  while (static_cast<int>(admitted.size()) < world_size - 1) {
    if (!wait_for(listener.fd_, POLLIN, deadline)) {
      std::string missing;
      for (int r = 1; r < world_size; ++r) {
        if (admitted.count(r) == 0) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      }
      fail("peer watch: rank(s) " + missing + " of " + std::to_string(world_size) +
           " did not connect to rank 0 within " + std::to_string(timeout.count()) + " ms" +
           (dropped > 0 ? " (" + std::to_string(dropped) + " connection(s) of another job dropped)"
                        : std::string{}) +
           "; they failed after joining the communicator (see their logs), or cannot reach rank "
           "0's host on port " +
           std::to_string(listener.port_));
    }
    socket_fd connection{::accept4(listener.fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK)};
    if (!connection.valid()) continue;  // gone again, or out of descriptors: the deadline rules
    std::array<unsigned char, hello_bytes> hello{};
    bool const introduced = read_exactly(connection.get(), hello.data(), hello.size(),
                                         std::min(deadline, clock::now() + message_limit));
    int const rank = static_cast<int>(word_at(hello.data(), 2));
    std::uint64_t const key =
        (std::uint64_t{word_at(hello.data(), 4)} << 32) | word_at(hello.data(), 5);
    if (!introduced || word_at(hello.data(), 0) != watch_magic ||
        word_at(hello.data(), 1) != watch_version || key != job_key ||
        static_cast<int>(word_at(hello.data(), 3)) != world_size || rank < 1 ||
        rank >= world_size || admitted.count(rank) != 0) {
      static_cast<void>(send_message(connection.get(), message_kind::refused, rank));
      ++dropped;
      continue;
    }
    if (!send_message(connection.get(), message_kind::accepted, rank)) continue;  // it left
    keep_alive(connection.get());
    admitted.emplace(rank, std::move(connection));
  }
  std::vector<peer> peers;
  peers.reserve(admitted.size());
  for (auto& [rank, connection] : admitted) peers.push_back({rank, connection.release()});
  return std::unique_ptr<peer_watch>{new peer_watch{0, std::move(peers), std::move(on_lost)}};
}

std::unique_ptr<peer_watch> peer_watch::join(std::string const& host, int port, int rank,
                                             int world_size, std::uint64_t job_key,
                                             std::chrono::milliseconds timeout,
                                             peer_lost_handler on_lost) {
  GRAPHSTEP_EXPECTS(rank >= 1 && rank < world_size,
                    "peer watch: rank " + std::to_string(rank) + " must lie in 1.." +
                        std::to_string(world_size - 1) + " (rank 0 serves)");
  expect_positive_timeout(timeout, "peer_watch::join");
  auto const deadline = clock::now() + timeout;
  std::string const where = host + ":" + std::to_string(port);
  std::string last_error;
  socket_fd connection = connect_before(host, port, deadline, last_error);
  if (!connection.valid()) {
    fail("peer watch: rank " + std::to_string(rank) + " could not reach rank 0 at " + where +
         " within " + std::to_string(timeout.count()) + " ms (" + last_error + ")");
  }
  std::array<unsigned char, hello_bytes> hello{};
  put_word(hello.data(), 0, watch_magic);
  put_word(hello.data(), 1, watch_version);
  put_word(hello.data(), 2, static_cast<std::uint32_t>(rank));
  put_word(hello.data(), 3, static_cast<std::uint32_t>(world_size));
  put_word(hello.data(), 4, static_cast<std::uint32_t>(job_key >> 32));
  put_word(hello.data(), 5, static_cast<std::uint32_t>(job_key));
  std::array<unsigned char, message_bytes> answer{};
  if (!write_all(connection.get(), hello.data(), hello.size(), deadline) ||
      !read_exactly(connection.get(), answer.data(), answer.size(), deadline)) {
    fail("peer watch: rank " + std::to_string(rank) + " got no answer from rank 0 at " + where +
         " within " + std::to_string(timeout.count()) + " ms (rank 0 failed: see its log)");
  }
  if (static_cast<message_kind>(word_at(answer.data(), 0)) != message_kind::accepted) {
    fail("peer watch: rank 0 at " + where + " refused rank " + std::to_string(rank) +
         ": it watches another job, or another process joined as this rank");
  }
  keep_alive(connection.get());
  std::vector<peer> peers{{0, connection.release()}};
  return std::unique_ptr<peer_watch>{new peer_watch{rank, std::move(peers), std::move(on_lost)}};
}

peer_watch::peer_watch(int rank, std::vector<peer> peers, peer_lost_handler on_lost)
    : rank_{rank}, peers_{std::move(peers)}, on_lost_{std::move(on_lost)} {
  for (peer const& p : peers_) track_connection(p.fd);
  std::array<int, 2> pipe_ends{-1, -1};
  if (::pipe2(pipe_ends.data(), O_CLOEXEC | O_NONBLOCK) != 0) {
    std::string const why = errno_text();
    for (peer& p : peers_) close_connection(p.fd);
    fail("peer watch: no pipe for its thread: " + why);
  }
  wake_read_ = pipe_ends[0];
  wake_write_ = pipe_ends[1];
  try {
    thread_ = std::thread{[this] { watch(); }};
  } catch (...) {
    stop();
    for (peer& p : peers_) close_connection(p.fd);
    throw;
  }
}

peer_watch::~peer_watch() {
  stop();
  for (peer& p : peers_) {
    if (p.fd >= 0) close_connection(p.fd);
  }
}

void peer_watch::stop() noexcept {
  if (stopped_) return;
  stopped_ = true;
  if (thread_.joinable()) {
    char const wake = 1;
    static_cast<void>(::write(wake_write_, &wake, 1));
    // From the handler, this thread is the watch's own: it returns once the handler does.
    if (thread_.get_id() == std::this_thread::get_id()) {
      thread_.detach();
    } else {
      thread_.join();
    }
  }
  if (wake_read_ >= 0) ::close(std::exchange(wake_read_, -1));
  if (wake_write_ >= 0) ::close(std::exchange(wake_write_, -1));
}

void peer_watch::leave() noexcept {
  stop();
  for (peer& p : peers_) {
    if (p.fd < 0) continue;
    // A peer that is already gone cannot be told; nothing else is to be done then.
    static_cast<void>(send_message(p.fd, message_kind::goodbye, rank_));
    close_connection(p.fd);
  }
}

std::string peer_watch::lost(int rank) {
  for (peer const& p : peers_) {
    if (p.fd >= 0 && p.rank != rank)
      static_cast<void>(send_message(p.fd, message_kind::lost, rank));
  }
  return ended(rank);
}

void peer_watch::watch() {
  std::vector<pollfd> watched;
  while (true) {
    watched.assign(1, pollfd{wake_read_, POLLIN, 0});
    for (peer const& p : peers_) {
      if (p.fd >= 0) watched.push_back({p.fd, POLLIN, 0});
    }
    if (watched.size() == 1) return;  // every peer said goodbye
    if (::poll(watched.data(), watched.size(), -1) < 0) {
      if (errno == EINTR) continue;
      return;  // cannot watch: the step deadline remains
    }
    if (watched[0].revents != 0) return;  // stopped
    std::string reason;
    std::size_t polled = 1;
    for (peer& p : peers_) {
      if (p.fd < 0) continue;
      short const events = watched[polled++].revents;
      if ((events & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      std::array<unsigned char, message_bytes> message{};
      if (!read_exactly(p.fd, message.data(), message.size(), clock::now() + message_limit)) {
        reason = rank_ == 0 ? lost(p.rank) : ended(p.rank);
        break;
      }
      auto const kind = static_cast<message_kind>(word_at(message.data(), 0));
      int const about = static_cast<int>(word_at(message.data(), 1));
      if (kind == message_kind::goodbye) {
        close_connection(p.fd);  // left in order: no longer watched
      } else if (kind == message_kind::lost && rank_ != 0) {
        reason = ended(about) + ", as rank 0 saw";
        break;
      } else {
        reason = "rank " + std::to_string(p.rank) +
                 " sent the peer watch a message it does not know (kind " +
                 std::to_string(word_at(message.data(), 0)) + ")";
        break;
      }
    }
    if (!reason.empty()) {
      // A copy: the handler may end this watch's owner, and so the watch itself.
      peer_lost_handler const handler = on_lost_;
      if (handler) handler(reason);
      return;
    }
  }
}

}  // namespace graphstep::nccl::detail
