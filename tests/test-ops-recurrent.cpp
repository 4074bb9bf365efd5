// The recurrent layers' ops (Qwen3.5 / qwen3next: the short convolution with a rolling state and
// the gated delta net in its recurrent and chunked forms) against double-precision references
// of the recurrences, for mixed batches of interleaved sequences, under every ISA level and
// thread count (ops-testing.h).
#include "ops-testing.h"

namespace {

using namespace ops_testing;

// ================================================================================ recurrent layers

// Token slots of a mixed batch: sequences interleave, each sequence's tokens in order.
std::vector<int32_t> interleaved_slots(int64_t n_tokens, int n_slots, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<int32_t> s(n_tokens);
    for (auto & v : s) v = (int32_t) (rng() % n_slots);
    return s;
}

ggml_tensor * slots_tensor(ggml_context * ctx, const std::vector<int32_t> & s) {
    ggml_tensor * t = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, (int64_t) s.size());
    std::memcpy(t->data, s.data(), s.size() * sizeof(int32_t));
    return t;
}

TEST_F(Ops, SsmConvWithRollingState) {
    uint32_t seed = 1100;
    for (int64_t d_conv : { 2, 4 }) {
        for (int64_t n_ch : { 1, 37, 130 }) {
            const int64_t n_tok = 13, n_slots = 3, n_win = d_conv - 1;
            // x as a slice of wider rows (the projection's other outputs beside it)
            ggml_tensor * wide = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n_ch + 5, n_tok);
            fill_random(wide, seed++);
            ggml_tensor * x = ggml_view_2d(ctx, wide, n_ch, n_tok, wide->nb[1], 2 * sizeof(float));
            ggml_tensor * w = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, d_conv, n_ch);
            fill_random(w, seed++);
            ggml_tensor * state = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n_win * n_ch, n_slots);
            fill_random(state, seed++);
            const std::vector<float> state0((float *) state->data, (float *) state->data + ggml_nelements(state));
            const std::vector<int32_t> sv = interleaved_slots(n_tok, 2, seed++);   // slot 2 untouched
            ggml_tensor * out = ggml_ssm_conv(ctx, x, w, state, slots_tensor(ctx, sv));

            ref_t want(n_ch * n_tok), want_state(state0.begin(), state0.end());
            for (int64_t t = 0; t < n_tok; ++t) {
                for (int64_t c = 0; c < n_ch; ++c) {
                    double * win = want_state.data() + sv[t] * n_win * n_ch + c * n_win;
                    double sum = get(w, n_win, c, 0, 0) * get(x, c, t, 0, 0);
                    for (int64_t j = 0; j < n_win; ++j) sum += get(w, j, c, 0, 0) * win[j];
                    want[t * n_ch + c] = sum;
                    for (int64_t j = 0; j + 1 < n_win; ++j) win[j] = win[j + 1];
                    win[n_win - 1] = get(x, c, t, 0, 0);
                }
            }
            SCOPED_TRACE("d_conv " + std::to_string(d_conv) + " channels " + std::to_string(n_ch));
            each_config(
                out,
                [&](const std::string &) {
                    EXPECT_TRUE(close_to(out, want, 1e-5, 1e-5));
                    EXPECT_TRUE(close_to(state, want_state, 0, 0)) << "state";
                },
                [&]() { std::memcpy(state->data, state0.data(), state0.size() * sizeof(float)); });
        }
    }
}

struct delta_case {
    int64_t d_k, d_v, n_kh, n_vh, n_tok;
    int n_slots;
};

// Inputs of a delta-net layer as the model makes them: q, k, v slices of one fused row per token
// (q and k L2-normalised), log-decays g <= 0 and betas in (0, 1).
struct delta_inputs {
    ggml_tensor * q, * k, * v, * g, * beta, * state;
    std::vector<int32_t> slots;
    std::vector<float> state0;
};

delta_inputs make_delta_inputs(ggml_context * ctx, const delta_case & c, uint32_t seed) {
    delta_inputs in;
    const int64_t row = 2 * c.d_k * c.n_kh + c.d_v * c.n_vh;
    ggml_tensor * fused = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, row, c.n_tok);
    fill_random(fused, seed);
    float * f = (float *) fused->data;
    for (int64_t t = 0; t < c.n_tok; ++t) {
        for (int64_t h = 0; h < 2 * c.n_kh; ++h) {   // q and k heads
            float * x = f + t * row + h * c.d_k;
            double n2 = 0;
            for (int64_t i = 0; i < c.d_k; ++i) n2 += (double) x[i] * x[i];
            for (int64_t i = 0; i < c.d_k; ++i) x[i] = (float) (x[i] / std::sqrt(n2));
        }
    }
    in.q = ggml_view_3d(ctx, fused, c.d_k, c.n_kh, c.n_tok, c.d_k * sizeof(float), fused->nb[1], 0);
    in.k = ggml_view_3d(ctx, fused, c.d_k, c.n_kh, c.n_tok, c.d_k * sizeof(float), fused->nb[1], c.d_k * c.n_kh * sizeof(float));
    in.v = ggml_view_3d(ctx, fused, c.d_v, c.n_vh, c.n_tok, c.d_v * sizeof(float), fused->nb[1],
                        2 * c.d_k * c.n_kh * sizeof(float));
    in.g = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, c.n_vh, c.n_tok);
    fill_random(in.g, seed + 1, -1.5, 0.0);
    in.beta = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, c.n_vh, c.n_tok);
    fill_random(in.beta, seed + 2, 0.05, 0.95);
    in.state = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, c.d_k * c.d_v * c.n_vh, c.n_slots + 1);
    fill_random(in.state, seed + 3, -0.5, 0.5);
    in.state0.assign((float *) in.state->data, (float *) in.state->data + ggml_nelements(in.state));
    in.slots = interleaved_slots(c.n_tok, c.n_slots, seed + 4);
    return in;
}

// The recurrence in double: outputs [d_v, n_vh, n_tok] and the final states.
void delta_ref(const delta_case & c, const delta_inputs & in, float scale, ref_t & out, ref_t & state) {
    out.assign(c.d_v * c.n_vh * c.n_tok, 0.0);
    state.assign(in.state0.begin(), in.state0.end());
    std::vector<double> kv(c.d_v), u(c.d_v);
    for (int64_t t = 0; t < c.n_tok; ++t) {
        for (int64_t h = 0; h < c.n_vh; ++h) {
            const int64_t kh = h % c.n_kh;
            double * S = state.data() + (in.slots[t] * c.n_vh + h) * c.d_k * c.d_v;
            const double decay = std::exp(get(in.g, h, t, 0, 0)), b = get(in.beta, h, t, 0, 0);
            for (int64_t i = 0; i < c.d_k * c.d_v; ++i) S[i] *= decay;
            for (int64_t j = 0; j < c.d_v; ++j) {
                double s = 0;
                for (int64_t i = 0; i < c.d_k; ++i) s += get(in.k, i, kh, t, 0) * S[i * c.d_v + j];
                u[j] = b * (get(in.v, j, h, t, 0) - s);
            }
            for (int64_t i = 0; i < c.d_k; ++i)
                for (int64_t j = 0; j < c.d_v; ++j) S[i * c.d_v + j] += get(in.k, i, kh, t, 0) * u[j];
            for (int64_t j = 0; j < c.d_v; ++j) {
                double o = 0;
                for (int64_t i = 0; i < c.d_k; ++i) o += get(in.q, i, kh, t, 0) * S[i * c.d_v + j];
                out[(t * c.n_vh + h) * c.d_v + j] = scale * o;
            }
        }
    }
}

// Both forms (token by token, and chunked with chunks shorter and longer than the runs of
// one sequence) against the double recurrence: outputs and the states left behind.
TEST_F(Ops, GatedDeltaNetBothFormsMatchRecurrence) {
    const delta_case cases[] = {
        { 16, 16, 1, 1, 9, 1 },  { 19, 23, 2, 4, 31, 2 },   { 32, 32, 2, 6, 70, 3 },
        { 128, 128, 2, 4, 11, 1 }, { 8, 5, 3, 3, 140, 1 },
    };
    uint32_t seed = 1200;
    for (const delta_case & c : cases) {
        delta_inputs in = make_delta_inputs(ctx, c, seed);
        seed += 10;
        const float scale = 1.0f / std::sqrt((float) c.d_k);
        ref_t want, want_state;
        delta_ref(c, in, scale, want, want_state);
        for (int chunk : { 0, 1, 4, 64 }) {
            ggml_tensor * out = ggml_gated_delta_net(ctx, in.q, in.k, in.v, in.g, in.beta, in.state, slots_tensor(ctx, in.slots),
                                                     scale, chunk);
            char name[128];
            std::snprintf(name, sizeof(name), "d_k %lld d_v %lld heads %lld/%lld tokens %lld slots %d chunk %d",
                          (long long) c.d_k, (long long) c.d_v, (long long) c.n_kh, (long long) c.n_vh, (long long) c.n_tok,
                          c.n_slots, chunk);
            SCOPED_TRACE(name);
            each_config(
                out,
                [&](const std::string &) {
                    EXPECT_TRUE(close_to(out, want, 2e-5, 2e-4));
                    EXPECT_TRUE(close_to(in.state, want_state, 2e-5, 2e-4)) << "state";
                },
                [&]() { std::memcpy(in.state->data, in.state0.data(), in.state0.size() * sizeof(float)); });
        }
    }
}

// The chunked form equals running the recurrence token by token to float rounding, also when
// a prompt is fed in pieces (the state carries over between calls).
TEST_F(Ops, GatedDeltaNetChunkedEqualsRecurrentInPieces) {
    const delta_case c = { 64, 64, 2, 4, 150, 1 };
    delta_inputs in = make_delta_inputs(ctx, c, 1300);
    const float scale = 0.125f;
    auto run = [&](int chunk, int64_t piece) {
        std::memcpy(in.state->data, in.state0.data(), in.state0.size() * sizeof(float));
        std::vector<float> out;
        for (int64_t t0 = 0; t0 < c.n_tok; t0 += piece) {
            const int64_t n = std::min(piece, c.n_tok - t0);
            auto tok_view = [&](ggml_tensor * x) {
                return ggml_view_3d(ctx, x, x->ne[0], x->ne[1], n, x->nb[1], x->nb[2], t0 * x->nb[2]);
            };
            auto gate_view = [&](ggml_tensor * x) { return ggml_view_2d(ctx, x, x->ne[0], n, x->nb[1], t0 * x->nb[1]); };
            const std::vector<int32_t> sl(n, 0);
            ggml_tensor * o = ggml_gated_delta_net(ctx, tok_view(in.q), tok_view(in.k), tok_view(in.v), gate_view(in.g),
                                                   gate_view(in.beta), in.state, slots_tensor(ctx, sl), scale, chunk);
            compute(o, 2);
            out.insert(out.end(), (float *) o->data, (float *) o->data + ggml_nelements(o));
        }
        out.insert(out.end(), (float *) in.state->data, (float *) in.state->data + ggml_nelements(in.state));
        return out;
    };
    const std::vector<float> rec = run(0, c.n_tok);
    double max_abs = 0;
    for (float x : rec) max_abs = std::max(max_abs, (double) std::fabs(x));
    for (auto [chunk, piece] : { std::pair<int, int64_t>{ 64, 150 }, { 64, 7 }, { 16, 150 }, { 0, 1 }, { 64, 1 } }) {
        const std::vector<float> got = run(chunk, piece);
        ASSERT_EQ(got.size(), rec.size());
        double max_diff = 0;
        for (size_t i = 0; i < rec.size(); ++i) max_diff = std::max(max_diff, (double) std::fabs(got[i] - rec[i]));
        EXPECT_LE(max_diff, 1e-5 * max_abs) << "chunk " << chunk << " pieces of " << piece;
    }
}

} // namespace
