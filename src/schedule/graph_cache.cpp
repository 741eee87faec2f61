#include <cuda_runtime_api.h>

#include <algorithm>
#include <exception>
#include <graphstep/cuda/check.hpp>
#include <graphstep/error.hpp>
#include <graphstep/log.hpp>
#include <graphstep/schedule/graph_cache.hpp>
#include <string>
#include <vector>

#include "detail/logger.hpp"

namespace graphstep::schedule {
namespace {

// Each executable waits for its own latest replay: a device-wide wait would break a capture
// under way on another thread.
void wait_for_replays(std::vector<graphs::graph_exec> const& executables) {
  for (graphs::graph_exec const& exec : executables) exec.synchronize();
}

}  // namespace

template <typename Policy>
basic_graph_cache<Policy>::basic_graph_cache(Policy policy, step_function step,
                                             memory::memory_pool& pool, graph_cache_options options)
    : policy_{std::move(policy)},
      step_{std::move(step)},
      pool_{pool},
      options_{std::move(options)},
      core_{actions(*this), policy_.sizes(), options_.lifecycle.warmup_runs, options_.budget_bytes,
            options_.instantiation == graph_instantiation::update_template} {
  executables_.resize(core_.sizes().size());
  captured_.resize(core_.sizes().size());
  graphs::validate(options_.lifecycle, "graph_cache");
  GRAPHSTEP_EXPECTS(static_cast<bool>(step_), "graph_cache: no step function was given");
}

template <typename Policy>
basic_graph_cache<Policy>::~basic_graph_cache() {
  // The template executable may still run another capture size's work, whose graph dies first.
  if (!core_.template_size()) return;
  try {
    wait_for_replays(executables_);
  } catch (std::exception const& e) {
    graphstep::detail::log_lazily(log_level::error, [&] {
      return std::string{"graph_cache: waiting for replays failed, continuing: "} + e.what();
    });
  }
}

// The stream of the request being served is handed down to every action it causes.
template <typename Policy>
detail::cache_actions<cuda::stream_view> basic_graph_cache<Policy>::actions(
    basic_graph_cache& cache) {
  detail::cache_actions<cuda::stream_view> a;
  a.run_eager = [&cache](cuda::stream_view stream, std::size_t slot) {
    cache.step_(cache.core_.sizes()[slot], stream);
  };
  a.capture = [&cache](cuda::stream_view stream, std::size_t slot, bool instantiate) {
    return cache.capture_slot(slot, instantiate, stream);
  };
  a.replay = [&cache](cuda::stream_view stream, std::size_t slot) {
    cache.executables_[slot].replay(stream);
  };
  a.update = [&cache](std::size_t template_slot, std::size_t slot) {
    return cache.executables_[template_slot].update(cache.work_of(slot));
  };
  a.instantiate = [&cache](cuda::stream_view stream, std::size_t slot) {
    graphs::graph_exec& exec = cache.executables_[slot];
    exec = cache.captured_[slot].instantiate(cache.options_.lifecycle.capture.instantiate_flags);
    if (cache.options_.lifecycle.capture.upload) exec.upload(stream);
  };
  a.release = [&cache](std::size_t slot) {
    cache.executables_[slot] = graphs::graph_exec{};
    cache.captured_[slot] = graphs::graph{};
  };
  a.wait_idle = [&cache] { wait_for_replays(cache.executables_); };
  return a;
}

template <typename Policy>
std::size_t basic_graph_cache<Policy>::capture_slot(std::size_t slot, bool instantiate,
                                                    cuda::stream_view stream) {
  key_type const& size = core_.sizes()[slot];
  graphs::capture_options how = options_.lifecycle.capture;
  using detail::describe;  // the integer capture sizes' name; shape keys bring theirs by lookup
  how.name += " size " + describe(size);
  auto const body = [&] { step_(size, stream); };
  std::uint64_t id = 0;
  try {
    if (instantiate) {
      graphs::graph_exec& target = executables_[slot];
      graphs::capture(target, stream, pool_, body, how);
      id = target.id();
    } else {
      graphs::graph& target = captured_[slot];
      graphs::capture(target, stream, pool_, body, how);
      id = target.id();
    }
  } catch (...) {
    executables_[slot] = graphs::graph_exec{};  // the core counts it as not captured
    captured_[slot] = graphs::graph{};
    throw;
  }
  // The memory the graph keeps from every other use; graphs sharing the pool are each charged
  // for what they share, so the budget bounds the pinned memory from above.
  return pool_.bytes_pinned_by(id);
}

template <typename Policy>
graphs::graph const& basic_graph_cache<Policy>::work_of(std::size_t slot) const {
  graphs::graph const& captured = captured_[slot];
  return !captured.empty() ? captured : executables_[slot].source();
}

template <typename Policy>
typename Policy::choice_type basic_graph_cache<Policy>::run(key_type const& size,
                                                            cuda::stream_view stream) {
  choice_type const choice = policy_.choose(size);
  core_.count_request(elements_of(size), elements_of(choice.captured));
  static_cast<void>(core_.serve(choice.slot, stream));
  return choice;
}

template <typename Policy>
void basic_graph_cache<Policy>::precapture(cuda::stream_view stream) {
  core_.precapture(policy_.capture_order(), stream);
}

template class basic_graph_cache<capture_sizes>;
template class basic_graph_cache<capture_shapes>;

}  // namespace graphstep::schedule
