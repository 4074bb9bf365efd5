// Every CPU op (except the matrix products, see test-matmul) against a double-precision
// reference written here, on random data: contiguous and non-contiguous inputs (transposed,
// permuted, sliced views), broadcast shapes, row lengths that are not multiples of any SIMD
// width, with 1 and 2 threads, under every instruction-set level this CPU runs (the scalar
// reference path included).
#include "ops-testing.h"

namespace {

using namespace ops_testing;

const int64_t k_row_sizes[] = { 1, 3, 17, 67, 130 };

// ================================================================================ binary ops

double apply_binary(ggml_op op, double a, double b) {
    switch (op) {
        case GGML_OP_ADD: return a + b;
        case GGML_OP_SUB: return a - b;
        case GGML_OP_MUL: return a * b;
        case GGML_OP_DIV: return a / b;
        default: return NAN;
    }
}

ref_t binary_ref(ggml_op op, const ggml_tensor * a, const ggml_tensor * b) {
    ref_t out;
    for_each(a, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        out.push_back(apply_binary(op, get(a, i0, i1, i2, i3),
                                   get(b, i0 % b->ne[0], i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3])));
    });
    return out;
}

ggml_tensor * make_binary(ggml_context * ctx, ggml_op op, ggml_tensor * a, ggml_tensor * b) {
    switch (op) {
        case GGML_OP_ADD: return ggml_add(ctx, a, b);
        case GGML_OP_SUB: return ggml_sub(ctx, a, b);
        case GGML_OP_MUL: return ggml_mul(ctx, a, b);
        default:          return ggml_div(ctx, a, b);
    }
}

TEST_F(Ops, BinaryBroadcastAndLayouts) {
    const ggml_op ops[] = { GGML_OP_ADD, GGML_OP_SUB, GGML_OP_MUL, GGML_OP_DIV };
    uint32_t seed = 1;
    for (int64_t n0 : k_row_sizes) {
        const int64_t ne[4] = { n0, 3, 2, 2 };
        // b shapes that broadcast to a: same, one row, a column of scalars, partial dims, one value
        const int64_t bshapes[][4] = { { n0, 3, 2, 2 }, { n0, 1, 1, 1 }, { 1, 3, 2, 2 }, { n0, 3, 1, 2 }, { 1, 1, 2, 1 } };
        for (layout la : k_layouts) {
            for (const auto & bs : bshapes) {
                for (ggml_op op : ops) {
                    ggml_tensor * a = new_input(ctx, GGML_TYPE_F32, ne, la);
                    // b non-contiguous too whenever it has a second row
                    ggml_tensor * b = new_input(ctx, GGML_TYPE_F32, bs, bs[1] > 1 ? layout::sliced : layout::contiguous);
                    fill_random(a, seed++);
                    fill_random(b, seed++, 0.5, 2.0);
                    ggml_tensor * out = make_binary(ctx, op, a, b);
                    const ref_t want = binary_ref(op, a, b);
                    SCOPED_TRACE(std::string(ggml_op_name(op)) + " a " + layout_name(la) + " " + shape_str(a) + " b " + shape_str(b));
                    each_config(out, [&](const std::string &) { EXPECT_TRUE(close_to(out, want, 1e-6, 1e-6)); });
                }
            }
        }
    }
}

TEST_F(Ops, BinaryHalfInputs) {
    const int64_t ne[4] = { 67, 5, 1, 1 };
    for (ggml_type ta : { GGML_TYPE_F16, GGML_TYPE_BF16 }) {
        ggml_tensor * a = new_input(ctx, ta, ne, layout::contiguous);
        const int64_t bs[4] = { 67, 1, 1, 1 };
        ggml_tensor * b = new_input(ctx, GGML_TYPE_F16, bs, layout::contiguous);
        fill_random(a, 11);
        fill_random(b, 12);
        ggml_tensor * out = ggml_add(ctx, a, b);
        const ref_t want = binary_ref(GGML_OP_ADD, a, b);
        each_config(out, [&](const std::string &) { EXPECT_TRUE(close_to(out, want, 1e-6, 1e-6)); });
    }
}

TEST_F(Ops, BinaryInPlace) {
    for (int64_t n0 : k_row_sizes) {
        for (bool mul : { false, true }) {
            const int64_t ne[4] = { n0, 4, 3, 1 };
            const int64_t bs[4] = { n0, 1, 3, 1 };
            ggml_tensor * a = new_input(ctx, GGML_TYPE_F32, ne, layout::contiguous);
            ggml_tensor * b = new_input(ctx, GGML_TYPE_F32, bs, layout::contiguous);
            fill_random(a, 21);
            fill_random(b, 22);
            const ref_t a0 = values(a);
            const ref_t want = binary_ref(mul ? GGML_OP_MUL : GGML_OP_ADD, a, b);
            ggml_tensor * out = mul ? ggml_mul_inplace(ctx, a, b) : ggml_add_inplace(ctx, a, b);
            ASSERT_EQ(out->data, a->data);
            auto reset = [&] {
                size_t k = 0;
                for_each(a, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) { set(a, i0, i1, i2, i3, a0[k++]); });
            };
            each_config(out, [&](const std::string &) { EXPECT_TRUE(close_to(a, want, 1e-6, 1e-6)); }, reset);
        }
    }
}

// ================================================================================ unary ops

double gelu_ref(double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
double silu_ref(double x) { return x / (1.0 + std::exp(-x)); }

double unary_ref(ggml_unary_op op, double x) {
    switch (op) {
        case GGML_UNARY_OP_SILU:     return silu_ref(x);
        case GGML_UNARY_OP_GELU:     return gelu_ref(x);
        case GGML_UNARY_OP_SIGMOID:  return 1.0 / (1.0 + std::exp(-x));
        case GGML_UNARY_OP_SOFTPLUS: return std::log1p(std::exp(x));
        case GGML_UNARY_OP_RELU:     return x > 0 ? x : 0;
        case GGML_UNARY_OP_TANH:     return std::tanh(x);
        case GGML_UNARY_OP_NEG:      return -x;
        case GGML_UNARY_OP_EXP:      return std::exp(x);
        default:                     return NAN;
    }
}

TEST_F(Ops, UnaryActivations) {
    uint32_t seed = 100;
    for (int op = 0; op < GGML_UNARY_OP_COUNT; ++op) {
        for (int64_t n0 : k_row_sizes) {
            for (layout l : k_layouts) {
                const int64_t ne[4] = { n0, 3, 2, 1 };
                ggml_tensor * a = new_input(ctx, GGML_TYPE_F32, ne, l);
                // wide range: exercises the saturating ends of exp/tanh/sigmoid/softplus
                fill_random(a, seed++, -30.0, 30.0);
                if (n0 >= 3) {
                    set(a, 0, 0, 0, 0, 0.0);
                    set(a, 1, 0, 0, 0, 85.0);
                    set(a, 2, 0, 0, 0, -85.0);
                }
                ggml_tensor * out = ggml_unary(ctx, a, (ggml_unary_op) op);
                ref_t want;
                for (double x : values(a)) want.push_back(unary_ref((ggml_unary_op) op, x));
                SCOPED_TRACE(std::string(ggml_unary_op_name((ggml_unary_op) op)) + " " + layout_name(l) + " " + shape_str(a));
                each_config(out, [&](const std::string &) { EXPECT_TRUE(close_to(out, want, 1e-6, 2e-6)); });
            }
        }
    }
}

TEST_F(Ops, ScaleClampSqrSqrt) {
    uint32_t seed = 200;
    for (int64_t n0 : k_row_sizes) {
        for (layout l : k_layouts) {
            const int64_t ne[4] = { n0, 2, 3, 2 };
            ggml_tensor * a = new_input(ctx, GGML_TYPE_F32, ne, l);
            fill_random(a, seed++, -3.0, 3.0);
            const ref_t x = values(a);
            ggml_tensor * abs_a = new_input(ctx, GGML_TYPE_F32, ne, l);
            fill_random(abs_a, seed++, 0.0, 5.0);
            const ref_t xa = values(abs_a);
            struct cse { ggml_tensor * out; ref_t want; };
            std::vector<cse> cases;
            ref_t w;
            for (double v : x) w.push_back(0.75 * v - 0.5);
            cases.push_back({ ggml_scale_bias(ctx, a, 0.75f, -0.5f), w });
            w.clear();
            for (double v : x) w.push_back(std::min(1.25, std::max(-0.5, v)));
            cases.push_back({ ggml_clamp(ctx, a, -0.5f, 1.25f), w });
            w.clear();
            for (double v : x) w.push_back(v * v);
            cases.push_back({ ggml_sqr(ctx, a), w });
            w.clear();
            for (double v : xa) w.push_back(std::sqrt(v));
            cases.push_back({ ggml_sqrt(ctx, abs_a), w });
            for (auto & c : cases) {
                SCOPED_TRACE(std::string(ggml_op_name(c.out->op)) + " " + layout_name(l) + " " + shape_str(a));
                each_config(c.out, [&](const std::string &) { EXPECT_TRUE(close_to(c.out, c.want, 1e-6, 1e-6)); });
            }
        }
    }
}

TEST_F(Ops, GatedUnits) {
    uint32_t seed = 300;
    for (int64_t n0 : k_row_sizes) {
        for (layout l : { layout::contiguous, layout::sliced, layout::transposed }) {
            for (int op = 0; op < GGML_GLU_OP_COUNT; ++op) {
                const int64_t ne[4] = { n0, 5, 2, 1 };
                ggml_tensor * g = new_input(ctx, GGML_TYPE_F32, ne, l);
                ggml_tensor * u = new_input(ctx, GGML_TYPE_F32, ne, layout::contiguous);
                fill_random(g, seed++, -8.0, 8.0);
                fill_random(u, seed++, -2.0, 2.0);
                ggml_tensor * out = ggml_glu_split(ctx, g, u, (ggml_glu_op) op);
                const ref_t gv = values(g), uv = values(u);
                ref_t want;
                for (size_t i = 0; i < gv.size(); ++i) want.push_back((op == GGML_GLU_OP_SWIGLU ? silu_ref(gv[i]) : gelu_ref(gv[i])) * uv[i]);
                SCOPED_TRACE(std::string(op == GGML_GLU_OP_SWIGLU ? "swiglu " : "geglu ") + layout_name(l) + " " + shape_str(g));
                each_config(out, [&](const std::string &) { EXPECT_TRUE(close_to(out, want, 1e-6, 2e-6)); });
            }
        }
    }
}

TEST_F(Ops, RowReductions) {
    uint32_t seed = 400;
    for (int64_t n0 : { 1, 3, 17, 67, 130, 1000 }) {
        for (layout l : k_layouts) {
            const int64_t ne[4] = { n0, 4, 3, 2 };
            ggml_tensor * a = new_input(ctx, GGML_TYPE_F32, ne, l);
            fill_random(a, seed++);
            ref_t sums, means;
            for (int64_t i3 = 0; i3 < ne[3]; ++i3)
                for (int64_t i2 = 0; i2 < ne[2]; ++i2)
                    for (int64_t i1 = 0; i1 < ne[1]; ++i1) {
                        double s = 0;
                        for (int64_t i0 = 0; i0 < n0; ++i0) s += get(a, i0, i1, i2, i3);
                        sums.push_back(s);
                        means.push_back(s / n0);
                    }
            ggml_tensor * sr = ggml_sum_rows(ctx, a);
            ggml_tensor * mn = ggml_mean(ctx, a);
            SCOPED_TRACE(std::string(layout_name(l)) + " " + shape_str(a));
            each_config(sr, [&](const std::string &) { EXPECT_TRUE(close_to(sr, sums, 1e-5, 1e-5)); });
            each_config(mn, [&](const std::string &) { EXPECT_TRUE(close_to(mn, means, 1e-6, 1e-5)); });
        }
    }
}

TEST_F(Ops, Argmax) {
    for (int64_t n0 : k_row_sizes) {
        for (layout l : { layout::contiguous, layout::transposed }) {
            const int64_t ne[4] = { n0, 7, 1, 1 };
            ggml_tensor * a = new_input(ctx, GGML_TYPE_F32, ne, l);
            fill_random(a, 500 + n0);
            ref_t want;
            for (int64_t r = 0; r < 7; ++r) {
                int64_t best = 0;
                for (int64_t i = 1; i < n0; ++i) if (get(a, i, r, 0, 0) > get(a, best, r, 0, 0)) best = i;
                want.push_back(best);
            }
            ggml_tensor * out = ggml_argmax(ctx, a);
            each_config(out, [&](const std::string &) { EXPECT_TRUE(close_to(out, want, 0, 0)); });
        }
    }
}

// ================================================================================ norms

TEST_F(Ops, Norms) {
    uint32_t seed = 600;
    const float eps = 1e-5f;
    for (int64_t n0 : { 1, 3, 17, 67, 130, 4096 }) {
        for (layout l : k_layouts) {
            const int64_t ne[4] = { n0, 3, 2, 1 };
            ggml_tensor * a = new_input(ctx, GGML_TYPE_F32, ne, l);
            fill_random(a, seed++, -2.0, 3.0);
            ref_t want_rms, want_norm, want_l2;
            for (int64_t i2 = 0; i2 < ne[2]; ++i2)
                for (int64_t i1 = 0; i1 < ne[1]; ++i1) {
                    double s = 0, s2 = 0;
                    for (int64_t i = 0; i < n0; ++i) {
                        const double x = get(a, i, i1, i2, 0);
                        s += x;
                        s2 += x * x;
                    }
                    const double mean = s / n0;
                    double var = 0;
                    for (int64_t i = 0; i < n0; ++i) var += (get(a, i, i1, i2, 0) - mean) * (get(a, i, i1, i2, 0) - mean);
                    var /= n0;
                    for (int64_t i = 0; i < n0; ++i) {
                        const double x = get(a, i, i1, i2, 0);
                        want_rms.push_back(x / std::sqrt(s2 / n0 + eps));
                        want_norm.push_back((x - mean) / std::sqrt(var + eps));
                        want_l2.push_back(x / std::max(std::sqrt(s2), (double) eps));
                    }
                }
            ggml_tensor * rms = ggml_rms_norm(ctx, a, eps);
            ggml_tensor * nrm = ggml_norm(ctx, a, eps);
            ggml_tensor * l2 = ggml_l2_norm(ctx, a, eps);
            SCOPED_TRACE(std::string(layout_name(l)) + " " + shape_str(a));
            each_config(rms, [&](const std::string &) { EXPECT_TRUE(close_to(rms, want_rms, 1e-5, 1e-5)); });
            each_config(nrm, [&](const std::string &) { EXPECT_TRUE(close_to(nrm, want_norm, 1e-5, 1e-5)); });
            each_config(l2, [&](const std::string &) { EXPECT_TRUE(close_to(l2, want_l2, 1e-6, 1e-5)); });
        }
    }
}

// ================================================================================ rope

struct rope_case {
    int64_t head_dim, n_head, n_tok;
    int n_dims, mode;
    float base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow;
    int n_ctx_orig;
    bool freq_factors, fused_view;
};

double yarn_corr_dim(int n_dims, int n_ctx_orig, double n_rot, double base) {
    return n_dims * std::log(n_ctx_orig / (n_rot * 2 * M_PI)) / (2 * std::log(base));
}

ref_t rope_ref(const rope_case & rc, const ggml_tensor * a, const std::vector<int32_t> & pos, const std::vector<float> & ff) {
    ref_t out = values(a);
    const int half = rc.n_dims / 2;
    double low = 0, high = 0;
    if (rc.ext_factor != 0) {
        low = std::max(0.0, std::floor(yarn_corr_dim(rc.n_dims, rc.n_ctx_orig, rc.beta_fast, rc.base)));
        high = std::min(rc.n_dims - 1.0, std::ceil(yarn_corr_dim(rc.n_dims, rc.n_ctx_orig, rc.beta_slow, rc.base)));
    }
    for (int64_t t = 0; t < rc.n_tok; ++t) {
        for (int64_t h = 0; h < rc.n_head; ++h) {
            double * row = out.data() + (t * rc.n_head + h) * rc.head_dim;
            const ref_t x(row, row + rc.head_dim);
            for (int i = 0; i < half; ++i) {
                const double inv = std::pow((double) rc.base, -2.0 * i / rc.n_dims) / (rc.freq_factors ? ff[i] : 1.0);
                const double extrap = pos[t] * inv;
                const double interp = rc.freq_scale * extrap;
                double theta = interp, mscale = rc.attn_factor;
                if (rc.ext_factor != 0) {
                    const double y = (i - low) / std::max(0.001, high - low);
                    const double mix = (1 - std::min(1.0, std::max(0.0, y))) * rc.ext_factor;
                    theta = interp * (1 - mix) + extrap * mix;
                    mscale *= 1 + 0.1 * std::log(1.0 / rc.freq_scale);
                }
                const int j0 = rc.mode == GGML_ROPE_TYPE_NEOX ? i : 2 * i;
                const int j1 = rc.mode == GGML_ROPE_TYPE_NEOX ? i + half : 2 * i + 1;
                const double c = std::cos(theta) * mscale, s = std::sin(theta) * mscale;
                row[j0] = x[j0] * c - x[j1] * s;
                row[j1] = x[j0] * s + x[j1] * c;
            }
        }
    }
    return out;
}

TEST_F(Ops, Rope) {
    const rope_case cases[] = {
        { 64, 4, 5, 64, GGML_ROPE_TYPE_NORMAL, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, 4096, false, false },
        { 64, 4, 5, 64, GGML_ROPE_TYPE_NEOX, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, 4096, false, false },
        { 80, 3, 7, 32, GGML_ROPE_TYPE_NORMAL, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, 4096, false, true },
        { 80, 3, 7, 32, GGML_ROPE_TYPE_NEOX, 500000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, 4096, false, true },
        { 6, 2, 3, 4, GGML_ROPE_TYPE_NEOX, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, 4096, false, false },
        { 128, 2, 4, 128, GGML_ROPE_TYPE_NEOX, 1000000.0f, 0.25f, 1.0f, 1.0f, 32.0f, 1.0f, 4096, false, true },
        { 128, 2, 4, 128, GGML_ROPE_TYPE_NORMAL, 10000.0f, 0.125f, 0.5f, 0.9f, 24.0f, 2.0f, 2048, false, false },
        { 128, 3, 4, 96, GGML_ROPE_TYPE_NEOX, 500000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, 8192, true, true },
        { 64, 2, 3, 64, GGML_ROPE_TYPE_NORMAL, 10000.0f, 0.5f, 1.0f, 1.0f, 32.0f, 1.0f, 4096, true, false },
    };
    uint32_t seed = 700;
    for (const rope_case & rc : cases) {
        ggml_tensor * a;
        if (rc.fused_view) {
            // q inside a fused qkv projection: heads of one token are not followed by the next token
            const int64_t n_kvh = 1;
            ggml_tensor * qkv = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, rc.head_dim * (rc.n_head + 2 * n_kvh), rc.n_tok);
            fill_random(qkv, seed++);
            a = ggml_view_3d(ctx, qkv, rc.head_dim, rc.n_head, rc.n_tok, rc.head_dim * sizeof(float), qkv->nb[1],
                             rc.head_dim * n_kvh * sizeof(float));
        } else {
            a = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, rc.head_dim, rc.n_head, rc.n_tok);
            fill_random(a, seed++);
        }
        ggml_tensor * pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, rc.n_tok);
        std::vector<int32_t> pv(rc.n_tok);
        std::mt19937 rng(seed++);
        for (int64_t t = 0; t < rc.n_tok; ++t) pv[t] = t == 0 ? 0 : (int32_t) (rng() % 6000);
        std::memcpy(pos->data, pv.data(), pv.size() * sizeof(int32_t));
        ggml_tensor * ff = nullptr;
        std::vector<float> ffv;
        if (rc.freq_factors) {
            ff = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, rc.n_dims / 2);
            ffv = kiln_test::random_floats(rc.n_dims / 2, seed++, 1.0f, 8.0f);
            std::memcpy(ff->data, ffv.data(), ffv.size() * sizeof(float));
        }
        ggml_tensor * out = ggml_rope_ext(ctx, a, pos, ff, rc.n_dims, rc.mode, rc.n_ctx_orig, rc.base, rc.freq_scale,
                                          rc.ext_factor, rc.attn_factor, rc.beta_fast, rc.beta_slow);
        const ref_t want = rope_ref(rc, a, pv, ffv);
        char name[160];
        std::snprintf(name, sizeof(name), "rope %s head_dim %lld n_dims %d scale %g ext %g ff %d view %d",
                      rc.mode == GGML_ROPE_TYPE_NEOX ? "neox" : "normal", (long long) rc.head_dim, rc.n_dims,
                      rc.freq_scale, rc.ext_factor, rc.freq_factors, rc.fused_view);
        SCOPED_TRACE(name);
        each_config(out, [&](const std::string &) { EXPECT_TRUE(close_to(out, want, 2e-5, 1e-5)); });
    }
}

// Threads keep the cos/sin tables of the positions they met for the next rope nodes
// (ops-rope.cpp's table_cache). Nodes that share positions but not parameters must not share
// tables: two nodes in one graph on the same positions, the second with another base, then
// the graph again after the frequency factors changed in place (same tensor, other values).
TEST_F(Ops, RopeTablesFollowTheirParameters) {
    const rope_case a_case = { 64, 2, 9, 64, GGML_ROPE_TYPE_NEOX, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, 4096, true, false };
    rope_case b_case = a_case;
    b_case.base = 1000000.0f;
    ggml_tensor * x = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, a_case.head_dim, a_case.n_head, a_case.n_tok);
    fill_random(x, 810);
    ggml_tensor * pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, a_case.n_tok);
    // positions past the cache's 1024 slots that share a slot with earlier ones, and repeats
    const std::vector<int32_t> pv = { 0, 5, 1029, 5, 3000, 1976, 952, 7, 1029 };
    std::memcpy(pos->data, pv.data(), pv.size() * sizeof(int32_t));
    ggml_tensor * ff = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, a_case.n_dims / 2);
    std::vector<float> ffv = kiln_test::random_floats(a_case.n_dims / 2, 811, 1.0f, 8.0f);
    std::memcpy(ff->data, ffv.data(), ffv.size() * sizeof(float));
    auto rope = [&](const rope_case & rc) {
        return ggml_rope_ext(ctx, x, pos, ff, rc.n_dims, rc.mode, rc.n_ctx_orig, rc.base, rc.freq_scale, rc.ext_factor,
                             rc.attn_factor, rc.beta_fast, rc.beta_slow);
    };
    ggml_tensor * ya = rope(a_case);
    ggml_tensor * yb = rope(b_case);
    ggml_tensor * out = ggml_add(ctx, ya, yb);   // computes both (each is checked on its own)
    each_config(out, [&](const std::string &) {
        EXPECT_TRUE(close_to(ya, rope_ref(a_case, x, pv, ffv), 2e-5, 1e-5));
        EXPECT_TRUE(close_to(yb, rope_ref(b_case, x, pv, ffv), 2e-5, 1e-5));
    });
    // one node alone, so that nothing else rebinds the threads' tables between the two rounds
    for (int round = 0; round < 2; ++round) {
        if (round == 1) {
            ffv = kiln_test::random_floats(a_case.n_dims / 2, 812, 1.0f, 8.0f);
            std::memcpy(ff->data, ffv.data(), ffv.size() * sizeof(float));
        }
        SCOPED_TRACE("frequency factors " + std::to_string(round));
        const ref_t wa = rope_ref(a_case, x, pv, ffv);
        each_config(ya, [&](const std::string &) { EXPECT_TRUE(close_to(ya, wa, 2e-5, 1e-5)); });
    }
}

// ================================================================================ softmax

double alibi_slope_ref(double max_bias, int64_t n_head, int64_t h) {
    if (max_bias <= 0) return 1.0;
    const int64_t n_log2 = int64_t(1) << (int64_t) std::floor(std::log2((double) n_head));
    const double m0 = std::pow(2.0, -max_bias / n_log2);
    const double m1 = std::pow(2.0, -(max_bias / 2) / n_log2);
    return h < n_log2 ? std::pow(m0, h + 1) : std::pow(m1, 2 * (h - n_log2) + 1);
}

// A causal mask with the query rows ending at the last key, small finite biases elsewhere.
void fill_causal_mask(ggml_tensor * m, int64_t n_q, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> d(-0.5, 0.5);
    for_each(m, [&](int64_t j, int64_t iq, int64_t i2, int64_t i3) {
        const int64_t last = m->ne[0] - n_q + std::min(iq, n_q - 1);
        set(m, j, iq, i2, i3, j > last ? -INFINITY : d(rng));
    });
}

TEST_F(Ops, SoftMax) {
    uint32_t seed = 800;
    for (int64_t n_kv : { 1, 3, 17, 67, 130 }) {
        for (ggml_type mt : { GGML_TYPE_COUNT, GGML_TYPE_F32, GGML_TYPE_F16 }) {
            for (float max_bias : { 0.0f, 8.0f }) {
                for (layout l : { layout::contiguous, layout::sliced, layout::permuted }) {
                    if (mt == GGML_TYPE_COUNT && max_bias > 0) continue;
                    const int64_t n_q = 4, n_head = 6;
                    const int64_t ne[4] = { n_kv, n_q, n_head, 2 };
                    ggml_tensor * a = new_input(ctx, GGML_TYPE_F32, ne, l);
                    fill_random(a, seed++, -4.0, 4.0);
                    ggml_tensor * mask = nullptr;
                    if (mt != GGML_TYPE_COUNT) {
                        // per-sequence masks (dim 3), shared by the heads; more rows than queries
                        mask = ggml_new_tensor_4d(ctx, mt, n_kv, n_q + 3, 1, 2);
                        fill_causal_mask(mask, n_q, seed++);
                    }
                    const float scale = 0.37f;
                    ggml_tensor * out = ggml_soft_max_ext(ctx, a, mask, scale, max_bias);
                    // attention sinks (gpt-oss) on the masked, ALiBi-free cases: some above every score
                    ggml_tensor * sinks = nullptr;
                    if (mask && max_bias == 0.0f) {
                        sinks = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n_head);
                        fill_random(sinks, seed++, -2.0, 3.0);
                        ggml_soft_max_add_sinks(out, sinks);
                    }
                    ref_t want;
                    for (int64_t i3 = 0; i3 < ne[3]; ++i3)
                        for (int64_t h = 0; h < n_head; ++h)
                            for (int64_t iq = 0; iq < n_q; ++iq) {
                                ref_t row(n_kv);
                                double mx = -INFINITY;
                                const double slope = alibi_slope_ref(max_bias, n_head, h);
                                for (int64_t j = 0; j < n_kv; ++j) {
                                    row[j] = get(a, j, iq, h, i3) * scale + (mask ? slope * get(mask, j, iq, 0, i3) : 0.0);
                                    mx = std::max(mx, row[j]);
                                }
                                // a fully masked row is defined as zeros (no NaN leaks into the next op)
                                // the sink joins the denominator only
                                const double sink = sinks ? get(sinks, h, 0, 0, 0) : -INFINITY;
                                const double m2 = std::max(mx, sink);
                                double sum = mx == -INFINITY ? 0.0 : std::exp(sink - m2);
                                for (double & x : row) sum += (x = mx == -INFINITY ? 0.0 : std::exp(x - m2));
                                for (double x : row) want.push_back(sum > 0 ? x / sum : 0.0);
                            }
                    SCOPED_TRACE(std::string("soft_max ") + layout_name(l) + " " + shape_str(a) + " mask " +
                                 (mask ? ggml_type_name(mt) : "none") + " max_bias " + std::to_string(max_bias) +
                                 (sinks ? " sinks" : ""));
                    each_config(out, [&](const std::string &) { EXPECT_TRUE(close_to(out, want, 1e-6, 1e-5)); });
                }
            }
        }
    }
}

TEST_F(Ops, DiagMaskInf) {
    const int64_t ne[4] = { 9, 5, 3, 1 };
    ggml_tensor * a = new_input(ctx, GGML_TYPE_F32, ne, layout::sliced);
    fill_random(a, 900);
    const int n_past = 3;
    ggml_tensor * out = ggml_diag_mask_inf(ctx, a, n_past);
    ref_t want;
    for_each(a, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        want.push_back(i0 > n_past + i1 ? -INFINITY : get(a, i0, i1, i2, i3));
    });
    each_config(out, [&](const std::string &) { EXPECT_TRUE(close_to(out, want, 0, 0)); });
}

// ================================================================================ copies

// v as stored in a tensor of type t (f32 exact, f16/bf16 rounded)
double stored_as(ggml_type t, double v) {
    switch (t) {
        case GGML_TYPE_F16:  return ggml_fp16_to_fp32(ggml_fp32_to_fp16((float) v));
        case GGML_TYPE_BF16: return ggml_bf16_to_fp32(ggml_fp32_to_bf16((float) v));
        default:             return (float) v;
    }
}

TEST_F(Ops, CpyBetweenFloatTypesAndLayouts) {
    const ggml_type types[] = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16 };
    uint32_t seed = 1000;
    for (int64_t n0 : k_row_sizes) {
        for (ggml_type ts : types) {
            for (ggml_type td : types) {
                for (layout ls : k_layouts) {
                    for (layout ld : { layout::contiguous, layout::transposed }) {
                        const int64_t ne[4] = { n0, 3, 2, 2 };
                        ggml_tensor * a = new_input(ctx, ts, ne, ls);
                        ggml_tensor * b = new_input(ctx, td, ne, ld);
                        fill_random(a, seed++, -100.0, 100.0);
                        ggml_tensor * out = ggml_cpy(ctx, a, b);
                        ref_t want;
                        for (double v : values(a)) want.push_back(stored_as(td, v));
                        SCOPED_TRACE(std::string("cpy ") + layout_name(ls) + " " + shape_str(a) + " -> " + layout_name(ld) + " " + shape_str(b));
                        each_config(out, [&](const std::string &) { EXPECT_TRUE(close_to(b, want, 0, 0)); },
                                    [&] { poison(b); });
                    }
                }
            }
        }
    }
}

TEST_F(Ops, ContAndReshapingCont) {
    uint32_t seed = 1100;
    for (int64_t n0 : k_row_sizes) {
        for (layout l : k_layouts) {
            const int64_t ne[4] = { n0, 3, 4, 2 };
            ggml_tensor * a = new_input(ctx, GGML_TYPE_F32, ne, l);
            fill_random(a, seed++);
            const ref_t want = values(a);
            ggml_tensor * c = ggml_cont(ctx, a);
            ggml_tensor * c2 = ggml_cont_2d(ctx, a, n0 * 3, 8);   // rows of a different length
            ggml_tensor * c1 = ggml_cont_4d(ctx, a, 4 * n0 * 3 * 2, 1, 1, 1);
            SCOPED_TRACE(std::string("cont ") + layout_name(l) + " " + shape_str(a));
            each_config(c, [&](const std::string &) { EXPECT_TRUE(close_to(c, want, 0, 0)); });
            each_config(c2, [&](const std::string &) { EXPECT_TRUE(close_to(c2, want, 0, 0)); });
            each_config(c1, [&](const std::string &) { EXPECT_TRUE(close_to(c1, want, 0, 0)); });
        }
    }
}

TEST_F(Ops, CpyToAndFromQuantized) {
    const ggml_type qt = GGML_TYPE_Q8_0;
    const auto * tt = ggml_get_type_traits(qt);
    ASSERT_TRUE(tt->to_float && tt->from_float_ref);
    for (layout l : { layout::contiguous, layout::sliced, layout::permuted }) {
        const int64_t ne[4] = { 96, 5, 3, 1 };
        ggml_tensor * a = new_input(ctx, GGML_TYPE_F32, ne, l);
        fill_random(a, 1200);
        ggml_tensor * q = ggml_new_tensor_4d(ctx, qt, ne[0], ne[1], ne[2], ne[3]);
        ggml_tensor * out = ggml_cpy(ctx, a, q);
        // expected: each row quantized by the reference encoder, then decoded
        const ref_t av = values(a);
        ref_t want;
        std::vector<float> row(ne[0]), dec(ne[0]);
        std::vector<uint8_t> blk(ggml_row_size(qt, ne[0]));
        for (size_t r = 0; r < av.size() / ne[0]; ++r) {
            for (int64_t i = 0; i < ne[0]; ++i) row[i] = (float) av[r * ne[0] + i];
            tt->from_float_ref(row.data(), blk.data(), ne[0]);
            tt->to_float(blk.data(), dec.data(), ne[0]);
            for (float x : dec) want.push_back(x);
        }
        SCOPED_TRACE(std::string("f32 -> q8_0 ") + layout_name(l));
        each_config(out, [&](const std::string &) { EXPECT_TRUE(close_to(q, want, 1e-6, 1e-6)); },
                    [&] { std::memset(q->data, 0x5a, ggml_nbytes(q)); });
        // and back: q8_0 -> f32 and f16 (decode, then round)
        ggml_tensor * back = ggml_cast(ctx, q, GGML_TYPE_F32);
        ggml_tensor * back16 = ggml_cast(ctx, q, GGML_TYPE_F16);
        ref_t want16;
        for (double v : want) want16.push_back(stored_as(GGML_TYPE_F16, v));
        each_config(back, [&](const std::string &) { EXPECT_TRUE(close_to(back, want, 0, 0)); });
        each_config(back16, [&](const std::string &) { EXPECT_TRUE(close_to(back16, want16, 0, 0)); });
    }
}

TEST_F(Ops, GetRows) {
    uint32_t seed = 1300;
    for (ggml_type t : { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0 }) {
        for (int64_t n0 : { 32, 64, 160 }) {
            const int64_t n_rows = 11;
            ggml_tensor * a = ggml_new_tensor_3d(ctx, t, n0, n_rows, 2);
            ref_t av;
            if (t == GGML_TYPE_Q8_0) {
                const std::vector<float> src = kiln_test::random_floats(n0 * n_rows * 2, seed++);
                for (int64_t r = 0; r < n_rows * 2; ++r) {
                    ggml_get_type_traits(t)->from_float_ref(src.data() + r * n0, (char *) a->data + r * a->nb[1], n0);
                }
            } else {
                fill_random(a, seed++);
            }
            av = values(a);
            ggml_tensor * ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 7, 2);
            std::mt19937 rng(seed++);
            for (int64_t i = 0; i < 14; ++i) ((int32_t *) ids->data)[i] = (int32_t) (rng() % n_rows);
            ggml_tensor * out = ggml_get_rows(ctx, a, ids);
            ref_t want;
            for (int64_t s = 0; s < 2; ++s)
                for (int64_t i = 0; i < 7; ++i) {
                    const int64_t r = ((int32_t *) ids->data)[s * 7 + i];
                    for (int64_t k = 0; k < n0; ++k) want.push_back(av[(s * n_rows + r) * n0 + k]);
                }
            SCOPED_TRACE(std::string("get_rows ") + shape_str(a));
            each_config(out, [&](const std::string &) { EXPECT_TRUE(close_to(out, want, 0, 0)); });
        }
    }
}

TEST_F(Ops, SetRowsKvCacheWrite) {
    uint32_t seed = 1400;
    for (ggml_type t : { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0 }) {
        for (ggml_type it : { GGML_TYPE_I64, GGML_TYPE_I32 }) {
            for (bool broadcast : { false, true }) {
                const int64_t n0 = 64, n_cache = 13, n_new = 4, n2 = 2;
                ggml_tensor * cache = ggml_new_tensor_3d(ctx, t, n0, n_cache, n2);
                ggml_tensor * rows = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, n0, n_new, n2);
                fill_random(rows, seed++);
                // one index row shared by both dim-2 slices, or one per slice
                ggml_tensor * ids = ggml_new_tensor_2d(ctx, it, n_new, broadcast ? 1 : n2);
                std::vector<int64_t> perm(n_cache);
                for (int64_t i = 0; i < n_cache; ++i) perm[i] = i;
                std::mt19937 rng(seed++);
                for (int64_t s = 0; s < ids->ne[1]; ++s) {
                    std::shuffle(perm.begin(), perm.end(), rng);   // distinct destinations
                    for (int64_t i = 0; i < n_new; ++i) set(ids, i, s, 0, 0, (double) perm[i]);
                }
                std::vector<uint8_t> init(ggml_nbytes(cache));
                for (size_t i = 0; i < init.size(); ++i) init[i] = (uint8_t) (rng() & 0x3f);   // finite garbage
                ggml_tensor * out = ggml_set_rows(ctx, cache, rows, ids);
                auto reset = [&] { std::memcpy(cache->data, init.data(), init.size()); };
                reset();
                ref_t want = values(cache);
                const auto * tt = ggml_get_type_traits(t);
                std::vector<float> row(n0), dec(n0);
                std::vector<uint8_t> enc(ggml_row_size(t, n0));
                for (int64_t s = 0; s < n2; ++s)
                    for (int64_t i = 0; i < n_new; ++i) {
                        const int64_t dst_row = (int64_t) get(ids, i, broadcast ? 0 : s, 0, 0);
                        for (int64_t k = 0; k < n0; ++k) row[k] = (float) get(rows, k, i, s, 0);
                        tt->from_float_ref(row.data(), enc.data(), n0);
                        tt->to_float(enc.data(), dec.data(), n0);
                        for (int64_t k = 0; k < n0; ++k) want[(s * n_cache + dst_row) * n0 + k] = dec[k];
                    }
                SCOPED_TRACE(std::string("set_rows into ") + shape_str(cache) + " ids " + ggml_type_name(it) +
                             (broadcast ? " broadcast" : ""));
                each_config(out, [&](const std::string &) { EXPECT_TRUE(close_to(cache, want, 1e-6, 1e-6)); }, reset);
            }
        }
    }
}

TEST_F(Ops, Concat) {
    uint32_t seed = 1500;
    for (int dim = 0; dim < 4; ++dim) {
        for (layout l : k_layouts) {
            for (ggml_type t : { GGML_TYPE_F32, GGML_TYPE_F16 }) {
                int64_t na[4] = { 17, 3, 2, 2 }, nb[4] = { 17, 3, 2, 2 };
                nb[dim] = dim == 0 ? 5 : 1 + dim;
                ggml_tensor * a = new_input(ctx, t, na, l);
                ggml_tensor * b = new_input(ctx, t, nb, layout::contiguous);
                fill_random(a, seed++);
                fill_random(b, seed++);
                ggml_tensor * out = ggml_concat(ctx, a, b, dim);
                ref_t want;
                for_each(out, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
                    int64_t i[4] = { i0, i1, i2, i3 };
                    if (i[dim] < na[dim]) {
                        want.push_back(get(a, i[0], i[1], i[2], i[3]));
                    } else {
                        i[dim] -= na[dim];
                        want.push_back(get(b, i[0], i[1], i[2], i[3]));
                    }
                });
                SCOPED_TRACE("concat dim " + std::to_string(dim) + " " + layout_name(l) + " " + shape_str(a));
                each_config(out, [&](const std::string &) { EXPECT_TRUE(close_to(out, want, 0, 0)); });
            }
        }
    }
}

// ================================================================================ sorting

TEST_F(Ops, ArgsortAndTopK) {
    uint32_t seed = 1600;
    for (int64_t n0 : { 1, 3, 17, 67, 130, 256 }) {
        for (layout l : { layout::contiguous, layout::transposed }) {
            const int64_t ne[4] = { n0, 5, 2, 1 };
            ggml_tensor * a = new_input(ctx, GGML_TYPE_F32, ne, l);
            fill_random(a, seed++, -10.0, 10.0);
            if (l == layout::transposed) {
                // whole numbers: many ties, which must keep index order
                for_each(a, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
                    set(a, i0, i1, i2, i3, std::round(get(a, i0, i1, i2, i3)));
                });
            }
            auto sorted = [&](bool desc) {
                ref_t out;
                for (int64_t i2 = 0; i2 < ne[2]; ++i2)
                    for (int64_t i1 = 0; i1 < ne[1]; ++i1) {
                        std::vector<int64_t> idx(n0);
                        for (int64_t i = 0; i < n0; ++i) idx[i] = i;
                        std::stable_sort(idx.begin(), idx.end(), [&](int64_t x, int64_t y) {
                            const double vx = get(a, x, i1, i2, 0), vy = get(a, y, i1, i2, 0);
                            return desc ? vx > vy : vx < vy;
                        });
                        for (int64_t v : idx) out.push_back((double) v);
                    }
                return out;
            };
            SCOPED_TRACE(std::string("argsort ") + layout_name(l) + " " + shape_str(a));
            ggml_tensor * asc = ggml_argsort(ctx, a, GGML_SORT_ORDER_ASC);
            ggml_tensor * desc = ggml_argsort(ctx, a, GGML_SORT_ORDER_DESC);
            const ref_t want_asc = sorted(false), want_desc = sorted(true);
            each_config(asc, [&](const std::string &) { EXPECT_TRUE(close_to(asc, want_asc, 0, 0)); });
            each_config(desc, [&](const std::string &) { EXPECT_TRUE(close_to(desc, want_desc, 0, 0)); });
            for (int64_t k : { int64_t(1), std::min<int64_t>(5, n0), n0 }) {
                ggml_tensor * top = ggml_top_k(ctx, a, (int) k);
                ref_t want;
                for (int64_t r = 0; r < ne[1] * ne[2]; ++r)
                    for (int64_t i = 0; i < k; ++i) want.push_back(want_desc[r * n0 + i]);
                SCOPED_TRACE("top_k " + std::to_string(k));
                each_config(top, [&](const std::string &) { EXPECT_TRUE(close_to(top, want, 0, 0)); });
            }
        }
    }
}

// ================================================================================ attention

struct fa_case {
    int64_t D, Dv, n_q, n_kv, n_head, n_head_kv, n_seq;
    ggml_type kv_type;
    ggml_type mask_type;   // GGML_TYPE_COUNT: no mask
    float scale, max_bias, softcap;
    bool q_permuted;       // q as a permuted view of [D, n_head, n_q, n_seq], as models build it
    bool dead_row;         // one query row masked entirely
    int64_t mask_ne2 = 1;  // mask dims 2 and 3 (broadcast over heads and sequences by modulo)
    int64_t mask_ne3 = 1;
    bool sinks = false;    // a sink logit per head (gpt-oss)
    bool cell_major = false;   // K/V as the KV cache lays them out: a cell's heads adjacent (nb1 > nb2)
    // nonzero: a mask of 0 and -inf only, as llama builds it (the packed paths then read it only
    // on tiles across a row's edges): causal (-1), a sliding window of this many keys, or two
    // sequences' cells in alternating blocks (-2), with one row given a -inf hole, one a stray
    // nonzero value and one a -0 among its visible keys
    int64_t plain_window = 0;
    bool hole = false;         // cells 32..63 masked for every row (a whole tile no row sees)
};

std::string fa_name(const fa_case & c) {
    char buf[200];
    std::snprintf(buf, sizeof(buf), "fa D %lld Dv %lld n_q %lld n_kv %lld heads %lld/%lld seq %lld kv %s mask %s bias %g cap %g qperm %d",
                  (long long) c.D, (long long) c.Dv, (long long) c.n_q, (long long) c.n_kv, (long long) c.n_head,
                  (long long) c.n_head_kv, (long long) c.n_seq, ggml_type_name(c.kv_type),
                  c.mask_type == GGML_TYPE_COUNT ? "none" : ggml_type_name(c.mask_type), c.max_bias, c.softcap, c.q_permuted);
    return std::string(buf) + (c.sinks ? " sinks" : "") + (c.cell_major ? " cell-major" : "") +
           (c.plain_window ? " plain window " + std::to_string(c.plain_window) : "") + (c.hole ? " hole" : "");
}

// 0 where key j is visible to query iq (causal, within the last `window` keys when window > 0,
// of its own sequence when window is -2),
// -inf elsewhere; then a -inf hole in the middle of one row's visible keys, a stray 0.75 in
// another's and a -0 in a third (the hole and the stray value make those rows' masks matter
// on every tile)
void fill_plain_mask(ggml_tensor * m, int64_t n_q, int64_t window) {
    const int64_t n_kv = m->ne[0];
    auto last = [&](int64_t iq) { return n_kv - n_q + std::min(iq, n_q - 1); };
    for_each(m, [&](int64_t j, int64_t iq, int64_t i2, int64_t i3) {
        // window -2: two sequences whose cells alternate in blocks of 48 (query iq of sequence
        // iq % 2): whole tiles inside a row's span are hidden
        const bool own = window != -2 || (j / 48) % 2 == iq % 2;
        const bool seen = own && j <= last(iq) && (window <= 0 || j > last(iq) - window);
        set(m, j, iq, i2, i3, seen ? 0.0 : -INFINITY);
    });
    for (int64_t i3 = 0; i3 < m->ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < m->ne[2]; ++i2) {
            const int64_t hole = n_q / 3, stray = n_q / 4, neg = n_q / 5;
            const int64_t first = window > 0 ? std::max<int64_t>(0, last(hole) - window + 1) : 0;
            set(m, (first + last(hole)) / 2, hole, i2, i3, -INFINITY);
            set(m, std::max<int64_t>(0, last(stray) - 40), stray, i2, i3, 0.75);
            set(m, std::max<int64_t>(0, last(neg) - 3), neg, i2, i3, -0.0);
        }
}

void fill_kv(ggml_tensor * t, uint32_t seed) {
    if (!ggml_is_quantized(t->type)) {
        fill_random(t, seed);
        return;
    }
    const std::vector<float> src = kiln_test::random_floats(ggml_nelements(t), seed);
    const int64_t nr = ggml_nrows(t);
    for (int64_t r = 0; r < nr; ++r) {
        ggml_get_type_traits(t->type)->from_float_ref(src.data() + r * t->ne[0], (char *) t->data + r * t->nb[1], t->ne[0]);
    }
}

TEST_F(Ops, FlashAttention) {
    const ggml_type none = GGML_TYPE_COUNT;
    const fa_case cases[] = {
        // decode: one query, KV split across threads
        { 64, 64, 1, 67, 4, 4, 1, GGML_TYPE_F32, none, 0.125f, 0.0f, 0.0f, false, false },
        { 128, 128, 1, 300, 8, 2, 1, GGML_TYPE_F16, GGML_TYPE_F16, 0.088f, 0.0f, 0.0f, true, false },
        { 64, 64, 1, 1, 2, 1, 1, GGML_TYPE_F16, GGML_TYPE_F32, 0.125f, 0.0f, 0.0f, false, false },
        { 96, 64, 1, 130, 6, 3, 2, GGML_TYPE_BF16, GGML_TYPE_F16, 0.1f, 0.0f, 30.0f, true, false },
        { 64, 64, 1, 77, 4, 1, 1, GGML_TYPE_Q8_0, GGML_TYPE_F16, 0.125f, 0.0f, 0.0f, false, false },
        // prefill: many queries, causal masks with -inf, GQA
        { 64, 64, 17, 17, 4, 2, 1, GGML_TYPE_F32, GGML_TYPE_F32, 0.125f, 0.0f, 0.0f, true, false },
        { 128, 128, 33, 70, 8, 2, 1, GGML_TYPE_F16, GGML_TYPE_F16, 0.088f, 0.0f, 0.0f, true, false },
        { 64, 32, 20, 45, 4, 4, 2, GGML_TYPE_F16, GGML_TYPE_F16, 0.2f, 8.0f, 0.0f, false, false },
        { 80, 80, 9, 40, 16, 1, 1, GGML_TYPE_F32, GGML_TYPE_F16, 0.11f, 0.0f, 50.0f, true, true },
        { 64, 64, 5, 100, 3, 1, 1, GGML_TYPE_Q8_0, GGML_TYPE_F32, 0.125f, 0.0f, 0.0f, false, true },
        { 32, 32, 7, 3, 2, 2, 1, GGML_TYPE_F32, none, 0.3f, 0.0f, 0.0f, false, false },
        // a mask per head and per sequence (dims 2 and 3)
        { 64, 64, 6, 50, 4, 2, 2, GGML_TYPE_F16, GGML_TYPE_F16, 0.125f, 0.0f, 0.0f, true, false, 4, 2 },
        { 64, 64, 1, 90, 4, 2, 2, GGML_TYPE_F32, GGML_TYPE_F32, 0.125f, 0.0f, 0.0f, false, false, 2, 2 },
        // attention sinks: decode (merged split-KV states), prefill with a dead row, GQA
        { 64, 64, 1, 131, 8, 2, 1, GGML_TYPE_F16, GGML_TYPE_F16, 0.125f, 0.0f, 0.0f, true, false, 1, 1, true },
        { 64, 64, 19, 40, 8, 2, 1, GGML_TYPE_F16, GGML_TYPE_F32, 0.125f, 0.0f, 0.0f, true, true, 1, 1, true },
        { 32, 48, 6, 9, 3, 1, 2, GGML_TYPE_F32, none, 0.3f, 0.0f, 0.0f, false, false, 1, 1, true },
        // cache rows read in place (few rows per tile): GQA 1/4/8, every cache type, n_kv not a
        // multiple of the tile, head sizes that are odd multiples of 16 (no 32- or 64-value chunks)
        { 128, 128, 1, 333, 16, 2, 1, GGML_TYPE_F16, GGML_TYPE_F16, 0.088f, 0.0f, 0.0f, true, false },
        { 128, 128, 1, 95, 8, 2, 1, GGML_TYPE_Q8_0, GGML_TYPE_F32, 0.088f, 0.0f, 0.0f, true, false },
        { 64, 64, 1, 70, 3, 3, 1, GGML_TYPE_Q4_0, GGML_TYPE_F16, 0.125f, 0.0f, 0.0f, false, false },
        { 128, 128, 1, 41, 8, 2, 2, GGML_TYPE_Q4_0, GGML_TYPE_F32, 0.088f, 0.0f, 0.0f, true, false, 1, 2 },
        { 80, 80, 1, 57, 4, 2, 1, GGML_TYPE_BF16, GGML_TYPE_F16, 0.11f, 0.0f, 20.0f, true, false },
        { 48, 48, 1, 33, 2, 1, 1, GGML_TYPE_F16, none, 0.14f, 0.0f, 0.0f, false, false, 1, 1, true },
        { 64, 64, 3, 29, 4, 2, 1, GGML_TYPE_F16, GGML_TYPE_F16, 0.125f, 0.0f, 0.0f, true, true },
        { 128, 128, 4, 65, 4, 2, 1, GGML_TYPE_Q8_0, GGML_TYPE_F32, 0.088f, 4.0f, 0.0f, true, false },
        // 8-row passes (the 8 heads of a GQA-8 group, AVX512): with a 4-row rest (12 heads), on
        // 96 values (value pass of 2 vectors) and 80 (of 1)
        { 128, 128, 1, 150, 12, 1, 1, GGML_TYPE_Q8_0, GGML_TYPE_F16, 0.088f, 0.0f, 0.0f, true, false },
        { 96, 96, 1, 70, 16, 2, 1, GGML_TYPE_BF16, GGML_TYPE_F32, 0.1f, 0.0f, 0.0f, true, false },
        { 80, 80, 1, 45, 8, 1, 2, GGML_TYPE_F16, GGML_TYPE_F16, 0.11f, 0.0f, 0.0f, false, false, 1, 2, true },
        // MLA shapes (DeepSeek2: 576-value keys, 512-value values, one KV head): in place with few
        // heads, decoded tiles with many
        { 576, 512, 1, 45, 4, 1, 1, GGML_TYPE_F16, GGML_TYPE_F16, 0.07f, 0.0f, 0.0f, true, false },
        { 576, 512, 1, 38, 16, 1, 1, GGML_TYPE_Q8_0, GGML_TYPE_F32, 0.07f, 0.0f, 0.0f, true, false },
        { 576, 512, 5, 37, 4, 1, 1, GGML_TYPE_Q8_0, GGML_TYPE_F16, 0.07f, 0.0f, 0.0f, true, false },
        // q4_0 through the decoded tiles (prefill)
        { 64, 64, 21, 50, 8, 2, 1, GGML_TYPE_Q4_0, GGML_TYPE_F16, 0.125f, 0.0f, 0.0f, true, true },
        // q8_KV (a per-row scale in a row header): in place and through decoded tiles, laid out as
        // the cache does (one row per cell and head, a cell's heads adjacent) and head-major
        { 128, 128, 1, 95, 8, 2, 1, GGML_TYPE_Q8_KV, GGML_TYPE_F32, 0.088f, 0.0f, 0.0f, true, false, 1, 1, false, true },
        { 96, 96, 1, 57, 4, 2, 2, GGML_TYPE_Q8_KV, GGML_TYPE_F16, 0.1f, 0.0f, 20.0f, true, false, 1, 2, false, true },
        { 64, 64, 1, 77, 4, 1, 1, GGML_TYPE_Q8_KV, GGML_TYPE_F16, 0.125f, 0.0f, 0.0f, false, false },
        { 64, 64, 3, 29, 4, 2, 1, GGML_TYPE_Q8_KV, GGML_TYPE_F16, 0.125f, 0.0f, 0.0f, true, true, 1, 1, true, true },
        { 64, 64, 21, 50, 8, 2, 1, GGML_TYPE_Q8_KV, GGML_TYPE_F16, 0.125f, 0.0f, 0.0f, true, true, 1, 1, false, true },
        { 128, 128, 9, 40, 16, 1, 1, GGML_TYPE_Q8_KV, GGML_TYPE_F32, 0.088f, 0.0f, 0.0f, true, false },
        // bf16 products (bf16 / quantized caches, many rows per tile): two query blocks, a dead
        // row, odd and partial last tiles, ALiBi, a head size of 96 (a 64-value chunk and two of 16
        // in the value pass), softcap (the generic softmax step) with sinks
        { 128, 128, 70, 77, 8, 2, 1, GGML_TYPE_BF16, GGML_TYPE_F32, 0.088f, 0.0f, 0.0f, true, true },
        { 96, 96, 24, 61, 4, 1, 1, GGML_TYPE_Q8_0, GGML_TYPE_F16, 0.11f, 4.0f, 0.0f, false, false },
        { 64, 64, 19, 45, 8, 2, 1, GGML_TYPE_BF16, GGML_TYPE_F16, 0.125f, 0.0f, 30.0f, true, false, 1, 1, true },
        // f32 products on transposed key tiles (f16 / f32 caches, many rows per tile): two query
        // blocks with a dead row, a partial last tile and values of 40 (no 16-value chunks: the
        // generic softmax step and masked value tails); 112-value heads (seven 16-value blocks of
        // the transpose) with ALiBi on the cache's cell-major layout; an f32 cache
        { 48, 40, 140, 160, 4, 2, 1, GGML_TYPE_F16, GGML_TYPE_F32, 0.14f, 0.0f, 0.0f, true, true },
        { 112, 112, 25, 90, 6, 3, 1, GGML_TYPE_F16, GGML_TYPE_F16, 0.09f, 2.0f, 0.0f, true, false, 1, 1, false, true },
        { 64, 64, 40, 33, 8, 1, 1, GGML_TYPE_F32, GGML_TYPE_F32, 0.125f, 0.0f, 0.0f, false, false, 1, 1, true },
        // 0/-inf masks (the packed paths skip the mask on tiles wholly inside a row's visible
        // keys, and tiles no row sees): causal at a depth of 130 with a partial last tile, two
        // query blocks and a dead row; a 45-key window with an f16 mask, GQA 8; ALiBi on the bf16
        // products; a mask per head and sequence; one KV head split across threads (each
        // thread's keys a part of the window)
        { 64, 64, 140, 270, 4, 2, 1, GGML_TYPE_F16, GGML_TYPE_F32, 0.125f, 0.0f, 0.0f, true, true, 1, 1, false, true, -1 },
        { 128, 128, 50, 170, 8, 1, 1, GGML_TYPE_F16, GGML_TYPE_F16, 0.088f, 0.0f, 0.0f, true, false, 1, 1, false, false, 45 },
        { 64, 64, 40, 150, 4, 2, 1, GGML_TYPE_BF16, GGML_TYPE_F32, 0.125f, 4.0f, 0.0f, true, false, 1, 1, false, true, -1 },
        { 64, 64, 20, 90, 4, 2, 2, GGML_TYPE_F16, GGML_TYPE_F16, 0.125f, 0.0f, 0.0f, false, false, 2, 2, false, false, -1 },
        { 64, 64, 6, 150, 16, 1, 1, GGML_TYPE_F16, GGML_TYPE_F32, 0.125f, 0.0f, 0.0f, true, false, 1, 1, true, false, 70 },
        // two sequences' cells interleaved in blocks (whole tiles masked inside a row's span)
        { 64, 64, 30, 230, 4, 2, 1, GGML_TYPE_F16, GGML_TYPE_F16, 0.125f, 0.0f, 0.0f, true, false, 1, 1, false, true, -2 },
        // decode scored cell by cell (every kv head of a cell together, the cells ahead
        // prefetched), on the cache's layout: GQA 2 with 8 kv heads over several tiles and a
        // partial one; GQA 8 on q8_0; 2, 4 and 8 queries (2 x 2, 4 x 2 and 8 x 1 rows per head)
        // and 3 (6 rows per head: the head-by-head path); three sequences (units that two threads
        // cannot share evenly: the KV length split); a tile hidden from every row; a query that
        // sees nothing; ALiBi with an f16 mask per head; q4_0 and bf16 with softcap (the generic
        // softmax step)
        { 128, 128, 1, 173, 16, 8, 1, GGML_TYPE_F16, GGML_TYPE_F32, 0.088f, 0.0f, 0.0f, true, false, 1, 1, false, true },
        { 128, 128, 1, 100, 32, 4, 1, GGML_TYPE_Q8_0, GGML_TYPE_F16, 0.088f, 0.0f, 0.0f, true, false, 1, 1, false, true },
        { 64, 64, 2, 90, 8, 4, 1, GGML_TYPE_F16, GGML_TYPE_F32, 0.125f, 0.0f, 0.0f, true, false, 1, 1, false, true },
        { 64, 64, 4, 75, 4, 2, 1, GGML_TYPE_F16, GGML_TYPE_F16, 0.125f, 0.0f, 0.0f, true, false, 1, 1, false, true },
        { 64, 64, 8, 50, 4, 4, 1, GGML_TYPE_Q8_0, GGML_TYPE_F32, 0.125f, 0.0f, 0.0f, true, false, 1, 1, false, true },
        { 64, 64, 3, 61, 4, 2, 1, GGML_TYPE_F16, GGML_TYPE_F32, 0.125f, 0.0f, 0.0f, true, false, 1, 1, false, true },
        { 64, 64, 1, 70, 8, 4, 3, GGML_TYPE_F16, GGML_TYPE_F32, 0.125f, 0.0f, 0.0f, true, false, 1, 3, false, true },
        { 128, 128, 1, 140, 16, 8, 1, GGML_TYPE_F16, GGML_TYPE_F32, 0.088f, 0.0f, 0.0f, true, false, 1, 1, false, true, 0, true },
        { 64, 64, 2, 96, 8, 4, 1, GGML_TYPE_Q8_0, GGML_TYPE_F16, 0.125f, 0.0f, 0.0f, true, false, 1, 1, false, true, 0, true },
        { 64, 64, 1, 45, 4, 2, 1, GGML_TYPE_F16, GGML_TYPE_F32, 0.125f, 0.0f, 0.0f, true, true, 1, 1, false, true },
        { 64, 64, 1, 80, 8, 4, 1, GGML_TYPE_F16, GGML_TYPE_F16, 0.125f, 4.0f, 0.0f, true, false, 8, 1, false, true },
        { 64, 64, 1, 66, 8, 2, 1, GGML_TYPE_Q4_0, GGML_TYPE_F32, 0.125f, 0.0f, 0.0f, true, false, 1, 1, true, true },
        { 64, 64, 1, 58, 8, 8, 1, GGML_TYPE_BF16, GGML_TYPE_F16, 0.125f, 0.0f, 25.0f, true, false, 1, 1, false, true },
    };
    uint32_t seed = 1700;
    for (const fa_case & c : cases) {
        SCOPED_TRACE(fa_name(c));
        ggml_tensor * q;
        if (c.q_permuted) {
            ggml_tensor * qb = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, c.D, c.n_head, c.n_q, c.n_seq);
            q = ggml_permute(ctx, qb, 0, 2, 1, 3);
        } else {
            q = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, c.D, c.n_q, c.n_head, c.n_seq);
        }
        fill_random(q, seed++);
        auto new_kv = [&](int64_t d) {
            if (!c.cell_major) {
                ggml_tensor * t = ggml_new_tensor_4d(ctx, c.kv_type, d, c.n_kv, c.n_head_kv, c.n_seq);
                fill_kv(t, seed++);
                return t;
            }
            ggml_tensor * t = ggml_new_tensor_4d(ctx, c.kv_type, d, c.n_head_kv, c.n_kv, c.n_seq);
            fill_kv(t, seed++);
            return ggml_permute(ctx, t, 0, 2, 1, 3);
        };
        ggml_tensor * k = new_kv(c.D);
        ggml_tensor * v = new_kv(c.Dv);
        ggml_tensor * mask = nullptr;
        if (c.mask_type != none) {
            mask = ggml_new_tensor_4d(ctx, c.mask_type, c.n_kv, c.n_q + 5, c.mask_ne2, c.mask_ne3);
            if (c.plain_window) {
                fill_plain_mask(mask, c.n_q, c.plain_window);
            } else {
                fill_causal_mask(mask, c.n_q, seed++);
            }
            if (c.dead_row) {
                for (int64_t j = 0; j < c.n_kv; ++j) set(mask, j, c.n_q / 2, 0, 0, -INFINITY);
            }
            if (c.hole) {
                for_each(mask, [&](int64_t j, int64_t iq, int64_t i2, int64_t i3) {
                    if (j >= 32 && j < 64) set(mask, j, iq, i2, i3, -INFINITY);
                });
            }
        }
        ggml_tensor * out = ggml_flash_attn_ext(ctx, q, k, v, mask, c.scale, c.max_bias, c.softcap);
        ggml_tensor * sinks = nullptr;
        if (c.sinks) {
            sinks = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, c.n_head);
            fill_random(sinks, seed++, -1.0, 4.0);
            ggml_flash_attn_ext_add_sinks(out, sinks);
        }
        ASSERT_EQ(out->ne[0], c.Dv);
        ASSERT_EQ(out->ne[1], c.n_head);
        ASSERT_EQ(out->ne[2], c.n_q);

        const ref_t kv_k = values(k), kv_v = values(v);
        const int64_t G = c.n_head / c.n_head_kv;
        ref_t want(c.Dv * c.n_head * c.n_q * c.n_seq, 0.0);
        for (int64_t s = 0; s < c.n_seq; ++s)
            for (int64_t iq = 0; iq < c.n_q; ++iq)
                for (int64_t h = 0; h < c.n_head; ++h) {
                    const int64_t hk = h / G;
                    const double slope = alibi_slope_ref(c.max_bias, c.n_head, h);
                    ref_t sc(c.n_kv, -INFINITY);
                    double mx = -INFINITY;
                    for (int64_t j = 0; j < c.n_kv; ++j) {
                        const double mv = mask ? get(mask, j, iq, h % c.mask_ne2, s % c.mask_ne3) : 0.0;
                        if (mv == -INFINITY) continue;
                        double dot = 0;
                        for (int64_t d = 0; d < c.D; ++d) {
                            dot += get(q, d, iq, h, s) * kv_k[((s * c.n_head_kv + hk) * c.n_kv + j) * c.D + d];
                        }
                        double x = dot * c.scale;
                        if (c.softcap > 0) x = c.softcap * std::tanh(x / c.softcap);
                        sc[j] = x + slope * mv;
                        mx = std::max(mx, sc[j]);
                    }
                    if (mx == -INFINITY) continue;   // every key masked: zeros
                    // a sink joins the denominator only
                    const double sink = sinks ? get(sinks, h, 0, 0, 0) : -INFINITY;
                    const double m2 = std::max(mx, sink);
                    double sum = std::exp(sink - m2);
                    for (double & x : sc) sum += (x = std::exp(x - m2));
                    double * o = want.data() + ((s * c.n_q + iq) * c.n_head + h) * c.Dv;
                    for (int64_t j = 0; j < c.n_kv; ++j) {
                        for (int64_t d = 0; d < c.Dv; ++d) o[d] += sc[j] / sum * kv_v[((s * c.n_head_kv + hk) * c.n_kv + j) * c.Dv + d];
                    }
                }
        // Many query rows per decoded tile (G heads x up to 256/G queries, 128/G for heads of
        // more than 256 values and values together; at least 16 rows) of a
        // bf16 or quantized cache take the bf16 products at the AVX512 level on CPUs with
        // AVX512-BF16: q, k, v and the weights p are rounded to 8-bit mantissas (relative error
        // up to 2^-9 each, 2^-8 for a product) and summed in f32, so an output is off by about
        // 2^-8 of its magnitude: measured on these cases (f16 ones included while they took this
        // path), mean errors 1.4-2.2e-4 on mean |values| of 0.06-0.09, at most 1.1e-3.
        // 2.5e-3 + 1e-2 relative leaves twice that while a wrong row, key or weight (errors of
        // the order of the values, 0.01-1) still fails. f16/f32 caches and heads over 256 values
        // (MLA) keep f32 products and the tight bound.
        const int64_t rows_target = c.D + c.Dv > 256 ? 128 : 256;
        const int64_t rows_per_tile = G * std::min<int64_t>(c.n_q, std::max<int64_t>(1, rows_target / G));
        const bool bf16_case = c.kv_type != GGML_TYPE_F32 && c.kv_type != GGML_TYPE_F16 && rows_per_tile >= 16 &&
                               c.D % 16 == 0 && c.Dv % 16 == 0 && c.D <= 256 && c.Dv <= 256;
        each_config(out, [&](const std::string & where) {
            const bool bf16 = bf16_case && ggml_cpu_has_avx512_bf16() && where.rfind("avx512", 0) == 0;
            EXPECT_TRUE(close_to(out, want, bf16 ? 2.5e-3 : 2e-5, bf16 ? 1e-2 : 1e-4));
        });
    }
}


// ================================================================================ multi-section rope

// Qwen3.5's IMROPE (sections interleaved t, h, w) and Qwen2-VL's MROPE (contiguous sections),
// with four distinct positions per token so a pair rotating by the wrong component shows; the
// sections [6, 6, 4, 0] leave pairs to the "extra" component, [6, 5, 5, 0] cover every pair.
TEST_F(Ops, RopeMultiSection) {
    struct multi_case {
        int mode, n_dims, sections[4];
        int64_t head_dim;
        float ext_factor;
    };
    const multi_case cases[] = {
        { GGML_ROPE_TYPE_IMROPE, 32, { 6, 5, 5, 0 }, 128, 0.0f },
        { GGML_ROPE_TYPE_IMROPE, 32, { 6, 6, 4, 0 }, 128, 0.0f },
        { GGML_ROPE_TYPE_IMROPE, 64, { 11, 11, 10, 0 }, 70, 1.0f },
        { GGML_ROPE_TYPE_MROPE, 32, { 8, 4, 4, 0 }, 40, 0.0f },
        { GGML_ROPE_TYPE_MROPE, 48, { 4, 4, 4, 4 }, 48, 0.0f },
    };
    uint32_t seed = 750;
    for (const multi_case & mc : cases) {
        const int64_t n_head = 3, n_tok = 5;
        ggml_tensor * a = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, mc.head_dim, n_head, n_tok);
        fill_random(a, seed++);
        ggml_tensor * pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 4 * n_tok);
        std::vector<int32_t> pv(4 * n_tok);
        std::mt19937 rng(seed++);
        for (auto & p : pv) p = (int32_t) (rng() % 3000);
        std::memcpy(pos->data, pv.data(), pv.size() * sizeof(int32_t));
        const float base = 1e7f, freq_scale = mc.ext_factor != 0 ? 0.25f : 1.0f;
        ggml_tensor * out = ggml_rope_multi(ctx, a, pos, nullptr, mc.n_dims, mc.sections, mc.mode, 4096, base, freq_scale,
                                            mc.ext_factor, 1.0f, 32.0f, 1.0f);
        // reference: per pair, its component's position through the plain (NEOX) reference
        const int sect = mc.sections[0] + mc.sections[1] + mc.sections[2] + mc.sections[3];
        ref_t want = values(a);
        for (int64_t t = 0; t < n_tok; ++t) {
            for (int i = 0; i < mc.n_dims / 2; ++i) {
                const int sector = i % sect;
                int comp;
                if (mc.mode == GGML_ROPE_TYPE_IMROPE) {
                    comp = sector < 3 * mc.sections[sector % 3] ? sector % 3 : 3;
                } else {
                    comp = sector < mc.sections[0] ? 0 : sector < mc.sections[0] + mc.sections[1] ? 1
                         : sector < mc.sections[0] + mc.sections[1] + mc.sections[2] ? 2 : 3;
                }
                rope_case rc = { mc.head_dim, 1, 1, mc.n_dims, GGML_ROPE_TYPE_NEOX, base, freq_scale, mc.ext_factor, 1.0f,
                                 32.0f, 1.0f, 4096, false, false };
                for (int64_t h = 0; h < n_head; ++h) {
                    ggml_tensor * row = ggml_view_3d(ctx, a, mc.head_dim, 1, 1, a->nb[1], a->nb[2], h * a->nb[1] + t * a->nb[2]);
                    const ref_t r = rope_ref(rc, row, { pv[t + comp * n_tok] }, {});
                    double * w = want.data() + (t * n_head + h) * mc.head_dim;
                    w[i] = r[i];
                    w[i + mc.n_dims / 2] = r[i + mc.n_dims / 2];
                }
            }
        }
        char name[96];
        std::snprintf(name, sizeof(name), "%s n_dims %d sections [%d,%d,%d,%d]", mc.mode == GGML_ROPE_TYPE_IMROPE ? "imrope" : "mrope",
                      mc.n_dims, mc.sections[0], mc.sections[1], mc.sections[2], mc.sections[3]);
        SCOPED_TRACE(name);
        each_config(out, [&](const std::string &) { EXPECT_TRUE(close_to(out, want, 2e-5, 1e-5)); });
    }
}

// ================================================================================ allocator

// The same chain of ops planned by ggml_gallocr in a no_alloc context gives the same result.
TEST(OpsAlloc, GraphAllocatorChain) {
    ggml_init_params ip = { 64 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true };
    ggml_context * ctx = ggml_init(ip);
    ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 67, 5);
    ggml_tensor * w = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 67);
    ggml_set_input(x);
    ggml_set_input(w);
    ggml_tensor * y = ggml_mul(ctx, ggml_rms_norm(ctx, x, 1e-6f), w);
    y = ggml_add(ctx, ggml_silu(ctx, y), x);
    y = ggml_soft_max(ctx, ggml_scale(ctx, y, 2.0f));
    ggml_set_output(y);
    ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, y);
    ggml_backend_t be = ggml_backend_cpu_init();
    ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_get_default_buffer_type(be));
    ASSERT_TRUE(ggml_gallocr_alloc_graph(ga, g));
    const std::vector<float> xv = kiln_test::random_floats(67 * 5, 1), wv = kiln_test::random_floats(67, 2);
    ggml_backend_tensor_set(x, xv.data(), 0, xv.size() * sizeof(float));
    ggml_backend_tensor_set(w, wv.data(), 0, wv.size() * sizeof(float));
    ggml_backend_cpu_set_n_threads(be, 2);
    ASSERT_EQ(ggml_backend_graph_compute(be, g), GGML_STATUS_SUCCESS);
    std::vector<float> got(67 * 5);
    ggml_backend_tensor_get(y, got.data(), 0, got.size() * sizeof(float));
    for (int r = 0; r < 5; ++r) {
        const float * xr = xv.data() + r * 67;
        double ss = 0;
        for (int i = 0; i < 67; ++i) ss += (double) xr[i] * xr[i];
        const double inv = 1.0 / std::sqrt(ss / 67 + 1e-6);
        std::vector<double> z(67);
        double mx = -INFINITY, sum = 0;
        for (int i = 0; i < 67; ++i) {
            const double n = xr[i] * inv * wv[i];
            z[i] = 2.0 * (n / (1 + std::exp(-n)) + xr[i]);
            mx = std::max(mx, z[i]);
        }
        for (double & e : z) sum += (e = std::exp(e - mx));
        for (int i = 0; i < 67; ++i) EXPECT_NEAR(got[r * 67 + i], z[i] / sum, 1e-6) << "row " << r << " col " << i;
    }
    ggml_gallocr_free(ga);
    ggml_backend_free(be);
    ggml_free(ctx);
}

// ================================================================================ vector primitives

// Each ISA level's primitives against double references directly (row lengths around every
// register width, -inf and overflow inputs for exp), and proof that SIMD entries are registered.
TEST(OpsVec, PrimitivesPerIsa) {
    const ggml_cpu_vec_fns & ref = ggml_cpu_vec_at(GGML_CPU_ISA_SCALAR);
    for (ggml_cpu_isa isa : isas_here()) {
        SCOPED_TRACE(ggml_cpu_isa_name(isa));
        const ggml_cpu_vec_fns & f = ggml_cpu_vec_at(isa);
        if (isa != GGML_CPU_ISA_SCALAR) {
            EXPECT_NE((void *) f.silu, (void *) ref.silu) << "no SIMD silu registered";
            EXPECT_NE((void *) f.dot, (void *) ref.dot) << "no SIMD dot registered";
            EXPECT_NE((void *) f.exp_sum, (void *) ref.exp_sum) << "no SIMD exp registered";
        }
        for (int64_t n = 1; n <= 70; ++n) {
            const std::vector<float> x = kiln_test::random_floats(n, (uint32_t) n, -20.0f, 20.0f);
            const std::vector<float> y = kiln_test::random_floats(n, (uint32_t) n + 1000, 0.5f, 2.0f);
            std::vector<float> z(n + 1, 123.0f);   // one guard element past the end
            double sdot = 0, ssq = 0, ssum = 0, smax = -INFINITY;
            for (int64_t i = 0; i < n; ++i) {
                sdot += (double) x[i] * y[i];
                ssq += (double) x[i] * x[i];
                ssum += x[i];
                smax = std::max(smax, (double) x[i]);
            }
            EXPECT_NEAR(f.dot(n, x.data(), y.data()), sdot, 1e-4 * (1 + std::fabs(sdot)));
            EXPECT_NEAR(f.sum_sq(n, x.data()), ssq, 1e-5 * ssq);
            EXPECT_NEAR(f.sum(n, x.data()), ssum, 1e-4 * (1 + std::fabs(ssum)));
            EXPECT_EQ(f.max(n, x.data()), smax);
            f.swiglu(n, z.data(), x.data(), y.data());
            for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(z[i], silu_ref(x[i]) * y[i], 2e-6 * (1 + std::fabs(x[i] * y[i])));
            EXPECT_EQ(z[n], 123.0f) << "wrote past the end, n = " << n;
            f.gelu(n, z.data(), x.data());
            for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(z[i], gelu_ref(x[i]), 2e-6 * (1 + std::fabs(x[i])));
            f.div(n, z.data(), x.data(), y.data());
            for (int64_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ(z[i], x[i] / y[i]);
            EXPECT_EQ(z[n], 123.0f);
            // exp with a masked (-inf) entry and one far below the max; callers never pass a row
            // that is all -inf, so the max stays finite
            std::vector<float> xe(x);
            if (n > 1) {
                xe[0] = -INFINITY;
                xe[1] = -100.0f;
            }
            const float me = *std::max_element(xe.begin(), xe.end());
            const float sum = f.exp_sum(n, z.data(), xe.data(), me);
            double want_sum = 0;
            for (int64_t i = 0; i < n; ++i) {
                const double e = std::exp((double) (xe[i] - me));   // the difference is taken in float
                want_sum += e;
                EXPECT_NEAR(z[i], e, 1e-6 * e + 1e-30) << "exp at " << i;
            }
            if (n > 1) { EXPECT_EQ(z[0], 0.0f); }
            EXPECT_NEAR(sum, want_sum, 1e-6 * want_sum);
            EXPECT_EQ(z[n], 123.0f);
            // f16 round trip is exact for values that f16 holds
            std::vector<uint16_t> h(n), h_ref(n);
            f.f32_to_f16(n, h.data(), x.data());
            ref.f32_to_f16(n, h_ref.data(), x.data());
            EXPECT_EQ(h, h_ref);
            std::vector<float> back(n), back_ref(n);
            f.f16_to_f32(n, back.data(), h.data());
            ref.f16_to_f32(n, back_ref.data(), h.data());
            EXPECT_EQ(back, back_ref);
        }
        // overflow: silu of very negative values is -0, not NaN; exp saturates to inf
        const float big[3] = { -200.0f, 200.0f, 0.0f };
        float o[3];
        f.silu(3, o, big);
        EXPECT_EQ(o[0], 0.0f);
        EXPECT_EQ(o[1], 200.0f);
        EXPECT_EQ(o[2], 0.0f);
        const float ovf[1] = { 100.0f };
        EXPECT_TRUE(std::isinf(f.exp_sum(1, o, ovf, 0.0f)));
    }
}

// The blocked attention forms (qk_block, pv_block) of every level that has them against double
// references: 1-4 query / output rows, key and value counts around the 4-row groups, row lengths
// around every register width; nothing written past a row or an output column.
TEST(OpsVec, AttentionBlocksPerIsa) {
    int checked = 0;
    for (ggml_cpu_isa isa : isas_here()) {
        const ggml_cpu_vec_fns & f = ggml_cpu_vec_at(isa);
        if (!f.qk_block || !f.pv_block) continue;
        SCOPED_TRACE(ggml_cpu_isa_name(isa));
        for (int64_t n : { 1, 3, 4, 7, 8, 15, 16, 17, 33, 64, 80 }) {
            const int64_t max_rows = 9;
            const std::vector<float> qd = kiln_test::random_floats(4 * n, (uint32_t) n, -1.0f, 1.0f);
            const std::vector<float> kd = kiln_test::random_floats(max_rows * n, (uint32_t) n + 7, -1.0f, 1.0f);
            const float * q[4] = { qd.data(), qd.data() + n, qd.data() + 2 * n, qd.data() + 3 * n };
            const float * kr[max_rows];
            for (int64_t t = 0; t < max_rows; ++t) kr[t] = kd.data() + t * n;
            for (int64_t nq = 1; nq <= 4; ++nq) {
                for (int64_t nk = 1; nk <= max_rows; ++nk) {
                    const int64_t os = max_rows + 1;
                    std::vector<float> out(4 * os, 55.0f);
                    f.qk_block(n, q, nq, kr, nk, out.data(), os);
                    for (int64_t r = 0; r < 4; ++r) {
                        for (int64_t t = 0; t < os; ++t) {
                            if (r >= nq || t >= nk) {
                                ASSERT_EQ(out[r * os + t], 55.0f) << "qk_block wrote outside nq x nk";
                                continue;
                            }
                            double e = 0, b = 0;
                            for (int64_t i = 0; i < n; ++i) {
                                e += (double) q[r][i] * kr[t][i];
                                b += std::fabs((double) q[r][i] * kr[t][i]);
                            }
                            ASSERT_NEAR(out[r * os + t], e, 1e-6 * b + 1e-7) << "qk n=" << n << " nq=" << nq << " nk=" << nk;
                        }
                    }
                    // pv: y[r] += sum_t p[r][t] * v[t] on nk value rows
                    const int64_t ps = max_rows + 2;
                    const std::vector<float> pd = kiln_test::random_floats(4 * ps, (uint32_t) (n * 16 + nk), 0.0f, 1.0f);
                    std::vector<float> yd = kiln_test::random_floats(4 * (n + 1), (uint32_t) (n * 16 + nq), -1.0f, 1.0f);
                    const std::vector<float> y0 = yd;
                    float * y[4] = { yd.data(), yd.data() + (n + 1), yd.data() + 2 * (n + 1), yd.data() + 3 * (n + 1) };
                    f.pv_block(n, y, pd.data(), ps, nq, kr, nk);
                    for (int64_t r = 0; r < 4; ++r) {
                        for (int64_t i = 0; i <= n; ++i) {
                            const float before = y0[r * (n + 1) + i];
                            if (r >= nq || i == n) {
                                ASSERT_EQ(y[r][i], before) << "pv_block wrote outside ny rows of n";
                                continue;
                            }
                            double e = before, b = std::fabs(before);
                            for (int64_t t = 0; t < nk; ++t) {
                                e += (double) pd[r * ps + t] * kr[t][i];
                                b += std::fabs((double) pd[r * ps + t] * kr[t][i]);
                            }
                            ASSERT_NEAR(y[r][i], e, 1e-6 * b + 1e-7) << "pv n=" << n << " ny=" << nq << " nt=" << nk;
                        }
                    }
                }
            }
        }
        ++checked;
        std::printf("[ vec      ] qk_block / pv_block %s\n", ggml_cpu_isa_name(isa));
    }
    if (checked == 0) GTEST_SKIP() << "no level of this CPU has the blocked attention forms";
}

} // namespace
