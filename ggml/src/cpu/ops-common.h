// Shared pieces of the CPU op kernels (ops-*.cpp): row addressing, row loading/storing in any
// float type, per-thread scratch, and the table of vector primitives that each instruction set
// fills (scalar reference in ops-vec.cpp, SIMD in avx2/ops-vec.cpp and avx512/ops-vec.cpp).
#pragma once

#include "cpu-ops.h"
#include "ggml-cpu.h"

#include <cmath>
#include <cstdint>

// Vector primitives on dense f32 rows. Every entry has a scalar reference; an ISA level may
// replace any subset. Kernels fetch the table once per op with ggml_cpu_vec(), which honours
// the ISA cap (ggml_cpu_set_isa), so tests can compare paths.
struct ggml_cpu_vec_fns {
    void (*add)(int64_t n, float * z, const float * x, const float * y);
    void (*sub)(int64_t n, float * z, const float * x, const float * y);
    void (*mul)(int64_t n, float * z, const float * x, const float * y);
    void (*div)(int64_t n, float * z, const float * x, const float * y);
    void (*scale_bias)(int64_t n, float * y, const float * x, float s, float b);  // y = s*x + b
    void (*silu)(int64_t n, float * y, const float * x);
    void (*gelu)(int64_t n, float * y, const float * x);
    void (*swiglu)(int64_t n, float * z, const float * gate, const float * up);
    float (*sum)(int64_t n, const float * x);
    float (*sum_sq)(int64_t n, const float * x);
    float (*max)(int64_t n, const float * x);
    // y = exp(x - m); returns the sum of y (x may alias y)
    float (*exp_sum)(int64_t n, float * y, const float * x, float m);
    float (*dot)(int64_t n, const float * x, const float * y);
    void (*axpy)(int64_t n, float * y, float a, const float * x);     // y += a*x
    // out[t] = dot(x, rows[t]) for t < nr (attention scores against a tile of keys)
    void (*dot_rows)(int64_t n, const float * x, const float * const * rows, int64_t nr, float * out);
    // y += sum over t < nr of a[t] * rows[t] (attention output over a tile of values)
    void (*axpy_rows)(int64_t n, float * y, const float * a, const float * const * rows, int64_t nr);
    // Blocked forms for up to 4 query rows at once (register tiles); NULL at levels that only
    // have the one-row forms above (the scalar level included), callers then loop over rows.
    // out[r*out_stride + t] = dot(q[r], k[t]) for r < nq <= 4, t < nk
    void (*qk_block)(int64_t n, const float * const * q, int64_t nq, const float * const * k, int64_t nk, float * out,
                     int64_t out_stride);
    // y[r] += sum over t < nt of p[r*p_stride + t] * v[t], for r < ny <= 4
    void (*pv_block)(int64_t n, float * const * y, const float * p, int64_t p_stride, int64_t ny,
                     const float * const * v, int64_t nt);
    void (*f16_to_f32)(int64_t n, float * y, const uint16_t * x);
    void (*f32_to_f16)(int64_t n, uint16_t * y, const float * x);
    void (*bf16_to_f32)(int64_t n, float * y, const uint16_t * x);
    // NEOX pairing: (y0, y1) = (x0*c - x1*s, x0*s + x1*c) elementwise over n
    void (*rope_neox)(int64_t n, float * y0, float * y1, const float * x0, const float * x1, const float * c,
                      const float * s);
    // adjacent pairing over n (even) values: y = x*cc + swap_pairs(x)*ss, where cc holds each
    // cos twice and ss holds (-sin, +sin) per pair
    void (*rope_norm)(int64_t n, float * y, const float * x, const float * cc, const float * ss);
    // qk_block / pv_block on KV-cache rows kept in their own type (f16, bf16, q8_0, q4_0, and what
    // cache_reads_more adds; see ggml_cpu_attn_cache_type), widened in registers: nq, ny any count; n a multiple of 16.
    // NULL at the scalar level (attention then decodes tiles to f32).
    void (*qk_cache)(ggml_type type, int64_t n, const float * const * q, int64_t nq, const void * const * k,
                     int64_t nk, float * out, int64_t out_stride);
    void (*pv_cache)(ggml_type type, int64_t n, float * const * y, const float * p, int64_t p_stride, int64_t ny,
                     const void * const * v, int64_t nt);
    // Whether this level's qk_cache / pv_cache also read rows of a type beyond those four (q8_KV
    // on x86); NULL: the four only.
    bool (*cache_reads_more)(ggml_type type);
    // Prompt attention in f32 over transposed key tiles (attn-f32-kernels.h; NULL at the scalar
    // level). nk <= 32 key rows of n values (f32 or a type qk_cache reads; n % 16 == 0) ->
    // kt[n][32]: value d of the 32 keys side by side, zero past nk
    void (*pack_kt)(ggml_type type, int64_t n, const void * const * k, int64_t nk, float * kt);
    // out[r*out_stride + t] = dot(q[r], k[t]) for r < nq and the 32 keys of kt
    void (*qk_kt)(int64_t n, const float * const * q, int64_t nq, const float * kt, float * out, int64_t out_stride);
    // y[r] += sum over t < nt of p[r*p_stride + t] * v[t] for r < ny (any count), v rows of n
    // values in f32, f16 or bf16 (widened in registers), n % 16 == 0
    void (*pv_tile)(ggml_type type, int64_t n, float * const * y, const float * p, int64_t p_stride, int64_t ny,
                    const void * const * v, int64_t nt);
    // Prompt attention in bf16 products over packed tiles of 32 keys (avx512/attn-tile.cpp; NULL
    // where the CPU has no bf16 dot product). Row lengths n are multiples of 16.
    // nr f32 rows -> bf16, stored one after another
    void (*rows_bf16)(int64_t n, const float * const * x, int64_t nr, uint16_t * y);
    // nk <= 32 key rows (f32, f16 or bf16) -> kt[n/2][32]: pairs (k[t][d], k[t][d+1]), zero past nk
    void (*pack_k_bf16)(ggml_type type, int64_t n, const void * const * k, int64_t nk, uint32_t * kt);
    // nv <= 32 value rows (f32, f16 or bf16) -> vt[16][n]: pairs (v[t][i], v[t+1][i]), zero past nv
    void (*pack_v_bf16)(ggml_type type, int64_t n, const void * const * v, int64_t nv, uint32_t * vt);
    // online-softmax step of nr rows of 32 scores (nt valid) without softcap, dv % 16 == 0 (AVX512, AVX2): x = scale*s +
    // slope[r]*mask[r] (f32 mask rows or NULL), state[r] = (acc[dv], M, S) rescaled to the new
    // max, the scores replaced by exp(x - M) and their sum added to S
    void (*softmax_tile)(int64_t nr, int64_t nt, float * s, float * const * state, int64_t dv,
                         const float * const * mask, const float * slope, float scale);
    // out[r*out_stride + t] = dot(q[r], k[t]) for r < nq, the 32 keys of kt (q rows in bf16)
    void (*qk_bf16)(int64_t n, const uint16_t * const * q, int64_t nq, const uint32_t * kt, float * out,
                    int64_t out_stride);
    // y[r] += sum over t < nt of p[r*p_stride + t] * v[t] for r < ny (p rounded to bf16)
    void (*pv_bf16)(int64_t n, float * const * y, const float * p, int64_t p_stride, int64_t ny, const uint32_t * vt,
                    int64_t nt);
    // Decode scores over whole cache cells, cell after cell in address order (the KV cache's
    // layout: the rows of nh kv heads of cell t at k + t*k_cell + h*k_head): out[(h*rph + g)*os + t]
    // = dot(q row h*rph + g, row (t, h)) for t < nt, h < nh, g < rph; the query rows packed by
    // 16-value chunks, qp[(c*nh*rph + r)*16 + l] = q[r][16c + l]. While cell t is scored, the
    // k_bytes at k + t'*k_cell and v_bytes at v + t'*v_cell of a cell t' some way ahead (t' <
    // pf_cells) are prefetched (the cells' keys and values, side by side in the cache; 0 bytes:
    // none). A type qk_cache reads, n % 16 == 0, rph one that qk_cells_rows accepts; NULL where
    // there is none.
    void (*qk_cells)(ggml_type type, int64_t n, const float * qp, int64_t rph, int64_t nh, const char * k, size_t k_cell,
                     size_t k_head, int64_t nt, float * out, int64_t out_stride, const char * v, size_t v_cell,
                     size_t k_bytes, size_t v_bytes, int64_t pf_cells);
    bool (*qk_cells_rows)(int64_t rph);
};

// Whether the table's qk_cache / pv_cache kernels read rows of this type and length.
static inline bool ggml_cpu_attn_cache_type(const ggml_cpu_vec_fns & vec, ggml_type type, int64_t n) {
    const bool base = type == GGML_TYPE_F16 || type == GGML_TYPE_BF16 || type == GGML_TYPE_Q8_0 || type == GGML_TYPE_Q4_0;
    return (base || (vec.cache_reads_more && vec.cache_reads_more(type))) && n % 16 == 0;
}

// The online-softmax state of an attention row, (acc[dv], M, S), meeting scores whose max is
// tile_max (not -inf): when the max grows, S and acc (scale_acc(f) multiplies acc by f) are
// rescaled to it. Returns the max the weights exp(x - M) are then taken against.
template <typename F>
static inline float ggml_cpu_softmax_raise_max(float * st, int64_t dv, float tile_max, F scale_acc) {
    float & M = st[dv];
    if (tile_max > M) {
        if (M != -INFINITY) {
            const float f = std::exp(M - tile_max);
            st[dv + 1] *= f;
            scale_acc(f);
        }
        M = tile_max;
    }
    return M;
}

// Entries an ISA level provides (NULL entries fall back to the next lower level). A level may
// register several partial tables (one per kernel file): non-NULL entries are merged.
void ggml_cpu_register_vec(ggml_cpu_isa isa, const ggml_cpu_vec_fns & fns);
// The table for the current ISA cap / for a given level.
const ggml_cpu_vec_fns & ggml_cpu_vec();
const ggml_cpu_vec_fns & ggml_cpu_vec_at(ggml_cpu_isa isa);

// ---- addressing

struct ggml_row_coord {
    int64_t i1, i2, i3;
};

// Row r (0 <= r < ne1*ne2*ne3) of t as (i1, i2, i3).
static inline ggml_row_coord ggml_cpu_row_coord(const ggml_tensor * t, int64_t r) {
    ggml_row_coord c;
    c.i1 = r % t->ne[1];
    r /= t->ne[1];
    c.i2 = r % t->ne[2];
    c.i3 = r / t->ne[2];
    return c;
}

static inline char * ggml_cpu_row_ptr(const ggml_tensor * t, int64_t i1, int64_t i2, int64_t i3) {
    return (char *) t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

static inline bool ggml_cpu_is_f32_dense_rows(const ggml_tensor * t) {
    return t->type == GGML_TYPE_F32 && (t->nb[0] == sizeof(float) || t->ne[0] == 1);
}

// One element of a non-quantized tensor as f32 (f32, f16, bf16, i32, i16, i8).
float ggml_cpu_get_f32(ggml_type type, const void * p);
void  ggml_cpu_set_f32(ggml_type type, void * p, float v);

// The f32 values of row (i1, i2, i3) of t: a pointer into t when it is f32 with dense rows,
// otherwise tmp (ne0 floats) filled by conversion (any stride; quantized rows must be dense).
const float * ggml_cpu_load_row(const ggml_tensor * t, int64_t i1, int64_t i2, int64_t i3, float * tmp);
// Write ne0 f32 values into row (i1, i2, i3) of t, converting to its type.
void ggml_cpu_store_row(const ggml_tensor * t, int64_t i1, int64_t i2, int64_t i3, const float * src);
// Where an op can write row (i1, i2, i3) of dst directly (f32 dense rows), or tmp otherwise;
// call ggml_cpu_finish_row afterwards.
float * ggml_cpu_out_row(const ggml_tensor * dst, int64_t i1, int64_t i2, int64_t i3, float * tmp);
void ggml_cpu_finish_row(const ggml_tensor * dst, int64_t i1, int64_t i2, int64_t i3, const float * row);

// Per-thread scratch that grows to the largest request and then stays (no allocation per token).
// slot selects one of a few independent buffers.
float * ggml_cpu_thread_scratch(int slot, size_t n_floats);

// Slopes of ALiBi (max_bias > 0): head h of n_head; 1 when max_bias == 0.
float ggml_cpu_alibi_slope(float max_bias, int64_t n_head, int64_t h);
