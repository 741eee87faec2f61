// NCCL with ranks as separate processes (1, 2 and 4), as a launcher starts them: every
// collective against its definition, eager and captured, and a rank that never joins a captured
// collective. Each rank is a child process; its checks print what failed and set its exit code.

#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/diagnostics/verify_replay.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph.hpp>
#include <graphstep/nccl.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/gpu_test.hpp"
#include "common/nccl_test.hpp"

namespace gs = graphstep;
namespace gn = graphstep::nccl;

namespace {

// The id rank 0 would send to the others; made before the ranks are forked.
gn::unique_id_bytes& shared_unique_id() {
  static gn::unique_id_bytes id{};
  return id;
}

// One rank's view of its checks: a failure prints and makes the exit code non-zero.
struct rank_checks {
  int rank{};
  int failures{};
  void expect(bool holds, std::string const& what) {
    if (holds) return;
    ++failures;
    static_cast<void>(std::fprintf(stderr, "rank %d: %s\n", rank, what.c_str()));
  }
  // `call` must throw nccl_error whose text holds `expected`, within `limit`; `returned` says
  // what went wrong when it returns instead.
  void expect_nccl_error_within(std::chrono::milliseconds limit, std::string const& expected,
                                std::string const& returned, std::function<void()> const& call) {
    auto const started = std::chrono::steady_clock::now();
    try {
      call();
      expect(false, returned);
    } catch (graphstep::nccl_error const& e) {
      expect(std::string{e.what()}.find(expected) != std::string::npos, e.what());
    }
    auto const waited = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - started);
    expect(waited < limit, "the error took " + std::to_string(waited.count()) + " ms");
  }
  void expect_values(std::vector<float> const& got, std::vector<float> const& want,
                     std::string const& what) {
    for (std::size_t i = 0; i < want.size(); ++i) {
      if (got.at(i) != want[i]) {
        expect(false, what + ": element " + std::to_string(i) + " is " + std::to_string(got[i]) +
                          ", expected " + std::to_string(want[i]));
        return;
      }
    }
  }
};

// The simulated NCCL's shared-memory segments in /dev/shm whose names begin with `prefix`.
std::vector<std::string> segments_named(std::string const& prefix) {
  std::vector<std::string> found;
  std::error_code error;
  for (auto const& entry : std::filesystem::directory_iterator{"/dev/shm", error}) {
    std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0) found.push_back(std::move(name));
  }
  return found;
}

// The segments of the ids this process made (the simulated NCCL names them after its pid).
std::string own_segments() {
  return "graphstep-nccl-" + std::to_string(getpid()) + "-";
}

class ranks_test : public gs::testing::nccl_gpu_test {
 protected:
  void SetUp() override {
    gs::testing::nccl_gpu_test::SetUp();
    if (IsSkipped()) return;
    // The CUDA runtime is not fork-safe once initialized (the fixture has queried the device):
    // on a GPU, ranks as processes run through examples/ddp/launch_local.sh instead.
    if (!gs::testing::simulated_device) GTEST_SKIP() << "forked ranks run on the simulated device";
  }
  // Every job's ranks are gone by now: no segment of theirs may outlive them. Ranks that died
  // during the rendezvous (a child ends with _exit, before graphstep's release thread ran) leave
  // theirs to the next process that makes an id or joins, as a killed job does.
  void TearDown() override {
    if (IsSkipped()) return;
    static_cast<void>(gn::nccl_comm::new_unique_id());
    EXPECT_EQ(segments_named(own_segments()), std::vector<std::string>{})
        << "shared memory outlived the ranks";
  }
  // Runs `body(rank, checks)` in `ranks` child processes; each must exit 0 within the limit.
  static void run_ranks(int ranks, std::function<void(int, rank_checks&)> const& body,
                        std::chrono::seconds limit = std::chrono::seconds{60}) {
    std::vector<pid_t> children;
    for (int rank = 0; rank < ranks; ++rank) {
      pid_t const child = fork();
      ASSERT_GE(child, 0) << "fork failed";
      if (child == 0) {
        rank_checks checks{rank, 0};
        try {
          body(rank, checks);
        } catch (std::exception const& e) {
          checks.expect(false, std::string{"threw: "} + e.what());
        }
        std::fflush(stderr);
        _exit(checks.failures == 0 ? 0 : 1);
      }
      children.push_back(child);
    }
    auto const deadline = std::chrono::steady_clock::now() + limit;
    for (std::size_t rank = 0; rank < children.size(); ++rank) {
      int status = 0;
      while (waitpid(children[rank], &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
          for (pid_t child : children) kill(child, SIGKILL);
          waitpid(children[rank], &status, 0);
          ADD_FAILURE() << "rank " << rank << " did not finish within " << limit.count() << " s";
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds{5});
      }
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
          << "rank " << rank << " of " << children.size() << " failed (status " << status << ")";
    }
  }
  // A job of `ranks` ranks with a fresh id: each rank makes its communicator and a stream, then
  // runs `body`, whose locals go before them.
  static void run_job(
      int ranks,
      std::function<void(int, gn::nccl_comm&, gs::cuda::stream&, rank_checks&)> const& body,
      std::chrono::seconds limit = std::chrono::seconds{60}) {
    shared_unique_id() = gn::nccl_comm::new_unique_id();
    run_ranks(
        ranks,
        [&](int rank, rank_checks& checks) {
          auto comm = gn::nccl_comm::from_unique_id(shared_unique_id(), rank, ranks);
          gs::cuda::stream stream;
          body(rank, comm, stream, checks);
        },
        limit);
  }
};

std::vector<float> download(float const* device, std::size_t n, gs::cuda::stream_view stream) {
  std::vector<float> host(n);
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(host.data(), device, n * sizeof(float), cudaMemcpyDeviceToHost,
                                     stream.get()));
  stream.synchronize();
  return host;
}

float* upload(std::vector<float> const& host, gs::cuda::stream_view stream) {
  void* device = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaMalloc(&device, host.size() * sizeof(float)));
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(device, host.data(), host.size() * sizeof(float),
                                     cudaMemcpyHostToDevice, stream.get()));
  stream.synchronize();
  return static_cast<float*>(device);
}

gs::device_span view(float* p, std::size_t n) {
  return {p, gs::dtype::float32, n};
}

// Rank r's element i: distinct per rank and element, exact in fp32 sums.
float value(int rank, std::size_t i) {
  return static_cast<float>(rank + 1) * 10.0F + static_cast<float>(i);
}

void every_collective(int ranks, int rank, gn::nccl_comm& comm, gs::cuda::stream& stream,
                      rank_checks& checks) {
  std::size_t const n = 300'000;  // more than one exchange of the simulated transport
  std::vector<float> mine(n);
  for (std::size_t i = 0; i < n; ++i) mine[i] = value(rank, i);
  float* send = upload(mine, stream);
  float* receive = upload(std::vector<float>(n * static_cast<std::size_t>(ranks)), stream);
  auto const r = static_cast<float>(ranks);
  std::vector<float> sum(n);
  std::vector<float> maximum(n);
  for (std::size_t i = 0; i < n; ++i) {
    for (int q = 0; q < ranks; ++q) sum[i] += value(q, i);
    maximum[i] = value(ranks - 1, i);
  }
  gn::all_reduce(view(send, n), view(receive, n), gn::reduce_op::sum, comm.view(), stream);
  checks.expect_values(download(receive, n, stream), sum, "all_reduce sum");
  gn::all_reduce(view(send, n), view(receive, n), gn::reduce_op::max, comm.view(), stream);
  checks.expect_values(download(receive, n, stream), maximum, "all_reduce max");
  gn::all_reduce(view(send, n), view(receive, n), gn::reduce_op::avg, comm.view(), stream);
  auto const average = download(receive, n, stream);
  for (std::size_t i = 0; i < n; i += 997) {
    checks.expect(std::fabs(average[i] - sum[i] / r) <= 1e-5F * sum[i], "all_reduce avg");
  }
  // all_gather: rank q's block holds rank q's values.
  std::size_t const block = n / static_cast<std::size_t>(ranks);
  gn::all_gather(view(send, block), view(receive, block * static_cast<std::size_t>(ranks)),
                 comm.view(), stream);
  auto const gathered = download(receive, block * static_cast<std::size_t>(ranks), stream);
  for (int q = 0; q < ranks; ++q) {
    checks.expect(gathered[static_cast<std::size_t>(q) * block + 7] == value(q, 7),
                  "all_gather block " + std::to_string(q));
  }
  // reduce_scatter: this rank receives the sums of its block.
  gn::reduce_scatter(view(send, block * static_cast<std::size_t>(ranks)), view(receive, block),
                     gn::reduce_op::sum, comm.view(), stream);
  auto const scattered = download(receive, block, stream);
  checks.expect(scattered[3] == sum[static_cast<std::size_t>(rank) * block + 3], "reduce_scatter");
  // broadcast from the last rank.
  gn::broadcast(view(send, n), view(receive, n), ranks - 1, comm.view(), stream);
  auto const broadcast = download(receive, n, stream);
  checks.expect(broadcast[11] == value(ranks - 1, 11), "broadcast");

  // Captured: the graph reads its inputs at each replay.
  gs::graphs::graph_exec graph;
  gs::graphs::capture(graph, stream, [&] {
    gn::all_reduce(view(send, n), view(receive, n), gn::reduce_op::sum, comm.view(), stream);
  });
  gn::verify_captured_sequence(comm.view(), stream);
  for (int replay = 1; replay <= 3; ++replay) {
    std::vector<float> scaled = mine;
    for (float& x : scaled) x *= static_cast<float>(replay);
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(send, scaled.data(), n * sizeof(float),
                                       cudaMemcpyHostToDevice, stream.get()));
    graph.replay(stream);
    std::vector<float> want = sum;
    for (float& x : want) x *= static_cast<float>(replay);
    checks.expect_values(download(receive, n, stream), want,
                         "captured all_reduce, replay " + std::to_string(replay));
  }
  GRAPHSTEP_CUDA_TRY(cudaFree(send));
  GRAPHSTEP_CUDA_TRY(cudaFree(receive));
}

}  // namespace

TEST_F(ranks_test, every_collective_eager_and_captured_with_1_2_and_4_ranks) {
  for (int ranks : {1, 2, 4}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks");
    run_job(ranks,
            [ranks](int rank, gn::nccl_comm& comm, gs::cuda::stream& stream, rank_checks& checks) {
              every_collective(ranks, rank, comm, stream, checks);
            });
  }
}

TEST_F(ranks_test, a_rank_that_never_joins_a_captured_collective_fails_the_others_in_time) {
  run_job(2, [](int rank, gn::nccl_comm& comm, gs::cuda::stream& stream, rank_checks& checks) {
    std::size_t const n = 1024;
    float* x = upload(std::vector<float>(n, 1.0F), stream);
    gn::warm_up(comm.view(), stream);
    gs::graphs::graph_exec graph;
    gs::graphs::capture(graph, stream, [&] {
      gn::all_reduce(view(x, n), view(x, n), gn::reduce_op::sum, comm.view(), stream);
    });
    if (rank == 1) return;  // never replays: its peer's collective cannot complete
    gn::watchdog_options options;
    options.timeout = std::chrono::milliseconds{300};
    options.background = true;
    options.poll_interval = std::chrono::milliseconds{10};
    gn::watchdog dog{comm.view(), options};
    checks.expect_nccl_error_within(std::chrono::seconds{10}, "step 1", "the hung step finished",
                                    [&] {
                                      graph.replay(stream);
                                      dog.launched(stream, 1);
                                      dog.wait();
                                    });
    // The aborted collective's kernel exited: the stream drains and tear-down finishes.
    stream.synchronize();
  });
}

// Buckets made ready in different orders on different ranks (backward need not finish them in
// the same order everywhere) must still be reduced bucket with bucket: NCCL pairs collectives by
// their order, so equal-sized buckets launched out of order would average the wrong data.
TEST_F(ranks_test, buckets_made_ready_in_different_orders_are_reduced_bucket_by_bucket) {
  run_job(2, [](int rank, gn::nccl_comm& comm, gs::cuda::stream& stream, rank_checks& checks) {
    std::size_t const n = 1024;  // per gradient; one bucket each, all of the same size
    auto const plan =
        gn::plan_buckets(gs::dtype::float32, {n, n, n}, n * sizeof(float), n * sizeof(float));
    checks.expect(plan.buckets.size() == 3, "three buckets");
    std::vector<float> mine(plan.buffer_count, 0.0F);
    for (std::size_t t = 0; t < 3; ++t) {
      for (std::size_t i = 0; i < n; ++i)
        mine[plan.offsets[t] + i] = value(rank, i) * static_cast<float>(t + 1);
    }
    float* gradients = upload(mine, stream);
    gn::bucketed_all_reduce reducer{
        comm.view(), {gradients, gs::dtype::float32, mine.size()}, plan};
    std::vector<std::size_t> const order =
        rank == 0 ? std::vector<std::size_t>{2, 0, 1} : std::vector<std::size_t>{0, 1, 2};
    for (std::size_t index : order) reducer.bucket_ready(index, stream);
    reducer.join(stream);
    auto const got = download(gradients, mine.size(), stream);
    for (std::size_t t = 0; t < 3; ++t) {
      std::vector<float> want(n);
      for (std::size_t i = 0; i < n; ++i)
        want[i] = (value(0, i) + value(1, i)) / 2.0F * static_cast<float>(t + 1);
      std::vector<float> const bucket(
          got.begin() + static_cast<std::ptrdiff_t>(plan.offsets[t]),
          got.begin() + static_cast<std::ptrdiff_t>(plan.offsets[t] + n));
      checks.expect_values(bucket, want, "bucket " + std::to_string(t));
    }
    GRAPHSTEP_CUDA_TRY(cudaFree(gradients));
  });
}

// ready_through(count) reduces exactly the buckets a finished prefix of the buffer covers, once
// each: the rest keep each rank's own values until a later call or all() covers them.
TEST_F(ranks_test, ready_through_reduces_the_buckets_a_finished_prefix_covers) {
  run_job(2, [](int rank, gn::nccl_comm& comm, gs::cuda::stream& stream, rank_checks& checks) {
    std::size_t const n = 1024;  // per gradient; one bucket each
    auto const plan =
        gn::plan_buckets(gs::dtype::float32, {n, n, n}, n * sizeof(float), n * sizeof(float));
    checks.expect(plan.buckets.size() == 3, "three buckets");
    std::vector<float> mine(plan.buffer_count, 0.0F);
    for (std::size_t t = 0; t < 3; ++t) {
      for (std::size_t i = 0; i < n; ++i) {
        mine[plan.offsets[t] + i] = value(rank, i) * static_cast<float>(t + 1);
      }
    }
    float* gradients = upload(mine, stream);
    gn::bucketed_all_reduce reducer{
        comm.view(), {gradients, gs::dtype::float32, mine.size()}, plan};
    auto const bucket = [&](std::vector<float> const& all, std::size_t t) {
      auto const first = all.begin() + static_cast<std::ptrdiff_t>(plan.offsets[t]);
      return std::vector<float>(first, first + static_cast<std::ptrdiff_t>(n));
    };
    auto const averaged = [&](std::size_t t) {
      std::vector<float> want(n);
      for (std::size_t i = 0; i < n; ++i) {
        want[i] = (value(0, i) + value(1, i)) / 2.0F * static_cast<float>(t + 1);
      }
      return want;
    };
    std::size_t const first_end = plan.buckets[0].offset + plan.buckets[0].count;
    std::size_t const second_end = plan.buckets[1].offset + plan.buckets[1].count;
    reducer.ready_through(0, stream);
    checks.expect(reducer.buckets_ready() == 0, "nothing finished, nothing ready");
    reducer.ready_through(first_end, stream);
    reducer.ready_through(second_end - 1, stream);  // the second not yet finished
    reducer.ready_through(first_end, stream);       // the same extent again
    checks.expect(reducer.buckets_ready() == 1, "only the first bucket ready");
    reducer.join(stream);
    auto got = download(gradients, mine.size(), stream);
    checks.expect_values(bucket(got, 0), averaged(0), "bucket 0, covered");
    checks.expect_values(bucket(got, 1), bucket(mine, 1), "bucket 1, not covered");
    checks.expect_values(bucket(got, 2), bucket(mine, 2), "bucket 2, not covered");
    reducer.ready_through(plan.buffer_count + 1024, stream);  // past the end: all of them
    checks.expect(reducer.buckets_ready() == 3, "every bucket ready");
    reducer.join(stream);
    got = download(gradients, mine.size(), stream);
    for (std::size_t t = 0; t < 3; ++t) {
      checks.expect_values(bucket(got, t), averaged(t), "bucket " + std::to_string(t));
    }
    GRAPHSTEP_CUDA_TRY(cudaFree(gradients));
  });
}

namespace {

// A group whose collectives `drop(send, receive, n)` issues and then drops: none of them runs,
// and the communicator goes on in step (the next all-reduce sums both ranks).
void expect_group_dropped(int rank, gn::nccl_comm& comm, gs::cuda::stream& stream,
                          rank_checks& checks,
                          std::function<void(float*, float*, std::size_t)> const& drop) {
  std::size_t const n = 1024;
  float* send = upload(std::vector<float>(n, value(rank, 0)), stream);
  float* receive = upload(std::vector<float>(n, 0.0F), stream);
  drop(send, receive, n);
  stream.synchronize();
  checks.expect_values(download(receive, n, stream), std::vector<float>(n, 0.0F),
                       "the dropped group's all-reduce ran");
  gn::all_reduce(view(send, n), view(receive, n), gn::reduce_op::sum, comm.view(), stream);
  checks.expect_values(download(receive, n, stream),
                       std::vector<float>(n, value(0, 0) + value(1, 0)),
                       "the next all-reduce after the dropped group");
  GRAPHSTEP_CUDA_TRY(cudaFree(send));
  GRAPHSTEP_CUDA_TRY(cudaFree(receive));
}

}  // namespace

// NCCL's own rule, which group_guard relies on: a call that fails inside a group makes
// ncclGroupEnd return its error and launch none of the group's collectives.
TEST_F(ranks_test, a_call_that_fails_inside_a_group_drops_the_whole_group) {
  run_job(2, [](int rank, gn::nccl_comm& comm, gs::cuda::stream& stream, rank_checks& checks) {
    expect_group_dropped(
        rank, comm, stream, checks, [&](float* send, float* receive, std::size_t n) {
          checks.expect(ncclGroupStart() == ncclSuccess, "ncclGroupStart");
          checks.expect(ncclAllReduce(send, receive, n, ncclFloat32, ncclSum, comm.get(),
                                      stream.get()) == ncclSuccess,
                        "the valid all-reduce is queued");
          checks.expect(ncclAllReduce(send, receive, n, ncclFloat32, ncclSum, nullptr,
                                      stream.get()) == ncclInvalidArgument,
                        "an all-reduce on no communicator fails");
          checks.expect(ncclGroupEnd() == ncclInvalidArgument,
                        "ncclGroupEnd returns the group's error");
        });
  });
}

// An exception that leaves a group_guard's scope between collectives: launching the group's
// first part would pair this rank's collectives with its peers' in the wrong order. None of
// them runs, and the communicator goes on in step.
TEST_F(ranks_test, an_exception_inside_a_group_guard_launches_none_of_its_collectives) {
  run_job(2, [](int rank, gn::nccl_comm& comm, gs::cuda::stream& stream, rank_checks& checks) {
    expect_group_dropped(rank, comm, stream, checks,
                         [&](float* send, float* receive, std::size_t n) {
                           try {
                             gn::group_guard group;
                             gn::all_reduce(view(send, n), view(receive, n), gn::reduce_op::sum,
                                            comm.view(), stream);
                             throw std::runtime_error{"a failure between the group's collectives"};
                           } catch (std::runtime_error const&) {
                           }
                         });
  });
}

// A rank that never comes to the sequence check (it failed to capture, say) must not leave the
// others waiting in its all-gather forever.
TEST_F(ranks_test, a_rank_that_skips_the_sequence_check_fails_the_others_in_time) {
  run_job(
      2,
      [](int rank, gn::nccl_comm& comm, gs::cuda::stream& stream, rank_checks& checks) {
        std::size_t const n = 256;
        float* x = upload(std::vector<float>(n, 1.0F), stream);
        gn::warm_up(comm.view(), stream);
        gs::graphs::graph_exec graph;
        gs::graphs::capture(graph, stream, [&] {
          gn::all_reduce(view(x, n), view(x, n), gn::reduce_op::sum, comm.view(), stream);
        });
        if (rank == 1) return;  // never checks
        checks.expect_nccl_error_within(std::chrono::seconds{10}, "did not join the sequence check",
                                        "the sequence check passed without its peer", [&] {
                                          gn::verify_captured_sequence(
                                              comm.view(), stream, std::chrono::milliseconds{300});
                                        });
        stream.synchronize();  // the aborted all-gather's kernel exited
      },
      std::chrono::seconds{30});
}

// A capture discarded on one rank (its body threw after a collective) leaves no trace in the
// sequence check: its graph never runs, so only the captures that produced graphs count.
TEST_F(ranks_test, a_discarded_capture_does_not_count_in_the_sequence_check) {
  run_job(2, [](int rank, gn::nccl_comm& comm, gs::cuda::stream& stream, rank_checks& checks) {
    std::size_t const n = 256;
    float* x = upload(std::vector<float>(n, 1.0F), stream);
    gn::warm_up(comm.view(), stream);
    if (rank == 0) {
      try {
        gs::graphs::graph_exec discarded;
        gs::graphs::capture(discarded, stream, [&] {
          gn::all_gather(view(x, n / 2), view(x, n), comm.view(), stream);
          throw std::runtime_error{"the step failed while it was being captured"};
        });
      } catch (std::runtime_error const&) {
      }
      checks.expect(comm.view().captured().records().empty(),
                    "the discarded capture's collective is still logged");
    }
    gs::graphs::graph_exec graph;
    gs::graphs::capture(graph, stream, [&] {
      gn::all_reduce(view(x, n), view(x, n), gn::reduce_op::sum, comm.view(), stream);
    });
    gn::verify_captured_sequence(comm.view(), stream);
    graph.replay(stream);
    checks.expect_values(download(x, n, stream), std::vector<float>(n, 2.0F), "the replay");
  });
}

// Where NCCL's transport reports a peer that is gone (GRAPHSTEP_SIM_NCCL_PEER_FAILURE=
// remote_error, as network transports do), ncclRemoteError becomes an error at once, long
// before the watchdog's deadline: from the call, or from the watchdog.
TEST_F(ranks_test, a_peer_that_exits_is_reported_as_a_remote_error_before_the_deadline) {
  // Rank 0 says through the pipe when its first call has returned: a peer that left as soon as
  // its own side of that collective was done could fail rank 0's call still polling for it.
  std::array<int, 2> first_call_done{};
  ASSERT_EQ(pipe(first_call_done.data()), 0);
  run_job(2, [&](int rank, gn::nccl_comm& comm, gs::cuda::stream& stream, rank_checks& checks) {
    ::setenv("GRAPHSTEP_SIM_NCCL_PEER_FAILURE", "remote_error", 1);
    std::size_t const n = 256;
    float* x = upload(std::vector<float>(n, 1.0F), stream);
    // Connected first: a peer gone before then fails the collective's call itself.
    gn::all_reduce(view(x, n), view(x, n), gn::reduce_op::sum, comm.view(), stream);
    stream.synchronize();
    char done = 1;
    if (rank == 0) checks.expect(write(first_call_done[1], &done, 1) == 1, "write to the pipe");
    if (rank == 1) {
      checks.expect(read(first_call_done[0], &done, 1) == 1, "read from the pipe");
      _exit(0);  // gone without a word, its communicator never destroyed
    }
    gn::watchdog_options options;
    options.timeout = std::chrono::seconds{60};
    options.background = true;
    options.poll_interval = std::chrono::milliseconds{10};
    gn::watchdog dog{comm.view(), options};
    // NCCL may report the error while the call still waits for its launch, or after.
    checks.expect_nccl_error_within(
        std::chrono::seconds{10}, "ncclRemoteError", "the step finished without its peer", [&] {
          gn::all_reduce(view(x, n), view(x, n), gn::reduce_op::sum, comm.view(), stream);
          dog.launched(stream, 1);
          dog.wait();
        });
    stream.synchronize();
  });
  close(first_call_done[0]);
  close(first_call_done[1]);
}

// A rank that never creates its communicator: the others' creation fails within its timeout
// instead of waiting forever (a non-blocking initialization, polled against the deadline).
TEST_F(ranks_test, a_rank_that_never_joins_the_initialization_fails_the_others_in_time) {
  shared_unique_id() = gn::nccl_comm::new_unique_id();
  run_ranks(3, [](int rank, rank_checks& checks) {
    if (rank == 2) return;  // never joins
    gn::nccl_comm_options options;
    options.init_timeout = std::chrono::milliseconds{500};
    checks.expect_nccl_error_within(
        std::chrono::seconds{5}, "did not all join the communicator within 500 ms",
        "the communicator was made without rank 2",
        [&] { auto comm = gn::nccl_comm::from_unique_id(shared_unique_id(), rank, 3, options); });
  });
}

// NCCL connects the peers at a communicator's first collective, so that call waits while a
// peer has not issued it. An abort from another thread ends the wait at once, and never frees
// the communicator under the call: graphstep's communicator is non-blocking, so the call waits
// with no lock held instead of inside NCCL.
TEST_F(ranks_test, an_abort_from_another_thread_ends_a_call_waiting_for_a_peer_at_once) {
  run_job(2, [](int rank, gn::nccl_comm& comm, gs::cuda::stream& stream, rank_checks& checks) {
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::seconds{3});  // never issues the collective
      return;
    }
    std::size_t const n = 64;
    float* x = upload(std::vector<float>(n, 1.0F), stream);
    std::chrono::steady_clock::time_point aborted;
    std::thread aborter{[&] {
      std::this_thread::sleep_for(std::chrono::milliseconds{300});
      aborted = std::chrono::steady_clock::now();
      comm.abort();
    }};
    try {
      gn::all_reduce(view(x, n), view(x, n), gn::reduce_op::sum, comm.view(), stream);
      checks.expect(false, "the collective was issued without its peer");
    } catch (gs::nccl_error const& e) {
      checks.expect(std::string{e.what()}.find("aborted by nccl_comm::abort") != std::string::npos,
                    e.what());
    }
    auto const ended = std::chrono::steady_clock::now();
    aborter.join();
    checks.expect(
        ended - aborted < std::chrono::milliseconds{1000},
        "the call ended " +
            std::to_string(
                std::chrono::duration_cast<std::chrono::milliseconds>(ended - aborted).count()) +
            " ms after the abort");
    stream.synchronize();
  });
}

// Plain NCCL with non-blocking communicators, as NCCL 2.28's source has them: initialization,
// collectives outside a group and a group's end answer ncclInProgress; the communicator refuses
// other calls until ncclCommGetAsyncError reports ncclSuccess (ncclCommEnsureReady).
TEST_F(ranks_test, non_blocking_communicators_answer_in_progress_until_their_work_is_issued) {
  shared_unique_id() = gn::nccl_comm::new_unique_id();
  run_ranks(2, [](int rank, rank_checks& checks) {
    auto wait_ready = [&](ncclComm_t comm, char const* what) {
      ncclResult_t state = ncclInProgress;
      auto const deadline = std::chrono::steady_clock::now() + std::chrono::seconds{20};
      while (state == ncclInProgress && std::chrono::steady_clock::now() < deadline) {
        checks.expect(ncclCommGetAsyncError(comm, &state) == ncclSuccess, "ncclCommGetAsyncError");
      }
      checks.expect(state == ncclSuccess,
                    std::string{what} + " ended with " + ncclGetErrorString(state));
    };
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds{300});
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    ncclUniqueId id;
    std::memcpy(&id, shared_unique_id().data(), sizeof id);
    ncclResult_t const started = ncclCommInitRankConfig(&comm, 2, id, rank, &config);
    checks.expect(started == ncclInProgress || started == ncclSuccess, "ncclCommInitRankConfig");
    if (rank == 0) {
      checks.expect(started == ncclInProgress, "rank 0's initialization finished without rank 1");
      int count = 0;
      checks.expect(ncclCommCount(comm, &count) == ncclInvalidArgument,
                    "ncclCommCount answered while the initialization was under way");
    }
    wait_ready(comm, "the initialization");
    int count = 0;
    checks.expect(ncclCommCount(comm, &count) == ncclSuccess && count == 2, "ncclCommCount");
    gs::cuda::stream stream;
    std::size_t const n = 1000;
    float* x = upload(std::vector<float>(n, static_cast<float>(rank + 1)), stream);
    checks.expect(
        ncclAllReduce(x, x, n, ncclFloat32, ncclSum, comm, stream.get()) == ncclInProgress,
        "ncclAllReduce on a non-blocking communicator did not answer ncclInProgress");
    wait_ready(comm, "ncclAllReduce");
    checks.expect_values(download(x, n, stream), std::vector<float>(n, 3.0F), "ncclAllReduce");
    checks.expect(ncclGroupStart() == ncclSuccess, "ncclGroupStart");
    checks.expect(ncclAllReduce(x, x, n, ncclFloat32, ncclSum, comm, stream.get()) == ncclSuccess,
                  "ncclAllReduce inside a group");
    checks.expect(ncclGroupEnd() == ncclInProgress, "a non-blocking group's end");
    // A call before the group's launch is known to be done is refused.
    ncclResult_t state = ncclInProgress;
    checks.expect(ncclCommGetAsyncError(comm, &state) == ncclSuccess, "ncclCommGetAsyncError");
    if (state == ncclInProgress) {
      checks.expect(
          ncclAllReduce(x, x, n, ncclFloat32, ncclSum, comm, stream.get()) == ncclInvalidArgument,
          "a collective was accepted while the group's launch was in progress");
    }
    wait_ready(comm, "the group");
    checks.expect_values(download(x, n, stream), std::vector<float>(n, 6.0F), "the group");
    GRAPHSTEP_CUDA_TRY(cudaFree(x));
    checks.expect(ncclCommDestroy(comm) == ncclSuccess, "ncclCommDestroy");
  });
}

// The watchdog's deadline covers a call that waits for a peer, not only launched steps: the
// first collective of a kind waits until every rank has issued it.
TEST_F(ranks_test, a_background_watchdog_ends_a_call_whose_peer_never_comes) {
  run_job(2, [](int rank, gn::nccl_comm& comm, gs::cuda::stream& stream, rank_checks& checks) {
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::seconds{3});  // never issues the collective
      return;
    }
    std::size_t const n = 64;
    float* x = upload(std::vector<float>(n, 1.0F), stream);
    gn::watchdog_options options;
    options.timeout = std::chrono::milliseconds{400};
    options.background = true;
    options.poll_interval = std::chrono::milliseconds{20};
    gn::watchdog dog{comm.view(), options};
    checks.expect_nccl_error_within(
        std::chrono::seconds{2}, "an NCCL call has been in progress",
        "the collective was issued without its peer",
        [&] { gn::all_reduce(view(x, n), view(x, n), gn::reduce_op::sum, comm.view(), stream); });
    stream.synchronize();
  });
}

// A step guard's deadline starts before the step is enqueued: an eager collective that blocks
// the enqueueing thread on a peer that never comes is released at the deadline, and the guard
// names the cause; every later call of the guard throws the same.
TEST_F(ranks_test, a_guarded_step_whose_peer_never_comes_ends_at_the_deadline) {
  run_job(2, [](int rank, gn::nccl_comm& comm, gs::cuda::stream& stream, rank_checks& checks) {
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::seconds{3});  // never issues the collective
      return;
    }
    std::size_t const n = 64;
    float* x = upload(std::vector<float>(n, 1.0F), stream);
    gn::step_guard guard{comm.view(),
                         {std::chrono::milliseconds{400}, std::chrono::milliseconds{400}}};
    checks.expect_nccl_error_within(
        std::chrono::seconds{2}, "rank 0", "the step whose peer never came finished", [&] {
          guard.step(stream, [&] {
            gn::all_reduce(view(x, n), view(x, n), gn::reduce_op::sum, comm.view(), stream);
          });
          guard.wait();
        });
    checks.expect_nccl_error_within(std::chrono::milliseconds{100}, "rank 0",
                                    "an aborted guard ran another step",
                                    [&] { guard.step(stream, [] {}); });
    checks.expect(guard.steps() == 1, "the refused step was not counted");
    stream.synchronize();
  });
}

// A step whose issue throws leaves the guard usable: what it enqueued is watched until it
// finishes, the next steps run, and the sequence check after a capture passes on every rank.
TEST_F(ranks_test, a_step_guard_survives_a_step_that_throws_and_checks_the_captures) {
  run_job(2, [](int, gn::nccl_comm& comm, gs::cuda::stream& stream, rank_checks& checks) {
    std::size_t const n = 64;
    float* x = upload(std::vector<float>(n, 1.0F), stream);
    gn::step_guard guard{comm.view(), {std::chrono::seconds{20}, std::chrono::seconds{20}}};
    auto const reduce = [&] {
      gn::all_reduce(view(x, n), view(x, n), gn::reduce_op::sum, comm.view(), stream);
    };
    try {
      guard.step(stream, [&] {
        reduce();
        throw std::runtime_error{"the step's own failure"};
      });
      checks.expect(false, "the step's exception was swallowed");
    } catch (std::runtime_error const& e) {
      checks.expect(std::string{e.what()} == "the step's own failure", e.what());
    }
    guard.wait();
    gs::graphs::graph_exec step;
    gs::graphs::capture(step, stream, reduce);
    guard.captured(stream);
    for (int i = 0; i < 3; ++i) guard.replay(step, stream);
    guard.wait();
    checks.expect(guard.steps() == 4, "four steps were run");
    checks.expect_values(download(x, n, stream), std::vector<float>(n, 16.0F), "the reductions");
    GRAPHSTEP_CUDA_TRY(cudaFree(x));
  });
}

// A launcher that gives every rank the same NCCL_COMM_ID needs no exchange of the id: every
// process's ncclGetUniqueId derives the same id from the address, and the ranks, started apart,
// join one communicator. A job killed during its rendezvous leaves its segment behind; the next
// job at that address starts afresh, and nothing outlives its ranks.
TEST_F(ranks_test, ranks_given_one_nccl_comm_id_join_one_communicator_and_leave_nothing_behind) {
  std::string const port = std::to_string(20000 + getpid() % 20000);
  std::string const address = "127.0.0.1:" + port;
  std::string const segment = "graphstep-nccl-at-127.0.0.1-" + port;
  ASSERT_EQ(segments_named(segment), std::vector<std::string>{});
  {
    ::setenv("NCCL_COMM_ID", address.c_str(), 1);
    ncclUniqueId first{};
    ncclUniqueId second{};
    EXPECT_EQ(ncclGetUniqueId(&first), ncclSuccess);
    EXPECT_EQ(ncclGetUniqueId(&second), ncclSuccess);
    EXPECT_EQ(std::memcmp(first.internal, second.internal, sizeof first.internal), 0);
    ::setenv("NCCL_COMM_ID", "[::1", 1);  // no closing bracket
    EXPECT_EQ(ncclGetUniqueId(&first), ncclInvalidArgument);
    ::unsetenv("NCCL_COMM_ID");
  }
  run_ranks(1, [&](int, rank_checks& checks) {
    ::setenv("NCCL_COMM_ID", address.c_str(), 1);
    ncclUniqueId id{};
    checks.expect(ncclGetUniqueId(&id) == ncclSuccess, "ncclGetUniqueId");
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    checks.expect(ncclCommInitRankConfig(&comm, 2, id, 0, &config) == ncclInProgress,
                  "rank 0 of 2 joined alone");
    std::fflush(stderr);
    _exit(checks.failures == 0 ? 0 : 1);  // killed before its peer came: nobody tidies up
  });
  EXPECT_EQ(segments_named(segment).size(), 1U) << "the killed job's segment";
  std::size_t const n = 1024;
  run_ranks(2, [&](int rank, rank_checks& checks) {
    ::setenv("NCCL_COMM_ID", address.c_str(), 1);
    ::setenv("RANK", std::to_string(rank).c_str(), 1);
    ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
    ::setenv("WORLD_SIZE", "2", 1);
    ::setenv("LOCAL_WORLD_SIZE", "2", 1);
    auto comm = gn::communicator_from_environment();
    checks.expect(
        comm.view().size() == 2 && comm.view().rank() == rank,
        "rank " + std::to_string(comm.view().rank()) + " of " + std::to_string(comm.view().size()));
    gs::cuda::stream stream;
    float* x = upload(std::vector<float>(n, value(rank, 0)), stream);
    gn::all_reduce(view(x, n), view(x, n), gn::reduce_op::sum, comm.view(), stream);
    checks.expect_values(download(x, n, stream), std::vector<float>(n, value(0, 0) + value(1, 0)),
                         "all_reduce over NCCL_COMM_ID");
    GRAPHSTEP_CUDA_TRY(cudaFree(x));
  });
  EXPECT_EQ(segments_named(segment), std::vector<std::string>{});
}

// verify_replay runs one rank's step alone, so a graph holding a collective of several ranks is
// refused before anything runs: the rank issues nothing its peer could pair with, and the ranks
// then replay the graph together as usual.
TEST_F(ranks_test, verify_replay_refuses_a_collective_of_several_ranks_and_the_peer_goes_on) {
  run_job(2, [](int rank, gn::nccl_comm& comm, gs::cuda::stream& stream, rank_checks& checks) {
    std::size_t const n = 256;
    float* send = upload(std::vector<float>(n, value(rank, 0)), stream);
    float* recv = upload(std::vector<float>(n, 0.0F), stream);
    gn::warm_up(comm.view(), stream);
    auto const step = [&](gs::cuda::stream_view s) {
      gn::all_reduce(view(send, n), view(recv, n), gn::reduce_op::sum, comm.view(), s);
    };
    gs::graphs::graph graph;
    gs::graphs::capture(graph, stream, [&] { step(stream); });
    if (rank == 0) {
      auto const started = std::chrono::steady_clock::now();
      try {
        static_cast<void>(gs::diagnostics::verify_replay(
            stream, step, graph, {gs::diagnostics::watch("recv", {recv, gs::dtype::float32, n})}));
        checks.expect(false, "verify_replay ran a collective of two ranks alone");
      } catch (gs::usage_error const& e) {
        checks.expect(
            std::string{e.what()}.find("NCCL collective of several ranks") != std::string::npos,
            e.what());
      }
      checks.expect(std::chrono::steady_clock::now() - started < std::chrono::seconds{5},
                    "the refusal took seconds");
      checks.expect_values(download(recv, n, stream), std::vector<float>(n, 0.0F), "nothing ran");
    }
    gs::graphs::graph_exec exec = graph.instantiate();
    exec.replay(stream);
    checks.expect_values(download(recv, n, stream),
                         std::vector<float>(n, value(0, 0) + value(1, 0)), "the replay");
    GRAPHSTEP_CUDA_TRY(cudaFree(send));
    GRAPHSTEP_CUDA_TRY(cudaFree(recv));
  });
}
