// The angle arithmetic of rotary position embedding, shared by the CPU op (cpu/ops-rope.cpp) and
// the CUDA kernel (cuda/ops-rope.cu) as KILN_HD functions, so that the two cannot drift apart:
// llama.cpp's parameters, pair i of n_dims / 2 at position pos rotates by
//   theta = pos / (base^(2i / n_dims) * ff[i])                       extrapolated angle
//   theta = freq_scale * theta_e * (1 - mix) + theta_e * mix        with YaRN's ramp mix (else mix = 0)
// and both sin and cos are scaled by mscale = attn_factor (times 1 + 0.1 ln(1 / freq_scale) with
// YaRN). Pairing (adjacent values, or NEOX halves) and the partial rotation (values past n_dims
// are copied) are the callers' loops; the multi-section modes (MROPE, IMROPE) pair as NEOX and take
// each pair's position from one of four per-token components (rope_pair_component).
// Angles are in double: positions reach 10^5, where a float angle is off by 10^-2 radians.
// tests/test-rope-angles.cpp checks these against a double-precision reference on the host.
#pragma once

#include "ggml-hd.h"
#include "ggml-impl.h"   // op params

#include <math.h>

struct rope_angle_params {
    int   n_dims, mode;
    float freq_base, freq_scale, ext_factor, attn_factor;
    float corr0, corr1;   // YaRN's correction range in pair indices (ggml_rope_yarn_corr_dims)
    int   sections[4];    // multi-section modes: pairs per component (time, height, width, extra)
};

// A ROPE node's parameters (op params as ggml_rope_ext and ggml_rope_multi store them). Host only.
static inline rope_angle_params rope_angle_params_of(const ggml_tensor * dst) {
    rope_angle_params p;
    p.n_dims = ggml_get_op_params_i32(dst, 1);
    p.mode = ggml_get_op_params_i32(dst, 2);
    const int n_ctx_orig = ggml_get_op_params_i32(dst, 4);
    p.freq_base = ggml_get_op_params_f32(dst, 5);
    p.freq_scale = ggml_get_op_params_f32(dst, 6);
    p.ext_factor = ggml_get_op_params_f32(dst, 7);
    p.attn_factor = ggml_get_op_params_f32(dst, 8);
    const float beta_fast = ggml_get_op_params_f32(dst, 9);
    const float beta_slow = ggml_get_op_params_f32(dst, 10);
    for (int i = 0; i < 4; ++i) p.sections[i] = ggml_get_op_params_i32(dst, 11 + i);
    float corr[2] = { 0.0f, 0.0f };
    if (p.ext_factor != 0.0f) ggml_rope_yarn_corr_dims(p.n_dims, n_ctx_orig, p.freq_base, beta_fast, beta_slow, corr);
    p.corr0 = corr[0];
    p.corr1 = corr[1];
    return p;
}

KILN_HD bool rope_is_multi(int mode) { return (mode & GGML_ROPE_TYPE_MROPE) != 0; }
KILN_HD bool rope_is_neox(int mode) { return rope_is_multi(mode) || (mode & GGML_ROPE_TYPE_NEOX) != 0; }

// Which of the four position components (time, height, width, extra) pair i rotates by.
KILN_HD int rope_pair_component(const rope_angle_params & p, int i) {
    const int * s = p.sections;
    const int sector = i % (s[0] + s[1] + s[2] + s[3]);
    if (p.mode == GGML_ROPE_TYPE_IMROPE) {
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

// Pair i's extrapolated frequency: 1 / (base^(2i / n_dims) * ff), ff its frequency factor (or 1).
KILN_HD double rope_inv_freq(const rope_angle_params & p, int i, double ff) {
    return pow((double) p.freq_base, -2.0 * i / p.n_dims) / ff;
}

// YaRN's weight of the extrapolated angle for pair i: ext_factor below corr0, falling linearly to
// 0 at corr1 (pure interpolation); 0 without YaRN.
KILN_HD float rope_ramp_mix(const rope_angle_params & p, int i) {
    if (p.ext_factor == 0.0f) return 0.0f;
    const float y = (i - p.corr0) / fmaxf(0.001f, p.corr1 - p.corr0);
    return (1.0f - fminf(1.0f, fmaxf(0.0f, y))) * p.ext_factor;
}

// The factor on sin and cos.
KILN_HD float rope_mscale(const rope_angle_params & p) {
    return p.ext_factor == 0.0f ? p.attn_factor : p.attn_factor * (1.0f + 0.1f * logf(1.0f / p.freq_scale));
}

// The angle of a pair with these per-pair terms at position pos.
KILN_HD double rope_theta(const rope_angle_params & p, double pos, double inv_freq, float ramp_mix) {
    const double extrap = pos * inv_freq;
    const double interp = p.freq_scale * extrap;
    return interp * (1.0 - ramp_mix) + extrap * ramp_mix;
}
