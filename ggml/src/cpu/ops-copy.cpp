// Data movement: cpy/cont/dup with type conversion and arbitrary strides, get_rows (any
// decodable type to f32), set_rows (the KV-cache write, f32 into any encodable type) and concat.
#include "ops-common.h"

#include <algorithm>
#include <cmath>

namespace {

bool dense_rows(const ggml_tensor * t) { return ggml_is_contiguous_rows(t); }

// Copy one row of n elements of the same non-quantized type between arbitrary element strides.
void copy_row_same_type(const ggml_tensor * src, const char * s, const ggml_tensor * dst, char * d, int64_t n) {
    const size_t es = ggml_type_size(dst->type);
    if (src->nb[0] == es && dst->nb[0] == es) {
        std::memcpy(d, s, n * es);
        return;
    }
    for (int64_t i = 0; i < n; ++i) std::memcpy(d + i * dst->nb[0], s + i * src->nb[0], es);
}

// Same type, both contiguous: a byte copy split over threads.
void copy_bytes(const ggml_compute_params * p, const ggml_tensor * src, ggml_tensor * dst) {
    const size_t n = ggml_nbytes(dst);
    const size_t per = ggml_pad((n + p->nth - 1) / p->nth, 64);
    const size_t b0 = std::min(n, per * p->ith);
    const size_t b1 = std::min(n, b0 + per);
    if (b1 > b0 && src->data != dst->data) std::memcpy((char *) dst->data + b0, (const char *) src->data + b0, b1 - b0);
}

// Rows of equal length: dst row r takes src row r (rows counted in each tensor's own order).
void copy_rows(const ggml_compute_params * p, const ggml_tensor * src, ggml_tensor * dst) {
    const int64_t n = dst->ne[0];
    const bool same_type = src->type == dst->type;
    GGML_ASSERT(!ggml_is_quantized(src->type) || dense_rows(src));
    GGML_ASSERT(!ggml_is_quantized(dst->type) || dense_rows(dst));
    int64_t r0, r1;
    ggml_cpu_split_rows(ggml_nrows(dst), p->ith, p->nth, r0, r1);
    float * tmp = ggml_cpu_thread_scratch(0, n);
    for (int64_t r = r0; r < r1; ++r) {
        const ggml_row_coord cs = ggml_cpu_row_coord(src, r);
        const ggml_row_coord cd = ggml_cpu_row_coord(dst, r);
        const char * s = ggml_cpu_row_ptr(src, cs.i1, cs.i2, cs.i3);
        char * d = ggml_cpu_row_ptr(dst, cd.i1, cd.i2, cd.i3);
        if (same_type && ggml_is_quantized(dst->type)) {
            std::memcpy(d, s, ggml_row_size(dst->type, n));
        } else if (same_type) {
            copy_row_same_type(src, s, dst, d, n);
        } else {
            const float * x = ggml_cpu_load_row(src, cs.i1, cs.i2, cs.i3, tmp);
            ggml_cpu_store_row(dst, cd.i1, cd.i2, cd.i3, x);
        }
    }
}

// Different row lengths (a reshaping cont): element by element in flat order.
void copy_elements(const ggml_compute_params * p, const ggml_tensor * src, ggml_tensor * dst) {
    if (ggml_is_quantized(src->type) || ggml_is_quantized(dst->type)) {
        GGML_ABORT("cpy %s -> %s: quantized copies that change the row length need contiguous tensors of one type",
                   ggml_type_name(src->type), ggml_type_name(dst->type));
    }
    const bool same_type = src->type == dst->type;
    const size_t es = ggml_type_size(dst->type);
    const int64_t n = dst->ne[0];
    int64_t r0, r1;
    ggml_cpu_split_rows(ggml_nrows(dst), p->ith, p->nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const ggml_row_coord cd = ggml_cpu_row_coord(dst, r);
        char * d = ggml_cpu_row_ptr(dst, cd.i1, cd.i2, cd.i3);
        // the src coordinate of flat element r*n, then stepped along
        int64_t flat = r * n;
        int64_t s0 = flat % src->ne[0];
        flat /= src->ne[0];
        int64_t s1 = flat % src->ne[1];
        flat /= src->ne[1];
        int64_t s2 = flat % src->ne[2];
        int64_t s3 = flat / src->ne[2];
        for (int64_t i = 0; i < n; ++i) {
            const char * s = (const char *) src->data + s0 * src->nb[0] + s1 * src->nb[1] + s2 * src->nb[2] + s3 * src->nb[3];
            if (same_type) {
                std::memcpy(d + i * dst->nb[0], s, es);
            } else {
                ggml_cpu_set_f32(dst->type, d + i * dst->nb[0], ggml_cpu_get_f32(src->type, s));
            }
            if (++s0 == src->ne[0]) {
                s0 = 0;
                if (++s1 == src->ne[1]) {
                    s1 = 0;
                    if (++s2 == src->ne[2]) {
                        s2 = 0;
                        ++s3;
                    }
                }
            }
        }
    }
}

int64_t read_index(const ggml_tensor * idx, int64_t i0, int64_t i1, int64_t i2) {
    const char * q = (const char *) idx->data + i0 * idx->nb[0] + i1 * idx->nb[1] + i2 * idx->nb[2];
    return idx->type == GGML_TYPE_I64 ? *(const int64_t *) q : (int64_t) *(const int32_t *) q;
}

} // namespace

void ggml_cpu_op_cpy(const ggml_compute_params * p, ggml_tensor * dst) {
    const ggml_tensor * src = dst->src[0];
    GGML_ASSERT(ggml_nelements(src) == ggml_nelements(dst));
    if (src->type == dst->type && ggml_is_contiguous(src) && ggml_is_contiguous(dst)) {
        copy_bytes(p, src, dst);
    } else if (src->ne[0] == dst->ne[0]) {
        copy_rows(p, src, dst);
    } else {
        copy_elements(p, src, dst);
    }
}

void ggml_cpu_op_get_rows(const ggml_compute_params * p, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * ids = dst->src[1];
    GGML_ASSERT(ids->type == GGML_TYPE_I32 || ids->type == GGML_TYPE_I64);
    GGML_ASSERT(dst->ne[0] == a->ne[0] && dst->ne[1] == ids->ne[0] && dst->ne[2] == ids->ne[1] && dst->ne[3] == ids->ne[2]);
    const int64_t n = a->ne[0];
    float * tmp = ggml_cpu_thread_scratch(0, n);
    int64_t r0, r1;
    ggml_cpu_split_rows(ggml_nrows(dst), p->ith, p->nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const ggml_row_coord c = ggml_cpu_row_coord(dst, r);
        const int64_t row = read_index(ids, c.i1, c.i2, c.i3);
        if (row < 0 || row >= a->ne[1]) {
            GGML_ABORT("get_rows: index %lld out of range [0, %lld) for %s", (long long) row, (long long) a->ne[1], a->name);
        }
        float * y = ggml_cpu_out_row(dst, c.i1, c.i2, c.i3, tmp);
        const float * x = ggml_cpu_load_row(a, row, c.i2, c.i3, y);
        if (x != y) std::memcpy(y, x, n * sizeof(float));
        ggml_cpu_finish_row(dst, c.i1, c.i2, c.i3, y);
    }
}

void ggml_cpu_op_set_rows(const ggml_compute_params * p, ggml_tensor * dst) {
    const ggml_tensor * b = dst->src[0];     // rows to write (f32)
    const ggml_tensor * ids = dst->src[1];   // where: [n_rows, ne2 / k, ne3 / l]
    GGML_ASSERT(ids->type == GGML_TYPE_I32 || ids->type == GGML_TYPE_I64);
    GGML_ASSERT(b->ne[0] == dst->ne[0] && b->ne[1] == ids->ne[0]);
    GGML_ASSERT(b->ne[2] == dst->ne[2] && b->ne[3] == dst->ne[3]);
    GGML_ASSERT(!ggml_is_quantized(dst->type) || dense_rows(dst));
    const int64_t n = b->ne[0];
    float * tmp = ggml_cpu_thread_scratch(0, n);
    int64_t r0, r1;
    ggml_cpu_split_rows(ggml_nrows(b), p->ith, p->nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const ggml_row_coord c = ggml_cpu_row_coord(b, r);
        const int64_t row = read_index(ids, c.i1, c.i2 % ids->ne[1], c.i3 % ids->ne[2]);
        if (row < 0 || row >= dst->ne[1]) {
            GGML_ABORT("set_rows: index %lld out of range [0, %lld) for %s", (long long) row, (long long) dst->ne[1], dst->name);
        }
        const float * x = ggml_cpu_load_row(b, c.i1, c.i2, c.i3, tmp);
        ggml_cpu_store_row(dst, row, c.i2, c.i3, x);
    }
}

void ggml_cpu_op_concat(const ggml_compute_params * p, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    const int dim = ggml_get_op_params_i32(dst, 0);
    GGML_ASSERT(a->type == dst->type && b->type == dst->type && dim >= 0 && dim < GGML_MAX_DIMS);
    const bool quant = ggml_is_quantized(dst->type);
    GGML_ASSERT(!quant || (dim > 0 && dense_rows(a) && dense_rows(b) && dense_rows(dst)));
    const size_t row_bytes = ggml_row_size(dst->type, dst->ne[0]);
    int64_t r0, r1;
    ggml_cpu_split_rows(ggml_nrows(dst), p->ith, p->nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const ggml_row_coord c = ggml_cpu_row_coord(dst, r);
        char * d = ggml_cpu_row_ptr(dst, c.i1, c.i2, c.i3);
        if (dim == 0) {
            copy_row_same_type(a, ggml_cpu_row_ptr(a, c.i1, c.i2, c.i3), dst, d, a->ne[0]);
            copy_row_same_type(b, ggml_cpu_row_ptr(b, c.i1, c.i2, c.i3), dst, d + a->ne[0] * dst->nb[0], b->ne[0]);
            continue;
        }
        int64_t i[4] = { 0, c.i1, c.i2, c.i3 };
        const ggml_tensor * s = a;
        if (i[dim] >= a->ne[dim]) {
            s = b;
            i[dim] -= a->ne[dim];
        }
        const char * sp = ggml_cpu_row_ptr(s, i[1], i[2], i[3]);
        if (quant) {
            std::memcpy(d, sp, row_bytes);
        } else {
            copy_row_same_type(s, sp, dst, d, dst->ne[0]);
        }
    }
}
