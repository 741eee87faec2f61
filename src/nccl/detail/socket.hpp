#pragma once

// TCP sockets with a deadline on every wait, for the rendezvous and the c10d store client.
// Plain C++ (POSIX sockets), IPv4 and IPv6.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace graphstep::nccl::detail {

using socket_clock = std::chrono::steady_clock;

/// Owns a socket descriptor.
class socket_fd {
 public:
  socket_fd() = default;
  explicit socket_fd(int fd) : fd_{fd} {}
  socket_fd(socket_fd&& other) noexcept : fd_{std::exchange(other.fd_, -1)} {}
  socket_fd(socket_fd const&) = delete;
  socket_fd& operator=(socket_fd const&) = delete;
  socket_fd& operator=(socket_fd&& other) noexcept;
  ~socket_fd() { reset(); }
  [[nodiscard]] int get() const noexcept { return fd_; }
  [[nodiscard]] bool valid() const noexcept { return fd_ >= 0; }
  [[nodiscard]] int release() noexcept { return std::exchange(fd_, -1); }
  void reset() noexcept;

 private:
  int fd_{-1};
};

/// strerror of errno, thread-safe.
[[nodiscard]] std::string errno_text();

/// Refuses a timeout with no time in it (0 or negative): `what` is the call and the option, as
/// the user wrote them.
/// @throws usage_error naming `what`, the timeout and what to give instead
void expect_positive_timeout(std::chrono::milliseconds timeout, std::string const& what);

/// Milliseconds from now to `deadline`, at least 0: a poll timeout.
[[nodiscard]] int milliseconds_left(socket_clock::time_point deadline);

/// Waits until `fd` has one of `events`; false at the deadline.
/// @throws nccl_error when poll itself fails
[[nodiscard]] bool wait_for(int fd, short events, socket_clock::time_point deadline);

/// How a read of a fixed number of bytes ended.
enum class read_end {
  complete,   // every byte arrived
  closed,     // the peer closed or reset the connection first
  timed_out,  // the deadline passed first
};

/// Reads exactly `size` bytes and says how that ended; `received` is the number that arrived.
[[nodiscard]] read_end read_exactly(int fd, void* buffer, std::size_t size,
                                    socket_clock::time_point deadline, std::size_t& received);

/// Reads exactly `size` bytes; false on end of stream, a reset connection or the deadline.
[[nodiscard]] bool read_exactly(int fd, void* buffer, std::size_t size,
                                socket_clock::time_point deadline);

/// What a peer answered, quoted for a message: the first `received` bytes of `buffer`, and
/// whatever more it has sent already (read without waiting, up to `capacity`). Up to 16 bytes
/// are shown, the unprintable ones as \xNN, with "..." when there were more: what a stranger
/// answered tells who it is.
[[nodiscard]] std::string quoted_answer(int fd, unsigned char* buffer, std::size_t capacity,
                                        std::size_t received);

/// Writes all `size` bytes; false on a closed connection or the deadline.
[[nodiscard]] bool write_all(int fd, void const* buffer, std::size_t size,
                             socket_clock::time_point deadline);

/// Connects to `host:port` before `deadline`, retrying every 50 ms while the peer is not yet
/// listening or its queue is full; `host` is resolved again on each attempt, IPv4 or IPv6.
/// Every attempt is bounded by the deadline (a blocking connect() can retry for minutes).
/// Returns an invalid socket when the deadline passed, with the last reason in `last_error`.
/// The socket returned is non-blocking, with TCP_NODELAY.
[[nodiscard]] socket_fd connect_before(std::string const& host, int port,
                                       socket_clock::time_point deadline, std::string& last_error);

/// A listening socket on every address of this host, IPv6 and IPv4 where the host has IPv6,
/// IPv4 alone otherwise; `port` 0 picks a free one. Returns an invalid socket, with the reason
/// in `error`, when the port cannot be bound.
[[nodiscard]] socket_fd listen_on(int port, int backlog, std::string& error);

/// The `index`th 32-bit word of a message in network byte order, as the rendezvous and the
/// peer watch write their fixed-size messages.
[[nodiscard]] std::uint32_t word_at(unsigned char const* in, std::size_t index);

/// Writes `value` as the `index`th 32-bit word of a message, in network byte order.
void put_word(unsigned char* out, std::size_t index, std::uint32_t value);

/// The local port a socket is bound to.
[[nodiscard]] int bound_port(int fd);

/// The local address of a connected socket, as text ("10.0.0.5", "::1"): the address by which
/// its peer's network reaches this host. Empty when the system cannot tell.
[[nodiscard]] std::string local_host(int fd);

}  // namespace graphstep::nccl::detail
