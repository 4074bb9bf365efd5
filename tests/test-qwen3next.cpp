// qwen3next against a plain double-precision forward pass written here from the file's layout
// (there is no golden file for it): a synthesized tiny-qwen3next (f32 weights; two value heads
// per key head, so the per-key-head grouping of ssm_in / ssm_ba and of the value heads
// matters) decoded in one batch, in pieces and token by token must give the reference's logits
// at every position.
#include "gguf.h"
#include "model-handles.h"
#include "synth.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

using vec = std::vector<double>;

struct ref_weights {
    gguf_context * g = nullptr;
    ggml_context * data = nullptr;
    ~ref_weights() {
        if (g) gguf_free(g);
        if (data) ggml_free(data);
    }
    const ggml_tensor * t(const std::string & name) const {
        const ggml_tensor * x = ggml_get_tensor(data, name.c_str());
        if (!x) ADD_FAILURE() << "no tensor " << name;
        return x;
    }
    int64_t u32(const char * key) const { return gguf_get_val_u32(g, gguf_find_key(g, key)); }
};

// W [n_in, n_out(, slice)] f32 times x: n_out values (slice: the expert)
vec matvec(const ggml_tensor * w, const vec & x, int64_t slice = 0) {
    const int64_t n_in = w->ne[0], n_out = w->ne[1];
    const float * base = (const float *) w->data + slice * n_in * n_out;
    vec y(n_out, 0.0);
    for (int64_t o = 0; o < n_out; ++o) {
        double s = 0;
        for (int64_t i = 0; i < n_in; ++i) s += (double) base[o * n_in + i] * x[i];
        y[o] = s;
    }
    return y;
}

vec rms_norm(const vec & x, const ggml_tensor * w, int64_t off = 0, int64_t n = -1) {
    if (n < 0) n = (int64_t) x.size();
    double s2 = 0;
    for (int64_t i = 0; i < n; ++i) s2 += x[off + i] * x[off + i];
    const double r = 1.0 / std::sqrt(s2 / n + 1e-6);
    vec y(n);
    for (int64_t i = 0; i < n; ++i) y[i] = x[off + i] * r * ((const float *) w->data)[i];
    return y;
}

double silu(double x) { return x / (1 + std::exp(-x)); }
double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
double softplus(double x) { return x > 20 ? x : std::log1p(std::exp(x)); }

void l2_normalize(double * x, int64_t n) {
    double s2 = 0;
    for (int64_t i = 0; i < n; ++i) s2 += x[i] * x[i];
    const double r = 1.0 / std::max(std::sqrt(s2), 1e-6);
    for (int64_t i = 0; i < n; ++i) x[i] *= r;
}

// The model's forward pass over tokens at positions 0.., logits of every position.
struct reference {
    const ref_weights & w;
    int64_t E, n_layer, n_head, n_kv, hd, n_rot, interval, d_conv, d_k, n_kh, n_vh, d_v, n_exp, n_used;
    double base;
    // per layer: conv windows [n_ch][d_conv - 1], delta states [n_vh][d_k][d_v], K and V per position
    std::vector<std::vector<double>> conv, state, keys, values;

    explicit reference(const ref_weights & rw) : w(rw) {
        E = w.u32("qwen3next.embedding_length");
        n_layer = w.u32("qwen3next.block_count");
        n_head = w.u32("qwen3next.attention.head_count");
        n_kv = w.u32("qwen3next.attention.head_count_kv");
        hd = w.u32("qwen3next.attention.key_length");
        n_rot = w.u32("qwen3next.rope.dimension_count");
        interval = w.u32("qwen3next.full_attention_interval");
        d_conv = w.u32("qwen3next.ssm.conv_kernel");
        d_k = w.u32("qwen3next.ssm.state_size");
        n_kh = w.u32("qwen3next.ssm.group_count");
        n_vh = w.u32("qwen3next.ssm.time_step_rank");
        d_v = w.u32("qwen3next.ssm.inner_size") / n_vh;
        n_exp = w.u32("qwen3next.expert_count");
        n_used = w.u32("qwen3next.expert_used_count");
        base = gguf_get_val_f32(w.g, gguf_find_key(w.g, "qwen3next.rope.freq_base"));
        conv.resize(n_layer);
        state.resize(n_layer);
        keys.resize(n_layer);
        values.resize(n_layer);
    }
    std::string blk(int64_t il, const char * name) const { return "blk." + std::to_string(il) + "." + name; }

    vec delta_net(int64_t il, const vec & x) {
        const int64_t r = n_vh / n_kh, n_ch = 2 * n_kh * d_k + n_vh * d_v, grp = 2 * d_k + 2 * r * d_v;
        const vec qkvz = matvec(w.t(blk(il, "ssm_in.weight")), x);
        const vec ba = matvec(w.t(blk(il, "ssm_ba.weight")), x);
        // the convolution's channels: all q heads, all k heads, then the value heads in order
        vec in(n_ch), z(n_vh * d_v), beta(n_vh), alpha(n_vh);
        for (int64_t kh = 0; kh < n_kh; ++kh) {
            const double * gq = qkvz.data() + kh * grp;
            for (int64_t i = 0; i < d_k; ++i) {
                in[kh * d_k + i] = gq[i];
                in[n_kh * d_k + kh * d_k + i] = gq[d_k + i];
            }
            for (int64_t i = 0; i < r * d_v; ++i) {
                in[2 * n_kh * d_k + kh * r * d_v + i] = gq[2 * d_k + i];
                z[kh * r * d_v + i] = gq[2 * d_k + r * d_v + i];
            }
            for (int64_t j = 0; j < r; ++j) {
                beta[kh * r + j] = sigmoid(ba[kh * 2 * r + j]);
                alpha[kh * r + j] = ba[kh * 2 * r + r + j];
            }
        }
        auto & win = conv[il];
        if (win.empty()) win.assign(n_ch * (d_conv - 1), 0.0);
        const float * cw = (const float *) w.t(blk(il, "ssm_conv1d.weight"))->data;
        vec c(n_ch);
        for (int64_t ch = 0; ch < n_ch; ++ch) {
            double * wn = win.data() + ch * (d_conv - 1);
            double s = cw[ch * d_conv + d_conv - 1] * in[ch];
            for (int64_t j = 0; j < d_conv - 1; ++j) s += cw[ch * d_conv + j] * wn[j];
            for (int64_t j = 0; j + 1 < d_conv - 1; ++j) wn[j] = wn[j + 1];
            wn[d_conv - 2] = in[ch];
            c[ch] = silu(s);
        }
        for (int64_t kh = 0; kh < 2 * n_kh; ++kh) l2_normalize(c.data() + kh * d_k, d_k);
        auto & S = state[il];
        if (S.empty()) S.assign(n_vh * d_k * d_v, 0.0);
        const float * dt = (const float *) w.t(blk(il, "ssm_dt.bias"))->data;
        const float * a = (const float *) w.t(blk(il, "ssm_a"))->data;
        vec o(n_vh * d_v);
        for (int64_t h = 0; h < n_vh; ++h) {
            const int64_t kh = h / r;   // a key head serves the value heads grouped after it
            const double * q = c.data() + kh * d_k, * k = c.data() + n_kh * d_k + kh * d_k;
            const double * v = c.data() + 2 * n_kh * d_k + h * d_v;
            double * Sh = S.data() + h * d_k * d_v;
            const double decay = std::exp(softplus(alpha[h] + dt[h]) * a[h]);
            for (int64_t i = 0; i < d_k * d_v; ++i) Sh[i] *= decay;
            for (int64_t j = 0; j < d_v; ++j) {
                double kv = 0;
                for (int64_t i = 0; i < d_k; ++i) kv += k[i] * Sh[i * d_v + j];
                const double u = beta[h] * (v[j] - kv);
                for (int64_t i = 0; i < d_k; ++i) Sh[i * d_v + j] += k[i] * u;
            }
            for (int64_t j = 0; j < d_v; ++j) {
                double s = 0;
                for (int64_t i = 0; i < d_k; ++i) s += q[i] * Sh[i * d_v + j];
                o[h * d_v + j] = s / std::sqrt((double) d_k);
            }
            const vec n = rms_norm(o, w.t(blk(il, "ssm_norm.weight")), h * d_v, d_v);
            for (int64_t j = 0; j < d_v; ++j) o[h * d_v + j] = n[j] * silu(z[h * d_v + j]);
        }
        return matvec(w.t(blk(il, "ssm_out.weight")), o);
    }

    void rope(double * x, int64_t pos) const {   // NEOX pairs (i, i + n_rot/2) over the first n_rot dims
        for (int64_t i = 0; i < n_rot / 2; ++i) {
            const double th = pos * std::pow(base, -2.0 * i / n_rot);
            const double x0 = x[i], x1 = x[i + n_rot / 2];
            x[i] = x0 * std::cos(th) - x1 * std::sin(th);
            x[i + n_rot / 2] = x0 * std::sin(th) + x1 * std::cos(th);
        }
    }

    vec attention(int64_t il, const vec & x, int64_t pos) {
        const vec qg = matvec(w.t(blk(il, "attn_q.weight")), x);
        vec k = matvec(w.t(blk(il, "attn_k.weight")), x), v = matvec(w.t(blk(il, "attn_v.weight")), x);
        for (int64_t h = 0; h < n_kv; ++h) {
            const vec kn = rms_norm(k, w.t(blk(il, "attn_k_norm.weight")), h * hd, hd);
            std::copy(kn.begin(), kn.end(), k.begin() + h * hd);
            rope(k.data() + h * hd, pos);
        }
        keys[il].insert(keys[il].end(), k.begin(), k.end());
        values[il].insert(values[il].end(), v.begin(), v.end());
        const int64_t n_pos = pos + 1;
        vec out(n_head * hd);
        for (int64_t h = 0; h < n_head; ++h) {
            vec q = rms_norm(qg, w.t(blk(il, "attn_q_norm.weight")), h * 2 * hd, hd);   // per head: query, then gate
            rope(q.data(), pos);
            const int64_t kvh = h / (n_head / n_kv);
            vec sc(n_pos);
            for (int64_t p = 0; p < n_pos; ++p) {
                double s = 0;
                for (int64_t i = 0; i < hd; ++i) s += q[i] * keys[il][(p * n_kv + kvh) * hd + i];
                sc[p] = s / std::sqrt((double) hd);
            }
            const double mx = *std::max_element(sc.begin(), sc.end());
            double sum = 0;
            for (double & s : sc) sum += (s = std::exp(s - mx));
            for (int64_t i = 0; i < hd; ++i) {
                double o = 0;
                for (int64_t p = 0; p < n_pos; ++p) o += sc[p] / sum * values[il][(p * n_kv + kvh) * hd + i];
                out[h * hd + i] = o * sigmoid(qg[h * 2 * hd + hd + i]);
            }
        }
        return matvec(w.t(blk(il, "attn_output.weight")), out);
    }

    vec expert(const std::string & gate, const std::string & up, const std::string & down, const vec & x, int64_t e) {
        const vec gv = matvec(w.t(gate), x, e), uv = matvec(w.t(up), x, e);
        vec a(gv.size());
        for (size_t i = 0; i < a.size(); ++i) a[i] = silu(gv[i]) * uv[i];
        return matvec(w.t(down), a, e);
    }

    vec moe(int64_t il, const vec & x) {
        const vec logits = matvec(w.t(blk(il, "ffn_gate_inp.weight")), x);
        const double mx = *std::max_element(logits.begin(), logits.end());
        vec p(n_exp);
        double sum = 0;
        for (int64_t e = 0; e < n_exp; ++e) sum += (p[e] = std::exp(logits[e] - mx));
        std::vector<int64_t> order(n_exp);
        std::iota(order.begin(), order.end(), 0);
        std::partial_sort(order.begin(), order.begin() + n_used, order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
        double wsum = 0;
        for (int64_t i = 0; i < n_used; ++i) wsum += p[order[i]];
        vec out(E, 0.0);
        for (int64_t i = 0; i < n_used; ++i) {
            const vec y = expert(blk(il, "ffn_gate_exps.weight"), blk(il, "ffn_up_exps.weight"), blk(il, "ffn_down_exps.weight"), x,
                                 order[i]);
            for (int64_t j = 0; j < E; ++j) out[j] += p[order[i]] / wsum * y[j];
        }
        const vec sh = expert(blk(il, "ffn_gate_shexp.weight"), blk(il, "ffn_up_shexp.weight"), blk(il, "ffn_down_shexp.weight"), x, 0);
        const float * gw = (const float *) w.t(blk(il, "ffn_gate_inp_shexp.weight"))->data;
        double gs = 0;
        for (int64_t j = 0; j < E; ++j) gs += gw[j] * x[j];
        for (int64_t j = 0; j < E; ++j) out[j] += sigmoid(gs) * sh[j];
        return out;
    }

    vec token(llama_token tok, int64_t pos) {
        const ggml_tensor * emb = w.t("token_embd.weight");
        vec x(E);
        for (int64_t i = 0; i < E; ++i) x[i] = ((const float *) emb->data)[tok * E + i];
        for (int64_t il = 0; il < n_layer; ++il) {
            const vec h = rms_norm(x, w.t(blk(il, "attn_norm.weight")));
            const vec mix = (il + 1) % interval != 0 ? delta_net(il, h) : attention(il, h, pos);
            for (int64_t i = 0; i < E; ++i) x[i] += mix[i];
            const vec f = moe(il, rms_norm(x, w.t(blk(il, "post_attention_norm.weight"))));
            for (int64_t i = 0; i < E; ++i) x[i] += f[i];
        }
        return matvec(w.t("output.weight"), rms_norm(x, w.t("output_norm.weight")));
    }
};

TEST(Qwen3Next, MatchesDoublePrecisionForwardPass) {
    const std::string path = "/tmp/kiln-test-qwen3next-" + std::to_string(getpid()) + ".gguf";
    kiln_synth_options opt;
    opt.preset = "tiny-qwen3next";
    opt.type = GGML_TYPE_F32;
    std::string err;
    ASSERT_TRUE(kiln_synth_write(opt, path, err)) << err;

    ref_weights rw;
    gguf_init_params ip = { false, &rw.data };
    rw.g = gguf_init_from_file(path.c_str(), ip);
    ASSERT_NE(rw.g, nullptr) << gguf_last_error();
    reference ref(rw);
    ASSERT_EQ(ref.n_vh / ref.n_kh, 2) << "the preset should pair two value heads with each key head";
    const int n = 24;
    std::vector<llama_token> toks(n);
    for (int i = 0; i < n; ++i) toks[i] = (llama_token) ((i * 7919 + 11) % 4096);
    std::vector<vec> want;
    for (int i = 0; i < n; ++i) want.push_back(ref.token(toks[i], i));

    kiln_test::model_ptr m(llama_model_load_from_file(path.c_str(), llama_model_default_params()));
    ASSERT_TRUE(m) << llama_last_error();
    EXPECT_TRUE(llama_model_is_hybrid(m.get()));
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(m.get()));
    ASSERT_EQ((size_t) n_vocab, want[0].size());
    auto check = [&](llama_context * ctx, int i_batch, int pos, const char * how) {
        const float * got = llama_get_logits_ith(ctx, i_batch);
        ASSERT_NE(got, nullptr);
        double num = 0, den = 0;
        for (int v = 0; v < n_vocab; ++v) {
            num = std::max(num, std::fabs(got[v] - want[pos][v]));
            den = std::max(den, std::fabs(want[pos][v]));
        }
        EXPECT_LT(num / den, 1e-4) << how << ", position " << pos;
    };
    for (int piece : { n, 5, 1 }) {
        llama_context_params cp = llama_context_default_params();
        cp.n_ctx = 64;
        cp.n_threads = cp.n_threads_batch = 2;
        cp.type_k = cp.type_v = GGML_TYPE_F32;   // no f16 rounding of the keys and values: the tolerance stays tight
        kiln_test::context_ptr ctx(llama_init_from_model(m.get(), cp));
        ASSERT_TRUE(ctx);
        for (int s = 0; s < n; s += piece) {
            const int len = std::min(piece, n - s);
            ASSERT_EQ(kiln_test::decode_tokens(ctx.get(), toks, s, len, s), 0);
            for (int i = 0; i < len; ++i) check(ctx.get(), i, s + i, piece == n ? "one batch" : piece == 1 ? "token by token" : "pieces of 5");
        }
    }
    std::remove(path.c_str());
}

} // namespace
