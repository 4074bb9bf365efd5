// What each tensor type provides to the CPU backend's matrix products, per instruction set.
//
// A matrix product W [K, M] x X [K, N] first converts X to the weight type's activation type
// (vec_dot_type: f32, f16, bf16, q8_0, q8_1, q8_K ...) once per product, then calls the type's
// gemm on tiles. A gemm computes a block of nr weight rows times nc activation columns and is
// free to tile registers inside it; the backend only splits the work over threads.
#pragma once

#include <cstring>

#include "ggml.h"
#include "ggml-cpu.h"

#include <cstddef>
#include <cstdint>

// dst[c * dst_stride + r] = dot(row r of w, column c of x), r < nr, c < nc.
// w: weight rows (w_stride bytes apart, per-row metadata included);
// x: activation rows in vec_dot_type (x_stride bytes apart); n: row length in elements.
typedef void (*ggml_gemm_t)(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride,
                            float * dst, size_t dst_stride, int nr, int nc);

struct ggml_cpu_type_traits {
    ggml_type         vec_dot_type = GGML_TYPE_F32;
    // the kernels registered per ISA level (NULL where none); index by ggml_cpu_isa
    ggml_gemm_t       gemm[GGML_CPU_ISA_COUNT] = {};
    // activation encoders (only for types used as vec_dot_type), per ISA level
    ggml_from_float_t from_float[GGML_CPU_ISA_COUNT] = {};
    // preferred rows per gemm call (multiple of the kernel's register tile); 0 = backend default
    int               rows_per_call = 0;
    // Batch products (ggml_cpu_gemm_choice) may take a second, finer activation type with kernels
    // of their own: q4_K, q5_K and q6_K round batch activations per 32 values (q8_0) instead of
    // per 256 (q8_K), as the reference's batch path does, while token generation keeps q8_K
    // (ggml_cpu_set_batch_act_per32 in ggml-cpu.h turns it off); their interleaved twins
    // (q4_k_r4, q5_k_r4, q6_k_r4) have the same pair, so that a repacked model keeps the
    // original's products. GGML_TYPE_COUNT: none.
    ggml_type         batch_vec_dot_type = GGML_TYPE_COUNT;
    ggml_gemm_t       batch_gemm[GGML_CPU_ISA_COUNT] = {};
};

ggml_cpu_type_traits * ggml_cpu_type_traits_mut(ggml_type type);
const ggml_cpu_type_traits * ggml_cpu_get_type_traits(ggml_type type);

void ggml_cpu_register_gemm(ggml_type type, ggml_cpu_isa isa, ggml_type vec_dot_type, ggml_gemm_t fn);
void ggml_cpu_register_from_float(ggml_type type, ggml_cpu_isa isa, ggml_from_float_t fn);
void ggml_cpu_register_batch_gemm(ggml_type type, ggml_cpu_isa isa, ggml_type vec_dot_type, ggml_gemm_t fn);

// The activation type and kernel of a product: for a batch (many activation columns; the caller
// decides), the batch pair where one is registered at the same level as the plain kernel
// that would run (never a scalar batch kernel in place of a SIMD plain one) and batch
// activations per 32 are on (ggml-cpu.h); else the plain pair.
struct ggml_cpu_gemm_choice {
    ggml_type   act_type;
    ggml_gemm_t gemm;
};
ggml_cpu_gemm_choice ggml_cpu_gemm_for(ggml_type type, bool batch);

// The exact product of a weight type (gemm-exact.cpp): decoded rows times f32 activations
// (vec_dot_type f32), double sums; NULL for interleaved layouts. ggml_cpu_gemm_for returns it
// while exact products are on (ggml-cpu.h).
ggml_gemm_t ggml_cpu_exact_gemm(ggml_type type);

// The best kernel at or below the current ISA cap (ggml_cpu_get_isa()); NULL if none at all.
ggml_gemm_t       ggml_cpu_gemm(ggml_type type);
ggml_from_float_t ggml_cpu_from_float(ggml_type type);
// The kernel registered for exactly this level (tests).
ggml_gemm_t       ggml_cpu_gemm_at(ggml_type type, ggml_cpu_isa isa);
ggml_from_float_t ggml_cpu_from_float_at(ggml_type type, ggml_cpu_isa isa);
ggml_gemm_t       ggml_cpu_batch_gemm_at(ggml_type type, ggml_cpu_isa isa);

// The trellis (KT) quantizers' seed search: err[s] = sum_m w[m] (t[m] - cb[m * count + s])^2
// for every seed s of a codebook of small integers stored run-position major (n rows of count
// int8, count a multiple of 32); also group_min[g] = the smallest err of seeds 32 g .. 32 g + 31,
// so that the quantizer finds the near-best seeds without a scalar pass over all of err; returns
// the smallest err. The rounding is the kernel's own: the quantizer re-checks the near-best seeds
// with its plain expression, so every path picks the same seed.
typedef float (*ggml_kt_errors_t)(const int8_t * cb, int count, int n, const float * t, const float * w, float * err,
                                  float * group_min);
void ggml_cpu_register_kt_errors(ggml_cpu_isa isa, ggml_kt_errors_t fn);
// The best kernel at or below the ISA cap; NULL where none (the quantizer then searches in plain code).
ggml_kt_errors_t ggml_cpu_kt_errors();
// The same distances for the grid search's ranges of runs: err[i] = sum_m w[m] (t[m] - cb[m *
// stride + i])^2 for i in [0, count); a kernel may compute whole vectors past count (cb's rows
// readable and err writable 32 entries past it). Returns whether some err[i] <= thr, i < count,
// so that a range with nothing near the best is passed over at once (a compare per vector: the
// horizontal minimum it replaced was a quarter of the kernel's time on ranges of ~35 runs). Own
// rounding, re-checked the same way.
typedef bool (*ggml_kt_range_errors_t)(const int8_t * cb, size_t stride, int n, int count, const float * t, const float * w,
                                      float thr, float * err);
void ggml_cpu_register_kt_range_errors(ggml_cpu_isa isa, ggml_kt_range_errors_t fn);
ggml_kt_range_errors_t ggml_cpu_kt_range_errors();

// Per-thread, 64-byte aligned scratch for the ISA kernels, grown on demand and then kept (no
// allocation per call). It lives in baseline code so that kernel files need no std:: containers
// (see cpu-isa.h). Each role has its own slot, as one gemm call may hold several at once.
enum ggml_cpu_scratch_slot {
    GGML_CPU_SCRATCH_PANEL_W,   // repacked weight panel
    GGML_CPU_SCRATCH_PANEL_X,   // repacked activation panel
    GGML_CPU_SCRATCH_GATHER,    // interleaved row group copied from strided rows
    GGML_CPU_SCRATCH_PLAIN,     // interleaved rows decoded to the plain layout
    GGML_CPU_SCRATCH_PANEL_XALL,   // packed activations kept across the calls of a product (below)
    GGML_CPU_SCRATCH_COUNT,
};
void * ggml_cpu_kernel_scratch(ggml_cpu_scratch_slot slot, size_t bytes);

// Packed activations reused across the gemm calls of one product. A dense product's chunks are
// (block of weight rows) x (the same activation columns), one gemm call each, and every call
// used to repack all its columns for the panel (a tenth of a prompt's matrix time at 128 rows per
// chunk). While a ggml_cpu_act_reuse lives (ops-matmul.cpp holds one per dense product and
// thread), a kernel may keep what it packed for the next call of the same product: the
// activations cannot change within it. Elsewhere (expert-routed products gather different tokens
// into the same buffer, tests, benchmarks) the token is 0 and nothing is kept.
struct ggml_cpu_act_reuse {
    ggml_cpu_act_reuse();
    ~ggml_cpu_act_reuse();
    ggml_cpu_act_reuse(const ggml_cpu_act_reuse &) = delete;
    ggml_cpu_act_reuse & operator=(const ggml_cpu_act_reuse &) = delete;
};
// The calling thread's current product (0: no reuse allowed).
uint64_t ggml_cpu_act_reuse_token();

// What a buffer of packed activations holds: the product (token), the source (x, x_stride, n
// values, nc columns) and the packed layout (any address unique to the packer, e.g. its function).
struct ggml_cpu_act_panel_key {
    uint64_t     token;
    const void * x;
    size_t       x_stride;
    int64_t      n, nc;
    const void * layout;
};
// The thread's buffer of at least bytes (64-byte aligned) for key; *filled: whether it already
// holds key's packed activations (an earlier call of the product packed them). When not, the
// caller must fill all of it in this call: the next call with the same key will take it as done.
uint8_t * ggml_cpu_act_panel(const ggml_cpu_act_panel_key & key, size_t bytes, bool * filled);

// An interleaved group of R rows of row_size bytes, rows w_stride apart: the group itself when
// its rows are contiguous, else a copy in the gather scratch (a view of a wider tensor).
inline const char * ggml_cpu_contiguous_group(const char * group, size_t w_stride, size_t row_size, int R) {
    if (w_stride == row_size) return group;
    char * gather = (char *) ggml_cpu_kernel_scratch(GGML_CPU_SCRATCH_GATHER, R * row_size);
    for (int k = 0; k < R; ++k) std::memcpy(gather + k * row_size, group + k * w_stride, row_size);
    return gather;
}
