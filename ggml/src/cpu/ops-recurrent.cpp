// Kernels of the recurrent (gated delta-net) layers: the short causal convolution with its rolling
// window, and the gated delta rule. Both keep one state row per sequence slot and update it in
// place; the tokens of a slot are taken in batch order, other slots' tokens may sit in between.
//
// The delta rule has two forms that compute the same thing (tests/test-ops.cpp checks that):
//   token by token, per head with state S [d_k x d_v]:
//     S = e^g S;   u = beta (v - S^T k);   S += k u^T;   o = scale S^T q
//   chunked (the WY form) over a run of C tokens of one sequence, with gamma_t the decay summed
//   since the chunk start, G_t = e^gamma_t and S0 the state before the chunk:
//     u_t = beta_t (v_t - G_t S0^T k_t) - sum_{s<t} beta_t e^(gamma_t - gamma_s) (k_t.k_s) u_s
//     o_t = scale (G_t S0^T q_t + sum_{s<=t} e^(gamma_t - gamma_s) (q_t.k_s) u_s)
//     S_C = G_C S0 + sum_s e^(gamma_C - gamma_s) k_s u_s^T
//   The first line is a forward substitution (the unit lower-triangular solve of the WY form).
//   The state is read and written once per chunk instead of once per token, and the per-token
//   work becomes dot products and row updates over the chunk, which stay in cache: this is
//   the form for prompt batches. Decays are g <= 0, so every e^(gamma_t - gamma_s), s <= t, is
//   at most 1 and nothing overflows.
//
// Work is split over (value head, sequence) pairs; one pair's tokens run in order on one thread.
#include "ops-common.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace {

const float * f32_at(const ggml_tensor * t, int64_t i0, int64_t i1, int64_t i2) {
    return (const float *) ((const char *) t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2]);
}

int32_t slot_of(const ggml_tensor * slots, const ggml_tensor * state, int64_t t) {
    const int32_t s = ((const int32_t *) slots->data)[t];
    if (s < 0 || s >= state->ne[1]) {
        GGML_ABORT("recurrent op: token %lld uses state slot %d, the state has %lld", (long long) t, s, (long long) state->ne[1]);
    }
    return s;
}

// The slots that have tokens in this batch, in ascending order, and how many tokens each has
// (every thread computes the same lists).
void used_slots(const ggml_tensor * slots, const ggml_tensor * state, std::vector<int32_t> & out, std::vector<int64_t> & count) {
    thread_local std::vector<int64_t> seen;
    seen.assign(state->ne[1], 0);
    for (int64_t t = 0; t < slots->ne[0]; ++t) seen[slot_of(slots, state, t)]++;
    out.clear();
    count.clear();
    for (int64_t s = 0; s < (int64_t) seen.size(); ++s) {
        if (seen[s]) {
            out.push_back((int32_t) s);
            count.push_back(seen[s]);
        }
    }
}

struct delta_net {
    const ggml_tensor * q, * k, * v, * g, * beta, * slots;
    ggml_tensor * state, * dst;
    int64_t d_k, d_v, n_kh, n_vh, n_tokens;
    float scale;

    explicit delta_net(ggml_tensor * out)
        : q(out->src[0]), k(out->src[1]), v(out->src[2]), g(out->src[3]), beta(out->src[4]), slots(out->src[6]),
          state(out->src[5]), dst(out) {
        d_k = q->ne[0];
        n_kh = q->ne[1];
        n_tokens = q->ne[2];
        d_v = v->ne[0];
        n_vh = v->ne[1];
        scale = ggml_get_op_params_f32(out, 0);
    }
    float * head_state(int32_t slot, int64_t h) const {
        return (float *) ((char *) state->data + slot * state->nb[1]) + h * d_k * d_v;
    }
    float * out_row(int64_t h, int64_t t) const { return (float *) ((char *) dst->data + h * dst->nb[1] + t * dst->nb[2]); }
    float decay_log(int64_t h, int64_t t) const { return *f32_at(g, h, t, 0); }
    float beta_at(int64_t h, int64_t t) const { return *f32_at(beta, h, t, 0); }

    void recurrent(int32_t slot, int64_t h) const;
    void chunked(int32_t slot, int64_t h, int64_t chunk) const;
};

void delta_net::recurrent(int32_t slot, int64_t h) const {
    const auto & vec = ggml_cpu_vec();
    const int64_t kh = h % n_kh;
    float * S = head_state(slot, h);
    float * kv = ggml_cpu_thread_scratch(0, 2 * d_v);
    float * u = kv + d_v;
    for (int64_t t = 0; t < n_tokens; ++t) {
        if (slot_of(slots, state, t) != slot) continue;
        const float * qt = f32_at(q, 0, kh, t);
        const float * kt = f32_at(k, 0, kh, t);
        const float * vt = f32_at(v, 0, h, t);
        const float decay = std::exp(decay_log(h, t)), b = beta_at(h, t);
        // decayed state and what it recalls for k
        std::fill(kv, kv + d_v, 0.0f);
        for (int64_t i = 0; i < d_k; ++i) {
            float * row = S + i * d_v;
            vec.scale_bias(d_v, row, row, decay, 0.0f);
            vec.axpy(d_v, kv, kt[i], row);
        }
        vec.sub(d_v, u, vt, kv);
        vec.scale_bias(d_v, u, u, b, 0.0f);
        // write the correction, read the output
        float * o = out_row(h, t);
        std::fill(o, o + d_v, 0.0f);
        for (int64_t i = 0; i < d_k; ++i) {
            float * row = S + i * d_v;
            vec.axpy(d_v, row, kt[i], u);
            vec.axpy(d_v, o, scale * qt[i], row);
        }
    }
}

void delta_net::chunked(int32_t slot, int64_t h, int64_t chunk) const {
    const auto & vec = ggml_cpu_vec();
    const int64_t kh = h % n_kh;
    const int64_t C = chunk;
    float * S = head_state(slot, h);

    thread_local std::vector<int64_t> toks;
    thread_local std::vector<const float *> qp, kp, vp, up;
    toks.clear();
    for (int64_t t = 0; t < n_tokens; ++t) {
        if (slot_of(slots, state, t) == slot) toks.push_back(t);
    }
    qp.resize(C);
    kp.resize(C);
    vp.resize(C);
    up.resize(C);
    // scratch: U and B [C x d_v], KK and QK [C x C], gamma, G, coefficients [C]
    float * U = ggml_cpu_thread_scratch(0, 2 * C * d_v + 2 * C * C + 3 * C);
    float * B = U + C * d_v;
    float * KK = B + C * d_v;
    float * QK = KK + C * C;
    float * gam = QK + C * C;
    float * G = gam + C;
    float * coef = G + C;

    for (size_t c0 = 0; c0 < toks.size(); c0 += (size_t) C) {
        const int64_t m = std::min<int64_t>(C, (int64_t) (toks.size() - c0));
        float acc = 0.0f;
        for (int64_t t = 0; t < m; ++t) {
            const int64_t tok = toks[c0 + t];
            qp[t] = f32_at(q, 0, kh, tok);
            kp[t] = f32_at(k, 0, kh, tok);
            vp[t] = f32_at(v, 0, h, tok);
            up[t] = U + t * d_v;
            acc += decay_log(h, tok);
            gam[t] = acc;
            G[t] = std::exp(acc);
        }
        // S0^T k_t into U, S0^T q_t into B: one pass over the state rows
        std::fill(U, U + 2 * C * d_v, 0.0f);
        for (int64_t i = 0; i < d_k; ++i) {
            const float * row = S + i * d_v;
            for (int64_t t = 0; t < m; ++t) {
                vec.axpy(d_v, U + t * d_v, kp[t][i], row);
                vec.axpy(d_v, B + t * d_v, qp[t][i], row);
            }
        }
        for (int64_t t = 0; t < m; ++t) {
            vec.dot_rows(d_k, kp[t], kp.data(), t, KK + t * C);        // k_t . k_s, s < t
            vec.dot_rows(d_k, qp[t], kp.data(), t + 1, QK + t * C);    // q_t . k_s, s <= t
        }
        // forward substitution for the corrections u_t
        for (int64_t t = 0; t < m; ++t) {
            const float b = beta_at(h, toks[c0 + t]);
            float * ut = U + t * d_v;
            vec.scale_bias(d_v, ut, ut, -G[t] * b, 0.0f);
            vec.axpy(d_v, ut, b, vp[t]);
            for (int64_t s = 0; s < t; ++s) coef[s] = -b * std::exp(gam[t] - gam[s]) * KK[t * C + s];
            vec.axpy_rows(d_v, ut, coef, up.data(), t);
        }
        // outputs
        for (int64_t t = 0; t < m; ++t) {
            float * o = out_row(h, toks[c0 + t]);
            vec.scale_bias(d_v, o, B + t * d_v, scale * G[t], 0.0f);
            for (int64_t s = 0; s <= t; ++s) coef[s] = scale * std::exp(gam[t] - gam[s]) * QK[t * C + s];
            vec.axpy_rows(d_v, o, coef, up.data(), t + 1);
        }
        // the state after the chunk
        const float g_last = gam[m - 1];
        for (int64_t s = 0; s < m; ++s) gam[s] = std::exp(g_last - gam[s]);   // reuse: decay from s to the end
        for (int64_t i = 0; i < d_k; ++i) {
            float * row = S + i * d_v;
            for (int64_t s = 0; s < m; ++s) coef[s] = gam[s] * kp[s][i];
            vec.scale_bias(d_v, row, row, G[m - 1], 0.0f);
            vec.axpy_rows(d_v, row, coef, up.data(), m);
        }
    }
}

} // namespace

void ggml_cpu_op_gated_delta_net(const ggml_compute_params * p, ggml_tensor * dst) {
    const delta_net dn(dst);
    const int chunk = ggml_get_op_params_i32(dst, 1);
    thread_local std::vector<int32_t> slots;
    thread_local std::vector<int64_t> count;
    used_slots(dn.slots, dn.state, slots, count);
    // units: (slot, head) pairs, split evenly over the threads
    int64_t u0, u1;
    ggml_cpu_split_rows((int64_t) slots.size() * dn.n_vh, p->ith, p->nth, u0, u1);
    for (int64_t u = u0; u < u1; ++u) {
        const int32_t slot = slots[u / dn.n_vh];
        const int64_t h = u % dn.n_vh;
        if (chunk > 1 && count[u / dn.n_vh] > 1) {   // one token: the recurrence is the cheaper form
            dn.chunked(slot, h, chunk);
        } else {
            dn.recurrent(slot, h);
        }
    }
}

void ggml_cpu_op_ssm_conv(const ggml_compute_params * p, ggml_tensor * dst) {
    const ggml_tensor * x = dst->src[0];
    const ggml_tensor * w = dst->src[1];
    ggml_tensor * state = dst->src[2];
    const ggml_tensor * slots = dst->src[3];
    const int64_t n_ch = x->ne[0], n_tokens = x->ne[1], d_conv = w->ne[0], n_win = d_conv - 1;
    int64_t c0, c1;
    ggml_cpu_split_rows(n_ch, p->ith, p->nth, c0, c1);
    const float * wd = (const float *) w->data;
    for (int64_t t = 0; t < n_tokens; ++t) {
        const int32_t slot = slot_of(slots, state, t);
        const float * xt = f32_at(x, 0, t, 0);
        float * yt = (float *) ((char *) dst->data + t * dst->nb[1]);
        float * st = (float *) ((char *) state->data + slot * state->nb[1]);
        for (int64_t c = c0; c < c1; ++c) {
            const float * wc = wd + c * d_conv;
            float * win = st + c * n_win;   // the channel's previous inputs, oldest first
            float sum = wc[n_win] * xt[c];
            for (int64_t j = 0; j < n_win; ++j) sum += wc[j] * win[j];
            yt[c] = sum;
            for (int64_t j = 0; j + 1 < n_win; ++j) win[j] = win[j + 1];
            if (n_win > 0) win[n_win - 1] = xt[c];
        }
    }
}
