// kiln-bench-ops: throughput of the CPU attention kernel (flash attention) for decode and
// prompt shapes, plus the hot element-wise ops of a transformer layer.
//
//   kiln-bench-ops [-t threads] [-r reps] [--isa scalar|avx2|avx512] [--only decode|prompt|ops|moe] [--kv n_kv] [--heads n_head]
//                  [--type TYPE] [--layers N]
//
// Attention rows (L: layers, one op each) print the time per call, GFLOP/s (2 flops per multiply-add in q·k and p·v,
// counting only unmasked pairs) and the KV bytes read per second. Each layered decode row is
// followed by its roofline: the same cache bytes read and nothing computed, by the same number of
// threads, "read" splitting the cells of each layer, "read/h" the heads of each cell.
#include "bench-moe.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

[[noreturn]] void usage(const char * msg) {
    if (msg) std::fprintf(stderr, "error: %s\n", msg);
    std::fprintf(stderr, "usage: kiln-bench-ops [-t threads] [-r reps] [--isa scalar|avx2|avx512] [--only decode|prompt|ops|moe] [--kv n_kv] [--heads n_head]\n"
                         "                      [--type TYPE] [--layers N]   (attention rows of that cache type / layer count only)\n");
    std::exit(msg ? 1 : 0);
}

// Uniform values in [-1, 1): a xorshift generator and row conversions, so that filling the
// 28-layer caches takes a fraction of the timed work (std::uniform_real_distribution and a
// per-value f16 conversion took most of a profiled run).
void fill(ggml_tensor * t, std::mt19937 & rng) {
    uint64_t x = ((uint64_t) rng() << 32) | rng() | 1;
    std::vector<float> row(t->ne[0]);
    for (int64_t r = 0; r < ggml_nrows(t); ++r) {
        for (float & v : row) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            v = (float) (x >> 40) * (2.0f / 16777216.0f) - 1.0f;
        }
        char * dst = (char *) t->data + r * t->nb[1];
        if (t->type == GGML_TYPE_F32) {
            std::memcpy(dst, row.data(), row.size() * sizeof(float));
        } else if (t->type == GGML_TYPE_F16) {
            ggml_fp32_to_fp16_row(row.data(), (ggml_fp16_t *) dst, t->ne[0]);
        } else if (t->type == GGML_TYPE_BF16) {
            ggml_fp32_to_bf16_row(row.data(), (ggml_bf16_t *) dst, t->ne[0]);
        } else {
            ggml_get_type_traits(t->type)->from_float_ref(row.data(), dst, t->ne[0]);
        }
    }
}

double cpu_seconds() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct timing {
    double wall_ms;   // per call, median over blocks
    double cpu_ms;    // process CPU time per call (all threads), median over blocks
};

// Per-call times: median over reps timed blocks, each block repeating the graph enough times to
// last at least ~5 ms (short ops would otherwise measure the clock's resolution). CPU time is
// shown too: on a shared, oversubscribed machine wall time includes waiting for a core.
timing time_call(const std::function<void()> & call, int reps) {
    const int64_t t0 = ggml_time_us();
    call();
    const int64_t first_us = std::max<int64_t>(1, ggml_time_us() - t0);
    const int per_block = (int) std::max<int64_t>(1, 5000 / first_us);
    std::vector<double> wall, cpu;
    for (int r = 0; r < reps; ++r) {
        const int64_t b0 = ggml_time_us();
        const double c0 = cpu_seconds();
        for (int k = 0; k < per_block; ++k) call();
        cpu.push_back((cpu_seconds() - c0) * 1000.0 / per_block);
        wall.push_back((ggml_time_us() - b0) / 1000.0 / per_block);
    }
    std::sort(wall.begin(), wall.end());
    std::sort(cpu.begin(), cpu.end());
    return { wall[wall.size() / 2], cpu[cpu.size() / 2] };
}

timing time_graph(ggml_backend_t be, ggml_cgraph * g, int reps) {
    if (ggml_backend_graph_compute(be, g) != GGML_STATUS_SUCCESS) {
        std::fprintf(stderr, "error: graph compute failed\n");
        std::exit(1);
    }
    return time_call([&] { ggml_backend_graph_compute(be, g); }, reps);
}

volatile uint64_t g_stream_sink;   // what stream_read read, so that the reads are kept

// The roofline of a decode step: the bytes its caches hold for the step's cells (bufs: each
// layer's K and V, n_cells cells of cell_bytes), read with plain 64-byte loads by nth threads and
// nothing computed. by_heads: each thread reads its share of every cell (the heads it owns: a
// run of cell_bytes / nth at the cell stride); otherwise a contiguous share of the cells of each
// buffer (a split over the KV length).
timing stream_read(const std::vector<const char *> & bufs, size_t cell_bytes, int64_t n_cells, int nth, bool by_heads,
                   int reps) {
    typedef uint64_t v8 __attribute__((vector_size(64)));
    auto read = [](const char * p, size_t n, size_t stride, int64_t count) {
        v8 a = {}, b = {};
        for (int64_t c = 0; c < count; ++c, p += stride) {
            size_t i = 0;
            for (; i + 128 <= n; i += 128) {
                v8 x, y;
                std::memcpy(&x, p + i, 64);
                std::memcpy(&y, p + i + 64, 64);
                a ^= x;
                b ^= y;
            }
            for (; i + 64 <= n; i += 64) {
                v8 x;
                std::memcpy(&x, p + i, 64);
                a ^= x;
            }
        }
        a ^= b;
        g_stream_sink = a[0] ^ a[7];
    };
    auto work = [&](int ith) {
        for (const char * buf : bufs) {
            if (by_heads) {
                const size_t share = cell_bytes / nth;
                read(buf + ith * share, share, cell_bytes, n_cells);
            } else {
                const int64_t c0 = n_cells * ith / nth, c1 = n_cells * (ith + 1) / nth;
                read(buf + c0 * cell_bytes, (c1 - c0) * cell_bytes, 0, 1);
            }
        }
    };
    return time_call([&] {
        std::vector<std::thread> pool;
        for (int t = 1; t < nth; ++t) pool.emplace_back(work, t);
        work(0);
        for (std::thread & th : pool) th.join();
    }, reps);
}

struct attn_shape {
    const char * what;
    int64_t n_q, n_kv, D, n_head, n_head_kv;
    ggml_type kv;
    bool causal;
    int layers = 1;   // > 1: a model's layers, each its own cache laid out as llama's KV cache
                      // (the heads of a cell side by side, f32 mask), so the caches of all
                      // layers together exceed the CPU caches as they do in a real decode step
    bool model = false;   // one layer laid out as llama's (cells, f32 mask) without the depth of layers
};

} // namespace

int main(int argc, char ** argv) {
    int n_threads = 2, reps = 5;
    int64_t only_kv = 0;     // > 0: only the attention shapes of this KV length (for perf)
    int64_t only_heads = 0;  // > 0: ... and of this many query heads
    int only_layers = 0;     // > 0: ... and of this many layers
    std::string only, only_type;   // ... and of this cache type
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) usage(("missing value for " + a).c_str());
            return argv[++i];
        };
        if (a == "-t") n_threads = std::atoi(next().c_str());
        else if (a == "-r") reps = std::atoi(next().c_str());
        else if (a == "--isa") {
            const std::string v = next();
            if (v == "scalar") ggml_cpu_set_isa(GGML_CPU_ISA_SCALAR);
            else if (v == "avx2") ggml_cpu_set_isa(GGML_CPU_ISA_AVX2);
            else if (v == "avx512") ggml_cpu_set_isa(GGML_CPU_ISA_AVX512);
            else if (v == "neon") ggml_cpu_set_isa(GGML_CPU_ISA_NEON);
            else if (v == "dotprod") ggml_cpu_set_isa(GGML_CPU_ISA_NEON_DOTPROD);
            else if (v == "i8mm") ggml_cpu_set_isa(GGML_CPU_ISA_NEON_I8MM);
            else usage(("unknown --isa " + v).c_str());
        } else if (a == "--only") {
            only = next();
            if (only != "decode" && only != "prompt" && only != "ops" && only != "moe") usage(("unknown --only " + only).c_str());
        } else if (a == "--kv") {
            only_kv = std::atoll(next().c_str());
            if (only_kv < 1) usage("--kv must be positive");
        } else if (a == "--heads") {
            only_heads = std::atoll(next().c_str());
            if (only_heads < 1) usage("--heads must be positive");
        } else if (a == "--type") only_type = next();
        else if (a == "--layers") only_layers = std::atoi(next().c_str());
        else if (a == "-h" || a == "--help") usage(nullptr);
        else usage(("unknown argument " + a).c_str());
    }
    if (n_threads < 1 || reps < 1) usage("-t and -r must be positive");

    std::printf("CPU: %s, kernels: %s, threads: %d\n\n", ggml_cpu_features(), ggml_cpu_isa_name(ggml_cpu_get_isa()), n_threads);
    ggml_backend_t be = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(be, n_threads);
    std::mt19937 rng(7);
    if (only == "moe") {   // only on request: it fills 400 MB of expert weights
        bench_moe(be, reps);
        ggml_backend_free(be);
        return 0;
    }

    const attn_shape shapes[] = {
        { "decode", 1, 512, 128, 32, 8, GGML_TYPE_F16, false },
        { "decode", 1, 4096, 128, 32, 8, GGML_TYPE_F16, false },
        { "decode", 1, 16384, 128, 32, 8, GGML_TYPE_F16, false },
        { "decode", 1, 4096, 128, 32, 8, GGML_TYPE_F32, false },
        { "decode", 1, 4096, 128, 32, 8, GGML_TYPE_Q8_0, false },
        { "decode", 1, 4096, 128, 32, 8, GGML_TYPE_Q8_KV, false },
        { "prompt", 512, 512, 128, 32, 8, GGML_TYPE_F16, true },
        { "prompt", 512, 4096, 128, 32, 8, GGML_TYPE_F16, true },
        // Qwen3-0.6B (16/8 heads) and Qwen3-30B-A3B (32/4) layers at sweep-bench's deepest step
        { "decode", 1, 2048, 128, 16, 8, GGML_TYPE_F16, false },
        { "decode", 1, 2048, 128, 16, 8, GGML_TYPE_Q8_0, false },
        { "decode", 1, 2048, 128, 16, 8, GGML_TYPE_Q8_KV, false },
        { "decode", 1, 2048, 128, 32, 4, GGML_TYPE_F16, false },
        { "prompt", 512, 2048, 128, 16, 8, GGML_TYPE_F16, true },
        { "prompt", 512, 2048, 128, 16, 8, GGML_TYPE_Q8_0, true },
        { "prompt", 512, 2048, 128, 16, 8, GGML_TYPE_Q8_KV, true },
        // sweep-bench's prompt batches at depth 0/512/1024/1536 (n_kv = depth + 512) as the
        // models lay them out: Qwen3-0.6B (16/8 heads) and the Qwen3-30B-A3B-shaped MoE (32/4)
        { "prompt", 512, 512, 128, 16, 8, GGML_TYPE_F16, true, 1, true },
        { "prompt", 512, 1024, 128, 16, 8, GGML_TYPE_F16, true, 1, true },
        { "prompt", 512, 1536, 128, 16, 8, GGML_TYPE_F16, true, 1, true },
        { "prompt", 512, 2048, 128, 16, 8, GGML_TYPE_F16, true, 1, true },
        { "prompt", 512, 512, 128, 32, 4, GGML_TYPE_F16, true, 1, true },
        { "prompt", 512, 2048, 128, 32, 4, GGML_TYPE_F16, true, 1, true },
        // the same Qwen3-0.6B step through all 28 layers' caches at depth 1536 (sweep-bench's last row)
        { "decode", 1, 1600, 128, 16, 8, GGML_TYPE_F16, false, 28 },
        { "decode", 1, 1600, 128, 16, 8, GGML_TYPE_Q8_0, false, 28 },
        // and the Qwen3-30B-A3B-shaped MoE model's step (GQA 8) through its 8 layers' caches
        { "decode", 1, 1600, 128, 32, 4, GGML_TYPE_F16, false, 8 },
        // both in the CPU's L2 (two layers of 96 cells, 768 KB): the kernels' cost without memory
        { "decode", 1, 96, 128, 16, 8, GGML_TYPE_F16, false, 2 },
        { "decode", 1, 96, 128, 16, 8, GGML_TYPE_Q8_0, false, 2 },
        { "decode", 1, 192, 128, 32, 4, GGML_TYPE_F16, false, 2 },
    };
    std::printf("flash attention (GQA heads q/kv, D = head size)\n");
    std::printf("| %-6s | %5s | %6s | %4s | %6s | %-5s | %2s | %9s | %9s | %8s | %8s |\n", "shape", "n_q", "n_kv", "D", "heads",
                "kv", "L", "ms", "cpu ms", "GFLOP/s", "KV GB/s");
    std::printf("|--------|-------|--------|------|--------|-------|----|-----------|-----------|----------|----------|\n");
    for (const attn_shape & s : shapes) {
        if (!only.empty() && only != s.what) continue;
        if (only_kv > 0 && s.n_kv != only_kv) continue;
        if (only_heads > 0 && s.n_head != only_heads) continue;
        if (!only_type.empty() && only_type != ggml_type_name(s.kv)) continue;
        if (only_layers > 0 && only_layers != s.layers) continue;
        const size_t kv_bytes = 2 * ggml_row_size(s.kv, s.D) * s.n_kv * s.n_head_kv * s.layers;
        ggml_init_params ip = { kv_bytes + (size_t) s.n_q * s.D * s.n_head * 8 + s.n_kv * s.n_q * 4 + (64 << 20) +
                                    (size_t) s.layers * (s.n_q * s.D * s.n_head * 4 + 4096), nullptr, false };
        ggml_context * ctx = ggml_init(ip);
        ggml_tensor * q = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, s.D, s.n_q, s.n_head, 1);
        fill(q, rng);
        ggml_tensor * mask = nullptr;
        double pairs = (double) s.n_q * s.n_kv;
        if (!s.causal && s.layers > 1) {
            // a model's decode step: an f32 mask row over the cells, the last few of them masked
            // (llama's n_kv is padded past the last used cell)
            const int64_t padding = 17;
            mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, s.n_kv, s.n_q);
            for (int64_t iq = 0; iq < s.n_q; ++iq) {
                for (int64_t j = 0; j < s.n_kv; ++j) ((float *) mask->data)[iq * s.n_kv + j] = j < s.n_kv - padding ? 0.0f : -INFINITY;
            }
            pairs = (double) s.n_q * (s.n_kv - padding);
        } else if (s.causal) {
            const bool f32 = s.layers > 1 || s.model;   // the model's mask is f32
            mask = ggml_new_tensor_2d(ctx, f32 ? GGML_TYPE_F32 : GGML_TYPE_F16, s.n_kv, s.n_q);
            pairs = 0;
            for (int64_t iq = 0; iq < s.n_q; ++iq) {
                const int64_t last = s.n_kv - s.n_q + iq;
                for (int64_t j = 0; j < s.n_kv; ++j) {
                    const float m = j > last ? -INFINITY : 0.0f;
                    if (f32) ((float *) mask->data)[iq * s.n_kv + j] = m;
                    else ((ggml_fp16_t *) mask->data)[iq * s.n_kv + j] = ggml_fp32_to_fp16(m);
                }
                pairs += last + 1;
            }
        }
        ggml_cgraph * g = ggml_new_graph(ctx);
        std::vector<const char *> bufs;   // the layers' caches (layered rows)
        for (int l = 0; l < s.layers; ++l) {
            ggml_tensor * k, * v;
            if (s.layers == 1 && !s.model) {
                k = ggml_new_tensor_4d(ctx, s.kv, s.D, s.n_kv, s.n_head_kv, 1);
                v = ggml_new_tensor_4d(ctx, s.kv, s.D, s.n_kv, s.n_head_kv, 1);
                fill(k, rng);
                fill(v, rng);
            } else {
                ggml_tensor * kc = ggml_new_tensor_2d(ctx, s.kv, s.D * s.n_head_kv, s.n_kv);
                ggml_tensor * vc = ggml_new_tensor_2d(ctx, s.kv, s.D * s.n_head_kv, s.n_kv);
                fill(kc, rng);
                fill(vc, rng);
                bufs.push_back((const char *) kc->data);
                bufs.push_back((const char *) vc->data);
                const size_t hs = ggml_row_size(s.kv, s.D);
                k = ggml_view_3d(ctx, kc, s.D, s.n_kv, s.n_head_kv, kc->nb[1], hs, 0);
                v = ggml_view_3d(ctx, vc, s.D, s.n_kv, s.n_head_kv, vc->nb[1], hs, 0);
            }
            ggml_tensor * out = ggml_flash_attn_ext(ctx, q, k, v, mask, 1.0f / std::sqrt((float) s.D), 0.0f, 0.0f);
            ggml_build_forward_expand(g, out);
        }
        const timing tm = time_graph(be, g, reps);
        const double ms = tm.wall_ms;
        const double flops = 4.0 * pairs * s.D * s.n_head * s.layers;
        std::printf("| %-6s | %5lld | %6lld | %4lld | %3lld/%-2lld | %-5s | %2d | %9.3f | %9.3f | %8.1f | %8.2f |\n", s.what,
                    (long long) s.n_q, (long long) s.n_kv, (long long) s.D, (long long) s.n_head, (long long) s.n_head_kv,
                    ggml_type_name(s.kv), s.layers, ms, tm.cpu_ms, flops / ms / 1e6, kv_bytes / ms / 1e6);
        if (s.layers > 1 && s.n_q == 1) {
            // its roofline: the same bytes streamed, both ways of sharing them out
            const size_t cell = ggml_row_size(s.kv, s.D) * s.n_head_kv;
            for (bool by_heads : { false, true }) {
                const timing st = stream_read(bufs, cell, s.n_kv, n_threads, by_heads, reps);
                std::printf("| %-6s | %5s | %6lld | %4s | %6s | %-5s | %2d | %9.3f | %9.3f | %8s | %8.2f |\n",
                            by_heads ? "read/h" : "read", "", (long long) s.n_kv, "", "", ggml_type_name(s.kv), s.layers,
                            st.wall_ms, st.cpu_ms, "", kv_bytes / st.wall_ms / 1e6);
            }
        }
        ggml_free(ctx);
    }

    if (!only.empty() && only != "ops") {
        ggml_backend_free(be);
        return 0;
    }
    // element-wise ops at a prompt-sized activation (512 tokens x 4096) and a decode row
    std::printf("\nelement-wise ops (f32)\n");
    std::printf("| %-10s | %6s | %6s | %9s | %9s | %8s |\n", "op", "n0", "rows", "ms", "cpu ms", "GB/s");
    std::printf("|------------|--------|--------|-----------|-----------|----------|\n");
    for (int64_t rows : { int64_t(1), int64_t(512) }) {
        const int64_t n0 = 4096;
        ggml_init_params ip = { (size_t) rows * n0 * 4 * 12 + (16 << 20), nullptr, false };
        ggml_context * ctx = ggml_init(ip);
        ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n0, rows);
        ggml_tensor * y = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n0, rows);
        ggml_tensor * w = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n0);
        fill(x, rng);
        fill(y, rng);
        fill(w, rng);
        ggml_tensor * qk = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 128, 32, rows);
        fill(qk, rng);
        ggml_tensor * pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, rows);
        for (int64_t i = 0; i < rows; ++i) ((int32_t *) pos->data)[i] = (int32_t) i;
        struct item { const char * name; ggml_tensor * t; double bytes; };
        const double row_bytes = (double) rows * n0 * 4;
        const item items[] = {
            { "rms_norm", ggml_rms_norm(ctx, x, 1e-6f), 2 * row_bytes },
            { "mul(bcast)", ggml_mul(ctx, x, w), 2 * row_bytes },
            { "add", ggml_add(ctx, x, y), 3 * row_bytes },
            { "swiglu", ggml_swiglu_split(ctx, x, y), 3 * row_bytes },
            { "soft_max", ggml_soft_max_ext(ctx, x, nullptr, 0.125f, 0.0f), 2 * row_bytes },
            { "rope neox", ggml_rope_ext(ctx, qk, pos, nullptr, 128, GGML_ROPE_TYPE_NEOX, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f), 2 * row_bytes },
            { "cpy f16", ggml_cast(ctx, x, GGML_TYPE_F16), 1.5 * row_bytes },
        };
        for (const item & it : items) {
            ggml_cgraph * g = ggml_new_graph(ctx);
            ggml_build_forward_expand(g, it.t);
            const timing tm = time_graph(be, g, reps);
            std::printf("| %-10s | %6lld | %6lld | %9.4f | %9.4f | %8.2f |\n", it.name, (long long) n0, (long long) rows,
                        tm.wall_ms, tm.cpu_ms, it.bytes / tm.wall_ms / 1e6);
        }
        ggml_free(ctx);
    }
    ggml_backend_free(be);
    return 0;
}
