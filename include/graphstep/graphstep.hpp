#pragma once

/// @file graphstep.hpp
/// @brief Everything of graphstep's core library in one include.

#include <graphstep/buffer.hpp>
#include <graphstep/capture_scope.hpp>
#include <graphstep/conditional.hpp>
#include <graphstep/device.hpp>
#include <graphstep/device_guard.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/event.hpp>
#include <graphstep/graph.hpp>
#include <graphstep/graphed.hpp>
#include <graphstep/memory/allocation_plan.hpp>
#include <graphstep/memory/block_allocator.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <graphstep/ops/gelu_kernels.hpp>
#include <graphstep/ops/gemm_gelu.hpp>
#include <graphstep/ops/gemm_problem.hpp>
#include <graphstep/rng.hpp>
#include <graphstep/stream.hpp>
#include <graphstep/stream_view.hpp>
#include <graphstep/timed_event.hpp>
#include <graphstep/train/lr_schedule.hpp>
#include <graphstep/train/mse_loss.hpp>
#include <graphstep/train/optimizer.hpp>
