// Rotary position embedding with llama.cpp's parameters: normal (adjacent pairs) and NEOX
// (halves) pairing, partial rotation, frequency base/scale, per-pair frequency factors and
// YaRN (extrapolation/interpolation ramp plus magnitude scaling). The multi-section modes
// (MROPE, IMROPE) pair as NEOX and take each pair's position from one of four per-token
// components; everything else (frequencies, YaRN ramp) is per pair index as usual.
//
// The cos/sin table depends only on the token's position, so each thread builds it once per
// token it touches and applies it to all heads of that token.
#include "ops-common.h"

#include <cmath>
#include <vector>

namespace {

struct rope_params {
    int   n_dims, mode, n_ctx_orig;
    float freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow;
    int   sections[4];
};

rope_params read_params(const ggml_tensor * dst) {
    rope_params r;
    r.n_dims      = ggml_get_op_params_i32(dst, 1);
    r.mode        = ggml_get_op_params_i32(dst, 2);
    r.n_ctx_orig  = ggml_get_op_params_i32(dst, 4);
    r.freq_base   = ggml_get_op_params_f32(dst, 5);
    r.freq_scale  = ggml_get_op_params_f32(dst, 6);
    r.ext_factor  = ggml_get_op_params_f32(dst, 7);
    r.attn_factor = ggml_get_op_params_f32(dst, 8);
    r.beta_fast   = ggml_get_op_params_f32(dst, 9);
    r.beta_slow   = ggml_get_op_params_f32(dst, 10);
    for (int i = 0; i < 4; ++i) r.sections[i] = ggml_get_op_params_i32(dst, 11 + i);
    return r;
}

bool is_multi(int mode) { return (mode & GGML_ROPE_TYPE_MROPE) != 0; }

// Which of the four position components (time, height, width, extra) pair i rotates by.
int pair_component(const rope_params & rp, int i) {
    const int * s = rp.sections;
    const int sector = i % (s[0] + s[1] + s[2] + s[3]);
    if (rp.mode == GGML_ROPE_TYPE_IMROPE) {
        // interleaved: t, h, w, t, h, w, ... each component while its section lasts
        if (sector % 3 == 0 && sector < 3 * s[0]) return 0;
        if (sector % 3 == 1 && sector < 3 * s[1]) return 1;
        if (sector % 3 == 2 && sector < 3 * s[2]) return 2;
        return 3;
    }
    if (sector < s[0]) return 0;
    if (sector < s[0] + s[1]) return 1;
    if (sector < s[0] + s[1] + s[2]) return 2;
    return 3;
}

// Position-independent per-pair terms: the extrapolated frequency (1 / base^(2i/n_dims) / ff[i])
// and YaRN's interpolation weight.
struct rope_pair_terms {
    std::vector<double> inv_freq;
    std::vector<float>  ramp_mix;   // weight of the extrapolated angle (0: pure interpolation)
    float mscale;
};

void pair_terms(const rope_params & rp, const float * freq_factors, rope_pair_terms & t) {
    const int n_pairs = rp.n_dims / 2;
    t.inv_freq.resize(n_pairs);
    t.ramp_mix.assign(n_pairs, 0.0f);
    t.mscale = rp.attn_factor;
    for (int i = 0; i < n_pairs; ++i) {
        const double ff = freq_factors ? freq_factors[i] : 1.0;
        t.inv_freq[i] = std::pow((double) rp.freq_base, -2.0 * i / rp.n_dims) / ff;
    }
    if (rp.ext_factor != 0.0f) {
        float corr[2];
        ggml_rope_yarn_corr_dims(rp.n_dims, rp.n_ctx_orig, rp.freq_base, rp.beta_fast, rp.beta_slow, corr);
        for (int i = 0; i < n_pairs; ++i) {
            const float y = (i - corr[0]) / std::max(0.001f, corr[1] - corr[0]);
            t.ramp_mix[i] = (1.0f - std::min(1.0f, std::max(0.0f, y))) * rp.ext_factor;
        }
        t.mscale *= 1.0f + 0.1f * std::log(1.0f / rp.freq_scale);
    }
}

// cos/sin of every pair for one token whose pair i sits at position pos[i] (scaled by mscale).
void position_table(const rope_params & rp, const rope_pair_terms & t, const double * pos, float * c, float * s) {
    const int n_pairs = rp.n_dims / 2;
    for (int i = 0; i < n_pairs; ++i) {
        const double extrap = pos[i] * t.inv_freq[i];
        const double interp = rp.freq_scale * extrap;
        const double theta = interp * (1.0 - t.ramp_mix[i]) + extrap * t.ramp_mix[i];
        c[i] = (float) std::cos(theta) * t.mscale;
        s[i] = (float) std::sin(theta) * t.mscale;
    }
}

} // namespace

void ggml_cpu_op_rope(const ggml_compute_params * p, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * pos = dst->src[1];
    const ggml_tensor * ff = dst->src[2];
    GGML_ASSERT(ggml_are_same_shape(a, dst));
    const rope_params rp = read_params(dst);
    const bool multi = is_multi(rp.mode);
    GGML_ASSERT(pos->type == GGML_TYPE_I32 && pos->ne[0] == (multi ? 4 : 1) * a->ne[2]);
    GGML_ASSERT(rp.n_dims > 0 && rp.n_dims % 2 == 0 && rp.n_dims <= a->ne[0]);
    const bool neox = multi || (rp.mode & GGML_ROPE_TYPE_NEOX) != 0;
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
    for (int i = 0; i < half; ++i) pair_comp[i] = multi ? pair_component(rp, i) : 0;
    auto position_of = [&](int64_t token, int comp) {
        return (double) *(const int32_t *) ((const char *) pos->data + (token + comp * a->ne[2]) * pos->nb[0]);
    };

    int64_t r0, r1;
    ggml_cpu_split_rows(ggml_nrows(a), p->ith, p->nth, r0, r1);
    int64_t cached_token = -1;
    for (int64_t r = r0; r < r1; ++r) {
        const ggml_row_coord rc = ggml_cpu_row_coord(a, r);
        if (rc.i2 != cached_token) {
            for (int i = 0; i < half; ++i) pair_pos[i] = position_of(rc.i2, pair_comp[i]);
            position_table(rp, terms, pair_pos.data(), c, s);
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
