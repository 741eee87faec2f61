#include <cuda_runtime_api.h>

#include <cstdint>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device.hpp>
#include <graphstep/error.hpp>
#include <graphstep/nccl/bootstrap.hpp>
#include <graphstep/nccl/launch_environment.hpp>
#include <graphstep/nccl/mpi_bootstrap.hpp>
#include <utility>

#include "detail/comm_state.hpp"
#include "nccl/detail/device_choice.hpp"
#include "nccl/detail/peer_watch.hpp"
#include "nccl/detail/rendezvous.hpp"

namespace graphstep::nccl {

// The public default repeats the rendezvous's, which its header (internal) cannot give it.
static_assert(bootstrap_options{}.rendezvous_timeout == detail::default_rendezvous_timeout,
              "bootstrap_options::rendezvous_timeout must default to the rendezvous's timeout");

namespace {

// Every rank has joined the communicator, so every rank is alive to meet here.
void watch_peers(nccl_comm const& comm, launch_environment const& env,
                 detail::bootstrap_exchange& exchanged, std::chrono::milliseconds timeout) {
  auto& state = detail::comm_access::state(comm.view());
  // The job's own id keys the watch: another job's ranks cannot join it.
  std::uint64_t const job_key = detail::job_token_hash({exchanged.id.begin(), exchanged.id.end()});
  detail::peer_watch_meeting& meeting = *exchanged.watch;
  state.watch_peers(
      env.rank == 0
          ? detail::peer_watch::serve(std::move(*meeting.listener), env.world_size, job_key,
                                      timeout, state.abort_when_a_peer_is_lost())
          : detail::peer_watch::join(meeting.host, meeting.port, env.rank, env.world_size, job_key,
                                     timeout, state.abort_when_a_peer_is_lost()));
}

}  // namespace

nccl_comm communicator_from_environment(bootstrap_options const& options) {
  launch_environment const env = read_launch_environment(process_environment());
  nccl_comm_options const comm_options{options.slot, options.init_timeout};
  // Under mpirun, communicator_from_mpi checks the device itself, where a rank without one
  // fails every rank; checked here, that rank would leave the others waiting in MPI_Bcast.
  if (env.bootstrap == bootstrap_kind::mpi) {
#if defined(GRAPHSTEP_WITH_MPI)
    int initialized = 0;
    MPI_Initialized(&initialized);
    GRAPHSTEP_EXPECTS(initialized != 0,
                      "communicator_from_environment: this process was started by mpirun; call "
                      "MPI_Init before creating the communicator");
    return communicator_from_mpi(MPI_COMM_WORLD, comm_options);
#else
    throw usage_error{"communicator_from_environment: the MPI bootstrap is not built in"};
#endif
  }
  cuda::require_device();
  int const device = detail::local_device("nccl_comm: LOCAL_RANK=" + std::to_string(env.local_rank),
                                          env.local_rank, cuda::device_count(),
                                          env.ranks_may_share_a_gpu, loaded_nccl_version());
  GRAPHSTEP_CUDA_TRY(cudaSetDevice(device));
  switch (env.bootstrap) {
    case bootstrap_kind::single_process: {
      ncclComm_t handle = nullptr;
      GRAPHSTEP_NCCL_TRY(ncclCommInitAll(&handle, 1, &device));
      return detail::comm_access::comm(detail::comm_state::create(handle, options.slot));
    }
    case bootstrap_kind::nccl_comm_id:
      // With NCCL_COMM_ID set, every rank's ncclGetUniqueId returns the same id.
      return nccl_comm::from_unique_id(nccl_comm::new_unique_id(), env.rank, env.world_size,
                                       comm_options);
    case bootstrap_kind::rendezvous:
    case bootstrap_kind::torchrun_store: {
      unique_id_bytes root_id{};
      if (env.rank == 0) root_id = nccl_comm::new_unique_id();
      detail::bootstrap_exchange exchanged =
          detail::exchange_unique_id(env, root_id, options.rendezvous_timeout, options.watch_peers);
      nccl_comm comm =
          nccl_comm::from_unique_id(exchanged.id, env.rank, env.world_size, comm_options);
      if (exchanged.watch) watch_peers(comm, env, exchanged, options.rendezvous_timeout);
      return comm;
    }
    case bootstrap_kind::mpi: break;
  }
  throw usage_error{"communicator_from_environment: unknown bootstrap"};
}

}  // namespace graphstep::nccl
