// kiln-bench-quantize: how fast the quantizers run, in weights per CPU second and per wall second,
// on one thread and on several, with the error they leave.
//
//   kiln-bench-quantize [-t threads] [-r rows] [-k cols] [--imatrix] [--kt-exhaustive] TYPE...
//
// The matrix (rows x cols, default 256 x 4096) is gaussian with a few outliers (every 97th value
// x 6), the optional importance vector log-normal. Rows are dealt to the threads in chunks of
// 16, as llama-quantize deals them. Per type it prints the wall and process CPU seconds, the
// weights per CPU second and per wall second, and rel_rmse = |Wq - W| / |W| (the imatrix-weighted
// one with --imatrix). --kt-exhaustive runs the trellis types' exhaustive seed search (the same
// seeds as the default grid search, for timing the two). The instruction set follows
// KILN_CPU_ISA (scalar, avx2, avx512: the trellis search is plain C++ at every level).
#include "ggml.h"
#include "quants/quants-ik.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

[[noreturn]] void usage(const char * msg) {
    if (msg) std::fprintf(stderr, "error: %s\n", msg);
    std::fprintf(stderr, "usage: kiln-bench-quantize [-t threads] [-r rows] [-k cols] [--imatrix] [--kt-exhaustive] TYPE...\n");
    std::exit(msg ? 1 : 0);
}

double cpu_seconds() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

ggml_type type_by_name(const std::string & name) {
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        const char * tn = ggml_type_name((ggml_type) t);
        if (tn && strcasecmp(tn, name.c_str()) == 0) return (ggml_type) t;
    }
    usage(("unknown type " + name).c_str());
}

} // namespace

int main(int argc, char ** argv) {
    int n_threads = 1;
    int64_t rows = 256, cols = 4096;
    bool use_imatrix = false;
    std::vector<ggml_type> types;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> const char * {
            if (i + 1 >= argc) usage(("missing value after " + a).c_str());
            return argv[++i];
        };
        if (a == "-t") n_threads = std::atoi(next());
        else if (a == "-r") rows = std::atoll(next());
        else if (a == "-k") cols = std::atoll(next());
        else if (a == "--imatrix") use_imatrix = true;
        else if (a == "--kt-exhaustive") ik_kt_set_exhaustive(true);
        else if (a == "-h" || a == "--help") usage(nullptr);
        else if (!a.empty() && a[0] == '-') usage(("unknown argument " + a).c_str());
        else types.push_back(type_by_name(a));
    }
    if (n_threads < 1 || rows < 1 || cols < 256 || cols % 256 != 0) usage("bad sizes (cols: a multiple of 256)");
    if (types.empty()) usage("no type given");

    std::mt19937 rng(1234);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> x(rows * cols), im(cols);
    for (size_t i = 0; i < x.size(); ++i) x[i] = nd(rng) * (i % 97 == 0 ? 6.f : 1.f);
    for (float & v : im) v = std::exp(nd(rng));
    const float * imatrix = use_imatrix ? im.data() : nullptr;

    std::printf("rows %lld x cols %lld, threads %d, %s, %s search\n", (long long) rows, (long long) cols, n_threads,
                use_imatrix ? "imatrix" : "no imatrix", std::getenv("KILN_CPU_ISA") ? std::getenv("KILN_CPU_ISA") : "default ISA");
    std::printf("| %-8s | %8s | %8s | %14s | %14s | %9s |\n", "type", "wall s", "cpu s", "weights/cpu s", "weights/wall s", "rel_rmse");
    std::printf("|----------|----------|----------|----------------|----------------|-----------|\n");
    for (ggml_type t : types) {
        const size_t row_size = ggml_row_size(t, cols);
        std::vector<uint8_t> q(rows * row_size);
        std::vector<float> y(rows * cols);
        // the codebooks of a type are built on first use: not part of the timing
        ggml_quantize_chunk(t, x.data(), q.data(), 0, 1, cols, imatrix);
        const int64_t chunk = 16;
        std::atomic<int64_t> next{ 0 };
        std::atomic<bool> failed{ false };
        auto work = [&]() {
            for (int64_t r0; (r0 = next.fetch_add(chunk)) < rows;) {
                const int64_t nr = std::min(chunk, rows - r0);
                if (ggml_quantize_chunk(t, x.data(), q.data(), r0 * cols, nr, cols, imatrix) != (size_t) nr * row_size) failed = true;
            }
        };
        const double c0 = cpu_seconds();
        const auto w0 = std::chrono::steady_clock::now();
        std::vector<std::thread> th;
        for (int k = 1; k < n_threads; ++k) th.emplace_back(work);
        work();
        for (auto & h : th) h.join();
        const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
        const double cpu = cpu_seconds() - c0;
        if (failed) {
            std::fprintf(stderr, "error: quantizing to %s failed\n", ggml_type_name(t));
            return 1;
        }
        // row by row: some types (the trellis ones) keep a scale at the start of every row
        for (int64_t r = 0; r < rows; ++r) ggml_get_type_traits(t)->to_float(q.data() + r * row_size, y.data() + r * cols, cols);
        double e = 0, s = 0;
        for (int64_t i = 0; i < rows * cols; ++i) {
            const double wj = imatrix ? imatrix[i % cols] : 1.0;
            e += wj * (y[i] - x[i]) * (double) (y[i] - x[i]);
            s += wj * x[i] * (double) x[i];
        }
        const double nw = (double) rows * cols;
        std::printf("| %-8s | %8.2f | %8.2f | %14.0f | %14.0f | %9.6f |\n", ggml_type_name(t), wall, cpu, nw / cpu, nw / wall,
                    std::sqrt(e / s));
    }
    return 0;
}
