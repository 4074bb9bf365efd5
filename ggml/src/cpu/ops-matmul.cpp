// Matrix products on the CPU: mul_mat, mul_mat_id (expert-routed) and the fused MoE gate/up.
//
// 1. The activations are converted once per product into the weight type's vec_dot_type
//    (all threads share the work), unless they already are in that type.
// 2. The output is cut into chunks of (rows of weights) x (columns of activations) that threads
//    take from a shared counter, so a thread slowed by the OS does not hold the others up.
//    Each chunk is one call of the type's gemm, which tiles registers inside.
#include "cpu-ops.h"
#include "cpu-traits.h"

#include <algorithm>
#include <atomic>
#include <vector>

namespace {

constexpr size_t k_align = 64;

// The scratch layout of a product: [chunk counter | converted activations | per-thread space]
struct mm_scratch {
    std::atomic<int64_t> * counter;
    char * act;
    size_t act_size;
};

mm_scratch carve(const ggml_compute_params * p, size_t act_size) {
    mm_scratch s;
    char * base = (char *) ggml_pad((uintptr_t) p->wdata, k_align);
    s.counter = (std::atomic<int64_t> *) base;
    s.act = base + k_align;
    s.act_size = act_size;
    return s;
}

// Row length, row count and stride of the activations after conversion.
struct act_layout {
    ggml_type type;
    size_t    row_size;
    bool      converted;   // false: the product reads src1 in place
};

act_layout activation_layout(const ggml_tensor * src0, const ggml_tensor * src1) {
    const ggml_type vt = ggml_cpu_get_type_traits(src0->type)->vec_dot_type;
    act_layout l;
    l.type = vt;
    l.row_size = ggml_row_size(vt, src1->ne[0]);
    l.converted = !(src1->type == vt && src1->nb[0] == ggml_type_size(vt));
    return l;
}

// Convert the rows of src1 (any layout with f32/f16/bf16 elements) into vt rows, rows split
// over the threads: row index r = i11 + ne11 * (i12 + ne12 * i13).
// all_rows: this thread converts every row (into its own buffer) instead of its share.
void convert_activations(const ggml_compute_params * p, const ggml_tensor * src1, ggml_type vt, char * out,
                         size_t row_size, float * tmp, bool all_rows = false) {
    const int64_t K = src1->ne[0];
    const int64_t nrows = src1->ne[1] * src1->ne[2] * src1->ne[3];
    int64_t r0 = 0, r1 = nrows;
    if (!all_rows) ggml_cpu_split_rows(nrows, p->ith, p->nth, r0, r1);
    ggml_from_float_t enc = vt == GGML_TYPE_F32 ? nullptr : ggml_cpu_from_float(vt);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i11 = r % src1->ne[1];
        const int64_t i12 = (r / src1->ne[1]) % src1->ne[2];
        const int64_t i13 = r / (src1->ne[1] * src1->ne[2]);
        const char * row = (const char *) src1->data + i11 * src1->nb[1] + i12 * src1->nb[2] + i13 * src1->nb[3];
        const float * f;
        if (src1->type == GGML_TYPE_F32 && src1->nb[0] == sizeof(float)) {
            f = (const float *) row;
        } else {
            for (int64_t k = 0; k < K; ++k) {
                const char * e = row + k * src1->nb[0];
                switch (src1->type) {
                    case GGML_TYPE_F32:  tmp[k] = *(const float *) e; break;
                    case GGML_TYPE_F16:  tmp[k] = ggml_compute_fp16_to_fp32(*(const uint16_t *) e); break;
                    case GGML_TYPE_BF16: tmp[k] = ggml_compute_bf16_to_fp32(*(const uint16_t *) e); break;
                    default: GGML_ABORT("mul_mat: activations of type %s", ggml_type_name(src1->type));
                }
            }
            f = tmp;
        }
        char * dst = out + r * row_size;
        if (enc) enc(f, dst, K); else std::memcpy(dst, f, K * sizeof(float));
    }
}

// Chunking.
// Small batches (token generation) stream the weights once: chunks of whole rows with all
// columns, about 32 KB of weights each (enough to hide the atomic counter, small enough that a
// thread the OS delays leaves little work behind), at least 4 per thread.
// Large batches are bound by arithmetic: a chunk is a block of up to 128 weight rows (the
// kernels repack it once per call and keep it in L2) times all columns (up to 512), so the
// repack is amortised over the whole batch and each activation tile is reused by 128 rows.
constexpr int64_t k_big_batch = 8;

int64_t rows_per_chunk(int64_t M, int64_t N, size_t w_row_size, int nth) {
    int64_t rows;
    if (N >= k_big_batch) {
        rows = 128;
    } else {
        rows = std::max<int64_t>(8, (int64_t) ((32 * 1024) / std::max<size_t>(w_row_size * N, 1)) / 8 * 8);
    }
    while (rows > 4 && (M + rows - 1) / rows < 4 * nth) rows /= 2;
    return std::max<int64_t>(rows, 1);
}

int64_t cols_per_chunk(int64_t N) { return N < k_big_batch ? N : std::min<int64_t>(N, 512); }

// Row-interleaved weights (and kernels with a fixed row tile) need chunks that are whole groups.
int64_t align_rows(int64_t rows, ggml_type type) {
    const int64_t a = std::max<int64_t>({ 1, ggml_cpu_get_type_traits(type)->rows_per_call,
                                          ggml_get_type_traits(type)->nrows_interleaved });
    return (rows + a - 1) / a * a;
}

// Token generation (a few columns, one plane): every thread converts the few activation rows
// itself and takes an even, fixed share of the weight rows, so the product needs no barrier and
// no shared counter. On a busy machine each barrier can cost a scheduler time slice.
bool small_product(const ggml_tensor * src1) {
    return src1->ne[1] < k_big_batch && src1->ne[2] * src1->ne[3] == 1;
}

size_t per_thread_bytes(const ggml_tensor * src1, const act_layout & l) {
    size_t b = ggml_pad(src1->ne[0] * sizeof(float) + k_align, k_align);
    if (small_product(src1) && l.converted) b += ggml_pad(l.row_size * src1->ne[1], k_align);
    return b;
}

void mul_mat_small(const ggml_compute_params * p, ggml_tensor * dst, const act_layout & l) {
    const ggml_tensor * src0 = dst->src[0];
    const ggml_tensor * src1 = dst->src[1];
    const int64_t K = src0->ne[0], M = src0->ne[1], N = src1->ne[1];
    char * mine = (char *) ggml_pad((uintptr_t) p->wdata, k_align) + p->ith * per_thread_bytes(src1, l);
    float * tmp = (float *) mine;
    const char * x = (const char *) src1->data;
    size_t x_stride = src1->nb[1];
    if (l.converted) {
        char * act = mine + ggml_pad(K * sizeof(float) + k_align, k_align);
        convert_activations(p, src1, l.type, act, l.row_size, tmp, true);
        x = act;
        x_stride = l.row_size;
    }
    ggml_gemm_t gemm = ggml_cpu_gemm(src0->type);
    GGML_ASSERT(gemm);
    // even split in whole groups of the kernel's row granularity
    const int64_t a = align_rows(1, src0->type);
    const int64_t groups = (M + a - 1) / a;
    int64_t g0, g1;
    ggml_cpu_split_rows(groups, p->ith, p->nth, g0, g1);
    const int64_t row0 = g0 * a, row1 = std::min(M, g1 * a);
    if (row0 >= row1) return;
    float * d = (float *) dst->data + row0;
    gemm(K, (const char *) src0->data + row0 * src0->nb[1], src0->nb[1], x, x_stride, d, dst->nb[1] / sizeof(float),
         (int) (row1 - row0), (int) N);
}

} // namespace

size_t ggml_cpu_mul_mat_work_size(const ggml_tensor * dst, int nth) {
    const ggml_tensor * src0 = dst->src[0];
    const ggml_tensor * src1 = dst->src[1];
    const act_layout l = activation_layout(src0, src1);
    size_t s = 3 * k_align + nth * per_thread_bytes(src1, l);
    if (l.converted) s += l.row_size * src1->ne[1] * src1->ne[2] * src1->ne[3];
    return s;
}

void ggml_cpu_op_mul_mat(const ggml_compute_params * p, ggml_tensor * dst) {
    const ggml_tensor * src0 = dst->src[0];
    const ggml_tensor * src1 = dst->src[1];
    const int64_t K = src0->ne[0], M = src0->ne[1];
    const int64_t N = src1->ne[1];
    const int64_t ne12 = src1->ne[2], ne13 = src1->ne[3];
    GGML_ASSERT(src0->nb[0] == ggml_type_size(src0->type) && "mul_mat: weight rows must be contiguous");

    const act_layout l = activation_layout(src0, src1);
    if (small_product(src1)) {
        mul_mat_small(p, dst, l);
        return;
    }
    const size_t act_bytes = l.converted ? l.row_size * N * ne12 * ne13 : 0;
    mm_scratch s = carve(p, act_bytes);
    float * tmp = (float *) (s.act + ggml_pad(act_bytes, k_align) + p->ith * per_thread_bytes(src1, l));

    if (p->ith == 0) s.counter->store(0, std::memory_order_relaxed);
    if (l.converted) convert_activations(p, src1, l.type, s.act, l.row_size, tmp);
    ggml_cpu_barrier(p);

    ggml_gemm_t gemm = ggml_cpu_gemm(src0->type);
    GGML_ASSERT(gemm);

    const int64_t rpc = align_rows(rows_per_chunk(M, N, src0->nb[1], p->nth), src0->type);
    const int64_t cpc = cols_per_chunk(N);
    const int64_t n_rb = (M + rpc - 1) / rpc, n_cb = (N + cpc - 1) / cpc;
    const int64_t per_plane = n_rb * n_cb;
    const int64_t total = per_plane * ne12 * ne13;
    const int64_t r2 = ne12 / src0->ne[2], r3 = ne13 / src0->ne[3];

    for (;;) {
        const int64_t chunk = s.counter->fetch_add(1, std::memory_order_relaxed);
        if (chunk >= total) break;
        const int64_t plane = chunk / per_plane;
        const int64_t in_plane = chunk % per_plane;
        // consecutive chunks walk the columns of one row block, so its weights stay in cache
        const int64_t rb = in_plane / n_cb, cb = in_plane % n_cb;
        const int64_t i12 = plane % ne12, i13 = plane / ne12;
        const int64_t row0 = rb * rpc, nr = std::min(rpc, M - row0);
        const int64_t col0 = cb * cpc, nc = std::min(cpc, N - col0);

        const char * w = (const char *) src0->data + (i12 / r2) * src0->nb[2] + (i13 / r3) * src0->nb[3] + row0 * src0->nb[1];
        const char * x;
        size_t x_stride;
        if (l.converted) {
            x_stride = l.row_size;
            x = s.act + ((i13 * ne12 + i12) * N + col0) * x_stride;
        } else {
            x_stride = src1->nb[1];
            x = (const char *) src1->data + i12 * src1->nb[2] + i13 * src1->nb[3] + col0 * x_stride;
        }
        float * d = (float *) ((char *) dst->data + i12 * dst->nb[2] + i13 * dst->nb[3] + col0 * dst->nb[1]) + row0;
        gemm(K, w, src0->nb[1], x, x_stride, d, dst->nb[1] / sizeof(float), (int) nr, (int) nc);
    }
}

// ---------------------------------------------------------------------------------------------
// Expert-routed products.
//
// ids [n_used, n_tokens] picks, for each token, n_used experts. The product is reorganised per
// expert: gather the (slot, token) pairs that chose expert e, pack their converted activations
// contiguously, run one gemm over them, and scatter the results. Each expert's weights are read
// once per batch however many tokens chose it; experts no token chose are skipped.

namespace {

struct moe_plan {
    int64_t n_expert;
    int64_t n_pairs;               // n_used * n_tokens
    int32_t * counts;              // [n_expert]
    int32_t * offsets;             // [n_expert + 1]
    int32_t * pairs;               // [n_pairs] (slot + n_used * token), grouped by expert
};

size_t moe_plan_size(int64_t n_expert, int64_t n_pairs) {
    return ggml_pad((2 * n_expert + 1 + n_pairs) * sizeof(int32_t), k_align);
}

void build_moe_plan(const ggml_tensor * ids, int64_t n_expert, moe_plan & plan, char * mem) {
    const int64_t n_used = ids->ne[0], n_tokens = ids->ne[1];
    plan.n_expert = n_expert;
    plan.n_pairs = n_used * n_tokens;
    plan.counts = (int32_t *) mem;
    plan.offsets = plan.counts + n_expert;
    plan.pairs = plan.offsets + n_expert + 1;
    std::fill(plan.counts, plan.counts + n_expert, 0);
    auto id_at = [&](int64_t slot, int64_t tok) {
        return *(const int32_t *) ((const char *) ids->data + slot * ids->nb[0] + tok * ids->nb[1]);
    };
    for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t i = 0; i < n_used; ++i) {
            const int32_t e = id_at(i, t);
            GGML_ASSERT(e >= 0 && e < n_expert && "mul_mat_id: expert id out of range");
            plan.counts[e]++;
        }
    }
    plan.offsets[0] = 0;
    for (int64_t e = 0; e < n_expert; ++e) plan.offsets[e + 1] = plan.offsets[e] + plan.counts[e];
    std::vector<int32_t> fill(plan.offsets, plan.offsets + n_expert);
    for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t i = 0; i < n_used; ++i) plan.pairs[fill[id_at(i, t)]++] = (int32_t) (i + n_used * t);
    }
}

// Shared driver of mul_mat_id (one weight set) and the fused gate/up (two weight sets + GLU).
void moe_product(const ggml_compute_params * p, ggml_tensor * dst, const ggml_tensor * as0, const ggml_tensor * as1,
                 const ggml_tensor * b, const ggml_tensor * ids, ggml_glu_op glu) {
    const int64_t K = as0->ne[0], M = as0->ne[1], n_expert = as0->ne[2];
    const int64_t n_used = ids->ne[0], n_tokens = ids->ne[1];
    const int64_t n_b = b->ne[1];   // 1 (shared input per token) or n_used
    const act_layout l = activation_layout(as0, b);

    // scratch: counter | converted b rows | plan | packed columns | per-thread output tiles
    char * base = (char *) ggml_pad((uintptr_t) p->wdata, k_align);
    auto * counter = (std::atomic<int64_t> *) base;
    char * act = base + k_align;
    const size_t act_bytes = ggml_pad(l.row_size * n_b * n_tokens, k_align);
    char * plan_mem = act + act_bytes;
    const int64_t n_pairs = n_used * n_tokens;
    char * packed = plan_mem + moe_plan_size(n_expert, n_pairs);
    const size_t packed_bytes = ggml_pad(l.row_size * n_pairs, k_align);
    char * thread_mem = packed + packed_bytes;
    const int64_t cpc = 64;
    const size_t tile_floats = (as1 ? 2 : 1) * 64 * cpc;   // up to 64 rows x cpc columns (x2 for gate/up)
    const size_t per_thread = ggml_pad(tile_floats * sizeof(float) + K * sizeof(float), k_align);
    float * my_tile = (float *) (thread_mem + p->ith * per_thread);
    float * my_tmp = my_tile + tile_floats;

    // 1. convert b (rows i + n_b * t), all threads
    {
        const int64_t nrows = n_b * n_tokens;
        int64_t r0, r1;
        ggml_cpu_split_rows(nrows, p->ith, p->nth, r0, r1);
        ggml_from_float_t enc = l.type == GGML_TYPE_F32 ? nullptr : ggml_cpu_from_float(l.type);
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t i = r % n_b, t = r / n_b;
            const char * row = (const char *) b->data + i * b->nb[1] + t * b->nb[2];
            const float * f = (const float *) row;
            if (b->type != GGML_TYPE_F32 || b->nb[0] != sizeof(float)) {
                for (int64_t k = 0; k < K; ++k) {
                    const char * e = row + k * b->nb[0];
                    my_tmp[k] = b->type == GGML_TYPE_F32 ? *(const float *) e
                              : b->type == GGML_TYPE_F16 ? ggml_compute_fp16_to_fp32(*(const uint16_t *) e)
                                                         : ggml_compute_bf16_to_fp32(*(const uint16_t *) e);
                }
                f = my_tmp;
            }
            if (enc) enc(f, act + r * l.row_size, K); else std::memcpy(act + r * l.row_size, f, K * sizeof(float));
        }
    }
    // 2. plan (thread 0) while others wait
    moe_plan plan;
    if (p->ith == 0) {
        build_moe_plan(ids, n_expert, plan, plan_mem);
        counter->store(0, std::memory_order_relaxed);
    }
    ggml_cpu_barrier(p);
    if (p->ith != 0) {
        plan.n_expert = n_expert;
        plan.n_pairs = n_pairs;
        plan.counts = (int32_t *) plan_mem;
        plan.offsets = plan.counts + n_expert;
        plan.pairs = plan.offsets + n_expert + 1;
    }
    // 3. pack each expert's columns contiguously (rows of the converted activations)
    {
        int64_t q0, q1;
        ggml_cpu_split_rows(n_pairs, p->ith, p->nth, q0, q1);
        for (int64_t q = q0; q < q1; ++q) {
            const int32_t pair = plan.pairs[q];
            const int64_t slot = pair % n_used, tok = pair / n_used;
            const int64_t src_row = (slot % n_b) + n_b * tok;
            std::memcpy(packed + q * l.row_size, act + src_row * l.row_size, l.row_size);
        }
    }
    ggml_cpu_barrier(p);

    // 4. chunks: (expert, row block, column block) over the experts that were chosen
    ggml_gemm_t gemm = ggml_cpu_gemm(as0->type);
    GGML_ASSERT(gemm);
    const int64_t rpc = align_rows(std::min<int64_t>(64, rows_per_chunk(M, n_tokens, as0->nb[1], p->nth)), as0->type);
    const int64_t n_rb = (M + rpc - 1) / rpc;
    // enumerate chunks lazily: chunk id -> (expert, rb, cb) by walking the experts
    for (;;) {
        int64_t chunk = counter->fetch_add(1, std::memory_order_relaxed);
        int64_t e = 0;
        for (; e < n_expert; ++e) {
            const int64_t ncols = plan.counts[e];
            if (ncols == 0) continue;
            const int64_t n_here = n_rb * ((ncols + cpc - 1) / cpc);
            if (chunk < n_here) break;
            chunk -= n_here;
        }
        if (e >= n_expert) break;
        const int64_t ncols = plan.counts[e];
        const int64_t n_cb = (ncols + cpc - 1) / cpc;
        const int64_t rb = chunk / n_cb, cb = chunk % n_cb;
        const int64_t row0 = rb * rpc, nr = std::min(rpc, M - row0);
        const int64_t col0 = cb * cpc, nc = std::min(cpc, ncols - col0);
        const int64_t q0 = plan.offsets[e] + col0;
        const char * x = packed + q0 * l.row_size;

        const char * w0 = (const char *) as0->data + e * as0->nb[2] + row0 * as0->nb[1];
        gemm(K, w0, as0->nb[1], x, l.row_size, my_tile, (size_t) nr, (int) nr, (int) nc);
        float * tile1 = nullptr;
        if (as1) {
            tile1 = my_tile + 64 * cpc;
            const char * w1 = (const char *) as1->data + e * as1->nb[2] + row0 * as1->nb[1];
            gemm(K, w1, as1->nb[1], x, l.row_size, tile1, (size_t) nr, (int) nr, (int) nc);
        }
        // scatter: column j is pair plan.pairs[q0 + j] -> dst[:, slot, token]
        for (int64_t j = 0; j < nc; ++j) {
            const int32_t pair = plan.pairs[q0 + j];
            const int64_t slot = pair % n_used, tok = pair / n_used;
            float * d = (float *) ((char *) dst->data + slot * dst->nb[1] + tok * dst->nb[2]) + row0;
            const float * up = my_tile + j * nr;
            if (!as1) {
                std::memcpy(d, up, nr * sizeof(float));
            } else {
                // fused GLU: as0 is up, as1 is gate
                const float * gate = tile1 + j * nr;
                for (int64_t r = 0; r < nr; ++r) {
                    const float g = gate[r];
                    const float act_g = glu == GGML_GLU_OP_SWIGLU
                        ? g / (1.0f + std::exp(-g))
                        : 0.5f * g * (1.0f + std::tanh(0.7978845608f * (g + 0.044715f * g * g * g)));
                    d[r] = act_g * up[r];
                }
            }
        }
    }
}

} // namespace

size_t ggml_cpu_mul_mat_id_work_size(const ggml_tensor * dst, int nth) {
    const bool fused = dst->op == GGML_OP_MOE_FUSED_UP_GATE;
    const ggml_tensor * as = dst->src[0];
    const ggml_tensor * b = fused ? dst->src[2] : dst->src[1];
    const ggml_tensor * ids = fused ? dst->src[3] : dst->src[2];
    const act_layout l = activation_layout(as, b);
    const int64_t n_pairs = ids->ne[0] * ids->ne[1];
    const size_t tile_floats = (fused ? 2 : 1) * 64 * 64;
    return 2 * k_align + ggml_pad(l.row_size * b->ne[1] * b->ne[2], k_align) + moe_plan_size(as->ne[2], n_pairs) +
           ggml_pad(l.row_size * n_pairs, k_align) +
           nth * ggml_pad(tile_floats * sizeof(float) + as->ne[0] * sizeof(float), k_align);
}

void ggml_cpu_op_mul_mat_id(const ggml_compute_params * p, ggml_tensor * dst) {
    moe_product(p, dst, dst->src[0], nullptr, dst->src[1], dst->src[2], GGML_GLU_OP_SWIGLU);
}

void ggml_cpu_op_moe_up_gate(const ggml_compute_params * p, ggml_tensor * dst) {
    moe_product(p, dst, dst->src[0], dst->src[1], dst->src[2], dst->src[3], (ggml_glu_op) dst->op_params[0]);
}
