#pragma once

// TCP on 127.0.0.1 for the tests of graphstep's sockets: a free port, a raw connection, a
// listener that is some other program.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace graphstep::testing {

/// @brief 127.0.0.1:`port`.
inline sockaddr_in loopback_address(int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  return address;
}

/// @brief A port nobody listens on: one bound, then closed.
inline int closed_port() {
  int const fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = loopback_address(0);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

/// @brief A blocking connection to 127.0.0.1:`port`; -1 when it fails.
inline int connect_to_loopback(int port) {
  int const fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in const address = loopback_address(port);
  if (::connect(fd, reinterpret_cast<sockaddr const*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

/// @brief Some other program listening on 127.0.0.1 where graphstep expects its own peer: it
/// accepts every connection, sends `answer` at once (nothing if empty), and then closes the
/// connection or holds it open, silent, until destroyed.
class loopback_stranger {
 public:
  enum class then { close, hold };

  loopback_stranger(std::string answer, then after)
      : listener_{::socket(AF_INET, SOCK_STREAM, 0)}, answer_{std::move(answer)}, after_{after} {
    sockaddr_in address = loopback_address(0);
    ::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address);
    ::listen(listener_, 16);
    socklen_t length = sizeof address;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    server_ = std::thread{[this] { serve(); }};
  }
  ~loopback_stranger() {
    stop_ = true;
    server_.join();
    for (int const fd : held_) ::close(fd);
    ::close(listener_);
  }
  loopback_stranger(loopback_stranger const&) = delete;
  loopback_stranger& operator=(loopback_stranger const&) = delete;

  [[nodiscard]] int port() const noexcept { return port_; }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{listener_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;  // looks at stop_ every 20 ms
      int const fd = ::accept(listener_, nullptr, nullptr);
      if (fd < 0) continue;
      if (!answer_.empty()) ::send(fd, answer_.data(), answer_.size(), MSG_NOSIGNAL);
      if (after_ == then::close) {
        ::close(fd);
      } else {
        held_.push_back(fd);
      }
    }
  }

  int listener_;
  int port_{0};
  std::string answer_;
  then after_;
  std::atomic<bool> stop_{false};
  std::vector<int> held_;  // the server thread's, until it is joined
  std::thread server_;
};

}  // namespace graphstep::testing
