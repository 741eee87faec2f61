// Host read-backs: a step's outputs copied into pinned slots without waiting, read by ticket
// while later steps run; overwritten results refused; copies into a reused slot ordered.

#include <cstdint>
#include <graphstep/cuda/device_buffer.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/memory/host_readback.hpp>
#include <graphstep/memory/step_input.hpp>
#include <string>
#include <vector>

#include "common/error_message.hpp"
#include "common/gpu_test.hpp"

namespace gs = graphstep;

namespace {

// loss = Σ x[i]² / n, one thread per block-stride (n is small).
__global__ void mean_square_kernel(float* loss, float const* x, int n) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  float sum = 0.0F;
  for (int i = 0; i < n; ++i) sum += x[i] * x[i];
  *loss = sum / static_cast<float>(n);
}

__global__ void fill_kernel(float* out, float value, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = value;
}

class host_readback_test : public gs::testing::gpu_test {};

using gs::testing::contains;
using gs::testing::message_of;

}  // namespace

// The trainer's loop: upload step k's batch, replay, enqueue the loss's read-back, and read
// step k − 1's loss while step k runs.
TEST_F(host_readback_test, each_ticket_reads_the_loss_of_its_own_step) {
  gs::testing::queued_work const queued;
  gs::cuda::stream stream;
  int const n = 32;
  gs::memory::step_input<float> batch{n, stream};
  gs::cuda::device_buffer loss{sizeof(float), stream};
  gs::memory::host_readback<float> losses;
  EXPECT_EQ(losses.size(), 1U);
  gs::graphs::graph_exec step;
  gs::graphs::capture(step, stream, [&] {
    mean_square_kernel<<<1, 1, 0, stream.get()>>>(static_cast<float*>(loss.data()), batch.data(),
                                                  n);
  });
  std::uint64_t previous = 0;
  float previous_expected = 0.0F;
  for (int k = 1; k <= 5; ++k) {
    float const value = static_cast<float>(k);
    batch.upload(std::vector<float>(n, value), stream);
    step.replay(stream);
    std::uint64_t const ticket = losses.enqueue(static_cast<float const*>(loss.data()), stream);
    EXPECT_EQ(ticket, static_cast<std::uint64_t>(k));
    if (previous != 0) {
      EXPECT_EQ(losses.value(previous), previous_expected) << "step " << k - 1;
    }
    previous = ticket;
    previous_expected = value * value;
  }
  EXPECT_EQ(losses.value(previous), previous_expected);
  EXPECT_TRUE(losses.ready(previous));
}

TEST_F(host_readback_test, a_result_overwritten_by_a_later_read_back_is_refused) {
  gs::cuda::stream stream;
  int const n = 4;
  gs::cuda::device_buffer values{n * sizeof(float), stream};
  gs::memory::host_readback<float> reads{n, 2};
  std::vector<std::uint64_t> tickets;
  for (int k = 0; k < 3; ++k) {
    fill_kernel<<<1, n, 0, stream.get()>>>(static_cast<float*>(values.data()),
                                           static_cast<float>(k), n);
    tickets.push_back(reads.enqueue(static_cast<float const*>(values.data()), stream));
  }
  EXPECT_PRED2(contains, message_of([&] { static_cast<void>(reads.get(tickets[0])); }),
               "host_readback: the result of ticket 1 was overwritten by ticket 3");
  EXPECT_EQ(reads.get(tickets[1]), std::vector<float>(n, 1.0F));
  EXPECT_EQ(reads.get(tickets[2]), std::vector<float>(n, 2.0F));
  EXPECT_PRED2(contains, message_of([&] { static_cast<void>(reads.get(4)); }),
               "ticket 4 was never issued");
  EXPECT_PRED2(contains, message_of([&] { static_cast<void>(reads.value(tickets[2])); }),
               "holds 4 elements: use get()");
}

// With one slot, a read-back on a second stream reuses the slot of one still queued on the
// first: it must follow it. The race checker of the simulated device reports the two copies
// into the slot otherwise.
TEST_F(host_readback_test, a_copy_into_a_reused_slot_follows_the_one_it_replaces) {
  gs::testing::queued_work const queued;
  gs::cuda::stream first;
  gs::cuda::stream second;
  gs::cuda::device_buffer a{sizeof(float), first};
  gs::cuda::device_buffer b{sizeof(float), second};
  fill_kernel<<<1, 1, 0, first.get()>>>(static_cast<float*>(a.data()), 1.0F, 1);
  fill_kernel<<<1, 1, 0, second.get()>>>(static_cast<float*>(b.data()), 2.0F, 1);
  gs::memory::host_readback<float> reads{1, 1};
  static_cast<void>(reads.enqueue(static_cast<float const*>(a.data()), first));
  std::uint64_t const latest = reads.enqueue(static_cast<float const*>(b.data()), second);
  EXPECT_EQ(reads.value(latest), 2.0F);
  first.synchronize();
}

TEST_F(host_readback_test, bad_read_backs_say_what_was_wrong) {
  gs::cuda::stream stream;
  gs::cuda::device_buffer loss{sizeof(float), stream};
  gs::memory::host_readback<float> losses;
  EXPECT_PRED2(contains, message_of([&] { static_cast<void>(losses.enqueue(nullptr, stream)); }),
               "host_readback::enqueue: the source is null");
  gs::graphs::graph_exec g;
  EXPECT_PRED2(
      contains, message_of([&] {
        gs::graphs::capture(g, stream, [&] {
          static_cast<void>(losses.enqueue(static_cast<float const*>(loss.data()), stream));
        });
      }),
      "enqueue the read-back after the replay, on the replay stream");
  EXPECT_PRED2(contains, message_of([&] { gs::memory::host_readback<float> none{0}; }),
               "at least one element");
  EXPECT_PRED2(contains, message_of([&] {
                 gs::memory::host_readback<float> none{1, 0};
               }),
               "depth must be at least 1");
  // Nothing was issued by the refused calls.
  EXPECT_PRED2(contains, message_of([&] { static_cast<void>(losses.ready(1)); }),
               "ticket 1 was never issued");
}

// A trainer's own loss buffer, adopted: each enqueue reads it where the trainer keeps it.
TEST_F(host_readback_test, an_adopted_buffer_is_read_back_where_the_trainer_keeps_it) {
  gs::testing::queued_work const queued;
  gs::cuda::stream stream;
  gs::cuda::device_buffer own_loss{2 * sizeof(float), stream};  // the trainer's
  auto* const loss = static_cast<float*>(own_loss.data());
  auto losses = gs::memory::host_readback<float>::adopt(loss, 2);
  EXPECT_EQ(losses.source(), loss);
  EXPECT_EQ(losses.size(), 2U);
  std::vector<std::uint64_t> tickets;
  for (int k = 1; k <= 3; ++k) {
    fill_kernel<<<1, 2, 0, stream.get()>>>(loss, static_cast<float>(k), 2);
    tickets.push_back(losses.enqueue(stream));
    if (k > 1) {
      EXPECT_EQ(losses.get(tickets[static_cast<std::size_t>(k - 2)]),
                (std::vector<float>(2, static_cast<float>(k - 1))));
    }
  }
  EXPECT_EQ(losses.get(tickets.back()), (std::vector<float>(2, 3.0F)));
  // The memory stays the trainer's after the read-back is gone.
  { auto gone = std::move(losses); }
  fill_kernel<<<1, 2, 0, stream.get()>>>(loss, 9.0F, 2);
  EXPECT_EQ(gs::testing::copy_to_host(loss, 2, stream), (std::vector<float>(2, 9.0F)));
}

TEST_F(host_readback_test, adopting_bad_memory_is_refused_saying_what_was_wrong) {
  gs::cuda::stream stream;
  gs::cuda::device_buffer own{64, stream};
  auto* const memory = static_cast<float*>(own.data());
  using readback = gs::memory::host_readback<float>;
  EXPECT_PRED2(contains, message_of([&] { static_cast<void>(readback::adopt(nullptr)); }),
               "host_readback::adopt: the device memory is a null pointer");
  EXPECT_PRED2(contains, message_of([&] { static_cast<void>(readback::adopt(memory, 0)); }),
               "at least one element");
  EXPECT_PRED2(contains, message_of([&] {
                 auto const* const odd = reinterpret_cast<float const*>(
                     static_cast<unsigned char const*>(own.data()) + 1);
                 static_cast<void>(readback::adopt(odd));
               }),
               "not aligned to its 4-byte element type");
  EXPECT_PRED2(contains, message_of([&] { static_cast<void>(readback::adopt(memory, 1, 0)); }),
               "depth must be at least 1");
  readback losses = readback::adopt(memory);
  gs::graphs::graph_exec g;
  EXPECT_PRED2(contains, message_of([&] {
                 gs::graphs::capture(g, stream,
                                     [&] { static_cast<void>(losses.enqueue(stream)); });
               }),
               "enqueue the read-back after the replay, on the replay stream");
  EXPECT_PRED2(contains, message_of([&] { static_cast<void>(losses.ready(1)); }),
               "ticket 1 was never issued");
  readback plain;
  EXPECT_PRED2(contains, message_of([&] { static_cast<void>(plain.enqueue(stream)); }),
               "adopted no device memory");
}
