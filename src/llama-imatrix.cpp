// Importance matrices: collection from matmul inputs, the legacy .dat and GGUF formats, merging.
#include "llama-imatrix.h"

#include "gguf.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

namespace {

std::string weight_name(const ggml_tensor * w) {
    // views of a weight carry suffixes like " (view)": keep the name up to ".weight"
    std::string n = w->name;
    const size_t p = n.find(".weight");
    return p == std::string::npos ? std::string() : n.substr(0, p + 7);
}

bool read_exact(FILE * f, void * dst, size_t n) { return std::fread(dst, 1, n, f) == n; }

} // namespace

bool llama_imatrix::merge(const llama_imatrix & other, std::string & err) {
    for (const auto & [name, e] : other.entries) {
        auto it = entries.find(name);
        if (it == entries.end()) {
            entries[name] = e;
            continue;
        }
        llama_imatrix_entry & d = it->second;
        if (d.sums.size() != e.sums.size() || d.counts.size() != e.counts.size()) {
            err = "imatrix entry " + name + " has " + std::to_string(e.sums.size()) + " values in one file and " +
                  std::to_string(d.sums.size()) + " in another";
            return false;
        }
        for (size_t i = 0; i < d.sums.size(); ++i) d.sums[i] += e.sums[i];
        for (size_t i = 0; i < d.counts.size(); ++i) d.counts[i] += e.counts[i];
    }
    for (const auto & ds : other.datasets) datasets.push_back(ds);
    chunk_count += other.chunk_count;
    if (chunk_size == 0) chunk_size = other.chunk_size;
    return true;
}

std::map<std::string, std::vector<float>> llama_imatrix::means(double prior_rows) const {
    std::map<std::string, std::vector<float>> out;
    for (const auto & [name, e] : entries) {
        if (e.counts.empty() || e.sums.empty()) continue;
        const size_t n_mat = e.counts.size(), per = e.sums.size() / n_mat;
        // the pooled mean over every matrix (expert) of the tensor, the prior of each one's mean
        std::vector<double> pooled(per, 0.0);
        int64_t n_all = 0;
        for (size_t m = 0; m < n_mat; ++m) {
            n_all += e.counts[m];
            for (size_t j = 0; j < per; ++j) pooled[j] += e.sums[m * per + j];
        }
        const bool shrink = n_mat > 1 && n_all > 0 && prior_rows > 0;
        std::vector<float> v(e.sums.size());
        for (size_t i = 0; i < v.size(); ++i) {
            const int64_t c = e.counts[i / per];
            const double p = n_all > 0 ? pooled[i % per] / (double) n_all : 1.0;
            if (shrink) {
                v[i] = (float) ((e.sums[i] + prior_rows * p) / ((double) c + prior_rows));
            } else {
                v[i] = c > 0 ? (float) (e.sums[i] / (double) c) : (float) p;
            }
        }
        out[name] = std::move(v);
    }
    return out;
}

// ---- legacy .dat -----------------------------------------------------------------------------

static bool load_dat(const std::string & path, llama_imatrix & out, std::string & err, int32_t chunk_size_hint) {
    std::unique_ptr<FILE, int (*)(FILE *)> f(std::fopen(path.c_str(), "rb"), std::fclose);
    if (!f) {
        err = path + ": cannot open: " + std::strerror(errno);
        return false;
    }
    std::fseek(f.get(), 0, SEEK_END);
    const long file_size = std::ftell(f.get());
    std::fseek(f.get(), 0, SEEK_SET);
    int32_t n_entries = 0;
    if (!read_exact(f.get(), &n_entries, 4) || n_entries <= 0 || n_entries > file_size / 12) {
        err = path + ": not an imatrix file (bad entry count)";
        return false;
    }
    const int64_t scale = chunk_size_hint > 0 ? chunk_size_hint : 1;
    for (int32_t i = 0; i < n_entries; ++i) {
        int32_t len = 0;
        if (!read_exact(f.get(), &len, 4) || len <= 0 || len > 1024) {
            err = path + ": entry " + std::to_string(i) + ": bad name length";
            return false;
        }
        std::string name(len, '\0');
        int32_t ncall = 0, nval = 0;
        if (!read_exact(f.get(), name.data(), len) || !read_exact(f.get(), &ncall, 4) || !read_exact(f.get(), &nval, 4)) {
            err = path + ": entry " + std::to_string(i) + ": truncated";
            return false;
        }
        if (ncall < 0 || nval <= 0 || (long) nval * 4 > file_size - std::ftell(f.get())) {
            err = path + ": entry " + name + ": bad ncall " + std::to_string(ncall) + " / nval " + std::to_string(nval);
            return false;
        }
        std::vector<float> v(nval);
        if (!read_exact(f.get(), v.data(), (size_t) nval * 4)) {
            err = path + ": entry " + name + ": truncated values";
            return false;
        }
        llama_imatrix_entry e;
        // the file holds mean * ncall: as sums over ncall * scale rows, the mean is kept
        e.counts.assign(1, (int64_t) ncall * scale);
        e.sums.resize(nval);
        for (int32_t j = 0; j < nval; ++j) {
            if (!std::isfinite(v[j])) {
                err = path + ": entry " + name + " has a non-finite value";
                return false;
            }
            e.sums[j] = (double) v[j] * scale;
        }
        out.entries[name] = std::move(e);
    }
    // optional trailer: chunk count and dataset name
    int32_t last_call = 0, dlen = 0;
    if (read_exact(f.get(), &last_call, 4)) {
        out.chunk_count = std::max(0, last_call);
        if (read_exact(f.get(), &dlen, 4) && dlen > 0 && dlen < 65536) {
            std::string ds(dlen, '\0');
            if (read_exact(f.get(), ds.data(), dlen)) out.datasets.push_back(ds);
        }
    }
    if (chunk_size_hint > 0) out.chunk_size = chunk_size_hint;
    return true;
}

bool llama_imatrix_save_dat(const std::string & path, const llama_imatrix & m, std::string & err) {
    const std::string tmp = path + ".tmp";
    FILE * f = std::fopen(tmp.c_str(), "wb");
    if (!f) {
        err = tmp + ": cannot create: " + std::strerror(errno);
        return false;
    }
    bool ok = true;
    auto put = [&](const void * p, size_t n) { ok = ok && std::fwrite(p, 1, n, f) == n; };
    int32_t n_entries = 0;
    for (const auto & kv : m.entries) n_entries += kv.second.sums.empty() ? 0 : 1;
    put(&n_entries, 4);
    const int64_t cs = m.chunk_size > 0 ? m.chunk_size : 1;
    // the format has one count per tensor, not per expert: experts' means are stored as the
    // quantizers would use them (drawn towards the pooled mean by their row counts, see means())
    const std::map<std::string, std::vector<float>> means = m.means();
    std::vector<float> tmpv;
    for (const auto & [name, e] : m.entries) {
        if (e.sums.empty() || e.counts.empty()) continue;
        const int32_t len = (int32_t) name.size();
        put(&len, 4);
        put(name.data(), len);
        const int64_t max_count = *std::max_element(e.counts.begin(), e.counts.end());
        const int32_t ncall = (int32_t) std::max<int64_t>(1, (max_count + cs - 1) / cs);
        const int32_t nval = (int32_t) e.sums.size();
        put(&ncall, 4);
        put(&nval, 4);
        const std::vector<float> & mean = means.at(name);
        tmpv.resize(nval);
        for (int32_t j = 0; j < nval; ++j) tmpv[j] = (float) ((double) mean[j] * ncall);
        put(tmpv.data(), (size_t) nval * 4);
    }
    const int32_t last = m.chunk_count;
    put(&last, 4);
    const std::string ds = m.datasets.empty() ? std::string() : m.datasets.back();
    const int32_t dlen = (int32_t) ds.size();
    put(&dlen, 4);
    put(ds.data(), ds.size());
    if (std::fclose(f) != 0) ok = false;
    if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        err = path + ": write failed: " + std::strerror(errno);
        return false;
    }
    return true;
}

// ---- GGUF ------------------------------------------------------------------------------------

static bool load_gguf(const std::string & path, llama_imatrix & out, std::string & err) {
    ggml_context * ctx = nullptr;
    gguf_context * g = gguf_init_from_file(path.c_str(), { false, &ctx });
    if (!g) {
        err = gguf_last_error();
        return false;
    }
    std::unique_ptr<gguf_context, void (*)(gguf_context *)> gg(g, gguf_free);
    std::unique_ptr<ggml_context, void (*)(ggml_context *)> cg(ctx, ggml_free);
    const int64_t kds = gguf_find_key(g, "imatrix.datasets");
    if (kds >= 0 && gguf_get_kv_type(g, kds) == GGUF_TYPE_ARRAY && gguf_get_arr_type(g, kds) == GGUF_TYPE_STRING) {
        for (size_t i = 0; i < gguf_get_arr_n(g, kds); ++i) out.datasets.push_back(gguf_get_arr_str(g, kds, i));
    }
    const int64_t kcc = gguf_find_key(g, "imatrix.chunk_count");
    if (kcc >= 0 && gguf_get_kv_type(g, kcc) == GGUF_TYPE_UINT32) out.chunk_count = (int32_t) gguf_get_val_u32(g, kcc);
    const int64_t kcs = gguf_find_key(g, "imatrix.chunk_size");
    if (kcs >= 0 && gguf_get_kv_type(g, kcs) == GGUF_TYPE_UINT32) out.chunk_size = (int32_t) gguf_get_val_u32(g, kcs);

    const std::string sfx = ".in_sum2";
    int n_found = 0;
    for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) {
        const std::string tname = gguf_get_tensor_name(g, i);
        if (tname.size() <= sfx.size() || tname.compare(tname.size() - sfx.size(), sfx.size(), sfx) != 0) continue;
        const std::string name = tname.substr(0, tname.size() - sfx.size());
        const ggml_tensor * s = ggml_get_tensor(ctx, tname.c_str());
        const ggml_tensor * c = ggml_get_tensor(ctx, (name + ".counts").c_str());
        if (!s || !c) {
            err = path + ": tensor " + tname + " has no matching " + name + ".counts";
            return false;
        }
        if (s->type != GGML_TYPE_F32 || c->type != GGML_TYPE_F32 || s->ne[1] != c->ne[1] || c->ne[0] != 1 ||
            s->ne[2] != 1 || c->ne[2] != 1) {
            err = path + ": tensors " + tname + " / " + name + ".counts have unexpected types or shapes";
            return false;
        }
        llama_imatrix_entry e;
        const int64_t nmat = s->ne[1], nper = s->ne[0];
        e.sums.resize(nmat * nper);
        e.counts.resize(nmat);
        for (int64_t j = 0; j < nmat * nper; ++j) {
            const float v = ((const float *) s->data)[j];
            if (!std::isfinite(v)) {
                err = path + ": tensor " + tname + " has a non-finite value";
                return false;
            }
            e.sums[j] = v;
        }
        for (int64_t j = 0; j < nmat; ++j) {
            const float v = ((const float *) c->data)[j];
            if (!std::isfinite(v) || v < 0) {
                err = path + ": tensor " + name + ".counts has a bad count";
                return false;
            }
            e.counts[j] = (int64_t) std::llround(v);
        }
        out.entries[name] = std::move(e);
        ++n_found;
    }
    if (n_found == 0) {
        err = path + ": no imatrix data (no *.in_sum2 tensors)";
        return false;
    }
    return true;
}

bool llama_imatrix_save_gguf(const std::string & path, const llama_imatrix & m, std::string & err) {
    std::unique_ptr<gguf_context, void (*)(gguf_context *)> g(gguf_init_empty(), gguf_free);
    gguf_set_val_str(g.get(), "general.type", "imatrix");
    std::vector<const char *> ds;
    for (const auto & d : m.datasets) ds.push_back(d.c_str());
    gguf_set_arr_str(g.get(), "imatrix.datasets", ds.data(), ds.size());
    gguf_set_val_u32(g.get(), "imatrix.chunk_count", (uint32_t) m.chunk_count);
    gguf_set_val_u32(g.get(), "imatrix.chunk_size", (uint32_t) m.chunk_size);

    size_t mem = 1024;
    for (const auto & kv : m.entries) mem += 2 * ggml_tensor_overhead() + (kv.second.sums.size() + kv.second.counts.size()) * 4 + 64;
    std::unique_ptr<ggml_context, void (*)(ggml_context *)> ctx(ggml_init({ mem, nullptr, false }), ggml_free);
    for (const auto & [name, e] : m.entries) {
        if (e.sums.empty() || e.counts.empty()) continue;
        if (name.size() + 8 >= GGML_MAX_NAME) {
            err = "imatrix entry name too long for GGUF: " + name;
            return false;
        }
        const int64_t nmat = (int64_t) e.counts.size();
        ggml_tensor * s = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, (int64_t) e.sums.size() / nmat, nmat);
        ggml_tensor * c = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, 1, nmat);
        ggml_format_name(s, "%s.in_sum2", name.c_str());
        ggml_format_name(c, "%s.counts", name.c_str());
        for (size_t j = 0; j < e.sums.size(); ++j) ((float *) s->data)[j] = (float) e.sums[j];
        for (int64_t j = 0; j < nmat; ++j) ((float *) c->data)[j] = (float) e.counts[j];
        gguf_add_tensor(g.get(), s);
        gguf_add_tensor(g.get(), c);
    }
    if (!gguf_write_to_file(g.get(), path.c_str(), false)) {
        err = gguf_last_error();
        return false;
    }
    return true;
}

bool llama_imatrix_load(const std::string & path, llama_imatrix & out, std::string & err, int32_t chunk_size_hint) {
    FILE * f = std::fopen(path.c_str(), "rb");
    if (!f) {
        err = path + ": cannot open: " + std::strerror(errno);
        return false;
    }
    char magic[4] = {};
    const bool is_gguf = std::fread(magic, 1, 4, f) == 4 && std::memcmp(magic, "GGUF", 4) == 0;
    std::fclose(f);
    return is_gguf ? load_gguf(path, out, err) : load_dat(path, out, err, chunk_size_hint);
}

// ---- collection --------------------------------------------------------------------------------

bool llama_imatrix_collector::ask(const ggml_tensor * t) const {
    if (t->op != GGML_OP_MUL_MAT && t->op != GGML_OP_MUL_MAT_ID && t->op != GGML_OP_MOE_FUSED_UP_GATE) return false;
    const std::string w = weight_name(t->src[0]);
    if (w.rfind("blk.", 0) == 0) return true;
    return process_output && w == "output.weight";
}

void llama_imatrix_collector::accumulate(const ggml_tensor * w, const ggml_tensor * x, const ggml_tensor * ids, int64_t n_mat) {
    if (!error.empty()) return;
    const std::string name = weight_name(w);
    const int64_t K = x->ne[0];
    if (x->type != GGML_TYPE_F32 && x->type != GGML_TYPE_F16) {
        error = "imatrix: input of " + name + " is " + ggml_type_name(x->type) + ", expected f32";
        return;
    }
    llama_imatrix_entry & e = data.entries[name];
    if (e.sums.empty()) {
        e.sums.assign((size_t) (K * n_mat), 0.0);
        e.counts.assign((size_t) n_mat, 0);
    } else if (e.sums.size() != (size_t) (K * n_mat) || e.counts.size() != (size_t) n_mat) {
        error = "imatrix: inconsistent sizes for " + name;
        return;
    }
    row_.resize(K);
    auto add_row = [&](const char * p, int64_t mat) {
        const float * r;
        if (x->type == GGML_TYPE_F32) {
            r = (const float *) p;
        } else {
            ggml_fp16_to_fp32_row((const ggml_fp16_t *) p, row_.data(), K);
            r = row_.data();
        }
        double * s = e.sums.data() + mat * K;
        for (int64_t j = 0; j < K; ++j) s[j] += (double) r[j] * r[j];
        e.counts[mat] += 1;
    };
    const char * base = (const char *) x->data;
    if (ids) {
        // x [K, n_b, n_tokens], ids [n_used, n_tokens]: slot i of token t used expert ids[i, t]
        const int64_t n_used = ids->ne[0], n_tok = ids->ne[1];
        for (int64_t t = 0; t < n_tok; ++t) {
            for (int64_t i = 0; i < n_used; ++i) {
                const int32_t ex = *(const int32_t *) ((const char *) ids->data + t * ids->nb[1] + i * ids->nb[0]);
                if (ex < 0 || ex >= n_mat) {
                    error = "imatrix: expert id " + std::to_string(ex) + " out of range for " + name;
                    return;
                }
                add_row(base + (i % x->ne[1]) * x->nb[1] + t * x->nb[2], ex);
            }
        }
    } else {
        for (int64_t i3 = 0; i3 < x->ne[3]; ++i3) {
            for (int64_t i2 = 0; i2 < x->ne[2]; ++i2) {
                const int64_t mat = n_mat > 1 ? (i3 % w->ne[3]) * w->ne[2] + (i2 % w->ne[2]) : 0;
                for (int64_t i1 = 0; i1 < x->ne[1]; ++i1) add_row(base + i1 * x->nb[1] + i2 * x->nb[2] + i3 * x->nb[3], mat);
            }
        }
    }
    for (double v : e.sums) {
        if (!std::isfinite(v)) {
            error = "imatrix: non-finite value collected for " + name;
            return;
        }
    }
}

void llama_imatrix_collector::observe(const ggml_tensor * t) {
    switch (t->op) {
        case GGML_OP_MUL_MAT:
            accumulate(t->src[0], t->src[1], nullptr, t->src[0]->ne[2] * t->src[0]->ne[3]);
            break;
        case GGML_OP_MUL_MAT_ID:
            accumulate(t->src[0], t->src[1], t->src[2], t->src[0]->ne[2]);
            break;
        case GGML_OP_MOE_FUSED_UP_GATE:
            // up and gate experts see the same input
            accumulate(t->src[0], t->src[2], t->src[3], t->src[0]->ne[2]);
            accumulate(t->src[1], t->src[2], t->src[3], t->src[1]->ne[2]);
            break;
        default: break;
    }
}

bool llama_imatrix_collector::callback(ggml_tensor * t, bool ask, void * user_data) {
    auto * c = (llama_imatrix_collector *) user_data;
    if (ask) return c->ask(t);
    c->observe(t);
    return c->error.empty();
}
