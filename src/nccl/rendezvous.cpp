#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <graphstep/error.hpp>
#include <graphstep/nccl/rendezvous.hpp>
#include <map>
#include <utility>
#include <vector>

#include "detail/socket.hpp"

namespace graphstep::nccl {
namespace {

using clock = detail::socket_clock;
using detail::bound_port;
using detail::connect_before;
using detail::listen_on;
using detail::read_exactly;
using detail::socket_fd;
using detail::wait_for;
using detail::write_all;

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

[[noreturn]] void fail(std::string const& what) {
  throw nccl_error{system_error, what};
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

}  // namespace

rendezvous_server::rendezvous_server(int port, int world_size)
    : port_{port}, world_size_{world_size} {
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
  std::string const where = address + ":" + std::to_string(port);
  std::string last_error;
  // Rank 0 may start later than this rank: connect_before retries until the deadline.
  socket_fd const connection = connect_before(address, port, deadline, last_error);
  if (!connection.valid()) {
    fail("rendezvous: rank " + std::to_string(rank) + " could not reach rank 0 at " + where +
         " within " + std::to_string(timeout.count()) + " ms (" + last_error +
         "). Check MASTER_ADDR and MASTER_PORT, and that rank 0 is running");
  }
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

unique_id_bytes exchange_unique_id_through_store(tcp_store& store, std::string const& key, int rank,
                                                 unique_id_bytes const& root_id,
                                                 std::chrono::milliseconds timeout) {
  GRAPHSTEP_EXPECTS(
      rank >= 0, "exchange_unique_id_through_store: rank " + std::to_string(rank) + " is negative");
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

std::string torchrun_store_key(launch_environment const& environment, int sequence) {
  return "graphstep/" + environment.run_id + "/" + std::to_string(environment.restart_count) +
         "/nccl_unique_id/" + std::to_string(sequence);
}

unique_id_bytes exchange_unique_id(launch_environment const& environment,
                                   unique_id_bytes const& root_id,
                                   std::chrono::milliseconds timeout) {
  if (environment.world_size == 1) return root_id;
  if (environment.bootstrap == bootstrap_kind::torchrun_store) {
    static std::atomic<int> exchanges{0};
    std::string const key = torchrun_store_key(environment, exchanges++);
    tcp_store store{environment.master_addr, environment.master_port, timeout};
    return exchange_unique_id_through_store(store, key, environment.rank, root_id, timeout);
  }
  if (environment.rank == 0) {
    rendezvous_server server{environment.master_port, environment.world_size};
    server.serve(root_id, timeout);
    return root_id;
  }
  return rendezvous_join(environment.master_addr, environment.master_port, environment.rank,
                         environment.world_size, timeout);
}

}  // namespace graphstep::nccl
