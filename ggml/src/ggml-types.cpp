// The type-traits table: layout facts of every type id Kiln knows, and the functions that
// quant families register (ggml/src/quants/*.cpp).
#include "ggml-impl.h"

#include <cstdio>

namespace {

struct type_layout {
    int          id;
    const char * name;
    int64_t      blck;
    size_t       size;
    size_t       row_meta;
    int          interleave;
    int          base;        // the plain twin of an interleaved layout (its id), else -1
};

// Sizes as in GGUF files written by llama.cpp / ik_llama.cpp (docs/FORMATS.md).
constexpr type_layout k_layouts[] = {
    {  0, "f32",      1,   4, 0, 1, -1 }, {  1, "f16",      1,   2, 0, 1, -1 },
    {  2, "q4_0",    32,  18, 0, 1, -1 }, {  3, "q4_1",    32,  20, 0, 1, -1 },
    {  6, "q5_0",    32,  22, 0, 1, -1 }, {  7, "q5_1",    32,  24, 0, 1, -1 },
    {  8, "q8_0",    32,  34, 0, 1, -1 }, {  9, "q8_1",    32,  36, 0, 1, -1 },
    { 10, "q2_K",   256,  84, 0, 1, -1 }, { 11, "q3_K",   256, 110, 0, 1, -1 },
    { 12, "q4_K",   256, 144, 0, 1, -1 }, { 13, "q5_K",   256, 176, 0, 1, -1 },
    { 14, "q6_K",   256, 210, 0, 1, -1 }, { 15, "q8_K",   256, 292, 0, 1, -1 },
    { 16, "iq2_xxs",256,  66, 0, 1, -1 }, { 17, "iq2_xs", 256,  74, 0, 1, -1 },
    { 18, "iq3_xxs",256,  98, 0, 1, -1 }, { 19, "iq1_s",  256,  50, 0, 1, -1 },
    { 20, "iq4_nl",  32,  18, 0, 1, -1 }, { 21, "iq3_s",  256, 110, 0, 1, -1 },
    { 22, "iq2_s",  256,  82, 0, 1, -1 }, { 23, "iq4_xs", 256, 136, 0, 1, -1 },
    { 24, "i8",       1,   1, 0, 1, -1 }, { 25, "i16",      1,   2, 0, 1, -1 },
    { 26, "i32",      1,   4, 0, 1, -1 }, { 27, "i64",      1,   8, 0, 1, -1 },
    { 28, "f64",      1,   8, 0, 1, -1 }, { 29, "iq1_m",  256,  56, 0, 1, -1 },
    { 30, "bf16",     1,   2, 0, 1, -1 }, { 34, "tq1_0",  256,  54, 0, 1, -1 },
    { 35, "tq2_0",  256,  66, 0, 1, -1 }, { 39, "mxfp4",   32,  17, 0, 1, -1 },
    {133, "q6_0",    32,  26, 0, 1, -1 },
    // BitNet b1.58 types of ik_llama.cpp: 64-value blocks after a row scale (iq1_bn fp16, iq2_bn f32)
    {134, "iq1_bn",  64,  13, 2, 1, -1 }, {135, "iq2_bn",  64,  16, 4, 1, -1 },
    {137, "iq2_k",  256,  76, 0, 1, -1 }, {138, "iq3_k",  256, 110, 0, 1, -1 },
    {139, "iq4_k",  256, 144, 0, 1, -1 }, {140, "iq5_k",  256, 176, 0, 1, -1 },
    {141, "iq6_k",  256, 212, 0, 1, -1 }, {144, "iq4_ks", 256, 136, 4, 1, -1 },
    {145, "iq2_ks", 256,  70, 2, 1, -1 }, {146, "iq4_kss",256, 128, 4, 1, -1 },
    {151, "q8_KV",   32,  32, 8, 1, -1 }, {152, "iq5_ks", 256, 168, 4, 1, -1 },
    {153, "iq2_kt", 256,  68, 4, 1, -1 }, {154, "iq3_kt", 256, 100, 4, 1, -1 },
    {155, "iq4_kt", 256, 128, 4, 1, -1 }, {156, "iq3_ks", 256, 102, 2, 1, -1 },
    {157, "iq2_kl", 256,  86, 2, 1, -1 }, {158, "iq1_kt", 256,  56, 4, 1, -1 },
    // row-interleaved layouts (last column: the plain twin whose rows are woven), decoded R rows at a time
    {202, "q4_0_r8",   32,  18, 0, 8, 2 }, {206, "q5_0_r4",   32,  22, 0, 4, 6 },
    {208, "q8_0_r8",   32,  34, 0, 8, 8 }, {210, "q2_k_r4",  256,  84, 0, 4, 10 },
    {211, "q3_k_r4",  256, 110, 0, 4, 11 }, {212, "q4_k_r4",  256, 144, 0, 4, 12 },
    {213, "q5_k_r4",  256, 176, 0, 4, 13 }, {214, "q6_k_r4",  256, 210, 0, 4, 14 },
    {216, "iq2_xxs_r4",256, 66, 0, 4, 16 }, {217, "iq2_xs_r4",256,  74, 0, 4, 17 },
    {218, "iq3_xxs_r4",256, 98, 0, 4, 18 }, {219, "iq1_s_r4",  32,   6, 2, 4, 19 },
    {220, "iq4_nl_r4", 32,  18, 0, 4, 20 }, {221, "iq3_s_r4", 256, 110, 0, 4, 21 },
    {222, "iq2_s_r4", 256,  82, 0, 4, 22 }, {223, "iq4_xs_r8",256, 136, 0, 8, 23 },
    {229, "iq1_m_r4",  32,   7, 2, 4, 29 }, {230, "bf16_r16",   2,   4, 0, 16, 30 },
    {233, "q6_0_r4",   32,  26, 0, 4, 133 }, {335, "iq2_bn_r4", 64,  16, 4, 4, 135 },
    {337, "iq2_k_r4", 256,  76, 0, 4, 137 }, {338, "iq3_k_r4", 256, 110, 0, 4, 138 },
    {339, "iq4_k_r4", 256, 144, 0, 4, 139 }, {340, "iq5_k_r4", 256, 176, 0, 4, 140 },
    {344, "iq4_ks_r4",256, 136, 4, 4, 144 }, {352, "iq5_ks_r4",256, 168, 4, 4, 152 },
    {353, "mxfp4_r8",  32,  17, 0, 8, 39 },
    // q8_k_r8/r16 keep an fp16 scale per row (not q8_K's f32 and sums), q8_KV_r8 only the f32 scale
    {397, "q8_k_r16", 256, 258, 0, 16, 15 }, {398, "q8_KV_r8",  32,  32, 4, 8, 151 },
    {399, "q8_k_r8",  256, 258, 0, 8, 15 },
};

ggml_type_traits * table() {
    static ggml_type_traits t[GGML_TYPE_COUNT] = {};
    static bool init = [] {
        for (auto & l : k_layouts) {
            auto & e = t[l.id];
            e.type_name         = l.name;
            e.blck_size         = l.blck;
            e.type_size         = l.size;
            e.row_meta_size     = l.row_meta;
            e.nrows_interleaved = l.interleave;
            e.interleaved_base  = l.base < 0 ? (ggml_type) l.id : (ggml_type) l.base;
            e.known             = true;
            e.is_quantized      = l.blck > 1;
        }
        return true;
    }();
    (void) init;
    return t;
}

} // namespace

extern "C" {

const ggml_type_traits * ggml_get_type_traits(ggml_type type) {
    GGML_ASSERT(type >= 0 && type < GGML_TYPE_COUNT);
    return &table()[type];
}

ggml_type_traits * ggml_type_traits_mut(ggml_type type) {
    GGML_ASSERT(type >= 0 && type < GGML_TYPE_COUNT);
    return &table()[type];
}

bool ggml_type_is_valid(int type) {
    return type >= 0 && type < GGML_TYPE_COUNT && table()[type].known;
}

// Ids the reference projects define that Kiln does not read, and why (checked against
// ik_llama.cpp: I2_S has no kernels there either and is only requantized; Q4_0_4_4 .. Q4_0_8_8
// were llama.cpp's ARM repacks, removed upstream in favour of repacking q4_0 at load).
const char * ggml_type_unsupported_reason(int type) {
    switch (type) {
        case 31: case 32: case 33:
            return "a removed ARM layout of llama.cpp (Q4_0_4_4 / Q4_0_4_8 / Q4_0_8_8, ids 31-33) that no current "
                   "program computes with; requantize from the f16/bf16 source (e.g. llama-quantize SRC.gguf OUT.gguf Q4_0)";
        case 36:
            return "I2_S (id 36), Microsoft BitNet's packed ternary layout, which ik_llama.cpp itself only accepts "
                   "as input to llama-quantize; convert it there (llama-quantize --allow-requantize IN.gguf OUT.gguf "
                   "IQ2_BN) or quantize the f16/bf16 source with Kiln's llama-quantize to IQ1_BN / IQ2_BN";
        default:
            return nullptr;
    }
}

const char * ggml_type_name(ggml_type type) {
    return ggml_type_is_valid(type) ? table()[type].type_name : "unknown";
}

int64_t ggml_blck_size(ggml_type type) { return ggml_get_type_traits(type)->blck_size; }
size_t  ggml_type_size(ggml_type type) { return ggml_get_type_traits(type)->type_size; }
bool    ggml_is_quantized(ggml_type type) { return ggml_get_type_traits(type)->is_quantized; }

size_t ggml_row_size(ggml_type type, int64_t ne) {
    const ggml_type_traits * tt = ggml_get_type_traits(type);
    GGML_ASSERT(tt->known && ne % tt->blck_size == 0);
    return tt->row_meta_size + (size_t)(ne / tt->blck_size) * tt->type_size;
}

bool ggml_quantize_requires_imatrix(ggml_type type) {
    return ggml_get_type_traits(type)->requires_imatrix;
}

size_t ggml_quantize_chunk(ggml_type type, const float * src, void * dst, int64_t start, int64_t nrows,
                           int64_t n_per_row, const float * imatrix) {
    const ggml_type_traits * tt = ggml_get_type_traits(type);
    GGML_ASSERT(start % n_per_row == 0);
    const size_t row_size = ggml_row_size(type, n_per_row);
    const int64_t first_row = start / n_per_row;
    char * out = (char *) dst + first_row * row_size;
    const float * in = src + start;
    if (type == GGML_TYPE_F32) {
        std::memcpy(out, in, nrows * n_per_row * sizeof(float));
        return nrows * row_size;
    }
    if (tt->quantize) {
        return tt->quantize(in, out, nrows, n_per_row, imatrix);
    }
    GGML_ASSERT(tt->from_float_ref && "no quantizer registered for this type");
    for (int64_t r = 0; r < nrows; ++r) {
        const float * x = in + r * n_per_row;
        for (int64_t i = 0; i < n_per_row; ++i) {
            if (!std::isfinite(x[i])) return 0;
        }
        tt->from_float_ref(x, out + r * row_size, n_per_row);
    }
    return nrows * row_size;
}

enum ggml_type ggml_interleaved_twin(enum ggml_type type) {
    if (!ggml_type_is_valid(type) || ggml_get_type_traits(type)->nrows_interleaved != 1) return type;
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        const ggml_type_traits & e = table()[t];
        if (e.known && e.nrows_interleaved > 1 && e.interleaved_base == type && e.weave) return (ggml_type) t;
    }
    return type;
}

size_t ggml_repack_rows(enum ggml_type type, const void * src, void * dst, int64_t nrows, int64_t n_per_row) {
    const ggml_type_traits * tt = ggml_get_type_traits(type);
    const int R = tt->nrows_interleaved;
    if (!tt->weave || R <= 1 || nrows % R != 0 || n_per_row % tt->blck_size != 0 ||
        n_per_row % ggml_blck_size(tt->interleaved_base) != 0) {
        return 0;
    }
    const size_t base_row = ggml_row_size(tt->interleaved_base, n_per_row), row = ggml_row_size(type, n_per_row);
    const char * rows[16];
    for (int64_t r = 0; r < nrows; r += R) {
        for (int k = 0; k < R; ++k) rows[k] = (const char *) src + (r + k) * base_row;
        char * group = (char *) dst + r * row;
        std::memset(group, 0, R * row);
        tt->weave(rows, n_per_row, group);
    }
    return nrows * row;
}

float       ggml_fp16_to_fp32(ggml_fp16_t h) { return ggml_compute_fp16_to_fp32(h); }
ggml_fp16_t ggml_fp32_to_fp16(float f)       { return ggml_compute_fp32_to_fp16(f); }
float       ggml_bf16_to_fp32(ggml_bf16_t h) { return ggml_compute_bf16_to_fp32(h); }
ggml_bf16_t ggml_fp32_to_bf16(float f)       { return ggml_compute_fp32_to_bf16(f); }

void ggml_fp16_to_fp32_row(const ggml_fp16_t * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = ggml_compute_fp16_to_fp32(x[i]);
}
void ggml_fp32_to_fp16_row(const float * x, ggml_fp16_t * y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = ggml_compute_fp32_to_fp16(x[i]);
}
void ggml_bf16_to_fp32_row(const ggml_bf16_t * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = ggml_compute_bf16_to_fp32(x[i]);
}
void ggml_fp32_to_bf16_row(const float * x, ggml_bf16_t * y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = ggml_compute_fp32_to_bf16(x[i]);
}

} // extern "C"

// f32, f16 and bf16 register like any other family.
namespace {
void f32_to_float(const void * x, float * y, int64_t n) { std::memcpy(y, x, n * sizeof(float)); }
void f32_from_float(const float * x, void * y, int64_t n) { std::memcpy(y, x, n * sizeof(float)); }
void f16_to_float(const void * x, float * y, int64_t n) { ggml_fp16_to_fp32_row((const ggml_fp16_t *) x, y, n); }
void f16_from_float(const float * x, void * y, int64_t n) { ggml_fp32_to_fp16_row(x, (ggml_fp16_t *) y, n); }
void bf16_to_float(const void * x, float * y, int64_t n) { ggml_bf16_to_fp32_row((const ggml_bf16_t *) x, y, n); }
void bf16_from_float(const float * x, void * y, int64_t n) { ggml_fp32_to_bf16_row(x, (ggml_bf16_t *) y, n); }

void register_float_types() {
    auto * f32 = ggml_type_traits_mut(GGML_TYPE_F32);
    f32->to_float = f32_to_float;
    f32->from_float_ref = f32_from_float;
    auto * f16 = ggml_type_traits_mut(GGML_TYPE_F16);
    f16->to_float = f16_to_float;
    f16->from_float_ref = f16_from_float;
    auto * bf16 = ggml_type_traits_mut(GGML_TYPE_BF16);
    bf16->to_float = bf16_to_float;
    bf16->from_float_ref = bf16_from_float;
}
GGML_REGISTER(register_float_types);
} // namespace
