// The tensors of golden/quants.gguf (golden/README.md): type, shape and raw bytes of each, by name.
// Read by test-quants-golden (our CPU code against the reference) and test-quants-blocks (the
// decoders the GPU shares, against the reference's dequantized values). GoogleTest-free and
// json-free, so test-quants-blocks still builds on a machine without the tools' dependencies.
#pragma once

#include "gguf.h"
#include "testing.h"

#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <vector>

struct golden_tensor {
    ggml_type            type = GGML_TYPE_F32;
    std::vector<int64_t> ne;
    std::vector<uint8_t> data;

    const float * f32() const { return (const float *) data.data(); }
    int64_t nelements() const {
        int64_t n = 1;
        for (auto e : ne) n *= e;
        return n;
    }
};

struct golden_tensors {
    std::string                          error;   // non-empty when the file could not be read
    std::map<std::string, golden_tensor> tensors;

    const golden_tensor * find(const std::string & name) const {
        auto it = tensors.find(name);
        return it == tensors.end() ? nullptr : &it->second;
    }
};

inline golden_tensors read_golden_tensors() {
    golden_tensors g;
    const std::string path = kiln_test::shared_path("golden/quants.gguf");
    gguf_init_params params = { /*no_alloc =*/ true, /*ctx =*/ nullptr };
    gguf_context * ctx = gguf_init_from_file(path.c_str(), params);
    if (!ctx) {
        g.error = path + ": " + (gguf_last_error() ? gguf_last_error() : "cannot read");
        return g;
    }
    std::ifstream in(path, std::ios::binary);
    const size_t data_offset = gguf_get_data_offset(ctx);
    for (int64_t i = 0; i < gguf_get_n_tensors(ctx); ++i) {
        golden_tensor t;
        t.type = gguf_get_tensor_type(ctx, i);
        for (int d = 0; d < gguf_get_tensor_n_dims(ctx, i); ++d) t.ne.push_back(gguf_get_tensor_ne(ctx, i, d));
        t.data.resize(gguf_get_tensor_size(ctx, i));
        in.seekg((std::streamoff) (data_offset + gguf_get_tensor_offset(ctx, i)));
        in.read((char *) t.data.data(), (std::streamsize) t.data.size());
        if (!in) {
            g.error = path + ": short read of tensor " + gguf_get_tensor_name(ctx, i);
            break;
        }
        g.tensors.emplace(gguf_get_tensor_name(ctx, i), std::move(t));
    }
    gguf_free(ctx);
    return g;
}
