#include "llama-model-shards.h"

#include "llama-graph.h"
#include "llama-impl.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>

namespace {

// units divided in proportion to the shares (largest remainder: the counts add up to units)
std::vector<uint32_t> divide(uint32_t units, const std::vector<double> & shares) {
    const size_t n = shares.size();
    std::vector<uint32_t> out(n, 0);
    std::vector<std::pair<double, size_t>> rest;
    uint32_t given = 0;
    for (size_t d = 0; d < n; ++d) {
        const double exact = units * shares[d];
        out[d] = (uint32_t) std::floor(exact);
        given += out[d];
        rest.push_back({ exact - out[d], d });
    }
    // the units rounding left over, to the largest remainders; never to a device without a share
    std::stable_sort(rest.begin(), rest.end(), [](const auto & a, const auto & b) { return a.first > b.first; });
    for (size_t i = 0; given < units; ++i) {
        const size_t d = rest[i % n].second;
        if (shares[d] <= 0) continue;
        out[d]++;
        ++given;
    }
    return out;
}

int64_t interleave(const ggml_tensor * t) { return t ? std::max(1, ggml_get_type_traits(t->type)->nrows_interleaved) : 1; }

// a cut after every `step` rows of t keeps its row groups whole
bool rows_cut_ok(const ggml_tensor * t, int64_t step) { return !t || step % interleave(t) == 0; }

// a cut after every `step` columns of t falls on a block boundary (interleaved rows cannot be cut)
bool cols_cut_ok(const ggml_tensor * t, int64_t step) {
    return !t || (interleave(t) == 1 && step % ggml_blck_size(t->type) == 0);
}

// The columns of an FFN (gate/up rows, down columns) each device gets; false if it cannot be cut.
bool ffn_columns(const ggml_tensor * gate, const ggml_tensor * up, const ggml_tensor * down, const std::vector<double> & shares,
                 std::vector<uint32_t> & out) {
    if (!up || !down) return false;
    const int64_t n_ff = up->ne[1];
    int64_t step = ggml_blck_size(down->type);
    // whole SIMD-friendly groups where the width allows
    const int64_t wide = std::lcm(step, (int64_t) 32);
    if (n_ff % wide == 0) step = wide;
    if (n_ff % step != 0 || !cols_cut_ok(down, step) || !rows_cut_ok(up, step) || !rows_cut_ok(gate, step)) return false;
    out = divide((uint32_t) (n_ff / step), shares);
    for (auto & c : out) c *= (uint32_t) step;
    return true;
}

// rows of attn_q per query head: the head, or the head and its output gate (qwen35)
int64_t q_rows_per_head(const llama_hparams & hp, const llama_layer & l) { return l.wq->ne[1] / hp.n_head; }

// KV heads per cut of the attention (whole query-head groups, block-aligned wo columns)
int64_t attn_step(const llama_hparams & hp, const llama_layer & l) {
    const int64_t G = hp.n_head / hp.n_head_kv;
    for (int64_t k = 1; k <= hp.n_head_kv; ++k) {
        if (hp.n_head_kv % k != 0) continue;
        if (cols_cut_ok(l.wo, k * G * hp.n_embd_head_v) && rows_cut_ok(l.wq, k * G * q_rows_per_head(hp, l)) &&
            rows_cut_ok(l.wk, k * hp.n_embd_head_k) && rows_cut_ok(l.wv, k * hp.n_embd_head_v)) {
            return k;
        }
    }
    return 0;
}

// MLA heads per cut: block-aligned wo columns, whole rows of the head's q and decompression rows
int64_t mla_step(const llama_hparams & hp, const llama_layer & l) {
    const int64_t n_nope = hp.n_embd_head_k - hp.n_rot, n_v = hp.n_embd_head_v;
    for (int64_t k = 1; k <= hp.n_head; ++k) {
        if (hp.n_head % k != 0) continue;
        if (cols_cut_ok(l.wo, k * n_v) && rows_cut_ok(l.wq_b ? l.wq_b : l.wq, k * hp.n_embd_head_k) &&
            rows_cut_ok(l.wkv_b, k * (n_nope + n_v))) {
            return k;
        }
    }
    return 0;
}

// A delta-net layer is cut by value heads. qwen35's layout: n_kh at a time so that each part's
// first value head pairs with key head 0 as the kernel assumes (value head h reads key head
// h % n_kh); every part computes all the key heads' q and k. qwen3next's layout keeps a key head's
// value heads together (ssm_in, ssm_ba grouped per key head): a part takes whole key heads with
// their value heads, so it computes only its own q and k.
bool is_qwen35_delta(const llama_layer & l) { return l.ssm_conv1d && l.wqkv && l.wqkv_gate && l.ssm_out; }
bool is_qwen3next_delta(const llama_layer & l) { return l.ssm_conv1d && l.ssm_in && l.ssm_ba && l.ssm_out; }
bool is_delta_net(const llama_layer & l) { return is_qwen35_delta(l) || is_qwen3next_delta(l); }

// value heads per cut (0: cannot be cut)
int64_t delta_step(const llama_hparams & hp, const llama_layer & l) {
    const int64_t n_kh = hp.ssm_n_group, n_vh = hp.ssm_dt_rank, d_v = hp.ssm_d_inner / hp.ssm_dt_rank, d_k = hp.ssm_d_state;
    if (is_qwen3next_delta(l)) {
        const int64_t r = n_vh / n_kh;
        for (int64_t kh = 1; kh <= n_kh; ++kh) {
            if (n_kh % kh != 0) continue;
            if (cols_cut_ok(l.ssm_out, kh * r * d_v) && rows_cut_ok(l.ssm_in, kh * (2 * d_k + 2 * r * d_v)) &&
                rows_cut_ok(l.ssm_ba, kh * 2 * r)) {
                return kh * r;
            }
        }
        return 0;
    }
    if (!rows_cut_ok(l.wqkv, 2 * n_kh * d_k)) return 0;
    for (int64_t k = n_kh; k <= n_vh; k += n_kh) {
        if (n_vh % k != 0) continue;
        if (cols_cut_ok(l.ssm_out, k * d_v) && rows_cut_ok(l.wqkv, k * d_v) && rows_cut_ok(l.wqkv_gate, k * d_v) &&
            rows_cut_ok(l.ssm_beta, k) && rows_cut_ok(l.ssm_alpha, k)) {
            return k;
        }
    }
    return 0;
}

// the layer's main FFN: dense, or the routed experts
void main_ffn(const llama_layer & l, const ggml_tensor *& gate, const ggml_tensor *& up, const ggml_tensor *& down) {
    const bool moe = l.ffn_up_exps != nullptr;
    gate = moe ? l.ffn_gate_exps : l.ffn_gate;
    up = moe ? l.ffn_up_exps : l.ffn_up;
    down = moe ? l.ffn_down_exps : l.ffn_down;
}

// Slices made in two steps: tensors first (so that each device's can be allocated in one buffer),
// then the data, copied from the full weight in host memory.
struct slicer {
    ggml_context * ctx;
    int shard_index;
    std::vector<ggml_tensor *> made;
    std::vector<int> device_of;
    std::vector<std::function<void(char * base)>> fills;   // writes the slice at base (t's layout)
    int device = 0;

    ggml_tensor * like(const ggml_tensor * src, int64_t ne0, int64_t ne1) {
        ggml_tensor * t = ggml_new_tensor_3d(ctx, src->type, ne0, ne1, src->ne[2]);
        ggml_format_name(t, "%s@%d", src->name, shard_index);
        made.push_back(t);
        device_of.push_back(device);
        return t;
    }

    // rows [r0, r0 + n) of every matrix of src
    ggml_tensor * rows(const ggml_tensor * src, int64_t r0, int64_t n) {
        if (!src) return nullptr;
        if (ggml_n_dims(src) == 1) return cols(src, r0, n);
        ggml_tensor * t = like(src, src->ne[0], n);
        fills.push_back([src, t, r0, n](char * base) {
            for (int64_t e = 0; e < src->ne[2]; ++e) {
                std::memcpy(base + e * t->nb[2], (const char *) src->data + e * src->nb[2] + r0 * src->nb[1], n * src->nb[1]);
            }
        });
        return t;
    }

    // columns [c0, c0 + n) of every row of src (each row keeps its metadata)
    ggml_tensor * cols(const ggml_tensor * src, int64_t c0, int64_t n) {
        if (!src) return nullptr;
        ggml_tensor * t = like(src, n, src->ne[1]);
        fills.push_back([src, t, c0, n](char * base) {
            const size_t meta = ggml_get_type_traits(src->type)->row_meta_size;
            const size_t skip = ggml_row_size(src->type, c0) - meta, bytes = ggml_row_size(src->type, n) - meta;
            for (int64_t e = 0; e < src->ne[2]; ++e) {
                for (int64_t r = 0; r < src->ne[1]; ++r) {
                    const char * s = (const char *) src->data + e * src->nb[2] + r * src->nb[1];
                    char * d = base + e * t->nb[2] + r * t->nb[1];
                    std::memcpy(d, s, meta);
                    std::memcpy(d + meta, s + meta + skip, bytes);
                }
            }
        });
        return t;
    }

    // the row ranges (first row, count) of a matrix one after the other: a delta-net part's q, k
    // and v channels of the convolution
    ggml_tensor * row_ranges(const ggml_tensor * src, std::vector<std::pair<int64_t, int64_t>> ranges) {
        if (!src) return nullptr;
        int64_t n = 0;
        for (const auto & r : ranges) n += r.second;
        ggml_tensor * t = like(src, src->ne[0], n);
        fills.push_back([src, ranges](char * base) {
            for (const auto & [r0, nr] : ranges) {
                std::memcpy(base, (const char *) src->data + r0 * src->nb[1], nr * src->nb[1]);
                base += nr * src->nb[1];
            }
        });
        return t;
    }

    // matrices [e0, e0 + n) of a stack of them (ne2): MLA's per-head attn_k_b / attn_v_b
    ggml_tensor * mats(const ggml_tensor * src, int64_t e0, int64_t n) {
        if (!src) return nullptr;
        ggml_tensor * t = ggml_new_tensor_3d(ctx, src->type, src->ne[0], src->ne[1], n);
        ggml_format_name(t, "%s@%d", src->name, shard_index);
        made.push_back(t);
        device_of.push_back(device);
        fills.push_back([src, e0, n](char * base) { std::memcpy(base, (const char *) src->data + e0 * src->nb[2], n * src->nb[2]); });
        return t;
    }

    ggml_tensor * copy(const ggml_tensor * src) { return src ? rows(src, 0, ggml_n_dims(src) == 1 ? src->ne[0] : src->ne[1]) : nullptr; }
};

} // namespace

bool llama_shard_keeps_whole(const llama_layer & l, const ggml_tensor * t) {
    return t == l.attn_norm || t == l.attn_norm_b || t == l.ffn_norm || t == l.attn_post_norm || t == l.ffn_post_norm;
}

std::vector<const ggml_tensor *> llama_shard_part(const llama_layer & l, bool attn) {
    if (attn) {
        return { l.wq, l.bq, l.wk, l.bk, l.wv, l.bv, l.wo, l.bo, l.attn_sinks, l.attn_q_norm, l.attn_k_norm,
                 l.wq_a, l.attn_q_a_norm, l.wq_b, l.wkv_a_mqa, l.attn_kv_a_norm, l.wkv_b, l.wk_b, l.wv_b,
                 l.wqkv, l.ssm_in, l.ssm_ba, l.ssm_conv1d, l.wqkv_gate, l.ssm_beta, l.ssm_alpha, l.ssm_dt, l.ssm_a, l.ssm_norm, l.ssm_out };
    }
    return { l.ffn_gate, l.ffn_up, l.ffn_down, l.ffn_gate_exps, l.ffn_up_exps, l.ffn_down_exps, l.ffn_gate_inp,
             l.ffn_gate_inp_b, l.ffn_exp_probs_b, l.ffn_gate_exps_b, l.ffn_up_exps_b, l.ffn_down_exps_b,
             l.ffn_gate_shexp, l.ffn_up_shexp, l.ffn_down_shexp, l.ffn_gate_inp_shexp };
}

bool llama_shard_plan::in_whole_part(const llama_layer & l, uint32_t il, const ggml_tensor * t) const {
    if (!split(il) || !t) return false;
    for (const bool attn : { true, false }) {
        if (attn ? attn_cut(il) : ffn_cut(il)) continue;
        const std::vector<const ggml_tensor *> part = llama_shard_part(l, attn);
        if (std::find(part.begin(), part.end(), t) != part.end()) return true;
    }
    return false;
}

llama_shard_plan llama_plan_shards(const llama_model & m, const std::vector<double> & shares, bool by_expert,
                                   const std::function<bool(const ggml_tensor *)> & pinned) {
    const llama_hparams & hp = m.hparams;
    llama_shard_plan plan;
    plan.heads_kv.resize(hp.n_layer);
    plan.ff.resize(hp.n_layer);
    plan.by_expert.assign(hp.n_layer, false);
    if (!m.arch->tensor_parallel) return plan;
    auto any_pinned = [&](const llama_layer & l, bool attn) {
        for (const ggml_tensor * t : llama_shard_part(l, attn)) {
            if (t && pinned(t)) return true;
        }
        return false;
    };
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        const llama_layer & l = m.layers[il];
        const bool mla = l.wkv_a_mqa != nullptr, delta = is_delta_net(l);
        if (!mla && !delta && (!l.wq || !l.wk || !l.wv || !l.wo || l.wqkv)) continue;
        if (mla && (!l.wkv_b || !l.wk_b || !l.wv_b || !l.wo)) continue;
        // MLA cuts query heads (its latent cache is shared by all: each part keeps a copy), a
        // delta-net value heads
        const int64_t k = mla ? mla_step(hp, l) : delta ? delta_step(hp, l) : attn_step(hp, l);
        const ggml_tensor * gate, * up, * down;
        main_ffn(l, gate, up, down);
        std::vector<uint32_t> ff, sh;
        if (k == 0 || !ffn_columns(gate, up, down, shares, ff)) continue;
        if (l.ffn_up_shexp && !ffn_columns(l.ffn_gate_shexp, l.ffn_up_shexp, l.ffn_down_shexp, shares, sh)) continue;
        if (!any_pinned(l, true)) {
            plan.heads_kv[il] = divide((uint32_t) ((mla ? hp.n_head : delta ? hp.ssm_dt_rank : hp.n_head_kv) / k), shares);
            for (auto & h : plan.heads_kv[il]) h *= (uint32_t) k;
        }
        if (any_pinned(l, false)) continue;
        // whole experts where the router's weights do not depend on which experts a part holds
        const bool expert_biases = l.ffn_gate_exps_b || l.ffn_up_exps_b || l.ffn_down_exps_b;
        if (by_expert && l.ffn_up_exps && !expert_biases &&
            hp.expert_gating_func != llm_graph_context::MOE_GATING_SOFTMAX_WEIGHT) {
            plan.ff[il] = divide(hp.n_expert, shares);
            plan.by_expert[il] = true;
        } else {
            plan.ff[il] = ff;
        }
    }
    return plan;
}

void llama_make_shards(llama_model & m, const llama_shard_plan & plan) {
    const llama_hparams & hp = m.hparams;
    const size_t n_dev = m.devices.size();
    m.shards.assign(hp.n_layer, {});
    if (!m.ctx_shards) m.ctx_shards = ggml_init({ ggml_tensor_overhead() * (hp.n_layer * n_dev * 40 + 16), nullptr, true });
    slicer sl{ m.ctx_shards, 0, {}, {}, {}, 0 };
    std::vector<double> shares(n_dev, 0.0);
    uint32_t kv_slot = hp.n_layer;   // the cache has one entry per layer that runs, then the parts
    uint32_t rs_slot = hp.n_layer;   // the recurrent state likewise
    const int64_t G = hp.n_head / std::max<uint32_t>(hp.n_head_kv, 1), hd_k = hp.n_embd_head_k, hd_v = hp.n_embd_head_v;
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        if (!plan.split(il)) continue;
        const llama_layer & l = m.layers[il];
        for (const bool attn : { true, false }) {
            if (!(attn ? plan.attn_cut(il) : plan.ffn_cut(il))) continue;
            for (const ggml_tensor * t : llama_shard_part(l, attn)) {
                if (t && !ggml_backend_buffer_is_host(t->buffer)) {
                    throw llama_error(llama_format("-sm graph: %s is not in host memory to be cut", t->name));
                }
            }
        }
        // the shared expert is cut in the same proportions as the main FFN
        std::vector<uint32_t> sh;
        if (l.ffn_up_shexp && plan.ffn_cut(il)) {
            for (size_t d = 0; d < n_dev; ++d) shares[d] = (double) plan.ff[il][d];
            const double total = std::accumulate(shares.begin(), shares.end(), 0.0);
            for (auto & s : shares) s /= total;
            ffn_columns(l.ffn_gate_shexp, l.ffn_up_shexp, l.ffn_down_shexp, shares, sh);
        }
        const ggml_tensor * gate, * up, * down;
        main_ffn(l, gate, up, down);
        const bool moe = l.ffn_up_exps != nullptr;
        int64_t h0 = 0, f0 = 0, s0 = 0;
        bool first_attn = true, first_ffn = true;
        for (size_t d = 0; d < n_dev; ++d) {
            const uint32_t nkv = plan.attn_cut(il) ? plan.heads_kv[il][d] : 0, nff = plan.ffn_cut(il) ? plan.ff[il][d] : 0;
            if (nkv == 0 && nff == 0) continue;
            llama_layer_shard s;
            s.device = (int) d;
            sl.device = (int) d;
            sl.shard_index = (int) d;
            llama_layer & w = s.w;
            if (nkv > 0 && is_delta_net(l)) {
                // value heads h0.. with their z, beta, alpha, decay and output columns
                const int64_t d_v = hp.ssm_d_inner / hp.ssm_dt_rank, d_k = hp.ssm_d_state, n_kh = hp.ssm_n_group;
                s.n_head = nkv;
                if (is_qwen3next_delta(l)) {
                    // key heads k0.. with their value heads: contiguous rows of ssm_in and ssm_ba; the
                    // convolution's channels are all q, all k, then all v (llm_build_delta_net's order)
                    const int64_t r = hp.ssm_dt_rank / n_kh, k0 = h0 / r, nk = nkv / r;
                    w.ssm_in = sl.rows(l.ssm_in, k0 * (2 * d_k + 2 * r * d_v), nk * (2 * d_k + 2 * r * d_v));
                    w.ssm_ba = sl.rows(l.ssm_ba, k0 * 2 * r, nk * 2 * r);
                    w.ssm_conv1d = sl.row_ranges(l.ssm_conv1d, { { k0 * d_k, nk * d_k },
                                                                 { (n_kh + k0) * d_k, nk * d_k },
                                                                 { 2 * n_kh * d_k + h0 * d_v, nkv * d_v } });
                } else {
                    // q and k of every key head
                    const int64_t qk = 2 * n_kh * d_k;
                    w.wqkv = sl.row_ranges(l.wqkv, { { 0, qk }, { qk + h0 * d_v, nkv * d_v } });
                    w.ssm_conv1d = sl.row_ranges(l.ssm_conv1d, { { 0, qk }, { qk + h0 * d_v, nkv * d_v } });
                    w.wqkv_gate = sl.rows(l.wqkv_gate, h0 * d_v, nkv * d_v);
                    w.ssm_beta = sl.rows(l.ssm_beta, h0, nkv);
                    w.ssm_alpha = sl.rows(l.ssm_alpha, h0, nkv);
                }
                w.ssm_dt = sl.rows(l.ssm_dt, h0, nkv);
                w.ssm_a = sl.rows(l.ssm_a, h0, nkv);
                w.ssm_norm = sl.copy(l.ssm_norm);
                w.ssm_out = sl.cols(l.ssm_out, h0 * d_v, nkv * d_v);
                s.rs_slot = rs_slot++;
                h0 += nkv;
                first_attn = false;
            } else if (nkv > 0 && l.wkv_a_mqa) {
                // MLA: heads h0.. of q, of the decompression and of the output; the latent path copied
                const int64_t n_nope = hd_k - hp.n_rot;
                s.n_head = s.n_head_kv = nkv;
                w.wq_a = sl.copy(l.wq_a);
                w.attn_q_a_norm = sl.copy(l.attn_q_a_norm);
                w.wq_b = sl.rows(l.wq_b, h0 * hd_k, nkv * hd_k);
                w.wq = sl.rows(l.wq, h0 * hd_k, nkv * hd_k);
                w.wkv_a_mqa = sl.copy(l.wkv_a_mqa);
                w.attn_kv_a_norm = sl.copy(l.attn_kv_a_norm);
                w.wkv_b = sl.rows(l.wkv_b, h0 * (n_nope + hd_v), nkv * (n_nope + hd_v));
                w.wk_b = sl.mats(l.wk_b, h0, nkv);
                w.wv_b = sl.mats(l.wv_b, h0, nkv);
                w.wo = sl.cols(l.wo, h0 * hd_v, nkv * hd_v);
                s.kv_slot = kv_slot++;
                h0 += nkv;
                first_attn = false;
            } else if (nkv > 0) {
                s.n_head_kv = nkv;
                s.n_head = (uint32_t) (nkv * G);
                const int64_t qh = q_rows_per_head(hp, l), q0 = h0 * G * qh, nq = nkv * G * qh;
                w.wq = sl.rows(l.wq, q0, nq);
                w.bq = sl.rows(l.bq, q0, nq);
                w.wk = sl.rows(l.wk, h0 * hd_k, nkv * hd_k);
                w.bk = sl.rows(l.bk, h0 * hd_k, nkv * hd_k);
                w.wv = sl.rows(l.wv, h0 * hd_v, nkv * hd_v);
                w.bv = sl.rows(l.bv, h0 * hd_v, nkv * hd_v);
                w.wo = sl.cols(l.wo, h0 * G * hd_v, nkv * G * hd_v);
                w.bo = first_attn ? sl.copy(l.bo) : nullptr;
                w.attn_sinks = sl.rows(l.attn_sinks, h0 * G, nkv * G);
                w.attn_q_norm = sl.copy(l.attn_q_norm);
                w.attn_k_norm = sl.copy(l.attn_k_norm);
                s.kv_slot = kv_slot++;
                h0 += nkv;
                first_attn = false;
            }
            if (nff > 0) {
                s.has_ffn = true;
                ggml_tensor ** g = moe ? &w.ffn_gate_exps : &w.ffn_gate;
                ggml_tensor ** u = moe ? &w.ffn_up_exps : &w.ffn_up;
                ggml_tensor ** dn = moe ? &w.ffn_down_exps : &w.ffn_down;
                if (plan.by_expert[il]) {
                    // experts f0.. whole
                    s.expert0 = (uint32_t) f0;
                    *g = sl.mats(gate, f0, nff);
                    *u = sl.mats(up, f0, nff);
                    *dn = sl.mats(down, f0, nff);
                } else {
                    *g = sl.rows(gate, f0, nff);
                    *u = sl.rows(up, f0, nff);
                    *dn = sl.cols(down, f0, nff);
                }
                w.ffn_gate_inp = sl.copy(l.ffn_gate_inp);
                w.ffn_gate_inp_b = sl.copy(l.ffn_gate_inp_b);
                w.ffn_exp_probs_b = sl.copy(l.ffn_exp_probs_b);
                w.ffn_gate_exps_b = sl.cols(l.ffn_gate_exps_b, f0, nff);
                w.ffn_up_exps_b = sl.cols(l.ffn_up_exps_b, f0, nff);
                w.ffn_down_exps_b = first_ffn ? sl.copy(l.ffn_down_exps_b) : nullptr;
                f0 += nff;
                if (l.ffn_up_shexp && sh[d] > 0) {
                    w.ffn_gate_shexp = sl.rows(l.ffn_gate_shexp, s0, sh[d]);
                    w.ffn_up_shexp = sl.rows(l.ffn_up_shexp, s0, sh[d]);
                    w.ffn_down_shexp = sl.cols(l.ffn_down_shexp, s0, sh[d]);
                    w.ffn_gate_inp_shexp = sl.copy(l.ffn_gate_inp_shexp);
                    s0 += sh[d];
                }
                first_ffn = false;
            }
            m.shards[il].push_back(s);
        }
    }
    // one buffer per device, then the data
    for (size_t d = 0; d < n_dev; ++d) {
        std::vector<ggml_tensor *> mine;
        for (size_t i = 0; i < sl.made.size(); ++i) {
            if (sl.device_of[i] == (int) d) mine.push_back(sl.made[i]);
        }
        if (mine.empty()) continue;
        ggml_backend_buffer_type_t buft = ggml_backend_dev_buffer_type(m.devices[d]);
        ggml_backend_buffer_t buf = ggml_backend_alloc_tensors_from_buft(buft, mine.data(), mine.size());
        if (!buf) throw llama_error(llama_format("-sm graph: cannot allocate the layer parts of device %s", ggml_backend_buft_name(buft)));
        ggml_backend_buffer_set_usage(buf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
        m.buffers.push_back(buf);
    }
    std::vector<char> staging;   // for devices whose memory is not the host's
    for (size_t i = 0; i < sl.made.size(); ++i) {
        ggml_tensor * t = sl.made[i];
        if (ggml_backend_buffer_is_host(t->buffer)) {
            sl.fills[i]((char *) t->data);
        } else {
            staging.resize(ggml_nbytes(t));
            sl.fills[i](staging.data());
            ggml_backend_tensor_set(t, staging.data(), 0, staging.size());
        }
    }
}
