// Matrix products on the CPU: mul_mat, mul_mat_id (expert-routed) and the fused MoE gate/up.
//
// 1. The activations are converted once per product into the weight type's vec_dot_type (or,
//    for batches, its batch_vec_dot_type where it has one: cpu-traits.h), all threads sharing
//    the work, unless they already are in that type.
// 2. The output is cut into chunks of (rows of weights) x (columns of activations) that threads
//    take from a shared counter, so a thread slowed by the OS does not hold the others up.
//    Each chunk is one call of the type's gemm, which tiles registers inside.
#include "cpu-traits.h"
#include "ops-common.h"

#include <algorithm>
#include <cmath>
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

// The activation type and kernel of a product, and the row length of the converted activations.
struct act_layout {
    ggml_type   type;
    ggml_gemm_t gemm;
    size_t      row_size;
    bool        converted;   // false: the product reads src1 in place
};

// batch: the product runs as a batch (prompt processing), which may take the type's finer batch
// activation type (cpu-traits.h); token generation keeps the plain one.
act_layout activation_layout(const ggml_tensor * src0, const ggml_tensor * src1, bool batch) {
    const ggml_cpu_gemm_choice ch = ggml_cpu_gemm_for(src0->type, batch);
    const ggml_type vt = ch.act_type;
    act_layout l;
    l.type = vt;
    l.gemm = ch.gemm;
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
// itself, then takes chunks of weight rows from the node's counter (self-chunked, cpu-ops.h), so
// the product needs no barrier, and a thread the OS delays leaves at most one chunk behind.
bool small_product(const ggml_tensor * src1) {
    return src1->ne[1] < k_big_batch && src1->ne[2] * src1->ne[3] == 1;
}

// Weight rows are handed out in units of about 64 KB and in guided chunks: chunk c takes 1/nth
// of the units still left, down to one unit per chunk at the end, where the units balance the
// threads. A product is then a few long runs per thread: every chunk restarts the hardware
// prefetcher's stream, and fixed 64 KB chunks cost 12% of token generation against an even
// split (Q4_K_M 0.6B shape, -t 2, Zen 4: 59 t/s against 67; guided 67-68). A thread the OS
// delays holds at most one chunk (half the rows at worst, as with an even split) while the
// others take the rest; with another process busy on one of the two cores, -t 2 stays level
// with -t 1 (37-39 against 38-41 t/s) where the even split fell to 26.
constexpr size_t k_stream_unit_bytes = 64 * 1024;

int64_t stream_rows_per_chunk(int64_t M, size_t w_row_size, ggml_type type, int nth) {
    int64_t rows = std::max<int64_t>(1, (int64_t) (k_stream_unit_bytes / std::max<size_t>(w_row_size, 1)));
    while (rows > 8 && (M + rows - 1) / rows < 4 * nth) rows /= 2;
    return align_rows(rows, type);
}

// Guided chunks over n_units: chunk c starts at unit floor(n_units (1 - q^c)), q = 1 - 1/nth,
// while those chunks hold at least one unit, then one unit per chunk. Every thread computes the
// same boundaries from (n_units, nth), so the chunk index from the shared counter is enough.
struct guided_chunks {
    int64_t n_units;
    double q;
    int c0;          // the first one-unit chunk
    int64_t s0;      // where it starts
    int n_chunks;

    guided_chunks(int64_t units, int nth) : n_units(units), q(1.0 - 1.0 / nth) {
        c0 = 0;
        double left = (double) units;
        while (left * (1.0 - q) >= 1.0) { left *= q; ++c0; }
        s0 = geometric_start(c0);
        n_chunks = c0 + (int) (n_units - s0);
    }
    int64_t geometric_start(int c) const {
        return std::min<int64_t>(n_units, (int64_t) ((double) n_units * (1.0 - std::pow(q, c))));
    }
    int64_t start(int c) const { return c <= c0 ? geometric_start(c) : std::min<int64_t>(n_units, s0 + (c - c0)); }
};

size_t per_thread_bytes(const ggml_tensor * src1, const act_layout & l) {
    size_t b = ggml_pad(src1->ne[0] * sizeof(float) + k_align, k_align);
    if (small_product(src1) && l.converted) b += ggml_pad(l.row_size * src1->ne[1], k_align);
    return b;
}

// Token-generation products keep their per-thread space (converted activations, plan) in
// thread-local memory rather than the shared op scratch, so that independent products (q, k
// and v from one input) do not wait for each other's scratch (cpu-graph-plan.h).
char * thread_space(size_t bytes) {
    constexpr int k_slot = 3;   // ops-*.cpp use slots 0-2 for rows
    float * f = ggml_cpu_thread_scratch(k_slot, (bytes + 2 * k_align) / sizeof(float));
    return (char *) ggml_pad((uintptr_t) f, k_align);
}

void mul_mat_small(const ggml_compute_params * p, ggml_tensor * dst, const act_layout & l) {
    const ggml_tensor * src0 = dst->src[0];
    const ggml_tensor * src1 = dst->src[1];
    const int64_t K = src0->ne[0], M = src0->ne[1], N = src1->ne[1];
    int c = p->chunk;   // claimed by the pool (cpu-ops.h)
    char * mine = thread_space(per_thread_bytes(src1, l));
    float * tmp = (float *) mine;
    const char * x = (const char *) src1->data;
    size_t x_stride = src1->nb[1];
    if (l.converted) {
        char * act = mine + ggml_pad(K * sizeof(float) + k_align, k_align);
        convert_activations(p, src1, l.type, act, l.row_size, tmp, true);
        x = act;
        x_stride = l.row_size;
    }
    ggml_gemm_t gemm = l.gemm;
    GGML_ASSERT(gemm);
    const int64_t rpc = stream_rows_per_chunk(M, src0->nb[1], src0->type, p->nth);
    const guided_chunks g((M + rpc - 1) / rpc, p->nth);
    int n_done = 0;
    for (; c >= 0; ++n_done, c = ggml_cpu_chunk_claim(p)) {
        const int64_t row0 = std::min(M, g.start(c) * rpc), row1 = std::min(M, g.start(c + 1) * rpc);
        if (row0 >= row1) continue;
        float * d = (float *) dst->data + row0;
        gemm(K, (const char *) src0->data + row0 * src0->nb[1], src0->nb[1], x, x_stride, d, dst->nb[1] / sizeof(float),
             (int) (row1 - row0), (int) N);
    }
    ggml_cpu_chunks_done(p, n_done);
}

} // namespace

size_t ggml_cpu_mul_mat_work_size(const ggml_tensor * dst, int nth) {
    const ggml_tensor * src0 = dst->src[0];
    const ggml_tensor * src1 = dst->src[1];
    const act_layout l = activation_layout(src0, src1, src1->ne[1] >= k_big_batch);
    if (small_product(src1)) return 0;   // thread-local space
    size_t s = 3 * k_align + nth * per_thread_bytes(src1, l);
    if (l.converted) s += l.row_size * src1->ne[1] * src1->ne[2] * src1->ne[3];
    return s;
}

int ggml_cpu_mul_mat_self_chunks(const ggml_tensor * dst, int nth) {
    const ggml_tensor * src0 = dst->src[0];
    if (!small_product(dst->src[1])) return 0;
    const int64_t M = src0->ne[1];
    const int64_t rpc = stream_rows_per_chunk(M, src0->nb[1], src0->type, nth);
    return guided_chunks((M + rpc - 1) / rpc, nth).n_chunks;
}

void ggml_cpu_op_mul_mat(const ggml_compute_params * p, ggml_tensor * dst) {
    const ggml_tensor * src0 = dst->src[0];
    const ggml_tensor * src1 = dst->src[1];
    const int64_t K = src0->ne[0], M = src0->ne[1];
    const int64_t N = src1->ne[1];
    const int64_t ne12 = src1->ne[2], ne13 = src1->ne[3];
    GGML_ASSERT(src0->nb[0] == ggml_type_size(src0->type) && "mul_mat: weight rows must be contiguous");

    const act_layout l = activation_layout(src0, src1, N >= k_big_batch);
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

    ggml_gemm_t gemm = l.gemm;
    GGML_ASSERT(gemm);

    const int64_t rpc = align_rows(rows_per_chunk(M, N, src0->nb[1], p->nth), src0->type);
    const int64_t cpc = cols_per_chunk(N);
    const int64_t n_rb = (M + rpc - 1) / rpc, n_cb = (N + cpc - 1) / cpc;
    const int64_t per_plane = n_rb * n_cb;
    const int64_t total = per_plane * ne12 * ne13;
    const int64_t r2 = ne12 / src0->ne[2], r3 = ne13 / src0->ne[3];

    // the activations are fixed for the product: kernels may keep what they pack of them for the
    // thread's next chunk (cpu-traits.h)
    const ggml_cpu_act_reuse reuse;
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
// contiguously, run one gemm over them (the batch GEMM when many tokens chose e), and scatter the
// results. Each expert's weights are read once per batch however many tokens chose it; experts
// no token chose are skipped, and so are pairs an optional keep mask drops (smart expert
// reduction, ggml_mul_mat_id_keep): their result rows are zero.
//
// Batches (prompt processing) run as a team: the threads convert the activations and pack the
// columns together, then take (expert, row block, column block) chunks. Token generation runs
// self-chunked: each thread converts the token's row and plans on its own (a few rows), then
// takes (expert, row block) chunks, with no barrier at all.

namespace {

struct moe_plan {
    int64_t n_expert;
    int64_t n_pairs;               // n_used * n_tokens
    int64_t n_active;              // experts with at least one pair
    int32_t * counts;              // [n_expert]
    int32_t * offsets;             // [n_expert + 1]; kept pairs end at offsets[n_expert]
    int32_t * active;              // [n_active] the experts with pairs, ascending
    int32_t * pairs;               // [n_pairs] (slot + n_used * token), grouped by expert, then dropped ones

    int64_t n_kept() const { return offsets[n_expert]; }
};

size_t moe_plan_size(int64_t n_expert, int64_t n_pairs) {
    return ggml_pad((3 * n_expert + 1 + n_pairs) * sizeof(int32_t), k_align);
}

struct moe_args {
    ggml_tensor * dst;
    const ggml_tensor * as0, * as1, * b, * ids, * keep;   // as1: the gate of the fused op, else null
    ggml_glu_op glu;
    int64_t K, M, n_expert, n_used, n_tokens, n_b, n_pairs;
    act_layout l;
    int64_t tile_rows;   // weight rows per gemm call
    int64_t cpc;         // columns per gemm call
};

moe_args moe_args_of(ggml_tensor * dst) {
    const bool fused = dst->op == GGML_OP_MOE_FUSED_UP_GATE;
    moe_args a;
    a.dst = dst;
    a.as0 = dst->src[0];
    a.as1 = fused ? dst->src[1] : nullptr;
    a.b = fused ? dst->src[2] : dst->src[1];
    a.ids = fused ? dst->src[3] : dst->src[2];
    a.keep = fused ? dst->src[4] : dst->src[3];
    a.glu = fused ? (ggml_glu_op) dst->op_params[0] : GGML_GLU_OP_SWIGLU;
    a.K = a.as0->ne[0];
    a.M = a.as0->ne[1];
    a.n_expert = a.as0->ne[2];
    a.n_used = a.ids->ne[0];
    a.n_tokens = a.ids->ne[1];
    a.n_b = a.b->ne[1];   // 1 (shared input per token) or n_used
    a.n_pairs = a.n_used * a.n_tokens;
    a.l = activation_layout(a.as0, a.b, a.n_tokens >= k_big_batch);
    // token generation: an expert has at most n_tokens (< 8) columns, so the tile holds long
    // runs of rows; batches: 128 x 64 output tiles. An expert of a prompt gets few columns (512
    // tokens, 8 of 128 experts: 32 on average), so a gemm call's activation packing is shared by
    // few row groups: 128 rows instead of 64 took 9% off the AVX2 expert products (5% AVX512,
    // kiln-bench-ops --only moe); more rows than 128 gained nothing (moe_rows_per_chunk caps it).
    const bool small = a.n_tokens < k_big_batch;
    a.tile_rows = small ? 256 : 128;
    a.cpc = small ? k_big_batch : 64;
    return a;
}

bool moe_small(const moe_args & a) { return a.n_tokens < k_big_batch; }

// Batches: weight rows per chunk, at most the output tile.
int64_t moe_rows_per_chunk(const moe_args & a, int nth) {
    return align_rows(std::min<int64_t>(a.tile_rows, rows_per_chunk(a.M, a.n_tokens, a.as0->nb[1], nth)), a.as0->type);
}

// Token generation streams the chosen experts' rows as dense token generation streams a matrix
// (guided_chunks): the units are runs of rows of one expert, about k_stream_unit_bytes of
// weights (both matrices of the fused op), numbered expert after expert, so that a chunk is one
// long run of consecutive rows through one or more experts' matrices.
int64_t moe_stream_rows_per_unit(const moe_args & a) {
    const size_t row_bytes = a.as0->nb[1] + (a.as1 ? a.as1->nb[1] : 0);
    const int64_t rows = std::max<int64_t>(1, (int64_t) (k_stream_unit_bytes / std::max<size_t>(row_bytes, 1)));
    return std::min(a.M, align_rows(rows, a.as0->type));
}

int64_t moe_stream_units_per_expert(const moe_args & a) {
    const int64_t rpu = moe_stream_rows_per_unit(a);
    return (a.M + rpu - 1) / rpu;
}

size_t moe_tile_floats(const moe_args & a) { return (a.as1 ? 2 : 1) * (size_t) (a.tile_rows * a.cpc); }

// Per-thread space: the output tile and a row for conversions; token generation adds the
// thread's own converted rows, plan and packed columns.
size_t moe_per_thread_bytes(const moe_args & a) {
    size_t s = ggml_pad(moe_tile_floats(a) * sizeof(float) + a.K * sizeof(float), k_align);
    if (moe_small(a)) {
        s += ggml_pad(a.l.row_size * a.n_b * a.n_tokens, k_align) + moe_plan_size(a.n_expert, a.n_pairs) +
             ggml_pad(a.l.row_size * a.n_pairs, k_align);
    }
    return s;
}

void build_moe_plan(const moe_args & a, moe_plan & plan, char * mem) {
    const int64_t n_expert = a.n_expert, n_used = a.n_used, n_tokens = a.n_tokens;
    plan.n_expert = n_expert;
    plan.n_pairs = a.n_pairs;
    plan.counts = (int32_t *) mem;
    plan.offsets = plan.counts + n_expert;
    plan.active = plan.offsets + n_expert + 1;
    plan.pairs = plan.active + n_expert;
    std::fill(plan.counts, plan.counts + n_expert, 0);
    auto id_at = [&](int64_t slot, int64_t tok) {
        return *(const int32_t *) ((const char *) a.ids->data + slot * a.ids->nb[0] + tok * a.ids->nb[1]);
    };
    auto kept = [&](int64_t slot, int64_t tok) {
        return !a.keep || *(const float *) ((const char *) a.keep->data + slot * a.keep->nb[0] + tok * a.keep->nb[1]) != 0.0f;
    };
    for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t i = 0; i < n_used; ++i) {
            const int32_t e = id_at(i, t);
            GGML_ASSERT(e >= 0 && e < n_expert && "mul_mat_id: expert id out of range");
            if (kept(i, t)) plan.counts[e]++;
        }
    }
    plan.offsets[0] = 0;
    plan.n_active = 0;
    for (int64_t e = 0; e < n_expert; ++e) {
        plan.offsets[e + 1] = plan.offsets[e] + plan.counts[e];
        if (plan.counts[e] > 0) plan.active[plan.n_active++] = (int32_t) e;
    }
    // counts serve as fill positions, then are restored
    int32_t * fill = plan.counts;
    std::copy(plan.offsets, plan.offsets + n_expert, fill);
    int32_t dropped = plan.offsets[n_expert];
    for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t i = 0; i < n_used; ++i) {
            const int32_t pair = (int32_t) (i + n_used * t);
            if (kept(i, t)) plan.pairs[fill[id_at(i, t)]++] = pair; else plan.pairs[dropped++] = pair;
        }
    }
    for (int64_t e = 0; e < n_expert; ++e) plan.counts[e] = plan.offsets[e + 1] - plan.offsets[e];
}

// Converted activation row of a pair: b row (slot % n_b) of its token.
int64_t moe_act_row(const moe_args & a, int32_t pair) {
    const int64_t slot = pair % a.n_used, tok = pair / a.n_used;
    return (slot % a.n_b) + a.n_b * tok;
}

float * moe_dst_row(const moe_args & a, int32_t pair) {
    const int64_t slot = pair % a.n_used, tok = pair / a.n_used;
    return (float *) ((char *) a.dst->data + slot * a.dst->nb[1] + tok * a.dst->nb[2]);
}

// Convert activation rows [r0, r1) of b (row r = slot + n_b * token) into out.
void moe_convert(const moe_args & a, int64_t r0, int64_t r1, char * out, float * tmp) {
    ggml_from_float_t enc = a.l.type == GGML_TYPE_F32 ? nullptr : ggml_cpu_from_float(a.l.type);
    const ggml_tensor * b = a.b;
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i = r % a.n_b, t = r / a.n_b;
        const char * row = (const char *) b->data + i * b->nb[1] + t * b->nb[2];
        const float * f = (const float *) row;
        if (b->type != GGML_TYPE_F32 || b->nb[0] != sizeof(float)) {
            for (int64_t k = 0; k < a.K; ++k) {
                const char * e = row + k * b->nb[0];
                tmp[k] = b->type == GGML_TYPE_F32 ? *(const float *) e
                       : b->type == GGML_TYPE_F16 ? ggml_compute_fp16_to_fp32(*(const uint16_t *) e)
                                                  : ggml_compute_bf16_to_fp32(*(const uint16_t *) e);
            }
            f = tmp;
        }
        char * d = out + r * a.l.row_size;
        if (enc) enc(f, d, a.K); else std::memcpy(d, f, a.K * sizeof(float));
    }
}

void moe_zero_dropped(const moe_args & a, const moe_plan & plan) {
    for (int64_t q = plan.n_kept(); q < plan.n_pairs; ++q) std::memset(moe_dst_row(a, plan.pairs[q]), 0, a.M * sizeof(float));
}

// Rows [row0, row0 + nr) of expert e for its packed columns [col0, col0 + nc): gemm (two for
// the fused op), then scatter into dst, applying the activation when fused.
void moe_block(const moe_args & a, const moe_plan & plan, const char * packed, int64_t e, int64_t row0, int64_t nr,
               int64_t col0, int64_t nc, float * tile) {
    ggml_gemm_t gemm = a.l.gemm;
    GGML_ASSERT(gemm);
    const int64_t q0 = plan.offsets[e] + col0;
    const char * x = packed + q0 * a.l.row_size;
    const char * w0 = (const char *) a.as0->data + e * a.as0->nb[2] + row0 * a.as0->nb[1];
    gemm(a.K, w0, a.as0->nb[1], x, a.l.row_size, tile, (size_t) nr, (int) nr, (int) nc);
    float * tile1 = nullptr;
    if (a.as1) {
        tile1 = tile + a.tile_rows * a.cpc;
        const char * w1 = (const char *) a.as1->data + e * a.as1->nb[2] + row0 * a.as1->nb[1];
        gemm(a.K, w1, a.as1->nb[1], x, a.l.row_size, tile1, (size_t) nr, (int) nr, (int) nc);
    }
    for (int64_t j = 0; j < nc; ++j) {
        float * d = moe_dst_row(a, plan.pairs[q0 + j]) + row0;
        const float * up = tile + j * nr;
        if (!a.as1) {
            std::memcpy(d, up, nr * sizeof(float));
            continue;
        }
        // fused GLU: as0 is up, as1 is gate; through the same vector primitives as the unfused
        // glu op (ops-elementwise.cpp), so both paths give the same values
        const float * gate = tile1 + j * nr;
        const auto & vec = ggml_cpu_vec();
        if (a.glu == GGML_GLU_OP_SWIGLU) {
            vec.swiglu(nr, d, gate, up);
        } else {
            vec.gelu(nr, d, gate);
            vec.mul(nr, d, d, up);
        }
    }
}

// Token generation: everything this thread needs in its own space, then guided chunks of the
// stream units (moe_stream_rows_per_unit) from the node's counter. The pool sized the chunks
// for every pair on its own expert; with fewer chosen experts the last chunks are empty, and
// the last chunk the pool counted takes whatever its own count would leave.
void moe_product_small(const ggml_compute_params * p, const moe_args & a) {
    int c = p->chunk;   // claimed by the pool (cpu-ops.h)
    char * mine = thread_space(moe_per_thread_bytes(a));
    float * tile = (float *) mine;
    float * tmp = tile + moe_tile_floats(a);
    char * act = mine + ggml_pad(moe_tile_floats(a) * sizeof(float) + a.K * sizeof(float), k_align);
    char * plan_mem = act + ggml_pad(a.l.row_size * a.n_b * a.n_tokens, k_align);
    char * packed = plan_mem + moe_plan_size(a.n_expert, a.n_pairs);
    moe_convert(a, 0, a.n_b * a.n_tokens, act, tmp);
    moe_plan plan;
    build_moe_plan(a, plan, plan_mem);
    for (int64_t q = 0; q < plan.n_kept(); ++q) {
        std::memcpy(packed + q * a.l.row_size, act + moe_act_row(a, plan.pairs[q]) * a.l.row_size, a.l.row_size);
    }
    const int64_t rpu = moe_stream_rows_per_unit(a), upe = moe_stream_units_per_expert(a);
    const int64_t n_units = plan.n_active * upe;
    const guided_chunks g(n_units, p->nth);
    int n_done = 0;
    for (; c >= 0; ++n_done, c = ggml_cpu_chunk_claim(p)) {
        if (c == 0) moe_zero_dropped(a, plan);
        const int64_t u1 = c + 1 == p->n_chunks ? n_units : g.start(c + 1);
        for (int64_t u = g.start(c); u < u1; ) {
            // the part of the chunk in the g-th chosen expert: its rows [row0, row1)
            const int64_t gi = u / upe, u_end = std::min(u1, (gi + 1) * upe);
            const int64_t e = plan.active[gi];
            const int64_t row1 = std::min(a.M, (u_end - gi * upe) * rpu);
            for (int64_t row0 = (u - gi * upe) * rpu; row0 < row1; row0 += a.tile_rows) {
                const int64_t nr = std::min(a.tile_rows, row1 - row0);
                for (int64_t col0 = 0; col0 < plan.counts[e]; col0 += a.cpc) {
                    moe_block(a, plan, packed, e, row0, nr, col0, std::min<int64_t>(a.cpc, plan.counts[e] - col0), tile);
                }
            }
            u = u_end;
        }
    }
    ggml_cpu_chunks_done(p, n_done);
}

// Batches: the team converts, thread 0 plans, the team packs, then (expert, row block, column
// block) chunks from a shared counter.
void moe_product_team(const ggml_compute_params * p, const moe_args & a) {
    // scratch: counter | converted b rows | plan | packed columns | per-thread tiles
    char * base = (char *) ggml_pad((uintptr_t) p->wdata, k_align);
    auto * counter = (std::atomic<int64_t> *) base;
    char * act = base + k_align;
    char * plan_mem = act + ggml_pad(a.l.row_size * a.n_b * a.n_tokens, k_align);
    char * packed = plan_mem + moe_plan_size(a.n_expert, a.n_pairs);
    char * thread_mem = packed + ggml_pad(a.l.row_size * a.n_pairs, k_align);
    float * tile = (float *) (thread_mem + p->ith * moe_per_thread_bytes(a));
    float * tmp = tile + moe_tile_floats(a);

    int64_t r0, r1;
    ggml_cpu_split_rows(a.n_b * a.n_tokens, p->ith, p->nth, r0, r1);
    moe_convert(a, r0, r1, act, tmp);
    moe_plan plan;
    if (p->ith == 0) {
        build_moe_plan(a, plan, plan_mem);
        moe_zero_dropped(a, plan);
        counter->store(0, std::memory_order_relaxed);
    }
    ggml_cpu_barrier(p);
    if (p->ith != 0) {
        plan.n_expert = a.n_expert;
        plan.n_pairs = a.n_pairs;
        plan.counts = (int32_t *) plan_mem;
        plan.offsets = plan.counts + a.n_expert;
        plan.active = plan.offsets + a.n_expert + 1;
        plan.pairs = plan.active + a.n_expert;
        plan.n_active = 0;
        for (int64_t e = 0; e < a.n_expert; ++e) plan.n_active += plan.counts[e] > 0;
    }
    int64_t q0, q1;
    ggml_cpu_split_rows(plan.n_kept(), p->ith, p->nth, q0, q1);
    for (int64_t q = q0; q < q1; ++q) {
        std::memcpy(packed + q * a.l.row_size, act + moe_act_row(a, plan.pairs[q]) * a.l.row_size, a.l.row_size);
    }
    ggml_cpu_barrier(p);

    const int64_t rpc = moe_rows_per_chunk(a, p->nth);
    const int64_t n_rb = (a.M + rpc - 1) / rpc;
    for (;;) {
        int64_t chunk = counter->fetch_add(1, std::memory_order_relaxed);
        int64_t g = 0;
        for (; g < plan.n_active; ++g) {
            const int64_t n_here = n_rb * ((plan.counts[plan.active[g]] + a.cpc - 1) / a.cpc);
            if (chunk < n_here) break;
            chunk -= n_here;
        }
        if (g >= plan.n_active) break;
        const int64_t e = plan.active[g];
        const int64_t n_cb = (plan.counts[e] + a.cpc - 1) / a.cpc;
        const int64_t rb = chunk / n_cb, cb = chunk % n_cb;
        const int64_t row0 = rb * rpc, nr = std::min(rpc, a.M - row0);
        const int64_t col0 = cb * a.cpc, nc = std::min(a.cpc, plan.counts[e] - col0);
        moe_block(a, plan, packed, e, row0, nr, col0, nc, tile);
    }
}

} // namespace

size_t ggml_cpu_mul_mat_id_work_size(const ggml_tensor * dst, int nth) {
    const moe_args a = moe_args_of((ggml_tensor *) dst);
    if (moe_small(a)) return 0;   // thread-local space
    return 2 * k_align + (size_t) nth * moe_per_thread_bytes(a) + ggml_pad(a.l.row_size * a.n_b * a.n_tokens, k_align) +
           moe_plan_size(a.n_expert, a.n_pairs) + ggml_pad(a.l.row_size * a.n_pairs, k_align);
}

int ggml_cpu_mul_mat_id_self_chunks(const ggml_tensor * dst, int nth) {
    const moe_args a = moe_args_of((ggml_tensor *) dst);
    if (!moe_small(a)) return 0;
    return guided_chunks(std::min(a.n_expert, a.n_pairs) * moe_stream_units_per_expert(a), nth).n_chunks;
}

void ggml_cpu_op_mul_mat_id(const ggml_compute_params * p, ggml_tensor * dst) {
    const moe_args a = moe_args_of(dst);
    if (moe_small(a)) moe_product_small(p, a); else moe_product_team(p, a);
}

void ggml_cpu_op_moe_up_gate(const ggml_compute_params * p, ggml_tensor * dst) { ggml_cpu_op_mul_mat_id(p, dst); }
