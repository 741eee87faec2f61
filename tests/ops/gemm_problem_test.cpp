// The description and its mapping in ops/gemm_problem.hpp: the row-major -> column-major mapping
// of every GEMM of the layer (map_to_cublaslt), checked by evaluating the mapped column-major
// call in fp64 against the row-major formula; the fused epilogue's constraints one at a time
// (can_fuse); element types, math modes and names. The path decision: gemm_path_test.cpp.

#include <gtest/gtest.h>

#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/ops/gemm_problem.hpp>
#include <graphstep/ops/reference.hpp>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "common/error_message.hpp"
#include "common/gemm_numerics.hpp"

namespace gs = graphstep;
namespace go = graphstep::ops;
namespace ref = graphstep::ops::reference;

namespace {

// Evaluates a column-major call on raw storage, as cuBLASLt would: D = op(A)·op(B).
std::vector<double> run_column_major(go::lt_call const& c, std::vector<double> const& a,
                                     std::vector<double> const& b) {
  std::vector<double> d(static_cast<std::size_t>(c.ldc * c.n), 0.0);
  for (std::int64_t i = 0; i < c.m; ++i) {
    for (std::int64_t j = 0; j < c.n; ++j) {
      double sum = 0.0;
      for (std::int64_t p = 0; p < c.k; ++p) {
        double const x = c.transpose_a ? a[static_cast<std::size_t>(p + i * c.lda)]
                                       : a[static_cast<std::size_t>(i + p * c.lda)];
        double const y = c.transpose_b ? b[static_cast<std::size_t>(j + p * c.ldb)]
                                       : b[static_cast<std::size_t>(p + j * c.ldb)];
        sum += x * y;
      }
      d[static_cast<std::size_t>(i + j * c.ldc)] = sum;
    }
  }
  return d;
}

std::vector<double> random(std::size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<double> dist{-1.0, 1.0};
  std::vector<double> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

}  // namespace

TEST(gemm_mapping, every_kind_computes_its_row_major_formula) {
  std::mt19937 rng{5};
  for (auto [m, n, k] :
       {std::tuple{3, 5, 7}, std::tuple{8, 16, 24}, std::tuple{1, 1, 1}, std::tuple{13, 9, 4}}) {
    auto const M = static_cast<std::size_t>(m);
    auto const N = static_cast<std::size_t>(n);
    auto const K = static_cast<std::size_t>(k);
    auto const x = random(M * K, rng);   // X[M,K]
    auto const w = random(N * K, rng);   // W[N,K]
    auto const dy = random(M * N, rng);  // dY[M,N]
    // Forward: row-major Y = X·Wᵀ; rhs = W is A, lhs = X is B; D is Yᵀ column-major = Y.
    auto const fwd = go::map_to_cublaslt({go::gemm_kind::forward_bias_gelu, m, n, k});
    EXPECT_EQ(run_column_major(fwd, w, x), ref::matmul_abt(x, w, M, N, K));
    EXPECT_EQ(fwd.bias_length, n);
    EXPECT_EQ(fwd.aux_ld, n);
    EXPECT_EQ(fwd.ep, go::epilogue::gelu_aux_bias);
    // Backward data: dX = dY·W; A = W, B = dY.
    auto const bwd = go::map_to_cublaslt({go::gemm_kind::backward_data_gelu, m, n, k});
    EXPECT_EQ(run_column_major(bwd, w, dy), ref::matmul_ab(dy, w, M, K, N));
    EXPECT_EQ(bwd.aux_ld, k);
    EXPECT_EQ(bwd.bias_length, k);
    // Backward weight: dW = dYᵀ·X; A = X, B = dY.
    auto const wgt = go::map_to_cublaslt({go::gemm_kind::backward_weight_bias, m, n, k});
    EXPECT_EQ(run_column_major(wgt, x, dy), ref::matmul_atb(dy, x, M, N, K));
    EXPECT_EQ(wgt.bias_length, n);
    EXPECT_EQ(wgt.ep, go::epilogue::bgradb);
  }
}

// Every kind, over odd and non-multiple-of-8 shapes: the mapped column-major call computes its
// row-major formula, and the layout facts cuBLASLt checks hold (ld >= rows of each stored
// matrix, aux ld = rows of D, bias length = rows of D except BGRADB's columns of D).
TEST(gemm_mapping, all_kinds_on_odd_shapes) {
  std::mt19937 rng{6};
  for (auto [m, n, k] : {std::tuple{1, 9, 5}, std::tuple{7, 3, 11}, std::tuple{17, 24, 33},
                         std::tuple{31, 40, 8}, std::tuple{2, 1, 65}}) {
    auto const M = static_cast<std::size_t>(m);
    auto const N = static_cast<std::size_t>(n);
    auto const K = static_cast<std::size_t>(k);
    auto const x = random(M * K, rng);
    auto const w = random(N * K, rng);
    auto const dy = random(M * N, rng);
    for (auto kind :
         {go::gemm_kind::forward, go::gemm_kind::forward_bias, go::gemm_kind::forward_gelu,
          go::gemm_kind::forward_bias_gelu, go::gemm_kind::backward_data,
          go::gemm_kind::backward_data_dgelu, go::gemm_kind::backward_data_gelu,
          go::gemm_kind::backward_weight, go::gemm_kind::backward_weight_bias}) {
      auto const c = go::map_to_cublaslt({kind, m, n, k});
      std::vector<double> got;
      std::vector<double> want;
      std::string const what = go::name(kind);
      if (what.rfind("forward", 0) == 0) {
        got = run_column_major(c, w, x);
        want = ref::matmul_abt(x, w, M, N, K);
        EXPECT_STREQ(c.a_operand, "W");
        EXPECT_STREQ(c.b_operand, "X");
      } else if (what.rfind("backward_data", 0) == 0) {
        got = run_column_major(c, w, dy);
        want = ref::matmul_ab(dy, w, M, K, N);
        EXPECT_STREQ(c.b_operand, "dY");
      } else {
        got = run_column_major(c, x, dy);
        want = ref::matmul_atb(dy, x, M, N, K);
        EXPECT_STREQ(c.a_operand, "X");
      }
      ASSERT_EQ(got.size(), want.size()) << what;
      for (std::size_t i = 0; i < want.size(); ++i) {
        EXPECT_NEAR(got[i], want[i], 1e-12) << what << " " << m << "x" << n << "x" << k;
      }
      EXPECT_GE(c.lda, c.transpose_a ? c.k : c.m) << what;
      EXPECT_GE(c.ldb, c.transpose_b ? c.n : c.k) << what;
      EXPECT_GE(c.ldc, c.m) << what;
      bool const gelu = go::uses_gelu(kind);
      EXPECT_EQ(c.aux_ld, gelu ? c.m : 0) << what;
      if (c.ep == go::epilogue::bgradb) {
        EXPECT_EQ(c.bias_length, c.n);
      } else if (c.ep == go::epilogue::bias || c.ep == go::epilogue::gelu_aux_bias ||
                 c.ep == go::epilogue::dgelu_bgrad) {
        EXPECT_EQ(c.bias_length, c.m) << what;
      } else {
        EXPECT_EQ(c.bias_length, 0) << what;
      }
    }
  }
}

TEST(gemm_mapping, epilogues_by_kind) {
  EXPECT_EQ(go::map_to_cublaslt({go::gemm_kind::forward, 2, 2, 2}).ep, go::epilogue::none);
  EXPECT_EQ(go::map_to_cublaslt({go::gemm_kind::forward_bias, 2, 2, 2}).ep, go::epilogue::bias);
  EXPECT_EQ(go::map_to_cublaslt({go::gemm_kind::backward_data, 2, 2, 2}).ep, go::epilogue::none);
  EXPECT_EQ(go::map_to_cublaslt({go::gemm_kind::backward_weight, 2, 2, 2}).ep, go::epilogue::none);
  EXPECT_EQ(go::map_to_cublaslt({go::gemm_kind::forward_gelu, 2, 2, 2}).ep, go::epilogue::gelu_aux);
  EXPECT_EQ(go::map_to_cublaslt({go::gemm_kind::backward_data_dgelu, 2, 2, 2}).ep,
            go::epilogue::dgelu);
  EXPECT_EQ(go::map_to_cublaslt({go::gemm_kind::backward_data_gelu, 2, 2, 2}).ep,
            go::epilogue::dgelu_bgrad);
}

TEST(gemm_mapping, bad_sizes_are_usage_errors) {
  EXPECT_THROW(static_cast<void>(go::map_to_cublaslt({go::gemm_kind::forward, 0, 4, 4})),
               graphstep::usage_error);
  EXPECT_THROW(static_cast<void>(go::map_to_cublaslt({go::gemm_kind::forward, 4, -1, 4})),
               graphstep::usage_error);
  EXPECT_THROW(
      static_cast<void>(go::map_to_cublaslt({go::gemm_kind::forward, std::int64_t{1} << 32, 4, 4})),
      graphstep::usage_error);
}

TEST(gemm_fusion, widths_not_a_multiple_of_eight_cannot_fuse_the_gelu) {
  go::operand_addresses const aligned{0x1000, 0x2000, 0x3000, 0x4000, 0x5000};
  auto const ok =
      go::can_fuse({go::gemm_kind::forward_bias_gelu, 64, 128, 256, gs::dtype::bfloat16}, aligned);
  EXPECT_TRUE(ok.fused) << ok.reason;
  auto const odd =
      go::can_fuse({go::gemm_kind::forward_bias_gelu, 64, 100, 256, gs::dtype::bfloat16}, aligned);
  EXPECT_FALSE(odd.fused);
  EXPECT_NE(odd.reason.find("multiple of 8"), std::string::npos) << odd.reason;
  EXPECT_NE(odd.reason.find("unfused fallback"), std::string::npos) << odd.reason;
  // The backward's aux is the layer's own width (K here).
  EXPECT_FALSE(
      go::can_fuse({go::gemm_kind::backward_data_gelu, 64, 128, 12, gs::dtype::float32}, aligned)
          .fused);
  // Odd M is fine: it is not a leading dimension of the fused output.
  EXPECT_TRUE(
      go::can_fuse({go::gemm_kind::forward_bias_gelu, 63, 128, 256, gs::dtype::float32}, aligned)
          .fused);
}

TEST(gemm_fusion, leading_dimensions_and_pointers_must_be_16_byte_aligned) {
  go::operand_addresses const aligned{0x1000, 0x2000, 0x3000, 0x4000, 0x5000};
  auto const k_odd =
      go::can_fuse({go::gemm_kind::forward_bias, 64, 128, 1001, gs::dtype::float16}, aligned);
  EXPECT_FALSE(k_odd.fused);
  EXPECT_NE(k_odd.reason.find("16 bytes"), std::string::npos) << k_odd.reason;
  go::operand_addresses misaligned = aligned;
  misaligned.bias = 0x4002;
  auto const bad =
      go::can_fuse({go::gemm_kind::forward_bias, 64, 128, 256, gs::dtype::float32}, misaligned);
  EXPECT_FALSE(bad.fused);
  EXPECT_NE(bad.reason.find("bias"), std::string::npos) << bad.reason;
}

TEST(gemm_problem, flops_and_names) {
  EXPECT_DOUBLE_EQ(go::flops({go::gemm_kind::forward, 2, 3, 4}), 48.0);
  go::gemm_problem const tf32{go::gemm_kind::forward, 2, 3, 4, gs::dtype::float32,
                              go::gemm_math::tf32};
  EXPECT_DOUBLE_EQ(go::flops(tf32), 48.0);
  EXPECT_EQ(gs::size_in_bytes(gs::dtype::bfloat16), 2U);
  EXPECT_EQ(gs::size_in_bytes(tf32.type), 4U);  // tf32 math keeps float32 data
  EXPECT_STREQ(go::name(go::gemm_math::tf32), "tf32");
  EXPECT_EQ(go::describe(tf32), "gemm forward (float32 with tf32 math, M=2 N=3 K=4)");
  EXPECT_EQ(go::describe({go::gemm_kind::forward, 2, 3, 4, gs::dtype::bfloat16}),
            "gemm forward (bfloat16, M=2 N=3 K=4)");
  EXPECT_STREQ(go::name(go::gemm_kind::backward_data_gelu), "backward_data_gelu");
}

TEST(gemm_dtypes, supported_combinations) {
  using go::gemm_math;
  using gs::dtype;
  EXPECT_EQ(go::element_type_for(dtype::float32, dtype::float32, gemm_math::standard),
            dtype::float32);
  EXPECT_EQ(go::element_type_for(dtype::float32, dtype::float32, gemm_math::tf32), dtype::float32);
  EXPECT_EQ(go::element_type_for(dtype::float16, dtype::float16, gemm_math::standard),
            dtype::float16);
  EXPECT_EQ(go::element_type_for(dtype::bfloat16, dtype::bfloat16, gemm_math::standard),
            dtype::bfloat16);
  for (auto const numerics : gs::testing::all_gemm_numerics) {
    EXPECT_EQ(go::element_type_for(numerics.type, numerics.type, numerics.math), numerics.type);
    EXPECT_NO_THROW(static_cast<void>(
        go::map_to_cublaslt({go::gemm_kind::forward, 8, 8, 8, numerics.type, numerics.math})));
  }
  try {
    static_cast<void>(go::element_type_for(dtype::bfloat16, dtype::float32, gemm_math::standard));
    FAIL() << "mixed types are refused";
  } catch (gs::usage_error const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("bfloat16"), std::string::npos) << what;
    EXPECT_NE(what.find("float32"), std::string::npos) << what;
    EXPECT_NE(what.find("one type"), std::string::npos) << what;
  }
  try {
    static_cast<void>(go::element_type_for(dtype::float16, dtype::float16, gemm_math::tf32));
    FAIL() << "tf32 on 16-bit data is refused";
  } catch (gs::usage_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("float32 data only"), std::string::npos) << e.what();
  }
  EXPECT_THROW(
      static_cast<void>(go::element_type_for(dtype::float16, dtype::bfloat16, gemm_math::standard)),
      gs::usage_error);
  // A problem that asks for tf32 math on 16-bit data is refused the same way.
  for (dtype const type : {dtype::float16, dtype::bfloat16}) {
    std::string const what = gs::testing::message_of([&] {
      static_cast<void>(
          go::map_to_cublaslt({go::gemm_kind::forward, 8, 8, 8, type, gemm_math::tf32}));
    });
    EXPECT_NE(what.find("float32 data only"), std::string::npos) << what;
  }
  // Integers are no GEMM element type, by either door.
  std::string what = gs::testing::message_of([] {
    static_cast<void>(go::element_type_for(dtype::int32, dtype::int32, gemm_math::standard));
  });
  EXPECT_NE(what.find("is int32; it takes float32, float16 or bfloat16"), std::string::npos)
      << what;
  what = gs::testing::message_of([] {
    static_cast<void>(
        go::map_to_cublaslt({go::gemm_kind::forward, 8, 8, 8, dtype::uint8, gemm_math::standard}));
  });
  EXPECT_NE(what.find("gemm forward: type is uint8"), std::string::npos) << what;
}

TEST(gemm_dtypes, names) {
  EXPECT_STREQ(gs::name(gs::dtype::bfloat16), "bfloat16");
  EXPECT_EQ(gs::size_in_bytes(gs::dtype::float16), 2U);
  EXPECT_EQ(gs::size_in_bytes(gs::dtype::float32), 4U);
  EXPECT_STREQ(go::name(go::epilogue::gelu_aux_bias), "GELU_AUX_BIAS");
  EXPECT_STREQ(go::name(go::epilogue::dgelu_bgrad), "DGELU_BGRAD");
  EXPECT_STREQ(go::name(go::gemm_kind::backward_data_dgelu), "backward_data_dgelu");
  EXPECT_TRUE(go::uses_gelu(go::gemm_kind::forward_gelu));
  EXPECT_FALSE(go::uses_gelu(go::gemm_kind::backward_weight_bias));
}
