// Sequence state files (llama_state_seq_save_file / _load_file): one sequence's cached K/V rows,
// their positions and the tokens they came from, so a server slot can be saved, the server
// restarted, and the slot restored to continue exactly where it was.
//
// The layout is Kiln's own (the cache layout differs from llama.cpp's, so its files could not be
// read here anyway); little-endian, as written by the host:
//
//   u32 magic 'ggsq'   u32 version (k_version)   u64 model fingerprint
//   u32 n_tokens       i32 tokens[n_tokens]
//   u32 n_caches       per cache (the full one, then the sliding-window one if the context has it):
//     u32 type_k  u32 type_v  u32 n_layers (layers with K rows)  u32 n_cells  i32 pos[n_cells]
//     per layer: u64 k_row_bytes  K rows[n_cells]  u64 v_row_bytes (0: no V)  V rows[n_cells]
//
// The fingerprint hashes the architecture, each weight's name, type and shape and the first bytes
// of its data, so a file made by another model (or another quantization of it) is refused
// rather than attended to. Files are written to a temporary name and renamed.
#include "llama-context.h"
#include "llama-impl.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr uint32_t k_magic = 0x67677371u;   // 'ggsq', as llama.cpp's sequence files
constexpr uint32_t k_version = 0x4b000001u; // 'K' in the top byte: a Kiln layout, version 1

struct fnv1a {
    uint64_t h = 0xcbf29ce484222325ull;
    void add(const void * p, size_t n) {
        const auto * b = (const uint8_t *) p;
        for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
    }
    template <typename T> void add_value(const T & v) { add(&v, sizeof v); }
};

uint64_t model_fingerprint(const llama_model & m) {
    fnv1a f;
    f.add(m.arch_name.data(), m.arch_name.size());
    f.add_value(m.hparams.n_vocab);
    std::vector<uint8_t> head;
    for (ggml_tensor * t = ggml_get_first_tensor(m.ctx); t; t = ggml_get_next_tensor(m.ctx, t)) {
        f.add(t->name, std::strlen(t->name));
        f.add_value((int32_t) t->type);
        for (int d = 0; d < GGML_MAX_DIMS; ++d) f.add_value(t->ne[d]);
        // the first bytes of the weights tell two fine-tunes of the same shape apart
        if (t->buffer) {
            head.resize(std::min<size_t>(64, ggml_nbytes(t)));
            ggml_backend_tensor_get(t, head.data(), 0, head.size());
            f.add(head.data(), head.size());
        }
    }
    return f.h;
}

// The caches a sequence's memory lives in.
std::vector<llama_kv_cache *> caches_of(llama_context & ctx) {
    std::vector<llama_kv_cache *> out = { &ctx.kv };
    if (ctx.has_kv_swa()) out.push_back(&ctx.kv_swa);
    return out;
}

struct file_writer {
    std::FILE * f;
    size_t n = 0;
    bool ok = true;
    void write(const void * p, size_t bytes) {
        if (ok && bytes > 0 && std::fwrite(p, 1, bytes, f) != bytes) ok = false;
        n += bytes;
    }
    template <typename T> void value(const T & v) { write(&v, sizeof v); }
};

struct file_reader {
    std::FILE * f;
    size_t size;      // of the file
    size_t n = 0;     // bytes consumed
    void need(size_t bytes) const {
        if (bytes > size - n) throw llama_error("the file ends early (truncated?)");
    }
    void read(void * p, size_t bytes) {
        need(bytes);
        if (bytes > 0 && std::fread(p, 1, bytes, f) != bytes) throw llama_error("reading the file failed");
        n += bytes;
    }
    void skip(size_t bytes) {
        need(bytes);
        if (std::fseek(f, (long) bytes, SEEK_CUR) != 0) throw llama_error("seeking in the file failed");
        n += bytes;
    }
    void seek(size_t at) {
        if (std::fseek(f, (long) at, SEEK_SET) != 0) throw llama_error("seeking in the file failed");
        n = at;
    }
    template <typename T> T value() {
        T v;
        read(&v, sizeof v);
        return v;
    }
};

// Cells of seq in cache, ordered by position.
std::vector<uint32_t> cells_of(const llama_kv_cache & kv, llama_seq_id seq) {
    std::vector<uint32_t> cells;
    for (uint32_t i = 0; i < kv.size; ++i) {
        if (kv.has_seq(i, seq)) cells.push_back(i);
    }
    std::sort(cells.begin(), cells.end(), [&](uint32_t a, uint32_t b) { return kv.cells[a].pos < kv.cells[b].pos; });
    return cells;
}

void save_cache(file_writer & w, const llama_kv_cache & kv, llama_seq_id seq) {
    const std::vector<uint32_t> cells = cells_of(kv, seq);
    uint32_t n_layers = 0;
    for (ggml_tensor * k : kv.k_l) n_layers += k != nullptr;
    w.value((uint32_t) kv.type_k);
    w.value((uint32_t) kv.type_v);
    w.value(n_layers);
    w.value((uint32_t) cells.size());
    for (uint32_t c : cells) w.value((int32_t) kv.cells[c].pos);
    std::vector<uint8_t> row;
    for (size_t il = 0; il < kv.k_l.size(); ++il) {
        if (!kv.k_l[il]) continue;
        for (ggml_tensor * t : { kv.k_l[il], il < kv.v_l.size() ? kv.v_l[il] : nullptr }) {
            const uint64_t row_bytes = t ? llama_kv_cell_bytes(t, kv.size) : 0;
            w.value(row_bytes);
            row.resize(row_bytes);
            for (uint32_t c : cells) {
                if (!t) break;
                ggml_backend_tensor_get(t, row.data(), (size_t) c * row_bytes, row_bytes);
                w.write(row.data(), row_bytes);
            }
        }
    }
}

// One cache's section of the file. With cells null it is only checked (the rows are skipped);
// with cells, the rows are written there. Everything is checked before anything is written.
void read_cache(file_reader & r, llama_kv_cache & kv, std::vector<llama_pos> & pos, const std::vector<uint32_t> * cells) {
    const uint32_t type_k = r.value<uint32_t>(), type_v = r.value<uint32_t>();
    if (type_k != (uint32_t) kv.type_k || type_v != (uint32_t) kv.type_v) {
        throw llama_error(llama_format("the file's KV cache types are K %s / V %s, this context's %s / %s (-ctk / -ctv)",
                                       type_k < GGML_TYPE_COUNT ? ggml_type_name((ggml_type) type_k) : "?",
                                       type_v < GGML_TYPE_COUNT ? ggml_type_name((ggml_type) type_v) : "?",
                                       ggml_type_name(kv.type_k), ggml_type_name(kv.type_v)));
    }
    uint32_t n_layers = 0;
    for (ggml_tensor * k : kv.k_l) n_layers += k != nullptr;
    if (r.value<uint32_t>() != n_layers) throw llama_error("the file's layers do not match this model's");
    const uint32_t n_cells = r.value<uint32_t>();
    r.need((size_t) n_cells * sizeof(llama_pos));
    pos.resize(n_cells);
    r.read(pos.data(), n_cells * sizeof(llama_pos));
    for (uint32_t i = 0; i < n_cells; ++i) {
        if (pos[i] < 0 || (i > 0 && pos[i] <= pos[i - 1])) throw llama_error("the file's positions are not increasing");
    }
    std::vector<uint8_t> row;
    for (size_t il = 0; il < kv.k_l.size(); ++il) {
        if (!kv.k_l[il]) continue;
        for (ggml_tensor * t : { kv.k_l[il], il < kv.v_l.size() ? kv.v_l[il] : nullptr }) {
            const uint64_t row_bytes = r.value<uint64_t>();
            if (row_bytes != (t ? (uint64_t) llama_kv_cell_bytes(t, kv.size) : 0)) throw llama_error("the file's K/V row sizes do not match this context's");
            if (!t) continue;
            if (!cells) {
                if (row_bytes > 0 && n_cells > (r.size - r.n) / row_bytes) r.need(SIZE_MAX);
                r.skip((size_t) n_cells * row_bytes);
                continue;
            }
            row.resize(row_bytes);
            for (uint32_t i = 0; i < n_cells; ++i) {
                r.read(row.data(), row_bytes);
                ggml_backend_tensor_set(t, row.data(), (size_t) (*cells)[i] * row_bytes, row_bytes);
            }
        }
    }
}

void check_state_seq(const llama_context & ctx, llama_seq_id seq) {
    if (seq < 0 || (uint32_t) seq >= ctx.cparams.n_seq_max) {
        throw llama_error(llama_format("sequence %d is outside 0..%u", seq, ctx.cparams.n_seq_max - 1));
    }
    if (ctx.rs.active()) throw llama_error("state files of models with a recurrent state are not supported yet");
}

} // namespace

extern "C" {

size_t llama_state_seq_save_file(llama_context * ctx, const char * filepath, llama_seq_id seq_id, const llama_token * tokens,
                                 size_t n_token_count) {
    const std::string path = filepath ? filepath : "";
    const std::string tmp = path + ".tmp";
    std::FILE * f = nullptr;
    try {
        check_state_seq(*ctx, seq_id);
        // rows are saved as they will be read: with every pending shift applied
        if ((ctx->kv.has_shift || ctx->kv_swa.has_shift) && !llama_apply_kv_shift(*ctx)) {
            throw llama_error("applying the pending position shift failed");
        }
        f = std::fopen(tmp.c_str(), "wb");
        if (!f) throw llama_error("cannot write '" + tmp + "': " + std::strerror(errno));
        file_writer w{ f };
        w.value(k_magic);
        w.value(k_version);
        w.value(model_fingerprint(ctx->model));
        w.value((uint32_t) n_token_count);
        w.write(tokens, n_token_count * sizeof(llama_token));
        const std::vector<llama_kv_cache *> caches = caches_of(*ctx);
        w.value((uint32_t) caches.size());
        for (const llama_kv_cache * kv : caches) save_cache(w, *kv, seq_id);
        const bool closed = std::fclose(f) == 0;
        f = nullptr;
        if (!w.ok || !closed) throw llama_error("writing '" + tmp + "' failed (disk full?)");
        if (std::rename(tmp.c_str(), path.c_str()) != 0) {
            throw llama_error("cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(errno));
        }
        return w.n;
    } catch (const std::exception & e) {
        if (f) std::fclose(f);
        std::remove(tmp.c_str());
        LLAMA_LOG_ERROR("llama_state_seq_save_file: %s\n", e.what());
        llama_set_last_error(std::string("llama_state_seq_save_file: ") + e.what());
        return 0;
    }
}

size_t llama_state_seq_load_file(llama_context * ctx, const char * filepath, llama_seq_id dest_seq_id, llama_token * tokens_out,
                                 size_t n_token_capacity, size_t * n_token_count_out) {
    const std::string path = filepath ? filepath : "";
    std::FILE * f = nullptr;
    try {
        check_state_seq(*ctx, dest_seq_id);
        f = std::fopen(path.c_str(), "rb");
        if (!f) throw llama_error("cannot open '" + path + "': " + std::strerror(errno));
        std::fseek(f, 0, SEEK_END);
        const size_t file_size = (size_t) std::max(0L, std::ftell(f));
        std::fseek(f, 0, SEEK_SET);
        file_reader r{ f, file_size };
        if (r.value<uint32_t>() != k_magic) throw llama_error("'" + path + "' is not a sequence state file");
        const uint32_t version = r.value<uint32_t>();
        if (version != k_version) {
            throw llama_error(llama_format("'%s' has version 0x%08x, Kiln reads 0x%08x (a file of another program or version)",
                                           path.c_str(), version, k_version));
        }
        if (r.value<uint64_t>() != model_fingerprint(ctx->model)) {
            throw llama_error("'" + path + "' was saved with another model (or another quantization of it)");
        }
        const uint32_t n_tokens = r.value<uint32_t>();
        if (n_tokens > n_token_capacity) {
            throw llama_error(llama_format("the file holds %u tokens, more than the %zu that fit", n_tokens, n_token_capacity));
        }
        r.read(tokens_out, n_tokens * sizeof(llama_token));
        const std::vector<llama_kv_cache *> caches = caches_of(*ctx);
        if (r.value<uint32_t>() != caches.size()) {
            throw llama_error("the file's sliding-window cache does not match this context's (--swa-full?)");
        }
        // first check the whole file, then replace the sequence: a bad file changes nothing
        const size_t rows_at = r.n;
        std::vector<std::vector<llama_pos>> pos(caches.size());
        for (size_t c = 0; c < caches.size(); ++c) read_cache(r, *caches[c], pos[c], nullptr);
        if (r.n != file_size) throw llama_error("the file has bytes after its last row");
        for (size_t c = 0; c < caches.size(); ++c) {
            const llama_kv_cache & kv = *caches[c];
            uint32_t n_free = kv.size - kv.used;   // ... once the sequence's own cells are freed
            for (uint32_t i = 0; i < kv.size; ++i) n_free += kv.has_seq(i, dest_seq_id) && kv.cells[i].n_seq == 1;
            if (pos[c].size() > n_free) {
                throw llama_error(llama_format("the file holds %zu cells, more than the %u free in the KV cache", pos[c].size(), n_free));
            }
        }
        for (llama_kv_cache * kv : caches) kv->seq_rm(dest_seq_id, -1, -1);
        std::vector<std::vector<uint32_t>> cells(caches.size());
        for (size_t c = 0; c < caches.size(); ++c) caches[c]->find_slots((uint32_t) pos[c].size(), cells[c]);
        r.seek(rows_at);
        try {
            for (size_t c = 0; c < caches.size(); ++c) {
                read_cache(r, *caches[c], pos[c], &cells[c]);
                // the rows are in place: only now do the cells become the sequence's
                for (size_t i = 0; i < cells[c].size(); ++i) caches[c]->assign(cells[c][i], pos[c][i], &dest_seq_id, 1);
            }
        } catch (...) {
            for (llama_kv_cache * kv : caches) kv->seq_rm(dest_seq_id, -1, -1);
            throw;
        }
        std::fclose(f);
        if (n_token_count_out) *n_token_count_out = n_tokens;
        return r.n;
    } catch (const std::exception & e) {
        if (f) std::fclose(f);
        LLAMA_LOG_ERROR("llama_state_seq_load_file: %s\n", e.what());
        llama_set_last_error(std::string("llama_state_seq_load_file: ") + e.what());
        return 0;
    }
}

} // extern "C"
