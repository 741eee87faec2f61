// The planner: traces with known optima, training-step traces within 5% of the lower bound (up
// to 10^5 allocations), plans of random traces checked against an independent brute-force
// check, overlaps planted in plans, divergence detection of planned captures, and bad input.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <graphstep/error.hpp>
#include <graphstep/memory/allocation_plan.hpp>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/error_message.hpp"

namespace gm = graphstep::memory;

namespace {

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * 1024;

// A training step: the forward pass keeps each layer's activation until the backward pass
// and frees its temporaries at once; the backward pass walks the layers in reverse, passes a
// data gradient from layer to layer, keeps weight gradients to the end, and frees each
// activation when its layer is done.
gm::allocation_trace training_step(std::vector<std::size_t> const& activation_bytes,
                                   std::vector<std::size_t> const& weight_bytes,
                                   std::mt19937& rng) {
  gm::allocation_trace t;
  std::uniform_real_distribution<double> jitter{0.5, 1.5};
  std::vector<std::size_t> activations;
  std::size_t const input = t.record_allocate(activation_bytes.front());
  for (std::size_t l = 0; l < activation_bytes.size(); ++l) {
    std::size_t const workspace =
        t.record_allocate(static_cast<std::size_t>(activation_bytes[l] * jitter(rng) / 4) + 1);
    activations.push_back(t.record_allocate(activation_bytes[l]));
    t.record_deallocate(workspace);
  }
  std::size_t gradient = t.record_allocate(activation_bytes.back());  // the loss gradient
  for (std::size_t l = activation_bytes.size(); l-- > 0;) {
    static_cast<void>(t.record_allocate(weight_bytes[l]));  // kept until the optimizer
    std::size_t const workspace = t.record_allocate(weight_bytes[l] / 2 + 1);
    std::size_t const input_gradient =
        t.record_allocate(l > 0 ? activation_bytes[l - 1] : activation_bytes.front());
    t.record_deallocate(workspace);
    t.record_deallocate(gradient);
    t.record_deallocate(activations[l]);
    gradient = input_gradient;
  }
  t.record_deallocate(gradient);
  t.record_deallocate(input);
  return t;
}

// A transformer training step with gradient accumulation in a pipeline schedule (two microbatches
// in flight, one forward then one backward): each layer's forward pass keeps its layer-norm,
// QKV, attention-probability, attention, residual, MLP pre-activation and GELU outputs and frees
// its temporaries (raw scores, projections); the backward pass walks the layers in reverse and
// frees each saved activation once used. Weight gradients come with the first microbatch and
// stay to the optimizer (later microbatches add theirs through a temporary), which then steps
// each parameter with an fp32 temporary. Sequence lengths differ between microbatches.
class transformer_step {
 public:
  transformer_step(int layers, int microbatches, std::mt19937& rng)
      : layers_{static_cast<std::size_t>(layers)} {
    std::uniform_int_distribution<std::size_t> eighths{2, 8};
    for (int m = 0; m < microbatches; ++m) sequences_.push_back(eighths(rng) * 256);
    gradients_.assign(layers_ * 4, none);
    std::size_t forwards = 0;
    std::size_t const total = sequences_.size();
    for (; forwards < std::min<std::size_t>(2, total); ++forwards) forward(forwards);
    for (std::size_t backwards = 0; backwards < total; ++backwards) {
      backward(backwards);
      if (forwards < total) forward(forwards++);
    }
    for (std::size_t g : gradients_) {
      trace_.record_deallocate(trace_.record_allocate(trace_.bytes_of(g) * 2));
      trace_.record_deallocate(g);
    }
  }

  [[nodiscard]] gm::allocation_trace const& trace() const noexcept { return trace_; }

 private:
  static constexpr std::size_t none = ~std::size_t{0};
  static constexpr std::size_t hidden = 1024;
  static constexpr std::size_t heads = 16;
  static constexpr std::size_t batch = 2;
  static constexpr std::size_t vocabulary = 32000;

  struct saved_layer {
    std::size_t input, ln1, qkv, probs, attention, residual, ln2, pre_gelu, gelu;
  };
  struct saved_microbatch {
    std::vector<saved_layer> layers;
    std::size_t output;
    std::size_t logits;
  };

  std::size_t allocate(std::size_t bytes) { return trace_.record_allocate(bytes); }
  void release(std::size_t id) { trace_.record_deallocate(id); }
  void gradient(std::size_t slot, std::size_t bytes) {
    if (gradients_[slot] == none) {
      gradients_[slot] = allocate(bytes);
    } else {
      release(allocate(bytes));
    }
  }

  void forward(std::size_t m) {
    std::size_t const row = batch * sequences_[m] * hidden * 2;
    std::size_t const scores = batch * heads * sequences_[m] * sequences_[m] * 2;
    saved_microbatch saved{};
    std::size_t x = allocate(row);  // the embedding
    for (std::size_t l = 0; l < layers_; ++l) {
      saved_layer s{};
      s.input = x;
      s.ln1 = allocate(row);
      s.qkv = allocate(3 * row);
      std::size_t const raw = allocate(scores);
      s.probs = allocate(scores);
      release(raw);
      s.attention = allocate(row);
      std::size_t const projection = allocate(row);
      s.residual = allocate(row);
      release(projection);
      s.ln2 = allocate(row);
      s.pre_gelu = allocate(4 * row);
      s.gelu = allocate(4 * row);
      std::size_t const down = allocate(row);
      x = allocate(row);
      release(down);
      saved.layers.push_back(s);
    }
    saved.output = x;
    saved.logits = allocate(batch * sequences_[m] * vocabulary * 2);
    saved_.push_back(saved);
  }

  void backward(std::size_t m) {
    saved_microbatch const& saved = saved_[m];
    std::size_t const row = batch * sequences_[m] * hidden * 2;
    std::size_t const scores = batch * heads * sequences_[m] * sequences_[m] * 2;
    std::size_t const dlogits = allocate(batch * sequences_[m] * vocabulary * 2);
    release(saved.logits);
    std::size_t dy = allocate(row);
    release(dlogits);
    release(saved.output);
    for (std::size_t l = layers_; l-- > 0;) {
      saved_layer const& s = saved.layers[l];
      gradient(4 * l, 4 * hidden * hidden * 2);  // MLP down
      std::size_t const dgelu = allocate(4 * row);
      release(s.gelu);
      std::size_t const dpre = allocate(4 * row);
      release(dgelu);
      release(s.pre_gelu);
      gradient(4 * l + 1, 4 * hidden * hidden * 2);  // MLP up
      std::size_t const dln2 = allocate(row);
      release(dpre);
      release(s.ln2);
      std::size_t const dresidual = allocate(row);
      release(dln2);
      release(s.residual);
      release(dy);
      gradient(4 * l + 2, hidden * hidden * 2);  // attention output
      std::size_t const dattention = allocate(row);
      release(s.attention);
      std::size_t const dprobs = allocate(scores);
      release(s.probs);
      std::size_t const dqkv = allocate(3 * row);
      release(dprobs);
      release(dattention);
      gradient(4 * l + 3, 3 * hidden * hidden * 2);  // QKV
      std::size_t const dln1 = allocate(row);
      release(dqkv);
      release(s.qkv);
      release(s.ln1);
      dy = allocate(row);
      release(dln1);
      release(dresidual);
      release(s.input);
    }
    release(dy);
  }

  std::size_t layers_;
  std::vector<std::size_t> sequences_;
  std::vector<std::size_t> gradients_;  // allocation id of each kept weight gradient
  std::vector<saved_microbatch> saved_;
  gm::allocation_trace trace_;
};

// An independent check of `plan` against `trace`, by brute force over every pair of
// allocations: the first fault found, or "" for a sound plan.
std::string brute_force_fault(gm::allocation_trace const& trace, gm::allocation_plan const& plan) {
  std::size_t const n = trace.allocation_count();
  std::vector<std::size_t> begin(n);
  std::vector<std::size_t> end(n, trace.events().size());
  for (std::size_t i = 0; i < trace.events().size(); ++i) {
    auto const& e = trace.events()[i];
    (e.what == gm::trace_event::kind::allocate ? begin : end)[e.id] = i;
  }
  for (std::size_t a = 0; a < n; ++a) {
    if (plan.offsets[a] % plan.alignment != 0) return "misaligned #" + std::to_string(a);
    if (plan.sizes[a] < trace.bytes_of(a)) return "undersized #" + std::to_string(a);
    if (plan.offsets[a] + plan.sizes[a] > plan.slab_bytes) return "outside #" + std::to_string(a);
    for (std::size_t b = a + 1; b < n; ++b) {
      bool const together = begin[b] < end[a] && begin[a] < end[b];
      bool const overlap = plan.offsets[a] < plan.offsets[b] + plan.sizes[b] &&
                           plan.offsets[b] < plan.offsets[a] + plan.sizes[a];
      if (together && overlap) return "overlap #" + std::to_string(a) + " #" + std::to_string(b);
    }
  }
  return {};
}

// A random trace of at most `events` events: sizes from a few distinct ones, or spread over
// four orders of magnitude; frees mostly of recent allocations, as in a step.
gm::allocation_trace random_trace(std::mt19937& rng, int events) {
  gm::allocation_trace t;
  std::vector<std::size_t> open;
  bool const few_sizes = rng() % 2 == 0;
  for (int e = 0; e < events; ++e) {
    if (open.empty() || rng() % 5 < 3) {
      std::size_t const bytes = few_sizes ? std::size_t{1024} << (rng() % 4)
                                          : 1 + rng() % (std::size_t{1} << (4 + rng() % 14));
      open.push_back(t.record_allocate(bytes));
    } else {
      std::size_t const pick =
          rng() % 3 == 0 ? rng() % open.size()
                         : open.size() - 1 - rng() % std::min<std::size_t>(open.size(), 3);
      t.record_deallocate(open[pick]);
      open.erase(open.begin() + static_cast<std::ptrdiff_t>(pick));
    }
  }
  return t;
}

void expect_good_plan(gm::allocation_trace const& trace, char const* name, double bound) {
  auto const plan = gm::plan_allocations(trace);
  gm::verify_plan(trace, plan);
  std::printf("%-28s %5zu allocations  peak %9zu B  slab %9zu B  ratio %.4f\n", name,
              trace.allocation_count(), plan.peak_live_bytes, plan.slab_bytes,
              plan.footprint_ratio());
  EXPECT_LE(plan.footprint_ratio(), bound) << name;
}

}  // namespace

TEST(allocation_plan, empty_trace) {
  gm::allocation_trace const t;
  auto const plan = gm::plan_allocations(t);
  EXPECT_EQ(plan.slab_bytes, 0U);
  EXPECT_EQ(plan.footprint_ratio(), 1.0);
}

TEST(allocation_plan, disjoint_lifetimes_share_one_offset) {
  gm::allocation_trace t;
  for (int i = 0; i < 10; ++i) t.record_deallocate(t.record_allocate(1000));
  auto const plan = gm::plan_allocations(t);
  EXPECT_EQ(plan.slab_bytes, 1024U);
  EXPECT_EQ(plan.peak_live_bytes, 1024U);
  for (std::size_t offset : plan.offsets) EXPECT_EQ(offset, 0U);
}

TEST(allocation_plan, all_alive_at_once_needs_the_sum) {
  gm::allocation_trace t;
  std::size_t total = 0;
  for (std::size_t bytes : {256U, 512U, 1024U, 768U}) {
    static_cast<void>(t.record_allocate(bytes));
    total += bytes;
  }
  auto const plan = gm::plan_allocations(t);
  gm::verify_plan(t, plan);
  EXPECT_EQ(plan.slab_bytes, total);
  EXPECT_EQ(plan.peak_live_bytes, total);
}

TEST(allocation_plan, a_hole_between_long_lived_blocks_is_reused) {
  // A(1K) B(2K) C(1K) alive; B freed; D(2K) must go into B's hole: optimum 4K.
  gm::allocation_trace t;
  static_cast<void>(t.record_allocate(1024));
  std::size_t const b = t.record_allocate(2048);
  static_cast<void>(t.record_allocate(1024));
  t.record_deallocate(b);
  static_cast<void>(t.record_allocate(2048));
  auto const plan = gm::plan_allocations(t);
  gm::verify_plan(t, plan);
  EXPECT_EQ(plan.slab_bytes, 4096U);
}

TEST(allocation_plan, an_order_by_time_would_fragment_but_the_plan_does_not) {
  // Allocated in this order, an online allocator leaves a 1K hole under the 2K block: small
  // A (1K, short) then B (2K, long) on top; A freed; C (2K) cannot use A's hole. The optimum
  // puts B at the bottom: peak = 4K.
  gm::allocation_trace t;
  std::size_t const a = t.record_allocate(1024);
  static_cast<void>(t.record_allocate(2048));
  t.record_deallocate(a);
  static_cast<void>(t.record_allocate(2048));
  auto const plan = gm::plan_allocations(t);
  gm::verify_plan(t, plan);
  EXPECT_EQ(plan.peak_live_bytes, 4096U);
  EXPECT_EQ(plan.slab_bytes, 4096U);
  EXPECT_DOUBLE_EQ(plan.footprint_ratio(), 1.0);
}

TEST(allocation_plan, a_staircase_reaches_its_peak) {
  // Allocation i (i+1 KiB) lives from its allocation to that of i + 2: at most two alive,
  // and the largest pair is the bound that the plan must meet.
  gm::allocation_trace t;
  std::vector<std::size_t> ids;
  for (std::size_t i = 0; i < 12; ++i) {
    ids.push_back(t.record_allocate((i + 1) * 1024));
    if (i >= 1) t.record_deallocate(ids[i - 1]);
  }
  auto const plan = gm::plan_allocations(t);
  gm::verify_plan(t, plan);
  EXPECT_EQ(plan.peak_live_bytes, (11U + 12U) * 1024U);
  EXPECT_EQ(plan.slab_bytes, plan.peak_live_bytes);
}

TEST(allocation_plan, sizes_are_aligned) {
  gm::allocation_trace t;
  static_cast<void>(t.record_allocate(1));
  static_cast<void>(t.record_allocate(300));
  auto const plan = gm::plan_allocations(t, 256);
  EXPECT_EQ(plan.sizes[0], 256U);
  EXPECT_EQ(plan.sizes[1], 512U);
  EXPECT_EQ(plan.offsets[0] % 256, 0U);
  EXPECT_EQ(plan.offsets[1] % 256, 0U);
  auto const coarse = gm::plan_allocations(t, 4096);
  EXPECT_EQ(coarse.slab_bytes, 8192U);
  EXPECT_EQ(coarse.alignment, 4096U);
  gm::verify_plan(t, coarse);
  auto const fine = gm::plan_allocations(t, 1);
  EXPECT_EQ(fine.slab_bytes, 301U);
  gm::verify_plan(t, fine);
}

TEST(allocation_plan, training_step_traces_are_within_five_percent_of_the_peak) {
  std::mt19937 rng{2024};
  // The MLP of the design (batch 640: 4096 -> 2048 -> 1024, fp32).
  expect_good_plan(training_step({640 * 4096 * 4, 640 * 2048 * 4, 640 * 1024 * 4},
                                 {2048 * 4096 * 4, 1024 * 2048 * 4, 1024 * 4}, rng),
                   "mlp 4096-2048-1024", 1.05);
  // A 24-block transformer-like stack: equal activations, a few sizes of weights.
  std::vector<std::size_t> acts;
  std::vector<std::size_t> weights;
  for (int l = 0; l < 96; ++l) {
    acts.push_back(l % 4 == 1 ? 4 * 8 * MiB : 8 * MiB);
    weights.push_back(l % 4 == 1 ? 16 * MiB : 4 * MiB + 12 * KiB);
  }
  expect_good_plan(training_step(acts, weights, rng), "transformer-like x24", 1.05);
  // A CNN whose activations shrink as channels grow.
  acts.clear();
  weights.clear();
  for (int l = 0; l < 40; ++l) {
    acts.push_back((64 * MiB) >> (l / 8));
    weights.push_back((64 * KiB) << (l / 8));
  }
  expect_good_plan(training_step(acts, weights, rng), "cnn-like x40", 1.05);
  // Randomly sized layers.
  for (int trial = 0; trial < 5; ++trial) {
    acts.clear();
    weights.clear();
    std::uniform_int_distribution<std::size_t> size{64 * KiB, 32 * MiB};
    for (int l = 0; l < 30; ++l) {
      acts.push_back(size(rng));
      weights.push_back(size(rng) / 4);
    }
    expect_good_plan(training_step(acts, weights, rng), "random layers", 1.05);
  }
}

TEST(allocation_plan, a_large_trace_plans_well_and_correctly) {
  std::mt19937 rng{9};
  std::vector<std::size_t> acts;
  std::vector<std::size_t> weights;
  std::uniform_int_distribution<std::size_t> size{4 * KiB, 4 * MiB};
  for (int l = 0; l < 1500; ++l) {  // about 7500 allocations
    acts.push_back(size(rng));
    weights.push_back(size(rng));
  }
  expect_good_plan(training_step(acts, weights, rng), "1500 random layers", 1.05);
}

using graphstep::testing::message_of;

TEST(allocation_plan, a_transformer_step_of_100000_allocations_plans_within_five_percent) {
  std::mt19937 rng{17};
  transformer_step const step{24, 168, rng};
  gm::allocation_trace const& trace = step.trace();
  ASSERT_GE(trace.allocation_count(), 100000U);
  auto const plan = gm::plan_allocations(trace);
  ASSERT_EQ(plan.offsets.size(), trace.allocation_count());
  EXPECT_NO_THROW(gm::verify_plan(trace, plan));
  std::printf("transformer step            %zu allocations  peak %zu B  slab %zu B  ratio %.4f\n",
              trace.allocation_count(), plan.peak_live_bytes, plan.slab_bytes,
              plan.footprint_ratio());
  EXPECT_GE(plan.slab_bytes, plan.peak_live_bytes);
  EXPECT_LE(plan.footprint_ratio(), 1.05);

  // An overlap planted anywhere in the plan is caught: an allocation moved onto one alive with
  // it, exactly or by a single alignment unit.
  std::vector<std::size_t> open;  // allocations alive, in allocation order
  std::vector<std::pair<std::size_t, std::size_t>> together;  // (earlier, later), both alive
  for (auto const& e : trace.events()) {
    if (e.what == gm::trace_event::kind::deallocate) {
      open.erase(std::find(open.begin(), open.end(), e.id));
      continue;
    }
    if (!open.empty() && e.id % 9973 == 0) together.emplace_back(open[e.id % open.size()], e.id);
    open.push_back(e.id);
  }
  ASSERT_GE(together.size(), 5U);
  for (auto const& [earlier, later] : together) {
    auto planted = plan;
    planted.offsets[later] = planted.offsets[earlier];
    EXPECT_NE(message_of<graphstep::error>([&] { gm::verify_plan(trace, planted); })
                  .find("allocation #" + std::to_string(later) + " and allocation #" +
                        std::to_string(earlier) + " are alive at once and overlap"),
              std::string::npos);
    planted.offsets[later] = plan.offsets[earlier] + plan.sizes[earlier] - plan.alignment;
    planted.slab_bytes = std::max(plan.slab_bytes, planted.offsets[later] + plan.sizes[later]);
    EXPECT_NE(message_of<graphstep::error>([&] {
                gm::verify_plan(trace, planted);
              }).find("allocation #" + std::to_string(later) + " and "),
              std::string::npos);
  }
}

TEST(allocation_plan, plans_of_random_traces_agree_with_a_brute_force_check) {
  std::mt19937 rng{7};
  int planted_faults = 0;
  for (int trial = 0; trial < 1500; ++trial) {
    auto const trace = random_trace(rng, 1 + static_cast<int>(rng() % 80));
    std::size_t const alignment = std::size_t{1} << (rng() % 10);
    auto const plan = gm::plan_allocations(trace, alignment);
    ASSERT_EQ(brute_force_fault(trace, plan), "") << "trial " << trial;
    ASSERT_NO_THROW(gm::verify_plan(trace, plan)) << "trial " << trial;
    ASSERT_GE(plan.slab_bytes, plan.peak_live_bytes) << "trial " << trial;
    // Move one allocation to another aligned offset: verify_plan must throw exactly when the
    // brute-force check finds a fault.
    if (trace.allocation_count() == 0) continue;
    auto moved = plan;
    std::size_t const id = rng() % trace.allocation_count();
    std::size_t const other = rng() % trace.allocation_count();
    moved.offsets[id] =
        rng() % 2 == 0 ? plan.offsets[other] : plan.offsets[other] + alignment * (rng() % 4);
    bool const faulty = !brute_force_fault(trace, moved).empty();
    planted_faults += faulty ? 1 : 0;
    bool threw = false;
    try {
      gm::verify_plan(trace, moved);
    } catch (graphstep::error const&) {
      threw = true;
    }
    ASSERT_EQ(threw, faulty) << "trial " << trial;
  }
  EXPECT_GE(planted_faults, 300) << "too few moves made faulty plans to test verify_plan";
}

TEST(allocation_plan, bad_traces_are_usage_errors) {
  gm::allocation_trace t;
  EXPECT_THROW(static_cast<void>(t.record_allocate(0)), graphstep::usage_error);
  EXPECT_NE(message_of<graphstep::error>([&] {
              static_cast<void>(t.record_allocate(0));
            }).find("0 bytes"),
            std::string::npos);
  std::size_t const a = t.record_allocate(10);
  EXPECT_THROW(t.record_deallocate(a + 1), graphstep::usage_error);
  EXPECT_NE(message_of<graphstep::error>([&] {
              t.record_deallocate(a + 1);
            }).find("#1 was never recorded"),
            std::string::npos);
  t.record_deallocate(a);
  EXPECT_THROW(t.record_deallocate(a), graphstep::usage_error);
  EXPECT_NE(
      message_of<graphstep::error>([&] { t.record_deallocate(a); }).find("#0 was freed twice"),
      std::string::npos);
  EXPECT_EQ(t.events().size(), 2U) << "refused events are not recorded";
  EXPECT_THROW(static_cast<void>(gm::plan_allocations(t, 3)), graphstep::usage_error);
  EXPECT_NE(message_of<graphstep::error>([&] {
              static_cast<void>(gm::plan_allocations(t, 0));
            }).find("power of two, not 0"),
            std::string::npos);
  gm::allocation_trace huge;
  static_cast<void>(huge.record_allocate(~std::size_t{0} / 2));
  static_cast<void>(huge.record_allocate(~std::size_t{0} / 2));
  EXPECT_THROW(static_cast<void>(gm::plan_allocations(huge)), graphstep::usage_error);
  EXPECT_NE(message_of<graphstep::error>([&] {
              static_cast<void>(gm::plan_allocations(huge));
            }).find("#1 of"),
            std::string::npos);
}

TEST(allocation_plan, verify_plan_names_what_is_wrong) {
  gm::allocation_trace t;
  static_cast<void>(t.record_allocate(1024));
  static_cast<void>(t.record_allocate(1024));
  auto const good = gm::plan_allocations(t);
  EXPECT_NO_THROW(gm::verify_plan(t, good));
  auto overlap = good;
  overlap.offsets[1] = overlap.offsets[0];
  EXPECT_NE(message_of<graphstep::error>([&] {
              gm::verify_plan(t, overlap);
            }).find("allocation #1 and allocation #0 are alive at once and overlap"),
            std::string::npos);
  auto misaligned = good;
  misaligned.offsets[1] += 128;
  misaligned.slab_bytes += 128;
  EXPECT_NE(message_of<graphstep::error>([&] {
              gm::verify_plan(t, misaligned);
            }).find("allocation #1 at offset 1152 is misaligned"),
            std::string::npos);
  auto outside = good;
  outside.slab_bytes = 1024;
  EXPECT_NE(
      message_of<graphstep::error>([&] { gm::verify_plan(t, outside); }).find("ends past the slab"),
      std::string::npos);
  auto small = good;
  small.sizes[0] = 512;
  EXPECT_NE(message_of<graphstep::error>([&] { gm::verify_plan(t, small); }).find("asked for 1024"),
            std::string::npos);
  auto short_plan = good;
  short_plan.offsets.pop_back();
  EXPECT_NE(message_of<graphstep::error>([&] {
              gm::verify_plan(t, short_plan);
            }).find("not made from this trace"),
            std::string::npos);
  // A block freed before the next is allocated may share its offset.
  gm::allocation_trace serial;
  serial.record_deallocate(serial.record_allocate(1024));
  static_cast<void>(serial.record_allocate(1024));
  auto shared = gm::plan_allocations(serial);
  EXPECT_EQ(shared.offsets[0], shared.offsets[1]);
  EXPECT_NO_THROW(gm::verify_plan(serial, shared));
}

TEST(planned_sequence, serves_the_plan_and_completes) {
  gm::allocation_trace t;
  std::size_t const a = t.record_allocate(1000);
  std::size_t const b = t.record_allocate(3000);
  t.record_deallocate(a);
  static_cast<void>(t.record_allocate(500));
  auto const plan = gm::plan_allocations(t);
  gm::planned_sequence s{t, plan};
  EXPECT_EQ(s.next_allocate(1000), plan.offsets[a]);
  EXPECT_EQ(s.next_allocate(3000), plan.offsets[b]);
  s.deallocate(plan.offsets[a]);
  EXPECT_FALSE(s.complete());
  static_cast<void>(s.next_allocate(500));
  EXPECT_TRUE(s.complete());
}

TEST(planned_sequence, divergence_names_the_allocation) {
  gm::allocation_trace t;
  t.record_deallocate(t.record_allocate(1024));
  gm::planned_sequence s{t, gm::plan_allocations(t)};
  try {
    static_cast<void>(s.next_allocate(4096));
    FAIL() << "no error";
  } catch (graphstep::usage_error const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("#0 asks for 4096 bytes"), std::string::npos) << what;
    EXPECT_NE(what.find("1024"), std::string::npos) << what;
  }
  gm::planned_sequence more{t, gm::plan_allocations(t)};
  static_cast<void>(more.next_allocate(1024));
  EXPECT_THROW(static_cast<void>(more.next_allocate(1024)), graphstep::usage_error);
}

TEST(planned_sequence, a_free_out_of_order_is_caught_before_it_corrupts) {
  // The warm-up frees A before allocating B, so the plan may put B on A. A captured step that
  // still holds A when it asks for B must be stopped.
  gm::allocation_trace t;
  std::size_t const a = t.record_allocate(1024);
  t.record_deallocate(a);
  static_cast<void>(t.record_allocate(1024));
  auto const plan = gm::plan_allocations(t);
  ASSERT_EQ(plan.offsets[0], plan.offsets[1]);
  gm::planned_sequence s{t, plan};
  static_cast<void>(s.next_allocate(1024));
  try {
    static_cast<void>(s.next_allocate(1024));
    FAIL() << "no error";
  } catch (graphstep::usage_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("would overlap allocation #0"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(s.deallocate(12345), graphstep::usage_error);
}

TEST(planned_sequence, frees_are_checked) {
  gm::allocation_trace t;
  std::size_t const a = t.record_allocate(1024);
  static_cast<void>(t.record_allocate(1024));
  t.record_deallocate(a);
  auto const plan = gm::plan_allocations(t);
  gm::planned_sequence s{t, plan};
  EXPECT_NE(message_of<graphstep::error>([&] {
              s.deallocate(plan.offsets[a]);
            }).find("not a live planned block"),
            std::string::npos)
      << "nothing allocated yet";
  EXPECT_EQ(s.next_allocate(1024), plan.offsets[0]);
  s.deallocate(plan.offsets[0]);
  EXPECT_THROW(s.deallocate(plan.offsets[0]), graphstep::usage_error) << "a double free";
  EXPECT_EQ(s.allocations_served(), 1U);
}

TEST(planned_sequence, a_plan_from_another_trace_is_refused) {
  gm::allocation_trace t;
  static_cast<void>(t.record_allocate(1024));
  static_cast<void>(t.record_allocate(1024));
  gm::allocation_trace other;
  static_cast<void>(other.record_allocate(1024));
  EXPECT_NE(message_of<graphstep::error>([&] {
              gm::planned_sequence{t, gm::plan_allocations(other)};
            }).find("the plan covers 1 allocations, the trace 2"),
            std::string::npos);
  auto overlapping = gm::plan_allocations(t);
  overlapping.offsets[1] = overlapping.offsets[0];
  EXPECT_THROW((gm::planned_sequence{t, overlapping}), graphstep::usage_error);
  EXPECT_NE(message_of<graphstep::error>([&] {
              gm::planned_sequence{t, overlapping};
            }).find("the plan does not fit the trace"),
            std::string::npos);
}
