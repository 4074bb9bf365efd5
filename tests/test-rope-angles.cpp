// rope-angles.h, the RoPE angle arithmetic the CPU op and the CUDA kernel share, against a plain
// double-precision statement of llama.cpp's formulas: parameters read from real ROPE nodes
// (ggml_rope_ext, ggml_rope_multi), YaRN's correction range, ramp and magnitude scale, frequency
// factors, angles at positions up to 10^5, and the pair-to-component maps of MROPE and IMROPE.
#include "rope-angles.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace {

struct yarn_case {
    int n_dims, n_ctx_orig;
    float base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow;
};

// llama.cpp's YaRN in double: the correction range in pair indices, the ramp and the angle
double corr_dim(const yarn_case & c, double n_rot) {
    return c.n_dims * std::log(c.n_ctx_orig / (n_rot * 2 * M_PI)) / (2 * std::log((double) c.base));
}
double ref_mix(const yarn_case & c, int i) {
    if (c.ext_factor == 0) return 0;
    const double lo = std::max(0.0, std::floor(corr_dim(c, c.beta_fast)));
    const double hi = std::min(c.n_dims - 1.0, std::ceil(corr_dim(c, c.beta_slow)));
    const double y = (i - lo) / std::max(0.001, hi - lo);
    return (1 - std::min(1.0, std::max(0.0, y))) * c.ext_factor;
}
double ref_theta(const yarn_case & c, int i, double pos, double ff) {
    const double extrap = pos / (std::pow((double) c.base, 2.0 * i / c.n_dims) * ff);
    const double mix = ref_mix(c, i);
    return c.freq_scale * extrap * (1 - mix) + extrap * mix;
}
double ref_mscale(const yarn_case & c) {
    return c.ext_factor == 0 ? c.attn_factor : c.attn_factor * (1 + 0.1 * std::log(1.0 / c.freq_scale));
}

struct graph_ctx {
    ggml_context * ctx = ggml_init({ 1 << 20, nullptr, true });
    ~graph_ctx() { ggml_free(ctx); }
};

TEST(RopeAngles, YarnAndPlainAnglesMatchTheDoubleReference) {
    const yarn_case cases[] = {
        { 128, 4096, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f },       // plain
        { 64, 4096, 1000000.0f, 0.25f, 0.0f, 1.0f, 32.0f, 1.0f },     // linear scaling
        { 64, 4096, 10000.0f, 0.25f, 1.0f, 1.0f, 32.0f, 1.0f },       // YaRN x4
        { 96, 8192, 500000.0f, 1.0f / 40, 1.0f, 0.7f, 32.0f, 1.0f },  // YaRN x40, attn_factor (DeepSeek's shape)
        { 30, 2048, 10000.0f, 0.5f, 0.5f, 1.0f, 16.0f, 2.0f },        // partial ext_factor, odd pair count
    };
    graph_ctx g;
    for (const yarn_case & c : cases) {
        ggml_tensor * a = ggml_new_tensor_3d(g.ctx, GGML_TYPE_F32, c.n_dims + 6, 2, 3);
        ggml_tensor * pos = ggml_new_tensor_1d(g.ctx, GGML_TYPE_I32, 3);
        ggml_tensor * node = ggml_rope_ext(g.ctx, a, pos, nullptr, c.n_dims, GGML_ROPE_TYPE_NEOX, c.n_ctx_orig, c.base,
                                           c.freq_scale, c.ext_factor, c.attn_factor, c.beta_fast, c.beta_slow);
        const rope_angle_params p = rope_angle_params_of(node);
        ASSERT_EQ(p.n_dims, c.n_dims);
        EXPECT_TRUE(rope_is_neox(p.mode));
        EXPECT_FALSE(rope_is_multi(p.mode));
        EXPECT_NEAR(rope_mscale(p), ref_mscale(c), 1e-6 * ref_mscale(c)) << c.n_dims;
        const std::vector<double> factors = { 1.0, 1.0, 2.5, 40.0, 0.75 };
        for (int i = 0; i < c.n_dims / 2; ++i) {
            EXPECT_NEAR(rope_ramp_mix(p, i), ref_mix(c, i), 1e-6) << "pair " << i;
            for (double ff : factors) {
                const double inv = rope_inv_freq(p, i, ff);
                for (double at : { 0.0, 1.0, 17.0, 4095.0, 100000.0 }) {
                    const double want = ref_theta(c, i, at, ff);
                    const double got = rope_theta(p, at, inv, rope_ramp_mix(p, i));
                    // the ramp is float (as in llama.cpp): relative 1e-6 of the angle; without
                    // YaRN the angle is exact in double
                    EXPECT_NEAR(got, want, (c.ext_factor != 0 ? 1e-6 : 1e-12) * std::fabs(want) + 1e-12)
                        << "pair " << i << " pos " << at << " ff " << ff;
                    if (at < 64) { EXPECT_NEAR(std::cos(got) * rope_mscale(p), std::cos(want) * ref_mscale(c), 1e-5); }
                }
            }
        }
    }
}

// MROPE: pairs by contiguous sections of the sector (i mod the sections' sum); IMROPE: t, h, w in
// turn, each component only while it has pairs left in its section, then the extra component.
// The reference builds each map by walking the sectors and counting.
std::vector<int> ref_components(int mode, const int s[4], int n_pairs) {
    const int sum = s[0] + s[1] + s[2] + s[3];
    std::vector<int> sector_comp(sum);
    if (mode == GGML_ROPE_TYPE_IMROPE) {
        int used[3] = { 0, 0, 0 };
        for (int k = 0; k < sum; ++k) {
            const int turn = k % 3;
            sector_comp[k] = used[turn] < s[turn] ? turn : 3;
            ++used[turn];
        }
    } else {
        int k = 0;
        for (int c = 0; c < 4; ++c) {
            for (int j = 0; j < s[c]; ++j) sector_comp[k++] = c;
        }
    }
    std::vector<int> out(n_pairs);
    for (int i = 0; i < n_pairs; ++i) out[i] = sector_comp[i % sum];
    return out;
}

TEST(RopeAngles, MultiSectionComponents) {
    struct multi_case { int mode, n_dims, sections[4]; };
    const multi_case cases[] = {
        { GGML_ROPE_TYPE_IMROPE, 64, { 11, 11, 10, 0 } }, { GGML_ROPE_TYPE_IMROPE, 32, { 6, 6, 4, 0 } },
        { GGML_ROPE_TYPE_IMROPE, 40, { 3, 7, 2, 5 } },   { GGML_ROPE_TYPE_MROPE, 32, { 8, 4, 4, 0 } },
        { GGML_ROPE_TYPE_MROPE, 48, { 4, 4, 4, 4 } },    { GGML_ROPE_TYPE_MROPE, 36, { 5, 0, 3, 1 } },
    };
    graph_ctx g;
    for (const multi_case & mc : cases) {
        ggml_tensor * a = ggml_new_tensor_3d(g.ctx, GGML_TYPE_F32, mc.n_dims, 2, 3);
        ggml_tensor * pos = ggml_new_tensor_1d(g.ctx, GGML_TYPE_I32, 4 * 3);
        ggml_tensor * node = ggml_rope_multi(g.ctx, a, pos, nullptr, mc.n_dims, mc.sections, mc.mode, 4096, 1e6f, 1.0f, 0.0f,
                                             1.0f, 32.0f, 1.0f);
        const rope_angle_params p = rope_angle_params_of(node);
        EXPECT_TRUE(rope_is_multi(p.mode));
        EXPECT_TRUE(rope_is_neox(p.mode)) << "multi-section modes pair as NEOX";
        const std::vector<int> want = ref_components(mc.mode, mc.sections, mc.n_dims / 2);
        for (int i = 0; i < mc.n_dims / 2; ++i) EXPECT_EQ(rope_pair_component(p, i), want[i]) << "mode " << mc.mode << " pair " << i;
    }
}

TEST(RopeAngles, NormalPairingIsNotNeox) {
    graph_ctx g;
    ggml_tensor * a = ggml_new_tensor_3d(g.ctx, GGML_TYPE_F32, 16, 1, 2);
    ggml_tensor * pos = ggml_new_tensor_1d(g.ctx, GGML_TYPE_I32, 2);
    const rope_angle_params p = rope_angle_params_of(ggml_rope(g.ctx, a, pos, 16, 0));
    EXPECT_FALSE(rope_is_neox(p.mode));
    EXPECT_FALSE(rope_is_multi(p.mode));
    EXPECT_EQ(rope_ramp_mix(p, 3), 0.0f);
    EXPECT_EQ(rope_mscale(p), 1.0f);
}

} // namespace
