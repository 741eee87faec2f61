// graphstep_core: plain C++, includes no CUDA header.
#include "memory/detail/pool_engine.hpp"

#include <algorithm>
#include <graphstep/error.hpp>
#include <sstream>
#include <utility>

#include "detail/address_text.hpp"

namespace graphstep::memory::detail {
namespace {

std::string bytes_text(std::size_t bytes) {
  std::ostringstream out;
  out << bytes << " B";
  if (bytes >= (std::size_t{1} << 20)) {
    out.precision(1);
    out << std::fixed << " (" << static_cast<double>(bytes) / (1 << 20) << " MiB)";
  }
  return out.str();
}

std::size_t round_up(std::size_t bytes, std::size_t unit) {
  return (bytes + unit - 1) / unit * unit;
}

}  // namespace

pool_engine::pool_engine(pool_engine_options const& options, pool_device& device)
    : options_{options}, device_{device}, blocks_{options.alignment, options.graphs_share_memory} {
  GRAPHSTEP_EXPECTS(options.growth_bytes > 0,
                    "pool_options::growth_bytes must be positive (it is the smallest growth step)");
  GRAPHSTEP_EXPECTS(options.growth_bytes <= largest_pool_size,
                    "pool_options::growth_bytes of " + std::to_string(options.growth_bytes) +
                        " bytes is more than any device holds (a negative size converted to "
                        "size_t?); give the smallest step the pool grows by, e.g. 32 MiB");
  // A block keeps its alignment only where the range it is cut from begins on it, and the
  // pool's ranges begin, at best, on a boundary of the granularity it grows by (the reserved
  // virtual range is aligned to it). A larger alignment is never kept, and rounding each
  // request up to it asks the device for more than it holds.
  std::size_t const granularity = device.granularity();
  GRAPHSTEP_EXPECTS(options.alignment <= granularity,
                    "pool_options::alignment of " + std::to_string(options.alignment) +
                        " bytes is more than the " + std::to_string(granularity) +
                        "-byte granularity the pool grows by, on which its ranges begin, so no "
                        "block could keep it: give a power of two from 1 to " +
                        std::to_string(granularity) + " (256 matches cudaMalloc)");
}

pool_engine::~pool_engine() {
  for (auto const& entry : free_events_) device_.forget(entry.second);
  for (auto const& block : uses_) {
    for (auto const& entry : block.second) device_.forget(entry.second);
  }
}

pool_engine::capture_state& pool_engine::capture_of(capture_id capture, stream_id stream) {
  auto found = captures_.find(capture);
  GRAPHSTEP_EXPECTS(found != captures_.end(),
                    "memory_pool: stream " + graphstep::detail::hex_text(stream) +
                        " is being captured, but not by a graphs::capture_scope given this pool. "
                        "Pass this pool to the graphs::capture_scope, or allocate and free this "
                        "pool's blocks outside the capture");
  return found->second;
}

stream_id pool_engine::tag_of(capture_state& capture, stream_id stream) {
  auto found = capture.tags.find(stream);
  if (found != capture.tags.end()) return found->second;
  // Tags count down from just below any_stream: stream identities are addresses, far below.
  ++next_capture_tag_;
  return capture.tags.emplace(stream, any_stream - next_capture_tag_).first->second;
}

std::uintptr_t pool_engine::allocate(std::size_t bytes, stream_id stream,
                                     std::optional<capture_id> capture) {
  GRAPHSTEP_EXPECTS(bytes > 0, "memory_pool::allocate: a request of 0 bytes; ask for at least 1");
  GRAPHSTEP_EXPECTS(bytes <= largest_pool_size,
                    "memory_pool::allocate: a request of " + std::to_string(bytes) +
                        " bytes is more than any device holds (a negative size converted to "
                        "size_t?); check how the size is computed");
  std::lock_guard const lock{mutex_};
  if (capture) {
    capture_state& state = capture_of(*capture, stream);
    std::uintptr_t const address = allocate_in_capture(state, bytes, stream);
    if (timeline_) timeline_->allocated(address, bytes, state.graph, state.plan.has_value());
    return address;
  }
  std::uintptr_t const address = allocate_block(bytes, stream, no_graph);
  if (trace_) traced_ids_[address] = trace_->record_allocate(bytes);
  if (timeline_) timeline_->allocated(address, bytes, no_graph, false);
  return address;
}

std::uintptr_t pool_engine::allocate_in_capture(capture_state& state, std::size_t bytes,
                                                stream_id stream) {
  stream_id const tag = tag_of(state, stream);
  if (state.plan) return state.slab + state.plan->next_allocate(bytes);
  if (auto found = blocks_.allocate(bytes, tag, state.graph)) return found->address;
  // Then blocks freed eagerly on this stream: that work precedes the capture in its order.
  if (auto found = blocks_.allocate(bytes, stream, state.graph)) return found->address;
  return allocate_block(bytes, tag, state.graph);
}

std::uintptr_t pool_engine::allocate_block(std::size_t bytes, stream_id tag, graph_id owner) {
  if (auto found = blocks_.allocate(bytes, tag, owner)) return found->address;
  if (release_completed_streams(tag)) {
    if (auto found = blocks_.allocate(bytes, tag, owner)) return found->address;
  }
  // A capture never waits on eager work: its replays may run on any stream.
  if (owner == no_graph && take_other_streams(tag)) {
    if (auto found = blocks_.allocate(bytes, tag, owner)) return found->address;
  }
  grow(round_up(bytes, blocks_.alignment()), bytes);
  if (auto found = blocks_.allocate(bytes, tag, owner)) return found->address;
  throw_out_of_memory(bytes, "no block fits after growing the pool");
}

bool pool_engine::release_completed_streams(stream_id except) {
  bool released = false;
  for (auto it = free_events_.begin(); it != free_events_.end();) {
    if (it->first == except || !device_.complete(it->second)) {
      ++it;
      continue;
    }
    blocks_.release_stream(it->first);
    device_.forget(it->second);
    it = free_events_.erase(it);
    released = true;
  }
  return released;
}

bool pool_engine::take_other_streams(stream_id stream) {
  bool taken = false;
  for (auto it = free_events_.begin(); it != free_events_.end();) {
    if (it->first == stream) {
      ++it;
      continue;
    }
    if (blocks_.holds_free_blocks_of(it->first)) {
      device_.wait(stream, it->second);
      blocks_.retag_stream(it->first, stream);
      taken = true;
    }
    device_.forget(it->second);
    it = free_events_.erase(it);
  }
  // What `stream` took is ordered on it now: its next free event must cover the wait.
  if (taken) note_eager_free(stream);
  return taken;
}

void pool_engine::note_eager_free(stream_id stream) {
  event_id const event = next_event_++;
  device_.record(event, stream);
  auto [it, inserted] = free_events_.emplace(stream, event);
  if (!inserted) {
    device_.forget(it->second);
    it->second = event;
  }
}

void pool_engine::grow(std::size_t bytes, std::size_t requested) {
  std::size_t const granularity = device_.granularity();
  std::size_t step = round_up(std::max(bytes, options_.growth_bytes), granularity);
  std::size_t const needed = round_up(bytes, granularity);
  std::size_t const mapped = device_.mapped_bytes();
  if (options_.budget_bytes > 0) {
    std::size_t const room = options_.budget_bytes > mapped ? options_.budget_bytes - mapped : 0;
    if (step > room) step = room / granularity * granularity;
    if (step < needed) {
      throw_out_of_memory(requested, "the pool's budget of " + bytes_text(options_.budget_bytes) +
                                         " would be exceeded");
    }
  }
  pool_device::growth grown;
  switch (device_.grow(step, grown)) {
    case pool_device::growth_status::grown: break;
    case pool_device::growth_status::address_range_full:
      throw_out_of_memory(requested, "the pool's reserved address range of " +
                                         bytes_text(device_.reserved_bytes()) +
                                         " is full; create it with a larger "
                                         "pool_options::reserve_bytes");
    case pool_device::growth_status::device_out_of_memory:
      throw_out_of_memory(requested, "the device has no memory left for the pool to grow");
  }
  ++growths_;
  if (grown.extends_region) {
    blocks_.extend_region(grown.base, grown.bytes);
  } else {
    blocks_.add_region(grown.base, grown.bytes);
  }
  if (timeline_) timeline_->segment_grown(grown.base, grown.bytes);
}

void pool_engine::throw_out_of_memory(std::size_t requested, std::string const& reason) const {
  auto const stats = blocks_.stats();
  out_of_memory::details const sizes{requested, stats.bytes_in_use, device_.reserved_bytes(),
                                     options_.budget_bytes, stats.largest_free_block};
  std::ostringstream message;
  message << "memory_pool: cannot allocate " << bytes_text(requested) << ": " << reason
          << ". In use " << bytes_text(stats.bytes_in_use) << ", mapped "
          << bytes_text(device_.mapped_bytes()) << ", reserved "
          << bytes_text(device_.reserved_bytes()) << ", budget "
          << (options_.budget_bytes > 0 ? bytes_text(options_.budget_bytes) : "none")
          << ", largest free block " << bytes_text(stats.largest_free_block)
          << ". Free memory you no longer need, destroy graphs you no longer replay, raise the "
             "budget, or let graphs that never run at once share one pool";
  throw out_of_memory{sizes, message.str()};
}

void pool_engine::record_use(std::uintptr_t address, stream_id stream) {
  std::lock_guard const lock{mutex_};
  auto const block = blocks_.block_at(address);
  GRAPHSTEP_EXPECTS(block && !block->free,
                    "memory_pool::record_use: no live block of this pool starts at " +
                        graphstep::detail::hex_text(address) +
                        "; pass an address that allocate returned and that is not freed");
  event_id const event = next_event_++;
  device_.record(event, stream);
  auto [it, inserted] = uses_[address].emplace(stream, event);
  if (!inserted) {
    device_.forget(it->second);
    it->second = event;
  }
}

void pool_engine::order_free_after_uses(std::uintptr_t address, stream_id stream, bool on_host) {
  auto used = uses_.find(address);
  if (used == uses_.end()) return;
  for (auto const& [user, event] : used->second) {
    if (on_host) {
      device_.synchronize(event);
    } else if (user != stream) {
      device_.wait(stream, event);
    }
  }
  for (auto const& entry : used->second) device_.forget(entry.second);
  uses_.erase(used);
}

void pool_engine::deallocate(std::uintptr_t address, stream_id stream,
                             std::optional<capture_id> capture) {
  GRAPHSTEP_EXPECTS(address != 0, "memory_pool::deallocate: a null pointer was passed");
  std::lock_guard const lock{mutex_};
  // A block with recorded uses is live (its free erases them): a double or foreign free never
  // finds uses to wait for.
  if (capture) {
    capture_state& state = capture_of(*capture, stream);
    order_free_after_uses(address, stream, true);
    stream_id const tag = tag_of(state, stream);
    if (state.plan) {
      GRAPHSTEP_EXPECTS(stream == state.origin,
                        "memory_pool: planned capture '" + state.name +
                            "' freed a block on a side stream; in planned mode free blocks on "
                            "the capturing stream, after joining the side stream");
      GRAPHSTEP_EXPECTS(address >= state.slab,
                        "memory_pool: planned capture '" + state.name + "' freed " +
                            graphstep::detail::hex_text(address) + ", which it did not allocate");
      state.plan->deallocate(address - state.slab);
      if (timeline_) timeline_->freed(address);
      return;
    }
    blocks_.deallocate(address, tag, state.graph);
    if (timeline_) timeline_->freed(address);
    return;
  }
  order_free_after_uses(address, stream, false);
  blocks_.deallocate(address, stream);
  if (timeline_) timeline_->freed(address);
  if (trace_) {
    if (auto traced = traced_ids_.find(address); traced != traced_ids_.end()) {
      trace_->record_deallocate(traced->second);
      traced_ids_.erase(traced);
    }
  }
  note_eager_free(stream);
}

void pool_engine::begin_capture(capture_id capture, graph_id graph, std::string name,
                                stream_id origin) {
  GRAPHSTEP_EXPECTS(graph != no_graph && graph != planned_graph,
                    "memory_pool: a capture needs a graph id other than 0 and 2^64 - 1");
  std::lock_guard const lock{mutex_};
  GRAPHSTEP_EXPECTS(captures_.count(capture) == 0,
                    "memory_pool: the capture of '" + name +
                        "' was already opened on this pool; open each capture once");
  capture_state state;
  state.graph = graph;
  state.name = std::move(name);
  state.origin = origin;
  static_cast<void>(tag_of(state, origin));
  if (next_plan_) {
    // The slab was taken when the plan was made: nothing here grows the pool.
    blocks_.transfer(next_plan_->slab, planned_graph, graph);
    state.slab = next_plan_->slab;
    state.plan.emplace(std::move(next_plan_->trace), std::move(next_plan_->plan));
    next_plan_.reset();
  }
  if (timeline_) timeline_->capture_began(state.graph, state.name);
  captures_.emplace(capture, std::move(state));
}

void pool_engine::join(capture_id capture, stream_id side, stream_id into) {
  std::lock_guard const lock{mutex_};
  capture_state& state = capture_of(capture, side);
  auto const side_tag = state.tags.find(side);
  if (side_tag == state.tags.end() || state.plan) return;  // nothing freed there
  blocks_.retag_stream(side_tag->second, tag_of(state, into));
}

std::string pool_engine::capture_problem(capture_id capture) const {
  std::lock_guard const lock{mutex_};
  auto found = captures_.find(capture);
  if (found == captures_.end() || !found->second.plan || found->second.plan->complete()) return {};
  return "memory_pool: planned capture '" + found->second.name +
         "' made fewer allocations than its warm-up step did; the captured step must allocate "
         "exactly as the traced warm-up (trace a step that takes the same path as the capture)";
}

std::optional<graph_id> pool_engine::finish_capture(capture_id capture, bool success) {
  std::lock_guard const lock{mutex_};
  auto found = captures_.find(capture);
  if (found == captures_.end()) return std::nullopt;
  capture_state const state = std::move(found->second);
  captures_.erase(found);
  // Everything issued in the capture is joined into its origin before it ends, and a replay
  // runs whole: what the capture freed is free for any stream (and marked with its graph).
  for (auto const& entry : state.tags) blocks_.release_stream(entry.second);
  sharing_.clear();
  changed();
  if (timeline_) timeline_->capture_ended(state.graph, success);
  if (!success) {
    blocks_.release_graph(state.graph);
    return std::nullopt;
  }
  live_graphs_.insert(state.graph);
  return state.graph;
}

void pool_engine::release_graph(graph_id graph) noexcept {
  std::lock_guard const lock{mutex_};
  // The graph's outputs go back with it: uses recorded on other streams must be over first.
  for (auto it = uses_.begin(); it != uses_.end();) {
    auto const block = blocks_.block_at(it->first);
    auto const next = std::next(it);
    if (block && !block->free && block->owner == graph && !block->kept_after_graph) {
      try {
        order_free_after_uses(it->first, any_stream, true);
      } catch (...) {  // NOLINT(bugprone-empty-catch): a failed wait leaves a sticky device error
      }
    }
    it = next;
  }
  blocks_.release_graph(graph);
  if (timeline_) timeline_->graph_released(graph);
  live_graphs_.erase(graph);
  sharing_.clear();
  forget_launch(graph, any_stream);
  drop_idle_streams();
  changed();
}

std::vector<graph_id> const& pool_engine::sharing_with(graph_id graph) {
  auto cached = sharing_.find(graph);
  if (cached == sharing_.end()) {
    cached = sharing_.emplace(graph, blocks_.graphs_sharing_memory_with(graph)).first;
  }
  return cached->second;
}

// Forgets the launch of `graph` filed under any stream but `except`.
void pool_engine::forget_launch(graph_id graph, stream_id except) {
  for (auto& [stream, launches] : launches_) {
    if (stream == except) continue;
    launches.erase(graph);  // its event is the graph's own, not the engine's to forget
  }
}

// A stream whose launches have all completed keeps its (empty) entry while it replays, so that
// alternating streams do not make and drop it on every launch; it goes when a graph is released
// or another stream comes.
void pool_engine::drop_idle_streams() {
  for (auto it = launches_.begin(); it != launches_.end();) {
    it = it->second.empty() ? launches_.erase(it) : std::next(it);
  }
}

void pool_engine::before_replay(graph_id graph, stream_id stream) {
  std::lock_guard const lock{mutex_};
  if (live_graphs_.count(graph) == 0) return;
  // Launches on `stream` itself run before this one in its order: only other streams' count.
  std::vector<graph_id> const* sharing = nullptr;
  for (auto& [other_stream, launches] : launches_) {
    if (other_stream == stream || launches.empty()) continue;
    // A graph that marks no block shares nothing, not even with another executable of itself.
    if (sharing == nullptr) sharing = &sharing_with(graph);
    for (auto it = launches.begin(); it != launches.end();) {
      if (!std::binary_search(sharing->begin(), sharing->end(), it->first)) {
        ++it;
        continue;
      }
      if (device_.launch_complete(it->second)) {
        it = launches.erase(it);
        changed();
        continue;
      }
      device_.wait_for_launch(stream, it->second);
      ++ordered_replays_;
      ++it;
    }
  }
}

void pool_engine::after_replay(graph_id graph, stream_id stream, event_id launch,
                               replay_memo& memo) {
  std::lock_guard const lock{mutex_};
  if (live_graphs_.count(graph) == 0) return;
  auto on = launches_.find(stream);
  if (on == launches_.end()) {
    drop_idle_streams();
    on = launches_.try_emplace(stream).first;
    changed();
  }
  auto [found, inserted] = on->second.try_emplace(graph, launch);
  if (inserted) {
    // Its latest launch was on another stream, if any: this one supersedes it.
    if (launches_.size() > 1) forget_launch(graph, stream);
    changed();
  } else if (found->second != launch) {
    found->second = launch;  // another executable's work: its own event
    changed();
  }
  // A replay settled on another stream would skip its wait for this launch: while other
  // streams have launches noted, every launch unsettles them (this one's memo, written below,
  // stays settled). On one stream nothing changes, and replays there stay settled.
  for (auto const& [other_stream, launches] : launches_) {
    if (other_stream != stream && !launches.empty()) {
      changed();
      break;
    }
  }
  // Written last, under the lock: a memo never names a version it did not see whole.
  memo.stream.store(stream, std::memory_order_relaxed);
  memo.launch.store(launch, std::memory_order_relaxed);
  memo.version.store(version_.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

void pool_engine::keep_after_graph(std::uintptr_t address) {
  std::lock_guard const lock{mutex_};
  blocks_.keep_after_graph(address);
  if (timeline_) timeline_->kept_after_graph(address);
}

std::size_t pool_engine::trim() {
  std::lock_guard const lock{mutex_};
  GRAPHSTEP_EXPECTS(captures_.empty(),
                    "memory_pool::trim: a capture into this pool is under way; its allocations "
                    "may still need the memory. Trim after the capture ends");
  // Eager frees still in flight: their blocks may be in use until their streams get there.
  for (auto const& entry : free_events_) device_.synchronize(entry.second);
  release_completed_streams(any_stream);
  std::size_t given_back = 0;
  for (block_allocator::region_tail const& region : blocks_.free_tails()) {
    if (region.free_bytes == 0) continue;
    std::size_t const bytes = device_.shrink(region.base, region.bytes, region.free_bytes);
    if (bytes == 0) continue;
    blocks_.shrink_region(region.base, bytes);
    if (timeline_) timeline_->segment_shrunk(region.base, bytes);
    given_back += bytes;
  }
  trimmed_bytes_ += given_back;
  return given_back;
}

std::vector<block_allocator::region_record> pool_engine::snapshot() const {
  std::lock_guard const lock{mutex_};
  return blocks_.snapshot();
}

pool_statistics pool_engine::stats() const {
  std::lock_guard const lock{mutex_};
  auto const blocks = blocks_.stats();
  pool_statistics out;
  out.reserved_bytes = device_.reserved_bytes();
  out.mapped_bytes = device_.mapped_bytes();
  out.bytes_in_use = blocks.bytes_in_use;
  out.peak_bytes_in_use = blocks.peak_bytes_in_use;
  out.free_bytes = blocks.free_bytes;
  out.largest_free_block = blocks.largest_free_block;
  out.fragmentation = blocks.fragmentation;
  out.growths = growths_;
  out.live_graphs = live_graphs_.size();
  out.ordered_replays = ordered_replays_;
  out.trimmed_bytes = trimmed_bytes_;
  return out;
}

std::size_t pool_engine::bytes_held_by(graph_id graph) const {
  std::lock_guard const lock{mutex_};
  return blocks_.bytes_in_use_by(graph);
}

std::size_t pool_engine::bytes_pinned_by(graph_id graph) const {
  std::lock_guard const lock{mutex_};
  return blocks_.bytes_marked_by(graph);
}

std::vector<event_id> pool_engine::pending_free_events() const {
  std::lock_guard const lock{mutex_};
  std::vector<event_id> events;
  events.reserve(free_events_.size());
  for (auto const& entry : free_events_) events.push_back(entry.second);
  return events;
}

void pool_engine::begin_trace() {
  std::lock_guard const lock{mutex_};
  GRAPHSTEP_EXPECTS(!trace_,
                    "memory_pool::begin_trace: a trace is already being recorded; "
                    "call end_trace first");
  trace_.emplace();
  traced_ids_.clear();
}

allocation_trace pool_engine::end_trace() {
  std::lock_guard const lock{mutex_};
  GRAPHSTEP_EXPECTS(trace_,
                    "memory_pool::end_trace: no trace is being recorded; call "
                    "begin_trace before the warm-up step");
  allocation_trace trace = std::move(*trace_);
  trace_.reset();
  traced_ids_.clear();
  return trace;
}

allocation_plan pool_engine::plan_next_capture(allocation_trace trace) {
  GRAPHSTEP_EXPECTS(trace.allocation_count() > 0,
                    "memory_pool::plan_next_capture: the trace holds no allocation; record a "
                    "warm-up step between begin_trace and end_trace");
  auto plan = plan_allocations(trace, options_.alignment);
  std::lock_guard const lock{mutex_};
  if (next_plan_) {
    blocks_.release_graph(planned_graph);
    next_plan_.reset();
  }
  // Taken now, before the capture begins: growing the pool (cudaMalloc, cuMemCreate) inside a
  // capture is an unsafe call there. Memory released to every stream, so the graph may be
  // replayed on any stream.
  std::size_t const slab_bytes = std::max<std::size_t>(plan.slab_bytes, 1);
  std::uintptr_t const slab = allocate_block(slab_bytes, any_stream, planned_graph);
  next_plan_.emplace(next_plan{std::move(trace), plan, slab});
  return plan;
}

void pool_engine::begin_timeline(std::size_t max_allocations) {
  GRAPHSTEP_EXPECTS(max_allocations > 0,
                    "memory_pool::begin_timeline: max_allocations is 0; give how many "
                    "allocations to record at most (at least 1)");
  std::lock_guard const lock{mutex_};
  GRAPHSTEP_EXPECTS(!timeline_,
                    "memory_pool::begin_timeline: a timeline is already being recorded; call "
                    "end_timeline first");
  timeline_recorder recorder{max_allocations};
  auto const regions = blocks_.snapshot();
  for (auto const& region : regions) recorder.existing_segment(region.base, region.bytes);
  for (auto const& region : regions) {
    for (auto const& block : region.blocks) {
      if (!block.free) recorder.existing_allocation(block.address, block.size, block.owner);
    }
  }
  timeline_.emplace(std::move(recorder));
}

pool_timeline pool_engine::timeline() const {
  std::lock_guard const lock{mutex_};
  GRAPHSTEP_EXPECTS(timeline_, "memory_pool::timeline: no timeline is being recorded; call "
                               "begin_timeline before the work to look at");
  pool_timeline out = timeline_->timeline();
  out.alignment = blocks_.alignment();
  return out;
}

pool_timeline pool_engine::end_timeline() {
  std::lock_guard const lock{mutex_};
  GRAPHSTEP_EXPECTS(timeline_, "memory_pool::end_timeline: no timeline is being recorded; call "
                               "begin_timeline before the work to look at");
  pool_timeline out = timeline_->timeline();
  out.alignment = blocks_.alignment();
  timeline_.reset();
  return out;
}

void pool_engine::name_allocation(std::uintptr_t address, std::string name) {
  std::lock_guard const lock{mutex_};
  if (timeline_ && timeline_->name(address, std::move(name))) return;
  auto const block = blocks_.block_at(address);
  // A planned capture's allocations lie inside its slab, one block.
  bool const in_planned_slab =
      std::any_of(captures_.begin(), captures_.end(), [&](auto const& capture) {
        return capture.second.plan && address >= capture.second.slab && blocks_.owns(address);
      });
  GRAPHSTEP_EXPECTS((block && !block->free) || in_planned_slab,
                    "memory_pool::name_allocation: no live block of this pool starts at " +
                        graphstep::detail::hex_text(address) +
                        "; pass an address that allocate returned and that is not freed");
}

void pool_engine::drop_next_plan() noexcept {
  std::lock_guard const lock{mutex_};
  if (!next_plan_) return;
  blocks_.release_graph(planned_graph);
  next_plan_.reset();
}

}  // namespace graphstep::memory::detail
