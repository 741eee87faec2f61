#pragma once

/// @file nccl/detail/slurm.hpp
/// @brief What graphstep derives from the variables srun gives each task of a job step, when
/// the launcher's own (MASTER_ADDR, MASTER_PORT) are not set.
/// graphstep_core: plain C++, includes no CUDA header.

#include <string>

namespace graphstep::nccl::detail {

/// @brief The first host of a Slurm host list, as `scontrol show hostnames` would print it
/// first: "node[01-04,07],gpu5" gives "node01", "rack[1-2]-n[3,5]" gives "rack1-n3". Empty for
/// a list whose brackets do not close.
[[nodiscard]] std::string first_host(std::string const& host_list);

/// @brief The rendezvous port of a job step when MASTER_PORT is not set: 20000 plus the job and
/// step ids modulo 10000, the same on every task of the step and likely to differ between the
/// steps that share a node.
[[nodiscard]] int slurm_rendezvous_port(int job_id, int step_id) noexcept;

}  // namespace graphstep::nccl::detail
