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
}

race_checker::operation race_checker::current_operation() const {
  return operation{current_.description, current_.stream, current_.tick, current_clock_};
}

void race_checker::resume(operation const& queued) {
  current_ = stamp{queued.description, queued.stream, queued.tick};
  current_clock_ = queued.clock;
}

bool race_checker::ordered(stamp const& earlier, vector_clock const& later) {
  auto const it = later.find(earlier.stream);
  return it != later.end() && it->second >= earlier.tick;
}

void race_checker::report(stamp const& earlier, std::uintptr_t begin, std::uintptr_t end,
                          bool earlier_wrote, bool later_writes) {
  std::ostringstream line;
  line << "stream race on device memory [0x" << std::hex << begin << ", 0x" << end << std::dec
       << "): " << (earlier_wrote ? "write" : "read") << " by " << *earlier.description
       << " is not ordered before the " << (later_writes ? "write" : "read") << " by "
       << *current_.description
       << " (no stream order, event wait or host synchronization joins them)";
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

void race_checker::access(void const* address, std::size_t bytes, bool write) {
  if (bytes == 0 || !current_.description) return;
  auto const begin = reinterpret_cast<std::uintptr_t>(address);
  std::uintptr_t const end = begin + bytes;
  split_at(begin);
  split_at(end);
  stamp const& now = current_;
  // Walk [begin, end): existing segments are checked and updated, gaps become new segments.
  std::uintptr_t cursor = begin;
  auto it = shadow_.lower_bound(begin);
  while (cursor < end) {
    if (it == shadow_.end() || it->first > cursor) {
      std::uintptr_t const gap_end = it == shadow_.end() ? end : std::min(end, it->first);
      segment fresh;
      fresh.end = gap_end;
      if (write) {
        fresh.written = true;
        fresh.writer = now;
      } else {
        fresh.readers.push_back(now);
      }
      it = std::next(shadow_.emplace(cursor, std::move(fresh)).first);
      cursor = gap_end;
      continue;
    }
    segment& s = it->second;
    if (s.written && s.writer.description != now.description &&
        !ordered(s.writer, current_clock_)) {
      report(s.writer, it->first, s.end, true, write);
    }
    if (write) {
      for (stamp const& reader : s.readers) {
        if (reader.description != now.description && !ordered(reader, current_clock_)) {
          report(reader, it->first, s.end, false, true);
          break;
        }
      }
      s.written = true;
      s.writer = now;
      s.readers.clear();
    } else {
      // One reader per timeline: a later read on the same stream is ordered after the earlier.
      auto same = std::find_if(s.readers.begin(), s.readers.end(),
                               [&](stamp const& r) { return r.stream == now.stream; });
      if (same != s.readers.end()) {
        *same = now;
      } else {
        s.readers.push_back(now);
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
