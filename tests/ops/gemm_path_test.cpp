// The path decision of ops/gemm_problem.hpp (can_fuse, decide_path, unfused_path,
// path_without_algorithm): the choice between the fused epilogue and the unfused path, checked
// against the constraints stated in row-major terms, for every kind, element type and math over
// a sweep of shapes with odd and non-multiple-of-8 sizes; the unfused kernels, replayed in fp64,
// give the fused formula. The mapping itself: gemm_problem_test.cpp.

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <graphstep/error.hpp>
#include <graphstep/ops/gemm_problem.hpp>
#include <graphstep/ops/reference.hpp>
#include <random>
#include <string>
#include <vector>

#include "common/error_message.hpp"
#include "common/gemm_numerics.hpp"

namespace gs = graphstep;
namespace go = graphstep::ops;
namespace ref = graphstep::ops::reference;

namespace {

constexpr std::array all_kinds{go::gemm_kind::forward,
                               go::gemm_kind::forward_bias,
                               go::gemm_kind::forward_gelu,
                               go::gemm_kind::forward_bias_gelu,
                               go::gemm_kind::backward_data,
                               go::gemm_kind::backward_data_dgelu,
                               go::gemm_kind::backward_data_gelu,
                               go::gemm_kind::backward_weight,
                               go::gemm_kind::backward_weight_bias};

bool has_epilogue(go::gemm_kind kind) {
  return kind != go::gemm_kind::forward && kind != go::gemm_kind::backward_data &&
         kind != go::gemm_kind::backward_weight;
}

// The fused path's rule, stated in row-major terms independently of the mapping: every matrix
// of the GEMM has rows of N or K elements, which must be whole multiples of 16 bytes, and a
// GELU epilogue's pre-activation (width N forward, K backward) needs a width divisible by 8.
bool fusable_by_rule(go::gemm_problem const& p) {
  if (!has_epilogue(p.kind)) return true;
  auto const bytes = static_cast<std::int64_t>(gs::size_in_bytes(p.type));
  bool const rows_ok = (p.n * bytes) % 16 == 0 && (p.k * bytes) % 16 == 0;
  std::int64_t width = 0;
  if (p.kind == go::gemm_kind::forward_gelu || p.kind == go::gemm_kind::forward_bias_gelu) {
    width = p.n;
  }
  if (p.kind == go::gemm_kind::backward_data_dgelu || p.kind == go::gemm_kind::backward_data_gelu) {
    width = p.k;
  }
  return rows_ok && width % 8 == 0;
}

go::operand_addresses aligned_addresses() {
  return {0x10000, 0x20000, 0x30000, 0x40000, 0x50000};
}

go::gemm_options allowing_unfused() {
  go::gemm_options o;
  o.allow_unfused = true;
  return o;
}

}  // namespace

TEST(gemm_path, fused_exactly_when_the_row_major_rule_holds) {
  std::vector<std::int64_t> const sizes{1, 3, 7, 8, 12, 16, 17, 24, 33, 40, 63, 64, 100, 128, 1001};
  int fused = 0;
  int unfused = 0;
  for (auto kind : all_kinds) {
    for (auto const numerics : gs::testing::all_gemm_numerics) {
      for (std::int64_t m : {std::int64_t{1}, std::int64_t{31}, std::int64_t{640}}) {
        for (std::int64_t n : sizes) {
          for (std::int64_t k : sizes) {
            go::gemm_problem const p{kind, m, n, k, numerics.type, numerics.math};
            bool const want = fusable_by_rule(p);
            auto const s = go::can_fuse(p, aligned_addresses());
            ASSERT_EQ(s.fused, want) << go::describe(p) << ": " << s.reason;
            auto const d = go::decide_path(p, aligned_addresses(), allowing_unfused());
            ASSERT_EQ(d.fused, want);
            ASSERT_EQ(d.reason.empty(), want) << d.reason;
            if (want) {
              ++fused;
              EXPECT_EQ(d.gemm_epilogue, go::map_to_cublaslt(p).ep);
              EXPECT_TRUE(d.kernels.empty());
            } else {
              ++unfused;
              EXPECT_EQ(d.gemm_epilogue, go::epilogue::none);
              EXPECT_FALSE(d.kernels.empty());
              EXPECT_THROW(static_cast<void>(go::decide_path(p, aligned_addresses(), {})),
                           gs::usage_error);
            }
          }
        }
      }
    }
  }
  // The sweep covers both outcomes in quantity (so the rule is really exercised).
  EXPECT_GT(fused, 1000);
  EXPECT_GT(unfused, 1000);
}

TEST(gemm_path, odd_batch_never_blocks_fusion) {
  for (auto kind : all_kinds) {
    for (std::int64_t m : {1, 3, 17, 99, 641}) {
      auto const d =
          go::decide_path({kind, m, 64, 128, gs::dtype::bfloat16}, aligned_addresses(), {});
      EXPECT_TRUE(d.fused) << go::name(kind) << " M=" << m << ": " << d.reason;
    }
  }
}

TEST(gemm_path, refusal_names_the_constraint_and_the_remedy) {
  try {
    static_cast<void>(
        go::decide_path({go::gemm_kind::forward_bias_gelu, 64, 100, 256, gs::dtype::bfloat16},
                        aligned_addresses(), {}));
    FAIL() << "a width of 100 cannot fuse the GELU epilogue";
  } catch (gs::usage_error const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("multiple of 8"), std::string::npos) << what;
    EXPECT_NE(what.find("100"), std::string::npos) << what;
    EXPECT_NE(what.find("GELU_AUX_BIAS"), std::string::npos) << what;
    EXPECT_NE(what.find("allow_unfused"), std::string::npos) << what;
  }
  // fp16 K = 1001: a 2002-byte row of X and W.
  try {
    static_cast<void>(go::decide_path(
        {go::gemm_kind::forward_bias, 64, 128, 1001, gs::dtype::float16}, aligned_addresses(), {}));
    FAIL() << "K = 1001 fp16 cannot fuse";
  } catch (gs::usage_error const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("16 bytes"), std::string::npos) << what;
    EXPECT_NE(what.find("multiple of 8"), std::string::npos) << what;  // the padding advice
  }
}

TEST(gemm_path, alignment_is_read_from_real_pointer_values) {
  alignas(256) static std::array<unsigned char, 4096> storage{};
  auto const at = [&](std::size_t offset) {
    return reinterpret_cast<std::uintptr_t>(storage.data() + offset);
  };
  go::gemm_problem const p{go::gemm_kind::backward_data_gelu, 32, 64, 64, gs::dtype::float32};
  go::operand_addresses const good{at(0), at(256), at(512), at(768), at(1024)};
  EXPECT_TRUE(go::can_fuse(p, good).fused);
  struct case_t {
    go::operand_addresses addresses;
    char const* named;
  };
  for (auto const& c :
       {case_t{{at(4), at(256), at(512), at(768), at(1024)}, "W"},
        case_t{{at(0), at(264), at(512), at(768), at(1024)}, "dY"},
        case_t{{at(0), at(256), at(520), at(768), at(1024)}, "the output"},
        case_t{{at(0), at(256), at(512), at(772), at(1024)}, "the bias gradient"},
        case_t{{at(0), at(256), at(512), at(768), at(1032)}, "the pre-activation"}}) {
    auto const s = go::can_fuse(p, c.addresses);
    EXPECT_FALSE(s.fused) << c.named;
    EXPECT_NE(s.reason.find(c.named), std::string::npos) << s.reason;
    EXPECT_NE(s.reason.find("bytes past a 16-byte boundary"), std::string::npos) << s.reason;
    auto const d = go::decide_path(p, c.addresses, allowing_unfused());
    EXPECT_FALSE(d.fused);
    EXPECT_EQ(d.reason, s.reason);
  }
  // A bias pointer means nothing to a kind without a bias: it is not checked there.
  go::operand_addresses stray_bias = good;
  stray_bias.bias = at(3);
  EXPECT_TRUE(
      go::can_fuse({go::gemm_kind::backward_data_dgelu, 32, 64, 64, gs::dtype::float32}, stray_bias)
          .fused);
  // Kinds without an epilogue have nothing to fuse: cuBLASLt takes any element alignment.
  go::operand_addresses const odd{at(2), at(6), at(10), 0, 0};
  EXPECT_TRUE(go::can_fuse({go::gemm_kind::forward, 7, 5, 3, gs::dtype::float16}, odd).fused);
}

// The algorithm cache must not hand a gemm an algorithm chosen for pointers with other
// alignments: cuBLASLt's heuristic reads the bias and aux pointers from the descriptor.
TEST(gemm_path, algorithm_key_tells_bias_and_aux_alignments_apart) {
  go::operand_addresses const aligned{0x10000, 0x20000, 0x30000, 0x40000, 0x50000};
  go::gemm_options const options;
  auto const key = [&](go::gemm_problem const& p, go::operand_addresses const& at) {
    return go::algorithm_key_for(0, p, go::decide_path(p, at, options), at, 1, 1U << 22);
  };
  for (auto kind : {go::gemm_kind::forward_bias_gelu, go::gemm_kind::backward_data_gelu}) {
    go::gemm_problem const p{kind, 64, 128, 256, gs::dtype::bfloat16};
    auto const base = key(p, aligned);
    EXPECT_EQ(base, key(p, aligned));
    EXPECT_EQ(base.align_bias, 256U);
    EXPECT_EQ(base.align_aux, 256U);
    go::operand_addresses bias_at_16 = aligned;
    bias_at_16.bias += 16;  // still fusable, but no longer 32-byte aligned
    go::operand_addresses aux_at_16 = aligned;
    aux_at_16.aux += 16;
    EXPECT_FALSE(base == key(p, bias_at_16)) << go::name(kind);
    EXPECT_EQ(key(p, bias_at_16).align_bias, 16U);
    EXPECT_FALSE(base == key(p, aux_at_16)) << go::name(kind);
    EXPECT_EQ(key(p, aux_at_16).align_aux, 16U);
    EXPECT_TRUE(base < key(p, bias_at_16) || key(p, bias_at_16) < base);
  }
  // A pointer the GEMM does not use does not split the cache: a stray bias on a kind without
  // one, and the epilogue pointers of the unfused path (a plain GEMM).
  go::gemm_problem const plain{go::gemm_kind::backward_data_dgelu, 64, 128, 256,
                               gs::dtype::bfloat16};
  go::operand_addresses stray = aligned;
  stray.bias += 2;
  EXPECT_EQ(key(plain, aligned), key(plain, stray));
  go::gemm_problem const fwd{go::gemm_kind::forward_bias_gelu, 64, 128, 256, gs::dtype::bfloat16};
  go::gemm_options forced;
  forced.force_unfused = true;
  go::operand_addresses moved = aligned;
  moved.bias += 16;
  moved.aux += 32;
  auto const unfused_key = [&](go::operand_addresses const& at) {
    return go::algorithm_key_for(0, fwd, go::decide_path(fwd, at, forced), at, 1, 1U << 22);
  };
  EXPECT_EQ(unfused_key(aligned), unfused_key(moved));
  EXPECT_FALSE(unfused_key(aligned) == key(fwd, aligned));  // the path is part of the key
  // Every other field counts too.
  EXPECT_FALSE(key(fwd, aligned) == go::algorithm_key_for(1, fwd,
                                                          go::decide_path(fwd, aligned, options),
                                                          aligned, 1, 1U << 22));
  EXPECT_EQ(go::alignment_of(0x30), 16U);
  EXPECT_EQ(go::alignment_of(0x1000), 256U);
  EXPECT_EQ(go::alignment_of(0x1002), 2U);
}

TEST(gemm_path, erf_form_and_forced_unfused) {
  go::gemm_options erf;
  erf.form = go::gelu_form::erf;
  for (auto kind : all_kinds) {
    go::gemm_problem const p{kind, 64, 128, 256, gs::dtype::bfloat16};
    auto const d = go::decide_path(p, aligned_addresses(), erf);  // no allow_unfused needed
    EXPECT_EQ(d.fused, !go::uses_gelu(kind)) << go::name(kind);
    if (go::uses_gelu(kind)) {
      EXPECT_NE(d.reason.find("tanh form"), std::string::npos) << d.reason;
    }
    go::gemm_options forced;
    forced.force_unfused = true;
    auto const f = go::decide_path(p, aligned_addresses(), forced);
    EXPECT_EQ(f.fused, !has_epilogue(kind)) << go::name(kind);
    if (has_epilogue(kind)) {
      EXPECT_EQ(f.reason, "the unfused path was requested");
    }
  }
  go::gemm_options bad;
  bad.autotune_candidates = 0;
  EXPECT_THROW(static_cast<void>(
                   go::decide_path({go::gemm_kind::forward, 8, 8, 8}, aligned_addresses(), bad)),
               gs::usage_error);
}

// cuBLASLt's heuristic may offer nothing for a shape: a fused epilogue falls back once (when
// allowed), and a plain GEMM with nothing to fall back to asks for more workspace.
TEST(gemm_path, no_algorithm_falls_back_once_then_asks_for_workspace) {
  go::gemm_problem const p{go::gemm_kind::forward_bias_gelu, 64, 128, 256, gs::dtype::bfloat16};
  go::gemm_options allow;
  allow.allow_unfused = true;
  auto const fused = go::decide_path(p, aligned_addresses(), allow);
  ASSERT_TRUE(fused.fused);
  auto const fallback = go::path_without_algorithm(p, fused, allow, 0, "gemm L1");
  EXPECT_FALSE(fallback.fused);
  EXPECT_EQ(fallback.kernels, go::unfused_path(p, "").kernels);
  EXPECT_NE(fallback.reason.find("gemm L1: cuBLASLt offers no algorithm for the"),
            std::string::npos)
      << fallback.reason;
  EXPECT_NE(fallback.reason.find("0 bytes of workspace"), std::string::npos) << fallback.reason;

  auto const message = [&](go::path_decision const& current, go::gemm_options const& options) {
    return gs::testing::message_of([&] {
      static_cast<void>(go::path_without_algorithm(p, current, options, 1024, "gemm L1"));
    });
  };
  std::string const plain = message(fallback, allow);
  EXPECT_NE(plain.find("gemm L1: cuBLASLt has no algorithm for it with 1024 bytes of workspace"),
            std::string::npos)
      << plain;
  EXPECT_NE(plain.find("gemm::workspace_size"), std::string::npos) << plain;
  std::string const strict = message(fused, go::gemm_options{});
  EXPECT_NE(strict.find("set gemm_options::allow_unfused"), std::string::npos) << strict;
  EXPECT_NE(strict.find("or give it more workspace"), std::string::npos) << strict;
}

TEST(gemm_path, unfused_kernels_by_kind) {
  using k = go::unfused_kernel;
  auto kernels = [](go::gemm_kind kind) {
    return go::unfused_path({kind, 4, 4, 4}, "test").kernels;
  };
  EXPECT_EQ(kernels(go::gemm_kind::forward), std::vector<k>{});
  EXPECT_EQ(kernels(go::gemm_kind::forward_bias), std::vector<k>{k::bias});
  EXPECT_EQ(kernels(go::gemm_kind::forward_gelu), std::vector<k>{k::gelu});
  EXPECT_EQ(kernels(go::gemm_kind::forward_bias_gelu), std::vector<k>{k::bias_gelu});
  EXPECT_EQ(kernels(go::gemm_kind::backward_data_dgelu), std::vector<k>{k::gelu_backward});
  EXPECT_EQ(kernels(go::gemm_kind::backward_data_gelu),
            (std::vector<k>{k::gelu_backward, k::bias_gradient_of_out}));
  EXPECT_EQ(kernels(go::gemm_kind::backward_weight_bias), std::vector<k>{k::bias_gradient_of_lhs});
  EXPECT_EQ(go::unfused_path({go::gemm_kind::forward_bias, 4, 4, 4}, "why").reason, "why");
}

// The unfused path run in fp64 (plain GEMM, then its kernels as the shell launches them) gives
// the fused epilogue's formula, for every kind, at shapes the fused path refuses.
TEST(gemm_path, unfused_kernels_compute_the_fused_formula) {
  std::mt19937 rng{11};
  std::uniform_real_distribution<double> dist{-1.5, 1.5};
  auto random = [&](std::size_t n) {
    std::vector<double> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
  };
  auto const form = go::gelu_form::tanh;
  for (auto [m, n, k] : {std::tuple{5, 7, 3}, std::tuple{9, 12, 10}, std::tuple{1, 13, 17}}) {
    auto const M = static_cast<std::size_t>(m);
    auto const N = static_cast<std::size_t>(n);
    auto const K = static_cast<std::size_t>(k);
    auto const lhs_fwd = random(M * K);  // X
    auto const rhs = random(N * K);      // W (or X for the weight gradient, below)
    auto const dy = random(M * N);
    auto const bias = random(N);
    auto const z_saved = random(M * K);  // a forward's pre-activation, for the backward kinds
    for (auto kind : all_kinds) {
      go::gemm_problem const p{kind, m, n, k, gs::dtype::float32};
      auto const d = go::unfused_path(p, "test");
      // The plain GEMM of each kind, in row-major terms.
      std::vector<double> out;
      std::size_t rows = M;
      std::size_t cols = N;
      std::vector<double> const* lhs = &lhs_fwd;
      if (kind == go::gemm_kind::backward_data || kind == go::gemm_kind::backward_data_dgelu ||
          kind == go::gemm_kind::backward_data_gelu) {
        out = ref::matmul_ab(dy, rhs, M, K, N);
        cols = K;
        lhs = &dy;
      } else if (kind == go::gemm_kind::backward_weight ||
                 kind == go::gemm_kind::backward_weight_bias) {
        out = ref::matmul_atb(dy, lhs_fwd, M, N, K);
        rows = N;
        cols = K;
        lhs = &dy;
      } else {
        out = ref::matmul_abt(lhs_fwd, rhs, M, N, K);
      }
      std::vector<double> pre = z_saved;
      std::vector<double> db;
      for (auto kernel : d.kernels) {
        switch (kernel) {
          case go::unfused_kernel::bias:
            for (std::size_t i = 0; i < out.size(); ++i) out[i] += bias[i % cols];
            break;
          case go::unfused_kernel::gelu:
          case go::unfused_kernel::bias_gelu:
            pre.assign(out.size(), 0.0);
            for (std::size_t i = 0; i < out.size(); ++i) {
              pre[i] = out[i] + (kernel == go::unfused_kernel::bias_gelu ? bias[i % cols] : 0.0);
              out[i] = ref::gelu(pre[i], form);
            }
            break;
          case go::unfused_kernel::gelu_backward:
            for (std::size_t i = 0; i < out.size(); ++i) {
              out[i] *= ref::gelu_derivative(pre[i], form);
            }
            break;
          case go::unfused_kernel::bias_gradient_of_out:
            db = ref::column_sums(out, rows, cols);
            break;
          case go::unfused_kernel::bias_gradient_of_lhs: db = ref::column_sums(*lhs, M, N); break;
        }
      }
      // The fused formulas of the table in gemm_problem.hpp.
      switch (kind) {
        case go::gemm_kind::forward_bias:
        case go::gemm_kind::forward_bias_gelu:
        case go::gemm_kind::forward_gelu: {
          auto z = ref::matmul_abt(lhs_fwd, rhs, M, N, K);
          if (kind != go::gemm_kind::forward_gelu) {
            for (std::size_t i = 0; i < z.size(); ++i) z[i] += bias[i % N];
          }
          for (std::size_t i = 0; i < z.size(); ++i) {
            double const want = kind == go::gemm_kind::forward_bias ? z[i] : ref::gelu(z[i], form);
            EXPECT_NEAR(out[i], want, 1e-12) << go::name(kind);
            if (kind != go::gemm_kind::forward_bias) {
              EXPECT_NEAR(pre[i], z[i], 1e-12);
            }
          }
          break;
        }
        case go::gemm_kind::backward_data_dgelu:
        case go::gemm_kind::backward_data_gelu: {
          auto dz = ref::matmul_ab(dy, rhs, M, K, N);
          for (std::size_t i = 0; i < dz.size(); ++i)
            dz[i] *= ref::gelu_derivative(z_saved[i], form);
          for (std::size_t i = 0; i < dz.size(); ++i) EXPECT_NEAR(out[i], dz[i], 1e-12);
          if (kind == go::gemm_kind::backward_data_gelu) {
            auto const want_db = ref::column_sums(dz, M, K);
            ASSERT_EQ(db.size(), K);
            for (std::size_t j = 0; j < K; ++j) EXPECT_NEAR(db[j], want_db[j], 1e-12);
          } else {
            EXPECT_TRUE(db.empty());
          }
          break;
        }
        case go::gemm_kind::backward_weight_bias: {
          auto const want_db = ref::column_sums(dy, M, N);
          ASSERT_EQ(db.size(), N);
          for (std::size_t j = 0; j < N; ++j) EXPECT_NEAR(db[j], want_db[j], 1e-12);
          break;
        }
        case go::gemm_kind::forward:
        case go::gemm_kind::backward_data:
        case go::gemm_kind::backward_weight: EXPECT_TRUE(d.kernels.empty()); break;
      }
    }
  }
}
