#include <graphstep/error.hpp>
#include <graphstep/schedule/graph_cache.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>

namespace graphstep::schedule {

graph_cache::graph_cache(bucket_policy policy, step_function step, memory_pool& pool,
                         graph_cache_options options)
    : policy_{std::move(policy)},
      step_{std::move(step)},
      pool_{pool},
      options_{std::move(options)},
      budget_{options_.budget_bytes} {
  GRAPHSTEP_EXPECTS(static_cast<bool>(step_), "graph_cache: no step function was given");
  GRAPHSTEP_EXPECTS(options_.warmup_runs >= 0, "graph_cache: warmup_runs must be >= 0");
}

graph_cache::~graph_cache() {
  if (template_bucket_ >= 0) GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaDeviceSynchronize());
}

bool graph_cache::is_captured(std::int64_t bucket) const {
  auto found = entries_.find(bucket);
  return found != entries_.end() && found->second.captured.captured();
}

std::size_t graph_cache::captured_count() const {
  return static_cast<std::size_t>(std::count_if(entries_.begin(), entries_.end(), [](auto& e) {
    return e.second.captured.captured();
  }));
}

std::size_t graph_cache::bytes_of(std::int64_t bucket) const {
  auto found = entries_.find(bucket);
  return found == entries_.end() || !found->second.captured.captured() ? 0 : found->second.bytes;
}

bucket_choice graph_cache::run(std::int64_t size, stream_view stream) {
  bucket_choice const choice = policy_.choose(size);
  stats_.requested_elements += size;
  stats_.padded_elements += choice.padding;
  entry& e = entries_[choice.bucket];
  if (e.captured.captured()) {
    ++stats_.hits;
    replay_bucket(choice.bucket, e, stream);
    return choice;
  }
  ++stats_.misses;
  if (e.eager_runs < options_.warmup_runs) {
    ++e.eager_runs;
    step_(choice.bucket, stream);
    return choice;
  }
  capture_bucket(choice.bucket, e, stream);
  replay_bucket(choice.bucket, e, stream);
  return choice;
}

void graph_cache::precapture(stream_view stream) {
  for (std::int64_t bucket : policy_.capture_order()) {
    entry& e = entries_[bucket];
    if (e.captured.captured()) continue;
    for (; e.eager_runs < options_.warmup_runs; ++e.eager_runs) step_(bucket, stream);
    capture_bucket(bucket, e, stream);
  }
}

void graph_cache::capture_bucket(std::int64_t bucket, entry& e, stream_view stream) {
  std::size_t const mapped_before = pool_.statistics().mapped_bytes;
  auto const start = std::chrono::steady_clock::now();
  capture_options options;
  options.mode = options_.mode;
  options.name = options_.name + " bucket " + std::to_string(bucket);
  bool const template_mode = options_.instantiation == bucket_instantiation::update_template;
  // In template mode only the first bucket is instantiated; the others lend it their work.
  options.instantiate = !template_mode || template_bucket_ < 0;
  options.upload = options.instantiate;
  e.captured = graph{};
  capture(e.captured, stream, pool_, [&] { step_(bucket, stream); }, options);
  stats_.capture_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ++stats_.captures;
  if (template_mode && template_bucket_ < 0) {
    template_bucket_ = bucket;
    template_holds_ = bucket;
  }
  std::size_t const grown = pool_.statistics().mapped_bytes - mapped_before;
  e.bytes = std::max(grown, pool_.bytes_held_by(e.captured));
  // Other buckets run through the template's executable, so it is never evicted and not
  // charged to the budget.
  if (bucket == template_bucket_) return;
  for (std::int64_t victim : budget_.insert(bucket, e.bytes)) evict(victim);
}

void graph_cache::replay_bucket(std::int64_t bucket, entry& e, stream_view stream) {
  budget_.touch(bucket);
  if (!e.captured.empty()) {  // instantiated on its own (each_bucket, or a refused update)
    if (bucket != template_bucket_) {
      e.captured.replay(stream);
      return;
    }
  }
  graph& shared = entries_.at(template_bucket_).captured;
  if (template_holds_ != bucket) {
    if (shared.update_from(e.captured)) {
      ++stats_.updates;
      template_holds_ = bucket;
    } else {
      ++stats_.update_refusals;
      e.captured.instantiate();
      e.captured.replay(stream);
      return;
    }
  }
  shared.replay(stream);
}

void graph_cache::evict(std::int64_t bucket) {
  auto found = entries_.find(bucket);
  if (found == entries_.end()) return;
  ++stats_.evictions;
  if (template_bucket_ >= 0) {
    // The template may still be running this bucket's work; its memory must not be reused
    // before that ends.
    GRAPHSTEP_CUDA_TRY(cudaDeviceSynchronize());
    if (template_holds_ == bucket) template_holds_ = -1;  // its work must not run again
  }
  found->second.captured = graph{};  // returns its memory to the pool
  found->second.bytes = 0;
  budget_.erase(bucket);
}

}  // namespace graphstep::schedule
