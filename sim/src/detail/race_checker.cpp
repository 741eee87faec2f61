#include "detail/race_checker.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <utility>

namespace graphstep::sim::detail {

void merge(vector_clock& into, vector_clock const& from) {
  for (auto const& [line, tick] : from) {
    auto& mine = into[line];
    mine = std::max(mine, tick);
  }
}

void race_checker::begin_operation(timeline stream, vector_clock& clock, std::string description) {
  unsigned long long const tick = ++clock[stream];
  current_ = stamp{std::make_shared<std::string const>(std::move(description)), stream, tick};
  current_clock_ = clock;
  current_launch_ = nullptr;
  current_ancestors_ = nullptr;
}

race_checker::operation race_checker::current_operation() const {
  return operation{current_.description, current_.stream, current_.tick, current_clock_};
}

void race_checker::resume(operation const& queued) {
  current_ = stamp{queued.description, queued.stream, queued.tick};
  current_clock_ = queued.clock;
  current_launch_ = nullptr;
  current_ancestors_ = nullptr;
}

void race_checker::begin_graph_launch(graph_launch& launch) {
  launch.first_ = next_node_timeline_;
  next_node_timeline_ += launch.nodes_;
  launch.launch_ = current_;
  launch.clock_ = current_clock_;
  launch.touched_.clear();
}

void race_checker::begin_node(graph_launch& launch, std::size_t index,
                              std::vector<std::uint64_t> const& ancestors,
                              std::string description, vector_clock const* also_after) {
  description += " in ";
  description += *launch.launch_.description;
  current_ =
      stamp{std::make_shared<std::string const>(std::move(description)), launch.first_ + index, 1};
  current_clock_ = launch.clock_;
  if (also_after != nullptr) merge(current_clock_, *also_after);
  current_launch_ = &launch;
  current_ancestors_ = &ancestors;
}

void race_checker::end_graph_launch(graph_launch& launch, std::vector<node_stamp> const* stamps) {
  timeline const first = launch.first_;
  timeline const last = first + launch.nodes_;
  auto const of_launch = [&](stamp const& s) { return s.stream >= first && s.stream < last; };
  auto const restamp = [&](stamp& s) {
    if (stamps != nullptr) {
      node_stamp const& own = (*stamps)[s.stream - first];
      if (own.first != 0) {
        s.stream = own.first;
        s.tick = own.second;
        return;
      }
    }
    s.stream = launch.launch_.stream;
    s.tick = launch.launch_.tick;
  };
  for (auto const& [begin, end] : launch.touched_) {
    for (auto it = shadow_.lower_bound(begin); it != shadow_.end() && it->first < end; ++it) {
      segment& s = it->second;
      if (s.written && of_launch(s.writer)) restamp(s.writer);
      bool restamped = false;
      for (reader& r : s.readers) {
        if (of_launch(r.by)) {
          restamp(r.by);
          restamped = true;
        }
      }
      if (!restamped) continue;
      // One read and one atomic update per timeline: the new stamps are the latest of their
      // timelines (the launch's stream, or a record node's timeline of the executable, whose
      // launches are ordered), so each replaces the others of its kind there.
      std::stable_sort(s.readers.begin(), s.readers.end(), [](reader const& a, reader const& b) {
        if (a.by.stream != b.by.stream) return a.by.stream < b.by.stream;
        if (a.atomic != b.atomic) return b.atomic;  // plain reads first
        return a.by.tick > b.by.tick;
      });
      s.readers.erase(std::unique(s.readers.begin(), s.readers.end(),
                                  [](reader const& a, reader const& b) {
                                    return a.by.stream == b.by.stream && a.atomic == b.atomic;
                                  }),
                      s.readers.end());
    }
  }
  launch.touched_.clear();
  current_ = launch.launch_;
  current_clock_ = launch.clock_;
  current_launch_ = nullptr;
  current_ancestors_ = nullptr;
}

bool race_checker::ordered(stamp const& earlier) const {
  if (current_launch_ != nullptr) {
    timeline const first = current_launch_->first_;
    if (earlier.stream >= first && earlier.stream < first + current_launch_->nodes_) {
      std::size_t const node = earlier.stream - first;
      return (((*current_ancestors_)[node / 64] >> (node % 64)) & 1U) != 0;
    }
  }
  auto const it = current_clock_.find(earlier.stream);
  return it != current_clock_.end() && it->second >= earlier.tick;
}

namespace {

char const* verb(access_kind kind) {
  switch (kind) {
    case access_kind::read: return "read";
    case access_kind::write: return "write";
    case access_kind::atomic: return "atomic update";
  }
  return "access";
}

}  // namespace

void race_checker::report(stamp const& earlier, std::uintptr_t begin, std::uintptr_t end,
                          char const* earlier_did, access_kind now) {
  std::ostringstream line;
  line << "stream race on device memory [0x" << std::hex << begin << ", 0x" << end << std::dec
       << "): " << earlier_did << " by " << *earlier.description << " is not ordered before the "
       << verb(now) << " by " << *current_.description
       << " (no stream order, graph edge, event wait or host synchronization joins them)";
  races_.push_back(line.str());
}

void race_checker::split_at(std::uintptr_t address) {
  auto it = shadow_.upper_bound(address);
  if (it == shadow_.begin()) return;
  --it;
  if (it->first == address || it->second.end <= address) return;
  segment tail = it->second;
  it->second.end = address;
  shadow_.emplace(address, std::move(tail));
}

void race_checker::access(void const* address, std::size_t bytes, access_kind kind) {
  if (bytes == 0 || !current_.description) return;
  auto const begin = reinterpret_cast<std::uintptr_t>(address);
  std::uintptr_t const end = begin + bytes;
  if (current_launch_ != nullptr) current_launch_->touched_.emplace_back(begin, end);
  split_at(begin);
  split_at(end);
  stamp const& now = current_;
  bool const atomic = kind == access_kind::atomic;
  // Walk [begin, end): existing segments are checked and updated, gaps become new segments.
  std::uintptr_t cursor = begin;
  auto it = shadow_.lower_bound(begin);
  while (cursor < end) {
    if (it == shadow_.end() || it->first > cursor) {
      std::uintptr_t const gap_end = it == shadow_.end() ? end : std::min(end, it->first);
      segment fresh;
      fresh.end = gap_end;
      if (kind == access_kind::write) {
        fresh.written = true;
        fresh.writer = now;
      } else {
        fresh.readers.push_back(reader{now, atomic});
      }
      it = std::next(shadow_.emplace(cursor, std::move(fresh)).first);
      cursor = gap_end;
      continue;
    }
    segment& s = it->second;
    auto const other = [&](stamp const& s2) { return s2.description != now.description; };
    if (s.written && other(s.writer) && !ordered(s.writer)) {
      report(s.writer, it->first, s.end, "write", kind);
    }
    // A write conflicts with every earlier read and update; an update with plain reads; a read
    // with updates.
    for (reader const& r : s.readers) {
      bool const conflicts = kind == access_kind::write || r.atomic != atomic;
      if (conflicts && other(r.by) && !ordered(r.by)) {
        report(r.by, it->first, s.end, r.atomic ? "atomic update" : "read", kind);
        break;
      }
    }
    if (kind == access_kind::write) {
      s.written = true;
      s.writer = now;
      s.readers.clear();
    } else {
      // One of each kind per timeline: a later access on the same timeline is ordered after the
      // earlier.
      auto same = std::find_if(s.readers.begin(), s.readers.end(), [&](reader const& r) {
        return r.by.stream == now.stream && r.atomic == atomic;
      });
      if (same != s.readers.end()) {
        same->by = now;
      } else {
        s.readers.push_back(reader{now, atomic});
      }
    }
    cursor = s.end;
    ++it;
  }
}

void race_checker::forget(void const* address, std::size_t bytes) {
  auto const begin = reinterpret_cast<std::uintptr_t>(address);
  std::uintptr_t const end = begin + bytes;
  split_at(begin);
  split_at(end);
  shadow_.erase(shadow_.lower_bound(begin), shadow_.lower_bound(end));
}

}  // namespace graphstep::sim::detail
