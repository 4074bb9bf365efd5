// kiln-bench-ops --only moe: the routed-expert part of one MoE layer as the qwen3moe graph builds
// it (fused gate/up, down product, weights, sum over the chosen experts), at Qwen3-30B-A3B's
// shape in its Q4_K_M types (gate/up q4_K, down q6_K), for one token and for a prompt batch.
//
// Every call routes the tokens to fresh random experts, so the weights come from memory, not
// from a cache that kept the previous call's experts. "weights GB/s" counts the bytes of the
// distinct experts a call reads once each: for one token it is the bandwidth the expert
// products reach, to compare with kiln-bench-matmul's dense rows.
#include "bench-moe.h"

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <numeric>
#include <random>
#include <vector>

namespace {

constexpr int64_t k_embd = 2048, k_ff = 768, k_expert = 128, k_used = 8;

// Quantize a few random rows and repeat them through the tensor: the values do not matter for
// speed, and quantizing 600 M values would take longer than the benchmark.
void fill_rows(ggml_tensor * t, std::mt19937 & rng) {
    constexpr int k_distinct = 16;
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    std::vector<float> row(t->ne[0]);
    const size_t rs = t->nb[1];
    std::vector<char> rows(k_distinct * rs);
    for (int r = 0; r < k_distinct; ++r) {
        for (float & x : row) x = d(rng);
        if (t->type == GGML_TYPE_F32) std::memcpy(rows.data() + r * rs, row.data(), rs);
        else ggml_get_type_traits(t->type)->from_float_ref(row.data(), rows.data() + r * rs, t->ne[0]);
    }
    const int64_t n = ggml_nrows(t);
    for (int64_t r = 0; r < n; ++r) std::memcpy((char *) t->data + r * rs, rows.data() + (r % k_distinct) * rs, rs);
}

double cpu_now() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

} // namespace

void bench_moe(ggml_backend_t be, int reps) {
    std::mt19937 rng(11);
    const size_t up_bytes = ggml_row_size(GGML_TYPE_Q4_K, k_embd) * k_ff, down_bytes = ggml_row_size(GGML_TYPE_Q6_K, k_ff) * k_embd;
    std::printf("\nMoE experts (%lld of %lld, %lld -> %lld, gate/up q4_K, down q6_K; fresh routing per call)\n",
                (long long) k_used, (long long) k_expert, (long long) k_embd, (long long) k_ff);
    std::printf("| %6s | %9s | %9s | %11s |\n", "tokens", "ms", "cpu ms", "weights GB/s");
    std::printf("|--------|-----------|-----------|--------------|\n");
    ggml_context * wctx = ggml_init({ 3 * ggml_tensor_overhead() + (2 * up_bytes + down_bytes) * k_expert + 4096, nullptr, false });
    ggml_tensor * up = ggml_new_tensor_3d(wctx, GGML_TYPE_Q4_K, k_embd, k_ff, k_expert);
    ggml_tensor * gate = ggml_new_tensor_3d(wctx, GGML_TYPE_Q4_K, k_embd, k_ff, k_expert);
    ggml_tensor * down = ggml_new_tensor_3d(wctx, GGML_TYPE_Q6_K, k_ff, k_embd, k_expert);
    fill_rows(up, rng);
    fill_rows(gate, rng);
    fill_rows(down, rng);
    for (int64_t n_tokens : { int64_t(1), int64_t(512) }) {
        ggml_context * ctx = ggml_init({ (size_t) n_tokens * (k_embd + k_used) * 4 * 24 + (64 << 20), nullptr, false });
        ggml_tensor * x = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, k_embd, 1, n_tokens);
        ggml_tensor * ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, k_used, n_tokens);
        ggml_tensor * w = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 1, k_used, n_tokens);
        fill_rows(x, rng);
        fill_rows(w, rng);
        ggml_tensor * par = ggml_moe_up_gate(ctx, up, gate, x, ids, GGML_GLU_OP_SWIGLU);
        ggml_tensor * experts = ggml_mul(ctx, ggml_mul_mat_id(ctx, down, par, ids), w);
        ggml_tensor * out = nullptr;
        for (int64_t i = 0; i < k_used; ++i) {
            ggml_tensor * e = ggml_view_2d(ctx, experts, k_embd, n_tokens, experts->nb[2], i * experts->nb[1]);
            out = out ? ggml_add(ctx, out, e) : e;
        }
        ggml_cgraph * g = ggml_new_graph(ctx);
        ggml_build_forward_expand(g, out);
        std::vector<int32_t> order(k_expert);
        std::iota(order.begin(), order.end(), 0);
        std::vector<char> used(k_expert);
        size_t bytes = 0;
        auto route = [&]() {   // distinct experts per token; bytes of the distinct experts of the call
            std::fill(used.begin(), used.end(), 0);
            for (int64_t t = 0; t < n_tokens; ++t) {
                std::shuffle(order.begin(), order.end(), rng);
                for (int64_t i = 0; i < k_used; ++i) {
                    ((int32_t *) ids->data)[t * k_used + i] = order[i];
                    used[order[i]] = 1;
                }
            }
            bytes = (2 * up_bytes + down_bytes) * (size_t) std::count(used.begin(), used.end(), 1);
        };
        route();
        ggml_backend_graph_compute(be, g);   // warm-up
        const int calls = n_tokens == 1 ? 32 : 2;
        std::vector<double> wall, cpu, gbs;
        for (int r = 0; r < reps; ++r) {
            double block_wall = 0, block_cpu = 0, block_bytes = 0;
            for (int k = 0; k < calls; ++k) {
                route();
                const int64_t t0 = ggml_time_us();
                const double c0 = cpu_now();
                ggml_backend_graph_compute(be, g);
                block_cpu += cpu_now() - c0;
                block_wall += (ggml_time_us() - t0) * 1e-6;
                block_bytes += (double) bytes;
            }
            wall.push_back(block_wall * 1e3 / calls);
            cpu.push_back(block_cpu * 1e3 / calls);
            gbs.push_back(block_bytes / block_wall / 1e9);
        }
        std::sort(wall.begin(), wall.end());
        std::sort(cpu.begin(), cpu.end());
        std::sort(gbs.begin(), gbs.end());
        std::printf("| %6lld | %9.3f | %9.3f | %12.2f |\n", (long long) n_tokens, wall[reps / 2], cpu[reps / 2], gbs[reps / 2]);
        ggml_free(ctx);
    }
    ggml_free(wctx);
}
