// graphstep_core: plain C++, includes no CUDA header.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <graphstep/error.hpp>
#include <graphstep/nccl/launch_environment.hpp>
#include <limits>
#include <set>

#include "nccl/detail/device_choice.hpp"
#include "nccl/detail/slurm.hpp"

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

// The names under which one launcher publishes the rank layout.
struct rank_variables {
  char const* source;
  char const* rank;
  char const* world_size;
  char const* local_rank;
  char const* local_world_size;
};

constexpr rank_variables torchrun{"RANK/WORLD_SIZE", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                                  "LOCAL_WORLD_SIZE"};
constexpr rank_variables open_mpi{"OMPI_COMM_WORLD_*", "OMPI_COMM_WORLD_RANK",
                                  "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                                  "OMPI_COMM_WORLD_LOCAL_SIZE"};
constexpr rank_variables mpich{"PMI_*", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID",
                               "MPI_LOCALNRANKS"};

// Reads one launcher's layout into `env`; false when that launcher's variables are absent.
bool read_layout(environment_reader const& read, rank_variables const& names,
                 launch_environment& env) {
  auto const rank = read_int(read, names.rank);
  auto const world = read_int(read, names.world_size);
  GRAPHSTEP_EXPECTS(rank.has_value() == world.has_value(),
                    std::string{names.rank} + " and " + names.world_size +
                        " must be set together (only " + (rank ? names.rank : names.world_size) +
                        " is set): launch with torchrun or set both");
  if (!rank) return false;
  env.rank = *rank;
  env.world_size = *world;
  env.rank_source = names.source;
  GRAPHSTEP_EXPECTS(
      env.world_size >= 1,
      std::string{names.world_size} + "=" + std::to_string(env.world_size) + " must be at least 1");
  GRAPHSTEP_EXPECTS(env.rank >= 0 && env.rank < env.world_size,
                    std::string{names.rank} + "=" + std::to_string(env.rank) + " must lie in [0, " +
                        names.world_size + "=" + std::to_string(env.world_size) + ")");
  env.local_rank = read_int(read, names.local_rank).value_or(env.rank);
  env.local_world_size = read_int(read, names.local_world_size).value_or(env.world_size);
  GRAPHSTEP_EXPECTS(env.local_world_size >= 1 && env.local_world_size <= env.world_size,
                    std::string{names.local_world_size} + "=" +
                        std::to_string(env.local_world_size) + " must lie in [1, " +
                        names.world_size + "=" + std::to_string(env.world_size) + "]");
  GRAPHSTEP_EXPECTS(env.local_rank >= 0 && env.local_rank < env.local_world_size,
                    std::string{names.local_rank} + "=" + std::to_string(env.local_rank) +
                        " must lie in [0, " + names.local_world_size + "=" +
                        std::to_string(env.local_world_size) + ")");
  return true;
}

// The count of tasks on node `node` of a Slurm tasks-per-node list ("2(x3),1": three nodes of
// two tasks, then one of one). A list that does not read, or that ends before `node`, is refused
// by name: taken for "every task on this node" it would give ranks the wrong local GPU.
int tasks_on_node(std::string const& list, int node) {
  auto malformed = [&](std::string const& why) {
    return "SLURM_STEP_TASKS_PER_NODE='" + list + "' " + why +
           ": srun writes it as counts per node, a run of equal nodes as <tasks>(x<nodes>), "
           "e.g. '2(x3),1'";
  };
  std::optional<int> found;
  int first = 0;  // the first node the current item covers
  for (std::size_t at = 0; at <= list.size();) {
    std::size_t const end = std::min(list.find(',', at), list.size());
    std::string const item = list.substr(at, end - at);
    char* rest = nullptr;
    long const tasks = std::strtol(item.c_str(), &rest, 10);
    long repeat = 1;
    std::string const after{rest};
    if (after.rfind("(x", 0) == 0) {
      char* close = nullptr;
      repeat = std::strtol(after.c_str() + 2, &close, 10);
      GRAPHSTEP_EXPECTS(close != after.c_str() + 2 && std::string{close} == ")",
                        malformed("has '" + item + "', whose repeat count does not read"));
    } else {
      GRAPHSTEP_EXPECTS(rest != item.c_str() && after.empty(),
                        malformed("has '" + item + "', which is no task count"));
    }
    GRAPHSTEP_EXPECTS(tasks >= 1 && tasks <= std::numeric_limits<int>::max() && repeat >= 1 &&
                          repeat <= std::numeric_limits<int>::max() - first,
                      malformed("has '" + item + "': counts are at least 1"));
    if (!found && node < first + repeat) found = static_cast<int>(tasks);
    first += static_cast<int>(repeat);
    at = end + 1;
  }
  GRAPHSTEP_EXPECTS(found.has_value(),
                    malformed("covers " + std::to_string(first) +
                              " node(s), not SLURM_NODEID=" + std::to_string(node)));
  return *found;
}

// Reads srun's layout of a multi-task step into `env`; false for a batch script or one task.
bool read_slurm_layout(environment_reader const& read, launch_environment& env) {
  int const step_tasks = read_int(read, "SLURM_STEP_NUM_TASKS").value_or(1);
  if (step_tasks <= 1) return false;
  auto const rank = read_int(read, "SLURM_PROCID");
  GRAPHSTEP_EXPECTS(rank.has_value(),
                    "this process is one of SLURM_STEP_NUM_TASKS=" + std::to_string(step_tasks) +
                        " tasks started by srun, but SLURM_PROCID is not set: start it with "
                        "srun, or set RANK and WORLD_SIZE");
  env.rank = *rank;
  env.world_size = step_tasks;
  env.rank_source = "SLURM_PROCID/SLURM_STEP_NUM_TASKS";
  GRAPHSTEP_EXPECTS(env.rank >= 0 && env.rank < env.world_size,
                    "SLURM_PROCID=" + std::to_string(env.rank) +
                        " must lie in [0, SLURM_STEP_NUM_TASKS=" + std::to_string(step_tasks) +
                        ")");
  env.local_rank = read_int(read, "SLURM_LOCALID").value_or(0);
  auto const per_node = read("SLURM_STEP_TASKS_PER_NODE");
  auto const node = read_int(read, "SLURM_NODEID");
  std::optional<int> const on_this_node =
      per_node && node ? std::optional<int>{tasks_on_node(*per_node, *node)} : std::nullopt;
  env.local_world_size = on_this_node.value_or(env.world_size);
  GRAPHSTEP_EXPECTS(env.local_world_size <= env.world_size && env.local_rank >= 0 &&
                        env.local_rank < env.local_world_size,
                    "SLURM_LOCALID=" + std::to_string(env.local_rank) + " must lie in [0, " +
                        std::to_string(env.local_world_size) +
                        "), the tasks srun started on this node (SLURM_STEP_TASKS_PER_NODE)");
  return true;
}

}  // namespace

char const* name(bootstrap_kind kind) noexcept {
  switch (kind) {
    case bootstrap_kind::rendezvous: return "rendezvous";
    case bootstrap_kind::torchrun_store: return "torchrun_store";
    case bootstrap_kind::nccl_comm_id: return "nccl_comm_id";
    case bootstrap_kind::mpi: return "mpi";
    case bootstrap_kind::single_process: return "single_process";
  }
  return "unknown";
}

environment_reader process_environment() {
  return [](char const* name) -> std::optional<std::string> {
    char const* value = std::getenv(name);
    if (value == nullptr) return std::nullopt;
    return std::string{value};
  };
}

bool built_with_mpi() noexcept {
#if defined(GRAPHSTEP_WITH_MPI)
  return true;
#else
  return false;
#endif
}

namespace detail {

std::string first_host(std::string const& host_list) {
  std::string host;
  int depth = 0;
  bool skipping = false;  // inside brackets, past the first number or range's start
  for (char const c : host_list) {
    if (c == '[') {
      ++depth;
      skipping = false;
    } else if (c == ']') {
      --depth;
      skipping = false;
    } else if (depth == 0 && c == ',') {
      break;  // the next host
    } else if (depth > 0 && (c == '-' || c == ',')) {
      skipping = true;  // the rest of the range or list
    } else if (!skipping) {
      host += c;
    }
  }
  return depth == 0 ? host : std::string{};
}

int slurm_rendezvous_port(int job_id, int step_id) noexcept {
  return 20000 +
         static_cast<int>((static_cast<long long>(job_id) + step_id) % 10000 + 10000) % 10000;
}

bool ranks_may_share_a_gpu(environment_reader const& read) {
  // NCCL reads its integer parameters with strtoll; any nonzero value switches this one on.
  return read_int(read, "NCCL_MULTI_RANK_GPU_ENABLE").value_or(0) != 0;
}

}  // namespace detail

launch_environment read_launch_environment(environment_reader const& read, bool mpi_available) {
  launch_environment env;
  env.ranks_may_share_a_gpu = detail::ranks_may_share_a_gpu(read);
  auto const comm_id = read("NCCL_COMM_ID");
  bool const has_comm_id = comm_id && !comm_id->empty();
  bool const from_torchrun = read_layout(read, torchrun, env);
  bool const from_mpirun =
      !from_torchrun && (read_layout(read, open_mpi, env) || read_layout(read, mpich, env));
  // srun sets SLURM_STEP_NUM_TASKS and SLURM_PROCID in each task of a job step (a batch
  // script, a single task, has none or 1).
  bool const from_srun = !from_torchrun && !from_mpirun && read_slurm_layout(read, env);
  if (has_comm_id) {
    env.bootstrap = bootstrap_kind::nccl_comm_id;
    return env;
  }
  if (from_mpirun) {
    if (env.world_size == 1) {
      env.bootstrap = bootstrap_kind::single_process;
      return env;
    }
    GRAPHSTEP_EXPECTS(mpi_available,
                      "this process was started by mpirun (" + env.rank_source +
                          " is set) but graphstep was built without MPI: build it where MPI "
                          "is installed (GRAPHSTEP_WITH_MPI=AUTO, the default, finds it), or set "
                          "NCCL_COMM_ID=host:port on every "
                          "rank, or map the ranks to RANK, WORLD_SIZE, MASTER_ADDR and "
                          "MASTER_PORT");
    env.bootstrap = bootstrap_kind::mpi;
    return env;
  }
  if (!from_torchrun && !from_srun) {
    env.bootstrap = bootstrap_kind::single_process;
    return env;
  }
  env.bootstrap = bootstrap_kind::rendezvous;
  auto addr = read("MASTER_ADDR");
  auto port = read_int(read, "MASTER_PORT");
  env.rendezvous_token = read("GRAPHSTEP_RENDEZVOUS_TOKEN").value_or("");
  if (from_srun) {
    // Rank 0 runs on the step's first node under srun's block and cyclic distributions.
    if (!addr || addr->empty()) {
      auto const nodes =
          read("SLURM_STEP_NODELIST") ? read("SLURM_STEP_NODELIST") : read("SLURM_JOB_NODELIST");
      GRAPHSTEP_EXPECTS(nodes && !detail::first_host(*nodes).empty(),
                        "srun started this task, but neither MASTER_ADDR nor a node list "
                        "(SLURM_STEP_NODELIST, SLURM_JOB_NODELIST) names rank 0's host: set "
                        "MASTER_ADDR");
      addr = detail::first_host(*nodes);
    }
    auto const job = read_int(read, "SLURM_JOB_ID");
    int const step = read_int(read, "SLURM_STEP_ID").value_or(0);
    if (!port) {
      GRAPHSTEP_EXPECTS(job.has_value(),
                        "srun started this task, but neither MASTER_PORT nor SLURM_JOB_ID is set "
                        "to choose the rendezvous port from: set MASTER_PORT");
      port = detail::slurm_rendezvous_port(*job, step);
    }
    // Keeps the tasks of other jobs and steps, which may pick the same port, out.
    if (env.rendezvous_token.empty() && job) {
      env.rendezvous_token = "slurm/" + std::to_string(*job) + "." + std::to_string(step);
    }
  }
  if (env.world_size > 1) {
    GRAPHSTEP_EXPECTS(addr && !addr->empty(),
                      "MASTER_ADDR is not set: set it to the host of rank 0 (or set "
                      "NCCL_COMM_ID=host:port)");
    GRAPHSTEP_EXPECTS(port.has_value(),
                      "MASTER_PORT is not set: set it to a free TCP port on "
                      "the host of rank 0");
  }
  if (addr && !addr->empty()) env.master_addr = *addr;
  if (port) env.master_port = *port;
  GRAPHSTEP_EXPECTS(env.master_port >= 1 && env.master_port <= 65535,
                    "MASTER_PORT=" + std::to_string(env.master_port) + " must lie in 1..65535");
  // torchrun's agent serves a c10d store on MASTER_PORT and tells its workers so, as
  // torch.distributed reads it (rendezvous.py: the variable equals str(True)).
  if (read("TORCHELASTIC_USE_AGENT_STORE") == std::optional<std::string>{"True"}) {
    env.bootstrap = bootstrap_kind::torchrun_store;
    auto const run_id = read("TORCHELASTIC_RUN_ID");
    if (run_id && !run_id->empty()) env.run_id = *run_id;
    env.restart_count = read_int(read, "TORCHELASTIC_RESTART_COUNT").value_or(0);
    GRAPHSTEP_EXPECTS(env.restart_count >= 0,
                      "TORCHELASTIC_RESTART_COUNT=" + std::to_string(env.restart_count) +
                          " must not be negative");
  }
  return env;
}

namespace detail {

int local_device(std::string const& who, int local_rank, int visible_devices,
                 bool ranks_may_share_a_gpu, int nccl_version) {
  GRAPHSTEP_EXPECTS(visible_devices >= 1, who + " but no GPU is visible on this host");
  if (local_rank < visible_devices) return local_rank;
  std::string const too_many =
      who + " but only " + std::to_string(visible_devices) + " GPU(s) are visible on this host: ";
  GRAPHSTEP_EXPECTS(ranks_may_share_a_gpu,
                    too_many +
                        "start at most one rank per visible GPU on each host and check "
                        "CUDA_VISIBLE_DEVICES, or set NCCL_MULTI_RANK_GPU_ENABLE=1 (NCCL 2.30 "
                        "or later) to run several ranks on one GPU");
  // NCCL_VERSION_CODE since 2.9: major * 10000 + minor * 100 + patch.
  GRAPHSTEP_EXPECTS(nccl_version >= first_nccl_version_with_multi_rank_gpus,
                    too_many + "NCCL_MULTI_RANK_GPU_ENABLE is set, but the NCCL loaded (" +
                        std::to_string(nccl_version / 10000) + "." +
                        std::to_string(nccl_version / 100 % 100) + "." +
                        std::to_string(nccl_version % 100) +
                        ") refuses two ranks on one GPU: load NCCL 2.30 or later "
                        "(LD_LIBRARY_PATH), or start at most one rank per visible GPU");
  return local_rank % visible_devices;
}

void check_local_device_list(std::vector<int> const& devices) {
  GRAPHSTEP_EXPECTS(!devices.empty(), "nccl_comm::for_local_devices: no device was listed");
  std::set<int> listed;
  for (int const device : devices) {
    std::string const named = "nccl_comm::for_local_devices: device " + std::to_string(device);
    GRAPHSTEP_EXPECTS(device >= 0, named + " is not a device id");
    GRAPHSTEP_EXPECTS(listed.insert(device).second,
                      named +
                          " is listed twice; NCCL runs one rank per GPU and refuses a "
                          "duplicate: list each device once");
  }
}

}  // namespace detail

std::string describe(launch_environment const& env) {
  std::string text = "rank " + std::to_string(env.rank) + " of " + std::to_string(env.world_size) +
                     " (local " + std::to_string(env.local_rank) + " of " +
                     std::to_string(env.local_world_size) + "), ";
  switch (env.bootstrap) {
    case bootstrap_kind::rendezvous:
      return text + "rendezvous at " + env.master_addr + ":" + std::to_string(env.master_port);
    case bootstrap_kind::torchrun_store:
      return text + "through torchrun's store at " + env.master_addr + ":" +
             std::to_string(env.master_port) + " (run " + env.run_id + ", restart " +
             std::to_string(env.restart_count) + ")";
    case bootstrap_kind::nccl_comm_id:
      return text + "bootstrap through NCCL_COMM_ID (ranks from " + env.rank_source + ")";
    case bootstrap_kind::mpi:
      return text + "bootstrap through MPI (ranks from " + env.rank_source + ")";
    case bootstrap_kind::single_process: return text + "single process";
  }
  return text;
}

}  // namespace graphstep::nccl
