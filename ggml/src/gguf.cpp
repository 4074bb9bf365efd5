// GGUF v2/v3 parser and writer.
//
// The parser works on the whole file image (mmapped read-only, or a caller's buffer) through a
// cursor that checks every read against the end of the image, so a malformed file can only
// produce an error message. Counts read from the file are bounded by the bytes left before
// anything is allocated for them, so an absurd count cannot cause a huge allocation.
//
// The writer produces the same bytes as llama.cpp: header, key/value pairs in insertion order,
// tensor infos, zero padding to the alignment, then each tensor's data padded to the alignment.
#include "gguf.h"
#include "ggml-impl.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

// ---------------------------------------------------------------------------------------------
// Storage

struct gguf_kv {
    std::string key;
    gguf_type   type;        // GGUF_TYPE_ARRAY for arrays
    gguf_type   elem_type;   // the element type; equal to type for scalars
    size_t      n = 1;       // element count (1 for scalars)
    // Fixed-size elements packed as in the file. Strings: every string's bytes followed by a NUL
    // (so callers get C strings), one buffer for the whole array instead of one heap block each.
    std::vector<uint8_t> data;
    std::vector<size_t>  str_off;   // strings only: n + 1 offsets into data; [n] == data.size()
};

struct gguf_tensor_info {
    std::string    name;
    int            n_dims = 0;
    int64_t        ne[GGML_MAX_DIMS] = {1, 1, 1, 1};
    ggml_type      type = GGML_TYPE_F32;
    uint64_t       offset = 0;     // relative to the data section
    size_t         size = 0;       // bytes, unpadded
    const void *   data = nullptr; // writing: where the bytes come from (not owned)
};

struct gguf_context {
    uint32_t version     = GGUF_VERSION;
    size_t   alignment   = GGUF_DEFAULT_ALIGNMENT;
    size_t   data_offset = 0;
    size_t   file_size   = 0;
    std::vector<gguf_kv>          kv;
    std::vector<gguf_tensor_info> tensors;
    std::unordered_map<std::string, int64_t> tensor_index;
};

namespace {

thread_local std::string g_last_error;

#ifdef __GNUC__
__attribute__((format(printf, 2, 3)))
#endif
bool set_error(const char * fname, const char * fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    g_last_error = std::string(fname ? fname : "<buffer>") + ": " + buf;
    return false;
}

// Bytes of one element of a fixed-size value type; 0 for string/array/unknown.
size_t fixed_type_size(int type) {
    switch (type) {
        case GGUF_TYPE_UINT8:   case GGUF_TYPE_INT8:  case GGUF_TYPE_BOOL:   return 1;
        case GGUF_TYPE_UINT16:  case GGUF_TYPE_INT16:                        return 2;
        case GGUF_TYPE_UINT32:  case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
        case GGUF_TYPE_UINT64:  case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
        default: return 0;
    }
}

bool is_pow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

// Printable, shortened form of a name read from a file, for error messages.
std::string printable(std::string_view s, size_t max_len = 64) {
    std::string out;
    for (size_t i = 0; i < s.size() && i < max_len; ++i) {
        const unsigned char c = (unsigned char) s[i];
        if (c >= 0x20 && c < 0x7f) {
            out += (char) c;
        } else {
            char b[8];
            snprintf(b, sizeof(b), "\\x%02x", c);
            out += b;
        }
    }
    if (s.size() > max_len) out += "...";
    return out;
}

// Bounds-checked cursor over the file image.
struct reader {
    const uint8_t * base;
    size_t          size;
    size_t          pos = 0;
    const char *    fname;

    size_t left() const { return size - pos; }

    bool truncated(const char * what) const {
        return set_error(fname, "truncated file: %s at offset %zu runs past the end of the file (%zu bytes)",
                         what, pos, size);
    }

    template <typename T>
    bool read(T & v, const char * what) {
        v = T{};   // defined even on failure (keeps -Wmaybe-uninitialized quiet)
        if (left() < sizeof(T)) return truncated(what);
        std::memcpy(&v, base + pos, sizeof(T));
        pos += sizeof(T);
        return true;
    }

    // A length-prefixed string; returns a view into the image.
    bool read_str(std::string_view & s, const char * what) {
        uint64_t len;
        if (!read(len, what)) return false;
        if (len > left()) {
            return set_error(fname, "%s at offset %zu has length %" PRIu64 ", more than the %zu bytes left in the file",
                             what, pos - 8, len, left());
        }
        s = std::string_view((const char *) base + pos, (size_t) len);
        pos += (size_t) len;
        return true;
    }
};

void store_scalar_string(gguf_kv & kv, std::string_view s) {
    kv.n = 1;
    kv.data.assign(s.begin(), s.end());
    kv.data.push_back(0);
    kv.str_off = {0, kv.data.size()};
}

// Reads the value of kv (whose type is already set) from r.
bool read_value(reader & r, gguf_kv & kv) {
    const std::string where = "value of key '" + printable(kv.key) + "'";
    if (kv.type == GGUF_TYPE_STRING) {
        std::string_view s;
        if (!r.read_str(s, where.c_str())) return false;
        store_scalar_string(kv, s);
        return true;
    }
    if (kv.type != GGUF_TYPE_ARRAY) {
        const size_t sz = fixed_type_size(kv.type);
        if (r.left() < sz) return r.truncated(where.c_str());
        kv.data.assign(r.base + r.pos, r.base + r.pos + sz);
        r.pos += sz;
        return true;
    }

    uint32_t et;
    uint64_t n;
    if (!r.read(et, (where + " (array element type)").c_str())) return false;
    if (et == GGUF_TYPE_ARRAY) {
        return set_error(r.fname, "key '%s' is an array of arrays (nested arrays are not supported)", printable(kv.key).c_str());
    }
    if (et >= GGUF_TYPE_COUNT) {
        return set_error(r.fname, "key '%s' is an array with unknown element type %u", printable(kv.key).c_str(), et);
    }
    if (!r.read(n, (where + " (array count)").c_str())) return false;
    kv.elem_type = (gguf_type) et;

    if (et != GGUF_TYPE_STRING) {
        const size_t sz = fixed_type_size(et);
        if (n > r.left() / sz) {
            return set_error(r.fname, "key '%s': array of %" PRIu64 " %s elements needs more than the %zu bytes left in the file",
                             printable(kv.key).c_str(), n, gguf_type_name((gguf_type) et), r.left());
        }
        kv.n = (size_t) n;
        kv.data.assign(r.base + r.pos, r.base + r.pos + kv.n * sz);
        r.pos += kv.n * sz;
        return true;
    }

    // Strings: each needs at least its 8-byte length.
    if (n > r.left() / 8) {
        return set_error(r.fname, "key '%s': array of %" PRIu64 " strings needs more than the %zu bytes left in the file",
                         printable(kv.key).c_str(), n, r.left());
    }
    // First pass: validate every length and total the bytes, so the strings land in one buffer.
    const size_t start = r.pos;
    size_t total = 0;
    for (uint64_t i = 0; i < n; ++i) {
        uint64_t len;
        if (r.left() < 8) {
            return set_error(r.fname, "truncated file: string %" PRIu64 " of array '%s' at offset %zu runs past the end of the file (%zu bytes)",
                             i, printable(kv.key).c_str(), r.pos, r.size);
        }
        std::memcpy(&len, r.base + r.pos, 8);
        r.pos += 8;
        if (len > r.left()) {
            return set_error(r.fname, "string %" PRIu64 " of array '%s' at offset %zu has length %" PRIu64 ", more than the %zu bytes left in the file",
                             i, printable(kv.key).c_str(), r.pos - 8, len, r.left());
        }
        r.pos += (size_t) len;
        total += (size_t) len + 1;
    }
    kv.n = (size_t) n;
    kv.data.resize(total);
    kv.str_off.resize(kv.n + 1);
    size_t p = start, o = 0;
    for (size_t i = 0; i < kv.n; ++i) {
        uint64_t len;
        std::memcpy(&len, r.base + p, 8);
        p += 8;
        kv.str_off[i] = o;
        std::memcpy(kv.data.data() + o, r.base + p, (size_t) len);
        p += (size_t) len;
        o += (size_t) len;
        kv.data[o++] = 0;
    }
    kv.str_off[kv.n] = o;
    return true;
}

// Byte size of a tensor of this type and shape, validating the shape. false + error if invalid.
bool tensor_size(const char * fname, const gguf_tensor_info & ti, size_t & out) {
    const std::string name = printable(ti.name);
    if (!ggml_type_is_valid(ti.type)) {
        const char * why = ggml_type_unsupported_reason(ti.type);
        if (why) return set_error(fname, "tensor '%s' has ggml type id %d: %s", name.c_str(), (int) ti.type, why);
        return set_error(fname, "tensor '%s' has unknown ggml type id %d", name.c_str(), (int) ti.type);
    }
    const ggml_type_traits * tt = ggml_get_type_traits(ti.type);
    int64_t nrows = 1;
    for (int d = 0; d < GGML_MAX_DIMS; ++d) {
        if (ti.ne[d] <= 0) {
            return set_error(fname, "tensor '%s': dimension %d is %" PRId64 " (must be positive)", name.c_str(), d, ti.ne[d]);
        }
        if (d > 0 && __builtin_mul_overflow(nrows, ti.ne[d], &nrows)) {
            return set_error(fname, "tensor '%s': shape [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "] overflows the element count",
                             name.c_str(), ti.ne[0], ti.ne[1], ti.ne[2], ti.ne[3]);
        }
    }
    int64_t nel;
    if (__builtin_mul_overflow(nrows, ti.ne[0], &nel)) {
        return set_error(fname, "tensor '%s': shape [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "] overflows the element count",
                         name.c_str(), ti.ne[0], ti.ne[1], ti.ne[2], ti.ne[3]);
    }
    if (ti.ne[0] % tt->blck_size != 0) {
        return set_error(fname, "tensor '%s': row length %" PRId64 " is not a multiple of the %s block size %" PRId64,
                         name.c_str(), ti.ne[0], tt->type_name, tt->blck_size);
    }
    if (tt->nrows_interleaved > 1 && nrows % tt->nrows_interleaved != 0) {
        return set_error(fname, "tensor '%s': %" PRId64 " rows is not a multiple of %d, as the row-interleaved type %s requires",
                         name.c_str(), nrows, tt->nrows_interleaved, tt->type_name);
    }
    const size_t row = ggml_row_size(ti.type, ti.ne[0]);
    size_t total;
    if (__builtin_mul_overflow(row, (size_t) nrows, &total) || total > (size_t) INT64_MAX) {
        return set_error(fname, "tensor '%s': byte size overflows", name.c_str());
    }
    out = total;
    return true;
}

bool parse(gguf_context & ctx, const uint8_t * data, size_t size, const char * fname) {
    reader r{data, size, 0, fname};
    ctx.file_size = size;

    if (size < 4) return set_error(fname, "not a GGUF file: only %zu bytes", size);
    if (std::memcmp(data, GGUF_MAGIC, 4) != 0) {
        const std::string magic = printable(std::string_view((const char *) data, 4));
        return set_error(fname, "not a GGUF file: bad magic \"%s\" (expected \"GGUF\")", magic.c_str());
    }
    r.pos = 4;
    if (!r.read(ctx.version, "version")) return false;
    if (ctx.version == 1) return set_error(fname, "GGUF version 1 is not supported (only versions 2 and 3)");
    if (ctx.version != 2 && ctx.version != 3) {
        if ((ctx.version & 0xffff) == 0 && ctx.version != 0) {
            return set_error(fname, "unsupported GGUF version %u (a big-endian file? only little-endian v2/v3 are supported)", ctx.version);
        }
        return set_error(fname, "unsupported GGUF version %u (only versions 2 and 3)", ctx.version);
    }
    uint64_t n_tensors, n_kv;
    if (!r.read(n_tensors, "tensor count")) return false;
    if (!r.read(n_kv, "key/value count")) return false;

    // Minimum encoded sizes: a kv is key length + 1 byte + type + 1 byte value; a tensor info
    // is name length + 1 byte + n_dims + ne[0] + type + offset.
    if (n_kv > r.left() / 14) {
        return set_error(fname, "key/value count %" PRIu64 " does not fit in the %zu bytes left: truncated or corrupt file", n_kv, r.left());
    }
    if (n_tensors > r.left() / 33) {
        return set_error(fname, "tensor count %" PRIu64 " does not fit in the %zu bytes left: truncated or corrupt file", n_tensors, r.left());
    }

    ctx.kv.reserve((size_t) n_kv);
    std::unordered_map<std::string_view, size_t> seen_keys;
    seen_keys.reserve((size_t) n_kv);
    for (uint64_t i = 0; i < n_kv; ++i) {
        char what[64];
        snprintf(what, sizeof(what), "key %" PRIu64, i);
        std::string_view key;
        if (!r.read_str(key, what)) return false;
        if (key.empty()) return set_error(fname, "key %" PRIu64 " is empty", i);
        // keys are looked up and reported as C strings: one holding a NUL would read as another key
        if (key.find('\0') != std::string_view::npos) {
            return set_error(fname, "key %" PRIu64 " '%s' contains a NUL byte", i, printable(key).c_str());
        }
        if (seen_keys.count(key)) return set_error(fname, "duplicate key '%s'", printable(key).c_str());
        uint32_t type;
        const std::string type_what = "type of key '" + printable(key) + "'";
        if (!r.read(type, type_what.c_str())) return false;
        if (type >= GGUF_TYPE_COUNT) {
            return set_error(fname, "key '%s' has unknown value type %u", printable(key).c_str(), type);
        }
        gguf_kv kv;
        kv.key.assign(key);
        kv.type = kv.elem_type = (gguf_type) type;
        if (!read_value(r, kv)) return false;
        seen_keys.emplace(key, ctx.kv.size());
        ctx.kv.push_back(std::move(kv));
    }

    if (auto it = seen_keys.find(GGUF_KEY_GENERAL_ALIGNMENT); it != seen_keys.end()) {
        const gguf_kv & kv = ctx.kv[it->second];
        if (kv.type != GGUF_TYPE_UINT32) {
            return set_error(fname, "key '%s' must be of type u32, but is %s", GGUF_KEY_GENERAL_ALIGNMENT, gguf_type_name(kv.type));
        }
        uint32_t a;
        std::memcpy(&a, kv.data.data(), 4);
        if (!is_pow2(a)) {
            return set_error(fname, "key '%s' is %u, not a power of two", GGUF_KEY_GENERAL_ALIGNMENT, a);
        }
        ctx.alignment = a;
    }

    ctx.tensors.reserve((size_t) n_tensors);
    ctx.tensor_index.reserve((size_t) n_tensors);
    for (uint64_t i = 0; i < n_tensors; ++i) {
        char what[64];
        snprintf(what, sizeof(what), "name of tensor %" PRIu64, i);
        std::string_view name;
        if (!r.read_str(name, what)) return false;
        if (name.empty()) return set_error(fname, "tensor %" PRIu64 " has an empty name", i);
        if (name.find('\0') != std::string_view::npos) {
            return set_error(fname, "tensor %" PRIu64 " name '%s' contains a NUL byte", i, printable(name).c_str());
        }
        if (name.size() >= GGML_MAX_NAME) {
            return set_error(fname, "tensor %" PRIu64 " name '%s' is %zu bytes long (at most %d)",
                             i, printable(name).c_str(), name.size(), GGML_MAX_NAME - 1);
        }
        gguf_tensor_info ti;
        ti.name.assign(name);
        const std::string pname = printable(name);
        if (ctx.tensor_index.count(ti.name)) return set_error(fname, "duplicate tensor name '%s'", pname.c_str());

        uint32_t n_dims;
        std::string w = "n_dims of tensor '" + pname + "'";
        if (!r.read(n_dims, w.c_str())) return false;
        if (n_dims < 1 || n_dims > GGML_MAX_DIMS) {
            return set_error(fname, "tensor '%s' has %u dimensions (must be 1..%d)", pname.c_str(), n_dims, GGML_MAX_DIMS);
        }
        ti.n_dims = (int) n_dims;
        w = "shape of tensor '" + pname + "'";
        for (uint32_t d = 0; d < n_dims; ++d) {
            if (!r.read(ti.ne[d], w.c_str())) return false;
        }
        uint32_t type;
        w = "type of tensor '" + pname + "'";
        if (!r.read(type, w.c_str())) return false;
        if (!ggml_type_is_valid((int) type)) {
            const char * why = type < 1000 ? ggml_type_unsupported_reason((int) type) : nullptr;
            if (why) return set_error(fname, "tensor '%s' has ggml type id %u: %s", pname.c_str(), type, why);
            return set_error(fname, "tensor '%s' has unknown ggml type id %u", pname.c_str(), type);
        }
        ti.type = (ggml_type) type;
        w = "data offset of tensor '" + pname + "'";
        if (!r.read(ti.offset, w.c_str())) return false;
        if (!tensor_size(fname, ti, ti.size)) return false;
        if (ti.offset % ctx.alignment != 0) {
            return set_error(fname, "tensor '%s' has data offset %" PRIu64 ", not a multiple of the alignment %zu",
                             pname.c_str(), ti.offset, ctx.alignment);
        }
        ctx.tensor_index.emplace(ti.name, (int64_t) ctx.tensors.size());
        ctx.tensors.push_back(std::move(ti));
    }

    // The data section starts at the aligned end of the metadata.
    const size_t data_offset = ggml_pad(r.pos, ctx.alignment);
    ctx.data_offset = data_offset;
    if (ctx.tensors.empty()) return true;
    if (data_offset > size) {
        return set_error(fname, "truncated file: the tensor data section would start at offset %zu, past the end of the file (%zu bytes)",
                         data_offset, size);
    }
    const size_t data_size = size - data_offset;

    // Every tensor inside the file, and no two overlapping (checked in offset order).
    std::vector<int64_t> order(ctx.tensors.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = (int64_t) i;
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        return ctx.tensors[a].offset < ctx.tensors[b].offset;
    });
    for (size_t k = 0; k < order.size(); ++k) {
        const gguf_tensor_info & ti = ctx.tensors[order[k]];
        if (ti.offset > data_size || ti.size > data_size - ti.offset) {
            return set_error(fname, "tensor '%s' data (%zu bytes at file offset %zu + %" PRIu64 ") runs past the end of the file (%zu bytes)",
                             printable(ti.name).c_str(), ti.size, data_offset, ti.offset, size);
        }
        if (k + 1 < order.size()) {
            const gguf_tensor_info & next = ctx.tensors[order[k + 1]];
            if (next.offset < ti.offset + ti.size) {
                return set_error(fname, "tensor '%s' data [%" PRIu64 ", %" PRIu64 ") overlaps tensor '%s' at offset %" PRIu64,
                                 printable(ti.name).c_str(), ti.offset, ti.offset + ti.size,
                                 printable(next.name).c_str(), next.offset);
            }
        }
    }
    return true;
}

// Builds params.ctx: one tensor per GGUF tensor, with data copied from the image unless no_alloc.
bool make_ggml_context(gguf_context & ctx, const uint8_t * image, const char * fname, gguf_init_params params) {
    size_t mem = 0;
    for (const auto & ti : ctx.tensors) {
        mem += ggml_tensor_overhead();
        if (!params.no_alloc) mem += ggml_pad(ti.size, GGML_MEM_ALIGN) + GGML_MEM_ALIGN;
    }
    ggml_init_params ip = { mem + GGML_MEM_ALIGN, nullptr, params.no_alloc };
    ggml_context * gctx = ggml_init(ip);
    if (!gctx) return set_error(fname, "cannot allocate a context of %zu bytes for the tensors", mem);
    for (auto & ti : ctx.tensors) {
        ggml_tensor * t = ggml_new_tensor(gctx, ti.type, ti.n_dims, ti.ne);
        if (!t) {
            ggml_free(gctx);
            return set_error(fname, "cannot create tensor '%s'", ti.name.c_str());
        }
        ggml_set_name(t, ti.name.c_str());
        if (!params.no_alloc) {
            if (ggml_nbytes(t) != ti.size) {
                ggml_free(gctx);
                return set_error(fname, "tensor '%s': size mismatch between GGUF (%zu) and ggml (%zu)",
                                 ti.name.c_str(), ti.size, ggml_nbytes(t));
            }
            std::memcpy(t->data, image + ctx.data_offset + ti.offset, ti.size);
            ti.data = t->data;   // so the context can be written back as read
        }
    }
    *params.ctx = gctx;
    return true;
}

gguf_context * init_from_image(const uint8_t * data, size_t size, const char * fname, gguf_init_params params) {
    if (params.ctx) *params.ctx = nullptr;
    auto * ctx = new gguf_context;
    if (!parse(*ctx, data, size, fname) || (params.ctx && !make_ggml_context(*ctx, data, fname, params))) {
        delete ctx;
        return nullptr;
    }
    g_last_error.clear();
    return ctx;
}

const gguf_kv & get_kv(const gguf_context * ctx, int64_t key_id) {
    GGML_ASSERT(ctx && key_id >= 0 && key_id < (int64_t) ctx->kv.size());
    return ctx->kv[key_id];
}

const gguf_kv & get_scalar(const gguf_context * ctx, int64_t key_id, gguf_type type) {
    const gguf_kv & kv = get_kv(ctx, key_id);
    if (kv.type != type) {
        GGML_ABORT("gguf: key '%s' is %s, read as %s", kv.key.c_str(), gguf_type_name(kv.type), gguf_type_name(type));
    }
    return kv;
}

template <typename T>
T scalar_value(const gguf_context * ctx, int64_t key_id, gguf_type type) {
    const gguf_kv & kv = get_scalar(ctx, key_id, type);
    T v;
    std::memcpy(&v, kv.data.data(), sizeof(T));
    return v;
}

const gguf_tensor_info & get_tensor(const gguf_context * ctx, int64_t id) {
    GGML_ASSERT(ctx && id >= 0 && id < (int64_t) ctx->tensors.size());
    return ctx->tensors[id];
}

// Recomputes the offsets of all tensors as the writer lays them out.
void layout_tensors(gguf_context * ctx) {
    uint64_t off = 0;
    for (auto & ti : ctx->tensors) {
        ti.offset = off;
        off += ggml_pad(ti.size, ctx->alignment);
    }
}

// The slot for key: the existing one (kept in place, as ik_llama.cpp does) or a new one at the end.
gguf_kv & slot(gguf_context * ctx, const char * key) {
    GGML_ASSERT(ctx && key && key[0]);
    const int64_t id = gguf_find_key(ctx, key);
    gguf_kv * kv;
    if (id >= 0) {
        kv = &ctx->kv[id];
    } else {
        ctx->kv.emplace_back();
        kv = &ctx->kv.back();
        kv->key = key;
    }
    kv->data.clear();
    kv->str_off.clear();
    kv->n = 1;
    return *kv;
}

template <typename T>
void set_scalar(gguf_context * ctx, const char * key, gguf_type type, T val) {
    gguf_kv & kv = slot(ctx, key);
    kv.type = kv.elem_type = type;
    kv.data.resize(sizeof(T));
    std::memcpy(kv.data.data(), &val, sizeof(T));
}

void on_alignment_changed(gguf_context * ctx) {
    const int64_t id = gguf_find_key(ctx, GGUF_KEY_GENERAL_ALIGNMENT);
    size_t a = GGUF_DEFAULT_ALIGNMENT;
    if (id >= 0) {
        const gguf_kv & kv = ctx->kv[id];
        GGML_ASSERT(kv.type == GGUF_TYPE_UINT32 && "general.alignment must be u32");
        uint32_t v;
        std::memcpy(&v, kv.data.data(), 4);
        GGML_ASSERT(is_pow2(v) && "general.alignment must be a power of two");
        a = v;
    }
    if (a != ctx->alignment) {
        ctx->alignment = a;
        layout_tensors(ctx);
    }
}

// Appends the encoded metadata (header .. padding) to out.
struct writer {
    std::vector<uint8_t> & out;
    template <typename T> void put(T v) {
        const size_t n = out.size();
        out.resize(n + sizeof(T));
        std::memcpy(out.data() + n, &v, sizeof(T));
    }
    void put_bytes(const void * p, size_t n) {
        out.insert(out.end(), (const uint8_t *) p, (const uint8_t *) p + n);
    }
    void put_str(const char * s, size_t n) {
        put<uint64_t>(n);
        put_bytes(s, n);
    }
};

void write_meta(const gguf_context * ctx, std::vector<uint8_t> & out) {
    writer w{out};
    w.put_bytes(GGUF_MAGIC, 4);
    w.put<uint32_t>(GGUF_VERSION);
    w.put<uint64_t>(ctx->tensors.size());
    w.put<uint64_t>(ctx->kv.size());
    for (const auto & kv : ctx->kv) {
        w.put_str(kv.key.data(), kv.key.size());
        w.put<uint32_t>(kv.type);
        if (kv.type == GGUF_TYPE_ARRAY) {
            w.put<uint32_t>(kv.elem_type);
            w.put<uint64_t>(kv.n);
        }
        if (kv.elem_type == GGUF_TYPE_STRING) {
            for (size_t i = 0; i < kv.n; ++i) {
                w.put_str((const char *) kv.data.data() + kv.str_off[i], kv.str_off[i + 1] - kv.str_off[i] - 1);
            }
        } else {
            w.put_bytes(kv.data.data(), kv.data.size());
        }
    }
    uint64_t off = 0;
    for (const auto & ti : ctx->tensors) {
        w.put_str(ti.name.data(), ti.name.size());
        w.put<uint32_t>((uint32_t) ti.n_dims);
        for (int d = 0; d < ti.n_dims; ++d) w.put<int64_t>(ti.ne[d]);
        w.put<uint32_t>((uint32_t) ti.type);
        w.put<uint64_t>(off);
        off += ggml_pad(ti.size, ctx->alignment);
    }
    out.resize(ggml_pad(out.size(), ctx->alignment), 0);
}

} // namespace

// Lets gguf-split.cpp report through gguf_last_error().
void gguf_internal_set_error(const char * fname, const char * msg) { set_error(fname, "%s", msg); }

// ---------------------------------------------------------------------------------------------
// Public API

extern "C" {

const char * gguf_last_error(void) { return g_last_error.c_str(); }

const char * gguf_type_name(enum gguf_type type) {
    switch (type) {
        case GGUF_TYPE_UINT8:   return "u8";
        case GGUF_TYPE_INT8:    return "i8";
        case GGUF_TYPE_UINT16:  return "u16";
        case GGUF_TYPE_INT16:   return "i16";
        case GGUF_TYPE_UINT32:  return "u32";
        case GGUF_TYPE_INT32:   return "i32";
        case GGUF_TYPE_FLOAT32: return "f32";
        case GGUF_TYPE_BOOL:    return "bool";
        case GGUF_TYPE_STRING:  return "str";
        case GGUF_TYPE_ARRAY:   return "arr";
        case GGUF_TYPE_UINT64:  return "u64";
        case GGUF_TYPE_INT64:   return "i64";
        case GGUF_TYPE_FLOAT64: return "f64";
        default:                return "unknown";
    }
}

struct gguf_context * gguf_init_empty(void) { return new gguf_context; }

struct gguf_context * gguf_init_from_buffer(const void * buf, size_t size, const char * name, struct gguf_init_params params) {
    if (!buf && size) {
        if (params.ctx) *params.ctx = nullptr;
        set_error(name, "no buffer");
        return nullptr;
    }
    return init_from_image((const uint8_t *) buf, size, name ? name : "<buffer>", params);
}

struct gguf_context * gguf_init_from_file(const char * fname, struct gguf_init_params params) {
    if (params.ctx) *params.ctx = nullptr;
    if (!fname) {
        set_error("<null>", "no file name");
        return nullptr;
    }
    const int fd = open(fname, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        set_error(fname, "cannot open: %s", strerror(errno));
        return nullptr;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        set_error(fname, "not a regular file");
        return nullptr;
    }
    const size_t size = (size_t) st.st_size;
    if (size < 4) {   // also: mmap cannot map an empty file
        close(fd);
        set_error(fname, "not a GGUF file: only %zu bytes", size);
        return nullptr;
    }
    void * map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        set_error(fname, "cannot map the file: %s", strerror(errno));
        return nullptr;
    }
    gguf_context * ctx = init_from_image((const uint8_t *) map, size, fname, params);
    munmap(map, size);
    return ctx;
}

void gguf_free(struct gguf_context * ctx) { delete ctx; }

uint32_t gguf_get_version(const struct gguf_context * ctx)     { return ctx->version; }
size_t   gguf_get_alignment(const struct gguf_context * ctx)   { return ctx->alignment; }
size_t   gguf_get_data_offset(const struct gguf_context * ctx) { return ctx->data_offset; }
size_t   gguf_get_file_size(const struct gguf_context * ctx)   { return ctx->file_size; }

int64_t gguf_get_n_kv(const struct gguf_context * ctx) { return (int64_t) ctx->kv.size(); }

int64_t gguf_find_key(const struct gguf_context * ctx, const char * key) {
    for (size_t i = 0; i < ctx->kv.size(); ++i) {
        if (ctx->kv[i].key == key) return (int64_t) i;
    }
    return -1;
}

const char * gguf_get_key(const struct gguf_context * ctx, int64_t key_id) { return get_kv(ctx, key_id).key.c_str(); }
enum gguf_type gguf_get_kv_type(const struct gguf_context * ctx, int64_t key_id) { return get_kv(ctx, key_id).type; }

enum gguf_type gguf_get_arr_type(const struct gguf_context * ctx, int64_t key_id) {
    const gguf_kv & kv = get_kv(ctx, key_id);
    if (kv.type != GGUF_TYPE_ARRAY) GGML_ABORT("gguf: key '%s' is %s, not an array", kv.key.c_str(), gguf_type_name(kv.type));
    return kv.elem_type;
}

uint8_t  gguf_get_val_u8 (const struct gguf_context * c, int64_t id) { return scalar_value<uint8_t >(c, id, GGUF_TYPE_UINT8); }
int8_t   gguf_get_val_i8 (const struct gguf_context * c, int64_t id) { return scalar_value<int8_t  >(c, id, GGUF_TYPE_INT8); }
uint16_t gguf_get_val_u16(const struct gguf_context * c, int64_t id) { return scalar_value<uint16_t>(c, id, GGUF_TYPE_UINT16); }
int16_t  gguf_get_val_i16(const struct gguf_context * c, int64_t id) { return scalar_value<int16_t >(c, id, GGUF_TYPE_INT16); }
uint32_t gguf_get_val_u32(const struct gguf_context * c, int64_t id) { return scalar_value<uint32_t>(c, id, GGUF_TYPE_UINT32); }
int32_t  gguf_get_val_i32(const struct gguf_context * c, int64_t id) { return scalar_value<int32_t >(c, id, GGUF_TYPE_INT32); }
float    gguf_get_val_f32(const struct gguf_context * c, int64_t id) { return scalar_value<float   >(c, id, GGUF_TYPE_FLOAT32); }
uint64_t gguf_get_val_u64(const struct gguf_context * c, int64_t id) { return scalar_value<uint64_t>(c, id, GGUF_TYPE_UINT64); }
int64_t  gguf_get_val_i64(const struct gguf_context * c, int64_t id) { return scalar_value<int64_t >(c, id, GGUF_TYPE_INT64); }
double   gguf_get_val_f64(const struct gguf_context * c, int64_t id) { return scalar_value<double  >(c, id, GGUF_TYPE_FLOAT64); }
bool     gguf_get_val_bool(const struct gguf_context * c, int64_t id) { return scalar_value<uint8_t>(c, id, GGUF_TYPE_BOOL) != 0; }

const char * gguf_get_val_str(const struct gguf_context * ctx, int64_t key_id) {
    return (const char *) get_scalar(ctx, key_id, GGUF_TYPE_STRING).data.data();
}

size_t gguf_get_val_str_len(const struct gguf_context * ctx, int64_t key_id) {
    return get_scalar(ctx, key_id, GGUF_TYPE_STRING).data.size() - 1;
}

const void * gguf_get_val_data(const struct gguf_context * ctx, int64_t key_id) {
    const gguf_kv & kv = get_kv(ctx, key_id);
    if (kv.type == GGUF_TYPE_ARRAY) GGML_ABORT("gguf: key '%s' is an array, not a scalar", kv.key.c_str());
    return kv.data.data();
}

size_t gguf_get_arr_n(const struct gguf_context * ctx, int64_t key_id) {
    const gguf_kv & kv = get_kv(ctx, key_id);
    if (kv.type != GGUF_TYPE_ARRAY) GGML_ABORT("gguf: key '%s' is %s, not an array", kv.key.c_str(), gguf_type_name(kv.type));
    return kv.n;
}

const void * gguf_get_arr_data(const struct gguf_context * ctx, int64_t key_id) {
    const gguf_kv & kv = get_kv(ctx, key_id);
    if (kv.type != GGUF_TYPE_ARRAY || kv.elem_type == GGUF_TYPE_STRING) {
        GGML_ABORT("gguf: key '%s' is not an array of fixed-size values", kv.key.c_str());
    }
    return kv.data.data();
}

static const gguf_kv & get_str_elem(const gguf_context * ctx, int64_t key_id, size_t i) {
    const gguf_kv & kv = get_kv(ctx, key_id);
    if (kv.type != GGUF_TYPE_ARRAY || kv.elem_type != GGUF_TYPE_STRING) {
        GGML_ABORT("gguf: key '%s' is not an array of strings", kv.key.c_str());
    }
    if (i >= kv.n) GGML_ABORT("gguf: index %zu out of range for array '%s' of %zu", i, kv.key.c_str(), kv.n);
    return kv;
}

const char * gguf_get_arr_str(const struct gguf_context * ctx, int64_t key_id, size_t i) {
    const gguf_kv & kv = get_str_elem(ctx, key_id, i);
    return (const char *) kv.data.data() + kv.str_off[i];
}

size_t gguf_get_arr_str_len(const struct gguf_context * ctx, int64_t key_id, size_t i) {
    const gguf_kv & kv = get_str_elem(ctx, key_id, i);
    return kv.str_off[i + 1] - kv.str_off[i] - 1;
}

int64_t gguf_get_n_tensors(const struct gguf_context * ctx) { return (int64_t) ctx->tensors.size(); }

int64_t gguf_find_tensor(const struct gguf_context * ctx, const char * name) {
    auto it = ctx->tensor_index.find(name);
    return it == ctx->tensor_index.end() ? -1 : it->second;
}

const char * gguf_get_tensor_name(const struct gguf_context * ctx, int64_t id)   { return get_tensor(ctx, id).name.c_str(); }
enum ggml_type gguf_get_tensor_type(const struct gguf_context * ctx, int64_t id) { return get_tensor(ctx, id).type; }
int     gguf_get_tensor_n_dims(const struct gguf_context * ctx, int64_t id)      { return get_tensor(ctx, id).n_dims; }
size_t  gguf_get_tensor_offset(const struct gguf_context * ctx, int64_t id)      { return get_tensor(ctx, id).offset; }
size_t  gguf_get_tensor_size(const struct gguf_context * ctx, int64_t id)        { return get_tensor(ctx, id).size; }

int64_t gguf_get_tensor_ne(const struct gguf_context * ctx, int64_t id, int dim) {
    const gguf_tensor_info & ti = get_tensor(ctx, id);
    return dim >= 0 && dim < GGML_MAX_DIMS ? ti.ne[dim] : 1;
}

void gguf_set_val_u8  (struct gguf_context * c, const char * k, uint8_t  v) { set_scalar(c, k, GGUF_TYPE_UINT8, v); }
void gguf_set_val_i8  (struct gguf_context * c, const char * k, int8_t   v) { set_scalar(c, k, GGUF_TYPE_INT8, v); }
void gguf_set_val_u16 (struct gguf_context * c, const char * k, uint16_t v) { set_scalar(c, k, GGUF_TYPE_UINT16, v); }
void gguf_set_val_i16 (struct gguf_context * c, const char * k, int16_t  v) { set_scalar(c, k, GGUF_TYPE_INT16, v); }
void gguf_set_val_i32 (struct gguf_context * c, const char * k, int32_t  v) { set_scalar(c, k, GGUF_TYPE_INT32, v); }
void gguf_set_val_f32 (struct gguf_context * c, const char * k, float    v) { set_scalar(c, k, GGUF_TYPE_FLOAT32, v); }
void gguf_set_val_u64 (struct gguf_context * c, const char * k, uint64_t v) { set_scalar(c, k, GGUF_TYPE_UINT64, v); }
void gguf_set_val_i64 (struct gguf_context * c, const char * k, int64_t  v) { set_scalar(c, k, GGUF_TYPE_INT64, v); }
void gguf_set_val_f64 (struct gguf_context * c, const char * k, double   v) { set_scalar(c, k, GGUF_TYPE_FLOAT64, v); }
void gguf_set_val_bool(struct gguf_context * c, const char * k, bool     v) { set_scalar(c, k, GGUF_TYPE_BOOL, (uint8_t) (v ? 1 : 0)); }

void gguf_set_val_u32(struct gguf_context * ctx, const char * key, uint32_t val) {
    set_scalar(ctx, key, GGUF_TYPE_UINT32, val);
    if (std::strcmp(key, GGUF_KEY_GENERAL_ALIGNMENT) == 0) on_alignment_changed(ctx);
}

void gguf_set_val_str(struct gguf_context * ctx, const char * key, const char * val) {
    GGML_ASSERT(val);
    const std::string copy = val;   // val may point into the value being replaced
    gguf_kv & kv = slot(ctx, key);
    kv.type = kv.elem_type = GGUF_TYPE_STRING;
    store_scalar_string(kv, copy);
}

void gguf_set_arr_data(struct gguf_context * ctx, const char * key, enum gguf_type type, const void * data, size_t n) {
    const size_t sz = fixed_type_size(type);
    GGML_ASSERT(sz > 0 && "gguf_set_arr_data: element type must be a fixed-size type");
    GGML_ASSERT(data || n == 0);
    std::vector<uint8_t> bytes((const uint8_t *) data, (const uint8_t *) data + n * sz);   // data may alias the old value
    gguf_kv & kv = slot(ctx, key);
    kv.type = GGUF_TYPE_ARRAY;
    kv.elem_type = type;
    kv.n = n;
    kv.data = std::move(bytes);
}

void gguf_set_arr_str(struct gguf_context * ctx, const char * key, const char ** data, size_t n) {
    GGML_ASSERT(data || n == 0);
    // Built aside first: the strings may point into the value being replaced.
    size_t total = 0;
    for (size_t i = 0; i < n; ++i) total += std::strlen(data[i]) + 1;
    std::vector<uint8_t> bytes(total);
    std::vector<size_t> offs(n + 1);
    size_t o = 0;
    for (size_t i = 0; i < n; ++i) {
        const size_t len = std::strlen(data[i]) + 1;
        offs[i] = o;
        std::memcpy(bytes.data() + o, data[i], len);
        o += len;
    }
    offs[n] = o;
    gguf_kv & kv = slot(ctx, key);
    kv.type = GGUF_TYPE_ARRAY;
    kv.elem_type = GGUF_TYPE_STRING;
    kv.n = n;
    kv.data = std::move(bytes);
    kv.str_off = std::move(offs);
}

void gguf_set_kv(struct gguf_context * ctx, const struct gguf_context * src) {
    if (ctx == src) return;
    for (const auto & skv : src->kv) {
        gguf_kv & kv = slot(ctx, skv.key.c_str());
        kv = skv;
    }
    on_alignment_changed(ctx);
}

void gguf_remove_key(struct gguf_context * ctx, const char * key) {
    const int64_t id = gguf_find_key(ctx, key);
    if (id < 0) return;
    ctx->kv.erase(ctx->kv.begin() + id);
    if (std::strcmp(key, GGUF_KEY_GENERAL_ALIGNMENT) == 0) on_alignment_changed(ctx);
}

void gguf_add_tensor(struct gguf_context * ctx, const struct ggml_tensor * tensor) {
    GGML_ASSERT(ctx && tensor);
    const size_t len = strnlen(tensor->name, GGML_MAX_NAME);
    if (len == 0 || len >= GGML_MAX_NAME) GGML_ABORT("gguf_add_tensor: tensor name is empty or too long");
    if (ctx->tensor_index.count(tensor->name)) GGML_ABORT("gguf_add_tensor: duplicate tensor '%s'", tensor->name);
    gguf_tensor_info ti;
    ti.name = tensor->name;
    ti.type = tensor->type;
    // Trailing dimensions of 1 are not written (as ggml_n_dims), at least one is.
    ti.n_dims = 1;
    for (int d = 0; d < GGML_MAX_DIMS; ++d) {
        ti.ne[d] = tensor->ne[d];
        if (tensor->ne[d] != 1) ti.n_dims = d + 1;
    }
    if (!tensor_size("gguf_add_tensor", ti, ti.size)) GGML_ABORT("%s", g_last_error.c_str());
    ti.data = tensor->data;
    ti.offset = 0;
    for (const auto & t : ctx->tensors) ti.offset += ggml_pad(t.size, ctx->alignment);
    ctx->tensor_index.emplace(ti.name, (int64_t) ctx->tensors.size());
    ctx->tensors.push_back(std::move(ti));
}

void gguf_set_tensor_type(struct gguf_context * ctx, const char * name, enum ggml_type type) {
    const int64_t id = gguf_find_tensor(ctx, name);
    if (id < 0) GGML_ABORT("gguf_set_tensor_type: no tensor '%s'", name);
    gguf_tensor_info & ti = ctx->tensors[id];
    GGML_ASSERT(ggml_type_is_valid(type));
    ti.type = type;
    if (!tensor_size("gguf_set_tensor_type", ti, ti.size)) GGML_ABORT("%s", g_last_error.c_str());
    ti.data = nullptr;
    layout_tensors(ctx);
}

void gguf_set_tensor_data(struct gguf_context * ctx, const char * name, const void * data) {
    const int64_t id = gguf_find_tensor(ctx, name);
    if (id < 0) GGML_ABORT("gguf_set_tensor_data: no tensor '%s'", name);
    ctx->tensors[id].data = data;
}

size_t gguf_get_meta_size(const struct gguf_context * ctx) {
    std::vector<uint8_t> buf;
    write_meta(ctx, buf);
    return buf.size();
}

void gguf_get_meta_data(const struct gguf_context * ctx, void * data) {
    std::vector<uint8_t> buf;
    write_meta(ctx, buf);
    std::memcpy(data, buf.data(), buf.size());
}

bool gguf_write_to_file(const struct gguf_context * ctx, const char * fname, bool only_meta) {
    if (!only_meta) {
        for (const auto & ti : ctx->tensors) {
            if (!ti.data && ti.size) return set_error(fname, "cannot write: tensor '%s' has no data", ti.name.c_str());
        }
    }
    std::vector<uint8_t> meta;
    write_meta(ctx, meta);

    const std::string tmp = std::string(fname) + ".tmp";
    FILE * f = std::fopen(tmp.c_str(), "wb");
    if (!f) return set_error(tmp.c_str(), "cannot create: %s", strerror(errno));
    bool ok = std::fwrite(meta.data(), 1, meta.size(), f) == meta.size();
    if (!only_meta) {
        static const uint8_t zeros[256] = {};
        for (const auto & ti : ctx->tensors) {
            if (!ok) break;
            ok = std::fwrite(ti.data, 1, ti.size, f) == ti.size;
            size_t pad = ggml_pad(ti.size, ctx->alignment) - ti.size;
            while (ok && pad > 0) {
                const size_t n = pad < sizeof(zeros) ? pad : sizeof(zeros);
                ok = std::fwrite(zeros, 1, n, f) == n;
                pad -= n;
            }
        }
    }
    const int saved_errno = errno;
    if (std::fclose(f) != 0) ok = false;
    if (!ok) {
        std::remove(tmp.c_str());
        return set_error(tmp.c_str(), "write failed: %s", strerror(saved_errno));
    }
    if (std::rename(tmp.c_str(), fname) != 0) {
        const int e = errno;
        std::remove(tmp.c_str());
        return set_error(fname, "cannot rename %s to it: %s", tmp.c_str(), strerror(e));
    }
    return true;
}

} // extern "C"
