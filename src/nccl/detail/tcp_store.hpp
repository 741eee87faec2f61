#pragma once

/// @file nccl/detail/tcp_store.hpp
/// @brief A client of PyTorch's c10d TCPStore, the key-value store that torchrun's agent serves
/// at MASTER_ADDR:MASTER_PORT for its workers (TORCHELASTIC_USE_AGENT_STORE=True). graphstep
/// exchanges NCCL's unique id through it under torchrun, as PyTorch's own process groups do.
///
/// The wire format is c10d's (torch/csrc/distributed/c10d/TCPStoreBackend.hpp and
/// TCPStoreLibUvBackend.cpp): a one-byte command, then its operands; strings and values as a
/// 64-bit length and the bytes; integers in the host's byte order, as PyTorch sends them.
/// Every call has a deadline; a peer that is not a TCPStore is named as such.
/// graphstep_core: plain C++, includes no CUDA header.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace graphstep::nccl::detail {

/// @brief The longest key c10d's store accepts (MAX_STRING_LEN), in bytes, with the "/" that
/// PyTorch's clients put before every key (a key set from Python reads the same here).
inline constexpr std::size_t tcp_store_max_key_bytes = std::size_t{8} * 1024;
/// @brief The largest value c10d's store accepts (MAX_PAYLOAD_LEN), in bytes.
inline constexpr std::size_t tcp_store_max_value_bytes = std::size_t{8} * 1024 * 1024;

/// @brief One connection to a c10d TCPStore. Not thread-safe: one thread per client.
class tcp_store {
 public:
  /// @brief Connects (retrying until `timeout`: the store may start after this process),
  /// introduces itself as c10d clients do, and checks that the peer answers as a store.
  /// `timeout` also bounds each later call's exchange with the store (not `get`'s and
  /// `wait`'s waiting for a key, which take their own).
  /// @throws nccl_error (no store reachable at host:port by the deadline; the peer does not
  /// answer as a TCPStore), usage_error (port outside 1..65535, a timeout that is not positive)
  tcp_store(std::string const& host, int port, std::chrono::milliseconds timeout);
  ~tcp_store();
  tcp_store(tcp_store&& other) noexcept;
  tcp_store& operator=(tcp_store&& other) noexcept;
  tcp_store(tcp_store const&) = delete;
  tcp_store& operator=(tcp_store const&) = delete;

  /// @brief Stores `value` under `key`, replacing what was there; waiters on `key` wake.
  /// @throws usage_error (key or value longer than the store accepts), nccl_error (connection)
  void set(std::string const& key, std::vector<std::uint8_t> const& value);

  /// @brief The value of `key`, waiting until some client sets it or `timeout` passes.
  /// @throws nccl_error naming the key at the deadline (the connection stays usable), or when
  /// the connection fails; usage_error (key too long)
  [[nodiscard]] std::vector<std::uint8_t> get(std::string const& key,
                                              std::chrono::milliseconds timeout);

  /// @brief Adds `delta` to the integer under `key` (0 when absent) and returns the sum. c10d
  /// keeps it as decimal text, so `get` reads "3" after three adds of 1.
  /// @throws nccl_error (connection), usage_error (key too long)
  std::int64_t add(std::string const& key, std::int64_t delta);

  /// @brief True when every key in `keys` is set, without waiting.
  /// @throws nccl_error (connection), usage_error (a key too long)
  [[nodiscard]] bool check(std::vector<std::string> const& keys);

  /// @brief Waits until every key in `keys` is set; false at the deadline (the wait is then
  /// withdrawn and the connection stays usable).
  /// @throws nccl_error (connection), usage_error (a key too long)
  [[nodiscard]] bool wait(std::vector<std::string> const& keys, std::chrono::milliseconds timeout);

  /// @brief "host:port", for messages.
  [[nodiscard]] std::string const& address() const noexcept { return address_; }
  /// @brief This host's address on the connection to the store: one by which the store's
  /// network reaches this host (empty when the system cannot tell).
  [[nodiscard]] std::string local_host() const;

 private:
  void send_bytes(std::vector<std::uint8_t> const& message) const;
  void receive_bytes(void* buffer, std::size_t size, char const* what) const;

  int fd_{-1};
  std::string address_;
  std::chrono::milliseconds io_timeout_;
};

}  // namespace graphstep::nccl::detail
