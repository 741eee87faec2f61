// libFuzzer target: the fuzzer's bytes describe a training step (segments on named streams,
// their dependencies, the buffers they read and write), drawn from small sets of names so that
// duplicates, unknown names, cycles, late dependencies and unordered reads all occur.
// plan_step must accept exactly the valid steps — judged here by an independent check over a
// reachability matrix — and its plan must order every dependency and every read after its
// writer. Build and run with scripts/fuzz.sh.

#include "fuzz_input.hpp"

#include <graphstep/error.hpp>
#include <graphstep/schedule/step_plan.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace gsch = graphstep::schedule;

namespace {

using graphstep::fuzz::fail;
using graphstep::fuzz::reader;

// "" and one name beyond those used as segments or streams, so that both kinds of bad name occur.
std::string pick(reader& in, char prefix, std::uint32_t count) {
  std::uint32_t const n = in.next(count + 2);
  if (n == 0) return {};
  return std::string(1, prefix) + std::to_string(n - 1);
}

gsch::step_spec make_spec(reader& in) {
  gsch::step_spec spec;
  std::uint32_t const streams = in.next(4);
  for (std::uint32_t i = 0; i < streams; ++i) spec.streams.push_back("s" + std::to_string(i));
  std::uint32_t const inputs = in.next(3);
  for (std::uint32_t i = 0; i < inputs; ++i) spec.static_inputs.push_back(pick(in, 'b', 5));
  std::uint32_t const segments = in.next(12);
  for (std::uint32_t i = 0; i < segments; ++i) {
    gsch::segment_spec s;
    // Mostly the i-th name, sometimes another (a duplicate) or none.
    s.name = in.next(8) == 0 ? pick(in, 'g', segments) : "g" + std::to_string(i);
    s.graphed = in.next(2) == 0;
    s.stream = in.next(8) == 0 ? pick(in, 's', streams) : "s" + std::to_string(in.next(streams));
    for (std::uint32_t n = in.next(3); n > 0; --n) s.after.push_back(pick(in, 'g', segments));
    for (std::uint32_t n = in.next(3); n > 0; --n) s.reads.push_back(pick(in, 'b', 5));
    for (std::uint32_t n = in.next(3); n > 0; --n) s.writes.push_back(pick(in, 'b', 5));
    spec.segments.push_back(std::move(s));
  }
  return spec;
}

// Whether `spec` is valid, and which segments are ordered before each (stream order and
// dependencies, transitively), computed apart from plan_step.
struct judgement {
  bool valid{false};
  std::vector<std::vector<bool>> before;  // before[i][j]: j finishes before i starts
};

judgement judge(gsch::step_spec const& spec) {
  judgement j;
  std::size_t const n = spec.segments.size();
  if (n == 0) return j;
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < n; ++i) {
    auto const& s = spec.segments[i];
    if (s.name.empty() || !index.emplace(s.name, i).second) return j;
    if (std::find(spec.streams.begin(), spec.streams.end(), s.stream) == spec.streams.end()) {
      return j;
    }
  }
  // With every dependency known, the dependencies are acyclic and issued in order exactly
  // when each points to an earlier segment.
  j.before.assign(n, std::vector<bool>(n, false));
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<std::size_t> predecessors;
    for (auto const& dependency : spec.segments[i].after) {
      auto const found = index.find(dependency);
      if (found == index.end() || found->second >= i) return j;
      predecessors.push_back(found->second);
    }
    for (std::size_t p = i; p-- > 0;) {
      if (spec.segments[p].stream == spec.segments[i].stream) {
        predecessors.push_back(p);
        break;
      }
    }
    for (std::size_t p : predecessors) {
      j.before[i][p] = true;
      for (std::size_t q = 0; q < n; ++q) j.before[i][q] = j.before[i][q] || j.before[p][q];
    }
  }
  std::set<std::string> const inputs{spec.static_inputs.begin(), spec.static_inputs.end()};
  for (std::size_t i = 0; i < n; ++i) {
    for (auto const& buffer : spec.segments[i].reads) {
      std::size_t last_writer = n;
      for (std::size_t w = 0; w < i; ++w) {
        auto const& writes = spec.segments[w].writes;
        if (std::find(writes.begin(), writes.end(), buffer) != writes.end()) last_writer = w;
      }
      if (last_writer == n && inputs.count(buffer) == 0) return j;
      if (last_writer < n && !j.before[i][last_writer]) return j;
    }
  }
  j.valid = true;
  return j;
}

void check_plan(gsch::step_spec const& spec, gsch::step_plan const& plan, judgement const& j) {
  std::size_t const n = spec.segments.size();
  if (plan.segments.size() != n || plan.stream_of.size() != n || plan.cross_waits.size() != n) {
    fail();
  }
  for (std::size_t i = 0; i < n; ++i) {
    auto const& s = spec.segments[i];
    if (plan.stream_of[i] >= spec.streams.size() || spec.streams[plan.stream_of[i]] != s.stream) {
      fail();
    }
    // Each wait is a dependency on another stream, and each such dependency is waited for.
    std::set<std::string> other_stream_dependencies;
    for (auto const& dependency : s.after) {
      for (std::size_t d = 0; d < i; ++d) {
        if (spec.segments[d].name == dependency && spec.segments[d].stream != s.stream) {
          other_stream_dependencies.insert(dependency);
        }
      }
    }
    std::set<std::string> waited;
    for (std::size_t w : plan.cross_waits[i]) {
      if (w >= i || spec.segments[w].stream == s.stream) fail();
      waited.insert(spec.segments[w].name);
      if (!j.before[i][w]) fail();
    }
    if (waited != other_stream_dependencies) fail();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  reader in{data, size};
  gsch::step_spec const spec = make_spec(in);
  judgement const expected = judge(spec);
  try {
    gsch::step_plan const plan = gsch::plan_step(spec);
    if (!expected.valid) fail();  // accepted an invalid step
    check_plan(spec, plan, expected);
  } catch (graphstep::usage_error const&) {
    if (expected.valid) fail();  // refused a valid step
  }
  return 0;
}
