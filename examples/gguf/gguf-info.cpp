// `llama-gguf info` and `llama-gguf check`.
#include "commands.h"

#include "ggml.h"
#include "gguf.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr size_t k_max_str   = 80;   // longer strings are shortened in the listing
constexpr size_t k_max_elems = 8;    // arrays show this many leading elements

// Quoted, escaped, and shortened to max_len bytes of the original.
std::string quote(const char * s, size_t len, size_t max_len = k_max_str) {
    std::string out = "\"";
    const size_t n = len < max_len ? len : max_len;
    for (size_t i = 0; i < n; ++i) {
        const unsigned char c = (unsigned char) s[i];
        switch (c) {
            case '"':  out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n";  break;
            case '\r': out += "\\r";  break;
            case '\t': out += "\\t";  break;
            default:
                if (c < 0x20 || c == 0x7f) {
                    char b[8];
                    std::snprintf(b, sizeof(b), "\\x%02x", c);
                    out += b;
                } else {
                    out += (char) c;   // UTF-8 passes through
                }
        }
    }
    out += "\"";
    if (len > max_len) out += "... (" + std::to_string(len) + " bytes)";
    return out;
}

std::string scalar_str(gguf_type type, const void * p) {
    char b[64];
    switch (type) {
        case GGUF_TYPE_UINT8:   std::snprintf(b, sizeof(b), "%u", *(const uint8_t *) p); break;
        case GGUF_TYPE_INT8:    std::snprintf(b, sizeof(b), "%d", *(const int8_t *) p); break;
        case GGUF_TYPE_UINT16:  { uint16_t v; std::memcpy(&v, p, 2); std::snprintf(b, sizeof(b), "%u", v); break; }
        case GGUF_TYPE_INT16:   { int16_t v;  std::memcpy(&v, p, 2); std::snprintf(b, sizeof(b), "%d", v); break; }
        case GGUF_TYPE_UINT32:  { uint32_t v; std::memcpy(&v, p, 4); std::snprintf(b, sizeof(b), "%u", v); break; }
        case GGUF_TYPE_INT32:   { int32_t v;  std::memcpy(&v, p, 4); std::snprintf(b, sizeof(b), "%d", v); break; }
        case GGUF_TYPE_FLOAT32: { float v;    std::memcpy(&v, p, 4); std::snprintf(b, sizeof(b), "%.9g", v); break; }
        case GGUF_TYPE_UINT64:  { uint64_t v; std::memcpy(&v, p, 8); std::snprintf(b, sizeof(b), "%" PRIu64, v); break; }
        case GGUF_TYPE_INT64:   { int64_t v;  std::memcpy(&v, p, 8); std::snprintf(b, sizeof(b), "%" PRId64, v); break; }
        case GGUF_TYPE_FLOAT64: { double v;   std::memcpy(&v, p, 8); std::snprintf(b, sizeof(b), "%.17g", v); break; }
        case GGUF_TYPE_BOOL:    return *(const uint8_t *) p ? "true" : "false";
        default:                return "?";
    }
    return b;
}

size_t elem_size(gguf_type type) {
    switch (type) {
        case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
        case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
        case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
        default: return 8;
    }
}

// "type = value" of one key, arrays abbreviated to their first elements.
std::string kv_str(const gguf_context * ctx, int64_t id) {
    const gguf_type type = gguf_get_kv_type(ctx, id);
    if (type == GGUF_TYPE_STRING) {
        return std::string("str = ") + quote(gguf_get_val_str(ctx, id), gguf_get_val_str_len(ctx, id));
    }
    if (type != GGUF_TYPE_ARRAY) {
        return std::string(gguf_type_name(type)) + " = " + scalar_str(type, gguf_get_val_data(ctx, id));
    }
    const gguf_type et = gguf_get_arr_type(ctx, id);
    const size_t n = gguf_get_arr_n(ctx, id);
    std::string out = std::string("arr[") + gguf_type_name(et) + "," + std::to_string(n) + "] = [";
    const size_t shown = n < k_max_elems ? n : k_max_elems;
    for (size_t i = 0; i < shown; ++i) {
        if (i) out += ", ";
        if (et == GGUF_TYPE_STRING) {
            out += quote(gguf_get_arr_str(ctx, id, i), gguf_get_arr_str_len(ctx, id, i), 32);
        } else {
            out += scalar_str(et, (const char *) gguf_get_arr_data(ctx, id) + i * elem_size(et));
        }
    }
    if (n > shown) out += ", ...";
    return out + "]";
}

std::string shape_str(const gguf_context * ctx, int64_t t) {
    std::string s = "[";
    for (int d = 0; d < gguf_get_tensor_n_dims(ctx, t); ++d) {
        if (d) s += ", ";
        s += std::to_string(gguf_get_tensor_ne(ctx, t, d));
    }
    return s + "]";
}

bool is_help(const char * a) { return std::strcmp(a, "-h") == 0 || std::strcmp(a, "--help") == 0; }

// Splits args into file names; false (after printing why) on an unknown flag.
bool parse_files(const char * cmd, const char * usage, int argc, char ** argv, std::vector<const char *> & files, bool & help) {
    help = false;
    bool only_files = false;
    for (int i = 0; i < argc; ++i) {
        const char * a = argv[i];
        if (!only_files && is_help(a)) {
            help = true;
            std::printf("usage: llama-gguf %s %s\n", cmd, usage);
            return true;
        }
        if (!only_files && std::strcmp(a, "--") == 0) {
            only_files = true;
        } else if (!only_files && a[0] == '-' && a[1] != 0) {
            std::fprintf(stderr, "llama-gguf %s: unknown option '%s'\nusage: llama-gguf %s %s\n", cmd, a, cmd, usage);
            return false;
        } else {
            files.push_back(a);
        }
    }
    if (files.empty()) {
        std::fprintf(stderr, "llama-gguf %s: no file given\nusage: llama-gguf %s %s\n", cmd, cmd, usage);
        return false;
    }
    return true;
}

void print_info(const char * fname, const gguf_context * ctx) {
    std::printf("file:        %s\n", fname);
    std::printf("version:     %u\n", gguf_get_version(ctx));
    std::printf("alignment:   %zu\n", gguf_get_alignment(ctx));
    std::printf("data offset: %zu\n", gguf_get_data_offset(ctx));
    std::printf("file size:   %zu\n", gguf_get_file_size(ctx));
    const int64_t n_kv = gguf_get_n_kv(ctx);
    std::printf("kv count:    %" PRId64 "\n", n_kv);
    for (int64_t i = 0; i < n_kv; ++i) {
        std::printf("  %4" PRId64 ": %-40s %s\n", i, gguf_get_key(ctx, i), kv_str(ctx, i).c_str());
    }
    const int64_t n_t = gguf_get_n_tensors(ctx);
    std::printf("tensors:     %" PRId64 "\n", n_t);
    if (n_t > 0) {
        std::printf("  %5s  %-40s %-10s %-24s %12s %12s\n", "index", "name", "type", "shape", "bytes", "offset");
    }
    size_t total_bytes = 0;
    int64_t total_elems = 0;
    for (int64_t t = 0; t < n_t; ++t) {
        const ggml_type type = gguf_get_tensor_type(ctx, t);
        const size_t bytes = gguf_get_tensor_size(ctx, t);
        int64_t nel = 1;
        for (int d = 0; d < GGML_MAX_DIMS; ++d) nel *= gguf_get_tensor_ne(ctx, t, d);
        total_bytes += bytes;
        total_elems += nel;
        std::printf("  %5" PRId64 "  %-40s %-10s %-24s %12zu %12zu\n", t, gguf_get_tensor_name(ctx, t),
                    ggml_type_name(type), shape_str(ctx, t).c_str(), bytes, gguf_get_tensor_offset(ctx, t));
    }
    std::printf("total:       %" PRId64 " tensors, %" PRId64 " elements, %zu bytes (%.2f MiB), %.3f bits/weight\n",
                n_t, total_elems, total_bytes, total_bytes / 1048576.0,
                total_elems ? 8.0 * total_bytes / total_elems : 0.0);
}

} // namespace

int gguf_cmd_info(int argc, char ** argv) {
    std::vector<const char *> files;
    bool help;
    if (!parse_files("info", "FILE...", argc, argv, files, help)) return 1;
    if (help) return 0;
    int rc = 0;
    for (size_t i = 0; i < files.size(); ++i) {
        gguf_init_params params = { true, nullptr };
        gguf_context * ctx = gguf_init_from_file(files[i], params);
        if (!ctx) {
            std::fprintf(stderr, "error: %s\n", gguf_last_error());
            rc = 1;
            continue;
        }
        if (i) std::printf("\n");
        print_info(files[i], ctx);
        gguf_free(ctx);
    }
    return rc;
}

int gguf_cmd_check(int argc, char ** argv) {
    std::vector<const char *> files;
    bool help;
    if (!parse_files("check", "FILE...", argc, argv, files, help)) return 1;
    if (help) return 0;
    int rc = 0;
    for (const char * f : files) {
        // gguf_split_open parses every part (all fields, tensor data inside each file, no overlaps)
        // and checks the split keys; an unsplit file is a model of one part.
        gguf_split * split = gguf_split_open(f);
        if (!split) {
            std::fprintf(stderr, "INVALID: %s\n", gguf_last_error());   // the message names the file
            rc = 1;
            continue;
        }
        size_t data_bytes = 0;
        int64_t n_kv = 0;
        for (int p = 0; p < gguf_split_n_parts(split); ++p) {
            const gguf_context * ctx = gguf_split_part(split, p);
            n_kv += gguf_get_n_kv(ctx);
            for (int64_t t = 0; t < gguf_get_n_tensors(ctx); ++t) data_bytes += gguf_get_tensor_size(ctx, t);
        }
        std::printf("%s: OK (GGUF v%u, %d part%s, %" PRId64 " keys, %" PRId64 " tensors, %zu bytes of tensor data)\n", f,
                    gguf_get_version(gguf_split_part(split, 0)), gguf_split_n_parts(split),
                    gguf_split_n_parts(split) == 1 ? "" : "s", n_kv, gguf_split_n_tensors(split), data_bytes);
        gguf_split_free(split);
    }
    return rc;
}
