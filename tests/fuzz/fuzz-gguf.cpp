// The GGUF reader on arbitrary bytes: every field of a file it accepts is read back (the
// sanitizers see any read past what the reader validated), tensor data is copied into a ggml
// context, the metadata written back out must parse again to the same keys and tensors, and the
// vocabulary loader runs on whatever tokenizer.* keys the file holds.

#include "fuzz-support.h"

#include "ggml.h"

#include <cstring>
#include <vector>

namespace {

uint64_t checksum(const void * p, size_t n, uint64_t h) {
    const auto * b = static_cast<const uint8_t *>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

size_t element_size(gguf_type type) {
    switch (type) {
        case GGUF_TYPE_UINT8:  case GGUF_TYPE_INT8:  case GGUF_TYPE_BOOL:    return 1;
        case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16:                         return 2;
        case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
        case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
        default: kiln_fuzz::finding("gguf", std::string("a value of type ") + gguf_type_name(type) + " was accepted");
    }
}

// with_offsets false: everything but where each tensor's data lies (the writer lays tensors out
// anew, in order, so a file read with gaps between them is written without)
uint64_t read_every_field(const gguf_context * ctx, bool with_offsets = true) {
    uint64_t h = 14695981039346656037ull;
    for (int64_t k = 0; k < gguf_get_n_kv(ctx); ++k) {
        const char * key = gguf_get_key(ctx, k);
        h = checksum(key, std::strlen(key), h);
        if (gguf_find_key(ctx, key) != k) kiln_fuzz::finding("gguf", std::string("key found at another index: ") + key);
        const gguf_type type = gguf_get_kv_type(ctx, k);
        if (type == GGUF_TYPE_STRING) {
            h = checksum(gguf_get_val_str(ctx, k), gguf_get_val_str_len(ctx, k), h);
        } else if (type == GGUF_TYPE_ARRAY) {
            const size_t n = gguf_get_arr_n(ctx, k);
            if (gguf_get_arr_type(ctx, k) == GGUF_TYPE_STRING) {
                for (size_t i = 0; i < n; ++i) h = checksum(gguf_get_arr_str(ctx, k, i), gguf_get_arr_str_len(ctx, k, i), h);
            } else {
                h = checksum(gguf_get_arr_data(ctx, k), n * element_size(gguf_get_arr_type(ctx, k)), h);
            }
        } else {
            h = checksum(gguf_get_val_data(ctx, k), element_size(type), h);
        }
    }
    for (int64_t t = 0; t < gguf_get_n_tensors(ctx); ++t) {
        const char * name = gguf_get_tensor_name(ctx, t);
        h = checksum(name, std::strlen(name), h);
        for (int d = 0; d < gguf_get_tensor_n_dims(ctx, t); ++d) h += (uint64_t) gguf_get_tensor_ne(ctx, t, d);
        h += (with_offsets ? gguf_get_tensor_offset(ctx, t) : 0) + gguf_get_tensor_size(ctx, t) + (uint64_t) gguf_get_tensor_type(ctx, t);
    }
    return h;
}

// Written back, the metadata must describe the same file: the writer and the reader agree. The
// writer lays the tensors out one after the other, so the image gets a data section of that size.
void check_round_trip(const gguf_context * ctx) {
    std::vector<uint8_t> image(gguf_get_meta_size(ctx));
    gguf_get_meta_data(ctx, image.data());
    if (image.size() != gguf_get_data_offset(ctx)) {
        kiln_fuzz::finding("gguf", "metadata written back is " + std::to_string(image.size()) + " bytes, read " +
                                       std::to_string(gguf_get_data_offset(ctx)));
    }
    size_t data_bytes = 0;
    for (int64_t t = 0; t < gguf_get_n_tensors(ctx); ++t) {
        const size_t a = gguf_get_alignment(ctx);
        data_bytes += (gguf_get_tensor_size(ctx, t) + a - 1) / a * a;
    }
    image.resize(image.size() + data_bytes, 0);
    gguf_init_params params{};
    params.no_alloc = true;
    gguf_context * again = gguf_init_from_buffer(image.data(), image.size(), "round-trip", params);
    if (!again) kiln_fuzz::finding("gguf", std::string("metadata written back does not parse: ") + gguf_last_error());
    if (gguf_get_n_kv(again) != gguf_get_n_kv(ctx) || gguf_get_n_tensors(again) != gguf_get_n_tensors(ctx) ||
        read_every_field(again, false) != read_every_field(ctx, false)) {
        kiln_fuzz::finding("gguf", "metadata written back reads differently");
    }
    gguf_free(again);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    ggml_context * tensors = nullptr;
    gguf_init_params params{};
    params.no_alloc = false;
    params.ctx = &tensors;
    gguf_context * ctx = gguf_init_from_buffer(data, size, "fuzz.gguf", params);
    if (!ctx) {
        if (gguf_last_error()[0] == '\0') kiln_fuzz::finding("gguf", "refused without a message");
        return 0;
    }
    read_every_field(ctx);
    for (ggml_tensor * t = ggml_get_first_tensor(tensors); t; t = ggml_get_next_tensor(tensors, t)) {
        checksum(t->data, ggml_nbytes(t), 0);
    }
    check_round_trip(ctx);

    llama_vocab vocab;
    std::string err;
    if (vocab.load(ctx, err)) {
        const std::vector<int32_t> ids = vocab.tokenize("Hello world, <|im_start|> 12345 \xe4\xbd\xa0\xe5\xa5\xbd", true, true);
        for (int32_t id : ids) {
            if (id < 0 || (uint32_t) id >= vocab.n_tokens()) kiln_fuzz::finding("gguf", "token id out of range: " + std::to_string(id));
        }
        vocab.detokenize(ids, false, true);
    } else if (err.empty()) {
        kiln_fuzz::finding("gguf", "vocabulary refused without a message");
    }
    gguf_free(ctx);
    ggml_free(tensors);
    return 0;
}
