#pragma once

// TCP on 127.0.0.1 for the tests of graphstep's sockets: a free port, a raw connection.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>

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

}  // namespace graphstep::testing
