#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <graphstep/error.hpp>
#include <graphstep/nccl/rendezvous.hpp>
#include <map>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace graphstep::nccl {
namespace {

using clock = std::chrono::steady_clock;

constexpr std::uint32_t protocol_magic = 0x47535256;  // "GSRV"
constexpr std::uint32_t protocol_version = 1;
constexpr int system_error = 2;  // ncclSystemError

enum class reply_status : std::uint32_t {
  ok = 0,
  world_size_mismatch = 1,
  duplicate_rank = 2,
  rank_out_of_range = 3,
  rendezvous_failed = 4,
};

struct hello {
  std::uint32_t magic, version;
  std::int32_t rank, world_size;
};

// Owns a socket descriptor.
class socket_fd {
 public:
  socket_fd() = default;
  explicit socket_fd(int fd) : fd_{fd} {}
  socket_fd(socket_fd&& other) noexcept : fd_{std::exchange(other.fd_, -1)} {}
  socket_fd(socket_fd const&) = delete;
  socket_fd& operator=(socket_fd const&) = delete;
  socket_fd& operator=(socket_fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  ~socket_fd() { reset(); }
  [[nodiscard]] int get() const noexcept { return fd_; }
  [[nodiscard]] int release() noexcept { return std::exchange(fd_, -1); }
  void reset() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_{-1};
};

[[noreturn]] void fail(std::string const& what) {
  throw nccl_error{system_error, what};
}

std::string errno_text() {
  return std::generic_category().message(errno);
}

int milliseconds_left(clock::time_point deadline) {
  auto const left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
  return static_cast<int>(std::max<long long>(0, left.count()));
}

// Waits until `fd` is readable (or writable); false at the deadline.
bool wait_for(int fd, short events, clock::time_point deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    int const ready = ::poll(&p, 1, milliseconds_left(deadline));
    if (ready > 0) return true;
    if (ready == 0) return false;
    if (errno != EINTR) fail("rendezvous: poll failed: " + errno_text());
  }
}

// Reads exactly `size` bytes; false on EOF, a reset connection or the deadline.
bool read_exactly(int fd, void* buffer, std::size_t size, clock::time_point deadline) {
  auto* at = static_cast<unsigned char*>(buffer);
  while (size > 0) {
    if (!wait_for(fd, POLLIN, deadline)) return false;
    ssize_t const got = ::recv(fd, at, size, 0);
    if (got == 0) return false;
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return false;
    }
    at += got;
    size -= static_cast<std::size_t>(got);
  }
  return true;
}

bool write_all(int fd, void const* buffer, std::size_t size, clock::time_point deadline) {
  auto const* at = static_cast<unsigned char const*>(buffer);
  while (size > 0) {
    if (!wait_for(fd, POLLOUT, deadline)) return false;
    ssize_t const sent = ::send(fd, at, size, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return false;
    }
    at += sent;
    size -= static_cast<std::size_t>(sent);
  }
  return true;
}

void encode(hello const& h, unsigned char* out) {
  std::array<std::uint32_t, 4> const words = {htonl(h.magic), htonl(h.version),
                                              htonl(static_cast<std::uint32_t>(h.rank)),
                                              htonl(static_cast<std::uint32_t>(h.world_size))};
  std::memcpy(out, words.data(), sizeof words);
}

hello decode(unsigned char const* in) {
  std::array<std::uint32_t, 4> words{};
  std::memcpy(words.data(), in, sizeof words);
  return {ntohl(words[0]), ntohl(words[1]), static_cast<std::int32_t>(ntohl(words[2])),
          static_cast<std::int32_t>(ntohl(words[3]))};
}

void send_reply(int fd, reply_status status, unique_id_bytes const& id,
                clock::time_point deadline) {
  std::array<unsigned char, 8 + sizeof(unique_id_bytes)> message{};
  std::array<std::uint32_t, 2> const head = {htonl(protocol_magic),
                                             htonl(static_cast<std::uint32_t>(status))};
  std::memcpy(message.data(), head.data(), sizeof head);
  std::memcpy(message.data() + 8, id.data(), id.size());
  // A client that went away cannot be told; the server reports the failure itself.
  static_cast<void>(write_all(fd, message.data(), message.size(), deadline));
}

sockaddr_in resolve(std::string const& address, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int const status = ::getaddrinfo(address.c_str(), nullptr, &hints, &found);
  if (status != 0 || found == nullptr) {
    fail("rendezvous: cannot resolve MASTER_ADDR '" + address + "': " + gai_strerror(status));
  }
  sockaddr_in result{};
  std::memcpy(&result, found->ai_addr, sizeof result);
  ::freeaddrinfo(found);
  result.sin_port = htons(static_cast<std::uint16_t>(port));
  return result;
}

}  // namespace

rendezvous_server::rendezvous_server(int port, int world_size)
    : port_{port}, world_size_{world_size} {
  GRAPHSTEP_EXPECTS(port >= 0 && port <= 65535,
                    "rendezvous: port " + std::to_string(port) + " must lie in 0..65535");
  GRAPHSTEP_EXPECTS(world_size >= 1, "rendezvous: the world size must be at least 1");
  socket_fd listener{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  if (listener.get() < 0) fail("rendezvous: cannot create a socket: " + errno_text());
  int const yes = 1;
  ::setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    fail("rendezvous: rank 0 cannot listen on port " + std::to_string(port) + ": " + errno_text() +
         ". Pick a free MASTER_PORT");
  }
  if (::listen(listener.get(), std::max(16, world_size)) != 0) {
    fail("rendezvous: listen failed: " + errno_text());
  }
  socklen_t length = sizeof address;
  ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&address), &length);
  port_ = ntohs(address.sin_port);
  listener_ = listener.release();
}

rendezvous_server::~rendezvous_server() {
  if (listener_ >= 0) ::close(listener_);
}

// NOLINTNEXTLINE(readability-make-member-function-const): serving consumes the listening socket
void rendezvous_server::serve(unique_id_bytes const& id, std::chrono::milliseconds timeout) {
  auto const deadline = clock::now() + timeout;
  std::map<int, socket_fd> arrived;  // rank -> connection
  int foreign = 0;
  auto refuse_all = [&](reply_status status) {
    for (auto& [rank, connection] : arrived) {
      send_reply(connection.get(), status, id, clock::now() + std::chrono::seconds{1});
    }
  };
  while (static_cast<int>(arrived.size()) < world_size_ - 1) {
    if (!wait_for(listener_, POLLIN, deadline)) {
      std::string missing;
      for (int r = 1; r < world_size_; ++r) {
        if (arrived.count(r) == 0) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      }
      refuse_all(reply_status::rendezvous_failed);
      fail("rendezvous: rank(s) " + missing + " of " + std::to_string(world_size_) +
           " did not arrive at port " + std::to_string(port_) + " within " +
           std::to_string(timeout.count()) + " ms" +
           (foreign > 0 ? " (" + std::to_string(foreign) +
                              " connection(s) that did not speak the protocol were dropped)"
                        : std::string{}) +
           ". Check that every rank was started with the same MASTER_ADDR, MASTER_PORT and "
           "WORLD_SIZE");
    }
    socket_fd connection{::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC)};
    if (connection.get() < 0) continue;
    std::array<unsigned char, 16> raw{};
    // A client gets a few seconds to introduce itself, so a silent one cannot stall everyone.
    auto const hello_deadline = std::min(deadline, clock::now() + std::chrono::seconds{5});
    if (!read_exactly(connection.get(), raw.data(), raw.size(), hello_deadline)) {
      ++foreign;
      continue;
    }
    hello const h = decode(raw.data());
    if (h.magic != protocol_magic || h.version != protocol_version) {
      ++foreign;
      continue;
    }
    auto refuse = [&](reply_status status, std::string const& why) {
      send_reply(connection.get(), status, id, clock::now() + std::chrono::seconds{1});
      refuse_all(reply_status::rendezvous_failed);
      throw usage_error{"rendezvous: " + why};
    };
    if (h.world_size != world_size_) {
      refuse(reply_status::world_size_mismatch,
             "rank " + std::to_string(h.rank) +
                 " was started with WORLD_SIZE=" + std::to_string(h.world_size) +
                 " but rank 0 with WORLD_SIZE=" + std::to_string(world_size_) +
                 ": start every rank with the same WORLD_SIZE");
    }
    if (h.rank < 1 || h.rank >= world_size_) {
      refuse(reply_status::rank_out_of_range, "a client reported rank " + std::to_string(h.rank) +
                                                  ", outside 1.." +
                                                  std::to_string(world_size_ - 1));
    }
    if (arrived.count(h.rank) != 0) {
      refuse(reply_status::duplicate_rank, "two processes were started as rank " +
                                               std::to_string(h.rank) +
                                               ": give every process its own RANK");
    }
    arrived.emplace(h.rank, std::move(connection));
  }
  for (auto& [rank, connection] : arrived) {
    send_reply(connection.get(), reply_status::ok, id, deadline);
  }
}

unique_id_bytes rendezvous_join(std::string const& address, int port, int rank, int world_size,
                                std::chrono::milliseconds timeout) {
  GRAPHSTEP_EXPECTS(rank >= 1 && rank < world_size,
                    "rendezvous_join: rank " + std::to_string(rank) + " must lie in 1.." +
                        std::to_string(world_size - 1) + " (rank 0 serves)");
  auto const deadline = clock::now() + timeout;
  sockaddr_in const target = resolve(address, port);
  std::string const where = address + ":" + std::to_string(port);
  socket_fd connection;
  std::string last_error;
  // Rank 0 may start later than this rank: retry until the deadline.
  while (true) {
    socket_fd attempt{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    if (attempt.get() < 0) fail("rendezvous: cannot create a socket: " + errno_text());
    if (::connect(attempt.get(), reinterpret_cast<sockaddr const*>(&target), sizeof target) == 0) {
      connection = std::move(attempt);
      break;
    }
    last_error = errno_text();
    if (clock::now() + std::chrono::milliseconds{50} >= deadline) break;  // reported below
    std::this_thread::sleep_for(std::chrono::milliseconds{50});
  }
  if (connection.get() < 0) {
    fail("rendezvous: rank " + std::to_string(rank) + " could not reach rank 0 at " + where +
         " within " + std::to_string(timeout.count()) + " ms (" + last_error +
         "). Check MASTER_ADDR and MASTER_PORT, and that rank 0 is running");
  }
  int const yes = 1;
  ::setsockopt(connection.get(), IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
  std::array<unsigned char, 16> raw{};
  encode({protocol_magic, protocol_version, rank, world_size}, raw.data());
  if (!write_all(connection.get(), raw.data(), raw.size(), deadline)) {
    fail("rendezvous: rank " + std::to_string(rank) + " could not talk to rank 0 at " + where);
  }
  std::array<unsigned char, 8 + sizeof(unique_id_bytes)> reply{};
  if (!read_exactly(connection.get(), reply.data(), reply.size(), deadline)) {
    fail("rendezvous: rank " + std::to_string(rank) + " got no answer from rank 0 at " + where +
         " within " + std::to_string(timeout.count()) +
         " ms: other ranks may be missing, or rank 0 failed (see its log)");
  }
  std::array<std::uint32_t, 2> head{};
  std::memcpy(head.data(), reply.data(), sizeof head);
  if (ntohl(head[0]) != protocol_magic) {
    fail("rendezvous: the process at " + where + " is not a graphstep rank 0");
  }
  switch (static_cast<reply_status>(ntohl(head[1]))) {
    case reply_status::ok: break;
    case reply_status::world_size_mismatch:
      throw usage_error{"rendezvous: rank 0 at " + where + " runs with another WORLD_SIZE than " +
                        std::to_string(world_size) + ": start every rank with the same one"};
    case reply_status::duplicate_rank:
      throw usage_error{"rendezvous: another process already joined as rank " +
                        std::to_string(rank) + ": give every process its own RANK"};
    case reply_status::rank_out_of_range:
      throw usage_error{"rendezvous: rank 0 refused rank " + std::to_string(rank) +
                        " as out of range"};
    default: fail("rendezvous: rank 0 at " + where + " gave up (another rank failed; see its log)");
  }
  unique_id_bytes id{};
  std::memcpy(id.data(), reply.data() + 8, id.size());
  return id;
}

unique_id_bytes exchange_unique_id(launch_environment const& environment,
                                   unique_id_bytes const& root_id,
                                   std::chrono::milliseconds timeout) {
  if (environment.world_size == 1) return root_id;
  if (environment.rank == 0) {
    rendezvous_server server{environment.master_port, environment.world_size};
    server.serve(root_id, timeout);
    return root_id;
  }
  return rendezvous_join(environment.master_addr, environment.master_port, environment.rank,
                         environment.world_size, timeout);
}

}  // namespace graphstep::nccl
