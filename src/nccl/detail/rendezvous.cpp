// graphstep_core: plain C++, includes no CUDA header.
#include "nccl/detail/rendezvous.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <graphstep/error.hpp>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "socket.hpp"

namespace graphstep::nccl::detail {
namespace {

using clock = socket_clock;

constexpr std::uint32_t protocol_magic = 0x47535256;  // "GSRV"
constexpr std::uint32_t protocol_version = 2;
constexpr int system_error = 2;  // ncclSystemError
// A client gets this long to introduce itself; others are served meanwhile.
constexpr std::chrono::seconds hello_limit{5};
// After the id went out, each rank's acknowledgement must come within this.
constexpr std::chrono::seconds acknowledgement_limit{10};
// A failing accept() (out of descriptors) is retried this often, not in a busy loop.
constexpr std::chrono::milliseconds accept_retry{20};

enum class reply_status : std::uint32_t {
  ok = 0,
  world_size_mismatch = 1,
  duplicate_rank = 2,
  rank_out_of_range = 3,
  rendezvous_failed = 4,
  token_mismatch = 5,
};

// A rank's introduction: magic, version, rank, world size, the job token's hash.
struct hello {
  std::uint32_t magic, version;
  std::int32_t rank, world_size;
  std::uint64_t token;
};
constexpr std::size_t hello_bytes = 24;
// rank 0's answer: magic, status, then the id (zeros unless the status is ok).
constexpr std::size_t reply_bytes = 8 + sizeof(unique_id_bytes);
// A rank's acknowledgement of the id: magic, rank.
constexpr std::size_t acknowledgement_bytes = 8;

[[noreturn]] void fail(std::string const& what) {
  throw nccl_error{system_error, what};
}

std::array<unsigned char, hello_bytes> encode(hello const& h) {
  std::array<unsigned char, hello_bytes> out{};
  put_word(out.data(), 0, h.magic);
  put_word(out.data(), 1, h.version);
  put_word(out.data(), 2, static_cast<std::uint32_t>(h.rank));
  put_word(out.data(), 3, static_cast<std::uint32_t>(h.world_size));
  put_word(out.data(), 4, static_cast<std::uint32_t>(h.token >> 32));
  put_word(out.data(), 5, static_cast<std::uint32_t>(h.token));
  return out;
}

hello decode(unsigned char const* in) {
  return {word_at(in, 0), word_at(in, 1), static_cast<std::int32_t>(word_at(in, 2)),
          static_cast<std::int32_t>(word_at(in, 3)),
          (std::uint64_t{word_at(in, 4)} << 32) | word_at(in, 5)};
}

void send_reply(int fd, reply_status status, unique_id_bytes const& id,
                clock::time_point deadline) {
  std::array<unsigned char, reply_bytes> message{};
  put_word(message.data(), 0, protocol_magic);
  put_word(message.data(), 1, static_cast<std::uint32_t>(status));
  // Only a rank that was let in learns the id.
  if (status == reply_status::ok) std::memcpy(message.data() + 8, id.data(), id.size());
  // A client that went away cannot be told; the server reports the failure itself.
  static_cast<void>(write_all(fd, message.data(), message.size(), deadline));
}

// A connection whose hello is still arriving.
struct pending_client {
  socket_fd connection;
  std::array<unsigned char, hello_bytes> received{};
  std::size_t count{0};
  clock::time_point until;
};

std::string rank_list(std::vector<int> const& ranks) {
  std::string text;
  for (int const r : ranks) text += (text.empty() ? "" : ", ") + std::to_string(r);
  return text;
}

}  // namespace

std::uint64_t job_token_hash(std::string const& token) noexcept {
  // FNV-1a, 64 bit: tells jobs apart; not a secret's protection on a network others can read.
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char const c : token) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

rendezvous_server::rendezvous_server(int port, int world_size, std::string const& job_token)
    : port_{port}, world_size_{world_size}, token_{job_token_hash(job_token)} {
  GRAPHSTEP_EXPECTS(port >= 0 && port <= 65535,
                    "rendezvous: port " + std::to_string(port) + " must lie in 0..65535");
  GRAPHSTEP_EXPECTS(world_size >= 1, "rendezvous: the world size must be at least 1");
  std::string error;
  socket_fd listener = listen_on(port, std::max(16, world_size), error);
  if (!listener.valid()) {
    fail("rendezvous: rank 0 cannot listen on port " + std::to_string(port) + ": " + error +
         ". Pick a free MASTER_PORT");
  }
  port_ = bound_port(listener.get());
  listener_ = listener.release();
}

rendezvous_server::~rendezvous_server() {
  if (listener_ >= 0) ::close(listener_);
}

peer_watch_listener rendezvous_server::keep_listening() {
  GRAPHSTEP_EXPECTS(listener_ >= 0, "rendezvous_server::keep_listening: already handed over");
  return peer_watch_listener{std::exchange(listener_, -1)};
}

// Serving consumes the listening socket, so it is not const.
// NOLINTNEXTLINE(readability-make-member-function-const)
void rendezvous_server::serve(unique_id_bytes const& id, std::chrono::milliseconds timeout) {
  detail::expect_positive_timeout(timeout, "rendezvous_server::serve");
  auto const deadline = clock::now() + timeout;
  std::map<int, socket_fd> arrived;  // rank -> connection
  std::vector<pending_client> pending;
  int foreign = 0;
  int other_jobs = 0;
  std::string accept_error;
  auto refuse_all = [&](reply_status status) {
    for (auto& [rank, connection] : arrived) {
      send_reply(connection.get(), status, id, clock::now() + std::chrono::seconds{1});
    }
  };
  // A complete hello: the rank is admitted, the client dropped, or the job refused (throws).
  auto admit = [&](pending_client& client) {
    hello const h = decode(client.received.data());
    if (h.magic != protocol_magic || h.version != protocol_version) {
      ++foreign;
      return;
    }
    if (h.token != token_) {  // another job, or a stranger: told, and kept out of this one
      ++other_jobs;
      send_reply(client.connection.get(), reply_status::token_mismatch, id,
                 clock::now() + std::chrono::seconds{1});
      return;
    }
    auto refuse = [&](reply_status status, std::string const& why) {
      send_reply(client.connection.get(), status, id, clock::now() + std::chrono::seconds{1});
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
    arrived.emplace(h.rank, std::move(client.connection));
  };
  while (static_cast<int>(arrived.size()) < world_size_ - 1) {
    auto const now = clock::now();
    if (now >= deadline) {
      std::vector<int> missing;
      for (int r = 1; r < world_size_; ++r) {
        if (arrived.count(r) == 0) missing.push_back(r);
      }
      refuse_all(reply_status::rendezvous_failed);
      std::string dropped;
      if (foreign > 0) {
        dropped += "; " + std::to_string(foreign) +
                   " connection(s) that did not speak the protocol were dropped";
      }
      if (other_jobs > 0) {
        dropped += "; " + std::to_string(other_jobs) +
                   " client(s) with another job token (GRAPHSTEP_RENDEZVOUS_TOKEN) were refused";
      }
      if (!accept_error.empty()) dropped += "; accepting connections failed: " + accept_error;
      fail("rendezvous: rank(s) " + rank_list(missing) + " of " + std::to_string(world_size_) +
           " did not arrive at port " + std::to_string(port_) + " within " +
           std::to_string(timeout.count()) + " ms" +
           (dropped.empty() ? std::string{} : " (" + dropped.substr(2) + ")") +
           ". Check that every rank was started with the same MASTER_ADDR, MASTER_PORT and "
           "WORLD_SIZE");
    }
    // Wait for a new connection or more of a pending hello, whichever comes first; a client
    // that stays silent is dropped at its own limit without holding up the others.
    std::vector<pollfd> watched{{listener_, POLLIN, 0}};
    auto wake = deadline;
    for (auto const& client : pending) {
      watched.push_back({client.connection.get(), POLLIN, 0});
      wake = std::min(wake, client.until);
    }
    int const ready = ::poll(watched.data(), watched.size(), detail::milliseconds_left(wake));
    if (ready < 0 && errno != EINTR) fail("rendezvous: poll failed: " + detail::errno_text());
    if (ready > 0 && (watched[0].revents & POLLIN) != 0) {
      socket_fd connection{::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK)};
      if (connection.valid()) {
        pending.push_back({std::move(connection), {}, 0, clock::now() + hello_limit});
      } else if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
        // Out of descriptors, say: the connection stays queued, so wait instead of spinning.
        accept_error = detail::errno_text();
        std::this_thread::sleep_for(accept_retry);
      }
    }
    for (std::size_t i = 0; i < pending.size(); ++i) {
      auto& client = pending[i];
      if (i + 1 < watched.size() && (watched[i + 1].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        ssize_t const got = ::recv(client.connection.get(), client.received.data() + client.count,
                                   hello_bytes - client.count, 0);
        if (got > 0) client.count += static_cast<std::size_t>(got);
        if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
          ++foreign;  // closed before introducing itself
          client.connection.reset();
          continue;
        }
      }
      if (client.count == hello_bytes) {
        admit(client);
        client.connection.reset();  // moved into `arrived`, or dropped
      } else if (clock::now() >= client.until) {
        ++foreign;
        client.connection.reset();
      }
    }
    pending.erase(std::remove_if(pending.begin(), pending.end(),
                                 [](pending_client const& c) { return !c.connection.valid(); }),
                  pending.end());
  }
  for (auto& [rank, connection] : arrived) {
    send_reply(connection.get(), reply_status::ok, id, deadline);
  }
  // A rank that registered and then left would otherwise pass as joined.
  auto const acknowledged_by = clock::now() + acknowledgement_limit;
  std::vector<int> silent;
  for (auto& [rank, connection] : arrived) {
    std::array<unsigned char, acknowledgement_bytes> ack{};
    if (!read_exactly(connection.get(), ack.data(), ack.size(), acknowledged_by) ||
        word_at(ack.data(), 0) != protocol_magic ||
        static_cast<int>(word_at(ack.data(), 1)) != rank) {
      silent.push_back(rank);
    }
  }
  if (!silent.empty()) {
    fail("rendezvous: rank(s) " + rank_list(silent) +
         " registered but did not acknowledge NCCL's id (they exited or lost the connection): "
         "see their logs");
  }
}

unique_id_bytes rendezvous_join(std::string const& address, int port, int rank, int world_size,
                                std::chrono::milliseconds timeout, std::string const& job_token) {
  GRAPHSTEP_EXPECTS(rank >= 1 && rank < world_size,
                    "rendezvous_join: rank " + std::to_string(rank) + " must lie in 1.." +
                        std::to_string(world_size - 1) + " (rank 0 serves)");
  detail::expect_positive_timeout(timeout, "rendezvous_join");
  auto const deadline = clock::now() + timeout;
  std::string const where = address + ":" + std::to_string(port);
  std::string const this_rank = "rendezvous: rank " + std::to_string(rank);
  std::string last_error;
  // Rank 0 may start later than this rank: connect_before retries until the deadline.
  socket_fd const connection = connect_before(address, port, deadline, last_error);
  if (!connection.valid()) {
    fail(this_rank + " could not reach rank 0 at " + where + " within " +
         std::to_string(timeout.count()) + " ms (" + last_error +
         "). Check MASTER_ADDR and MASTER_PORT, and that rank 0 is running");
  }
  std::string const what_to_check =
      "that MASTER_ADDR and MASTER_PORT point at rank 0 and that no other program listens on "
      "port " +
      std::to_string(port);
  // Not retried: rank 0 listens from its server's construction and holds every connection
  // until it answers, so a rank that comes too early is refused (and retried above), never
  // accepted and then dropped or answered with something else. A peer that does either is
  // another program (or a rank 0 that failed), and retrying would only hide it until the
  // deadline.
  auto stranger = [&](std::string const& what) {
    fail(this_rank + " connected to " + where +
         " (MASTER_ADDR:MASTER_PORT), but the process there " + what + ". Check " + what_to_check);
  };
  std::string const closed_early =
      "closed the connection without answering: it is not graphstep's rank 0 (or is one of "
      "another graphstep version), or rank 0 failed (see its log)";
  auto const introduction =
      encode({protocol_magic, protocol_version, rank, world_size, job_token_hash(job_token)});
  // A peer that closed at once may make this fail; what it answered before, read below, says
  // more.
  static_cast<void>(
      write_all(connection.get(), introduction.data(), introduction.size(), deadline));
  std::array<unsigned char, reply_bytes> reply{};
  std::array<unsigned char, sizeof protocol_magic> magic{};
  put_word(magic.data(), 0, protocol_magic);
  // The magic alone first, so that a stranger is named as soon as it answers, however short
  // its answer and whether or not it then closes.
  std::size_t received = 0;
  auto const opened =
      detail::read_exactly(connection.get(), reply.data(), magic.size(), deadline, received);
  if (std::memcmp(reply.data(), magic.data(), received) != 0) {
    stranger("answered " +
             detail::quoted_answer(connection.get(), reply.data(), reply.size(), received) +
             ", which is not graphstep's rendezvous protocol: another program listens there");
  }
  if (opened == detail::read_end::closed) stranger(closed_early);
  if (opened == detail::read_end::timed_out) {
    fail(this_rank + " got no answer from " + where + " (MASTER_ADDR:MASTER_PORT) within " +
         std::to_string(timeout.count()) +
         " ms: other ranks may be missing, or rank 0 failed (see its log), or the process there "
         "is not graphstep's rank 0 (rank 0 then reports rank " +
         std::to_string(rank) + " as missing): check " + what_to_check);
  }
  if (!read_exactly(connection.get(), reply.data() + magic.size(), reply.size() - magic.size(),
                    deadline)) {
    fail(this_rank + ": rank 0 at " + where +
         " broke off its answer (it failed or was stopped: see its log)");
  }
  switch (static_cast<reply_status>(word_at(reply.data(), 1))) {
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
    case reply_status::token_mismatch:
      throw usage_error{"rendezvous: rank 0 at " + where +
                        " serves a job with another GRAPHSTEP_RENDEZVOUS_TOKEN: give every rank "
                        "of a job the same token, and each job its own MASTER_PORT"};
    default: fail("rendezvous: rank 0 at " + where + " gave up (another rank failed; see its log)");
  }
  std::array<unsigned char, acknowledgement_bytes> ack{};
  put_word(ack.data(), 0, protocol_magic);
  put_word(ack.data(), 1, static_cast<std::uint32_t>(rank));
  // Rank 0 checks the acknowledgement; if it cannot be sent, rank 0 names this rank.
  static_cast<void>(write_all(connection.get(), ack.data(), ack.size(), deadline));
  unique_id_bytes id{};
  std::memcpy(id.data(), reply.data() + 8, id.size());
  return id;
}

unique_id_bytes exchange_unique_id_through_store(tcp_store& store, std::string const& key, int rank,
                                                 unique_id_bytes const& root_id,
                                                 std::chrono::milliseconds timeout) {
  GRAPHSTEP_EXPECTS(
      rank >= 0, "exchange_unique_id_through_store: rank " + std::to_string(rank) + " is negative");
  detail::expect_positive_timeout(timeout, "exchange_unique_id_through_store");
  if (rank == 0) {
    store.set(key, {root_id.begin(), root_id.end()});
    return root_id;
  }
  std::vector<std::uint8_t> value;
  try {
    value = store.get(key, timeout);
  } catch (nccl_error const& e) {
    fail("rendezvous: rank " + std::to_string(rank) +
         " did not receive NCCL's id from rank 0 through the store at " + store.address() + " (" +
         e.what() + "): rank 0 failed or was not started; see its log");
  }
  unique_id_bytes id{};
  if (value.size() != id.size()) {
    fail("rendezvous: the store at " + store.address() + " holds " + std::to_string(value.size()) +
         " bytes under '" + key + "', not an NCCL id of " + std::to_string(id.size()));
  }
  std::copy(value.begin(), value.end(), id.begin());
  return id;
}

std::string peer_watch_store_key(std::string const& id_key) {
  return id_key + "/peer_watch";
}

void publish_peer_watch(tcp_store& store, std::string const& id_key, int port) {
  std::string const meeting = store.local_host() + "|" + std::to_string(port);
  store.set(peer_watch_store_key(id_key), {meeting.begin(), meeting.end()});
}

peer_watch_meeting find_peer_watch(tcp_store& store, std::string const& id_key,
                                   std::chrono::milliseconds timeout) {
  std::string const key = peer_watch_store_key(id_key);
  std::vector<std::uint8_t> const value = store.get(key, timeout);
  std::string const meeting{value.begin(), value.end()};
  auto const bar = meeting.rfind('|');
  char* end = nullptr;
  long const port = bar == std::string::npos ? 0 : std::strtol(meeting.c_str() + bar + 1, &end, 10);
  if (bar == std::string::npos || bar == 0 || end == nullptr || *end != '\0' || port < 1 ||
      port > 65535) {
    fail("rendezvous: the store at " + store.address() + " holds '" + meeting + "' under '" + key +
         "', not rank 0's peer watch as host|port");
  }
  peer_watch_meeting found;
  found.host = meeting.substr(0, bar);
  found.port = static_cast<int>(port);
  return found;
}

std::string torchrun_store_key(launch_environment const& environment, int sequence) {
  return "graphstep/" + environment.run_id + "/" + std::to_string(environment.restart_count) +
         "/nccl_unique_id/" + std::to_string(sequence);
}

bootstrap_exchange exchange_unique_id(launch_environment const& environment,
                                      unique_id_bytes const& root_id,
                                      std::chrono::milliseconds timeout, bool with_peer_watch) {
  // Checked for one process too: the same program then fails alike when it is launched wide.
  detail::expect_positive_timeout(timeout,
                                  "exchange_unique_id (bootstrap_options::rendezvous_timeout)");
  bootstrap_exchange exchanged;
  if (environment.world_size == 1) {
    exchanged.id = root_id;
    return exchanged;
  }
  if (with_peer_watch) exchanged.watch.emplace();
  if (environment.bootstrap == bootstrap_kind::torchrun_store) {
    static std::atomic<int> exchanges{0};
    std::string const key = torchrun_store_key(environment, exchanges++);
    tcp_store store{environment.master_addr, environment.master_port, timeout};
    if (with_peer_watch && environment.rank == 0) {
      // Published before the id: a rank that has the id finds the watch too.
      publish_peer_watch(store, key, exchanged.watch->listener.emplace().port());
    }
    exchanged.id = exchange_unique_id_through_store(store, key, environment.rank, root_id, timeout);
    if (with_peer_watch && environment.rank != 0) {
      *exchanged.watch = find_peer_watch(store, key, timeout);
    }
    return exchanged;
  }
  if (environment.rank == 0) {
    rendezvous_server server{environment.master_port, environment.world_size,
                             environment.rendezvous_token};
    server.serve(root_id, timeout);
    if (with_peer_watch) exchanged.watch->listener.emplace(server.keep_listening());
    exchanged.id = root_id;
    return exchanged;
  }
  exchanged.id = rendezvous_join(environment.master_addr, environment.master_port, environment.rank,
                                 environment.world_size, timeout, environment.rendezvous_token);
  if (with_peer_watch) {
    exchanged.watch->host = environment.master_addr;
    exchanged.watch->port = environment.master_port;
  }
  return exchanged;
}

}  // namespace graphstep::nccl::detail
