// kiln-bench-matmul: throughput of the CPU matrix product per weight type, at batch 1 (token
// generation: bound by reading the weights) and batch 512 (prompt processing: bound by arithmetic).
// Prints GFLOP/s and the weight bandwidth achieved (GB/s of weights read per product).
//
//   kiln-bench-matmul [-t threads] [-K 4096] [-M 4096] [-r reps] [--types q4_0,q8_0,...] [--batches 1,512]
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
#include <vector>

namespace {

// CPU time of the whole process: on a machine shared with other work, wall-clock time of a
// single-threaded run also counts the time the OS gave to others; CPU time does not.
double process_cpu_ms() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
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

[[noreturn]] void usage(const char * msg) {
    if (msg) std::fprintf(stderr, "error: %s\n", msg);
    std::fprintf(stderr, "usage: kiln-bench-matmul [-t threads] [-K n] [-M n] [-r reps] [--types a,b,...] [--batches 1,512]\n");
    std::exit(msg ? 1 : 0);
}

} // namespace

int main(int argc, char ** argv) {
    int n_threads = 2, reps = 5;
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
        else if (a == "--batches") {
            batches.clear();
            for (const auto & b : split(next())) batches.push_back(std::atoll(b.c_str()));
        } else if (a == "-h" || a == "--help") usage(nullptr);
        else usage(("unknown argument " + a).c_str());
    }
    if (n_threads < 1 || K < 256 || M < 1 || reps < 1) usage("bad sizes");

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
