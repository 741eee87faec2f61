#pragma once

/// @file graphstep.hpp
/// @brief Every public header of graphstep's CUDA library (`graphstep::graphstep`) in one
/// include; the collectives of `graphstep::nccl` are in <graphstep/nccl.hpp>. Left out: the fp64
/// reference math that tests and examples check kernels against (<graphstep/ops/reference.hpp>,
/// <graphstep/train/reference.hpp>), included by name where it is wanted.
///
/// One folder per component, and the folder is its namespace: `cuda` (streams, events,
/// devices, device memory), `memory` (the graph-private pool), `graphs` (graphs, capture and
/// why a capture broke, conditional nodes), `schedule` (capture shapes, graph cache, replay
/// scheduler, graphed callables), `ops` (fused Linear + bias + GELU, the transformer's ops),
/// `train` (optimizers, loss scaling, capture-safe randomness), `diagnostics` (why a replay
/// differs from the eager step). Errors, element types and their conversions are in the root
/// namespace, with `device_span`, a view of device memory.

#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device.hpp>
#include <graphstep/cuda/device_buffer.hpp>
#include <graphstep/cuda/event.hpp>
#include <graphstep/cuda/memory_resource.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/diagnostics/replay_divergence.hpp>
#include <graphstep/diagnostics/verify_replay.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/dtype_conversion.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_mode.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/capture_trace.hpp>
#include <graphstep/graphs/conditional.hpp>
#include <graphstep/graphs/conditional_support.hpp>
#include <graphstep/graphs/external_events.hpp>
#include <graphstep/graphs/graph.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/graphs/kernel_node.hpp>
#include <graphstep/graphs/kernel_node_tags.hpp>
#include <graphstep/graphs/lifecycle_options.hpp>
#include <graphstep/graphs/output_guard.hpp>
#include <graphstep/log.hpp>
#include <graphstep/memory/allocation_plan.hpp>
#include <graphstep/memory/host_readback.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <graphstep/memory/parameter_buffer.hpp>
#include <graphstep/memory/pool_capture.hpp>
#include <graphstep/memory/pool_statistics.hpp>
#include <graphstep/memory/pool_timeline.hpp>
#include <graphstep/memory/step_input.hpp>
#include <graphstep/ops/attention.hpp>
#include <graphstep/ops/attention_cudnn.hpp>
#include <graphstep/ops/attention_problem.hpp>
#include <graphstep/ops/cross_entropy.hpp>
#include <graphstep/ops/cross_entropy_problem.hpp>
#include <graphstep/ops/embedding.hpp>
#include <graphstep/ops/embedding_problem.hpp>
#include <graphstep/ops/gelu.hpp>
#include <graphstep/ops/gelu_problem.hpp>
#include <graphstep/ops/gemm_gelu.hpp>
#include <graphstep/ops/gemm_problem.hpp>
#include <graphstep/ops/layer_norm.hpp>
#include <graphstep/ops/layer_norm_problem.hpp>
#include <graphstep/parameter_layout.hpp>
#include <graphstep/schedule/capture_shapes.hpp>
#include <graphstep/schedule/capture_sizes.hpp>
#include <graphstep/schedule/graph_cache.hpp>
#include <graphstep/schedule/graphed_callable.hpp>
#include <graphstep/schedule/replay_scheduler.hpp>
#include <graphstep/schedule/step_plan.hpp>
#include <graphstep/tensor.hpp>
#include <graphstep/train/adam.hpp>
#include <graphstep/train/capture_safe_rng.hpp>
#include <graphstep/train/checkpoint.hpp>
#include <graphstep/train/device_checkpoint.hpp>
#include <graphstep/train/loss_scaler.hpp>
#include <graphstep/train/loss_scaler_options.hpp>
#include <graphstep/train/lr_schedule.hpp>
#include <graphstep/train/micro_batch_loop.hpp>
#include <graphstep/train/micro_batch_plan.hpp>
#include <graphstep/train/mixed_precision.hpp>
#include <graphstep/train/mixed_precision_adamw.hpp>
#include <graphstep/train/mse_loss.hpp>
#include <graphstep/train/multi_tensor_optimizer.hpp>
#include <graphstep/train/optimizer.hpp>
#include <graphstep/train/optimizer_options.hpp>
#include <graphstep/train/philox.hpp>
#include <graphstep/train/random_fill.hpp>
#include <graphstep/train/run_settings.hpp>
#include <graphstep/train/sgd.hpp>
#include <graphstep/version.hpp>
