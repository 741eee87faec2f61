// graphstep_core: plain C++, includes no CUDA header.
#include "socket.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <graphstep/error.hpp>
#include <string_view>
#include <system_error>
#include <thread>

namespace graphstep::nccl::detail {
namespace {

constexpr int system_error = 2;  // ncclSystemError
constexpr std::chrono::milliseconds retry_interval{50};
// One connection attempt may wait this long before the next address or retry is tried.
constexpr std::chrono::seconds attempt_limit{2};

// One non-blocking connect to `address`, waited for until `until`; empty on failure.
socket_fd connect_once(addrinfo const& address, socket_clock::time_point until,
                       std::string& last_error) {
  socket_fd attempt{
      ::socket(address.ai_family, address.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)};
  if (!attempt.valid()) {
    last_error = errno_text();
    return {};
  }
  if (::connect(attempt.get(), address.ai_addr, address.ai_addrlen) != 0) {
    if (errno != EINPROGRESS && errno != EINTR) {
      last_error = errno_text();
      return {};
    }
    if (!wait_for(attempt.get(), POLLOUT, until)) {
      last_error = "the connection was not accepted in time (the listener's queue may be full)";
      return {};
    }
    int status = 0;
    socklen_t length = sizeof status;
    ::getsockopt(attempt.get(), SOL_SOCKET, SO_ERROR, &status, &length);
    if (status != 0) {
      last_error = std::generic_category().message(status);
      return {};
    }
  }
  int const yes = 1;
  ::setsockopt(attempt.get(), IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
  return attempt;
}

}  // namespace

socket_fd& socket_fd::operator=(socket_fd&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

void socket_fd::reset() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string errno_text() {
  return std::generic_category().message(errno);
}

void expect_positive_timeout(std::chrono::milliseconds timeout, std::string const& what) {
  GRAPHSTEP_EXPECTS(timeout.count() > 0,
                    what + ": a timeout of " + std::to_string(timeout.count()) +
                        " ms leaves no time to wait; give a positive time (ranks started "
                        "together usually meet within seconds; the default is 120 s)");
}

int milliseconds_left(socket_clock::time_point deadline) {
  // Rounded up: a poll woken a fraction of a millisecond early would end a wait before its
  // deadline.
  auto const left = std::chrono::ceil<std::chrono::milliseconds>(deadline - socket_clock::now());
  return static_cast<int>(std::clamp<long long>(left.count(), 0, 1LL << 30));
}

bool wait_for(int fd, short events, socket_clock::time_point deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    int const ready = ::poll(&p, 1, milliseconds_left(deadline));
    if (ready > 0) return true;
    if (ready == 0) return false;
    if (errno != EINTR) throw nccl_error{system_error, "poll failed: " + errno_text()};
  }
}

read_end read_exactly(int fd, void* buffer, std::size_t size, socket_clock::time_point deadline,
                      std::size_t& received) {
  auto* const at = static_cast<unsigned char*>(buffer);
  received = 0;
  while (received < size) {
    if (!wait_for(fd, POLLIN, deadline)) return read_end::timed_out;
    ssize_t const got = ::recv(fd, at + received, size - received, 0);
    if (got == 0) return read_end::closed;
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return read_end::closed;
    }
    received += static_cast<std::size_t>(got);
  }
  return read_end::complete;
}

bool read_exactly(int fd, void* buffer, std::size_t size, socket_clock::time_point deadline) {
  std::size_t received = 0;
  return read_exactly(fd, buffer, size, deadline, received) == read_end::complete;
}

std::string quoted_answer(int fd, unsigned char* buffer, std::size_t capacity,
                          std::size_t received) {
  ssize_t const more = ::recv(fd, buffer + received, capacity - received, MSG_DONTWAIT);
  std::size_t const size = received + (more > 0 ? static_cast<std::size_t>(more) : 0);
  constexpr std::size_t limit = 16;
  constexpr std::string_view digits = "0123456789abcdef";
  std::string text = "\"";
  for (std::size_t i = 0; i < std::min(size, limit); ++i) {
    unsigned char const byte = buffer[i];
    if (byte >= 0x20 && byte < 0x7f && byte != '"' && byte != '\\') {
      text += static_cast<char>(byte);
    } else {
      text += "\\x";
      text += digits[byte >> 4];
      text += digits[byte & 15];
    }
  }
  return text + (size > limit ? "\"..." : "\"");
}

bool write_all(int fd, void const* buffer, std::size_t size, socket_clock::time_point deadline) {
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

socket_fd connect_before(std::string const& host, int port, socket_clock::time_point deadline,
                         std::string& last_error) {
  std::string const service = std::to_string(port);
  while (true) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    // Resolved on every attempt: a name may appear in DNS after this rank starts.
    int const status = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
    if (status != 0) {
      last_error = std::string{"cannot resolve '"} + host + "': " + ::gai_strerror(status);
    }
    for (addrinfo const* address = found; address != nullptr; address = address->ai_next) {
      auto const until = std::min(deadline, socket_clock::now() + attempt_limit);
      socket_fd connection = connect_once(*address, until, last_error);
      if (connection.valid()) {
        ::freeaddrinfo(found);
        return connection;
      }
    }
    if (found != nullptr) ::freeaddrinfo(found);
    if (socket_clock::now() + retry_interval >= deadline) return {};
    std::this_thread::sleep_for(retry_interval);
  }
}

socket_fd listen_on(int port, int backlog, std::string& error) {
  int failure = 0;
  auto bind_and_listen = [&](int family) -> socket_fd {
    socket_fd listener{::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    if (!listener.valid()) {
      failure = errno;
      error = errno_text();
      return {};
    }
    int const yes = 1;
    ::setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    int bound = -1;
    if (family == AF_INET6) {
      int const no = 0;  // IPv4 clients too, as IPv4-mapped addresses
      ::setsockopt(listener.get(), IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof no);
      sockaddr_in6 address{};
      address.sin6_family = AF_INET6;
      address.sin6_addr = in6addr_any;
      address.sin6_port = htons(static_cast<std::uint16_t>(port));
      bound = ::bind(listener.get(), reinterpret_cast<sockaddr*>(&address), sizeof address);
    } else {
      sockaddr_in address{};
      address.sin_family = AF_INET;
      address.sin_addr.s_addr = htonl(INADDR_ANY);
      address.sin_port = htons(static_cast<std::uint16_t>(port));
      bound = ::bind(listener.get(), reinterpret_cast<sockaddr*>(&address), sizeof address);
    }
    if (bound != 0 || ::listen(listener.get(), backlog) != 0) {
      failure = errno;
      error = errno_text();
      return {};
    }
    return listener;
  };
  socket_fd listener = bind_and_listen(AF_INET6);
  // A host without IPv6 cannot create or bind the socket; a port in use is an answer.
  if (!listener.valid() && failure != EADDRINUSE && failure != EACCES) {
    listener = bind_and_listen(AF_INET);
  }
  return listener;
}

std::uint32_t word_at(unsigned char const* in, std::size_t index) {
  std::uint32_t word = 0;
  std::memcpy(&word, in + 4 * index, sizeof word);
  return ntohl(word);
}

void put_word(unsigned char* out, std::size_t index, std::uint32_t value) {
  std::uint32_t const word = htonl(value);
  std::memcpy(out + 4 * index, &word, sizeof word);
}

int bound_port(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  if (address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<sockaddr_in6 const*>(&address)->sin6_port);
  }
  return ntohs(reinterpret_cast<sockaddr_in const*>(&address)->sin_port);
}

std::string local_host(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return {};
  std::array<char, INET6_ADDRSTRLEN> text{};
  void const* raw =
      address.ss_family == AF_INET6
          ? static_cast<void const*>(&reinterpret_cast<sockaddr_in6 const*>(&address)->sin6_addr)
          : static_cast<void const*>(&reinterpret_cast<sockaddr_in const*>(&address)->sin_addr);
  if (::inet_ntop(address.ss_family, raw, text.data(), text.size()) == nullptr) return {};
  return text.data();
}

}  // namespace graphstep::nccl::detail
