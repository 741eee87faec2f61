#pragma once

// What the data-parallel examples share: whether the launcher started several ranks, read and
// checked as graphstep reads it (torchrun's RANK/WORLD_SIZE, mpirun's own variables,
// NCCL_COMM_ID), so a malformed variable is an error and not one process training alone; and
// MPI for the life of the program when mpirun started it (graphstep's MPI bootstrap, in builds
// with MPI, needs MPI initialized). Only then: elsewhere MPI is never started.

#include <graphstep/nccl.hpp>

namespace examples {

class data_parallel_launch {
 public:
  /// @throws graphstep::usage_error (a malformed launcher variable)
  data_parallel_launch(int& argc, char**& argv)
      : environment_{
            graphstep::nccl::read_launch_environment(graphstep::nccl::process_environment())} {
#if defined(GRAPHSTEP_WITH_MPI)
    if (environment_.bootstrap == graphstep::nccl::bootstrap_kind::mpi) {
      MPI_Init(&argc, &argv);
      mpi_ = true;
    }
#else
    static_cast<void>(argc);
    static_cast<void>(argv);
#endif
  }
  data_parallel_launch(data_parallel_launch const&) = delete;
  data_parallel_launch& operator=(data_parallel_launch const&) = delete;
  data_parallel_launch(data_parallel_launch&&) = delete;
  data_parallel_launch& operator=(data_parallel_launch&&) = delete;
  ~data_parallel_launch() {
#if defined(GRAPHSTEP_WITH_MPI)
    if (mpi_) MPI_Finalize();
#endif
  }

  /// True when the launcher started more than one rank: train data parallel.
  [[nodiscard]] bool several_ranks() const {
    return environment_.world_size > 1;
  }
  /// What was read: graphstep::nccl::describe() says it in a line.
  [[nodiscard]] graphstep::nccl::launch_environment const& environment() const {
    return environment_;
  }

 private:
  graphstep::nccl::launch_environment environment_;
  bool mpi_{false};
};

}  // namespace examples
