// Registry of CPU kernels per type and instruction-set level, and run-time selection.
#include "cpu-traits.h"
#include "cpu-isa.h"
#include "ggml-impl.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {
ggml_cpu_type_traits * cpu_table() {
    static ggml_cpu_type_traits t[GGML_TYPE_COUNT];
    return t;
}

// Down the cap's chain of levels (ggml_cpu_isa_lower) to the first one with a kernel; its level
// in *at (GGML_CPU_ISA_COUNT if none).
template <typename Fn>
Fn pick(Fn const * fns, ggml_cpu_isa cap, ggml_cpu_isa * at = nullptr) {
    for (ggml_cpu_isa l = cap;; l = ggml_cpu_isa_lower(l)) {
        if (at) *at = l;
        if (fns[l]) return fns[l];
        if (l == GGML_CPU_ISA_SCALAR) {
            if (at) *at = GGML_CPU_ISA_COUNT;
            return nullptr;
        }
    }
}
} // namespace

ggml_cpu_type_traits * ggml_cpu_type_traits_mut(ggml_type type) {
    GGML_ASSERT(type >= 0 && type < GGML_TYPE_COUNT);
    return &cpu_table()[type];
}

// Readers first make sure the ISA kernels are registered; registration (the _mut accessor and the
// register functions) does not, so that ggml_cpu_ensure_kernels() can use them.
const ggml_cpu_type_traits * ggml_cpu_get_type_traits(ggml_type type) {
    ggml_cpu_ensure_kernels();
    return ggml_cpu_type_traits_mut(type);
}

void ggml_cpu_register_gemm(ggml_type type, ggml_cpu_isa isa, ggml_type vec_dot_type, ggml_gemm_t fn) {
    auto * t = ggml_cpu_type_traits_mut(type);
    t->vec_dot_type = vec_dot_type;
    t->gemm[isa] = fn;
}

void ggml_cpu_register_from_float(ggml_type type, ggml_cpu_isa isa, ggml_from_float_t fn) {
    ggml_cpu_type_traits_mut(type)->from_float[isa] = fn;
}

void ggml_cpu_register_batch_gemm(ggml_type type, ggml_cpu_isa isa, ggml_type vec_dot_type, ggml_gemm_t fn) {
    auto * t = ggml_cpu_type_traits_mut(type);
    GGML_ASSERT(t->batch_vec_dot_type == GGML_TYPE_COUNT || t->batch_vec_dot_type == vec_dot_type);
    t->batch_vec_dot_type = vec_dot_type;
    t->batch_gemm[isa] = fn;
}

namespace {
bool initial_batch_act_per32() {
    const char * env = std::getenv("KILN_BATCH_ACT");
    if (!env || !std::strcmp(env, "per32")) return true;
    if (!std::strcmp(env, "per256")) return false;
    std::fprintf(stderr, "error: KILN_BATCH_ACT=%s: expected per32 or per256\n", env);
    std::exit(1);
}

std::atomic<bool> & batch_act_per32() {
    static std::atomic<bool> on{ initial_batch_act_per32() };
    return on;
}
} // namespace

void ggml_cpu_set_batch_act_per32(bool on) { batch_act_per32().store(on); }
bool ggml_cpu_get_batch_act_per32(void) { return batch_act_per32().load(); }

namespace {
bool initial_exact_products() {
    const char * env = std::getenv("KILN_EXACT_MATMUL");
    if (!env || !std::strcmp(env, "0")) return false;
    if (!std::strcmp(env, "1")) return true;
    std::fprintf(stderr, "error: KILN_EXACT_MATMUL=%s: expected 0 or 1\n", env);
    std::exit(1);
}

std::atomic<bool> & exact_products() {
    static std::atomic<bool> on{ initial_exact_products() };
    return on;
}
} // namespace

void ggml_cpu_set_exact_products(bool on) { exact_products().store(on); }
bool ggml_cpu_get_exact_products(void) { return exact_products().load(); }

ggml_cpu_gemm_choice ggml_cpu_gemm_for(ggml_type type, bool batch) {
    if (ggml_cpu_get_exact_products()) {
        if (const ggml_gemm_t exact = ggml_cpu_exact_gemm(type)) return { GGML_TYPE_F32, exact };
    }
    const ggml_cpu_type_traits * t = ggml_cpu_get_type_traits(type);
    ggml_cpu_isa plain_at, batch_at;
    const ggml_gemm_t plain = pick(t->gemm, ggml_cpu_get_isa(), &plain_at);
    if (batch && t->batch_vec_dot_type != GGML_TYPE_COUNT && ggml_cpu_get_batch_act_per32()) {
        const ggml_gemm_t b = pick(t->batch_gemm, ggml_cpu_get_isa(), &batch_at);
        if (b && batch_at == plain_at) return { t->batch_vec_dot_type, b };
    }
    return { t->vec_dot_type, plain };
}

ggml_gemm_t ggml_cpu_gemm(ggml_type type) {
    return pick(ggml_cpu_get_type_traits(type)->gemm, ggml_cpu_get_isa());
}

ggml_from_float_t ggml_cpu_from_float(ggml_type type) {
    ggml_from_float_t f = pick(ggml_cpu_get_type_traits(type)->from_float, ggml_cpu_get_isa());
    return f ? f : ggml_get_type_traits(type)->from_float_ref;
}

ggml_gemm_t ggml_cpu_gemm_at(ggml_type type, ggml_cpu_isa isa) {
    return ggml_cpu_get_type_traits(type)->gemm[isa];
}

ggml_from_float_t ggml_cpu_from_float_at(ggml_type type, ggml_cpu_isa isa) {
    return ggml_cpu_get_type_traits(type)->from_float[isa];
}

ggml_gemm_t ggml_cpu_batch_gemm_at(ggml_type type, ggml_cpu_isa isa) {
    return ggml_cpu_get_type_traits(type)->batch_gemm[isa];
}

namespace {
ggml_kt_errors_t * kt_errors_table() {
    static ggml_kt_errors_t t[GGML_CPU_ISA_COUNT] = {};
    return t;
}
} // namespace

void ggml_cpu_register_kt_errors(ggml_cpu_isa isa, ggml_kt_errors_t fn) { kt_errors_table()[isa] = fn; }

ggml_kt_errors_t ggml_cpu_kt_errors() {
    ggml_cpu_ensure_kernels();
    return pick(kt_errors_table(), ggml_cpu_get_isa());
}

namespace {
ggml_kt_range_errors_t * kt_range_errors_table() {
    static ggml_kt_range_errors_t t[GGML_CPU_ISA_COUNT] = {};
    return t;
}
} // namespace

void ggml_cpu_register_kt_range_errors(ggml_cpu_isa isa, ggml_kt_range_errors_t fn) { kt_range_errors_table()[isa] = fn; }

ggml_kt_range_errors_t ggml_cpu_kt_range_errors() {
    ggml_cpu_ensure_kernels();
    return pick(kt_range_errors_table(), ggml_cpu_get_isa());
}

void * ggml_cpu_kernel_scratch(ggml_cpu_scratch_slot slot, size_t bytes) {
    struct buffer {
        void * p = nullptr;
        size_t n = 0;
        ~buffer() { std::free(p); }
    };
    thread_local buffer bufs[GGML_CPU_SCRATCH_COUNT];
    GGML_ASSERT(slot >= 0 && slot < GGML_CPU_SCRATCH_COUNT);
    buffer & b = bufs[slot];
    if (b.n < bytes) {
        std::free(b.p);
        b.n = (bytes + 4095) & ~(size_t) 4095;   // aligned_alloc wants a multiple of the alignment
        b.p = std::aligned_alloc(64, b.n);
        GGML_ASSERT(b.p && "out of memory for kernel scratch");
    }
    return b.p;
}

namespace {
thread_local uint64_t t_act_token = 0;   // the current product's token (0: none)
thread_local uint64_t t_act_count = 0;   // tokens this thread has handed out
thread_local ggml_cpu_act_panel_key t_act_held = {};   // what GGML_CPU_SCRATCH_PANEL_XALL holds
} // namespace

ggml_cpu_act_reuse::ggml_cpu_act_reuse() { t_act_token = ++t_act_count; }

ggml_cpu_act_reuse::~ggml_cpu_act_reuse() {
    t_act_token = 0;
    t_act_held = {};
}

uint64_t ggml_cpu_act_reuse_token() { return t_act_token; }

uint8_t * ggml_cpu_act_panel(const ggml_cpu_act_panel_key & key, size_t bytes, bool * filled) {
    GGML_ASSERT(key.token != 0 && key.token == t_act_token);
    const ggml_cpu_act_panel_key & h = t_act_held;
    *filled = h.token == key.token && h.x == key.x && h.x_stride == key.x_stride && h.n == key.n && h.nc == key.nc &&
              h.layout == key.layout;
    // (the size follows from the key, so a buffer that holds the key is already large enough)
    uint8_t * buf = (uint8_t *) ggml_cpu_kernel_scratch(GGML_CPU_SCRATCH_PANEL_XALL, bytes);
    t_act_held = key;
    return buf;
}

// The -rtr policy, in one place: per ISA level, the interleaved layouts whose kernels at that
// level are at least as fast as the plain twin's at batch 1 and at batch 512 (kiln-bench-matmul
// -t 1, CPU time; batch 1 at K = M = 4096, batch 512 at K = M = 1024; Zen 4, AVX2 by
// KILN_CPU_ISA=avx2; measured on a busy machine, where single batch-1 figures of the woven
// layouts scattered by up to 2x: medians of 2 to 5 runs decided, and iq4_nl_r4 on AVX2 stays
// out until a quiet machine shows it either way).
// Session 6 (same method; batch 1 as the least CPU time of 3 alternating runs at load 9 to 14):
// mxfp4_r8 0.40 vs mxfp4 0.45 ms at batch 1, equal at 512 (AVX512); q8_KV_r8 0.96 vs 16.4 ms and
// 26.6 vs 424 ms (both levels run the same float kernel; its twin is a decoded float product).
// Session 7: q4_k_r4 / q5_k_r4 / q6_k_r4 got token-generation loops of their own
// (gemv-interleaved-loop.h) and woven per-32 batch kernels. Least / median CPU ms of 4 alternating runs
// at load 11 (r4 against plain twin): batch 1 at 4096 x 4096, AVX512 q4 0.42 / 0.44 vs 0.44 /
// 0.45, q5 0.44 / 0.48 vs 0.53 / 0.54, q6 0.43 / 0.52 vs 0.48 / 0.66; AVX2 q4 0.39 / 0.42 vs
// 0.40 / 0.40, q5 0.51 / 0.55 vs 0.53 / 0.53 (and 0.47 vs 0.53 in an earlier set), q6 0.56 / 0.64
// vs 0.47 / 0.49. Batch 512 at K = 2048, M = 4096: AVX512 29.8 / 29.9 / 31.8 vs 30.7 / 30.2 /
// 32.6 ms; AVX2 44.5 / 46.4 / 58.9 vs 48.4 / 51.3 / 69.2 (batch 32 0.83x to 0.93x everywhere).
// Session 8 (kiln-bench-matmul -t 1 --twins: the layout woven from the twin's own rows, least
// CPU ms of 31 alternating batch-1 runs at K = M = 4096, 3 batch-512 runs; Zen 4, load 2 to 3):
// the lane-shaped token-generation loop now also serves q2_k_r4, q3_k_r4, iq2_k_r4 .. iq5_k_r4,
// iq4_ks_r4, iq5_ks_r4 and (against q8_0) iq4_nl_r4, q5_0_r4, q6_0_r4, q4_0_r8, q8_0_r8,
// mxfp4_r8 and iq4_xs_r8 (lanes of 8 rows), and the lists were re-decided from that table, by
// the same rule (batch 1 and batch 512 both at least 0.97 of the twin). Ratios twin ms / layout ms, b1 / b512 (the 32-value rows: b1 of 31 runs at load 6):
//   AVX512 listed: q2_k_r4 1.32 / 1.02, q3_k_r4 1.15 / 1.01, q4_k_r4 1.01 / 1.00, q5_k_r4 1.16 /
//     1.02, iq2_k_r4 1.23 / 1.01, iq3_k_r4 1.17 / 1.00, iq4_k_r4 1.42 / 0.97, iq5_k_r4 1.21 / 1.00,
//     iq4_ks_r4 1.55 / 1.00, iq5_ks_r4 1.31 / 1.01, q5_0_r4 1.31 / 1.00, q6_0_r4 1.58 / 0.98,
//     iq4_nl_r4 0.99 / 1.00 (1.10 in L2), q8_0_r8 1.06 to 1.10 / 0.98, mxfp4_r8 0.89 to 1.47 /
//     1.02 (its twin's time alone scattered 0.46 to 0.67 ms; 1.12 in L2), bf16_r16 1.28 / 1.11;
//   AVX512 taken off or left off: q4_0_r8 0.88 to 1.00 at batch 1 (0.56 before its loop; 1.05
//     in L2), iq4_xs_r8 0.96 (0.57 before; 1.00 in L2), q6_k_r4 0.84 to 0.94 at 4096 rows (1.18
//     in L2, M = 256: the loop is faster but waits on memory more than q6_K's);
//   AVX2 listed: q2_k_r4 1.49 / 1.02, q3_k_r4 1.10 / 1.03, q4_k_r4 0.99 / 1.02, q5_k_r4 1.01 /
//     1.07, q5_0_r4 1.57 / 1.02, q6_0_r4 1.32 / 0.99, iq4_nl_r4 1.42 / 1.01, q4_0_r8 1.19 to 1.29
//     / 1.02, mxfp4_r8 0.98 to 1.51 / 1.00, bf16_r16 1.44 / 1.13;
//   AVX2 taken off or left off: q8_0_r8 0.75 to 0.91 (0.37 before its loop; 1.52 in L2),
//     q6_k_r4 0.76 at batch 1; iq4_xs_r8 1.20 at batch 1 (0.58 before its loop) but 0.92 to 0.95
//     at batch 512; iq2_k_r4 .. iq5_k_r4, iq4_ks_r4, iq5_ks_r4 1.2x to 2.3x faster at batch 1
//     but 0.84 to 0.92 at batch 512 (the AVX2 r8 panel's group decoders are slower than the
//     plain types' panel decoders).
// Session 9: the lattice r4 types iq2_xxs_r4 .. iq3_s_r4 got token-generation decoders of the
// same loop (gemv-interleaved-lattice.h; iq2_xxs_r4 / iq3_xxs_r4 with VBMI in
// avx512/quants-interleaved-vbmi.cpp). --twins, least CPU ms of 5 alternating runs at load 7 to
// 10, ratios twin / layout, b1 (4096 x 4096) / b512 (the panels, unchanged):
//   AVX512 (VBMI twins): iq2_xxs_r4 0.91 to 0.95 / 0.93, iq2_xs_r4 1.08 to 1.16 / 0.94, iq2_s_r4
//     1.19 to 1.31 / 0.94, iq3_xxs_r4 0.88 to 0.91 / 0.95, iq3_s_r4 0.73 to 0.86 / 0.95 (0.3
//     at b1 before); KILN_CPU_VBMI=0 (plain AVX512 twins): 1.36 to 1.78 at b1;
//   AVX2: iq2_xxs_r4 2.06 to 2.26 / 0.83, iq2_xs_r4 2.35 / 0.75, iq2_s_r4 1.82 to 1.98 / 0.75,
//     iq3_xxs_r4 1.86 to 1.94 / 0.83, iq3_s_r4 1.38 to 1.51 / 0.58.
// So still not listed: at AVX2 the r8 panel's group decoders (panel-r8-iq.h) lose at batch 512,
// at AVX512 batch 512 is 0.93 to 0.95 and batch 1 below the VBMI twins for three of them.
// Also not listed: iq1_s_r4 / iq1_m_r4 (quantized on their own, not a
// repack of iq1_s / iq1_m); q8_k_r8 and q8_k_r16 (no plain q8_K weights exist to repack).
// Session 11 (this Intel Xeon, AVX512 with VBMI; the lists re-decided from scratch by the rule
// batch 512 above 1.0 and batch 1 at least 0.97 of the twin): the AVX512 batches now keep their
// packed activations across a product's calls as the twins do, and iq4_k_r4 / iq4_ks_r4 read
// their groups through the panel decoders. kiln-bench-matmul -t 1 --twins, K = M = 4096, least
// CPU ms of 19 alternating runs (three sets, two of them KILN_CPU_VBMI=0, whose kernels are the
// same here), load 8 to 12; ratios twin / layout, b512 / b1 (the b512 differences are about the
// noise of one set: 0.99 to 1.01 went either way between sets):
//   AVX512 listed: q8_0_r8 1.003 / 1.04, q2_k_r4 1.02 / 1.49, q3_k_r4 1.01 / 1.08, q5_k_r4 1.02
//     / 1.01, iq4_nl_r4 1.01 / 1.02, q6_0_r4 1.03 / 1.68, iq2_k_r4 1.05 / 1.44, iq3_k_r4 1.07 /
//     1.22, iq4_k_r4 1.005 / 1.39, iq4_ks_r4 1.04 / 1.42, mxfp4_r8 1.03 / 1.29, q8_KV_r8 4.2 / 1.42;
//   AVX512 taken off or left off: q4_k_r4 1.03 / 0.82 to 0.89, q6_k_r4 1.03 / 0.92, iq4_xs_r8
//     1.01 / 0.85 to 0.96, q4_0_r8 1.01 / 0.84 to 1.17, bf16_r16 1.28 / 0.76 (b1 on this CPU),
//     q5_0_r4 0.987, iq5_k_r4 0.994, iq5_ks_r4 0.997, iq3_s_r4 0.996 at b512, the lattice r4
//     types 0.89 to 0.95 at b512 (their group decoders store per row, panel-r8-iq.h).
//   AVX2 (least of 14 runs in two sets): listed q4_0_r8 1.04 / 1.81, q2_k_r4 1.02 / 1.59,
//     q3_k_r4 1.03 / 1.18, q4_k_r4 1.03 / 1.09, q5_k_r4 1.05 / 1.11, iq4_xs_r8 1.003 / 1.06,
//     iq2_k_r4 1.01 / 3.3, iq3_k_r4 1.004 / 2.2, iq4_k_r4 1.01 / 1.53, iq5_k_r4 1.005 / 1.38,
//     iq5_ks_r4 1.004 / 1.45, q8_KV_r8 3.9 / 1.00; off: q5_0_r4 0.98, q6_0_r4 0.997, iq4_nl_r4
//     0.99, mxfp4_r8 0.97, q6_k_r4 0.96, q8_0_r8 0.96, iq4_ks_r4 0.99, iq3_s_r4 0.97 at b512,
//     bf16_r16 1.00 / 0.71.
//   -rtr on whole models (llama-sweep-bench -c 1024 / -c 512 -t 2 -n 0, perf stat task-clock,
//   2-3 interleaved rounds at load 6 to 12; per prompt token = the difference / 512): with these
//   lists AVX512 repacks nothing of q06-Q4_K_M and 3 q5_K tensors of q06-IQ4_XS, AVX2 168 and 196
//   tensors; per-token CPU time moves within the noise (AVX2 Q4_K_M 8.7 -> 8.65 ms, IQ4_XS 10.3
//   -> 10.1; the fully woven q06-Q4_K_R4 file at AVX512 4.4-4.8 against 4.4-4.9 plain), while the
//   load's read and repack cost about 1 s of CPU (AVX2 Q4_K_M at 512 tokens 3.9 -> 4.9 s).
//
// Arm64 (arm_repack_pays): speed is unmeasured, the Arm stage runs under emulation. The rows come
// from instructions executed in the kernels under qemu-aarch64 (-d in_asm,exec,nochain, -dfilter
// on the NEON objects' text and the scalar k-quant decoders the plain K kernels call; two products
// of kiln-bench-matmul -t 1 -K 1024 -M 64; setup runs outside that text, or is cancelled by
// differencing -r 1 and -r 3 where it runs inside): per weight and column, plain twin ->
// interleaved, batch 1 / batch 64.
//   dotprod: q4_0 1.47 -> 0.39 / 0.91 -> 0.28, q8_0 1.33 -> 0.31 / 0.86 -> 0.25, iq4_nl, q5_0,
//     q6_0, iq4_xs, iq2_k .. iq5_k, iq4_ks, iq5_ks at 0.23 .. 0.67 of the plain count at both
//     batches; q2_K .. q6_K (their plain kernels decode each block with the scalar decoder) at
//     0.28 .. 0.43 / 0.34 .. 0.42; bf16 1.28 -> 0.32 / 0.71 -> 0.19 (BFDOT).
//   i8mm: the plain q8_K kernels take column pairs through SMMLA as well; iq4_k_r4 (0.415 -> 0.40)
//     and iq4_ks_r4 (0.367 -> 0.352) are then level at batch 64 and stay plain; the rest at 0.23
//     .. 0.43 of the plain count at batch 1 and 0.34 .. 0.76 at batch 64.
//   neon: only bf16_r16 has a kernel (shifts and FMA; 1.28 -> 0.74 / 0.71 -> 0.49).
//   q8_KV_r8 at every level: its twin has no NEON product (decoded floats).
// Fewer instructions for the same weight bytes is taken to mean no slower; a listed type that turns
// out slower on a real Arm core should come off its row.
namespace {
bool arm_repack_pays(ggml_type t, ggml_cpu_isa isa) {
    switch (t) {
        case GGML_TYPE_Q8_KV_R8:
        case GGML_TYPE_BF16_R16:
            return true;
        case GGML_TYPE_IQ4_K_R4:
        case GGML_TYPE_IQ4_KS_R4:
            return isa == GGML_CPU_ISA_NEON_DOTPROD;
        case GGML_TYPE_Q4_0_R8: case GGML_TYPE_Q8_0_R8: case GGML_TYPE_IQ4_NL_R4: case GGML_TYPE_Q5_0_R4:
        case GGML_TYPE_Q6_0_R4: case GGML_TYPE_IQ4_XS_R8: case GGML_TYPE_Q2_K_R4: case GGML_TYPE_Q3_K_R4:
        case GGML_TYPE_Q4_K_R4: case GGML_TYPE_Q5_K_R4: case GGML_TYPE_Q6_K_R4: case GGML_TYPE_IQ2_K_R4:
        case GGML_TYPE_IQ3_K_R4: case GGML_TYPE_IQ5_K_R4: case GGML_TYPE_IQ5_KS_R4:
            return isa == GGML_CPU_ISA_NEON_DOTPROD || isa == GGML_CPU_ISA_NEON_I8MM;
        default:
            return false;
    }
}
} // namespace

bool ggml_cpu_repack_pays(ggml_type interleaved) {
    static constexpr ggml_type k_avx512[] = {
        GGML_TYPE_Q8_0_R8,  GGML_TYPE_Q6_0_R4,  GGML_TYPE_IQ4_NL_R4, GGML_TYPE_Q2_K_R4,  GGML_TYPE_Q3_K_R4, GGML_TYPE_Q5_K_R4,
        GGML_TYPE_IQ2_K_R4, GGML_TYPE_IQ3_K_R4, GGML_TYPE_IQ4_K_R4,  GGML_TYPE_IQ4_KS_R4, GGML_TYPE_Q8_KV_R8, GGML_TYPE_MXFP4_R8,
    };
    static constexpr ggml_type k_avx2[] = {
        GGML_TYPE_Q4_0_R8,  GGML_TYPE_Q2_K_R4,  GGML_TYPE_Q3_K_R4, GGML_TYPE_Q4_K_R4,  GGML_TYPE_Q5_K_R4,   GGML_TYPE_IQ4_XS_R8,
        GGML_TYPE_IQ2_K_R4, GGML_TYPE_IQ3_K_R4, GGML_TYPE_IQ4_K_R4, GGML_TYPE_IQ5_K_R4, GGML_TYPE_IQ5_KS_R4, GGML_TYPE_Q8_KV_R8,
    };
    auto listed = [interleaved](const auto & types) {
        for (ggml_type t : types) {
            if (t == interleaved) return true;
        }
        return false;
    };
    switch (ggml_cpu_get_isa()) {
        case GGML_CPU_ISA_AVX512: return listed(k_avx512);
        case GGML_CPU_ISA_AVX2:   return listed(k_avx2);
        case GGML_CPU_ISA_NEON:
        case GGML_CPU_ISA_NEON_DOTPROD:
        case GGML_CPU_ISA_NEON_I8MM:
            return arm_repack_pays(interleaved, ggml_cpu_get_isa());
        default:                  return false;
    }
}
