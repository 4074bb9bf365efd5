// llama-quantize: the command line of llama.cpp / ik_llama.cpp's tool,
//   llama-quantize [options] in.gguf [out.gguf] TYPE [nthreads]
// over the recipe and writer in src/llama-quantize.cpp.
#include "llama-imatrix.h"
#include "llama-quantize.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

void print_usage(FILE * out) {
    std::fprintf(out,
        "usage: llama-quantize [options] model-f32.gguf [model-quant.gguf] TYPE [nthreads]\n"
        "       llama-quantize --repack [--repack-pattern RE] model.gguf model-repacked.gguf [TYPE] [nthreads]\n\n"
        "  --allow-requantize       allow requantizing tensors that are already quantized (quality suffers)\n"
        "  --leave-output-tensor    leave output.weight unquantized (bigger file, better quality)\n"
        "  --pure                   the default type for every tensor, no mix (fallbacks still apply)\n"
        "  --imatrix FILE           importance matrix (legacy .dat or GGUF) to weight the quantization error\n"
        "  --include-weights NAME   use the imatrix only for tensors whose name contains NAME (repeatable)\n"
        "  --exclude-weights NAME   do not use the imatrix for tensors whose name contains NAME (repeatable)\n"
        "  --output-tensor-type T   type of output.weight\n"
        "  --token-embedding-type T type of token_embd.weight\n"
        "  --custom-q RULES         regex=type[,regex=type...], first match wins (repeatable; or a file with\n"
        "                           one rule per line and # comments)\n"
        "  --override-kv KEY=TYPE:VALUE  set a metadata key in the output (TYPE: int, float, bool, str)\n"
        "  --keep-split             write one output part per input part\n"
        "  --dry-run                print each tensor's type and the size, write nothing\n"
        "  --ignore-imatrix-rules   quantize very low-bit types without an imatrix anyway\n"
        "  --repack                 no quantizing: repack every quantized tensor that has a row-interleaved\n"
        "                           twin (q4_K -> q4_k_r4, iq4_xs -> iq4_xs_r8, ...) into it. TYPE is\n"
        "                           optional: the reference's command form requires one, so a valid\n"
        "                           type is accepted and the log says it selects nothing\n"
        "  --repack-pattern RE[,RE] with --repack: only tensors whose name matches one of the regexes\n"
        "  -h, --help               this text and the file types\n\n"
        "TYPE is a name (any case) or number:\n\n");
    for (const auto & f : llama_quant_ftypes()) std::fprintf(out, "  %4d  or  %-11s: %s\n", (int) f.id, f.name, f.desc);
}

int fail(const std::string & msg) {
    std::fprintf(stderr, "llama-quantize: error: %s\n", msg.c_str());
    return 1;
}

bool file_exists(const std::string & p) {
    struct stat st;
    return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string fmt_shape(const llama_quant_tensor & t) {
    char buf[96];
    std::snprintf(buf, sizeof(buf), "[%5lld, %5lld, %4lld, %2lld]", (long long) t.ne[0], (long long) t.ne[1],
                  (long long) t.ne[2], (long long) t.ne[3]);
    return buf;
}

} // namespace

int main(int argc, char ** argv) {
    llama_quant_params params;
    std::vector<std::string> include_w, exclude_w, positional;
    std::string imatrix_file;
    bool custom_given = false;

    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&](std::string & out) {
            if (i + 1 >= argc) throw std::runtime_error("flag " + a + " needs a value");
            out = argv[++i];
        };
        try {
            if (a == "-h" || a == "--help") {
                print_usage(stdout);
                return 0;
            } else if (a == "--allow-requantize") {
                params.allow_requantize = true;
            } else if (a == "--leave-output-tensor") {
                params.quantize_output_tensor = false;
            } else if (a == "--pure") {
                params.pure = true;
            } else if (a == "--dry-run") {
                params.dry_run = true;
            } else if (a == "--keep-split") {
                params.keep_split = true;
            } else if (a == "--ignore-imatrix-rules") {
                params.ignore_imatrix_rules = true;
            } else if (a == "--repack") {
                params.repack = true;
            } else if (a == "--repack-pattern") {
                std::string v;
                value(v);
                for (size_t start = 0; start <= v.size();) {
                    size_t end = v.find(',', start);
                    if (end == std::string::npos) end = v.size();
                    const std::string re = v.substr(start, end - start);
                    if (!re.empty()) {
                        try {
                            params.repack_patterns.push_back({ re, std::regex(re), GGML_TYPE_COUNT });
                        } catch (const std::regex_error & e) {
                            throw std::runtime_error("--repack-pattern '" + re + "': invalid regular expression: " + e.what());
                        }
                    }
                    start = end + 1;
                }
            } else if (a == "--imatrix") {
                value(imatrix_file);
            } else if (a == "--include-weights") {
                std::string v;
                value(v);
                include_w.push_back(v);
            } else if (a == "--exclude-weights") {
                std::string v;
                value(v);
                exclude_w.push_back(v);
            } else if (a == "--output-tensor-type" || a == "--token-embedding-type") {
                std::string v;
                value(v);
                const ggml_type t = llama_quant_type_find(v);
                if (t == GGML_TYPE_COUNT) throw std::runtime_error("flag " + a + ": unknown type '" + v + "'");
                (a == "--output-tensor-type" ? params.output_tensor_type : params.token_embedding_type) = t;
            } else if (a == "--custom-q") {
                std::string v;
                value(v);
                custom_given = true;
                if (file_exists(v)) {
                    std::ifstream f(v);
                    std::stringstream ss;
                    ss << f.rdbuf();
                    llama_quant_parse_rules(ss.str(), params.custom_rules);
                } else {
                    llama_quant_parse_rules(v, params.custom_rules);
                }
            } else if (a == "--override-kv") {
                std::string v;
                value(v);
                params.kv_overrides.push_back(llama_quant_parse_kv_override(v));
            } else if (a.size() > 1 && a[0] == '-' && !std::isdigit((unsigned char) a[1])) {
                print_usage(stderr);
                return fail("unknown flag " + a);
            } else {
                positional.push_back(a);
            }
        } catch (const std::exception & e) {
            return fail(e.what());
        }
    }
    if (custom_given && params.custom_rules.empty()) return fail("--custom-q: no rules given");
    if (!params.repack_patterns.empty() && !params.repack) return fail("--repack-pattern needs --repack");
    if (!include_w.empty() && !exclude_w.empty()) return fail("only one of --include-weights and --exclude-weights can be used");

    // in [out] TYPE [nthreads], read left to right as the reference does: the second argument
    // is the type if it names one, else the output file. --repack needs no type (each tensor goes
    // to its own twin), but the reference requires one there too, so it may still be given.
    if (positional.size() < 2) {
        print_usage(stderr);
        return fail(params.repack ? "expected an input model and an output file" : "expected an input model and a type");
    }
    std::string fname_in = positional[0], fname_out, type_arg;
    size_t next = 1;
    if (!llama_quant_ftype_find(positional[1])) {
        fname_out = positional[1];
        next = 2;
        if (positional.size() < 3 && !params.repack) return fail("expected a type after the output file " + fname_out);
    }
    if (next < positional.size()) type_arg = positional[next++];
    if (next < positional.size()) {
        char * end = nullptr;
        params.nthread = (int) std::strtol(positional[next].c_str(), &end, 10);
        if (!end || *end || params.nthread <= 0) return fail("bad thread count '" + positional[next] + "'");
        ++next;
    }
    if (next < positional.size()) return fail("too many arguments: expected in.gguf [out.gguf] TYPE [nthreads]");
    const llama_ftype_info * ft = type_arg.empty() ? nullptr : llama_quant_ftype_find(type_arg);
    if (!type_arg.empty() && !ft) {
        print_usage(stderr);
        return fail("unknown file type '" + type_arg + "'");
    }
    if (ft) params.ftype = ft->id;
    if (params.repack && ft) {
        std::fprintf(stderr, "llama-quantize: --repack: type %s selects nothing (every quantized tensor with an interleaved "
                     "twin is repacked; --repack-pattern selects tensors)\n", ft->name);
    }
    if (fname_out.empty()) {
        const size_t slash = fname_in.find_last_of('/');
        fname_out = (slash == std::string::npos ? std::string() : fname_in.substr(0, slash + 1)) + "ggml-model-" + ft->name + ".gguf";
    }
    if (!file_exists(fname_in)) return fail(fname_in + ": no such file");

    llama_imatrix imx;
    std::map<std::string, std::vector<float>> imatrix_map;
    if (!imatrix_file.empty()) {
        std::string err;
        if (!llama_imatrix_load(imatrix_file, imx, err)) return fail("--imatrix: " + err);
        imatrix_map = imx.means();
        for (auto it = imatrix_map.begin(); it != imatrix_map.end();) {
            bool keep = include_w.empty();
            for (const auto & w : include_w) keep = keep || it->first.find(w) != std::string::npos;
            for (const auto & w : exclude_w) keep = keep && it->first.find(w) == std::string::npos;
            it = keep ? std::next(it) : imatrix_map.erase(it);
        }
        std::fprintf(stderr, "llama-quantize: imatrix %s: %zu entries, %d chunks\n", imatrix_file.c_str(), imatrix_map.size(),
                     imx.chunk_count);
        params.imatrix = &imatrix_map;
        params.imatrix_file = imatrix_file;
        params.imatrix_dataset = imx.datasets.empty() ? std::string() : imx.datasets.back();
        params.imatrix_chunks = imx.chunk_count;
    } else if (!include_w.empty() || !exclude_w.empty()) {
        return fail("--include-weights / --exclude-weights need --imatrix");
    }

    const int nthread = params.nthread > 0 ? params.nthread : (int) std::max(1u, std::thread::hardware_concurrency());
    params.nthread = nthread;
    std::fprintf(stderr, "llama-quantize: %s %s -> %s as %s (%d threads)\n",
                 params.dry_run ? "planning" : params.repack ? "repacking" : "quantizing", fname_in.c_str(),
                 params.dry_run ? "(dry run)" : fname_out.c_str(), params.repack ? "interleaved twins" : ft->name, nthread);
    params.progress = [&](int i, int n, const llama_quant_tensor & t) {
        const bool changed = t.quantize || t.repack;
        std::printf("[%4d/%4d] %40s - %s, type = %6s, %s%s%s size = %9.3f MiB -> %9.3f MiB%s\n", i + 1, n, t.name.c_str(),
                    fmt_shape(t).c_str(), ggml_type_name(t.src_type),
                    t.repack ? "repacking to " : t.quantize ? "converting to " : "keeping as is ",
                    changed ? ggml_type_name(t.new_type) : "", changed ? " .." : "", t.src_size / 1048576.0,
                    t.new_size / 1048576.0, t.fallback ? " (fallback)" : t.custom ? " (custom rule)" : "");
        std::fflush(stdout);
    };
    try {
        llama_quant_plan_result plan;
        const llama_quant_stats s = llama_quant_model(fname_in, fname_out, params, &plan);
        uint64_t n_el = 0;
        for (const auto & t : plan.tensors) n_el += (uint64_t) t.nelements();
        std::printf("model size  = %10.2f MiB (%.3f BPW)\n", s.size_org / 1048576.0, n_el ? 8.0 * s.size_org / n_el : 0.0);
        std::printf("quant size  = %10.2f MiB (%.3f BPW)\n", s.size_new / 1048576.0, n_el ? 8.0 * s.size_new / n_el : 0.0);
        if (plan.n_fallback > 0) {
            std::printf("%d of %d tensor(s) required fallback quantization\n", plan.n_fallback, s.n_quantized);
        }
        if (!params.dry_run) std::fprintf(stderr, "llama-quantize: wrote %s\n", fname_out.c_str());
    } catch (const std::exception & e) {
        return fail(e.what());
    }
    return 0;
}
