// Reading a model: the GGUF metadata (with clear errors naming the missing or mistyped key),
// the tensors an architecture asks for (checked against the file's shapes), and their data,
// mapped in place from the file (mmap) or read into memory (--no-mmap).
#pragma once

#include "gguf.h"
#include "llama-impl.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

struct llama_mmap {
    void * addr = nullptr;
    size_t size = 0;
    // populate: fault every page in at map time (MAP_POPULATE), as llama.cpp's loader does, so the
    // first tokens do not pay for page faults (or disk reads) of weights they touch first
    explicit llama_mmap(const std::string & path, bool populate = false);
    ~llama_mmap();
    llama_mmap(const llama_mmap &) = delete;
    llama_mmap & operator=(const llama_mmap &) = delete;
};

struct llama_model_loader {
    std::string path;
    gguf_split * split = nullptr;
    const gguf_context * meta = nullptr;   // the first part: all metadata lives there
    std::string arch_name;
    std::vector<std::string> part_paths;

    // every tensor in the file(s), by name
    struct tensor_info {
        int part;
        int64_t id;
        ggml_type type;
        int n_dims;
        int64_t ne[GGML_MAX_DIMS];
        size_t offs;    // absolute file offset of the data
        size_t size;
        bool used = false;
    };
    std::map<std::string, tensor_info> tensors;

    explicit llama_model_loader(const std::string & path);
    ~llama_model_loader();

    // metadata: "arch.key" names use %s for the architecture, like "%s.block_count"
    std::string key(const char * fmt) const;
    bool has(const std::string & key) const;
    int64_t     get_i64(const std::string & key) const;                       // any integer type
    int64_t     get_i64(const std::string & key, int64_t fallback) const;
    double      get_f64(const std::string & key) const;                       // any float/int type
    double      get_f64(const std::string & key, double fallback) const;
    bool        get_bool(const std::string & key, bool fallback) const;
    std::string get_str(const std::string & key, const std::string & fallback = "") const;
    // per-layer arrays or a single value repeated for every layer
    std::vector<int64_t> get_per_layer(const std::string & key, int n_layer, int64_t fallback, bool required) const;

    const tensor_info * find(const std::string & name) const;
    // the ggml tensor of the given name and shape, created in ctx; throws if missing (unless
    // optional, then NULL) or if the shape differs
    ggml_tensor * create(ggml_context * ctx, const std::string & name, std::initializer_list<int64_t> ne, bool optional = false);
    // like create, but any file shape with the same row length and element count is accepted
    // and viewed as ne (e.g. [a, b*c] stored, [a, b, c] wanted)
    ggml_tensor * create_as(ggml_context * ctx, const std::string & name, std::initializer_list<int64_t> ne, bool optional = false);
    // names of tensors in the file that no architecture code asked for
    std::vector<std::string> unused() const;
};
