#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <graphstep/cuda/check.hpp>
#include <graphstep/error.hpp>
#include <graphstep/nccl/collectives.hpp>
#include <mutex>
#include <optional>
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

// Scratch device memory for the eager helpers (never used during a capture).
class device_memory {
 public:
  explicit device_memory(std::size_t bytes) { GRAPHSTEP_CUDA_TRY(cudaMalloc(&data_, bytes)); }
  ~device_memory() { GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaFree(data_)); }
  device_memory(device_memory const&) = delete;
  device_memory& operator=(device_memory const&) = delete;
  [[nodiscard]] void* get() const noexcept { return data_; }

 private:
  void* data_{};
};

std::size_t elements(device_buffer const& b, char const* what, char const* role) {
  GRAPHSTEP_EXPECTS(b.data != nullptr, std::string{what} + ": the " + role + " buffer is null");
  std::size_t const size = size_in_bytes(b.type);
  GRAPHSTEP_EXPECTS(b.bytes > 0 && b.bytes % size == 0,
                    std::string{what} + ": the " + role + " buffer holds " +
                        std::to_string(b.bytes) + " bytes, not a positive multiple of " +
                        name(b.type) + "'s " + std::to_string(size));
  return b.bytes / size;
}

// Checks the communicator and the buffers, logs the collective when it is being captured, and
// enqueues it while holding the communicator's enqueue lock (so a watchdog thread cannot abort
// the communicator in the middle of the call).
template <typename Call>
void enqueue(collective_record record, device_buffer const& send, device_buffer const& recv,
             nccl_comm_view comm, cuda::stream_view stream, char const* what, Call&& call) {
  auto& state = comm.state();
  state.throw_if_aborted(what);
  GRAPHSTEP_EXPECTS(send.type == recv.type, std::string{what} + ": send is " + name(send.type) +
                                                " but recv is " + name(recv.type));
  record.slot = state.slot;
  int const kind = static_cast<int>(record.kind);
  bool const capturing = stream.is_capturing();
  if (capturing) {
    GRAPHSTEP_EXPECTS(state.warmed_up.count(kind) != 0,
                      std::string{what} +
                          " is being captured before it ever ran on this "
                          "communicator: run it once eagerly first, or call "
                          "nccl::warm_up (NCCL connects lazily, which a capture "
                          "cannot record)");
  }
  ncclResult_t status = ncclSuccess;
  {
    std::lock_guard<std::timed_mutex> lock{state.enqueue_mutex};
    state.throw_if_aborted(what);
    status = call(state.handle.get());
  }
  if (status != ncclSuccess && status != ncclInProgress) {
    // A failed call leaves the communicator in doubt: release it with an abort.
    state.handle.get_deleter().abort_on_release = true;
    graphstep::detail::throw_nccl_error(static_cast<int>(status), ncclGetErrorString(status), what,
                                        __FILE__, __LINE__);
  }
  if (capturing) {
    state.captured.record(record);
  } else {
    state.warmed_up.insert(kind);
  }
}

}  // namespace

void all_reduce(device_buffer send, device_buffer recv, reduce_op op, nccl_comm_view comm,
                cuda::stream_view stream) {
  std::size_t const count = elements(send, "all_reduce", "send");
  GRAPHSTEP_EXPECTS(elements(recv, "all_reduce", "recv") == count,
                    "all_reduce: send holds " + std::to_string(count) + " elements but recv " +
                        std::to_string(recv.bytes / size_in_bytes(recv.type)) +
                        ": they must hold the same number");
  enqueue({collective_kind::all_reduce, static_cast<int>(send.type), count, op, -1, 0}, send, recv,
          comm, stream, "all_reduce", [&](ncclComm_t handle) {
            return ncclAllReduce(send.data, recv.data, count, to_nccl(send.type), to_nccl(op),
                                 handle, stream.value());
          });
}

void reduce_scatter(device_buffer send, device_buffer recv, reduce_op op, nccl_comm_view comm,
                    cuda::stream_view stream) {
  std::size_t const recv_count = elements(recv, "reduce_scatter", "recv");
  GRAPHSTEP_EXPECTS(elements(send, "reduce_scatter", "send") ==
                        recv_count * static_cast<std::size_t>(comm.size()),
                    "reduce_scatter: send must hold world size (" + std::to_string(comm.size()) +
                        ") times the elements of recv (" + std::to_string(recv_count) + ")");
  enqueue({collective_kind::reduce_scatter, static_cast<int>(send.type), recv_count, op, -1, 0},
          send, recv, comm, stream, "reduce_scatter", [&](ncclComm_t handle) {
            return ncclReduceScatter(send.data, recv.data, recv_count, to_nccl(send.type),
                                     to_nccl(op), handle, stream.value());
          });
}

void all_gather(device_buffer send, device_buffer recv, nccl_comm_view comm,
                cuda::stream_view stream) {
  std::size_t const send_count = elements(send, "all_gather", "send");
  GRAPHSTEP_EXPECTS(
      elements(recv, "all_gather", "recv") == send_count * static_cast<std::size_t>(comm.size()),
      "all_gather: recv must hold world size (" + std::to_string(comm.size()) +
          ") times the elements of send (" + std::to_string(send_count) + ")");
  enqueue(
      {collective_kind::all_gather, static_cast<int>(send.type), send_count, reduce_op::sum, -1, 0},
      send, recv, comm, stream, "all_gather", [&](ncclComm_t handle) {
        return ncclAllGather(send.data, recv.data, send_count, to_nccl(send.type), handle,
                             stream.value());
      });
}

void broadcast(device_buffer send, device_buffer recv, int root, nccl_comm_view comm,
               cuda::stream_view stream) {
  GRAPHSTEP_EXPECTS(root >= 0 && root < comm.size(), "broadcast: root " + std::to_string(root) +
                                                         " is not a rank of a world of " +
                                                         std::to_string(comm.size()));
  std::size_t const count = elements(recv, "broadcast", "recv");
  GRAPHSTEP_EXPECTS(elements(send, "broadcast", "send") == count,
                    "broadcast: send and recv must hold the same number of elements");
  enqueue({collective_kind::broadcast, static_cast<int>(send.type), count, reduce_op::sum, root, 0},
          send, recv, comm, stream, "broadcast", [&](ncclComm_t handle) {
            return ncclBroadcast(send.data, recv.data, count, to_nccl(send.type), root, handle,
                                 stream.value());
          });
}

void warm_up(nccl_comm_view comm, cuda::stream_view stream) {
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    "nccl::warm_up runs collectives eagerly: call it before the capture");
  comm.state().throw_if_aborted("nccl::warm_up");
  auto const ranks = static_cast<std::size_t>(comm.size());
  device_memory scratch{2 * ranks * sizeof(float)};
  auto* one = static_cast<float*>(scratch.get());  // 1 element, then `ranks` elements
  auto* many = one + ranks;
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(one, 0, 2 * ranks * sizeof(float), stream.value()));
  device_buffer const single{one, sizeof(float), dtype::float32};
  device_buffer const per_rank{many, ranks * sizeof(float), dtype::float32};
  all_reduce(single, single, reduce_op::sum, comm, stream);
  reduce_scatter(per_rank, single, reduce_op::sum, comm, stream);
  all_gather(single, per_rank, comm, stream);
  broadcast(single, single, 0, comm, stream);
  stream.synchronize();
}

group_guard::group_guard() {
  GRAPHSTEP_NCCL_TRY(ncclGroupStart());
}

group_guard::~group_guard() {
  if (!open_) return;
  if (ncclResult_t const status = ncclGroupEnd(); status != ncclSuccess) {
    static_cast<void>(
        std::fprintf(stderr, "graphstep: ncclGroupEnd failed: %s\n", ncclGetErrorString(status)));
  }
}

void group_guard::end() {
  GRAPHSTEP_EXPECTS(open_, "group_guard::end was called twice");
  open_ = false;
  GRAPHSTEP_NCCL_TRY(ncclGroupEnd());
}

namespace {

// One eager all-gather of `per_rank` 64-bit words from every rank, through device memory.
std::vector<std::uint64_t> all_gather_words(std::vector<std::uint64_t> const& mine,
                                            nccl_comm_view comm, cuda::stream_view stream) {
  auto const ranks = static_cast<std::size_t>(comm.size());
  std::size_t const bytes = mine.size() * sizeof(std::uint64_t);
  std::vector<std::uint64_t> gathered(mine.size() * ranks);
  device_memory device{bytes * (ranks + 1)};
  auto* send = static_cast<std::uint64_t*>(device.get());
  auto* recv = send + mine.size();
  GRAPHSTEP_CUDA_TRY(
      cudaMemcpyAsync(send, mine.data(), bytes, cudaMemcpyHostToDevice, stream.value()));
  auto& state = comm.state();
  ncclResult_t status = ncclSuccess;
  {
    std::lock_guard<std::timed_mutex> lock{state.enqueue_mutex};
    state.throw_if_aborted("verify_captured_sequence");
    status = ncclAllGather(send, recv, mine.size(), ncclUint64, state.handle.get(), stream.value());
  }
  if (status != ncclSuccess && status != ncclInProgress) {
    state.handle.get_deleter().abort_on_release = true;
    graphstep::detail::throw_nccl_error(static_cast<int>(status), ncclGetErrorString(status),
                                        "ncclAllGather (verify_captured_sequence)", __FILE__,
                                        __LINE__);
  }
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(gathered.data(), recv, bytes * ranks, cudaMemcpyDeviceToHost,
                                     stream.value()));
  stream.synchronize();
  return gathered;
}

}  // namespace

void verify_captured_sequence(nccl_comm_view comm, cuda::stream_view stream) {
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    "verify_captured_sequence: call it after the capture has ended");
  auto& state = comm.state();
  state.throw_if_aborted("verify_captured_sequence");
  collective_log const log = state.captured;
  state.captured.clear();
  // Round 1: every rank's hash and count. Every rank sees the same table, so all of them take
  // the same decision about round 2 and no rank is left waiting in a collective.
  auto const words = all_gather_words({log.hash(), log.records().size()}, comm, stream);
  std::vector<sequence_summary> summaries;
  for (std::size_t r = 0; r < words.size(); r += 2) summaries.push_back({words[r], words[r + 1]});
  if (differing_ranks(summaries).empty()) return;
  // Round 2: the hash after every collective, to find the first one where the ranks part.
  std::size_t const length = prefixes_to_compare(summaries);
  std::optional<std::size_t> first;
  if (length > 0) {
    auto const prefixes = all_gather_words(padded_prefixes(log, length), comm, stream);
    first = first_difference(prefixes, summaries.size(), length);
  }
  expect_same_sequence(summaries, comm.rank(), log, first);
}

}  // namespace graphstep::nccl
