#pragma once

// The model of transformer_model.hpp in fp64 on the host, from graphstep's reference ops: the
// loss and every gradient of given weights, in the layout of the model's parameter buffer. The
// example checks its step against it (--check-gradients).

#include <cstddef>
#include <cstdint>
#include <graphstep/ops/reference.hpp>
#include <vector>

#include "transformer_model.hpp"

namespace transformer_example {

struct reference_result {
  double loss{};
  std::vector<double> gradients;  // the model's layout: tensor t at tensors()[t].offset
};

// `weights`: the model's parameter buffer as doubles; `tensors`: its layout (in the order
// transformer::tensors() documents).
inline reference_result reference_step(transformer_config const& c,
                                       std::vector<graphstep::parameter_slot> const& tensors,
                                       std::vector<double> const& weights,
                                       std::vector<std::int32_t> const& tokens,
                                       std::vector<std::int32_t> const& targets) {
  namespace ref = graphstep::ops::reference;
  std::size_t const B = static_cast<std::size_t>(c.batch);
  std::size_t const T = static_cast<std::size_t>(c.sequence);
  std::size_t const C = static_cast<std::size_t>(c.channels);
  std::size_t const H = static_cast<std::size_t>(c.heads);
  std::size_t const D = C / H;
  std::size_t const V = static_cast<std::size_t>(c.vocab);
  std::size_t const VP = static_cast<std::size_t>(c.padded_vocab());
  std::size_t const M = B * T;
  double const eps = layer_norm_epsilon;

  std::size_t next = 0;
  auto take = [&] { return tensors.at(next++); };
  using slot = graphstep::parameter_slot;
  auto get = [&](slot const& t) {
    return std::vector<double>(
        weights.begin() + static_cast<std::ptrdiff_t>(t.offset),
        weights.begin() + static_cast<std::ptrdiff_t>(t.offset + t.spec.count()));
  };
  reference_result result{0.0, std::vector<double>(weights.size(), 0.0)};
  auto put = [&](slot const& t, std::vector<double> const& g, bool add) {
    for (std::size_t i = 0; i < g.size(); ++i) {
      result.gradients[t.offset + i] = (add ? result.gradients[t.offset + i] : 0.0) + g[i];
    }
  };
  auto add_bias = [](std::vector<double>& y, std::vector<double> const& bias, std::size_t n) {
    for (std::size_t i = 0; i < y.size(); ++i) y[i] += bias[i % n];
  };
  auto add_into = [](std::vector<double>& y, std::vector<double> const& x) {
    for (std::size_t i = 0; i < y.size(); ++i) y[i] += x[i];
  };

  struct layer {
    slot ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc1_w, fc1_b, fc2_w, fc2_b;
    std::vector<double> x, ln1, qkv, attention, h, ln2, z, a;
  };
  slot const wte = take();
  slot const wpe = take();
  std::vector<layer> layers(static_cast<std::size_t>(c.layers));
  for (auto& l : layers) {
    l.ln1_w = take(), l.ln1_b = take(), l.qkv_w = take(), l.qkv_b = take();
    l.proj_w = take(), l.proj_b = take(), l.ln2_w = take(), l.ln2_b = take();
    l.fc1_w = take(), l.fc1_b = take(), l.fc2_w = take(), l.fc2_b = take();
  }
  slot const lnf_w = take();
  slot const lnf_b = take();

  // Forward.
  std::vector<double> x = ref::embedding(tokens, get(wte), get(wpe), B, T, V, C);
  for (auto& l : layers) {
    l.x = x;
    l.ln1 = ref::layer_norm(x, get(l.ln1_w), get(l.ln1_b), M, C, eps).y;
    l.qkv = ref::matmul_abt(l.ln1, get(l.qkv_w), M, 3 * C, C);
    add_bias(l.qkv, get(l.qkv_b), 3 * C);
    l.attention = ref::causal_attention(l.qkv, B, T, H, D).out;
    l.h = ref::matmul_abt(l.attention, get(l.proj_w), M, C, C);
    add_bias(l.h, get(l.proj_b), C);
    add_into(l.h, x);
    l.ln2 = ref::layer_norm(l.h, get(l.ln2_w), get(l.ln2_b), M, C, eps).y;
    l.z = ref::matmul_abt(l.ln2, get(l.fc1_w), M, 4 * C, C);
    add_bias(l.z, get(l.fc1_b), 4 * C);
    l.a = l.z;
    for (double& v : l.a) v = ref::gelu(v, graphstep::ops::gelu_form::tanh);
    x = ref::matmul_abt(l.a, get(l.fc2_w), M, C, 4 * C);
    add_bias(x, get(l.fc2_b), C);
    add_into(x, l.h);
  }
  std::vector<double> const lnf = ref::layer_norm(x, get(lnf_w), get(lnf_b), M, C, eps).y;
  std::vector<double> const logits = ref::matmul_abt(lnf, get(wte), M, VP, C);
  auto const ce = ref::cross_entropy(logits, targets, M, V, VP, 1.0);
  result.loss = ce.loss;

  // Backward.
  put(wte, ref::matmul_atb(ce.dlogits, lnf, M, VP, C), false);
  auto g = ref::layer_norm_backward(ref::matmul_ab(ce.dlogits, get(wte), M, C, VP), x, get(lnf_w),
                                    M, C, eps);
  put(lnf_w, g.dgamma, false);
  put(lnf_b, g.dbeta, false);
  std::vector<double> d_residual = g.dx;
  for (std::size_t i = layers.size(); i-- > 0;) {
    auto const& l = layers[i];
    put(l.fc2_w, ref::matmul_atb(d_residual, l.a, M, C, 4 * C), false);
    put(l.fc2_b, ref::column_sums(d_residual, M, C), false);
    std::vector<double> dz = ref::matmul_ab(d_residual, get(l.fc2_w), M, 4 * C, C);
    for (std::size_t j = 0; j < dz.size(); ++j) {
      dz[j] *= ref::gelu_derivative(l.z[j], graphstep::ops::gelu_form::tanh);
    }
    put(l.fc1_w, ref::matmul_atb(dz, l.ln2, M, 4 * C, C), false);
    put(l.fc1_b, ref::column_sums(dz, M, 4 * C), false);
    g = ref::layer_norm_backward(ref::matmul_ab(dz, get(l.fc1_w), M, C, 4 * C), l.h, get(l.ln2_w),
                                 M, C, eps);
    put(l.ln2_w, g.dgamma, false);
    put(l.ln2_b, g.dbeta, false);
    add_into(d_residual, g.dx);
    put(l.proj_w, ref::matmul_atb(d_residual, l.attention, M, C, C), false);
    put(l.proj_b, ref::column_sums(d_residual, M, C), false);
    std::vector<double> const d_qkv = ref::causal_attention_backward(
        ref::matmul_ab(d_residual, get(l.proj_w), M, C, C), l.qkv, B, T, H, D);
    put(l.qkv_w, ref::matmul_atb(d_qkv, l.ln1, M, 3 * C, C), false);
    put(l.qkv_b, ref::column_sums(d_qkv, M, 3 * C), false);
    g = ref::layer_norm_backward(ref::matmul_ab(d_qkv, get(l.qkv_w), M, C, 3 * C), l.x,
                                 get(l.ln1_w), M, C, eps);
    put(l.ln1_w, g.dgamma, false);
    put(l.ln1_b, g.dbeta, false);
    add_into(d_residual, g.dx);
  }
  auto const e = ref::embedding_backward(d_residual, tokens, B, T, V, C);
  put(wte, e.token, true);  // the first V rows: the tied table's embedding part
  put(wpe, e.position, false);
  return result;
}

}  // namespace transformer_example
