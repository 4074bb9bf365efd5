#include "llama-model-loader.h"

#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

std::string llama_format(const char * fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    va_list ap2;
    va_copy(ap2, ap);
    const int n = std::vsnprintf(nullptr, 0, fmt, ap);
    va_end(ap);
    std::string s(n > 0 ? n : 0, '\0');
    std::vsnprintf(s.data(), s.size() + 1, fmt, ap2);
    va_end(ap2);
    return s;
}

llama_mmap::llama_mmap(const std::string & path, bool populate) {
    const int fd = open(path.c_str(), O_RDONLY);
    if (fd < 0) throw llama_error(llama_format("%s: cannot open: %s", path.c_str(), std::strerror(errno)));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        throw llama_error(llama_format("%s: cannot stat: %s", path.c_str(), std::strerror(errno)));
    }
    size = (size_t) st.st_size;
    if (size > 0) {
        addr = mmap(nullptr, size, PROT_READ, MAP_SHARED | (populate ? MAP_POPULATE : 0), fd, 0);
        if (addr == MAP_FAILED) {
            addr = nullptr;
            close(fd);
            throw llama_error(llama_format("%s: mmap failed: %s", path.c_str(), std::strerror(errno)));
        }
    }
    close(fd);
}

llama_mmap::~llama_mmap() {
    if (addr) munmap(addr, size);
}

llama_model_loader::llama_model_loader(const std::string & p) : path(p) {
    split = gguf_split_open(p.c_str());
    if (!split) throw llama_error(gguf_last_error());
    meta = gguf_split_part(split, 0);
    const int64_t kid = gguf_find_key(meta, "general.architecture");
    if (kid < 0 || gguf_get_kv_type(meta, kid) != GGUF_TYPE_STRING) {
        throw llama_error(llama_format("%s: missing key general.architecture (string)", p.c_str()));
    }
    arch_name = gguf_get_val_str(meta, kid);
    for (int part = 0; part < gguf_split_n_parts(split); ++part) {
        part_paths.push_back(gguf_split_part_path(split, part));
        const gguf_context * g = gguf_split_part(split, part);
        const size_t data = gguf_get_data_offset(g);
        for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) {
            tensor_info ti{};
            ti.part = part;
            ti.id = i;
            ti.type = gguf_get_tensor_type(g, i);
            ti.n_dims = gguf_get_tensor_n_dims(g, i);
            for (int d = 0; d < GGML_MAX_DIMS; ++d) ti.ne[d] = d < ti.n_dims ? gguf_get_tensor_ne(g, i, d) : 1;
            ti.offs = data + gguf_get_tensor_offset(g, i);
            ti.size = gguf_get_tensor_size(g, i);
            tensors[gguf_get_tensor_name(g, i)] = ti;
        }
    }
}

llama_model_loader::~llama_model_loader() { gguf_split_free(split); }

std::string llama_model_loader::key(const char * fmt) const { return llama_format(fmt, arch_name.c_str()); }

bool llama_model_loader::has(const std::string & k) const { return gguf_find_key(meta, k.c_str()) >= 0; }

static bool read_int(const gguf_context * g, int64_t id, int64_t & out) {
    switch (gguf_get_kv_type(g, id)) {
        case GGUF_TYPE_UINT8:  out = gguf_get_val_u8(g, id); return true;
        case GGUF_TYPE_INT8:   out = gguf_get_val_i8(g, id); return true;
        case GGUF_TYPE_UINT16: out = gguf_get_val_u16(g, id); return true;
        case GGUF_TYPE_INT16:  out = gguf_get_val_i16(g, id); return true;
        case GGUF_TYPE_UINT32: out = gguf_get_val_u32(g, id); return true;
        case GGUF_TYPE_INT32:  out = gguf_get_val_i32(g, id); return true;
        case GGUF_TYPE_UINT64: out = (int64_t) gguf_get_val_u64(g, id); return true;
        case GGUF_TYPE_INT64:  out = gguf_get_val_i64(g, id); return true;
        case GGUF_TYPE_BOOL:   out = gguf_get_val_bool(g, id); return true;
        default: return false;
    }
}

int64_t llama_model_loader::get_i64(const std::string & k) const {
    const int64_t id = gguf_find_key(meta, k.c_str());
    if (id < 0) throw llama_error(llama_format("%s: missing key %s", path.c_str(), k.c_str()));
    int64_t v;
    if (!read_int(meta, id, v)) {
        throw llama_error(llama_format("%s: key %s has type %s, expected an integer", path.c_str(), k.c_str(),
                                       gguf_type_name(gguf_get_kv_type(meta, id))));
    }
    return v;
}

int64_t llama_model_loader::get_i64(const std::string & k, int64_t fallback) const {
    return has(k) ? get_i64(k) : fallback;
}

double llama_model_loader::get_f64(const std::string & k) const {
    const int64_t id = gguf_find_key(meta, k.c_str());
    if (id < 0) throw llama_error(llama_format("%s: missing key %s", path.c_str(), k.c_str()));
    switch (gguf_get_kv_type(meta, id)) {
        case GGUF_TYPE_FLOAT32: return gguf_get_val_f32(meta, id);
        case GGUF_TYPE_FLOAT64: return gguf_get_val_f64(meta, id);
        default: {
            int64_t v;
            if (read_int(meta, id, v)) return (double) v;
            throw llama_error(llama_format("%s: key %s has type %s, expected a number", path.c_str(), k.c_str(),
                                           gguf_type_name(gguf_get_kv_type(meta, id))));
        }
    }
}

double llama_model_loader::get_f64(const std::string & k, double fallback) const { return has(k) ? get_f64(k) : fallback; }

bool llama_model_loader::get_bool(const std::string & k, bool fallback) const { return has(k) ? get_i64(k) != 0 : fallback; }

std::string llama_model_loader::get_str(const std::string & k, const std::string & fallback) const {
    const int64_t id = gguf_find_key(meta, k.c_str());
    if (id < 0) return fallback;
    if (gguf_get_kv_type(meta, id) != GGUF_TYPE_STRING) {
        throw llama_error(llama_format("%s: key %s is not a string", path.c_str(), k.c_str()));
    }
    return std::string(gguf_get_val_str(meta, id), gguf_get_val_str_len(meta, id));
}

std::vector<int64_t> llama_model_loader::get_per_layer(const std::string & k, int n_layer, int64_t fallback, bool required) const {
    const int64_t id = gguf_find_key(meta, k.c_str());
    if (id < 0) {
        if (required) throw llama_error(llama_format("%s: missing key %s", path.c_str(), k.c_str()));
        return std::vector<int64_t>(n_layer, fallback);
    }
    if (gguf_get_kv_type(meta, id) != GGUF_TYPE_ARRAY) return std::vector<int64_t>(n_layer, get_i64(k));
    const size_t n = gguf_get_arr_n(meta, id);
    if ((int) n != n_layer) {
        throw llama_error(llama_format("%s: key %s has %zu values, expected one per layer (%d)", path.c_str(), k.c_str(), n, n_layer));
    }
    std::vector<int64_t> out(n);
    const void * data = gguf_get_arr_data(meta, id);
    switch (gguf_get_arr_type(meta, id)) {
        case GGUF_TYPE_INT32:  for (size_t i = 0; i < n; ++i) out[i] = ((const int32_t *) data)[i]; break;
        case GGUF_TYPE_UINT32: for (size_t i = 0; i < n; ++i) out[i] = ((const uint32_t *) data)[i]; break;
        default: throw llama_error(llama_format("%s: key %s: expected an array of 32-bit integers", path.c_str(), k.c_str()));
    }
    return out;
}

const llama_model_loader::tensor_info * llama_model_loader::find(const std::string & name) const {
    auto it = tensors.find(name);
    return it == tensors.end() ? nullptr : &it->second;
}

ggml_tensor * llama_model_loader::create(ggml_context * ctx, const std::string & name, std::initializer_list<int64_t> ne, bool optional) {
    auto it = tensors.find(name);
    if (it == tensors.end()) {
        if (optional) return nullptr;
        throw llama_error(llama_format("%s: missing tensor %s", path.c_str(), name.c_str()));
    }
    tensor_info & ti = it->second;
    int64_t want[GGML_MAX_DIMS] = { 1, 1, 1, 1 };
    int d = 0;
    for (int64_t v : ne) want[d++] = v;
    bool same = true;
    for (int i = 0; i < GGML_MAX_DIMS; ++i) same &= want[i] == ti.ne[i];
    if (!same) {
        throw llama_error(llama_format("%s: tensor %s has shape [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64
                                       "], expected [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "]",
                                       path.c_str(), name.c_str(), ti.ne[0], ti.ne[1], ti.ne[2], ti.ne[3], want[0],
                                       want[1], want[2], want[3]));
    }
    if (!ggml_get_type_traits(ti.type)->to_float && ti.type != GGML_TYPE_F32) {
        throw llama_error(llama_format("%s: tensor %s has type %s, which Kiln cannot decode yet", path.c_str(),
                                       name.c_str(), ggml_type_name(ti.type)));
    }
    ti.used = true;
    ggml_tensor * t = ggml_new_tensor(ctx, ti.type, std::max(1, (int) ne.size()), want);
    ggml_set_name(t, name.c_str());
    return t;
}

ggml_tensor * llama_model_loader::create_as(ggml_context * ctx, const std::string & name, std::initializer_list<int64_t> ne,
                                            bool optional) {
    auto it = tensors.find(name);
    if (it == tensors.end()) {
        if (optional) return nullptr;
        throw llama_error(llama_format("%s: missing tensor %s", path.c_str(), name.c_str()));
    }
    tensor_info & ti = it->second;
    int64_t want = 1, have = 1;
    for (int64_t v : ne) want *= v;
    for (int d = 0; d < GGML_MAX_DIMS; ++d) have *= ti.ne[d];
    if (want != have || ti.ne[0] != *ne.begin()) {
        throw llama_error(llama_format("%s: tensor %s has shape [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64
                                       "], expected rows of %" PRId64 " and %" PRId64 " values",
                                       path.c_str(), name.c_str(), ti.ne[0], ti.ne[1], ti.ne[2], ti.ne[3], *ne.begin(), want));
    }
    const int64_t saved[GGML_MAX_DIMS] = { ti.ne[0], ti.ne[1], ti.ne[2], ti.ne[3] };
    int d = 0;
    for (int i = 0; i < GGML_MAX_DIMS; ++i) ti.ne[i] = 1;
    for (int64_t v : ne) ti.ne[d++] = v;
    ggml_tensor * t = nullptr;
    try {
        t = create(ctx, name, ne, optional);
    } catch (...) {
        for (int i = 0; i < GGML_MAX_DIMS; ++i) ti.ne[i] = saved[i];
        throw;
    }
    for (int i = 0; i < GGML_MAX_DIMS; ++i) ti.ne[i] = saved[i];
    return t;
}

std::vector<std::string> llama_model_loader::unused() const {
    std::vector<std::string> out;
    for (const auto & kv : tensors) {
        if (!kv.second.used) out.push_back(kv.first);
    }
    return out;
}
