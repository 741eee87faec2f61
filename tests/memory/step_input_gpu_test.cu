// Step inputs: per-step values at fixed device addresses that every replay of a captured step
// reads afresh, staged through pinned slots so that uploads queued behind replays keep their
// own values, and refused inside a capture.

#include <cstdint>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device_buffer.hpp>
#include <graphstep/cuda/memory_resource.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <graphstep/memory/step_input.hpp>
#include <string>
#include <vector>

#include "common/error_message.hpp"
#include "common/gpu_test.hpp"

namespace gs = graphstep;

namespace {

// What a trainer passes by value today and a graph would freeze.
struct step_constants {
  float learning_rate;
  std::int32_t step;
};

// out[i] = tokens[i] · learning_rate + step
__global__ void embed_kernel(float* out, std::int32_t const* tokens,
                             step_constants const* constants, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n)
    out[i] = static_cast<float>(tokens[i]) * constants->learning_rate +
             static_cast<float>(constants->step);
}

// log[row · n + i] = tokens[i], with row read from the device: one row per replay.
__global__ void log_kernel(std::int32_t* log, std::int32_t const* tokens, std::int32_t const* row,
                           int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) log[*row * n + i] = tokens[i];
}

class step_input_test : public gs::testing::gpu_test {};

// Writes `values` to device memory in the order of `stream`, and waits for them.
void put(std::int32_t* device, std::vector<std::int32_t> const& values,
         gs::cuda::stream_view stream) {
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(device, values.data(), values.size() * sizeof(std::int32_t),
                                     cudaMemcpyHostToDevice, stream.get()));
  stream.synchronize();
}

using gs::testing::contains;
using gs::testing::message_of;

}  // namespace

TEST_F(step_input_test, every_replay_reads_the_values_uploaded_before_it) {
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  int const n = 300;
  // Token ids from a pool, the per-step scalars from CUDA's allocator.
  gs::memory::step_input<std::int32_t> tokens{static_cast<std::size_t>(n), stream, pool};
  gs::memory::step_input<step_constants> constants{1, stream};
  gs::cuda::device_buffer out{n * sizeof(float), stream};
  EXPECT_EQ(tokens.size(), static_cast<std::size_t>(n));
  EXPECT_EQ(constants.size(), 1U);

  gs::graphs::graph_exec step;
  gs::graphs::capture(step, stream, [&] {
    embed_kernel<<<(n + 127) / 128, 128, 0, stream.get()>>>(static_cast<float*>(out.data()),
                                                            tokens.data(), constants.data(), n);
  });
  for (std::int32_t k = 1; k <= 4; ++k) {
    std::vector<std::int32_t> batch(n);
    for (int i = 0; i < n; ++i) batch[static_cast<std::size_t>(i)] = (i * 7 + k * 13) % 50257;
    float const lr = 0.5F / static_cast<float>(k);
    tokens.upload(batch, stream);
    constants.set(step_constants{lr, k}, stream);
    step.replay(stream);
    std::vector<float> const result =
        gs::testing::copy_to_host(static_cast<float*>(out.data()), n, stream);
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(result[static_cast<std::size_t>(i)],
                static_cast<float>(batch[static_cast<std::size_t>(i)]) * lr + static_cast<float>(k))
          << "step " << k << ", element " << i;
    }
  }
}

TEST_F(step_input_test, an_input_reads_zeros_before_its_first_upload) {
  gs::cuda::stream stream;
  gs::memory::step_input<std::int64_t> counts{17, stream};
  EXPECT_EQ(gs::testing::copy_to_host(counts.data(), 17, stream), std::vector<std::int64_t>(17, 0));
}

// Uploads queued behind replays that have not run: each replay must still see its own step's
// values, which a single host staging area overwritten by the next upload would not give.
TEST_F(step_input_test, uploads_queued_behind_replays_keep_their_own_values) {
  for (std::size_t depth : {1U, 2U, 3U}) {
    SCOPED_TRACE("depth " + std::to_string(depth));
    gs::testing::queued_work const queued;
    gs::cuda::stream stream;
    int const n = 64;
    int const steps = 6;
    gs::memory::step_input<std::int32_t> tokens{n, stream, gs::cuda::default_resource(), depth};
    gs::memory::step_input<std::int32_t> row{1, stream, gs::cuda::default_resource(), depth};
    gs::cuda::device_buffer log{static_cast<std::size_t>(n * steps) * sizeof(std::int32_t), stream};
    gs::graphs::graph_exec step;
    gs::graphs::capture(step, stream, [&] {
      log_kernel<<<1, n, 0, stream.get()>>>(static_cast<std::int32_t*>(log.data()), tokens.data(),
                                            row.data(), n);
    });
    std::vector<std::int32_t> expected;
    for (std::int32_t k = 0; k < steps; ++k) {
      std::vector<std::int32_t> batch(n);
      for (int i = 0; i < n; ++i) batch[static_cast<std::size_t>(i)] = k * 1000 + i;
      tokens.upload(batch, stream);
      row.set(k, stream);
      step.replay(stream);
      expected.insert(expected.end(), batch.begin(), batch.end());
    }
    EXPECT_EQ(
        gs::testing::copy_to_host(static_cast<std::int32_t*>(log.data()), expected.size(), stream),
        expected);
  }
}

TEST_F(step_input_test, a_slot_filled_in_place_is_uploaded_once) {
  gs::cuda::stream stream;
  gs::memory::step_input<float> weights{3, stream};
  EXPECT_PRED2(contains, message_of([&] { weights.upload_staged(stream); }),
               "step_input: nothing was staged");
  float* slot = weights.stage();
  slot[0] = 1.0F;
  slot[1] = 2.0F;
  slot[2] = 3.0F;
  weights.upload_staged(stream);
  EXPECT_EQ(gs::testing::copy_to_host(weights.data(), 3, stream),
            (std::vector<float>{1.0F, 2.0F, 3.0F}));
  // Its contents went out: uploading them again without staging is refused, not resent stale.
  EXPECT_PRED2(contains, message_of([&] { weights.upload_staged(stream); }),
               "its contents are stale");
}

TEST_F(step_input_test, uploads_inside_a_capture_are_refused_and_leave_the_input_usable) {
  gs::cuda::stream stream;
  gs::memory::step_input<std::int32_t> tokens{8, stream};
  gs::graphs::graph_exec g;
  EXPECT_PRED2(contains, message_of([&] {
                 gs::graphs::capture(
                     g, stream, [&] { tokens.upload(std::vector<std::int32_t>(8, 5), stream); });
               }),
               "upload between replays, on the replay stream");
  EXPECT_PRED2(contains, message_of([&] {
                 gs::graphs::capture(g, stream, [&] {
                   static_cast<void>(tokens.stage());
                   tokens.upload_staged(stream);
                 });
               }),
               "upload between replays");
  EXPECT_PRED2(
      contains, message_of([&] {
        gs::graphs::capture(g, stream, [&] { gs::memory::step_input<float> late{1, stream}; });
      }),
      "construct it before the capture");
  tokens.upload(std::vector<std::int32_t>(8, 9), stream);
  EXPECT_EQ(gs::testing::copy_to_host(tokens.data(), 8, stream), std::vector<std::int32_t>(8, 9));
}

TEST_F(step_input_test, bad_uploads_say_what_was_wrong) {
  gs::cuda::stream stream;
  gs::memory::step_input<std::int32_t> tokens{8, stream};
  EXPECT_PRED2(contains, message_of([&] { tokens.upload(std::vector<std::int32_t>(7), stream); }),
               "step_input::upload: 7 values given for an input of 8");
  EXPECT_PRED2(contains, message_of([&] { tokens.upload(nullptr, 8, stream); }),
               "the source is null");
  EXPECT_PRED2(contains, message_of([&] { tokens.set(3, stream); }),
               "1 values given for an input of 8");
  EXPECT_PRED2(contains, message_of([&] {
                 gs::memory::step_input<float> empty{0, stream};
               }),
               "at least one element");
  EXPECT_PRED2(contains, message_of([&] {
                 gs::memory::step_input<float> no_slots{1, stream, gs::cuda::default_resource(), 0};
               }),
               "depth must be at least 1");
  gs::memory::step_input<std::int32_t> moved = std::move(tokens);
  EXPECT_PRED2(contains, message_of([&] {
                 tokens.upload(std::vector<std::int32_t>(8), stream);  // NOLINT: moved-from
               }),
               "moved from");
  moved.upload(std::vector<std::int32_t>(8, 2), stream);
  EXPECT_EQ(gs::testing::copy_to_host(moved.data(), 8, stream), std::vector<std::int32_t>(8, 2));
}

// A trainer's own token buffer, adopted: uploads fill it in place with the input's staging, and
// the trainer keeps its memory, contents and ownership.
TEST_F(step_input_test, an_adopted_buffer_is_filled_in_place_and_stays_the_trainers) {
  for (std::size_t depth : {1U, 2U}) {
    SCOPED_TRACE("depth " + std::to_string(depth));
    gs::testing::queued_work const queued;
    gs::cuda::stream stream;
    int const n = 32;
    int const steps = 5;
    gs::cuda::device_buffer own_tokens{n * sizeof(std::int32_t), stream};  // the trainer's
    gs::cuda::device_buffer own_row{sizeof(std::int32_t), stream};
    auto* const tokens_memory = static_cast<std::int32_t*>(own_tokens.data());
    auto* const row_memory = static_cast<std::int32_t*>(own_row.data());
    std::vector<std::int32_t> const before(n, -4);
    put(tokens_memory, before, stream);
    gs::cuda::device_buffer log{static_cast<std::size_t>(n * steps) * sizeof(std::int32_t), stream};
    std::vector<std::int32_t> expected;
    {
      auto tokens = gs::memory::step_input<std::int32_t>::adopt(tokens_memory, n, depth);
      auto row = gs::memory::step_input<std::int32_t>::adopt(row_memory, 1, depth);
      EXPECT_EQ(tokens.data(), tokens_memory);
      EXPECT_EQ(tokens.size(), static_cast<std::size_t>(n));
      // Adopting neither zeroes nor copies: the trainer's values are there until an upload.
      EXPECT_EQ(gs::testing::copy_to_host(tokens.data(), n, stream), before);
      gs::graphs::graph_exec step;
      gs::graphs::capture(step, stream, [&] {
        log_kernel<<<1, n, 0, stream.get()>>>(static_cast<std::int32_t*>(log.data()),
                                              tokens_memory, row_memory, n);
      });
      for (std::int32_t k = 0; k < steps; ++k) {
        std::vector<std::int32_t> batch(n);
        for (int i = 0; i < n; ++i) batch[static_cast<std::size_t>(i)] = k * 100 + i;
        tokens.upload(batch, stream);
        row.set(k, stream);
        step.replay(stream);
        expected.insert(expected.end(), batch.begin(), batch.end());
      }
      tokens.set_stream(stream);  // nothing to free: accepted, does nothing
    }
    // The inputs are gone; the trainer's memory is not (a freed buffer would be refused here).
    EXPECT_EQ(
        gs::testing::copy_to_host(static_cast<std::int32_t*>(log.data()), expected.size(), stream),
        expected);
    EXPECT_EQ(gs::testing::copy_to_host(tokens_memory, n, stream),
              std::vector<std::int32_t>(expected.end() - n, expected.end()));
    put(tokens_memory, before, stream);
    EXPECT_EQ(gs::testing::copy_to_host(tokens_memory, n, stream), before);
  }
}

TEST_F(step_input_test, adopting_bad_memory_is_refused_saying_what_was_wrong) {
  gs::cuda::stream stream;
  gs::cuda::device_buffer own{64, stream};
  auto* const memory = static_cast<std::int32_t*>(own.data());
  using input = gs::memory::step_input<std::int32_t>;
  EXPECT_PRED2(contains, message_of([&] { static_cast<void>(input::adopt(nullptr, 4)); }),
               "step_input::adopt: the device memory is a null pointer");
  EXPECT_PRED2(contains, message_of([&] { static_cast<void>(input::adopt(memory, 0)); }),
               "at least one element");
  EXPECT_PRED2(contains, message_of([&] {
                 auto* const odd = reinterpret_cast<std::int32_t*>(
                     static_cast<unsigned char*>(own.data()) + 2);
                 static_cast<void>(input::adopt(odd, 4));
               }),
               "not aligned to its 4-byte element type");
  EXPECT_PRED2(contains, message_of([&] { static_cast<void>(input::adopt(memory, 4, 0)); }),
               "depth must be at least 1");
  // The upload rules are an input's: a capturing stream and a wrong count are refused, and
  // leave the input usable.
  input tokens = input::adopt(memory, 4);
  gs::graphs::graph_exec g;
  EXPECT_PRED2(contains, message_of([&] {
                 gs::graphs::capture(
                     g, stream, [&] { tokens.upload(std::vector<std::int32_t>(4, 5), stream); });
               }),
               "upload between replays, on the replay stream");
  EXPECT_PRED2(contains, message_of([&] { tokens.upload(std::vector<std::int32_t>(3), stream); }),
               "3 values given for an input of 4");
  tokens.upload(std::vector<std::int32_t>(4, 6), stream);
  EXPECT_EQ(gs::testing::copy_to_host(memory, 4, stream), std::vector<std::int32_t>(4, 6));
}
