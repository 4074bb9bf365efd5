// llama-bench: prompt processing (pp) and generation (tg) throughput for every combination of
// the given parameter values, repeated -r times, printed as llama.cpp's llama-bench prints it
// (markdown table, csv, json, jsonl, sql). Every parameter takes a comma list or may be repeated,
// so this tool has its own small parser instead of common/arg.h's one-value-per-flag table.
#include "common.h"
#include "llama.h"
#include "synth.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace {

struct bench_params {
    std::vector<std::string> models;
    std::vector<int> n_prompt, n_gen, n_batch, n_ubatch, n_threads, n_gpu_layers, flash_attn, use_mmap;
    std::vector<std::pair<int, int>> n_pg;
    std::vector<std::string> type_k, type_v;
    int reps = 5;
    bool verbose = false, warmup = true, demo = false;
    std::string output = "md";
};

bench_params defaults() {
    bench_params d;
    d.models = { "models/7B/ggml-model-q4_0.gguf" };
    d.n_prompt = { 512 };
    d.n_gen = { 128 };
    d.n_batch = { 2048 };
    d.n_ubatch = { 512 };
    d.n_threads = { common_default_n_threads() };
    // what runs is what is reported: without a usable GPU every layer is on the CPU
    d.n_gpu_layers = { llama_supports_gpu_offload() ? 999 : 0 };
    d.flash_attn = { 1 };
    d.use_mmap = { 1 };
    d.type_k = { "f16" };
    d.type_v = { "f16" };
    return d;
}

template <class T> std::string join(const std::vector<T> & v, const char * sep) {
    std::string out;
    for (size_t i = 0; i < v.size(); ++i) {
        if (i) out += sep;
        if constexpr (std::is_same_v<T, std::string>) out += v[i];
        else out += std::to_string(v[i]);
    }
    return out;
}

void usage(FILE * out) {
    const bench_params d = defaults();
    std::fprintf(out,
                 "usage: llama-bench [options]\n\n"
                 "options:\n"
                 "  -h, --help\n"
                 "  -m, --model <filename>              (default: %s)\n"
                 "  --demo                              benchmark a small synthetic model (no -m needed)\n"
                 "  -p, --n-prompt <n>                  (default: %s)\n"
                 "  -n, --n-gen <n>                     (default: %s)\n"
                 "  -pg <pp,tg>                         (default: none)\n"
                 "  -b, --batch-size <n>                (default: %s)\n"
                 "  -ub, --ubatch-size <n>              (default: %s)\n"
                 "  -ctk, --cache-type-k <t>            (default: f16)\n"
                 "  -ctv, --cache-type-v <t>            (default: f16)\n"
                 "  -t, --threads <n>                   (default: %s)\n"
                 "  -ngl, --n-gpu-layers <n>            (default: %s; without a usable GPU: a warning, 0 is reported)\n"
                 "  -fa, --flash-attn <0|1>             (default: %s)\n"
                 "  -mmp, --mmap <0|1>                  (default: %s)\n"
                 "  -r, --repetitions <n>               (default: %d)\n"
                 "  -o, --output <csv|json|jsonl|md|sql> (default: %s)\n"
                 "  -w, --warmup <0|1>                  (default: 1)\n"
                 "  -v, --verbose                       (default: 0)\n\n"
                 "Multiple values can be given for each parameter by separating them with ',' or by specifying the "
                 "parameter multiple times.\n",
                 join(d.models, ",").c_str(), join(d.n_prompt, ",").c_str(), join(d.n_gen, ",").c_str(),
                 join(d.n_batch, ",").c_str(), join(d.n_ubatch, ",").c_str(), join(d.n_threads, ",").c_str(),
                 join(d.n_gpu_layers, ",").c_str(), join(d.flash_attn, ",").c_str(), join(d.use_mmap, ",").c_str(), d.reps,
                 d.output.c_str());
}

std::vector<std::string> split(const std::string & s, char sep) {
    std::vector<std::string> out;
    std::string cur;
    for (char c : s) {
        if (c == sep) {
            out.push_back(cur);
            cur.clear();
        } else {
            cur += c;
        }
    }
    out.push_back(cur);
    return out;
}

struct parse_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

int to_int(const std::string & flag, const std::string & v, int lo) {
    char * end = nullptr;
    errno = 0;
    const long x = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || *end || errno == ERANGE || x < lo || x > 1 << 30) {
        throw parse_error("invalid value '" + v + "' for " + flag + " (expected an integer >= " + std::to_string(lo) + ")");
    }
    return (int) x;
}

// "0"/"1" and the llama.cpp spellings on/off/true/false
int to_bool(const std::string & flag, const std::string & v) {
    if (v == "1" || v == "on" || v == "true") return 1;
    if (v == "0" || v == "off" || v == "false") return 0;
    throw parse_error("invalid value '" + v + "' for " + flag + " (expected 0 or 1)");
}

bool parse(int argc, char ** argv, bench_params & p) {
    try {
        for (int i = 1; i < argc; ++i) {
            std::string a = argv[i];
            if (a.rfind("--", 0) == 0) std::replace(a.begin(), a.end(), '_', '-');
            auto value = [&]() -> std::string {
                if (i + 1 >= argc) throw parse_error("argument " + a + " needs a value");
                return argv[++i];
            };
            auto ints = [&](std::vector<int> & dst, int lo) {
                for (const std::string & s : split(value(), ',')) dst.push_back(to_int(a, s, lo));
            };
            auto bools = [&](std::vector<int> & dst) {
                for (const std::string & s : split(value(), ',')) dst.push_back(to_bool(a, s));
            };
            if (a == "-h" || a == "--help") {
                usage(stdout);
                std::exit(0);
            } else if (a == "-m" || a == "--model") {
                for (const std::string & s : split(value(), ',')) {
                    if (s.empty()) throw parse_error("empty model name in -m");
                    p.models.push_back(s);
                }
            } else if (a == "--demo") {
                p.demo = true;
            } else if (a == "-p" || a == "--n-prompt") {
                ints(p.n_prompt, 0);
            } else if (a == "-n" || a == "--n-gen") {
                ints(p.n_gen, 0);
            } else if (a == "-pg") {
                const auto parts = split(value(), ',');
                if (parts.size() != 2) throw parse_error("-pg expects pp,tg (two integers)");
                p.n_pg.emplace_back(to_int(a, parts[0], 1), to_int(a, parts[1], 1));
            } else if (a == "-b" || a == "--batch-size") {
                ints(p.n_batch, 1);
            } else if (a == "-ub" || a == "--ubatch-size") {
                ints(p.n_ubatch, 1);
            } else if (a == "-t" || a == "--threads") {
                ints(p.n_threads, 1);
            } else if (a == "-ngl" || a == "--n-gpu-layers") {
                ints(p.n_gpu_layers, 0);
                if (!llama_supports_gpu_offload()) {
                    // as the other tools do (common/arg-promises.cpp): run on the CPU, say so once
                    const bool asked = std::any_of(p.n_gpu_layers.begin(), p.n_gpu_layers.end(), [](int n) { return n > 0; });
                    if (asked) std::fprintf(stderr, "warning: no usable GPU found, %s ignored (layers stay on the CPU)\n", a.c_str());
                    p.n_gpu_layers = { 0 };
                }
            } else if (a == "-fa" || a == "--flash-attn") {
                bools(p.flash_attn);
            } else if (a == "-mmp" || a == "--mmap") {
                bools(p.use_mmap);
            } else if (a == "-ctk" || a == "--cache-type-k" || a == "-ctv" || a == "--cache-type-v") {
                auto & dst = (a == "-ctk" || a == "--cache-type-k") ? p.type_k : p.type_v;
                for (const std::string & s : split(value(), ',')) {
                    if (common_kv_cache_type_from_str(s) == GGML_TYPE_COUNT) {
                        throw parse_error("invalid value '" + s + "' for " + a + " (allowed: " + common_kv_cache_type_names() + ")");
                    }
                    dst.push_back(s);
                }
            } else if (a == "-r" || a == "--repetitions") {
                p.reps = to_int(a, value(), 1);
            } else if (a == "-o" || a == "--output") {
                const std::string v = value();
                if (v != "csv" && v != "json" && v != "jsonl" && v != "md" && v != "sql") {
                    throw parse_error("invalid value '" + v + "' for -o (expected csv, json, jsonl, md or sql)");
                }
                p.output = v;
            } else if (a == "-w" || a == "--warmup") {
                p.warmup = to_bool(a, value());
            } else if (a == "-v" || a == "--verbose") {
                p.verbose = true;
            } else {
                throw parse_error("unknown argument: " + a);
            }
        }
    } catch (const parse_error & e) {
        std::fprintf(stderr, "error: %s\nrun 'llama-bench --help' for the list of options\n", e.what());
        return false;
    }
    const bench_params d = defaults();
    if (p.models.empty() && !p.demo) p.models = d.models;
    if (p.n_prompt.empty()) p.n_prompt = d.n_prompt;
    if (p.n_gen.empty()) p.n_gen = d.n_gen;
    if (p.n_batch.empty()) p.n_batch = d.n_batch;
    if (p.n_ubatch.empty()) p.n_ubatch = d.n_ubatch;
    if (p.n_threads.empty()) p.n_threads = d.n_threads;
    if (p.n_gpu_layers.empty()) p.n_gpu_layers = d.n_gpu_layers;
    if (p.flash_attn.empty()) p.flash_attn = d.flash_attn;
    if (p.use_mmap.empty()) p.use_mmap = d.use_mmap;
    if (p.type_k.empty()) p.type_k = d.type_k;
    if (p.type_v.empty()) p.type_v = d.type_v;
    return true;
}

// One test: a parameter combination and its measurements.
struct test {
    std::string model, model_type, type_k, type_v, test_time, label;
    uint64_t model_size = 0, model_n_params = 0;
    int n_prompt = 0, n_gen = 0, n_batch = 0, n_ubatch = 0, n_threads = 0, n_gpu_layers = 0, flash_attn = 0, use_mmap = 1;
    std::vector<uint64_t> samples_ns;

    std::vector<double> samples_ts() const {
        std::vector<double> ts;
        for (uint64_t ns : samples_ns) ts.push_back(1e9 * (n_prompt + n_gen) / (double) ns);
        return ts;
    }
    static double mean(const std::vector<double> & v) {
        double s = 0;
        for (double x : v) s += x;
        return v.empty() ? 0 : s / v.size();
    }
    static double stdev(const std::vector<double> & v) {
        if (v.size() <= 1) return 0;
        const double m = mean(v);
        double s = 0;
        for (double x : v) s += (x - m) * (x - m);
        return std::sqrt(s / (v.size() - 1));
    }
    std::vector<double> ns_d() const { return std::vector<double>(samples_ns.begin(), samples_ns.end()); }
    double avg_ts() const { return mean(samples_ts()); }
    double stdev_ts() const { return stdev(samples_ts()); }
    uint64_t avg_ns() const { return (uint64_t) mean(ns_d()); }
    uint64_t stdev_ns() const { return (uint64_t) stdev(ns_d()); }
};

std::string cpu_info() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("model name", 0) == 0) {
            const size_t colon = line.find(':');
            if (colon != std::string::npos) return line.substr(colon + 2);
        }
    }
    return "unknown";
}

enum field_kind { STRING, INT, BOOL, FLOAT };

const std::vector<std::pair<const char *, field_kind>> & fields() {
    static const std::vector<std::pair<const char *, field_kind>> f = {
        { "build_commit", STRING }, { "build_number", INT },   { "cpu_info", STRING },     { "gpu_info", STRING },
        { "backends", STRING },     { "model_filename", STRING }, { "model_type", STRING }, { "model_size", INT },
        { "model_n_params", INT },  { "n_batch", INT },        { "n_ubatch", INT },         { "n_threads", INT },
        { "type_k", STRING },       { "type_v", STRING },      { "n_gpu_layers", INT },     { "flash_attn", BOOL },
        { "use_mmap", BOOL },       { "n_prompt", INT },       { "n_gen", INT },            { "test_time", STRING },
        { "avg_ns", INT },          { "stddev_ns", INT },      { "avg_ts", FLOAT },         { "stddev_ts", FLOAT },
        { "test", STRING },
    };
    return f;
}

std::vector<std::string> values(const test & t) {
    static const std::string cpu = cpu_info();
    char avg[64], sd[64];
    std::snprintf(avg, sizeof(avg), "%f", t.avg_ts());
    std::snprintf(sd, sizeof(sd), "%f", t.stdev_ts());
    return { "kiln",
             "1",
             cpu,
             "",
             "CPU",
             t.model,
             t.model_type,
             std::to_string(t.model_size),
             std::to_string(t.model_n_params),
             std::to_string(t.n_batch),
             std::to_string(t.n_ubatch),
             std::to_string(t.n_threads),
             t.type_k,
             t.type_v,
             std::to_string(t.n_gpu_layers),
             std::to_string(t.flash_attn),
             std::to_string(t.use_mmap),
             std::to_string(t.n_prompt),
             std::to_string(t.n_gen),
             t.test_time,
             std::to_string(t.avg_ns()),
             std::to_string(t.stdev_ns()),
             avg,
             sd,
             t.label };
}

std::string json_escape(const std::string & s) {
    std::string out;
    for (unsigned char c : s) {
        if (c == '"') out += "\\\"";
        else if (c == '\\') out += "\\\\";
        else if (c < 0x20) {
            char b[8];
            std::snprintf(b, sizeof(b), "\\u%04x", c);
            out += b;
        } else out += (char) c;
    }
    return out;
}

std::string json_fields(const test & t, const char * indent, const char * sep) {
    const auto v = values(t);
    std::string out;
    for (size_t i = 0; i < fields().size(); ++i) {
        const auto & [name, kind] = fields()[i];
        out += indent;
        out += "\"" + std::string(name) + "\": ";
        if (kind == STRING) out += "\"" + json_escape(v[i]) + "\"";
        else if (kind == BOOL) out += v[i] == "0" ? "false" : "true";
        else out += v[i];
        out += sep;
    }
    std::vector<std::string> ts;
    for (double x : t.samples_ts()) {
        char b[32];
        std::snprintf(b, sizeof(b), "%g", x);
        ts.push_back(b);
    }
    out += indent + std::string("\"samples_ns\": [ ") + join(t.samples_ns, ", ") + " ]" + sep;
    out += indent + std::string("\"samples_ts\": [ ") + join(ts, ", ") + " ]";
    return out;
}

// ---- markdown --------------------------------------------------------------------------------

struct md_column {
    std::string field, title;
    int width;   // negative: left-aligned
};

std::vector<md_column> md_columns(const bench_params & p) {
    const bench_params d = defaults();
    std::vector<md_column> c = { { "model", "model", -30 }, { "size", "size", 10 }, { "params", "params", 10 },
                                 { "backends", "backend", -10 }, { "n_threads", "threads", 7 } };
    if (p.n_batch != d.n_batch) c.push_back({ "n_batch", "n_batch", 7 });
    if (p.n_ubatch != d.n_ubatch) c.push_back({ "n_ubatch", "n_ubatch", 8 });
    if (p.type_k != d.type_k) c.push_back({ "type_k", "type_k", 6 });
    if (p.type_v != d.type_v) c.push_back({ "type_v", "type_v", 6 });
    if (p.flash_attn != d.flash_attn) c.push_back({ "flash_attn", "fa", 2 });
    if (p.use_mmap != d.use_mmap) c.push_back({ "use_mmap", "mmap", 4 });
    c.push_back({ "test", "test", 13 });
    c.push_back({ "t/s", "t/s", 16 });
    return c;
}

void print_md_header(FILE * out, const std::vector<md_column> & cols) {
    std::fprintf(out, "|");
    for (const auto & c : cols) std::fprintf(out, " %*s |", c.width, c.title.c_str());
    std::fprintf(out, "\n|");
    for (const auto & c : cols) std::fprintf(out, " %s%s |", std::string(std::abs(c.width) - 1, '-').c_str(), c.width > 0 ? ":" : "-");
    std::fprintf(out, "\n");
}

void print_md_row(FILE * out, const std::vector<md_column> & cols, const test & t) {
    std::map<std::string, std::string> vm;
    const auto v = values(t);
    for (size_t i = 0; i < fields().size(); ++i) vm[fields()[i].first] = v[i];
    std::fprintf(out, "|");
    for (const auto & c : cols) {
        char buf[128];
        std::string value;
        int width = c.width;
        if (c.field == "size") {
            if (t.model_size < (1ull << 30)) std::snprintf(buf, sizeof(buf), "%.2f MiB", t.model_size / 1048576.0);
            else std::snprintf(buf, sizeof(buf), "%.2f GiB", t.model_size / 1073741824.0);
            value = buf;
        } else if (c.field == "params") {
            if (t.model_n_params < 1000000000ull) std::snprintf(buf, sizeof(buf), "%.2f M", t.model_n_params / 1e6);
            else std::snprintf(buf, sizeof(buf), "%.2f B", t.model_n_params / 1e9);
            value = buf;
        } else if (c.field == "t/s") {
            std::snprintf(buf, sizeof(buf), "%.2f ± %.2f", t.avg_ts(), t.stdev_ts());
            value = buf;
            width += 1;   // '±' is two bytes in UTF-8 but one column
        } else if (c.field == "model") {
            value = t.model_type;
        } else {
            value = vm[c.field];
        }
        std::fprintf(out, " %*s |", width, value.c_str());
    }
    std::fprintf(out, "\n");
    std::fflush(out);
}

// ---- measurement -----------------------------------------------------------------------------

uint64_t now_ns() {
    return (uint64_t) std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

bool run_prompt(llama_context * ctx, const llama_vocab * vocab, int n_prompt, int n_batch) {
    const int n_vocab = llama_vocab_n_tokens(vocab);
    std::vector<llama_token> tokens(n_batch);
    for (int done = 0; done < n_prompt;) {
        const int n = std::min(n_prompt - done, n_batch);
        for (int i = 0; i < n; ++i) tokens[i] = std::rand() % n_vocab;
        if (done == 0 && llama_vocab_get_add_bos(vocab)) tokens[0] = llama_vocab_bos(vocab);
        if (llama_decode(ctx, llama_batch_get_one(tokens.data(), n)) != 0) return false;
        done += n;
    }
    return true;
}

bool run_gen(llama_context * ctx, const llama_vocab * vocab, int n_gen) {
    const int n_vocab = llama_vocab_n_tokens(vocab);
    llama_token tok = llama_vocab_get_add_bos(vocab) ? llama_vocab_bos(vocab) : std::rand() % n_vocab;
    for (int i = 0; i < n_gen; ++i) {
        if (llama_decode(ctx, llama_batch_get_one(&tok, 1)) != 0) return false;
        tok = std::rand() % n_vocab;
    }
    return true;
}

std::string utc_now() {
    const std::time_t t = std::time(nullptr);
    char buf[32];
    std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    return buf;
}

void quiet_log(ggml_log_level, const char *, void *) {}

} // namespace

int main(int argc, char ** argv) {
    bench_params p;
    if (!parse(argc, argv, p)) return 1;
    if (p.verbose) common_log_install();
    else llama_log_set(quiet_log, nullptr);

    std::string demo_path;
    if (p.demo && p.models.empty()) {
        std::string err;
        if (!kiln_synth_demo_model(demo_path, err)) {
            std::fprintf(stderr, "error: --demo: %s\n", err.c_str());
            return 1;
        }
        p.models.push_back(demo_path);
    }
    struct cleanup {
        std::string path;
        ~cleanup() {
            if (!path.empty()) std::remove(path.c_str());
        }
    } demo_cleanup{ demo_path };

    // the tests: pp, tg and pp+tg for every combination; ordered so a model loads once
    std::vector<test> tests;
    for (const auto & m : p.models)
    for (int mmp : p.use_mmap)
    for (int ngl : p.n_gpu_layers)
    for (int nb : p.n_batch)
    for (int nub : p.n_ubatch)
    for (const auto & tk : p.type_k)
    for (const auto & tv : p.type_v)
    for (int fa : p.flash_attn)
    for (int nt : p.n_threads) {
        test base;
        base.model = m;
        base.use_mmap = mmp;
        base.n_gpu_layers = ngl;
        base.n_batch = nb;
        base.n_ubatch = nub;
        base.type_k = tk;
        base.type_v = tv;
        base.flash_attn = fa;
        base.n_threads = nt;
        for (int n : p.n_prompt) {
            if (n == 0) continue;
            test t = base;
            t.n_prompt = n;
            t.label = "pp" + std::to_string(n);
            tests.push_back(t);
        }
        for (int n : p.n_gen) {
            if (n == 0) continue;
            test t = base;
            t.n_gen = n;
            t.label = "tg" + std::to_string(n);
            tests.push_back(t);
        }
        for (const auto & [pp, tg] : p.n_pg) {
            test t = base;
            t.n_prompt = pp;
            t.n_gen = tg;
            t.label = "pp" + std::to_string(pp) + "+tg" + std::to_string(tg);
            tests.push_back(t);
        }
    }

    llama_backend_init();
    FILE * out = stdout;
    const std::vector<md_column> cols = md_columns(p);
    if (p.output == "md") print_md_header(out, cols);
    else if (p.output == "csv") {
        std::vector<std::string> names;
        for (const auto & f : fields()) names.push_back(f.first);
        std::fprintf(out, "%s\n", join(names, ",").c_str());
    } else if (p.output == "json") {
        std::fprintf(out, "[\n");
    } else if (p.output == "sql") {
        std::fprintf(out, "CREATE TABLE IF NOT EXISTS test (\n");
        for (size_t i = 0; i < fields().size(); ++i) {
            const field_kind k = fields()[i].second;
            std::fprintf(out, "  %s %s%s\n", fields()[i].first, k == STRING ? "TEXT" : k == FLOAT ? "REAL" : "INTEGER",
                         i + 1 < fields().size() ? "," : "");
        }
        std::fprintf(out, ");\n\n");
    }
    std::fflush(out);

    llama_model * model = nullptr;
    std::string loaded;
    int loaded_mmap = -1;
    int rc = 0;
    bool first_json = true;
    for (test & t : tests) {
        if (!model || loaded != t.model || loaded_mmap != t.use_mmap) {
            if (model) llama_model_free(model);
            llama_model_params mp = llama_model_default_params();
            mp.use_mmap = t.use_mmap != 0;
            mp.n_gpu_layers = t.n_gpu_layers;
            model = llama_model_load_from_file(t.model.c_str(), mp);
            if (!model) {
                std::fprintf(stderr, "error: failed to load model '%s': %s\n", t.model.c_str(), llama_last_error());
                rc = 1;
                break;
            }
            loaded = t.model;
            loaded_mmap = t.use_mmap;
        }
        char desc[128];
        llama_model_desc(model, desc, sizeof(desc));
        t.model_type = desc;
        t.model_size = llama_model_size(model);
        t.model_n_params = llama_model_n_params(model);
        t.test_time = utc_now();

        llama_context_params cp = llama_context_default_params();
        cp.n_ctx = (uint32_t) (t.n_prompt + t.n_gen);
        cp.n_batch = (uint32_t) t.n_batch;
        cp.n_ubatch = (uint32_t) std::min(t.n_ubatch, t.n_batch);
        cp.n_threads = cp.n_threads_batch = t.n_threads;
        cp.flash_attn_type = t.flash_attn ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
        cp.type_k = common_kv_cache_type_from_str(t.type_k);
        cp.type_v = common_kv_cache_type_from_str(t.type_v);
        llama_context * ctx = llama_init_from_model(model, cp);
        if (!ctx) {
            std::fprintf(stderr, "error: failed to create a context for '%s' (%s): %s\n", t.model.c_str(), t.label.c_str(),
                         llama_last_error());
            rc = 1;
            break;
        }
        const llama_vocab * vocab = llama_model_get_vocab(model);
        bool ok = true;
        if (p.warmup) {
            // every expert routed, so the first repetition does not pay first touches of the weights
            llama_set_warmup(ctx, true);
            if (t.n_prompt > 0) ok = ok && run_prompt(ctx, vocab, 1, t.n_batch);
            if (t.n_gen > 0) ok = ok && run_gen(ctx, vocab, 1);
            llama_set_warmup(ctx, false);
        }
        for (int r = 0; r < p.reps && ok; ++r) {
            llama_memory_clear(ctx);
            const uint64_t t0 = now_ns();
            if (t.n_prompt > 0) ok = ok && run_prompt(ctx, vocab, t.n_prompt, t.n_batch);
            if (t.n_gen > 0) ok = ok && run_gen(ctx, vocab, t.n_gen);
            t.samples_ns.push_back(now_ns() - t0);
        }
        llama_free(ctx);
        if (!ok) {
            std::fprintf(stderr, "error: llama_decode failed in test %s of '%s'\n", t.label.c_str(), t.model.c_str());
            rc = 1;
            break;
        }

        if (p.output == "md") {
            print_md_row(out, cols, t);
        } else if (p.output == "csv") {
            std::vector<std::string> v = values(t);
            for (auto & s : v) {
                std::string e = "\"";
                for (char c : s) e += c == '"' ? std::string("\"\"") : std::string(1, c);
                s = e + "\"";
            }
            std::fprintf(out, "%s\n", join(v, ",").c_str());
        } else if (p.output == "json") {
            std::fprintf(out, "%s  {\n%s\n  }", first_json ? "" : ",\n", json_fields(t, "    ", ",\n").c_str());
            first_json = false;
        } else if (p.output == "jsonl") {
            std::fprintf(out, "{%s}\n", json_fields(t, "", ", ").c_str());
        } else if (p.output == "sql") {
            std::vector<std::string> names;
            for (const auto & f : fields()) names.push_back(f.first);
            std::vector<std::string> v = values(t);
            for (auto & s : v) {
                std::string e = "'";
                for (char c : s) e += c == '\'' ? std::string("''") : std::string(1, c);
                s = e + "'";
            }
            std::fprintf(out, "INSERT INTO test (%s) VALUES (%s);\n", join(names, ", ").c_str(), join(v, ", ").c_str());
        }
        std::fflush(out);
    }
    if (p.output == "json") std::fprintf(out, "%s]\n", first_json ? "" : "\n");
    if (p.output == "md" && rc == 0) std::fprintf(out, "\nbuild: kiln (1)\n");
    if (model) llama_model_free(model);
    llama_backend_free();
    return rc;
}
