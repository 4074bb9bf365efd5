// Data movement, as cpu/ops-copy.cpp defines it: cpy/dup/cont with type conversion and any
// strides (element i of the destination takes element i of the source, both counted in flat
// order), get_rows (any decodable type to f32), set_rows (the KV-cache write: f32 rows into
// f32/f16/bf16 or a KV-cache block type: q8_0, q4_0, q4_1, q5_0, q5_1, q6_0, iq4_nl, q8_KV) and
// concat. Quantized data moves in whole blocks: a thread per 32 values (per row for q8_KV, whose
// scale is the row's), encoded by the shared encoders of quants-blocks.h with the CPU's rounding.
//
// An index outside the tensor gives a zero row (get_rows) or no write (set_rows): the CPU aborts
// there, a kernel cannot; the graph builders never produce such indices.
#include "cuda-kernels.cuh"

namespace {

// Chunk ch of quantized row i1 (row stride nb1) to 32 floats. Not inlined: two kernels decode, and
// each inlined copy of the decoder switch (every type of KILN_BLOCK_TYPES and
// KILN_INTERLEAVED_TYPES) adds seconds of compile time; the values pass through the stack, which
// costs little next to the stores that follow.
__device__ __noinline__ void decode_chunk(int type, const char * row, int64_t i1, int64_t nb1, int64_t ch, float * v) {
    decode_row_chunk(type, row, i1, nb1, ch, v);
}

// Unit u of a row y of KV-cache block type ytype from the float row x (type xtype, stride nbx0
// bytes): the u-th block of 32 values, or for q8_KV (u = 0) the whole row of ne0 values.
__device__ __noinline__ void encode_unit(const char * x, int xtype, int64_t nbx0, char * y, int ytype, int64_t u, int64_t ne0) {
    if (ytype == GGML_TYPE_Q8_KV) {
        kiln_encode_row_q8_KV([=](int64_t j) { return load_float(x + j * nbx0, xtype); }, ne0, y);
        return;
    }
    float v[32];
    for (int j = 0; j < 32; ++j) v[j] = load_float(x + (u * 32 + j) * nbx0, xtype);
    kiln_encode_kv_block(ytype, v, y, u);
}

// Encoding units in a row of ne0 values: 32-value blocks, or one for q8_KV.
int64_t encode_units_per_row(ggml_type type, int64_t ne0) { return type == GGML_TYPE_Q8_KV ? 1 : ne0 / 32; }

// ---- conversions between float types, any shapes with equal element counts

__global__ void convert_kernel(cuda_view src, cuda_view dst, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; i < n; i += (int64_t) gridDim.x * blockDim.x) {
        const coord4 cs = unravel(i, src.ne);
        const coord4 cd = unravel(i, dst.ne);
        store_float(at(dst, cd.i0, cd.i1, cd.i2, cd.i3), dst.type, load_float(at(src, cs.i0, cs.i1, cs.i2, cs.i3), src.type));
    }
}

// Rows of equal length: dst row r takes src row r. One thread per 32-value chunk.
// decode: src quantized (dense rows), dst float; encode: src float, dst a KV-cache block type
// (dense rows; a thread per row for q8_KV: chunks_per_row = 1).
__global__ void quant_rows_kernel(cuda_view src, cuda_view dst, bool decode, int64_t chunks_per_row, int64_t n) {
    for (int64_t t = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; t < n; t += (int64_t) gridDim.x * blockDim.x) {
        const int64_t ch = t % chunks_per_row;
        const int64_t r = t / chunks_per_row;
        const coord4 cs = row_coord(r, src.ne);
        const coord4 cd = row_coord(r, dst.ne);
        float v[32];
        if (decode) {
            decode_chunk(src.type, row_at(src, cs.i1, cs.i2, cs.i3), cs.i1, src.nb[1], ch, v);
            char * y = row_at(dst, cd.i1, cd.i2, cd.i3) + ch * 32 * dst.nb[0];
            for (int j = 0; j < 32; ++j) store_float(y + j * dst.nb[0], dst.type, v[j]);
        } else {
            encode_unit(row_at(src, cs.i1, cs.i2, cs.i3), src.type, src.nb[0], row_at(dst, cd.i1, cd.i2, cd.i3), dst.type, ch,
                        dst.ne[0]);
        }
    }
}

// ---- get_rows: dst row (i1, i2, i3) = a row ids[i1, i2, i3] of matrix (i2, i3)

__device__ int64_t read_index(const cuda_view & ids, int64_t i0, int64_t i1, int64_t i2) {
    const char * p = ids.data + i0 * ids.nb[0] + i1 * ids.nb[1] + i2 * ids.nb[2];
    return ids.type == GGML_TYPE_I64 ? *(const int64_t *) p : (int64_t) *(const int32_t *) p;
}

// unit = 32 values (quantized a) or 1 value (float a) of one output row
__global__ void get_rows_kernel(cuda_view a, cuda_view ids, cuda_view dst, bool quant, int64_t units_per_row, int64_t n) {
    for (int64_t t = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; t < n; t += (int64_t) gridDim.x * blockDim.x) {
        const int64_t u = t % units_per_row;
        const coord4 cd = row_coord(t / units_per_row, dst.ne);
        const int64_t row = read_index(ids, cd.i1, cd.i2, cd.i3);
        char * y = row_at(dst, cd.i1, cd.i2, cd.i3);
        const bool valid = row >= 0 && row < a.ne[1];
        const char * x = valid ? row_at(a, row, cd.i2, cd.i3) : nullptr;
        if (!quant) {
            store_float(y + u * dst.nb[0], dst.type, valid ? load_float(x + u * a.nb[0], a.type) : 0.0f);
            continue;
        }
        float v[32];
        if (valid) {
            decode_chunk(a.type, x, row, a.nb[1], u, v);
        } else {
            for (int j = 0; j < 32; ++j) v[j] = 0.0f;
        }
        for (int j = 0; j < 32; ++j) store_float(y + (u * 32 + j) * dst.nb[0], dst.type, v[j]);
    }
}

// ---- set_rows: row (i1, i2, i3) of b goes to row ids[i1, i2 % ., i3 % .] of dst (dims 2, 3 kept)

__global__ void set_rows_kernel(cuda_view b, cuda_view ids, cuda_view dst, bool quant, int64_t units_per_row, int64_t n) {
    for (int64_t t = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; t < n; t += (int64_t) gridDim.x * blockDim.x) {
        const int64_t u = t % units_per_row;
        const coord4 cb = row_coord(t / units_per_row, b.ne);
        const int64_t row = read_index(ids, cb.i1, cb.i2 % ids.ne[1], cb.i3 % ids.ne[2]);
        if (row < 0 || row >= dst.ne[1]) continue;
        const char * x = row_at(b, cb.i1, cb.i2, cb.i3);
        char * y = row_at(dst, row, cb.i2, cb.i3);
        if (!quant) {
            store_float(y + u * dst.nb[0], dst.type, load_float(x + u * b.nb[0], b.type));
            continue;
        }
        encode_unit(x, b.type, b.nb[0], y, dst.type, u, dst.ne[0]);
    }
}

// ---- concat along dim

__global__ void concat_kernel(cuda_view a, cuda_view b, cuda_view dst, int dim, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; i < n; i += (int64_t) gridDim.x * blockDim.x) {
        const coord4 c = unravel(i, dst.ne);
        int64_t k[4] = { c.i0, c.i1, c.i2, c.i3 };
        const cuda_view * s = &a;
        if (k[dim] >= a.ne[dim]) {
            s = &b;
            k[dim] -= a.ne[dim];
        }
        store_float(at(dst, c.i0, c.i1, c.i2, c.i3), dst.type, load_float(at(*s, k[0], k[1], k[2], k[3]), s->type));
    }
}

bool dense_rows(const ggml_tensor * t) { return ggml_is_contiguous_rows(t); }

bool is_copy(ggml_op op) { return op == GGML_OP_CPY || op == GGML_OP_DUP || op == GGML_OP_CONT; }

bool supports_copy_types(const ggml_tensor * src, const ggml_tensor * dst) {
    if (cuda_is_float_type(src->type) && cuda_is_float_type(dst->type)) return true;
    if (src->type == dst->type && ggml_is_contiguous(src) && ggml_is_contiguous(dst)) return true;
    if (src->ne[0] != dst->ne[0] || src->ne[0] % 32 != 0) return false;
    if (cuda_type_is_decodable(src->type) && cuda_is_float_type(dst->type)) return cuda_weight_rows_decodable(src);
    if (cuda_is_float_type(src->type) && kiln_kv_quant_type(dst->type)) return dense_rows(dst);
    return false;
}

bool launch_copy(cuda_context & ctx, const ggml_tensor * src, ggml_tensor * dst) {
    const cuda_view s = cuda_view_of(src), d = cuda_view_of(dst);
    if (cuda_is_float_type(src->type) && cuda_is_float_type(dst->type)) {
        const int64_t n = ggml_nelements(dst);
        convert_kernel<<<cuda_blocks_for(n), k_block_threads, 0, ctx.stream>>>(s, d, n);
        return CUDA_LAUNCHED();
    }
    if (src->type == dst->type) {
        if (src->data == dst->data) return true;
        return CUDA_OK(cudaMemcpyAsync(dst->data, src->data, ggml_nbytes(dst), cudaMemcpyDeviceToDevice, ctx.stream));
    }
    const bool decode = !cuda_is_float_type(src->type);
    const int64_t units = decode ? src->ne[0] / 32 : encode_units_per_row(dst->type, dst->ne[0]);
    const int64_t n = ggml_nrows(src) * units;
    quant_rows_kernel<<<cuda_blocks_for(n), k_block_threads, 0, ctx.stream>>>(s, d, decode, units, n);
    return CUDA_LAUNCHED();
}

} // namespace

bool cuda_type_is_decodable(ggml_type type) { return kiln_decoded_rows_per_group(type) > 0; }

bool cuda_weight_rows_decodable(const ggml_tensor * t) {
    const int R = kiln_decoded_rows_per_group(t->type);
    if (R == 0 || !dense_rows(t) || t->ne[0] % 32 != 0 || t->ne[0] % ggml_blck_size(t->type) != 0) return false;
    if (R == 1) return true;
    // the kernels find row i1's group at row i1 - i1 % R: whole groups of contiguous rows, every
    // matrix (and a view) starting on a group boundary
    const size_t group = (size_t) R * ggml_row_size(t->type, t->ne[0]);
    return t->ne[1] % R == 0 && t->nb[1] == ggml_row_size(t->type, t->ne[0]) && t->nb[2] % group == 0 &&
           t->nb[3] % group == 0 && (!t->view_src || t->view_offs % group == 0);
}

bool cuda_supports_copy(const ggml_tensor * op) {
    const ggml_tensor * a = op->src[0];
    if (!a) return false;
    if (is_copy(op->op)) return ggml_nelements(a) == ggml_nelements(op) && supports_copy_types(a, op);
    switch (op->op) {
        case GGML_OP_GET_ROWS: {
            const ggml_tensor * ids = op->src[1];
            if (ids->type != GGML_TYPE_I32 && ids->type != GGML_TYPE_I64) return false;
            if (!cuda_is_float_type(op->type)) return false;
            if (cuda_is_float_type(a->type)) return true;
            return cuda_weight_rows_decodable(a);
        }
        case GGML_OP_SET_ROWS: {
            const ggml_tensor * ids = op->src[1];
            if (ids->type != GGML_TYPE_I32 && ids->type != GGML_TYPE_I64) return false;
            if (!cuda_is_float_type(a->type)) return false;
            if (cuda_is_float_type(op->type)) return true;
            return kiln_kv_quant_type(op->type) && dense_rows(op) && op->ne[0] % 32 == 0;
        }
        case GGML_OP_CONCAT: {
            const ggml_tensor * b = op->src[1];
            const int dim = ggml_get_op_params_i32(op, 0);
            return dim >= 0 && dim < 4 && cuda_is_float_type(a->type) && cuda_is_float_type(b->type) &&
                   cuda_is_float_type(op->type);
        }
        default: return false;
    }
}

bool cuda_op_copy(cuda_context & ctx, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    if (is_copy(dst->op)) return launch_copy(ctx, a, dst);
    switch (dst->op) {
        case GGML_OP_GET_ROWS: {
            const bool quant = !cuda_is_float_type(a->type);
            const int64_t units = quant ? a->ne[0] / 32 : a->ne[0];
            const int64_t n = units * ggml_nrows(dst);
            get_rows_kernel<<<cuda_blocks_for(n), k_block_threads, 0, ctx.stream>>>(
                cuda_view_of(a), cuda_view_of(dst->src[1]), cuda_view_of(dst), quant, units, n);
            return CUDA_LAUNCHED();
        }
        case GGML_OP_SET_ROWS: {
            const bool quant = !cuda_is_float_type(dst->type);
            const int64_t units = quant ? encode_units_per_row(dst->type, a->ne[0]) : a->ne[0];
            const int64_t n = units * ggml_nrows(a);
            set_rows_kernel<<<cuda_blocks_for(n), k_block_threads, 0, ctx.stream>>>(cuda_view_of(a), cuda_view_of(dst->src[1]),
                                                                                   cuda_view_of(dst), quant, units, n);
            return CUDA_LAUNCHED();
        }
        case GGML_OP_CONCAT: {
            const int64_t n = ggml_nelements(dst);
            concat_kernel<<<cuda_blocks_for(n), k_block_threads, 0, ctx.stream>>>(
                cuda_view_of(a), cuda_view_of(dst->src[1]), cuda_view_of(dst), ggml_get_op_params_i32(dst, 0), n);
            return CUDA_LAUNCHED();
        }
        default: return false;
    }
}
