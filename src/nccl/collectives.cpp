#include <graphstep/error.hpp>
#include <graphstep/nccl/collectives.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <vector>

namespace graphstep::nccl {
namespace {

ncclDataType_t to_nccl(dtype type) {
  switch (type) {
    case dtype::float32: return ncclFloat32;
    case dtype::float16: return ncclFloat16;
    case dtype::bfloat16: return ncclBfloat16;
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

std::size_t elements(device_buffer const& b, char const* what, char const* role) {
  GRAPHSTEP_EXPECTS(b.data != nullptr, std::string{what} + ": the " + role + " buffer is null");
  std::size_t const size = size_in_bytes(b.type);
  GRAPHSTEP_EXPECTS(b.bytes > 0 && b.bytes % size == 0,
                    std::string{what} + ": the " + role + " buffer holds " +
                        std::to_string(b.bytes) + " bytes, not a positive multiple of " +
                        name(b.type) + "'s " + std::to_string(size));
  return b.bytes / size;
}

// Checks the communicator and the buffers, and logs the collective when it is being captured.
void prepare(collective_record const& record, device_buffer const& send,
             device_buffer const& recv, nccl_comm_view comm, stream_view stream,
             char const* what) {
  GRAPHSTEP_EXPECTS(!comm.aborted(), std::string{what} + ": the communicator was aborted after "
                                                         "an error; create a new one");
  GRAPHSTEP_EXPECTS(send.type == recv.type, std::string{what} + ": send is " + name(send.type) +
                                                " but recv is " + name(recv.type));
  auto& state = comm.state();
  int const kind = static_cast<int>(record.kind);
  if (stream.is_capturing()) {
    GRAPHSTEP_EXPECTS(state.warmed_up.count(kind) != 0,
                      std::string{what} + " is being captured before it ever ran on this "
                                          "communicator: run it once eagerly first (NCCL "
                                          "connects lazily, which a capture cannot record)");
    state.captured.record(record);
  } else {
    state.warmed_up.insert(kind);
  }
}

}  // namespace

void all_reduce(device_buffer send, device_buffer recv, reduce_op op, nccl_comm_view comm,
                stream_view stream) {
  std::size_t const count = elements(send, "all_reduce", "send");
  GRAPHSTEP_EXPECTS(elements(recv, "all_reduce", "recv") == count,
                    "all_reduce: send and recv must hold the same number of elements");
  prepare({collective_kind::all_reduce, static_cast<int>(send.type), count, op, -1}, send, recv,
          comm, stream, "all_reduce");
  GRAPHSTEP_NCCL_TRY(ncclAllReduce(send.data, recv.data, count, to_nccl(send.type), to_nccl(op),
                                   comm.get(), stream.value()));
}

void reduce_scatter(device_buffer send, device_buffer recv, reduce_op op, nccl_comm_view comm,
                    stream_view stream) {
  std::size_t const recv_count = elements(recv, "reduce_scatter", "recv");
  GRAPHSTEP_EXPECTS(elements(send, "reduce_scatter", "send") ==
                        recv_count * static_cast<std::size_t>(comm.size()),
                    "reduce_scatter: send must hold world size (" + std::to_string(comm.size()) +
                        ") times the elements of recv");
  prepare({collective_kind::reduce_scatter, static_cast<int>(send.type), recv_count, op, -1},
          send, recv, comm, stream, "reduce_scatter");
  GRAPHSTEP_NCCL_TRY(ncclReduceScatter(send.data, recv.data, recv_count, to_nccl(send.type),
                                       to_nccl(op), comm.get(), stream.value()));
}

void all_gather(device_buffer send, device_buffer recv, nccl_comm_view comm, stream_view stream) {
  std::size_t const send_count = elements(send, "all_gather", "send");
  GRAPHSTEP_EXPECTS(elements(recv, "all_gather", "recv") ==
                        send_count * static_cast<std::size_t>(comm.size()),
                    "all_gather: recv must hold world size (" + std::to_string(comm.size()) +
                        ") times the elements of send");
  prepare({collective_kind::all_gather, static_cast<int>(send.type), send_count, reduce_op::sum,
           -1},
          send, recv, comm, stream, "all_gather");
  GRAPHSTEP_NCCL_TRY(ncclAllGather(send.data, recv.data, send_count, to_nccl(send.type),
                                   comm.get(), stream.value()));
}

void broadcast(device_buffer send, device_buffer recv, int root, nccl_comm_view comm,
               stream_view stream) {
  GRAPHSTEP_EXPECTS(root >= 0 && root < comm.size(),
                    "broadcast: root " + std::to_string(root) + " is not a rank of a world of " +
                        std::to_string(comm.size()));
  std::size_t const count = elements(recv, "broadcast", "recv");
  GRAPHSTEP_EXPECTS(elements(send, "broadcast", "send") == count,
                    "broadcast: send and recv must hold the same number of elements");
  prepare({collective_kind::broadcast, static_cast<int>(send.type), count, reduce_op::sum, root},
          send, recv, comm, stream, "broadcast");
  GRAPHSTEP_NCCL_TRY(ncclBroadcast(send.data, recv.data, count, to_nccl(send.type), root,
                                   comm.get(), stream.value()));
}

group_guard::group_guard() { GRAPHSTEP_NCCL_TRY(ncclGroupStart()); }

group_guard::~group_guard() {
  if (!open_) return;
  if (ncclResult_t const status = ncclGroupEnd(); status != ncclSuccess) {
    std::fprintf(stderr, "graphstep: ncclGroupEnd failed: %s\n", ncclGetErrorString(status));
  }
}

void group_guard::end() {
  GRAPHSTEP_EXPECTS(open_, "group_guard::end was called twice");
  open_ = false;
  GRAPHSTEP_NCCL_TRY(ncclGroupEnd());
}

void verify_captured_sequence(nccl_comm_view comm, stream_view stream) {
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    "verify_captured_sequence: call it after the capture has ended");
  auto& state = comm.state();
  std::uint64_t const mine = state.captured.hash();
  std::size_t const count = state.captured.records().size();
  std::vector<std::uint64_t> hashes(static_cast<std::size_t>(comm.size()));
  void* device = nullptr;
  std::size_t const bytes = sizeof(std::uint64_t) * (hashes.size() + 1);
  GRAPHSTEP_CUDA_TRY(cudaMalloc(&device, bytes));
  auto* send = static_cast<std::uint64_t*>(device);
  auto* recv = send + 1;
  try {
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(send, &mine, sizeof mine, cudaMemcpyHostToDevice,
                                       stream.value()));
    GRAPHSTEP_NCCL_TRY(ncclAllGather(send, recv, 1, ncclUint64, comm.get(), stream.value()));
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(hashes.data(), recv, sizeof(std::uint64_t) * hashes.size(),
                                       cudaMemcpyDeviceToHost, stream.value()));
    stream.synchronize();
  } catch (...) {
    GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaFree(device));
    throw;
  }
  GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaFree(device));
  state.captured.clear();
  expect_same_sequence(hashes, comm.rank(), count);
}

}  // namespace graphstep::nccl
