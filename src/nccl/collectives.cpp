#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device_buffer.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/nccl/collectives.hpp>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "detail/comm_state.hpp"
#include "detail/span_checks.hpp"
#include "nccl/detail/collective_log.hpp"

namespace graphstep::nccl {
namespace {

ncclDataType_t to_nccl(dtype type) {
  switch (type) {
    case dtype::float32: return ncclFloat32;
    case dtype::float16: return ncclFloat16;
    case dtype::bfloat16: return ncclBfloat16;
    case dtype::int32: return ncclInt32;
    case dtype::uint8: return ncclUint8;
  }
  return ncclFloat32;
}

ncclRedOp_t to_nccl(reduce_op op) {
  switch (op) {
    case reduce_op::sum: return ncclSum;
    case reduce_op::avg: return ncclAvg;
    case reduce_op::max: return ncclMax;
    case reduce_op::min: return ncclMin;
  }
  return ncclSum;
}

// `operand` is "the send buffer" or "the recv buffer".
std::size_t elements(device_span const& b, char const* what, char const* operand) {
  graphstep::detail::expect_valid_span(what, operand, b, graphstep::detail::empty_span::refused);
  return b.count();
}

// Checks the communicator and the buffers, logs the collective when it is being captured, and
// enqueues it while holding the communicator's enqueue lock (so a watchdog thread cannot abort
// the communicator in the middle of the call).
template <typename Call>
void enqueue(collective_record record, device_span const& send, device_span const& recv,
             nccl_comm_view const& comm, cuda::stream_view stream, char const* what, Call&& call) {
  auto& state = detail::comm_access::state(comm);
  state.throw_if_aborted(what);
  GRAPHSTEP_EXPECTS(
      send.type() == recv.type(),
      std::string{what} + ": send is " + name(send.type()) + " but recv is " + name(recv.type()));
  record.slot = state.slot();
  bool const capturing = stream.is_capturing();
  if (capturing) {
    GRAPHSTEP_EXPECTS(state.warmed_up(record.kind),
                      std::string{what} +
                          " is being captured before it ever ran on this "
                          "communicator: run it once eagerly first, or call "
                          "nccl::warm_up (NCCL connects lazily, which a capture "
                          "cannot record). A view made from a raw ncclComm_t "
                          "starts afresh when no other view of it is alive: keep one");
  }
  state.enqueue(what, what, std::forward<Call>(call));
  if (capturing) {
    // Tagged with its capture, so that a capture graphstep discards takes its records along.
    graphs::capture_ref const capture = graphs::capture_ref::of(stream);
    // One rank's collective is a copy (ncclLaunchOneRank): only several ranks wait for peers.
    if (comm.size() > 1) capture.note_waits_for_other_processes();
    state.captured(record, capture);
  } else {
    state.ran_eagerly(record.kind);
  }
}

}  // namespace

void all_reduce(device_span send, device_span recv, reduce_op op, nccl_comm_view const& comm,
                cuda::stream_view stream) {
  std::size_t const count = elements(send, "all_reduce", "the send buffer");
  GRAPHSTEP_EXPECTS(elements(recv, "all_reduce", "the recv buffer") == count,
                    "all_reduce: send holds " + std::to_string(count) + " elements but recv " +
                        std::to_string(recv.count()) + ": they must hold the same number");
  enqueue({collective_kind::all_reduce, static_cast<int>(send.type()), count, op, -1, 0}, send,
          recv, comm, stream, "all_reduce", [&](ncclComm_t handle) {
            return ncclAllReduce(send.data(), recv.data(), count, to_nccl(send.type()), to_nccl(op),
                                 handle, stream.get());
          });
}

void reduce_scatter(device_span send, device_span recv, reduce_op op, nccl_comm_view const& comm,
                    cuda::stream_view stream) {
  std::size_t const recv_count = elements(recv, "reduce_scatter", "the recv buffer");
  GRAPHSTEP_EXPECTS(elements(send, "reduce_scatter", "the send buffer") ==
                        recv_count * static_cast<std::size_t>(comm.size()),
                    "reduce_scatter: send must hold world size (" + std::to_string(comm.size()) +
                        ") times the elements of recv (" + std::to_string(recv_count) + ")");
  enqueue({collective_kind::reduce_scatter, static_cast<int>(send.type()), recv_count, op, -1, 0},
          send, recv, comm, stream, "reduce_scatter", [&](ncclComm_t handle) {
            return ncclReduceScatter(send.data(), recv.data(), recv_count, to_nccl(send.type()),
                                     to_nccl(op), handle, stream.get());
          });
}

void all_gather(device_span send, device_span recv, nccl_comm_view const& comm,
                cuda::stream_view stream) {
  std::size_t const send_count = elements(send, "all_gather", "the send buffer");
  GRAPHSTEP_EXPECTS(elements(recv, "all_gather", "the recv buffer") ==
                        send_count * static_cast<std::size_t>(comm.size()),
                    "all_gather: recv must hold world size (" + std::to_string(comm.size()) +
                        ") times the elements of send (" + std::to_string(send_count) + ")");
  enqueue({collective_kind::all_gather, static_cast<int>(send.type()), send_count, reduce_op::sum,
           -1, 0},
          send, recv, comm, stream, "all_gather", [&](ncclComm_t handle) {
            return ncclAllGather(send.data(), recv.data(), send_count, to_nccl(send.type()), handle,
                                 stream.get());
          });
}

void broadcast(device_span send, device_span recv, int root, nccl_comm_view const& comm,
               cuda::stream_view stream) {
  GRAPHSTEP_EXPECTS(root >= 0 && root < comm.size(), "broadcast: root " + std::to_string(root) +
                                                         " is not a rank of a world of " +
                                                         std::to_string(comm.size()));
  std::size_t const count = elements(recv, "broadcast", "the recv buffer");
  GRAPHSTEP_EXPECTS(elements(send, "broadcast", "the send buffer") == count,
                    "broadcast: send and recv must hold the same number of elements");
  enqueue(
      {collective_kind::broadcast, static_cast<int>(send.type()), count, reduce_op::sum, root, 0},
      send, recv, comm, stream, "broadcast", [&](ncclComm_t handle) {
        return ncclBroadcast(send.data(), recv.data(), count, to_nccl(send.type()), root, handle,
                             stream.get());
      });
}

void warm_up(nccl_comm_view const& comm, cuda::stream_view stream) {
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    "nccl::warm_up runs collectives eagerly: call it before the capture");
  detail::comm_access::state(comm).throw_if_aborted("nccl::warm_up");
  auto const ranks = static_cast<std::size_t>(comm.size());
  // Freed on `stream`, after the collectives, even when one of them throws.
  cuda::device_buffer const scratch{2 * ranks * sizeof(float), stream};
  auto* one = static_cast<float*>(scratch.data());  // 1 element, then `ranks` elements
  auto* many = one + ranks;
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(one, 0, 2 * ranks * sizeof(float), stream.get()));
  device_span const single{one, dtype::float32, 1};
  device_span const per_rank{many, dtype::float32, ranks};
  all_reduce(single, single, reduce_op::sum, comm, stream);
  reduce_scatter(per_rank, single, reduce_op::sum, comm, stream);
  all_gather(single, per_rank, comm, stream);
  broadcast(single, single, 0, comm, stream);
  stream.synchronize();
}

namespace {

// Waits for `stream` until `deadline`. A peer that never issues its part of the collective
// would hold it forever: then the communicator is aborted, so the kernel exits and the stream
// drains, and the wait throws.
void wait_for_peers(nccl_comm_view const& comm, cuda::stream_view stream,
                    std::chrono::steady_clock::time_point deadline,
                    std::chrono::milliseconds timeout) {
  while (true) {
    cudaError_t const status = cudaStreamQuery(stream.get());
    if (status == cudaSuccess) return;
    if (status != cudaErrorNotReady) GRAPHSTEP_CUDA_TRY(status);
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::microseconds{200});
  }
  std::string const reason =
      "verify_captured_sequence: rank " + std::to_string(comm.rank()) + " of " +
      std::to_string(comm.size()) + ": the other ranks did not join the sequence check within " +
      std::to_string(timeout.count()) +
      " ms (a rank failed before it, or skipped it); the communicator was aborted";
  detail::comm_access::state(comm).abort(reason);
  stream.synchronize();
  throw nccl_error{static_cast<int>(ncclRemoteError),
                   reason + ". Create a new communicator (and capture again) to go on"};
}

// One eager all-gather of `per_rank` 64-bit words from every rank, through device memory.
std::vector<std::uint64_t> all_gather_words(std::vector<std::uint64_t> const& mine,
                                            nccl_comm_view const& comm, cuda::stream_view stream,
                                            std::chrono::steady_clock::time_point deadline,
                                            std::chrono::milliseconds timeout) {
  auto const ranks = static_cast<std::size_t>(comm.size());
  std::size_t const bytes = mine.size() * sizeof(std::uint64_t);
  std::vector<std::uint64_t> gathered(mine.size() * ranks);
  cuda::device_buffer const device{bytes * (ranks + 1), stream};
  auto* send = static_cast<std::uint64_t*>(device.data());
  auto* recv = send + mine.size();
  GRAPHSTEP_CUDA_TRY(
      cudaMemcpyAsync(send, mine.data(), bytes, cudaMemcpyHostToDevice, stream.get()));
  detail::comm_access::state(comm).enqueue(
      "verify_captured_sequence", "ncclAllGather (verify_captured_sequence)",
      [&](ncclComm_t handle) {
        return ncclAllGather(send, recv, mine.size(), ncclUint64, handle, stream.get());
      });
  // Before the copy back: a copy into pageable memory blocks the host until the stream gets there.
  wait_for_peers(comm, stream, deadline, timeout);
  GRAPHSTEP_CUDA_TRY(
      cudaMemcpyAsync(gathered.data(), recv, bytes * ranks, cudaMemcpyDeviceToHost, stream.get()));
  stream.synchronize();
  return gathered;
}

}  // namespace

void verify_captured_sequence(nccl_comm_view const& comm, cuda::stream_view stream,
                              std::chrono::milliseconds timeout) {
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    "verify_captured_sequence: call it after the capture has ended");
  GRAPHSTEP_EXPECTS(timeout.count() > 0, "verify_captured_sequence: the timeout must be positive");
  auto const deadline = std::chrono::steady_clock::now() + timeout;
  auto& state = detail::comm_access::state(comm);
  state.throw_if_aborted("verify_captured_sequence");
  collective_log const log = state.take_captured();
  // Round 1: every rank's hash and count. Every rank sees the same table, so all of them take
  // the same decision about round 2 and no rank is left waiting in a collective.
  auto const words =
      all_gather_words({log.hash(), log.records().size()}, comm, stream, deadline, timeout);
  std::vector<detail::sequence_summary> summaries;
  for (std::size_t r = 0; r < words.size(); r += 2) summaries.push_back({words[r], words[r + 1]});
  if (detail::differing_ranks(summaries).empty()) return;
  // Round 2: the hash after every collective, to find the first one where the ranks part.
  std::size_t const length = detail::prefixes_to_compare(summaries);
  std::optional<std::size_t> first;
  if (length > 0) {
    auto const prefixes =
        all_gather_words(detail::padded_prefixes(log, length), comm, stream, deadline, timeout);
    first = detail::first_difference(prefixes, summaries.size(), length);
  }
  detail::expect_same_sequence(summaries, comm.rank(), log, first);
}

}  // namespace graphstep::nccl
