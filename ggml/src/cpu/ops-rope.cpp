// Rotary position embedding with llama.cpp's parameters: normal (adjacent pairs) and NEOX
// (halves) pairing, partial rotation, frequency base/scale, per-pair frequency factors and
// YaRN (extrapolation/interpolation ramp plus magnitude scaling). The multi-section modes
// (MROPE, IMROPE) pair as NEOX and take each pair's position from one of four per-token
// components. The angle arithmetic is rope-angles.h's, shared with the CUDA kernel.
//
// The cos/sin table depends only on the token's position, so each thread builds it once per
// token it touches and applies it to all heads of that token; and keeps it for the next rope
// nodes with the same parameters (table_cache: the other layers, queries and keys).
#include "ops-common.h"
#include "rope-angles.h"

#include <climits>
#include <cmath>
#include <cstring>
#include <vector>

namespace {

// Position-independent per-pair terms (rope-angles.h): the extrapolated frequency and YaRN's
// weight of the extrapolated angle.
struct rope_pair_terms {
    std::vector<double> inv_freq;
    std::vector<float>  ramp_mix;
    float mscale;
};

void pair_terms(const rope_angle_params & rp, const float * freq_factors, rope_pair_terms & t) {
    const int n_pairs = rp.n_dims / 2;
    t.inv_freq.resize(n_pairs);
    t.ramp_mix.resize(n_pairs);
    t.mscale = rope_mscale(rp);
    for (int i = 0; i < n_pairs; ++i) {
        t.inv_freq[i] = rope_inv_freq(rp, i, freq_factors ? freq_factors[i] : 1.0);
        t.ramp_mix[i] = rope_ramp_mix(rp, i);
    }
}

// cos/sin of every pair for one token whose pair i sits at position pos[i] (scaled by mscale).
void position_table(const rope_angle_params & rp, const rope_pair_terms & t, const double * pos, float * c, float * s) {
    const int n_pairs = rp.n_dims / 2;
    for (int i = 0; i < n_pairs; ++i) {
        const double theta = rope_theta(rp, pos[i], t.inv_freq[i], t.ramp_mix[i]);
        c[i] = (float) std::cos(theta) * t.mscale;
        s[i] = (float) std::sin(theta) * t.mscale;
    }
}

// The tables of the positions a thread has met, kept across rope nodes: every layer rotates the
// queries and keys of the same positions with the same parameters, so a prompt batch rebuilt each
// table 2 x n_layer times (the cos/sin calls were 1% of a 512-token batch's CPU time, Qwen3-0.6B
// shape). Direct-mapped by position; single-position modes only (a multi-section token has four).
// Valid while the parameters and frequency factors are the ones the tables were made with.
struct table_cache {
    static constexpr int64_t kSlots = 1024;
    rope_angle_params  rp{};
    std::vector<float> ff;                // the frequency factors (empty: none)
    bool               have_ff = false;
    int                half = 0;
    std::vector<int64_t> slot_pos;        // the position each slot holds (INT64_MIN: none)
    std::vector<float>   slot_cs;         // per slot: cos[half], sin[half]

    // Makes the cache serve (rp, ff): keeps it if it already does, else empties it.
    void bind(const rope_angle_params & p, const float * f) {
        const int h = p.n_dims / 2;
        const bool same = half == h && std::memcmp(&rp, &p, sizeof(p)) == 0 && have_ff == (f != nullptr) &&
                          (!f || std::memcmp(ff.data(), f, h * sizeof(float)) == 0);
        if (same) return;
        rp = p;
        half = h;
        have_ff = f != nullptr;
        ff.assign(f ? f : nullptr, f ? f + h : nullptr);
        slot_pos.assign(kSlots, INT64_MIN);
        slot_cs.resize((size_t) kSlots * 2 * h);
    }
    // cos (then sin) of every pair at position pos, made by make(c, s) when not held
    template <typename Make> const float * at(int64_t pos, Make make) {
        const int64_t slot = (int64_t) ((uint64_t) pos & (kSlots - 1));
        float * cs = slot_cs.data() + slot * 2 * half;
        if (slot_pos[slot] != pos) {
            make(cs, cs + half);
            slot_pos[slot] = pos;
        }
        return cs;
    }
};

} // namespace

void ggml_cpu_op_rope(const ggml_compute_params * p, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * pos = dst->src[1];
    const ggml_tensor * ff = dst->src[2];
    GGML_ASSERT(ggml_are_same_shape(a, dst));
    const rope_angle_params rp = rope_angle_params_of(dst);
    const bool multi = rope_is_multi(rp.mode);
    GGML_ASSERT(pos->type == GGML_TYPE_I32 && pos->ne[0] == (multi ? 4 : 1) * a->ne[2]);
    GGML_ASSERT(rp.n_dims > 0 && rp.n_dims % 2 == 0 && rp.n_dims <= a->ne[0]);
    const bool neox = rope_is_neox(rp.mode);
    GGML_ASSERT(!ff || (ff->type == GGML_TYPE_F32 && ggml_is_contiguous(ff) && ff->ne[0] >= rp.n_dims / 2));

    thread_local rope_pair_terms terms;
    pair_terms(rp, ff ? (const float *) ff->data : nullptr, terms);

    const auto & v = ggml_cpu_vec();
    const int64_t n = a->ne[0];
    const int half = rp.n_dims / 2;
    float * tmp_in = ggml_cpu_thread_scratch(0, n);
    float * tmp_out = ggml_cpu_thread_scratch(1, n);
    float * tab = ggml_cpu_thread_scratch(2, 4 * (size_t) rp.n_dims);
    float * c = tab;
    float * s = tab + half;
    float * cc = tab + rp.n_dims;          // normal pairing: cos twice per pair
    float * ss = tab + 2 * rp.n_dims;      //                 (-sin, +sin) per pair
    thread_local std::vector<double> pair_pos;
    thread_local std::vector<int> pair_comp;
    pair_pos.resize(half);
    pair_comp.resize(half);
    for (int i = 0; i < half; ++i) pair_comp[i] = multi ? rope_pair_component(rp, i) : 0;
    auto position_of = [&](int64_t token, int comp) {
        return (double) *(const int32_t *) ((const char *) pos->data + (token + comp * a->ne[2]) * pos->nb[0]);
    };

    thread_local table_cache cache;
    if (!multi) cache.bind(rp, ff ? (const float *) ff->data : nullptr);

    int64_t r0, r1;
    ggml_cpu_split_rows(ggml_nrows(a), p->ith, p->nth, r0, r1);
    int64_t cached_token = -1;
    for (int64_t r = r0; r < r1; ++r) {
        const ggml_row_coord rc = ggml_cpu_row_coord(a, r);
        if (rc.i2 != cached_token) {
            for (int i = 0; i < half; ++i) pair_pos[i] = position_of(rc.i2, pair_comp[i]);
            if (multi) {
                position_table(rp, terms, pair_pos.data(), c, s);
            } else {
                const float * cs = cache.at((int64_t) pair_pos[0], [&](float * cc0, float * ss0) {
                    position_table(rp, terms, pair_pos.data(), cc0, ss0);
                });
                std::memcpy(c, cs, half * sizeof(float));
                std::memcpy(s, cs + half, half * sizeof(float));
            }
            if (!neox) {
                for (int i = 0; i < half; ++i) {
                    cc[2 * i] = cc[2 * i + 1] = c[i];
                    ss[2 * i] = -s[i];
                    ss[2 * i + 1] = s[i];
                }
            }
            cached_token = rc.i2;
        }
        const float * x = ggml_cpu_load_row(a, rc.i1, rc.i2, rc.i3, tmp_in);
        float * y = ggml_cpu_out_row(dst, rc.i1, rc.i2, rc.i3, tmp_out);
        if (neox) {
            v.rope_neox(half, y, y + half, x, x + half, c, s);
        } else {
            v.rope_norm(rp.n_dims, y, x, cc, ss);
        }
        if (n > rp.n_dims) std::memcpy(y + rp.n_dims, x + rp.n_dims, (n - rp.n_dims) * sizeof(float));
        ggml_cpu_finish_row(dst, rc.i1, rc.i2, rc.i3, y);
    }
}
