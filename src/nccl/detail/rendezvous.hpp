#pragma once

/// @file nccl/detail/rendezvous.hpp
/// @brief Exchanges NCCL's 128-byte unique id between the ranks of a job over TCP: through
/// graphstep's own rendezvous, or, under torchrun, through its agent's c10d store.
///
/// Rank 0 listens on MASTER_ADDR:MASTER_PORT; every other rank connects (retrying until the
/// deadline, so start order does not matter), says who it is, and receives the id once all
/// ranks have arrived. Every wait has a deadline, connecting included; every failure names what
/// is wrong. Only the id travels here: NCCL itself moves the data. Plain C++ (POSIX sockets,
/// IPv4 and IPv6; MASTER_ADDR is resolved again on each connection attempt).
/// graphstep_core: plain C++, includes no CUDA header.

#include <chrono>
#include <cstdint>
#include <graphstep/nccl/launch_environment.hpp>
#include <graphstep/nccl/unique_id.hpp>
#include <optional>
#include <string>

#include "nccl/detail/peer_watch.hpp"
#include "nccl/detail/tcp_store.hpp"

namespace graphstep::nccl::detail {

/// @brief Default deadline of a rendezvous.
inline constexpr std::chrono::milliseconds default_rendezvous_timeout{std::chrono::seconds{120}};

/// @brief The hash of a job token that a rank presents to rank 0 (FNV-1a, 64 bit). It keeps
/// the ranks of other jobs (and clients that do not know the token) out of this job; it is not
/// a cryptographic protection against someone who can read the traffic.
[[nodiscard]] std::uint64_t job_token_hash(std::string const& token) noexcept;

/// @brief Rank 0's side: listens from construction, so the port is known before `serve`.
class rendezvous_server {
 public:
  /// @param port 0 picks a free port (see `port()`)
  /// @param job_token what every rank of the job presents (GRAPHSTEP_RENDEZVOUS_TOKEN); a
  /// client with another one is refused and kept out, and cannot abort the job
  /// @throws nccl_error (the port cannot be bound: in use, or no permission), usage_error
  rendezvous_server(int port, int world_size, std::string const& job_token = {});
  ~rendezvous_server();
  rendezvous_server(rendezvous_server const&) = delete;
  rendezvous_server& operator=(rendezvous_server const&) = delete;

  /// @brief The port listened on.
  [[nodiscard]] int port() const noexcept { return port_; }

  /// @brief Waits for ranks 1..world_size-1, checks them, sends each `id`, and waits for every
  /// rank's acknowledgement. Clients introduce themselves concurrently: one that stays silent
  /// is dropped after 5 s without holding up the others.
  /// @throws nccl_error naming the ranks that did not arrive by the deadline (with the count of
  /// dropped and refused clients, and why accepting failed if it did) or that did not
  /// acknowledge the id; usage_error for a rank of this job that reports another world size, a
  /// duplicate rank or a rank out of range (that rank is told too, and so are the others), and
  /// for a timeout that is not positive.
  /// Connections that do not speak the protocol are dropped and counted; clients with another
  /// job token are told so and counted. Only an admitted rank is sent the id.
  void serve(unique_id_bytes const& id,
             std::chrono::milliseconds timeout = default_rendezvous_timeout);

  /// @brief After `serve`: the listening socket, kept for the peer watch, whose connections
  /// the ranks then make to the same MASTER_ADDR:MASTER_PORT. The server listens no more.
  /// @throws usage_error (already handed over)
  [[nodiscard]] peer_watch_listener keep_listening();

 private:
  int listener_{-1};
  int port_;
  int world_size_;
  std::uint64_t token_;
};

/// @brief A non-zero rank's side: connects to rank 0, returns the id it sends, and acknowledges
/// it.
/// @throws nccl_error (rank 0 unreachable until the deadline — wrong address or port, or rank 0
/// not started; no answer by the deadline; at once when the peer closes the connection without
/// answering or answers with something that is not the protocol — another program listens
/// there, or rank 0 failed), usage_error (rank 0 refused this rank: other world size, duplicate
/// rank, another job token; a timeout that is not positive)
[[nodiscard]] unique_id_bytes rendezvous_join(
    std::string const& address, int port, int rank, int world_size,
    std::chrono::milliseconds timeout = default_rendezvous_timeout,
    std::string const& job_token = {});

/// @brief The id through a c10d store (torchrun's agent store): rank 0 sets `key` to
/// `root_id` and returns it; other ranks wait for `key` until `timeout` and return its value.
/// @throws nccl_error (the key did not appear by the deadline: rank 0 failed or was not
/// started; the value is not an id; the store failed), usage_error (rank < 0, a timeout that is
/// not positive)
[[nodiscard]] unique_id_bytes exchange_unique_id_through_store(
    tcp_store& store, std::string const& key, int rank, unique_id_bytes const& root_id,
    std::chrono::milliseconds timeout = default_rendezvous_timeout);

/// @brief The store key of the `sequence`th id a torchrun job exchanges:
/// "graphstep/<TORCHELASTIC_RUN_ID>/<TORCHELASTIC_RESTART_COUNT>/nccl_unique_id/<sequence>",
/// fresh after each restart of the workers, which keep the agent's store.
[[nodiscard]] std::string torchrun_store_key(launch_environment const& environment, int sequence);

/// @brief Where a rank's peer watch meets rank 0's, learnt with NCCL's id.
struct peer_watch_meeting {
  /// Rank 0: the socket the other ranks' watches connect to.
  std::optional<peer_watch_listener> listener;
  /// Other ranks: rank 0's watch.
  std::string host;
  int port{0};
};

/// @brief What `exchange_unique_id` brings back.
struct bootstrap_exchange {
  unique_id_bytes id{};
  /// Set when the exchange was asked to prepare the peer watch (and the world has peers).
  std::optional<peer_watch_meeting> watch;
};

/// @brief The store key under which rank 0 publishes its peer watch's "host|port", beside the
/// id's key.
[[nodiscard]] std::string peer_watch_store_key(std::string const& id_key);

/// @brief Rank 0: publishes "host|port" of its peer watch beside `id_key`, with the host by
/// which the store reached it (an address its network routes to this host).
/// @throws nccl_error (the store failed)
void publish_peer_watch(tcp_store& store, std::string const& id_key, int port);

/// @brief Another rank: where rank 0's peer watch listens, waiting for it until `timeout`.
/// @throws nccl_error (not published by the deadline; a value that is not host|port; the store
/// failed)
[[nodiscard]] peer_watch_meeting find_peer_watch(tcp_store& store, std::string const& id_key,
                                                 std::chrono::milliseconds timeout);

/// @brief Both sides in one call, by the environment's bootstrap. `rendezvous`: rank 0 serves
/// `root_id` (and returns it); other ranks join and return what rank 0 sent. `torchrun_store`:
/// through torchrun's store at MASTER_ADDR:MASTER_PORT, under `torchrun_store_key` with this
/// process's count of such exchanges as the sequence (so every rank must make its
/// communicators in the same order, as with any collective).
/// With `with_peer_watch` (and more than one rank), where the peer watch meets comes back too:
/// the rendezvous keeps rank 0's socket at MASTER_PORT listening for it; through torchrun's
/// store, rank 0 listens on a free port and publishes "host|port" (`publish_peer_watch`),
/// with the host by which the store reached it, before it publishes the id.
/// @throws what the call of the environment's bootstrap throws; usage_error for a timeout that
/// is not positive, for one process too
[[nodiscard]] bootstrap_exchange exchange_unique_id(
    launch_environment const& environment, unique_id_bytes const& root_id,
    std::chrono::milliseconds timeout = default_rendezvous_timeout, bool with_peer_watch = false);

}  // namespace graphstep::nccl::detail
