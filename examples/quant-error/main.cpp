// kiln-quant-error: how much a quantization type loses on the tensors of a real model, measured
// against the unquantized weights and real activations, tensor by tensor (per expert for 3-D
// expert tensors), for Kiln's quantizer and for a file quantized by another tool.
//
//   kiln-quant-error (-m model-f16.gguf | --demo) (--type T | --ref model-quant.gguf) [--imatrix FILE]
//                    [-f text.txt] [--tokens 512] [--tensors REGEX] [--no-matmul] [--expert-prior ROWS]
//
// Per tensor it prints
//   - quantization error: rel_rmse = |Wq - W| / |W|, the imatrix-weighted one (column j weighted
//     by the imatrix mean of x_j^2), and with -f the error on the real activations X that the f16
//     model feeds this tensor over the text, |(Wq - W) X| / |W X|: the one that matters.
//     The gain is the least-squares factor of the quantized over the exact values (1: no shrinking).
//     "kiln" is Kiln's quantizer without an imatrix, "kiln+im" with it (experts' means drawn towards
//     the pooled mean by --expert-prior rows, as llama-quantize does; 0: raw), "ref" the --ref file's
//     tensor (its type picks the type Kiln quantizes to);
//   - with -f, the matmul path's error: the product of the quantized weights Wq with X through
//     every CPU kernel level this machine runs (activations encoded as that level encodes them),
//     relative to the float64 product Wq X of the same decoded weights, with all columns at once
//     (the batch panels, with the batch activation type where the type has one) and one column
//     per call (token generation). "per-32 bf16" is what
//     activations rounded to 8 bits in blocks of 32 with a bf16 scale (the reference's q8_2
//     layout on x86) would cost, computed exactly: a yardstick for Kiln's own activation rounding.
// Totals over all tensors come last. Nothing is written.
#include "common.h"
#include "cpu-traits.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "gguf.h"
#include "llama-imatrix.h"
#include "llama-quantize.h"
#include "llama.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct options {
    std::string model, ref, imatrix, text, type_name;
    std::string tensors = ".*";
    int         n_tokens = 512;
    bool        matmul = true;
    bool        demo = false;
    double      expert_prior = llama_imatrix::k_expert_prior_rows;
};

[[noreturn]] void usage(const char * msg) {
    if (msg) std::fprintf(stderr, "error: %s\n", msg);
    std::fprintf(stderr,
        "usage: kiln-quant-error (-m model.gguf | --demo) (--type T | --ref quantized.gguf) [--imatrix FILE]\n"
        "                        [-f text.txt] [--tokens N] [--tensors REGEX] [--no-matmul] [--expert-prior ROWS]\n");
    std::exit(msg ? 1 : 0);
}

// A GGUF file's tensor table with the bytes read on demand.
struct gguf_file {
    std::string    path;
    gguf_context * ctx = nullptr;
    ~gguf_file() { if (ctx) gguf_free(ctx); }

    bool open(const std::string & p, std::string & err) {
        path = p;
        gguf_init_params params = { /*no_alloc =*/ true, /*ctx =*/ nullptr };
        ctx = gguf_init_from_file(p.c_str(), params);
        if (!ctx) err = p + ": " + (gguf_last_error() ? gguf_last_error() : "cannot read");
        return ctx != nullptr;
    }
    int64_t find(const std::string & name) const { return gguf_find_tensor(ctx, name.c_str()); }
    std::vector<uint8_t> read(int64_t id) const {
        std::vector<uint8_t> out(gguf_get_tensor_size(ctx, id));
        std::ifstream in(path, std::ios::binary);
        in.seekg((std::streamoff) (gguf_get_data_offset(ctx) + gguf_get_tensor_offset(ctx, id)));
        in.read((char *) out.data(), (std::streamsize) out.size());
        if (!in) out.clear();
        return out;
    }
};

// Rows of type t decoded to floats; interleaved types decode their row groups.
std::vector<float> decode(ggml_type t, const uint8_t * data, int64_t nrows, int64_t ncols) {
    const ggml_type_traits * tt = ggml_get_type_traits(t);
    std::vector<float> out(nrows * ncols);
    if (t == GGML_TYPE_F32) {
        std::memcpy(out.data(), data, out.size() * sizeof(float));
        return out;
    }
    const int64_t group = tt->nrows_interleaved > 1 ? tt->nrows_interleaved : 1;
    const size_t row_size = ggml_row_size(t, ncols);
    for (int64_t r = 0; r < nrows; r += group) tt->to_float(data + r * row_size, out.data() + r * ncols, ncols * group);
    return out;
}

// ---- activations: the inputs of each weight's matmuls while the f16 model reads the text ----

struct captured {
    int64_t                         k = 0;
    std::vector<std::vector<float>> rows;   // per matrix (expert): rows of k values
};

struct capture {
    std::regex                          want;
    int64_t                             max_rows = 512;   // per matrix
    std::map<std::string, captured>     by_weight;

    static std::string weight_name(const ggml_tensor * w) {
        const std::string n = w->name;
        const size_t p = n.find(".weight");
        return p == std::string::npos ? std::string() : n.substr(0, p + 7);
    }
    void add(const ggml_tensor * w, const ggml_tensor * x, const ggml_tensor * ids) {
        const std::string name = weight_name(w);
        if (name.empty() || !std::regex_search(name, want)) return;
        if (x->type != GGML_TYPE_F32) return;
        captured & c = by_weight[name];
        const int64_t n_mat = w->ne[2] * w->ne[3];
        c.k = x->ne[0];
        if ((int64_t) c.rows.size() < n_mat) c.rows.resize(n_mat);
        auto push = [&](const char * p, int64_t mat) {
            std::vector<float> & r = c.rows[mat];
            if ((int64_t) r.size() >= max_rows * c.k) return;
            r.insert(r.end(), (const float *) p, (const float *) p + c.k);
        };
        const char * base = (const char *) x->data;
        if (ids) {
            for (int64_t t = 0; t < ids->ne[1]; ++t) {
                for (int64_t i = 0; i < ids->ne[0]; ++i) {
                    const int32_t e = *(const int32_t *) ((const char *) ids->data + t * ids->nb[1] + i * ids->nb[0]);
                    if (e >= 0 && e < n_mat) push(base + (i % x->ne[1]) * x->nb[1] + t * x->nb[2], e);
                }
            }
            return;
        }
        for (int64_t i3 = 0; i3 < x->ne[3]; ++i3) {
            for (int64_t i2 = 0; i2 < x->ne[2]; ++i2) {
                const int64_t mat = n_mat > 1 ? (i3 % w->ne[3]) * w->ne[2] + (i2 % w->ne[2]) : 0;
                for (int64_t i1 = 0; i1 < x->ne[1]; ++i1) push(base + i1 * x->nb[1] + i2 * x->nb[2] + i3 * x->nb[3], mat);
            }
        }
    }
    static bool callback(ggml_tensor * t, bool ask, void * user_data) {
        const bool mm = t->op == GGML_OP_MUL_MAT || t->op == GGML_OP_MUL_MAT_ID || t->op == GGML_OP_MOE_FUSED_UP_GATE;
        if (ask) return mm;
        auto * c = (capture *) user_data;
        switch (t->op) {
            case GGML_OP_MUL_MAT: c->add(t->src[0], t->src[1], nullptr); break;
            case GGML_OP_MUL_MAT_ID: c->add(t->src[0], t->src[1], t->src[2]); break;
            case GGML_OP_MOE_FUSED_UP_GATE:
                c->add(t->src[0], t->src[2], t->src[3]);
                c->add(t->src[1], t->src[2], t->src[3]);
                break;
            default: break;
        }
        return true;
    }
};

bool collect_activations(const options & o, capture & cap, std::string & err) {
    std::ifstream in(o.text);
    if (!in) { err = o.text + ": cannot read"; return false; }
    std::stringstream ss;
    ss << in.rdbuf();
    llama_model_params mp = llama_model_default_params();
    llama_model * model = llama_model_load_from_file(o.model.c_str(), mp);
    if (!model) { err = o.model + ": " + (llama_last_error() ? llama_last_error() : "cannot load"); return false; }
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = cp.n_batch = cp.n_ubatch = (uint32_t) o.n_tokens;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.cb_eval = capture::callback;
    cp.cb_eval_user_data = &cap;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        err = std::string("cannot create a context: ") + (llama_last_error() ? llama_last_error() : "");
        llama_model_free(model);
        return false;
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    std::vector<llama_token> tokens = common_tokenize(vocab, ss.str(), llama_vocab_get_add_bos(vocab), false);
    bool ok = (int) tokens.size() >= o.n_tokens;
    if (!ok) err = o.text + ": fewer than --tokens tokens";
    if (ok) {
        llama_batch batch = llama_batch_init(o.n_tokens, 0, 1);
        batch.n_tokens = o.n_tokens;
        for (int i = 0; i < o.n_tokens; ++i) {
            batch.token[i] = tokens[i];
            batch.pos[i] = i;
            batch.n_seq_id[i] = 1;
            batch.seq_id[i][0] = 0;
            batch.logits[i] = i == o.n_tokens - 1;
        }
        ok = llama_decode(ctx, batch) == 0;
        if (!ok) err = "decode failed";
        llama_batch_free(batch);
    }
    llama_free(ctx);
    llama_model_free(model);
    return ok;
}

// ---- error sums (numerator and denominator of a relative error, summed over experts) ----

struct rel {
    double e = 0, s = 0;
    double c = 0;   // sum of q * w: c / s is the gain (least-squares factor of q over w)
    void   add(const rel & o) { e += o.e; s += o.s; c += o.c; }
    double value() const { return s > 0 ? std::sqrt(e / s) : 0.0; }
    double gain() const { return s > 0 ? c / s : 0.0; }
};

// |q - w| / |w| over rows, optionally weighting column j by im[j]
rel weight_error(const std::vector<float> & q, const std::vector<float> & w, int64_t ncols, const float * im) {
    rel r;
    for (size_t i = 0; i < w.size(); ++i) {
        const double c = im ? im[i % ncols] : 1.0, d = (double) q[i] - w[i];
        r.e += c * d * d;
        r.s += c * (double) w[i] * w[i];
        r.c += c * (double) q[i] * w[i];
    }
    return r;
}

// y[c][r] = sum_k w[r][k] x[c][k] in double
std::vector<double> product(const std::vector<float> & w, const std::vector<float> & x, int64_t nrows, int64_t k) {
    const int64_t ncol = (int64_t) x.size() / k;
    std::vector<double> y(ncol * nrows);
    std::vector<double> xd(k);
    for (int64_t c = 0; c < ncol; ++c) {
        for (int64_t j = 0; j < k; ++j) xd[j] = x[c * k + j];
        for (int64_t r = 0; r < nrows; ++r) {
            const float * wr = w.data() + r * k;
            double s = 0;
            for (int64_t j = 0; j < k; ++j) s += wr[j] * xd[j];
            y[c * nrows + r] = s;
        }
    }
    return y;
}

template <typename A>
rel product_error(const A & y, const std::vector<double> & exact) {
    rel r;
    for (size_t i = 0; i < exact.size(); ++i) {
        const double d = (double) y[i] - exact[i];
        r.e += d * d;
        r.s += exact[i] * exact[i];
        r.c += (double) y[i] * exact[i];
    }
    return r;
}

float bf16_round(float v) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    u = (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000u;
    std::memcpy(&v, &u, 4);
    return v;
}

// activations rounded to 8 bits per block of 32 with a bf16 scale (quants made with that scale)
std::vector<float> round_per32_bf16(const std::vector<float> & x) {
    std::vector<float> out(x.size());
    for (size_t b = 0; b < x.size(); b += 32) {
        const size_t n = std::min<size_t>(32, x.size() - b);
        float amax = 0;
        for (size_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[b + i]));
        const float d = bf16_round(amax / 127.0f);
        for (size_t i = 0; i < n; ++i) {
            const float q = d > 0 ? std::min(127.0f, std::max(-127.0f, std::nearbyint(x[b + i] / d))) : 0.0f;
            out[b + i] = q * d;
        }
    }
    return out;
}

// The matmul path's error for one expert: Wq (raw rows of type t) times X through the gemm of
// ISA level isa, against the float64 product of the decoded rows; batch = all columns at once
// (through the type's batch kernel and activation type where it has them at that level, as
// mul_mat does for batches: cpu-traits.h), or one column per call.
rel gemm_error(ggml_type t, const std::vector<uint8_t> & wq, const std::vector<float> & x, int64_t nrows, int64_t k, ggml_cpu_isa isa, bool one_by_one, const std::vector<double> & exact) {
    const ggml_cpu_type_traits * ct = ggml_cpu_get_type_traits(t);
    const bool batch_pair = !one_by_one && ct->batch_gemm[isa] != nullptr;
    const ggml_gemm_t gemm = batch_pair ? ct->batch_gemm[isa] : ggml_cpu_gemm_at(t, isa);
    const ggml_type vdt = batch_pair ? ct->batch_vec_dot_type : ct->vec_dot_type;
    ggml_from_float_t enc = ggml_cpu_from_float_at(vdt, isa);
    if (!enc) enc = ggml_get_type_traits(vdt)->from_float_ref;
    const int64_t ncol = (int64_t) x.size() / k;
    const size_t xrow = ggml_row_size(vdt, k);
    std::vector<uint8_t> xq(ncol * xrow);
    if (vdt == GGML_TYPE_F32) {
        std::memcpy(xq.data(), x.data(), x.size() * sizeof(float));
    } else {
        for (int64_t c = 0; c < ncol; ++c) enc(x.data() + c * k, xq.data() + c * xrow, k);
    }
    std::vector<float> y(ncol * nrows);
    const size_t wrow = ggml_row_size(t, k);
    if (one_by_one) {
        for (int64_t c = 0; c < ncol; ++c) gemm(k, wq.data(), wrow, xq.data() + c * xrow, xrow, y.data() + c * nrows, nrows, (int) nrows, 1);
    } else {
        gemm(k, wq.data(), wrow, xq.data(), xrow, y.data(), nrows, (int) nrows, (int) ncol);
    }
    return product_error(y, exact);
}

struct variant {
    std::string          name;
    ggml_type            type;
    std::vector<uint8_t> data;   // all experts' rows
};

struct totals {
    std::map<std::string, rel> m;
    void add(const std::string & k, const rel & r) { m[k].add(r); }
};

} // namespace

int main(int argc, char ** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) usage((a + " needs a value").c_str());
            return argv[++i];
        };
        if (a == "-m") o.model = next();
        else if (a == "--ref") o.ref = next();
        else if (a == "--type") o.type_name = next();
        else if (a == "--imatrix") o.imatrix = next();
        else if (a == "-f") o.text = next();
        else if (a == "--tokens") o.n_tokens = std::atoi(next().c_str());
        else if (a == "--tensors") o.tensors = next();
        else if (a == "--no-matmul") o.matmul = false;
        else if (a == "--demo") o.demo = true;
        else if (a == "--expert-prior") o.expert_prior = std::atof(next().c_str());
        else if (a == "-h" || a == "--help") usage(nullptr);
        else usage(("unknown argument " + a).c_str());
    }
    common_model_source demo_model;
    if (o.demo && o.model.empty()) {
        common_params cp;
        cp.demo = true;
        std::string derr;
        if (!demo_model.resolve(cp, derr)) {
            std::fprintf(stderr, "error: %s\n", derr.c_str());
            return 1;
        }
        o.model = cp.model;
    }
    if (o.model.empty()) usage("-m (or --demo) is required");
    if (o.ref.empty() == o.type_name.empty()) usage("give exactly one of --type and --ref");
    if (o.n_tokens < 1 || o.n_tokens > 8192) usage("--tokens must be 1..8192");
    if (!(o.expert_prior >= 0)) usage("--expert-prior must be >= 0");
    std::regex want;
    try {
        want = std::regex(o.tensors);
    } catch (const std::regex_error & e) {
        usage(("--tensors: bad regex: " + std::string(e.what())).c_str());
    }
    ggml_type fixed_type = GGML_TYPE_COUNT;
    if (!o.type_name.empty()) {
        fixed_type = llama_quant_type_find(o.type_name);
        if (fixed_type == GGML_TYPE_COUNT) usage(("--type: unknown type " + o.type_name).c_str());
    }

    std::string err;
    gguf_file src, ref;
    if (!src.open(o.model, err) || (!o.ref.empty() && !ref.open(o.ref, err))) {
        std::fprintf(stderr, "error: %s\n", err.c_str());
        return 1;
    }
    llama_imatrix_map im_means;
    if (!o.imatrix.empty()) {
        llama_imatrix im;
        if (!llama_imatrix_load(o.imatrix, im, err)) {
            std::fprintf(stderr, "error: %s\n", err.c_str());
            return 1;
        }
        im_means = im.means(o.expert_prior);
    }
    capture cap;
    cap.want = want;
    if (!o.text.empty()) {
        llama_backend_init();
        if (!collect_activations(o, cap, err)) {
            std::fprintf(stderr, "error: %s\n", err.c_str());
            return 1;
        }
    }

    std::vector<ggml_cpu_isa> isas;
    for (int isa = 0; isa < GGML_CPU_ISA_COUNT; ++isa) {
        if (ggml_cpu_isa_runs_here((ggml_cpu_isa) isa)) isas.push_back((ggml_cpu_isa) isa);
    }
    totals tot;
    int n_done = 0;
    for (int64_t id = 0; id < gguf_get_n_tensors(src.ctx); ++id) {
        const std::string name = gguf_get_tensor_name(src.ctx, id);
        if (!std::regex_search(name, want)) continue;
        const ggml_type st = gguf_get_tensor_type(src.ctx, id);
        if (st != GGML_TYPE_F32 && st != GGML_TYPE_F16 && st != GGML_TYPE_BF16) continue;
        if (gguf_get_tensor_n_dims(src.ctx, id) < 2) continue;
        const int64_t k = gguf_get_tensor_ne(src.ctx, id, 0), nrows = gguf_get_tensor_ne(src.ctx, id, 1);
        int64_t n_mat = 1;
        for (int d = 2; d < gguf_get_tensor_n_dims(src.ctx, id); ++d) n_mat *= gguf_get_tensor_ne(src.ctx, id, d);

        ggml_type t = fixed_type;
        std::vector<uint8_t> ref_data;
        if (!o.ref.empty()) {
            const int64_t rid = ref.find(name);
            if (rid < 0) continue;
            t = gguf_get_tensor_type(ref.ctx, rid);
            if (!ggml_is_quantized(t)) continue;
            ref_data = ref.read(rid);
        }
        const ggml_type_traits * tt = ggml_get_type_traits(t);
        if (!tt->to_float || k % ggml_blck_size(t) != 0) {
            std::printf("%-32s %-8s skipped: %s\n", name.c_str(), ggml_type_name(t),
                        tt->to_float ? "row length not a multiple of the block" : "no decoder");
            continue;
        }
        const std::vector<uint8_t> raw = src.read(id);
        if (raw.empty()) {
            std::fprintf(stderr, "error: %s: short read of %s\n", o.model.c_str(), name.c_str());
            return 1;
        }
        const std::vector<float> w = decode(st, raw.data(), nrows * n_mat, k);
        const std::vector<float> * imv = im_means.empty() ? nullptr : llama_quant_find_imatrix(im_means, name);
        if (imv && imv->size() != (size_t) (k * n_mat)) imv = nullptr;

        std::vector<variant> vars;
        const size_t row_size = ggml_row_size(t, k);
        auto quantize = [&](const std::string & vname, bool with_im) {
            variant v{ vname, t, std::vector<uint8_t>(row_size * nrows * n_mat) };
            for (int64_t e = 0; e < n_mat; ++e) {
                ggml_quantize_chunk(t, w.data() + e * nrows * k, v.data.data() + e * nrows * row_size, 0, nrows, k,
                                    with_im ? imv->data() + e * k : nullptr);
            }
            vars.push_back(std::move(v));
        };
        if (!tt->requires_imatrix) quantize("kiln", false);
        if (imv) quantize("kiln+im", true);
        if (!ref_data.empty()) vars.push_back(variant{ "ref", t, ref_data });
        if (vars.empty()) {
            std::printf("%-32s %-8s skipped: the type needs an imatrix\n", name.c_str(), ggml_type_name(t));
            continue;
        }

        const captured * act = nullptr;
        if (auto it = cap.by_weight.find(name); it != cap.by_weight.end() && it->second.k == k) act = &it->second;
        int64_t n_act = 0;
        if (act) {
            for (const auto & r : act->rows) n_act += (int64_t) r.size() / k;
        }
        std::printf("%s  %s  [%lld x %lld]", name.c_str(), ggml_type_name(t), (long long) k, (long long) nrows);
        if (n_mat > 1) std::printf(" x %lld experts", (long long) n_mat);
        if (act) std::printf("  %lld activation rows", (long long) n_act);
        else if (!o.text.empty()) std::printf("  (no activations captured)");
        std::printf("\n");
        for (const variant & v : vars) {
            rel plain, weighted, out;
            std::map<std::string, rel> mm;
            double worst_expert = 0;
            for (int64_t e = 0; e < n_mat; ++e) {
                const std::vector<uint8_t> we(v.data.begin() + e * nrows * row_size, v.data.begin() + (e + 1) * nrows * row_size);
                const std::vector<float> dq = decode(t, we.data(), nrows, k);
                const std::vector<float> we_src(w.begin() + e * nrows * k, w.begin() + (e + 1) * nrows * k);
                const rel p = weight_error(dq, we_src, k, nullptr);
                plain.add(p);
                worst_expert = std::max(worst_expert, p.value());
                if (imv) weighted.add(weight_error(dq, we_src, k, imv->data() + e * k));
                if (!act || e >= (int64_t) act->rows.size() || act->rows[e].empty()) continue;
                const std::vector<float> & x = act->rows[e];
                const std::vector<double> exact_src = product(we_src, x, nrows, k);
                const std::vector<double> exact_q = product(dq, x, nrows, k);
                out.add(product_error(exact_q, exact_src));
                if (!o.matmul) continue;
                mm["per-32 bf16"].add(product_error(product(dq, round_per32_bf16(x), nrows, k), exact_q));
                for (ggml_cpu_isa isa : isas) {
                    if (!ggml_cpu_gemm_at(t, isa)) continue;
                    const std::string lvl = ggml_cpu_isa_name(isa);
                    mm[lvl + " batch"].add(gemm_error(t, we, x, nrows, k, isa, false, exact_q));
                    mm[lvl + " b1"].add(gemm_error(t, we, x, nrows, k, isa, true, exact_q));
                }
            }
            std::printf("  %-8s rel_rmse %.5f gain %.5f", v.name.c_str(), plain.value(), plain.gain());
            if (n_mat > 1) std::printf(" (worst expert %.5f)", worst_expert);
            if (imv) std::printf("  weighted %.5f", weighted.value());
            if (out.s > 0) std::printf("  on activations %.5f gain %.5f", out.value(), out.gain());
            std::printf("\n");
            tot.add(v.name + " rel_rmse", plain);
            if (imv) tot.add(v.name + " weighted", weighted);
            if (out.s > 0) tot.add(v.name + " on activations", out);
            if (!mm.empty()) {
                std::printf("           matmul vs float64:");
                for (const auto & [lvl, r] : mm) {
                    std::printf("  %s %.3g", lvl.c_str(), r.value());
                    tot.add(v.name + " matmul " + lvl, r);
                }
                std::printf("\n");
            }
        }
        ++n_done;
    }
    if (n_done == 0) {
        std::fprintf(stderr, "error: no tensor matched --tensors '%s' with a quantized type to compare\n", o.tensors.c_str());
        return 1;
    }
    std::printf("\ntotals over %d tensors (square roots of summed squared errors over summed squares):\n", n_done);
    for (const auto & [key, r] : tot.m) std::printf("  %-40s %.5g (gain %.5f)\n", key.c_str(), r.value(), r.gain());
    return 0;
}
