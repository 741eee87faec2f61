#pragma once

/// @file nccl.hpp
/// @brief Everything of graphstep::nccl in one include.

#include <graphstep/nccl/bootstrap.hpp>
#include <graphstep/nccl/bucket_plan.hpp>
#include <graphstep/nccl/bucketed_all_reduce.hpp>
#include <graphstep/nccl/collective_log.hpp>
#include <graphstep/nccl/collectives.hpp>
#include <graphstep/nccl/launch_environment.hpp>
#include <graphstep/nccl/mpi_bootstrap.hpp>
#include <graphstep/nccl/nccl_comm.hpp>
#include <graphstep/nccl/nccl_comm_view.hpp>
#include <graphstep/nccl/step_deadline.hpp>
#include <graphstep/nccl/step_guard.hpp>
#include <graphstep/nccl/unique_id.hpp>
#include <graphstep/nccl/watchdog.hpp>
