// kiln-bench-matmul: throughput of the CPU matrix product per weight type, at batch 1 (token
// generation: bound by reading the weights) and batch 512 (prompt processing: bound by arithmetic).
// Prints GFLOP/s and the weight bandwidth achieved (GB/s of weights read per product).
// --stream MB measures the roofline of batch 1 instead: a plain sum over MB megabytes read once
// per repetition, split evenly over the threads, the most a batch-1 product can stream.
// --twins sets every row-interleaved layout (and every trellis type) beside its plain twin: the
// same weights (the twin is a repack of the plain rows where the layout has a weave), batch-1
// weight GB/s and batch-512 GFLOP/s by CPU time, so a layout slower than its twin stands out.
//
//   kiln-bench-matmul [-t threads] [-K 4096] [-M 4096] [-r reps] [--types q4_0,q8_0,...] [--batches 1,512]
//   kiln-bench-matmul [-t threads] [-r reps] --stream 512
//   kiln-bench-matmul -t 1 [-K 4096] [-M 4096] [-r reps] [--batches 1,512] --twins [all | r4_type,...]
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

#include <algorithm>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

// CPU time of the whole process: on a machine shared with other work, wall-clock time of a
// single-threaded run also counts the time the OS gave to others; CPU time does not.
double process_cpu_ms() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

double thread_cpu_ms() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// Sum of 64-byte lines [p, p + bytes): eight independent 8-byte lanes per line and no other work,
// so the loop waits on memory only (any ISA streams at the memory's rate with 16-byte loads).
uint64_t stream_sum(const uint64_t * p, size_t n_words) {
    uint64_t s[8] = {};
    for (size_t i = 0; i + 8 <= n_words; i += 8) {
        for (int j = 0; j < 8; ++j) s[j] += p[i + j];
    }
    uint64_t t = 0;
    for (uint64_t v : s) t += v;
    return t;
}

// The read-bandwidth roofline: each thread sums its contiguous share of a buffer well beyond the
// last-level cache; wall GB/s from the fastest repetition, and per-thread CPU time (the CPU-time
// rate is what one core streams while it runs, the number to trust when the machine is shared).
void run_stream(size_t mb, int n_threads, int reps) {
    const size_t bytes = mb << 20, n_words = bytes / sizeof(uint64_t);
    std::vector<uint64_t> buf(n_words);
    for (size_t i = 0; i < n_words; ++i) buf[i] = i * 0x9E3779B97F4A7C15ull;   // touch every page
    std::printf("stream: %zu MB, threads: %d\n", mb, n_threads);
    std::printf("| %5s | %9s | %9s | %10s | %13s | %17s |\n", "rep", "wall ms", "GB/s", "cpu ms/thr", "GB/s by cpu",
                "checksum");
    std::printf("|-------|-----------|-----------|------------|---------------|-------------------|\n");
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
        std::vector<uint64_t> sums(n_threads);
        std::vector<double> cpu(n_threads);
        std::vector<std::thread> th;
        const int64_t t0 = ggml_time_us();
        for (int i = 0; i < n_threads; ++i) {
            th.emplace_back([&, i]() {
                const size_t w0 = n_words * i / n_threads / 8 * 8, w1 = i + 1 == n_threads ? n_words : n_words * (i + 1) / n_threads / 8 * 8;
                const double c0 = thread_cpu_ms();
                sums[i] = stream_sum(buf.data() + w0, w1 - w0);
                cpu[i] = thread_cpu_ms() - c0;
            });
        }
        for (auto & t : th) t.join();
        const double ms = (ggml_time_us() - t0) / 1e3;
        best = std::min(best, ms);
        double cpu_max = 0;
        uint64_t total = 0;
        for (int i = 0; i < n_threads; ++i) {
            cpu_max = std::max(cpu_max, cpu[i]);
            total += sums[i];
        }
        // by CPU time: the threads' shares over the slowest thread's CPU time, as if they had run together
        std::printf("| %5d | %9.2f | %9.1f | %10.2f | %13.1f | %017llx |\n", r, ms, bytes / (ms * 1e6), cpu_max,
                    bytes / (cpu_max * 1e6), (unsigned long long) total);
    }
    std::printf("best: %.1f GB/s wall\n", bytes / (best * 1e6));
}

std::vector<std::string> split(const std::string & s) {
    std::vector<std::string> out;
    size_t start = 0;
    while (start <= s.size()) {
        const size_t comma = s.find(',', start);
        out.push_back(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return out;
}

int type_by_name(const std::string & name) {
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        if (ggml_type_is_valid(t) && name == ggml_type_name((ggml_type) t)) return t;
    }
    return -1;
}

// ---------------------------------------------------------------------------------------------
// --twins

// The trellis types have no woven twin; each is set beside the non-trellis i-quant of about the
// same bits per weight (iq1_kt 1.75 / iq1_m 1.75, iq2_kt 2.125 / iq2_ks 2.19, iq3_kt 3.125 /
// iq3_ks 3.19, iq4_kt 4.0 / iq4_ks 4.25), the type a user picks instead of it.
const std::pair<const char *, const char *> k_trellis_twins[] = {
    { "iq1_kt", "iq1_m" }, { "iq2_kt", "iq2_ks" }, { "iq3_kt", "iq3_ks" }, { "iq4_kt", "iq4_ks" },
};

// A weight matrix of type t, K x M, built from `src` rows: quantizing all M rows with the slow
// quantizers (trellis, lattice) would take minutes, so kRows distinct rows are quantized and
// tiled. A batch-1 product still streams M distinct rows' worth of addresses (no cache sees the
// repetition at 4096 rows), and no kernel branches on the values.
constexpr int64_t kRows = 256;

struct weights {
    ggml_context * ctx = nullptr;
    ggml_tensor * w = nullptr;
    size_t bytes = 0;
    ~weights() { if (ctx) ggml_free(ctx); }
};

// Quantized rows of `type`: its own quantizer, or for a woven layout the plain base's rows
// (given) repacked, so that a layout and its twin multiply exactly the same numbers.
bool make_weights(weights & out, ggml_type type, int64_t K, int64_t M, const std::vector<float> & src,
                  const std::vector<uint8_t> * base_rows) {
    const size_t row = ggml_row_size(type, K), tile = row * kRows;
    std::vector<uint8_t> q(tile);
    if (base_rows) {
        if (ggml_repack_rows(type, base_rows->data(), q.data(), kRows, K) != tile) return false;
    } else {
        std::vector<float> imatrix(K, 1.0f);   // the lattice types refuse to quantize without one
        const float * im = ggml_quantize_requires_imatrix(type) ? imatrix.data() : nullptr;
        if (ggml_quantize_chunk(type, src.data(), q.data(), 0, kRows, K, im) != tile) return false;
    }
    out.bytes = row * M;
    out.ctx = ggml_init({ ggml_tensor_overhead() + out.bytes + 1024, nullptr, false });
    out.w = ggml_new_tensor_2d(out.ctx, type, K, M);
    for (int64_t r = 0; r < M; r += kRows) std::memcpy((uint8_t *) out.w->data + r * row, q.data(), tile);
    return true;
}

// One product's graph (weights w times N random columns), built once and computed many times.
struct product {
    ggml_context * ctx = nullptr;
    ggml_cgraph * g = nullptr;
    ggml_tensor * y = nullptr;
    product(ggml_tensor * w, int64_t N, std::mt19937 & rng) {
        const int64_t K = w->ne[0], M = w->ne[1];
        ctx = ggml_init({ ggml_tensor_overhead() * 8 + ggml_graph_overhead() + K * N * 4 + M * N * 4 + 4096, nullptr, false });
        ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, N);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        for (int64_t i = 0; i < K * N; ++i) ((float *) x->data)[i] = nd(rng);
        g = ggml_new_graph(ctx);
        y = ggml_mul_mat(ctx, w, x);
        ggml_build_forward_expand(g, y);
    }
    ~product() { ggml_free(ctx); }
    double cpu_ms(ggml_backend_t cpu) const {
        const double c0 = process_cpu_ms();
        ggml_backend_graph_compute(cpu, g);
        return process_cpu_ms() - c0;
    }
};

void run_twins(ggml_backend_t cpu, const std::vector<std::string> & only, int64_t K, int64_t M, int reps,
               const std::vector<int64_t> & batches, int n_threads) {
    std::vector<std::pair<ggml_type, ggml_type>> pairs;   // (layout, plain twin)
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        if (!ggml_type_is_valid(t)) continue;
        const ggml_type_traits * tt = ggml_get_type_traits((ggml_type) t);
        if (tt->nrows_interleaved > 1) pairs.emplace_back((ggml_type) t, tt->interleaved_base);
    }
    for (const auto & [kt, plain] : k_trellis_twins) {
        if (type_by_name(kt) >= 0 && type_by_name(plain) >= 0) pairs.emplace_back((ggml_type) type_by_name(kt), (ggml_type) type_by_name(plain));
    }
    for (const auto & name : only) {
        bool known = false;
        for (const auto & p : pairs) known |= name == ggml_type_name(p.first);
        if (!known) {
            std::fprintf(stderr, "error: --twins: %s is not an interleaved or trellis type\n", name.c_str());
            std::exit(1);
        }
    }
    std::printf("twins: CPU %s, kernels: %s, threads: %d, K = %lld, M = %lld, %lld distinct rows tiled; "
                "least process CPU ms of %d alternating runs\n", ggml_cpu_features(), ggml_cpu_isa_name(ggml_cpu_get_isa()),
                n_threads, (long long) K, (long long) M, (long long) kRows, reps);
    std::printf("| %-10s | %-8s | %5s | %9s | %9s | %10s | %10s | %6s |\n", "layout", "twin", "batch", "ms", "twin ms",
                "GB/s|GF/s", "twin", "ratio");
    std::printf("|------------|----------|-------|-----------|-----------|------------|------------|--------|\n");
    std::mt19937 rng(42);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> src(K * kRows);
    for (auto & v : src) v = nd(rng);
    for (const auto & [layout, plain] : pairs) {
        const char * ln = ggml_type_name(layout);
        if (!only.empty() && std::find(only.begin(), only.end(), ln) == only.end()) continue;
        if (K % ggml_blck_size(layout) || K % ggml_blck_size(plain) || M % kRows) {
            std::printf("| %-10s | %-8s | K = %lld or M = %lld does not fit the layout |\n", ln, ggml_type_name(plain),
                        (long long) K, (long long) M);
            continue;
        }
        // the plain rows first; the layout is woven from them where it can be
        weights wp, wl;
        if (!make_weights(wp, plain, K, M, src, nullptr)) {
            std::printf("| %-10s | %-8s | cannot quantize the twin |\n", ln, ggml_type_name(plain));
            continue;
        }
        const bool woven = ggml_get_type_traits(layout)->weave != nullptr;
        std::vector<uint8_t> base_rows((uint8_t *) wp.w->data, (uint8_t *) wp.w->data + ggml_row_size(plain, K) * kRows);
        if (!make_weights(wl, layout, K, M, src, woven ? &base_rows : nullptr)) {
            std::printf("| %-10s | %-8s | cannot quantize the layout |\n", ln, ggml_type_name(plain));
            continue;
        }
        for (int64_t N : batches) {
            product pl(wl.w, N, rng), pp(wp.w, N, rng);
            if (!ggml_backend_supports_op(cpu, pl.y) || !ggml_backend_supports_op(cpu, pp.y)) {
                // q8_K: an activation type, no weights of it are multiplied
                std::printf("| %-10s | %-8s | %5lld | no CPU product of %s weights |\n", ln, ggml_type_name(plain), (long long) N,
                            ggml_backend_supports_op(cpu, pl.y) ? ggml_type_name(plain) : ln);
                continue;
            }
            pl.cpu_ms(cpu), pp.cpu_ms(cpu);   // warm up (scratch buffers, pages)
            double tl = 1e30, tp = 1e30;
            // alternating, so drifting load hits both alike, and each first in every other pair: the
            // second product of a pair ran up to 1.5x slower than the first (Xeon, session 10: q6_k_r4
            // read 1.3-1.7x its twin's speed first and 0.88-0.95x second), so a fixed order biased the ratio
            for (int r = 0; r < reps; ++r) {
                if (r % 2 == 0) {
                    tl = std::min(tl, pl.cpu_ms(cpu));
                    tp = std::min(tp, pp.cpu_ms(cpu));
                } else {
                    tp = std::min(tp, pp.cpu_ms(cpu));
                    tl = std::min(tl, pl.cpu_ms(cpu));
                }
            }
            // batch 1: weight bytes read per CPU second; batches: GFLOP per CPU second
            const double fl = N == 1 ? wl.bytes / (tl * 1e6) : 2.0 * K * M * N / (tl * 1e6);
            const double fp = N == 1 ? wp.bytes / (tp * 1e6) : 2.0 * K * M * N / (tp * 1e6);
            std::printf("| %-10s | %-8s | %5lld | %9.3f | %9.3f | %10.1f | %10.1f | %6.2f |%s\n", ln, ggml_type_name(plain),
                        (long long) N, tl, tp, fl, fp, tp / tl, woven ? "" : " quantized on its own");
            std::fflush(stdout);
        }
    }
    std::printf("ratio: twin CPU ms / layout CPU ms (above 1: the layout is faster)\n");
}

[[noreturn]] void usage(const char * msg) {
    if (msg) std::fprintf(stderr, "error: %s\n", msg);
    std::fprintf(stderr, "usage: kiln-bench-matmul [-t threads] [-K n] [-M n] [-r reps] [--types a,b,...] [--batches 1,512]\n"
                         "       kiln-bench-matmul [-t threads] [-r reps] --stream MB\n"
                         "       kiln-bench-matmul -t 1 [-K n] [-M n] [-r reps] [--batches 1,512] --twins all|layout,...\n");
    std::exit(msg ? 1 : 0);
}

} // namespace

int main(int argc, char ** argv) {
    int n_threads = 2, reps = 5;
    long long stream_mb = 0;
    bool twins = false;
    std::vector<std::string> twin_types;
    int64_t K = 4096, M = 4096;
    std::vector<std::string> types = { "f32", "f16", "bf16", "q4_0", "q8_0", "q4_K", "q5_K", "q6_K", "iq4_xs", "iq4_nl" };
    std::vector<int64_t> batches = { 1, 512 };
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) usage(("missing value for " + a).c_str());
            return argv[++i];
        };
        if (a == "-t") n_threads = std::atoi(next().c_str());
        else if (a == "-K") K = std::atoll(next().c_str());
        else if (a == "-M") M = std::atoll(next().c_str());
        else if (a == "-r") reps = std::atoi(next().c_str());
        else if (a == "--types") types = split(next());
        else if (a == "--twins") {
            twins = true;
            twin_types = split(next());
            if (twin_types.size() == 1 && twin_types[0] == "all") twin_types.clear();
        } else if (a == "--stream") stream_mb = std::atoll(next().c_str());
        else if (a == "--batches") {
            batches.clear();
            for (const auto & b : split(next())) batches.push_back(std::atoll(b.c_str()));
        } else if (a == "-h" || a == "--help") usage(nullptr);
        else usage(("unknown argument " + a).c_str());
    }
    if (n_threads < 1 || K < 256 || M < 1 || reps < 1) usage("bad sizes");
    if (stream_mb != 0) {
        if (stream_mb < 1 || stream_mb > (1ll << 20)) usage("--stream: megabytes from 1 to 1048576");
        run_stream((size_t) stream_mb, n_threads, reps);
        return 0;
    }

    if (twins) {
        ggml_backend_t cpu = ggml_backend_cpu_init();
        ggml_backend_cpu_set_n_threads(cpu, n_threads);
        run_twins(cpu, twin_types, K, M, reps, batches, n_threads);
        ggml_backend_free(cpu);
        return 0;
    }
    std::printf("CPU: %s, kernels: %s, threads: %d, K = %lld, M = %lld\n", ggml_cpu_features(),
                ggml_cpu_isa_name(ggml_cpu_get_isa()), n_threads, (long long) K, (long long) M);
    // ms: median wall-clock; min: fastest run; cpu: least process CPU time of a run (with -t 1 the
    // number to compare kernels by when the machine is busy). GFLOP/s and GB/s use the fastest run.
    std::printf("| %-8s | %5s | %9s | %9s | %9s | %8s | %11s |\n", "type", "batch", "ms", "min ms", "cpu ms", "GFLOP/s",
                "weight GB/s");
    std::printf("|----------|-------|-----------|-----------|-----------|----------|-------------|\n");

    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(cpu, n_threads);
    std::mt19937 rng(42);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> wf(K * M);
    for (auto & v : wf) v = nd(rng);

    for (const auto & tn : types) {
        const int t = type_by_name(tn);
        if (t < 0) {
            std::fprintf(stderr, "unknown type %s\n", tn.c_str());
            continue;
        }
        const ggml_type type = (ggml_type) t;
        if (K % ggml_blck_size(type) != 0) continue;
        const size_t wbytes = ggml_row_size(type, K) * M;
        ggml_context * wctx = ggml_init({ ggml_tensor_overhead() + wbytes + 1024, nullptr, false });
        ggml_tensor * w = ggml_new_tensor_2d(wctx, type, K, M);
        if (ggml_quantize_chunk(type, wf.data(), w->data, 0, M, K, nullptr) == 0) {
            std::fprintf(stderr, "cannot quantize to %s (needs an imatrix?)\n", tn.c_str());
            ggml_free(wctx);
            continue;
        }
        for (int64_t N : batches) {
            ggml_context * ctx = ggml_init({ ggml_tensor_overhead() * 8 + ggml_graph_overhead() + K * N * 4 + M * N * 4 + 4096, nullptr, false });
            ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, N);
            for (int64_t i = 0; i < K * N; ++i) ((float *) x->data)[i] = nd(rng);
            ggml_tensor * y = ggml_mul_mat(ctx, w, x);
            ggml_cgraph * g = ggml_new_graph(ctx);
            ggml_build_forward_expand(g, y);
            ggml_backend_graph_compute(cpu, g);   // warm up
            std::vector<double> times;
            double cpu_min = 1e30;
            for (int r = 0; r < reps; ++r) {
                const double c0 = process_cpu_ms();
                const int64_t t0 = ggml_time_us();
                ggml_backend_graph_compute(cpu, g);
                times.push_back((ggml_time_us() - t0) / 1e3);
                cpu_min = std::min(cpu_min, process_cpu_ms() - c0);
            }
            std::sort(times.begin(), times.end());
            const double ms = times[times.size() / 2];
            const double best = times[0];
            const double gflops = 2.0 * K * M * N / (best * 1e6);
            const double gbs = wbytes / (best * 1e6);
            std::printf("| %-8s | %5lld | %9.3f | %9.3f | %9.3f | %8.1f | %11.1f |\n", tn.c_str(), (long long) N, ms, best,
                        cpu_min, gflops, gbs);
            std::fflush(stdout);
            ggml_free(ctx);
        }
        ggml_free(wctx);
    }
    ggml_backend_free(cpu);
    return 0;
}
