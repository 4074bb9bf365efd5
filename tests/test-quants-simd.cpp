// Every SIMD kernel agrees with the scalar one: for each type with a scalar gemm and a gemm at a
// SIMD level this CPU runs, on random data of awkward shapes (row counts that are not multiples
// of any register tile, 1..17 activation columns, row strides larger than the rows); and every
// SIMD activation encoder reproduces the reference encoder byte for byte. The scalar gemm itself
// is checked against a double-precision product of the decoded operands. Type-agnostic: kernels
// of any family are picked up from the registry.
#include "testing.h"

#include "cpu-traits.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "quants/quants-ik.h"
#include "quants/quants-k.h"

#include <gtest/gtest.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

namespace {

// iq2_kt / iq3_kt products carry the reference's inference-time row factor (golden/README.md),
// which their decoders leave out: the exact product includes it.
double inference_factor(ggml_type t) {
    return t == GGML_TYPE_IQ2_KT ? kIq2KtGemmFactor : t == GGML_TYPE_IQ3_KT ? kIq3KtGemmFactor : 1.0;
}

bool isa_runs_here(ggml_cpu_isa isa) { return ggml_cpu_isa_runs_here(isa); }

std::vector<ggml_type> types_with_gemm() {
    std::vector<ggml_type> out;
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        if (ggml_type_is_valid(t) && ggml_cpu_gemm_at((ggml_type) t, GGML_CPU_ISA_SCALAR)) out.push_back((ggml_type) t);
    }
    return out;
}

// Weight-like data: mostly gaussian with a few larger values per row.
std::vector<float> weight_data(int64_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> v(n);
    for (auto & x : v) x = nd(rng);
    for (int64_t i = 0; i < n; i += 97) v[i] *= 6.0f;
    return v;
}

struct operand {
    std::vector<uint8_t> bytes;   // rows at `stride` bytes apart
    std::vector<float>   decoded; // rows of n values (empty if the type has no decoder)
    size_t               stride = 0;
};

// The trellis types (iq1_kt .. iq4_kt): every bit pattern of their blocks is a valid block (seeds
// and scale codes), after an f32 row scale. Their quantizer is a search over every seed per run
// of values, which makes test weights cost minutes under emulation (tests/isa/aarch64.sh), so
// their rows are random blocks instead: every seed bit and scale code reaches the kernels.
bool is_trellis(ggml_type t) {
    return t == GGML_TYPE_IQ1_KT || t == GGML_TYPE_IQ2_KT || t == GGML_TYPE_IQ3_KT || t == GGML_TYPE_IQ4_KT;
}

void random_trellis_rows(int64_t nrows, size_t row, uint32_t seed, uint8_t * out) {
    std::mt19937 rng(seed);
    for (int64_t r = 0; r < nrows; ++r) {
        uint8_t * p = out + r * row;
        for (size_t i = 0; i < row; ++i) p[i] = (uint8_t) (rng() >> 24);
        const float d = 1e-3f * (float) (1 + r % 5);
        std::memcpy(p, &d, sizeof(d));
    }
}

// The ik types' products (scalar and SIMD, as in the reference's dot products) multiply the int8
// levels of their common form (quants-ik.h). iq6_k's dequantizer instead evaluates the cubic that
// its int8 table rounds, so its values differ from the product's by up to half a level step
// (d * sc / 2): about 2e-3 of sum |w x| at K = 256, which is why the exact product is taken over
// the levels the product uses. That the two agree within the half step is checked here.
void use_product_levels(const ik_row_format & f, const uint8_t * packed, size_t row, int64_t nrows, int64_t n,
                        std::vector<float> & decoded) {
    ik_decoded db;
    for (int64_t r = 0; r < nrows; ++r) {
        const uint8_t * p = packed + r * row;
        const float row_d = ik_row_scale_value(f, p);
        for (int64_t ib = 0; ib < n / QK_K; ++ib) {
            f.decode(p + f.row_scale + ib * f.block_bytes, row_d, db);
            for (int i = 0; i < QK_K; ++i) {
                const float step = db.d * (float) db.sc[i / 16];
                const float level = step * (float) db.q[i];
                float & v = decoded[r * n + ib * QK_K + i];
                ASSERT_LE(std::fabs(v - level), 0.5f * std::fabs(step) * 1.0001f + 1e-30f) << "row " << r << " value " << ib * QK_K + i;
                v = level;
            }
        }
    }
}

// Quantize nrows rows to type t with a row stride larger than the row (extra bytes are garbage).
bool make_weights(ggml_type t, int64_t nrows, int64_t n, uint32_t seed, operand & w) {
    const ggml_type_traits * tt = ggml_get_type_traits(t);
    if (!tt->quantize && !tt->from_float_ref) return false;
    const size_t row = ggml_row_size(t, n);
    std::vector<uint8_t> packed(nrows * row);
    if (is_trellis(t)) {
        random_trellis_rows(nrows, row, seed, packed.data());
    } else {
        const std::vector<float> src = weight_data(nrows * n, seed);
        std::vector<float> imatrix(n);
        for (int64_t j = 0; j < n; ++j) imatrix[j] = 0.5f + (float) ((j * 37) % 11);
        const size_t written = ggml_quantize_chunk(t, src.data(), packed.data(), 0, nrows, n,
                                                   tt->requires_imatrix ? imatrix.data() : nullptr);
        if (written != nrows * row) return false;
    }
    w.stride = row + 40;
    w.bytes.assign(nrows * w.stride, 0xCD);
    for (int64_t r = 0; r < nrows; ++r) std::memcpy(w.bytes.data() + r * w.stride, packed.data() + r * row, row);
    if (tt->to_float) {
        w.decoded.resize(nrows * n);
        const int64_t group = tt->nrows_interleaved > 1 ? tt->nrows_interleaved : 1;
        for (int64_t r = 0; r < nrows; r += group) tt->to_float(packed.data() + r * row, w.decoded.data() + r * n, n * group);
    }
    if (const ik_row_format * f = ik_get_row_format(t)) use_product_levels(*f, packed.data(), row, nrows, n, w.decoded);
    return true;
}

// Encode nc activation rows with the given encoder, row stride larger than the row.
void make_activations(ggml_type vdt, ggml_from_float_t enc, int64_t nc, int64_t n, uint32_t seed, operand & x) {
    const std::vector<float> src = kiln_test::random_floats(nc * n, seed, -2.0f, 2.0f);
    const size_t row = ggml_row_size(vdt, n);
    x.stride = row + 24;
    x.bytes.assign(nc * x.stride, 0xEF);
    for (int64_t c = 0; c < nc; ++c) enc(src.data() + c * n, x.bytes.data() + c * x.stride, n);
    const ggml_to_float_t dec = ggml_get_type_traits(vdt)->to_float;
    x.decoded.clear();
    if (dec) {
        x.decoded.resize(nc * n);
        for (int64_t c = 0; c < nc; ++c) dec(x.bytes.data() + c * x.stride, x.decoded.data() + c * n, n);
    }
}

TEST(QuantSimd, GemmMatchesScalarOnOddShapes) {
    // 256 and 512: one and two super-blocks, where the relative rounding of a product is largest
    // and a kernel's whole-row loop runs once or twice; 768: a multiple of every block size (32
    // and 256); 800: 25 blocks of 32, which leaves a
    // partial slice of K where a kernel walks K in slices of 256 (the AVX2 batch kernels); 778
    // (types of 1-value blocks only): tails shorter than a vector, 389 column pairs for bf16_r16
    const int64_t lengths[] = { 256, 512, 768, 800, 778 };
    const int row_counts[] = { 1, 3, 13, 37 };
    // batch kernels tile columns by 4 (AVX2) or 8 (AVX512): every remainder of both appears;
    // token generation (below 6 columns: the small-batch kernels instantiate each count, 4 the
    // AVX2 one's whole tile) and several whole tiles (40) take different paths
    const int col_counts[] = { 1, 2, 3, 4, 5, 6, 7, 9, 12, 17, 40 };
    int compared = 0;
    std::string tested;
    for (const int64_t n : lengths) {
        for (ggml_type t : types_with_gemm()) {
            if (n % ggml_blck_size(t) != 0) continue;
            // Only types with a SIMD kernel this CPU runs: the rest would compare scalar with itself
            // (their scalar kernels are held to the reference by test-quants-golden), and making
            // their test weights costs time, which matters under emulation (tests/isa/aarch64.sh).
            bool has_simd = false;
            for (int isa = 1; isa < GGML_CPU_ISA_COUNT; ++isa) {
                has_simd |= ggml_cpu_gemm_at(t, (ggml_cpu_isa) isa) != nullptr && isa_runs_here((ggml_cpu_isa) isa);
            }
            if (!has_simd) continue;
            const ggml_cpu_type_traits * ct = ggml_cpu_get_type_traits(t);
            const int group = std::max(1, ggml_get_type_traits(t)->nrows_interleaved);
            // weights quantized once (the most rows asked for); each row count uses the first rows
            const int max_rows = (row_counts[std::size(row_counts) - 1] + group - 1) / group * group;
            operand all;
            if (!make_weights(t, max_rows, n, 1000 + t, all)) {
                std::printf("[ skip     ] %s: no quantizer to make test weights\n", ggml_type_name(t));
                continue;
            }
            // the plain kernels, then the batch ones where the type has them (cpu-traits.h)
            for (const bool batch : { false, true }) {
                const ggml_type vdt = batch ? ct->batch_vec_dot_type : ct->vec_dot_type;
                if (vdt == GGML_TYPE_COUNT) continue;
                const auto kernel_at = [&](ggml_cpu_isa isa) {
                    return batch ? ggml_cpu_batch_gemm_at(t, isa) : ggml_cpu_gemm_at(t, isa);
                };
                bool simd_here = false;   // else the scalar kernel would run for nothing (costly under emulation)
                for (int isa = 1; isa < GGML_CPU_ISA_COUNT; ++isa) {
                    simd_here |= kernel_at((ggml_cpu_isa) isa) != nullptr && isa_runs_here((ggml_cpu_isa) isa);
                }
                if (!simd_here) continue;
                const ggml_from_float_t enc = ggml_get_type_traits(vdt)->from_float_ref;
                ASSERT_TRUE(enc) << ggml_type_name(t) << ": activation type " << ggml_type_name(vdt) << " has no reference encoder";
                const std::string what = std::string(ggml_type_name(t)) + (batch ? " batch" : "");
                for (int nr0 : row_counts) {
                    const int nr = (nr0 + group - 1) / group * group;
                    operand w;
                    w.stride = all.stride;
                    w.bytes.assign(all.bytes.begin(), all.bytes.begin() + nr * all.stride);
                    if (!all.decoded.empty()) w.decoded.assign(all.decoded.begin(), all.decoded.begin() + nr * n);
                    for (int nc : col_counts) {
                        operand x;
                        make_activations(vdt, enc, nc, n, 77 + nc, x);
                        const size_t dst_stride = nr + 3;
                        std::vector<float> ref(nc * dst_stride, -7.0f);
                        kernel_at(GGML_CPU_ISA_SCALAR)(n, w.bytes.data(), w.stride, x.bytes.data(), x.stride, ref.data(),
                                                                 dst_stride, nr, nc);
                        // |error| bound per output: a small multiple of sum |w_k x_k|
                        std::vector<double> bound(nc * dst_stride, 0.0), exact(nc * dst_stride, 0.0);
                        const bool have_decoded = !w.decoded.empty() && !x.decoded.empty();
                        for (int c = 0; c < nc; ++c) {
                            for (int r = 0; r < nr; ++r) {
                                double b = 0, e = 0;
                                if (have_decoded) {
                                    for (int64_t k = 0; k < n; ++k) {
                                        const double p = inference_factor(t) * w.decoded[r * n + k] * x.decoded[c * n + k];
                                        e += p;
                                        b += std::fabs(p);
                                    }
                                } else {
                                    b = std::fabs(ref[c * dst_stride + r]) + 1.0;
                                }
                                bound[c * dst_stride + r] = b;
                                exact[c * dst_stride + r] = e;
                                ASSERT_TRUE(std::isfinite(ref[c * dst_stride + r])) << ggml_type_name(t);
                                if (have_decoded) {
                                    // scalar = exact product of the decoded operands up to float rounding (and the
                                    // fp16 rounding of q8_1's precomputed sums)
                                    ASSERT_NEAR(ref[c * dst_stride + r], e, 2e-3 * b + 1e-6)
                                        << what << " scalar vs double: row " << r << " col " << c;
                                }
                            }
                            for (size_t r = nr; r < dst_stride; ++r) ASSERT_EQ(ref[c * dst_stride + r], -7.0f) << "wrote past nr";
                        }
                        for (int isa = 1; isa < GGML_CPU_ISA_COUNT; ++isa) {
                            const ggml_gemm_t fn = kernel_at((ggml_cpu_isa) isa);
                            if (!fn || !isa_runs_here((ggml_cpu_isa) isa)) continue;
                            std::vector<float> got(nc * dst_stride, -7.0f);
                            fn(n, w.bytes.data(), w.stride, x.bytes.data(), x.stride, got.data(), dst_stride, nr, nc);
                            for (int c = 0; c < nc; ++c) {
                                for (int r = 0; r < nr; ++r) {
                                    const size_t i = c * dst_stride + r;
                                    ASSERT_NEAR(got[i], ref[i], 1e-5 * bound[i] + 1e-6)
                                        << what << " " << ggml_cpu_isa_name((ggml_cpu_isa) isa) << " nr=" << nr
                                        << " nc=" << nc << " row " << r << " col " << c << " (exact product of the decoded operands " << exact[i] << ")";
                                }
                                for (size_t r = nr; r < dst_stride; ++r) ASSERT_EQ(got[c * dst_stride + r], -7.0f) << "wrote past nr";
                            }
                            ++compared;
                            if (n == lengths[0] && nr0 == row_counts[0] && nc == col_counts[0]) {
                                tested += " " + what + "/" + ggml_cpu_isa_name((ggml_cpu_isa) isa);
                            }
                        }
                    }
                }
            }
        }
    }
    std::printf("[ compared ]%s\n", tested.c_str());
    if (compared == 0) GTEST_SKIP() << "no type has both a scalar and a SIMD gemm this CPU runs";
}

// Activation rows that exercise rounding ties, zero blocks and sign choices of the encoders.
std::vector<float> encoder_data(int64_t n, uint32_t seed) {
    std::vector<float> v = kiln_test::random_floats(n, seed, -3.0f, 3.0f);
    // block 0 (32 values): max 127 -> scale 1, so x.5 values are exact rounding ties
    for (int j = 0; j < 32; ++j) v[j] = (j % 2 ? -1.0f : 1.0f) * (0.5f + (float) (j * 3 % 120));
    v[5] = 127.0f;
    // block 1: all zero
    for (int j = 32; j < 64; ++j) v[j] = 0.0f;
    // first 256-block for q8_K: its largest magnitude is -127 (scale 1), ties again; and a
    // second element of the same magnitude with the other sign comes later (the first wins)
    v[70] = -127.0f;
    v[200] = 127.0f;
    // a 256-block that is all zero (the third one)
    for (int j = 512; j < 768; ++j) v[j] = 0.0f;
    // tiny values (subnormal scales)
    for (int j = 768; j < 800; ++j) v[j] = 1e-39f * (float) (j - 780);
    return v;
}

TEST(QuantSimd, ActivationEncodersMatchReference) {
    const int64_t n = 1024;
    int compared = 0;
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        if (!ggml_type_is_valid(t)) continue;
        const ggml_type type = (ggml_type) t;
        const ggml_from_float_t ref_fn = ggml_get_type_traits(type)->from_float_ref;
        for (int isa = 1; isa < GGML_CPU_ISA_COUNT; ++isa) {
            const ggml_from_float_t fn = ggml_cpu_from_float_at(type, (ggml_cpu_isa) isa);
            if (!fn || !isa_runs_here((ggml_cpu_isa) isa)) continue;
            ASSERT_TRUE(ref_fn) << ggml_type_name(type) << ": SIMD encoder without a reference";
            for (uint32_t seed = 1; seed <= 4; ++seed) {
                std::vector<float> x = encoder_data(n, seed);
                const size_t row = ggml_row_size(type, n);
                std::vector<uint8_t> a(row + 16, 0x11), b(row + 16, 0x11);
                ref_fn(x.data(), a.data(), n);
                fn(x.data(), b.data(), n);
                size_t first = row;
                for (size_t i = 0; i < row; ++i) {
                    if (a[i] != b[i]) { first = i; break; }
                }
                EXPECT_EQ(first, row) << ggml_type_name(type) << " " << ggml_cpu_isa_name((ggml_cpu_isa) isa)
                                      << ": first differing byte " << first << " of " << row << " (seed " << seed << ")";
                for (size_t i = row; i < b.size(); ++i) ASSERT_EQ(b[i], 0x11) << "encoder wrote past its row";
            }
            ++compared;
            std::printf("[ encoder  ] %s %s matches the reference\n", ggml_type_name(type), ggml_cpu_isa_name((ggml_cpu_isa) isa));
        }
    }
    if (compared == 0) GTEST_SKIP() << "no SIMD encoder this CPU runs";
}

// The reference encoders of the activation types decode back to within half a step.
TEST(QuantSimd, ActivationReferenceEncodersRoundTrip) {
    const int64_t n = 1024;
    const std::vector<float> x = encoder_data(n, 9);
    for (ggml_type t : { GGML_TYPE_Q8_0, GGML_TYPE_Q8_1, GGML_TYPE_Q8_K }) {
        const ggml_type_traits * tt = ggml_get_type_traits(t);
        if (!tt->from_float_ref || !tt->to_float) continue;
        std::vector<uint8_t> q(ggml_row_size(t, n));
        std::vector<float> y(n);
        tt->from_float_ref(x.data(), q.data(), n);
        tt->to_float(q.data(), y.data(), n);
        const int64_t blk = tt->blck_size;
        for (int64_t b = 0; b < n / blk; ++b) {
            float amax = 0;
            for (int64_t j = 0; j < blk; ++j) amax = std::max(amax, std::fabs(x[b * blk + j]));
            const double step = amax / 127.0;
            for (int64_t j = 0; j < blk; ++j) {
                // half a step, plus the fp16 rounding of the scale (relative 2^-11) over 127 steps
                ASSERT_NEAR(y[b * blk + j], x[b * blk + j], 0.5 * step * 1.0001 + amax * 1e-3 + 1e-30)
                    << ggml_type_name(t) << " block " << b << " elem " << j;
            }
        }
        if (t == GGML_TYPE_Q8_0) {
            // ties round away from zero: 0.5 -> 1, -2.5 -> -3 (block 0 has scale exactly 1)
            EXPECT_EQ(y[0], 1.0f);
            EXPECT_EQ(y[1], -4.0f);   // -(0.5 + 3) = -3.5 -> -4
        }
    }
}

// -sm graph and the thread chunks cut a product by rows, and token generation calls a kernel
// with whatever few columns a step has: a row's product with a column must not depend on that
// cut (the split's logits are compared with the host's). For the plain types' small-batch
// kernels (fewer columns than any panel takes), at every level this CPU runs: 13 rows x 5
// columns in one call give bit for bit what rows [0,5), [5,6), [6,13) one column at a time give.
TEST(QuantSimd, SmallBatchProductDoesNotDependOnTheCut) {
    const int64_t n = 768;
    const int nr = 13, nc = 5;
    const int cuts[] = { 0, 5, 6, nr };
    const ggml_type types[] = { GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q8_0,
                                GGML_TYPE_IQ4_NL, GGML_TYPE_IQ4_XS, GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K,
                                GGML_TYPE_Q5_K, GGML_TYPE_Q6_K };
    int compared = 0;
    for (ggml_type t : types) {
        operand w, x;
        ASSERT_TRUE(make_weights(t, nr, n, 300 + t, w)) << ggml_type_name(t);
        const ggml_type vdt = ggml_cpu_get_type_traits(t)->vec_dot_type;
        make_activations(vdt, ggml_get_type_traits(vdt)->from_float_ref, nc, n, 400 + t, x);
        for (int isa = 0; isa < GGML_CPU_ISA_COUNT; ++isa) {
            const ggml_gemm_t fn = ggml_cpu_gemm_at(t, (ggml_cpu_isa) isa);
            if (!fn || !isa_runs_here((ggml_cpu_isa) isa)) continue;
            std::vector<float> whole(nc * nr, -7.0f), cut(nc * nr, -9.0f);
            fn(n, w.bytes.data(), w.stride, x.bytes.data(), x.stride, whole.data(), nr, nr, nc);
            for (int p = 0; p + 1 < (int) std::size(cuts); ++p) {
                for (int c = 0; c < nc; ++c) {
                    fn(n, w.bytes.data() + cuts[p] * w.stride, w.stride, x.bytes.data() + c * x.stride, x.stride,
                       cut.data() + c * nr + cuts[p], nr, cuts[p + 1] - cuts[p], 1);
                }
            }
            // x86: bit for bit. Arm: the i8mm kernels take column pairs through SMMLA and a lone
            // column through SDOT, whose float accumulation order differs (the integer block sums
            // are exact), so there the cut may move the last bits only.
#if defined(__x86_64__)
            const float rel = 0.0f;
#else
            const float rel = 1e-4f;   // plus 2e-5 absolute: q4_1's minimum term cancels most of a sum
#endif
            for (int i = 0; i < nc * nr; ++i) {
                if (rel == 0.0f) {
                    ASSERT_EQ(std::memcmp(&whole[i], &cut[i], 4), 0)
                        << ggml_type_name(t) << " " << ggml_cpu_isa_name((ggml_cpu_isa) isa) << ": row " << i % nr
                        << " column " << i / nr << ": " << whole[i] << " in one call, " << cut[i] << " cut";
                } else {
                    ASSERT_NEAR(whole[i], cut[i], rel * std::fabs(whole[i]) + 2e-5f)
                        << ggml_type_name(t) << " " << ggml_cpu_isa_name((ggml_cpu_isa) isa) << ": row " << i % nr
                        << " column " << i / nr;
                }
            }
            ++compared;
        }
    }
    EXPECT_GT(compared, 0);
}

// The batch kernels cut K into slabs where a call's packed rows would not stay in L2 (AVX2:
// more than 256 KB of records), and the signed 32-value formats keep int16 levels there: a large
// call must give bit for bit what the same rows give cut into small calls (the integer block sums
// are exact and the float steps the same, in the same order), and both stay near the scalar
// kernel. K = 4352 (17 x 256) leaves a shorter last slab: 72 rows of q8_0 are 705 KB of int16
// records (3 slabs), of q4_K 392 KB and of q6_K 470 KB (2); 8 rows fit in one.
TEST(QuantSimd, BatchProductDoesNotDependOnTheRowsPerCall) {
    const int64_t n = 4352;
    const int nr = 72, nc = 9, cut = 8;
    int compared = 0;
    for (ggml_type t : { GGML_TYPE_Q8_0, GGML_TYPE_IQ4_NL, GGML_TYPE_MXFP4, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K }) {
        operand w;
        ASSERT_TRUE(make_weights(t, nr, n, 500 + t, w)) << ggml_type_name(t);
        const ggml_cpu_type_traits * ct = ggml_cpu_get_type_traits(t);
        for (const bool batch : { false, true }) {
            const ggml_type vdt = batch ? ct->batch_vec_dot_type : ct->vec_dot_type;
            if (vdt == GGML_TYPE_COUNT) continue;
            const auto kernel_at = [&](int isa) {
                return batch ? ggml_cpu_batch_gemm_at(t, (ggml_cpu_isa) isa) : ggml_cpu_gemm_at(t, (ggml_cpu_isa) isa);
            };
            const std::string what = std::string(ggml_type_name(t)) + (batch ? " batch" : "");
            operand x;
            make_activations(vdt, ggml_get_type_traits(vdt)->from_float_ref, nc, n, 600 + t, x);
            std::vector<float> ref(nc * nr);
            kernel_at(GGML_CPU_ISA_SCALAR)(n, w.bytes.data(), w.stride, x.bytes.data(), x.stride, ref.data(), nr, nr, nc);
            for (int isa = 1; isa < GGML_CPU_ISA_COUNT; ++isa) {
                const ggml_gemm_t fn = kernel_at(isa);
                if (!fn || !isa_runs_here((ggml_cpu_isa) isa)) continue;
                std::vector<float> whole(nc * nr, -7.0f), pieces(nc * nr, -9.0f);
                fn(n, w.bytes.data(), w.stride, x.bytes.data(), x.stride, whole.data(), nr, nr, nc);
                for (int r0 = 0; r0 < nr; r0 += cut) {
                    fn(n, w.bytes.data() + r0 * w.stride, w.stride, x.bytes.data(), x.stride, pieces.data() + r0, nr, cut, nc);
                }
                for (int i = 0; i < nc * nr; ++i) {
                    ASSERT_EQ(std::memcmp(&whole[i], &pieces[i], 4), 0)
                        << what << " " << ggml_cpu_isa_name((ggml_cpu_isa) isa) << ": row " << i % nr << " column "
                        << i / nr << ": " << whole[i] << " in one call, " << pieces[i] << " in calls of " << cut << " rows";
                    ASSERT_NEAR(whole[i], ref[i], 1e-4f * std::fabs(ref[i]) + 1e-3f)
                        << what << " " << ggml_cpu_isa_name((ggml_cpu_isa) isa) << ": row " << i % nr << " column " << i / nr;
                }
                ++compared;
            }
        }
    }
    if (compared == 0) GTEST_SKIP() << "no SIMD kernel of these types runs on this CPU";
}

#if defined(__x86_64__)
// The AVX2 and AVX512 kernels convert fp16 block scales with F16C (vcvtph2ps) where the scalar
// kernels use the library's routine; the products match bit for bit only if the two agree on
// every half, subnormals included (NaN payloads aside: a NaN scale gives NaN either way).
__attribute__((target("f16c"))) void halves_by_f16c(float * one, float * eight) {
    for (uint32_t h = 0; h < 65536; ++h) one[h] = _cvtsh_ss((unsigned short) h);
    for (uint32_t h = 0; h < 65536; h += 8) {
        alignas(16) uint16_t in[8];
        for (int i = 0; i < 8; ++i) in[i] = (uint16_t) (h + i);
        _mm256_storeu_ps(eight + h, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) in)));
    }
}

TEST(QuantSimd, F16cHalvesMatchTheLibrary) {
    // the AVX2 level (ggml_cpu_has_avx2: AVX2, FMA, F16C, BMI2 from cpuid) is where F16C is used
    if (!ggml_cpu_has_avx2()) GTEST_SKIP() << "this CPU lacks the AVX2 level (F16C among it): no kernel converts with F16C here";
    std::vector<float> one(65536), eight(65536);
    halves_by_f16c(one.data(), eight.data());
    int subnormals = 0;
    for (uint32_t h = 0; h < 65536; ++h) {
        const float want = ggml_fp16_to_fp32((ggml_fp16_t) h);
        if (std::isnan(want)) {
            EXPECT_TRUE(std::isnan(one[h]) && std::isnan(eight[h])) << h;
            continue;
        }
        EXPECT_EQ(std::memcmp(&want, &one[h], 4), 0) << "half 0x" << std::hex << h << ": " << want << " vs " << one[h];
        EXPECT_EQ(std::memcmp(&want, &eight[h], 4), 0) << "half 0x" << std::hex << h << ": " << want << " vs " << eight[h];
        subnormals += (h & 0x7c00) == 0 && (h & 0x3ff) != 0;
    }
    EXPECT_EQ(subnormals, 2 * 1023);
}
#endif

} // namespace

#if defined(__x86_64__)
// The small-batch k-quant kernels (token generation) round no worse than the scalar one's order
// does, on one-signed activations (what follows a SiLU gate or a norm with a large mean), where
// the minimum term of q2_K/q4_K/q5_K cancels most of the level sum. The exact product is taken in
// 64-bit integers from the decoded levels, scales and activation sums, so it has no rounding of
// its own. Why it matters: -sm graph sums K-cut partial products in another order than the host's
// one pass, and the further each order is from the exact sum, the more often a q8 activation
// downstream rounds the other way (tests/test-device-split.cpp). A kernel that multiplied whole
// blocks by the rounded d * a.d and kept the minimum term in 8 of the 16 accumulator lanes (the
// level sum filling all 16, so the two cancelled only in the final horizontal sum) measured
// 2.0-2.9e-7 of sum |w x| here; the kernels that scale lane by lane measure at most 1.0e-7
// (scalar 5e-8). x86 only: the Arm kernels have not been measured against this bound.
TEST(QuantSimd, SmallBatchKQuantsRoundLikeTheScalarOrder) {
    const int64_t n = 8192;   // 32 blocks: the accumulators' own rounding grows with the row
    const int nr = 256;
    const struct { ggml_type t; void (*decode)(const void *, k_block_decoded &); } types[] = {
        { GGML_TYPE_Q2_K, k_decode_q2_K }, { GGML_TYPE_Q3_K, k_decode_q3_K }, { GGML_TYPE_Q4_K, k_decode_q4_K },
        { GGML_TYPE_Q5_K, k_decode_q5_K }, { GGML_TYPE_Q6_K, k_decode_q6_K } };
    int compared = 0;
    for (const auto & e : types) {
        operand w;
        ASSERT_TRUE(make_weights(e.t, nr, n, 900 + e.t, w));
        ASSERT_EQ(ggml_cpu_get_type_traits(e.t)->vec_dot_type, GGML_TYPE_Q8_K);
        const std::vector<float> src = kiln_test::random_floats(n, 5, -1.0f, 3.0f);
        std::vector<block_q8_K> x(n / QK_K);
        ggml_get_type_traits(GGML_TYPE_Q8_K)->from_float_ref(src.data(), x.data(), n);
        std::vector<float> xf(n);
        ggml_get_type_traits(GGML_TYPE_Q8_K)->to_float(x.data(), xf.data(), n);
        std::vector<double> exact(nr), scale(nr);
        const size_t block_bytes = ggml_row_size(e.t, QK_K);
        k_block_decoded blk;
        for (int r = 0; r < nr; ++r) {
            for (int64_t k = 0; k < n; ++k) scale[r] += std::fabs((double) w.decoded[r * n + k] * xf[k]);
            for (int64_t b = 0; b < n / QK_K; ++b) {
                e.decode(w.bytes.data() + r * w.stride + b * block_bytes, blk);
                int64_t dot = 0, mins = 0;
                for (int g = 0; g < 16; ++g) {
                    int64_t dg = 0;
                    for (int l = 0; l < 16; ++l) dg += blk.u[16 * g + l] * x[b].qs[16 * g + l];
                    dot += blk.s[g] * dg;
                    mins += blk.mi[g] * x[b].bsums[g];
                }
                exact[r] += (double) x[b].d * ((double) blk.d * (double) dot - (double) blk.dm * (double) mins);
            }
        }
        for (int isa = 0; isa < GGML_CPU_ISA_COUNT; ++isa) {
            const ggml_gemm_t fn = ggml_cpu_gemm_at(e.t, (ggml_cpu_isa) isa);
            if (!fn || !isa_runs_here((ggml_cpu_isa) isa)) continue;
            std::vector<float> got(nr);
            fn(n, w.bytes.data(), w.stride, x.data(), sizeof(block_q8_K) * (n / QK_K), got.data(), nr, nr, 1);
            double worst = 0;
            for (int r = 0; r < nr; ++r) worst = std::max(worst, std::fabs(got[r] - exact[r]) / scale[r]);
            EXPECT_LE(worst, 1.5e-7) << ggml_type_name(e.t) << " " << ggml_cpu_isa_name((ggml_cpu_isa) isa)
                                     << ": worst error over sum |w x|";
            ++compared;
        }
    }
    EXPECT_GT(compared, 0);
}
#endif
