// Matrix products (mul_mat, mul_mat_id, fused MoE gate/up) against a double-precision reference,
// for f32/f16/bf16 weights, awkward shapes, broadcasting, non-contiguous activations, 1 and 2
// threads, and every instruction-set level the CPU has.
#include "cpu-fusion.h"
#include "cpu-traits.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "testing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct ctx_guard {
    ggml_context * ctx;
    explicit ctx_guard(size_t mem) { ctx = ggml_init({ mem, nullptr, false }); }
    ~ctx_guard() { ggml_free(ctx); }
};

void fill(ggml_tensor * t, uint32_t seed) {
    const int64_t n = ggml_nelements(t);
    std::vector<float> v = kiln_test::random_floats(n, seed);
    // write through the tensor's type, row by row with its strides (tensors here are contiguous)
    for (int64_t i = 0; i < n; ++i) {
        switch (t->type) {
            case GGML_TYPE_F32: ((float *) t->data)[i] = v[i]; break;
            case GGML_TYPE_F16: ((uint16_t *) t->data)[i] = ggml_fp32_to_fp16(v[i]); break;
            case GGML_TYPE_BF16: ((uint16_t *) t->data)[i] = ggml_fp32_to_bf16(v[i]); break;
            default: FAIL();
        }
    }
}

double value_at(const ggml_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const char * p = (const char *) t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
    switch (t->type) {
        case GGML_TYPE_F32: return *(const float *) p;
        case GGML_TYPE_F16: return ggml_fp16_to_fp32(*(const uint16_t *) p);
        case GGML_TYPE_BF16: return ggml_bf16_to_fp32(*(const uint16_t *) p);
        default: return NAN;
    }
}

// activations rounded like the kernel rounds them (bf16 weights take bf16 activations; f16 and f32 weights f32)
double act_rounded(ggml_type wtype, double x) {
    if (wtype == GGML_TYPE_BF16) return ggml_bf16_to_fp32(ggml_fp32_to_bf16((float) x));
    return x;
}

ggml_status run(ggml_context * ctx, ggml_tensor * out, int n_threads) {
    ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, out);
    return ggml_graph_compute_cpu(g, n_threads);
}

struct mm_case {
    ggml_type type;
    int64_t K, M, N, a2, a3, b2, b3;
    bool transpose_b;   // activations as a transposed (non-contiguous) view
};

// The levels this build's architecture has: another architecture's can never run here, so they
// are not tests of this build (a level this CPU lacks is, and says so when it skips).
std::vector<int> isas_of_this_architecture() {
#if defined(__x86_64__) || defined(__i386__)
    return { (int) GGML_CPU_ISA_SCALAR, (int) GGML_CPU_ISA_AVX2, (int) GGML_CPU_ISA_AVX512 };
#elif defined(__aarch64__)
    return { (int) GGML_CPU_ISA_SCALAR, (int) GGML_CPU_ISA_NEON, (int) GGML_CPU_ISA_NEON_DOTPROD, (int) GGML_CPU_ISA_NEON_I8MM };
#else
    return { (int) GGML_CPU_ISA_SCALAR };
#endif
}

class MatMul : public ::testing::TestWithParam<std::tuple<ggml_type, int, int>> {};

TEST_P(MatMul, MatchesDoubleReference) {
    const auto [type, n_threads, isa] = GetParam();
    if (!ggml_cpu_isa_runs_here((ggml_cpu_isa) isa)) {
        GTEST_SKIP() << ggml_cpu_isa_name((ggml_cpu_isa) isa) << " is not available on this CPU";
    }
    ggml_cpu_set_isa((ggml_cpu_isa) isa);

    const mm_case cases[] = {
        { type, 1, 1, 1, 1, 1, 1, 1, false },
        { type, 17, 5, 3, 1, 1, 1, 1, false },
        { type, 64, 33, 7, 1, 1, 1, 1, false },
        { type, 130, 67, 1, 1, 1, 1, 1, false },
        { type, 256, 19, 70, 1, 1, 1, 1, false },
        { type, 48, 9, 5, 2, 1, 6, 2, false },     // broadcast a over b's dims 2 and 3
        { type, 40, 12, 11, 1, 1, 1, 1, true },    // transposed activations
    };
    for (const auto & c : cases) {
        ctx_guard g(64 * 1024 * 1024);
        ggml_tensor * a = ggml_new_tensor_4d(g.ctx, c.type, c.K, c.M, c.a2, c.a3);
        ggml_tensor * b;
        if (c.transpose_b) {
            ggml_tensor * bt = ggml_new_tensor_4d(g.ctx, GGML_TYPE_F32, c.N, c.K, c.b2, c.b3);
            fill(bt, 7);
            b = ggml_transpose(g.ctx, bt);
        } else {
            b = ggml_new_tensor_4d(g.ctx, GGML_TYPE_F32, c.K, c.N, c.b2, c.b3);
            fill(b, 7);
        }
        fill(a, 3);
        ggml_tensor * out = ggml_mul_mat(g.ctx, a, b);
        ASSERT_EQ(run(g.ctx, out, n_threads), GGML_STATUS_SUCCESS);

        double max_err = 0;
        for (int64_t i3 = 0; i3 < c.b3; ++i3)
            for (int64_t i2 = 0; i2 < c.b2; ++i2)
                for (int64_t n = 0; n < c.N; ++n)
                    for (int64_t m = 0; m < c.M; ++m) {
                        double ref = 0, mag = 0;
                        for (int64_t k = 0; k < c.K; ++k) {
                            const double av = value_at(a, k, m, i2 / (c.b2 / c.a2), i3 / (c.b3 / c.a3));
                            const double bv = act_rounded(c.type, value_at(b, k, n, i2, i3));
                            ref += av * bv;
                            mag += std::fabs(av * bv);
                        }
                        const double got = value_at(out, m, n, i2, i3);
                        max_err = std::max(max_err, std::fabs(got - ref) / (mag + 1e-30));
                    }
        EXPECT_LT(max_err, 1e-5) << ggml_type_name(c.type) << " K=" << c.K << " M=" << c.M << " N=" << c.N
                                 << " isa=" << ggml_cpu_isa_name((ggml_cpu_isa) isa) << " threads=" << n_threads;
    }
    ggml_cpu_set_isa(ggml_cpu_detected_isa());
}

INSTANTIATE_TEST_SUITE_P(Float, MatMul,
                         ::testing::Combine(::testing::Values(GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16),
                                            ::testing::Values(1, 2),
                                            ::testing::ValuesIn(isas_of_this_architecture())));

// Expert-routed products: every (slot, token) equals the plain product with the chosen expert,
// for token-generation sized batches (each thread plans alone) and prompt batches (the threads
// plan together), with awkward routings, and with a keep mask (smart expert reduction): dropped
// pairs are not computed and read 0.
enum class routing { mixed, one_set, single_token_expert };

struct moe_case {
    int n_threads;
    bool b_shared;    // one activation row per token (the up/gate input) or one per slot (down)
    int64_t n_tokens;
    routing route;
    bool keep;
    int64_t M = 23;   // rows per expert; tall experts (K = 256) span several stream units
};

class MatMulId : public ::testing::TestWithParam<moe_case> {};

// Distinct experts per token, from a fixed pattern.
std::vector<int32_t> route_tokens(routing r, int64_t n_expert, int64_t n_used, int64_t n_tokens) {
    std::vector<int32_t> ids((size_t) (n_used * n_tokens));
    for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t i = 0; i < n_used; ++i) {
            int64_t e = 0;
            switch (r) {
                case routing::mixed: e = (t * 5 + i * (1 + t % 3)) % 4; break;            // experts 0-3 only, any order
                case routing::one_set: e = n_used - 1 - i; break;                       // every token on the same experts
                case routing::single_token_expert:                                       // expert 5 has exactly one token
                    e = (t == n_tokens / 2 && i == 1) ? 5 : (t + i) % 3; break;
            }
            ids[(size_t) (t * n_used + i)] = (int32_t) e;
        }
        // mixed may repeat an expert within a token: make the token's choices distinct
        for (int64_t i = 1; i < n_used; ++i) {
            for (int64_t j = 0; j < i; ++j) {
                if (ids[(size_t) (t * n_used + i)] == ids[(size_t) (t * n_used + j)]) {
                    ids[(size_t) (t * n_used + i)] = (int32_t) ((ids[(size_t) (t * n_used + i)] + 1) % n_expert);
                    j = -1;
                }
            }
        }
    }
    return ids;
}

TEST_P(MatMulId, MatchesPerTokenProducts) {
    const moe_case c = GetParam();
    const int64_t M = c.M, K = M > 100 ? 256 : 37, n_expert = 6, n_used = 3, n_tokens = c.n_tokens;
    const int64_t n_b = c.b_shared ? 1 : n_used;
    ctx_guard g(64 * 1024 * 1024);
    ggml_tensor * as = ggml_new_tensor_3d(g.ctx, GGML_TYPE_F32, K, M, n_expert);
    ggml_tensor * gate = ggml_new_tensor_3d(g.ctx, GGML_TYPE_F32, K, M, n_expert);
    ggml_tensor * b = ggml_new_tensor_3d(g.ctx, GGML_TYPE_F32, K, n_b, n_tokens);
    ggml_tensor * ids = ggml_new_tensor_2d(g.ctx, GGML_TYPE_I32, n_used, n_tokens);
    ggml_tensor * keep = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, n_used, n_tokens);
    fill(as, 11);
    fill(gate, 12);
    fill(b, 13);
    const std::vector<int32_t> choice = route_tokens(c.route, n_expert, n_used, n_tokens);
    std::memcpy(ids->data, choice.data(), choice.size() * sizeof(int32_t));
    // drop: every pair of token 1, the last slot of odd tokens (so an expert can lose all its tokens)
    auto kept = [&](int64_t i, int64_t t) { return !c.keep || !(t == 1 || (t % 2 == 1 && i == n_used - 1)); };
    for (int64_t t = 0; t < n_tokens; ++t)
        for (int64_t i = 0; i < n_used; ++i) ((float *) keep->data)[t * n_used + i] = kept(i, t) ? 1.0f : 0.0f;

    ggml_tensor * out = ggml_mul_mat_id(g.ctx, as, b, ids);
    ggml_tensor * fused = ggml_moe_up_gate(g.ctx, as, gate, b, ids, GGML_GLU_OP_SWIGLU);
    if (c.keep) {
        ggml_mul_mat_id_set_keep(out, keep);
        ggml_mul_mat_id_set_keep(fused, keep);
    }
    // results of a previous run must not survive in dropped rows
    std::memset(out->data, 0x7f, ggml_nbytes(out));
    std::memset(fused->data, 0x7f, ggml_nbytes(fused));
    ASSERT_EQ(run(g.ctx, out, c.n_threads), GGML_STATUS_SUCCESS);
    ASSERT_EQ(run(g.ctx, fused, c.n_threads), GGML_STATUS_SUCCESS);

    for (int64_t t = 0; t < n_tokens; ++t)
        for (int64_t i = 0; i < n_used; ++i) {
            const int e = choice[(size_t) (t * n_used + i)];
            for (int64_t m = 0; m < M; ++m) {
                double up = 0, gt = 0;
                for (int64_t k = 0; k < K; ++k) {
                    const double bv = value_at(b, k, i % n_b, t, 0);
                    up += value_at(as, k, m, e, 0) * bv;
                    gt += value_at(gate, k, m, e, 0) * bv;
                }
                const double silu = gt / (1 + std::exp(-gt));
                if (!kept(i, t)) {
                    up = 0;
                    gt = 0;
                    ASSERT_EQ(value_at(out, m, i, t, 0), 0.0) << "dropped pair " << i << "," << t;
                    ASSERT_EQ(value_at(fused, m, i, t, 0), 0.0) << "dropped pair " << i << "," << t;
                    continue;
                }
                EXPECT_NEAR(value_at(out, m, i, t, 0), up, 1e-4);
                EXPECT_NEAR(value_at(fused, m, i, t, 0), silu * up, 1e-4);
            }
        }
}

std::vector<moe_case> moe_cases() {
    std::vector<moe_case> v;
    for (int n_threads : { 1, 2, 3 })
        for (bool shared : { false, true })
            for (int64_t n_tokens : { 1, 3, 9, 40 })
                for (routing r : { routing::mixed, routing::one_set, routing::single_token_expert })
                    for (bool keep : { false, true }) v.push_back({ n_threads, shared, n_tokens, r, keep });
    // token generation through experts of 300 rows of 1 KB: several guided chunks and row tiles each
    for (int n_threads : { 1, 2, 3 })
        for (bool shared : { false, true }) {
            v.push_back({ n_threads, shared, 1, routing::one_set, false, 300 });
            v.push_back({ n_threads, shared, 3, routing::mixed, true, 300 });
        }
    return v;
}

INSTANTIATE_TEST_SUITE_P(Experts, MatMulId, ::testing::ValuesIn(moe_cases()), [](const auto & info) {
    const moe_case & c = info.param;
    const char * r = c.route == routing::mixed ? "mixed" : c.route == routing::one_set ? "oneset" : "single";
    // appended piece by piece: GCC 12 warns falsely (-Wrestrict) on "literal" + std::string
    std::string name = "t";
    name += std::to_string(c.n_threads);
    name += c.b_shared ? "_shared_n" : "_perslot_n";
    name += std::to_string(c.n_tokens);
    name += "_";
    name += r;
    if (c.keep) name += "_keep";
    if (c.M > 100) name += "_tall";
    return name;
});

// The end of a MoE layer: the experts' outputs times their weights, summed over the slots
// (mul, then k - 1 adds of the slot views). The CPU runs the chain as one op (cpu-fusion.h),
// and the result is bit for bit the unfused ops' (same roundings, same order), for 1 to 3
// threads, token-generation and batch sizes, 2 to 8 slots, at every ISA level; also with the
// result placed over the weights, as the allocator places it in the qwen3moe graph.
struct weighted_sum_graph {
    ggml_tensor * e, * w, * m, * out;
};

weighted_sum_graph build_weighted_sum(ggml_context * ctx, int64_t n, int64_t k, int64_t T) {
    weighted_sum_graph g;
    g.e = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, n, k, T);
    g.w = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 1, k, T);
    fill(g.e, 31);
    fill(g.w, 32);
    g.m = ggml_mul(ctx, g.e, g.w);
    g.out = nullptr;
    for (int64_t i = 0; i < k; ++i) {
        ggml_tensor * v = ggml_view_2d(ctx, g.m, n, T, g.m->nb[2], i * g.m->nb[1]);
        g.out = g.out ? ggml_add(ctx, g.out, v) : v;
    }
    return g;
}

int count_fused(ggml_cgraph * graph, ggml_cpu_fusion_kind kind = GGML_CPU_FUSION_WEIGHTED_SUM) {
    std::vector<ggml_cpu_plan_op> ops;
    ggml_cpu_fuse_graph(graph, ops);
    int n = 0;
    for (const auto & op : ops) n += op.fusion.kind == kind;
    return n;
}

TEST(Fusion, WeightedSumOfExpertsIsOneOpAndExact) {
    for (int isa : isas_of_this_architecture()) {
        if (!ggml_cpu_isa_runs_here((ggml_cpu_isa) isa)) continue;   // MatMul reports the lacking levels
        ggml_cpu_set_isa((ggml_cpu_isa) isa);
        for (int64_t k : { 2, 3, 8 })
            for (int64_t T : { 1, 5, 40 })
                for (int n_threads : { 1, 2, 3 })
                    for (bool over_w : { false, true }) {
                        const int64_t n = 37;
                        ctx_guard c(16 * 1024 * 1024);
                        const weighted_sum_graph g = build_weighted_sum(c.ctx, n, k, T);
                        const std::vector<float> wv((const float *) g.w->data, (const float *) g.w->data + k * T);
                        if (over_w) {   // w at the start of the result's memory
                            ggml_tensor * arena = ggml_new_tensor_1d(c.ctx, GGML_TYPE_F32, std::max(n * T, k * T));
                            std::memcpy(arena->data, wv.data(), wv.size() * sizeof(float));
                            g.w->data = arena->data;
                            g.out->data = arena->data;
                        }
                        ggml_cgraph * graph = ggml_new_graph(c.ctx);
                        ggml_build_forward_expand(graph, g.out);
                        ASSERT_EQ(count_fused(graph), 1) << "k=" << k << " T=" << T;
                        ASSERT_EQ(ggml_graph_compute_cpu(graph, n_threads), GGML_STATUS_SUCCESS);
                        for (int64_t t = 0; t < T; ++t)
                            for (int64_t j = 0; j < n; ++j) {
                                float y = 0.0f;
                                for (int64_t i = 0; i < k; ++i) {
                                    const float p = (float) value_at(g.e, j, i, t, 0) * wv[(size_t) (t * k + i)];
                                    y = i == 0 ? p : y + p;
                                }
                                ASSERT_EQ((float) value_at(g.out, j, t, 0, 0), y)
                                    << "k=" << k << " T=" << T << " threads=" << n_threads << " over_w=" << over_w
                                    << " isa=" << ggml_cpu_isa_name((ggml_cpu_isa) isa);
                            }
                    }
    }
    ggml_cpu_set_isa(ggml_cpu_detected_isa());
}

// An intermediate result that something else reads, or that the graph outputs, keeps the
// chain unfused (and the values right).
TEST(Fusion, WeightedSumStaysUnfusedWhenItsPartsAreUsed) {
    const int64_t n = 19, k = 4, T = 3;
    for (int variant = 0; variant < 3; ++variant) {
        ctx_guard c(16 * 1024 * 1024);
        const weighted_sum_graph g = build_weighted_sum(c.ctx, n, k, T);
        ggml_cgraph * graph = ggml_new_graph(c.ctx);
        ggml_tensor * other = nullptr;
        if (variant == 0) ggml_set_output(g.m);                     // the weighted rows are an output
        if (variant == 1) other = ggml_scale(c.ctx, g.out->src[0], 2.0f);   // a partial sum read elsewhere
        if (variant == 2) other = ggml_scale(c.ctx, g.m, 2.0f);     // the weighted rows read elsewhere
        ggml_build_forward_expand(graph, g.out);
        if (other) ggml_build_forward_expand(graph, other);
        EXPECT_EQ(count_fused(graph), 0) << "variant " << variant;
        ASSERT_EQ(ggml_graph_compute_cpu(graph, 2), GGML_STATUS_SUCCESS);
        for (int64_t t = 0; t < T; ++t)
            for (int64_t j = 0; j < n; ++j) {
                double y = 0;
                for (int64_t i = 0; i < k; ++i) y += value_at(g.e, j, i, t, 0) * value_at(g.w, 0, i, t, 0);
                EXPECT_NEAR(value_at(g.out, j, t, 0, 0), y, 1e-5) << "variant " << variant;
            }
    }
}

// rms_norm times its weight row runs as one op with the unfused ops' values, bit for bit, over
// 3-d rows (the q/k norms' shape), 1 to 3 threads, every ISA level, also written in place over
// its input; kept apart when the normalised rows are read elsewhere.
TEST(Fusion, RmsNormTimesWeightIsOneOpAndExact) {
    const int64_t n = 37, rows = 5, planes = 3;
    for (int isa : isas_of_this_architecture()) {
        if (!ggml_cpu_isa_runs_here((ggml_cpu_isa) isa)) continue;   // MatMul reports the lacking levels
        ggml_cpu_set_isa((ggml_cpu_isa) isa);
        for (int n_threads : { 1, 2, 3 })
            for (bool in_place : { false, true }) {
                ctx_guard c(16 * 1024 * 1024);
                ggml_tensor * x = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F32, n, rows, planes);
                ggml_tensor * w = ggml_new_tensor_1d(c.ctx, GGML_TYPE_F32, n);
                fill(x, 41);
                fill(w, 42);
                // unfused: the normalised rows are an output too
                ggml_tensor * r1 = ggml_rms_norm(c.ctx, x, 1e-6f);
                ggml_tensor * ref = ggml_mul(c.ctx, r1, w);
                ggml_set_output(r1);
                ggml_cgraph * g1 = ggml_new_graph(c.ctx);
                ggml_build_forward_expand(g1, ref);
                ASSERT_EQ(count_fused(g1, GGML_CPU_FUSION_RMS_NORM_MUL), 0);
                ASSERT_EQ(ggml_graph_compute_cpu(g1, n_threads), GGML_STATUS_SUCCESS);

                ggml_tensor * out = ggml_mul(c.ctx, ggml_rms_norm(c.ctx, x, 1e-6f), w);
                if (in_place) out->data = x->data;
                ggml_cgraph * g2 = ggml_new_graph(c.ctx);
                ggml_build_forward_expand(g2, out);
                ASSERT_EQ(count_fused(g2, GGML_CPU_FUSION_RMS_NORM_MUL), 1);
                ASSERT_EQ(ggml_graph_compute_cpu(g2, n_threads), GGML_STATUS_SUCCESS);
                ASSERT_EQ(std::memcmp(out->data, ref->data, ggml_nbytes(ref)), 0)
                    << "threads=" << n_threads << " in_place=" << in_place << " isa=" << ggml_cpu_isa_name((ggml_cpu_isa) isa);
            }
    }
    ggml_cpu_set_isa(ggml_cpu_detected_isa());
}

// The planner reuses memory: a chain of products needs far less than the sum of its nodes.
TEST(Allocator, ReusesIntermediateMemory) {
    ggml_context * wctx = ggml_init({ 16 * 1024 * 1024, nullptr, false });
    ggml_tensor * w = ggml_new_tensor_2d(wctx, GGML_TYPE_F32, 256, 256);
    fill(w, 5);
    ggml_context * ctx = ggml_init({ 1024 * 1024, nullptr, true });
    ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 256, 64);
    ggml_set_input(x);
    ggml_tensor * cur = x;
    for (int i = 0; i < 10; ++i) cur = ggml_mul_mat(ctx, w, cur);
    ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, cur);
    ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    ASSERT_TRUE(ggml_gallocr_alloc_graph(ga, g));
    const size_t one = 256 * 64 * sizeof(float);
    EXPECT_LE(ggml_gallocr_get_buffer_size(ga), 4 * one);   // input + two live intermediates (+ output)
    std::vector<float> xv = kiln_test::random_floats(256 * 64, 9, -0.1f, 0.1f);
    ggml_backend_tensor_set(x, xv.data(), 0, xv.size() * sizeof(float));
    ASSERT_EQ(ggml_graph_compute_cpu(g, 2), GGML_STATUS_SUCCESS);
    // first column through ten products in double
    std::vector<double> v(xv.begin(), xv.begin() + 256), nv(256);
    for (int i = 0; i < 10; ++i) {
        for (int m = 0; m < 256; ++m) {
            double s = 0;
            for (int k = 0; k < 256; ++k) s += value_at(w, k, m, 0, 0) * v[k];
            nv[m] = s;
        }
        v = nv;
    }
    for (int m = 0; m < 256; ++m) EXPECT_NEAR(value_at(cur, m, 0, 0, 0), v[m], 1e-3 * (std::fabs(v[m]) + 1e-3));
    ggml_gallocr_free(ga);
    ggml_free(ctx);
    ggml_free(wctx);
}

// The thread pool runs nodes without a barrier between them, each as soon as what it depends on
// is complete (cpu-graph-plan.h). A graph planned by the allocator (later nodes reuse earlier
// nodes' memory), with side branches, scratch-using ops, batch and single-column products,
// gives the same values with 2 to 4 threads (more threads than this machine may have cores,
// so threads get descheduled mid-graph) as with 1, run after run.
TEST(ThreadPool, GraphWithoutBarriersMatchesOneThread) {
    const int64_t D = 96, T = 33;
    ggml_context * wctx = ggml_init({ 8 * 1024 * 1024, nullptr, false });
    ggml_tensor * w1 = ggml_new_tensor_2d(wctx, GGML_TYPE_F32, D, D);
    ggml_tensor * w2 = ggml_new_tensor_2d(wctx, GGML_TYPE_F16, D, D);
    ggml_tensor * wn = ggml_new_tensor_1d(wctx, GGML_TYPE_F32, D);
    fill(w1, 21);
    fill(w2, 22);
    fill(wn, 23);
    ggml_context * ctx = ggml_init({ 4 * 1024 * 1024, nullptr, true });
    ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, D, T);
    ggml_set_input(x);
    ggml_tensor * cur = x;
    for (int layer = 0; layer < 6; ++layer) {
        ggml_tensor * n = ggml_mul(ctx, ggml_rms_norm(ctx, cur, 1e-6f), wn);
        ggml_tensor * a = ggml_soft_max(ctx, ggml_mul_mat(ctx, w1, n));   // batch product, then scratch rows
        ggml_tensor * b = ggml_mul_mat(ctx, w2, n);                       // side branch from the same input
        ggml_tensor * col = ggml_mul_mat(ctx, w1, ggml_view_2d(ctx, n, D, 1, n->nb[1], 0));   // one column
        cur = ggml_add(ctx, ggml_add(ctx, cur, ggml_mul(ctx, a, b)), ggml_scale(ctx, col, 0.5f));   // col broadcasts
    }
    ggml_set_output(cur);
    ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, cur);
    ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    ASSERT_TRUE(ggml_gallocr_alloc_graph(ga, g));
    const std::vector<float> xv = kiln_test::random_floats(D * T, 24);
    // one backend per thread count: its pool runs the graph again and again, as in decoding
    auto compute = [&](ggml_backend_t be) {
        ggml_backend_tensor_set(x, xv.data(), 0, xv.size() * sizeof(float));
        EXPECT_EQ(ggml_backend_graph_compute(be, g), GGML_STATUS_SUCCESS);
        std::vector<float> out((size_t) (D * T));
        ggml_backend_tensor_get(cur, out.data(), 0, out.size() * sizeof(float));
        return out;
    };
    ggml_backend_t be1 = ggml_backend_cpu_init();
    const std::vector<float> one = compute(be1);
    ggml_backend_free(be1);
    for (int n_threads : { 2, 3, 4 }) {
        ggml_backend_t be = ggml_backend_cpu_init();
        ggml_backend_cpu_set_n_threads(be, n_threads);
        for (int run_i = 0; run_i < 8; ++run_i) {
            const std::vector<float> many = compute(be);
            for (size_t i = 0; i < one.size(); ++i) {
                ASSERT_NEAR(many[i], one[i], 1e-5 * std::fabs(one[i]) + 1e-6) << n_threads << " threads, run " << run_i << ", value " << i;
            }
        }
        ggml_backend_free(be);
    }
    ggml_gallocr_free(ga);
    ggml_free(ctx);
    ggml_free(wctx);
}

// The scheduler runs a CPU-only graph with weights in a WEIGHTS buffer, repeatedly, without growing.
TEST(Scheduler, RunsGraphsAndKeepsItsBuffer) {
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(cpu, 2);
    ggml_context * wctx = ggml_init({ ggml_tensor_overhead() * 4, nullptr, true });
    ggml_tensor * w = ggml_new_tensor_2d(wctx, GGML_TYPE_F16, 64, 32);
    ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors(wctx, cpu);
    ggml_backend_buffer_set_usage(wbuf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    std::vector<uint16_t> wv(64 * 32);
    for (size_t i = 0; i < wv.size(); ++i) wv[i] = ggml_fp32_to_fp16((float) ((i * 7) % 13) / 13.0f - 0.5f);
    ggml_backend_tensor_set(w, wv.data(), 0, wv.size() * 2);

    ggml_backend_sched_t sched = ggml_backend_sched_new(&cpu, 1, 256);
    size_t first_size = 0;
    for (int iter = 0; iter < 3; ++iter) {
        ggml_context * ctx = ggml_init({ ggml_tensor_overhead() * 16 + ggml_graph_overhead(), nullptr, true });
        ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 64, 5);
        ggml_set_input(x);
        ggml_tensor * y = ggml_mul_mat(ctx, w, x);
        ggml_cgraph * g = ggml_new_graph(ctx);
        ggml_build_forward_expand(g, y);
        ggml_backend_sched_reset(sched);
        ASSERT_TRUE(ggml_backend_sched_alloc_graph(sched, g));
        std::vector<float> xv(64 * 5, 0.25f);
        ggml_backend_tensor_set(x, xv.data(), 0, xv.size() * 4);
        ASSERT_EQ(ggml_backend_sched_graph_compute(sched, g), GGML_STATUS_SUCCESS);
        EXPECT_EQ(ggml_backend_sched_get_n_splits(sched), 1);
        std::vector<float> yv(32 * 5);
        ggml_backend_tensor_get(y, yv.data(), 0, yv.size() * 4);
        for (int m = 0; m < 32; ++m) {
            double s = 0;
            for (int k = 0; k < 64; ++k) s += ggml_fp16_to_fp32(wv[m * 64 + k]) * 0.25;
            EXPECT_NEAR(yv[m], s, 1e-3);
        }
        const size_t sz = ggml_backend_sched_get_buffer_size(sched, cpu);
        if (iter == 0) first_size = sz; else EXPECT_EQ(sz, first_size);
        ggml_free(ctx);
    }
    ggml_backend_sched_free(sched);
    ggml_backend_buffer_free(wbuf);
    ggml_free(wctx);
    ggml_backend_free(cpu);
}

// A dense quantized batch product keeps the activations it packed for the panel across its own
// chunks (cpu-traits.h, ggml_cpu_act_reuse), never beyond. Two products of one type, shape and
// column count in a graph, the second on the first's result: both convert their activations into
// the same scratch, so only the product token tells them apart. Each must equal, bit for bit, the
// type's batch kernel called once on all rows (no reuse there), with 1 and 2 threads: 300 rows
// are 5-10 chunks of 32-64 rows, and 20 columns two whole tiles of 8 and a tail.
TEST(MatMulQuant, PackedActivationsStayWithinTheirProduct) {
    const int64_t K = 512, M = 300, N = 20;
    for (int isa : isas_of_this_architecture()) {
        if (!ggml_cpu_isa_runs_here((ggml_cpu_isa) isa)) continue;   // MatMul reports the lacking levels
        ggml_cpu_set_isa((ggml_cpu_isa) isa);
        for (ggml_type type : { GGML_TYPE_IQ4_XS, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K }) {
            const ggml_cpu_gemm_choice choice = ggml_cpu_gemm_for(type, true);
            const ggml_from_float_t enc = ggml_cpu_from_float(choice.act_type);
            ASSERT_TRUE(choice.gemm && enc) << ggml_type_name(type);
            for (int n_threads : { 1, 2 }) {
                ctx_guard c(16 * 1024 * 1024);
                ggml_tensor * w1 = ggml_new_tensor_2d(c.ctx, type, K, K);
                ggml_tensor * w2 = ggml_new_tensor_2d(c.ctx, type, K, M);
                ggml_tensor * x = ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, K, N);
                for (ggml_tensor * w : { w1, w2 }) {
                    const std::vector<float> f = kiln_test::random_floats(ggml_nelements(w), 77 + (uint32_t) w->ne[1]);
                    ggml_quantize_chunk(type, f.data(), w->data, 0, w->ne[1], K, nullptr);
                }
                const std::vector<float> xf = kiln_test::random_floats(K * N, 78);
                std::memcpy(x->data, xf.data(), xf.size() * sizeof(float));
                ggml_tensor * y1 = ggml_mul_mat(c.ctx, w1, x);
                ggml_tensor * y2 = ggml_mul_mat(c.ctx, w2, y1);
                ggml_cgraph * graph = ggml_new_graph(c.ctx);
                ggml_build_forward_expand(graph, y2);
                ASSERT_EQ(ggml_graph_compute_cpu(graph, n_threads), GGML_STATUS_SUCCESS);
                // the kernel on all rows at once, on the activations each product saw
                const size_t xs = ggml_row_size(choice.act_type, K);
                std::vector<uint8_t> xq(xs * N);
                std::vector<float> want;
                for (const ggml_tensor * y : { y1, y2 }) {
                    const ggml_tensor * w = y->src[0];
                    const ggml_tensor * in = y->src[1];
                    for (int64_t col = 0; col < N; ++col) enc((const float *) in->data + col * K, xq.data() + col * xs, K);
                    want.assign(w->ne[1] * N, NAN);
                    choice.gemm(K, w->data, w->nb[1], xq.data(), xs, want.data(), w->ne[1], (int) w->ne[1], (int) N);
                    for (int64_t col = 0; col < N; ++col)
                        for (int64_t r = 0; r < w->ne[1]; ++r)
                            ASSERT_EQ(((const float *) y->data)[col * w->ne[1] + r], want[col * w->ne[1] + r])
                                << ggml_type_name(type) << " " << (y == y1 ? "first" : "second") << " product, row " << r
                                << " column " << col << ", threads " << n_threads << ", isa "
                                << ggml_cpu_isa_name((ggml_cpu_isa) isa);
                }
            }
        }
    }
    ggml_cpu_set_isa(ggml_cpu_detected_isa());
}

// Exact products (ggml_cpu_set_exact_products): every output is the double sum of the decoded
// weight row times the unrounded f32 activations, rounded once to float, at every ISA level, for
// token generation (1 column), batches (13 columns: the batch activation path otherwise) and the
// expert-routed product; interleaved layouts keep their kernels. The plain kernels of the same
// weights miss that sum by their activation rounding (~1e-3 here), which shows the switch took.
TEST(MatMulExact, DecodedWeightsTimesUnroundedActivations) {
    const int64_t K = 512, M = 37, n_expert = 3, n_used = 2;
    struct exact_guard { ~exact_guard() { ggml_cpu_set_exact_products(false); } } restore;
    EXPECT_EQ(ggml_cpu_exact_gemm(GGML_TYPE_Q4_K_R4), nullptr);
    for (int isa : isas_of_this_architecture()) {
        if (!ggml_cpu_isa_runs_here((ggml_cpu_isa) isa)) continue;
        ggml_cpu_set_isa((ggml_cpu_isa) isa);
        for (ggml_type type : { GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_Q8_0, GGML_TYPE_Q5_0, GGML_TYPE_IQ4_XS, GGML_TYPE_F16 }) {
            for (int64_t N : { 1, 13 }) {
                ctx_guard c(16 * 1024 * 1024);
                ggml_tensor * w = ggml_new_tensor_3d(c.ctx, type, K, M, n_expert);
                const std::vector<float> wf = kiln_test::random_floats(K * M * n_expert, 91);
                ggml_quantize_chunk(type, wf.data(), w->data, 0, M * n_expert, K, nullptr);
                ggml_tensor * x = ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, K, N);
                std::vector<float> xf = kiln_test::random_floats(K * N, 92);
                for (int64_t i = 0; i < K * N; i += 97) xf[(size_t) i] *= 40;   // outliers coarsen a q8 rounding
                std::memcpy(x->data, xf.data(), xf.size() * sizeof(float));
                ggml_tensor * ids = ggml_new_tensor_2d(c.ctx, GGML_TYPE_I32, n_used, N);
                for (int64_t t = 0; t < N; ++t)
                    for (int64_t i = 0; i < n_used; ++i) ((int32_t *) ids->data)[t * n_used + i] = (int32_t) ((t + 2 * i) % n_expert);
                ggml_tensor * x3 = ggml_reshape_3d(c.ctx, x, K, 1, N);
                // decoded rows and the exact sums
                std::vector<float> dq((size_t) (K * M * n_expert));
                ggml_get_type_traits(type)->to_float(w->data, dq.data(), K * M * n_expert);
                auto exact = [&](int64_t e, int64_t m, int64_t col) {
                    double s = 0;
                    for (int64_t k = 0; k < K; ++k) s += (double) dq[(size_t) ((e * M + m) * K + k)] * xf[(size_t) (col * K + k)];
                    return (float) s;
                };
                for (bool on : { true, false }) {
                    ggml_cpu_set_exact_products(on);
                    ggml_tensor * w0 = ggml_view_2d(c.ctx, w, K, M, w->nb[1], 0);
                    ggml_tensor * y = ggml_mul_mat(c.ctx, w0, x);
                    ggml_tensor * yid = ggml_mul_mat_id(c.ctx, w, x3, ids);
                    ASSERT_EQ(run(c.ctx, y, 2), GGML_STATUS_SUCCESS);
                    ASSERT_EQ(run(c.ctx, yid, 2), GGML_STATUS_SUCCESS);
                    double worst = 0;
                    for (int64_t col = 0; col < N; ++col) {
                        for (int64_t m = 0; m < M; ++m) {
                            const float want = exact(0, m, col);
                            const float got = ((const float *) y->data)[col * M + m];
                            const float want_id[2] = { exact((col) % n_expert, m, col), exact((col + 2) % n_expert, m, col) };
                            for (int64_t i = 0; i < n_used; ++i) {
                                const float g = ((const float *) ((const char *) yid->data + i * yid->nb[1] + col * yid->nb[2]))[m];
                                if (on) ASSERT_EQ(g, want_id[i]) << ggml_type_name(type) << " expert product, slot " << i;
                            }
                            if (on) ASSERT_EQ(got, want) << ggml_type_name(type) << " row " << m << " column " << col << " N " << N
                                                         << " isa " << ggml_cpu_isa_name((ggml_cpu_isa) isa);
                            worst = std::max(worst, (double) std::fabs(got - want) / (std::fabs(want) + 1));
                        }
                    }
                    // the kernels round the activations (f16 weights: to f16 at some levels)
                    if (!on && type != GGML_TYPE_F16) EXPECT_GT(worst, 1e-5) << ggml_type_name(type) << ": kernels equal the exact sums?";
                }
            }
        }
    }
    ggml_cpu_set_isa(ggml_cpu_detected_isa());
}

} // namespace

