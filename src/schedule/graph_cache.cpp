#include <cuda_runtime_api.h>

#include <algorithm>
#include <graphstep/cuda/check.hpp>
#include <graphstep/error.hpp>
#include <graphstep/schedule/graph_cache.hpp>

namespace graphstep::schedule {

template <typename Policy>
basic_graph_cache<Policy>::basic_graph_cache(Policy policy, step_function step,
                                             memory::memory_pool& pool, graph_cache_options options)
    : policy_{std::move(policy)},
      step_{std::move(step)},
      pool_{pool},
      options_{std::move(options)},
      core_{actions(), options_.warmup_runs, options_.budget_bytes,
            options_.instantiation == bucket_instantiation::update_template} {
  GRAPHSTEP_EXPECTS(static_cast<bool>(step_), "graph_cache: no step function was given");
}

template <typename Policy>
basic_graph_cache<Policy>::~basic_graph_cache() {
  if (core_.template_bucket()) GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaDeviceSynchronize());
}

template <typename Policy>
detail::cache_actions<typename Policy::key_type> basic_graph_cache<Policy>::actions() {
  detail::cache_actions<key_type> a;
  a.run_eager = [this](key_type const& bucket) { step_(bucket, stream_); };
  a.capture = [this](key_type const& bucket, bool instantiate) {
    return capture_bucket(bucket, instantiate);
  };
  a.replay = [this](key_type const& bucket) { graphs_.at(bucket).replay(stream_); };
  a.update = [this](key_type const& template_bucket, key_type const& bucket) {
    return graphs_.at(template_bucket).update_from(graphs_.at(bucket));
  };
  a.instantiate = [this](key_type const& bucket) { graphs_.at(bucket).instantiate(); };
  a.release = [this](key_type const& bucket) { graphs_.erase(bucket); };
  a.wait_idle = [] { GRAPHSTEP_CUDA_TRY(cudaDeviceSynchronize()); };
  return a;
}

template <typename Policy>
std::size_t basic_graph_cache<Policy>::capture_bucket(key_type const& bucket, bool instantiate) {
  std::size_t const mapped_before = pool_.statistics().mapped_bytes;
  graphs::capture_options how;
  how.mode = options_.mode;
  using detail::key_name;  // the integer buckets' name; shape keys bring theirs by lookup
  how.name = options_.name + " bucket " + key_name(bucket);
  how.instantiate = instantiate;
  how.upload = instantiate;
  graphs::graph& target = graphs_[bucket];
  target = graphs::graph{};
  try {
    capture(
        target, stream_, pool_, [&] { step_(bucket, stream_); }, how);
  } catch (...) {
    graphs_.erase(bucket);  // the core counts it as not captured
    throw;
  }
  std::size_t const grown = pool_.statistics().mapped_bytes - mapped_before;
  return std::max(grown, pool_.bytes_held_by(target));
}

template <typename Policy>
typename Policy::choice_type basic_graph_cache<Policy>::run(key_type const& size,
                                                            cuda::stream_view stream) {
  choice_type const choice = policy_.choose(size);
  stream_ = stream;
  core_.count_request(bucket_elements(size), bucket_elements(choice.bucket));
  static_cast<void>(core_.serve(choice.bucket));
  return choice;
}

template <typename Policy>
void basic_graph_cache<Policy>::precapture(cuda::stream_view stream) {
  stream_ = stream;
  core_.precapture(policy_.capture_order());
}

template class basic_graph_cache<bucket_policy>;
template class basic_graph_cache<shape_bucket_policy>;

}  // namespace graphstep::schedule
