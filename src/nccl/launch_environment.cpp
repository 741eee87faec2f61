#include <graphstep/error.hpp>
#include <graphstep/nccl/launch_environment.hpp>

#include <cerrno>
#include <cstdlib>
#include <limits>

namespace graphstep::nccl {
namespace {

std::optional<int> read_int(environment_reader const& read, char const* name) {
  auto const text = read(name);
  if (!text || text->empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  long const value = std::strtol(text->c_str(), &end, 10);
  GRAPHSTEP_EXPECTS(errno == 0 && end != nullptr && *end == '\0' &&
                        value >= std::numeric_limits<int>::min() &&
                        value <= std::numeric_limits<int>::max(),
                    std::string{name} + "='" + *text + "' is not an integer");
  return static_cast<int>(value);
}

}  // namespace

environment_reader process_environment() {
  return [](char const* name) -> std::optional<std::string> {
    char const* value = std::getenv(name);
    if (value == nullptr) return std::nullopt;
    return std::string{value};
  };
}

launch_environment read_launch_environment(environment_reader const& read) {
  launch_environment env;
  auto const rank = read_int(read, "RANK");
  auto const world = read_int(read, "WORLD_SIZE");
  auto const comm_id = read("NCCL_COMM_ID");
  bool const has_comm_id = comm_id && !comm_id->empty();
  GRAPHSTEP_EXPECTS(rank.has_value() == world.has_value(),
                    std::string{"RANK and WORLD_SIZE must be set together (only "} +
                        (rank ? "RANK" : "WORLD_SIZE") +
                        " is set): launch with torchrun or set both");
  if (!rank) {
    env.bootstrap = has_comm_id ? bootstrap_kind::nccl_comm_id : bootstrap_kind::single_process;
    return env;
  }
  env.rank = *rank;
  env.world_size = *world;
  GRAPHSTEP_EXPECTS(env.world_size >= 1,
                    "WORLD_SIZE=" + std::to_string(env.world_size) + " must be at least 1");
  GRAPHSTEP_EXPECTS(env.rank >= 0 && env.rank < env.world_size,
                    "RANK=" + std::to_string(env.rank) + " must lie in [0, WORLD_SIZE=" +
                        std::to_string(env.world_size) + ")");
  env.local_rank = read_int(read, "LOCAL_RANK").value_or(env.rank);
  env.local_world_size = read_int(read, "LOCAL_WORLD_SIZE").value_or(env.world_size);
  GRAPHSTEP_EXPECTS(env.local_world_size >= 1 && env.local_rank >= 0 &&
                        env.local_rank < env.local_world_size,
                    "LOCAL_RANK=" + std::to_string(env.local_rank) +
                        " must lie in [0, LOCAL_WORLD_SIZE=" +
                        std::to_string(env.local_world_size) + ")");
  if (has_comm_id) {
    env.bootstrap = bootstrap_kind::nccl_comm_id;
    return env;
  }
  env.bootstrap = bootstrap_kind::rendezvous;
  auto const addr = read("MASTER_ADDR");
  auto const port = read_int(read, "MASTER_PORT");
  if (env.world_size > 1) {
    GRAPHSTEP_EXPECTS(addr && !addr->empty(),
                      "MASTER_ADDR is not set: set it to the host of rank 0 (or set "
                      "NCCL_COMM_ID=host:port)");
    GRAPHSTEP_EXPECTS(port.has_value(), "MASTER_PORT is not set: set it to a free TCP port on "
                                        "the host of rank 0");
  }
  if (addr && !addr->empty()) env.master_addr = *addr;
  if (port) env.master_port = *port;
  GRAPHSTEP_EXPECTS(env.master_port >= 1 && env.master_port <= 65535,
                    "MASTER_PORT=" + std::to_string(env.master_port) +
                        " must lie in 1..65535");
  return env;
}

std::string describe(launch_environment const& env) {
  std::string text = "rank " + std::to_string(env.rank) + " of " +
                     std::to_string(env.world_size) + " (local " +
                     std::to_string(env.local_rank) + " of " +
                     std::to_string(env.local_world_size) + "), ";
  switch (env.bootstrap) {
    case bootstrap_kind::rendezvous:
      return text + "rendezvous at " + env.master_addr + ":" + std::to_string(env.master_port);
    case bootstrap_kind::nccl_comm_id: return text + "bootstrap through NCCL_COMM_ID";
    case bootstrap_kind::single_process: return text + "single process";
  }
  return text;
}

}  // namespace graphstep::nccl
