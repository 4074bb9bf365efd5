// Models split across several GGUF files (the layout of llama.cpp's llama-gguf-split):
// part names, and opening all the parts of a model as one set with their split keys checked.
#include "gguf.h"

#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <sys/stat.h>

void gguf_internal_set_error(const char * fname, const char * msg);   // gguf.cpp

struct gguf_split {
    std::vector<std::string>    paths;
    std::vector<gguf_context *> parts;
    std::unordered_map<std::string, std::pair<int, int64_t>> tensor_part;   // name -> (part, id)

    ~gguf_split() {
        for (auto * p : parts) gguf_free(p);
    }
};

namespace {

bool fail(const std::string & fname, const char * fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 2, 3)))
#endif
    ;

bool fail(const std::string & fname, const char * fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    gguf_internal_set_error(fname.c_str(), buf);
    return false;
}

// An integer-valued key of any integer type. 1: found, 0: absent, -1: not an integer.
int get_int_key(const gguf_context * ctx, const char * key, int64_t & out) {
    const int64_t id = gguf_find_key(ctx, key);
    if (id < 0) return 0;
    switch (gguf_get_kv_type(ctx, id)) {
        case GGUF_TYPE_UINT8:  out = gguf_get_val_u8(ctx, id);  return 1;
        case GGUF_TYPE_INT8:   out = gguf_get_val_i8(ctx, id);  return 1;
        case GGUF_TYPE_UINT16: out = gguf_get_val_u16(ctx, id); return 1;
        case GGUF_TYPE_INT16:  out = gguf_get_val_i16(ctx, id); return 1;
        case GGUF_TYPE_UINT32: out = gguf_get_val_u32(ctx, id); return 1;
        case GGUF_TYPE_INT32:  out = gguf_get_val_i32(ctx, id); return 1;
        case GGUF_TYPE_UINT64: out = (int64_t) gguf_get_val_u64(ctx, id); return out >= 0 ? 1 : -1;
        case GGUF_TYPE_INT64:  out = gguf_get_val_i64(ctx, id); return 1;
        default: return -1;
    }
}

bool file_exists(const std::string & path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
}

// Checks part `no` of `count` carries the matching split keys.
bool check_split_keys(const gguf_context * ctx, const std::string & path, int64_t no, int64_t count) {
    int64_t v = 0;
    int r = get_int_key(ctx, GGUF_KEY_SPLIT_COUNT, v);
    if (r <= 0) return fail(path, "split part %" PRId64 " of %" PRId64 " has %s key '%s'", no + 1, count,
                            r == 0 ? "no" : "a non-integer", GGUF_KEY_SPLIT_COUNT);
    if (v != count) return fail(path, "'%s' is %" PRId64 ", but the first part says %" PRId64, GGUF_KEY_SPLIT_COUNT, v, count);
    r = get_int_key(ctx, GGUF_KEY_SPLIT_NO, v);
    if (r <= 0) return fail(path, "split part %" PRId64 " of %" PRId64 " has %s key '%s'", no + 1, count,
                            r == 0 ? "no" : "a non-integer", GGUF_KEY_SPLIT_NO);
    if (v != no) return fail(path, "'%s' is %" PRId64 ", expected %" PRId64 " for this part's name", GGUF_KEY_SPLIT_NO, v, no);
    return true;
}

bool open_parts(gguf_split & s, const char * path) {
    gguf_init_params params = { true, nullptr };
    gguf_context * first = gguf_init_from_file(path, params);
    if (!first) return false;
    s.paths.emplace_back(path);
    s.parts.push_back(first);

    int64_t count = 1;
    const int r = get_int_key(first, GGUF_KEY_SPLIT_COUNT, count);
    if (r < 0 || (r > 0 && (count < 1 || count > 99999))) {
        return fail(path, "key '%s' is not a valid part count", GGUF_KEY_SPLIT_COUNT);
    }
    if (count > 1) {
        int64_t no = 0;
        if (get_int_key(first, GGUF_KEY_SPLIT_NO, no) > 0 && no != 0) {
            return fail(path, "this is part %" PRId64 " of a %" PRId64 "-part split model; open the first part (-00001-of-%05d.gguf)",
                        no + 1, count, (int) count);
        }
        if (!check_split_keys(first, path, 0, count)) return false;
        std::vector<char> prefix(std::strlen(path) + 1);
        if (gguf_split_prefix(prefix.data(), prefix.size(), path, 0, (int) count) <= 0) {
            return fail(path, "a %" PRId64 "-part split model's first part must be named <prefix>-00001-of-%05d.gguf",
                        count, (int) count);
        }
        for (int i = 1; i < count; ++i) {
            const int len = gguf_split_path(nullptr, 0, prefix.data(), i, (int) count);
            std::vector<char> part_path((size_t) len + 1);
            gguf_split_path(part_path.data(), part_path.size(), prefix.data(), i, (int) count);
            const std::string pp = part_path.data();
            if (!file_exists(pp)) {
                return fail(path, "split part %d of %" PRId64 " is missing: %s", i + 1, count, pp.c_str());
            }
            gguf_context * part = gguf_init_from_file(pp.c_str(), params);
            if (!part) return false;
            s.paths.push_back(pp);
            s.parts.push_back(part);
            if (!check_split_keys(part, pp, i, count)) return false;
        }
    }

    size_t total = 0;
    for (size_t p = 0; p < s.parts.size(); ++p) total += (size_t) gguf_get_n_tensors(s.parts[p]);
    s.tensor_part.reserve(total);
    for (size_t p = 0; p < s.parts.size(); ++p) {
        const gguf_context * ctx = s.parts[p];
        int64_t declared = 0;
        const int rt = get_int_key(ctx, GGUF_KEY_SPLIT_TENSORS_COUNT, declared);
        if (rt < 0) return fail(s.paths[p], "key '%s' is not an integer", GGUF_KEY_SPLIT_TENSORS_COUNT);
        if (rt > 0 && count > 1 && declared != (int64_t) total) {
            return fail(s.paths[p], "'%s' is %" PRId64 ", but the %zu parts hold %zu tensors",
                        GGUF_KEY_SPLIT_TENSORS_COUNT, declared, s.parts.size(), total);
        }
        for (int64_t t = 0; t < gguf_get_n_tensors(ctx); ++t) {
            const char * name = gguf_get_tensor_name(ctx, t);
            auto [it, inserted] = s.tensor_part.emplace(name, std::make_pair((int) p, t));
            if (!inserted) {
                return fail(s.paths[p], "tensor '%s' is also in %s", name, s.paths[it->second.first].c_str());
            }
        }
    }
    return true;
}

} // namespace

extern "C" {

int gguf_split_path(char * path, size_t maxlen, const char * prefix, int split_no, int split_count) {
    return std::snprintf(path, maxlen, "%s-%05d-of-%05d.gguf", prefix, split_no + 1, split_count);
}

int gguf_split_prefix(char * prefix, size_t maxlen, const char * split_path, int split_no, int split_count) {
    char suffix[64];
    std::snprintf(suffix, sizeof(suffix), "-%05d-of-%05d.gguf", split_no + 1, split_count);
    const size_t len = std::strlen(split_path), slen = std::strlen(suffix);
    if (len <= slen || std::strcmp(split_path + len - slen, suffix) != 0) return 0;
    const size_t plen = len - slen;
    if (prefix && maxlen > 0) {
        const size_t n = plen < maxlen - 1 ? plen : maxlen - 1;
        std::memcpy(prefix, split_path, n);
        prefix[n] = 0;
    }
    return (int) plen;
}

int gguf_split_count(const struct gguf_context * ctx) {
    int64_t v = 1;
    const int r = get_int_key(ctx, GGUF_KEY_SPLIT_COUNT, v);
    if (r < 0 || v < 1 || v > 99999) return 0;
    return (int) v;
}

struct gguf_split * gguf_split_open(const char * path) {
    auto * s = new gguf_split;
    if (!open_parts(*s, path)) {
        delete s;
        return nullptr;
    }
    return s;
}

void gguf_split_free(struct gguf_split * split) { delete split; }

int gguf_split_n_parts(const struct gguf_split * split) { return (int) split->parts.size(); }

const char * gguf_split_part_path(const struct gguf_split * split, int part) {
    return part >= 0 && part < (int) split->paths.size() ? split->paths[part].c_str() : nullptr;
}

const struct gguf_context * gguf_split_part(const struct gguf_split * split, int part) {
    return part >= 0 && part < (int) split->parts.size() ? split->parts[part] : nullptr;
}

int64_t gguf_split_n_tensors(const struct gguf_split * split) { return (int64_t) split->tensor_part.size(); }

int64_t gguf_split_find_tensor(const struct gguf_split * split, const char * name, int * part) {
    auto it = split->tensor_part.find(name);
    if (it == split->tensor_part.end()) {
        if (part) *part = -1;
        return -1;
    }
    if (part) *part = it->second.first;
    return it->second.second;
}

} // extern "C"
