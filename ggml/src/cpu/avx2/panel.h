// Batched quantized products on AVX2 ("panel" gemm, the AVX2 counterpart of avx512/panel.h),
// shared by the legacy, k-quant and iq4_xs kernels when a gemm call covers enough activation
// columns to amortise a repack (prompt processing).
//
// Why: AVX2 has no VNNI, so an int8 product is vpmaddubsw (u8 x s8 -> pairs summed to int16)
// then vpmaddwd (pairs of int16 -> int32). With 8 weight rows in the 8 int32 lanes and 4
// activation bytes broadcast to every lane, both instructions do only useful work, the weight
// vector is reused by every column of the tile and there is no horizontal reduction; the block
// scales of 8 rows arrive as one float vector.
//
// So each call first repacks its weight rows, 8 at a time, into that layout (a thread-local
// buffer that stays in L2 while every column passes over it):
//   per sub-block sb (16 or 32 values with one scale): kSub/4 vectors [row 0..7][4 levels],
//   then 8 float scales, then 8 float biases, where a weight value is  scale * u + bias.
// Levels are unsigned (u <= kMaxLevel; bias folds offsets and k-quant minimums) or, for formats
// whose values span the whole byte range (q8_0, the non-linear iq4 tables), signed: those are
// multiplied as int16 by vpmaddwd (sub_dots_wide, with records and activations widened), or
// in 16-value sub-blocks as |w| and the activation byte with w's sign (vpsignb).
// For small unsigned levels several vpmaddubsw results are summed in int16 before the one
// vpmaddwd (as many as cannot overflow: 2 * 128 * kMaxLevel per step).
// Activations are repacked per tile of up to 4 columns (panel-common.h), and
//   dot(row, col) = sum_sb  scale * d_x * (sum u q_x)  +  bias * (d_x sum q_x).
#pragma once

#include "avx2/panel-common.h"

#include <algorithm>

namespace {
namespace kiln_panel {

constexpr int kRows = 8;   // weight rows per vector (int32 lanes)
constexpr int kCols = 4;   // activation columns per register tile
// Below this many columns a call uses the type's direct kernel: the repack would not pay off.
constexpr int kMinCols = 6;
// Activations packed spread (see sub_dots). The spread tile is 8x the activation bytes, so the
// rows pass over it a slice of kKBlock values at a time (a multiple of every q8_K super-block),
// which stays in L1 (about 8 KB) while every row group reads it.
constexpr bool kSpread = true;
constexpr int64_t kKBlock = 256;
// The packed weight records a call keeps at once (panel-drive.inc cuts K into slabs beyond it):
// a quarter of Zen 3's 512 KB L2, the smallest L2 this path meets (Zen 4 has 1 MB), so that the
// records, the activation tile and dst stay in L2 while every column tile passes over them.
// Without it 128 rows at K = 3072 packed 480 KB (q4_K) to 590 KB (q6_K) of records.
constexpr size_t kSlabBytes = 256 * 1024;
// Levels may stay signed (kMaxLevel == 0: int16 products, sub_dots_wide, or the sign trick).
constexpr bool kSignedLevels = true;
// Activations are packed as they are and offsets stay in the biases (avx512/panel.h folds them
// for some decoders; here signed levels need no offset).
template <typename D> constexpr bool unsigned_x() { return false; }
// Signed levels are multiplied as int16 with vpmaddwd (see sub_dots_wide), so their activations
// are packed widened to int16. Not those of 16-value sub-blocks (the r4 layouts of iq2_k, iq3_k,
// iq5_k, iq2_xs, iq2_s): there the float step every 4 products costs more than the int16
// products save (iq5_k_r4 was 4% slower), so they keep the sign trick of sub_dots.
template <typename D> constexpr bool wide_x() { return D::kMaxLevel == 0 && D::kSub >= 32; }
template <int S> void fold_level_offsets(uint8_t *, int64_t, int) {}

template <int kSub> constexpr size_t w_record = (kSub / 4 + 2) * 32;

// Decoders whose levels are multiplied as int16 (wide_x, see sub_dots_wide) get records of int16:
// per 4-value step 64 bytes (rows 0, 2, 4, 6 then 1, 3, 5, 7, 4 values each), then the scales and
// biases. kFolded decoders (whole super-blocks, kSub == kChunk) give integer sub-block scales
// (decode_folded: one per 16 values, |scale| <= 127, and a float scale for the chunk) that
// the packer multiplies into the levels (|level * scale| <= 128 * 127 fits int16), so that a
// super-block's products stay in int32 and convert to float once (a sub-block scale costs a
// conversion and a multiply-add per column, as many as 4 steps of products where kSub is 16).
template <typename D> constexpr bool folded() {
    if constexpr (requires { D::kFolded; }) return D::kFolded;
    else return false;
}
// Folded levels need int16 records; the others stay bytes (rows in the wide order where
// wide_x), widened as they are read, unless a caller asks for int16 records (int16_records<D>):
// those save the widening (q8_0 at K = 1024: 116 -> 122 GFLOP/s) but double the L2 footprint of
// a call's rows, which the K slabs (kSlabBytes) bound.
template <typename D> struct int16_records : D { static constexpr bool kInt16Records = true; };
template <typename D> constexpr bool int16_records_of() {
    if constexpr (requires { D::kInt16Records; }) return D::kInt16Records;
    else return false;
}
template <typename D> constexpr int step_bytes() { return folded<D>() || int16_records_of<D>() ? 64 : 32; }

// kScales16 decoders (q6_K against q8_0 activations): unsigned levels with an int8 scale per 16
// values and a fixed level offset (kLevelOffset), in sub-blocks of 32 (one q8_0 block, the
// activations' scale step). Their scales stay integers inside the product: vpmaddwd multiplies
// the int16 pair sums of vpmaddubsw by the scale of their 16 values instead of by 1, and the
// offset comes from the activations' sums per 16 (act_q8_0_half_sums), one more vpmaddwd; a
// sub-block is then one int32 sum per row, converted to float once. Per 16 values a float
// scale and bias would cost a conversion and two multiply-adds per column, as much again as the
// 16 values' integer products (K = M = 4096, 512 columns, one thread, Zen 4 at the AVX2 level:
// q6_K 138 CPU ms with float scales per 16, 104 ms so, q4_K 94 ms).
// The decoder gives decode_scaled(row, i, v, scales, d): chunk i (256 values) as 8 vectors of
// levels, its 16 scales as int16 and the float scale d of the chunk.
// The record's tail (store_scales16_tail, panel-common.h): 3 vectors of int16 pairs per row
// lane (the first 16 values' scale twice, the second's twice, offset * both scales), then the
// rows' d. The interleaved q6_k_r4 packs the same records (panel-r8.h), so its products are q6_K's.
template <typename D> constexpr size_t w_tail_bytes = scales16<D>() ? 128 : 64;
template <typename D> constexpr size_t w_record_of = (D::kSub / 4) * step_bytes<D>() + w_tail_bytes<D>;
// Where a record's float scales are (its biases follow them).
template <typename D> constexpr size_t w_floats_at = (D::kSub / 4) * step_bytes<D>() + (scales16<D>() ? 96 : 0);

// 8x8 transpose of 32-bit elements: out[j] = element j of v[0..7].
inline void transpose8(const __m256i * v, __m256i * out) {
    __m256i t[8], u[8];
    for (int i = 0; i < 4; ++i) {
        t[2 * i] = _mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
    }
    for (int h = 0; h < 2; ++h) {
        const __m256i * th = t + 4 * h;
        u[4 * h + 0] = _mm256_unpacklo_epi64(th[0], th[2]);
        u[4 * h + 1] = _mm256_unpackhi_epi64(th[0], th[2]);
        u[4 * h + 2] = _mm256_unpacklo_epi64(th[1], th[3]);
        u[4 * h + 3] = _mm256_unpackhi_epi64(th[1], th[3]);
    }
    for (int j = 0; j < 4; ++j) {
        out[j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x20);
        out[j + 4] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x31);
    }
}

// Decoder concept D:
//   kSub       values per scaled sub-block (16 or 32); kChunk values per decode call (multiple of 32)
//   kMaxLevel  the largest unsigned level, or 0 if the levels are signed bytes
//   kBias      whether any sub-block has a non-zero bias
//   decode(row, i, v, scale, bias): chunk i of a row -> kChunk / 32 vectors of levels (natural
//   order) and kChunk / kSub scales and biases.
// rows_avail: rows readable from w (this group's and the next ones'), for prefetching.
// Chunks [i0, i1) of the rows (a K slab, panel-drive.inc), their records from out on.
template <typename D>
void pack_weights(const uint8_t * w, size_t w_stride, int rows, int rows_avail, int64_t n, int64_t i0, int64_t i1,
                  uint8_t * out) {
    constexpr int S = D::kSub, V = D::kChunk / 32, NS = D::kChunk / S, kStep = step_bytes<D>();
    constexpr size_t rec = w_record_of<D>;
    constexpr int NG = folded<D>() ? D::kChunk / 16 : 1;   // integer scales per row and chunk
    const int64_t nchunks = n / D::kChunk;
    // kScales16: pairs of steps summed in int16 (sub_dots_scales16) need levels <= 63
    static_assert(!scales16<D>() || (S == 32 && D::kChunk == 256 && D::kMaxLevel > 0 && D::kMaxLevel <= 63),
                  "kScales16: 16 scales per chunk, records of 32, levels 0..63");
    for (int64_t i = i0; i < i1; ++i) {
        prefetch_row_slice(w, w_stride, kRows, std::min(2 * kRows, rows_avail), i, nchunks);
        __m256i v[V][kRows];
        float sc[kRows][NS], bi[kRows][NS];
        int16_t isc[kRows][NG];
        __m256i sc16[kRows];   // scales16: a row's 16 scales, lane j the pair of sub-block j
        for (int r = 0; r < kRows; ++r) {
            __m256i rv[V];
            if (r < rows) {
                if constexpr (scales16<D>()) {
                    D::decode_scaled(w + r * w_stride, i, rv, sc16[r], sc[r][0]);
                } else if constexpr (folded<D>()) {
                    D::decode_folded(w + r * w_stride, i, rv, isc[r], sc[r][0]);
                    bi[r][0] = 0.0f;
                } else {
                    D::decode(w + r * w_stride, i, rv, sc[r], bi[r]);
                }
            } else {
                // lanes of rows past `rows` are never stored to dst
                for (int k = 0; k < V; ++k) rv[k] = _mm256_setzero_si256();
                for (int j = 0; j < NS; ++j) sc[r][j] = bi[r][j] = 0.0f;
                for (int g = 0; g < NG; ++g) isc[r][g] = 0;
                sc16[r] = _mm256_setzero_si256();
            }
            for (int k = 0; k < V; ++k) v[k][r] = rv[k];
        }
        // wide_x: rows in the order 0, 2, 4, 6, 1, 3, 5, 7 (the halves sub_dots_wide reads);
        // folded: the integer scale of each lane's 16 values, in the same order
        const __m256i order = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
        alignas(32) int16_t gsc[NG][2][16];
        if constexpr (folded<D>()) {
            for (int g = 0; g < NG; ++g) {
                for (int h = 0; h < 2; ++h) {
                    for (int l = 0; l < 16; ++l) gsc[g][h][l] = isc[2 * (l / 4) + h][g];
                }
            }
        }
        for (int k = 0; k < V; ++k) {
            __m256i t[8];
            transpose8(v[k], t);
            // t[j] holds values 32 (i V + k) + 4j .. +3 of the 8 rows
            // unsigned: the divisions are shifts without sign fix-ups (those were about a sixth of a
            // q4_K pack, by its perf share in kiln-bench-ops --only moe)
            const size_t first = (size_t) (i - i0) * D::kChunk + 32 * k;
            for (int j = 0; j < 8; ++j) {
                const size_t idx = first + 4 * j;
                uint8_t * o = out + (idx / S) * rec + ((idx % S) / 4) * kStep;
                if constexpr (wide_x<D>() && kStep == 32) {
                    _mm256_store_si256((__m256i *) o, _mm256_permutevar8x32_epi32(t[j], order));
                } else if constexpr (wide_x<D>()) {
                    const __m256i p = _mm256_permutevar8x32_epi32(t[j], order);
                    __m256i lo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(p));
                    __m256i hi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(p, 1));
                    if constexpr (folded<D>()) {
                        const int g = (32 * k + 4 * j) / 16;
                        lo = _mm256_mullo_epi16(lo, _mm256_load_si256((const __m256i *) gsc[g][0]));
                        hi = _mm256_mullo_epi16(hi, _mm256_load_si256((const __m256i *) gsc[g][1]));
                    }
                    _mm256_store_si256((__m256i *) o, lo);
                    _mm256_store_si256((__m256i *) (o + 32), hi);
                } else {
                    _mm256_store_si256((__m256i *) o, t[j]);
                }
            }
        }
        if constexpr (scales16<D>()) {
            // the 8 rows' scale pairs of sub-block j in the lanes of t[j]
            __m256i t[8];
            transpose8(sc16, t);
            const __m256 d = _mm256_setr_ps(sc[0][0], sc[1][0], sc[2][0], sc[3][0], sc[4][0], sc[5][0], sc[6][0], sc[7][0]);
            for (int j = 0; j < NS; ++j) {
                store_scales16_tail(out + ((i - i0) * NS + j) * rec + (S / 4) * kStep, t[j], d, D::kLevelOffset);
            }
            continue;
        }
        if constexpr (NS % 8 == 0) {
            // 8 sub-blocks at a time: the rows' coefficients transposed in registers (scalar
            // stores of each row's, 128 per chunk of 8 rows, were a fifth of a q4_K pack)
            for (int j0 = 0; j0 < NS; j0 += 8) {
                __m256i vs[kRows], vb[kRows], ts[8], tb[8];
                for (int r = 0; r < kRows; ++r) {
                    vs[r] = _mm256_castps_si256(_mm256_loadu_ps(sc[r] + j0));
                    vb[r] = _mm256_castps_si256(_mm256_loadu_ps(bi[r] + j0));
                }
                transpose8(vs, ts);
                transpose8(vb, tb);
                for (int j = 0; j < 8; ++j) {
                    uint8_t * f = out + ((i - i0) * NS + j0 + j) * rec + (S / 4) * kStep;
                    _mm256_store_si256((__m256i *) f, ts[j]);
                    _mm256_store_si256((__m256i *) (f + 32), tb[j]);
                }
            }
        } else {
            for (int j = 0; j < NS; ++j) {
                float * f = (float *) (out + ((i - i0) * NS + j) * rec + (S / 4) * kStep);
                for (int r = 0; r < kRows; ++r) {
                    f[r] = sc[r][j];
                    f[kRows + r] = bi[r][j];
                }
            }
        }
    }
}

template <typename D>
void pack_weights(const uint8_t * w, size_t w_stride, int rows, int rows_avail, int64_t n, uint8_t * out) {
    pack_weights<D>(w, w_stride, rows, rows_avail, n, 0, n / D::kChunk, out);
}

// An empty asm that "changes" v: the compiler must keep sums in the order written. Without it
// GCC rebalances the int16 sums of a sub-block into a tree over all its vpmaddubsw results at
// once, which needs far more than 16 registers and spills most of them.
#define KILN_PANEL_KEEP(v) __asm__("" : "+x"(v))

// The dot products of one sub-block: 8 rows x C columns in int32. The activations are packed
// spread (panel-common.h's x_record<S, C, true>): every 4-byte group already broadcast to a
// whole vector, so that the product reads it as vpmaddubsw's memory operand with no broadcast
// instruction per product (on Zen that costs a vector ALU slot, as many as the product itself).
// Signed levels (kMaxLevel 0, the 16-value sub-blocks that are not wide_x): vpmaddubsw takes |w|
// and the activation byte with w's sign (vpsignb), once per column.
template <int S, int C, int kMaxLevel>
inline void sub_dots(const uint8_t * W, const uint8_t * X, __m256i * s) {
    constexpr int KV = S / 4;
    const __m256i ones = _mm256_set1_epi16(1);
    auto xv = [X](int k, int c) { return _mm256_load_si256((const __m256i *) (X + (k * C + c) * 32)); };
    if constexpr (kMaxLevel == 0) {
        for (int c = 0; c < C; ++c) s[c] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int k = 0; k < KV; ++k) {
            const __m256i w = _mm256_load_si256((const __m256i *) (W + 32 * k));
            const __m256i aw = _mm256_abs_epi8(w);
#pragma GCC unroll 4
            for (int c = 0; c < C; ++c) {
                const __m256i xb = _mm256_sign_epi8(xv(k, c), w);
                s[c] = _mm256_add_epi32(s[c], _mm256_madd_epi16(_mm256_maddubs_epi16(aw, xb), ones));
                KILN_PANEL_KEEP(s[c]);
            }
        }
    } else {
        // steps whose int16 pair sums can be added without overflow
        constexpr int kFit = 32767 / (2 * 128 * kMaxLevel);
        constexpr int G = kFit >= KV ? KV : kFit >= 4 ? 4 : kFit >= 2 ? 2 : 1;
        static_assert(G >= 1 && KV % G == 0, "int16 groups must tile the sub-block");
#pragma GCC unroll 8
        for (int k0 = 0; k0 < KV; k0 += G) {
            __m256i p[C];
#pragma GCC unroll 8
            for (int j = 0; j < G; ++j) {
                const __m256i w = _mm256_load_si256((const __m256i *) (W + 32 * (k0 + j)));
#pragma GCC unroll 4
                for (int c = 0; c < C; ++c) {
                    const __m256i q = _mm256_maddubs_epi16(w, xv(k0 + j, c));
                    p[c] = j == 0 ? q : _mm256_add_epi16(p[c], q);
                    KILN_PANEL_KEEP(p[c]);
                }
            }
            for (int c = 0; c < C; ++c) {
                const __m256i q = _mm256_madd_epi16(p[c], ones);
                s[c] = k0 == 0 ? q : _mm256_add_epi32(s[c], q);
            }
        }
    }
}

// sub_dots of kScales16 decoders (see scales16<D>): a sub-block of 32 values as 4 pairs of steps,
// each pair's int16 sums (2 * 2 * 63 * 127 at most) multiplied by the scale of its 16 values
// (from the record's tail), then the level offset's term: offset * scale times the activations'
// sum, both per 16. The pairs are a loop, not unrolled: unrolled, GCC kept the pair sums of
// every column in memory (twice the loads and stores of the products).
template <int C>
inline void sub_dots_scales16(const uint8_t * W, const uint8_t * X, __m256i * s) {
    for (int c = 0; c < C; ++c) s[c] = _mm256_setzero_si256();
#pragma GCC unroll 1
    for (int g = 0; g < 4; ++g) {
        const __m256i w0 = _mm256_load_si256((const __m256i *) (W + 64 * g));
        const __m256i w1 = _mm256_load_si256((const __m256i *) (W + 64 * g + 32));
        const __m256i m = _mm256_load_si256((const __m256i *) (W + 256 + 32 * (g / 2)));
        const uint8_t * x = X + 2 * g * C * 32;
#pragma GCC unroll 4
        for (int c = 0; c < C; ++c) {
            const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(w0, _mm256_load_si256((const __m256i *) (x + 32 * c))),
                                               _mm256_maddubs_epi16(w1, _mm256_load_si256((const __m256i *) (x + 32 * (C + c)))));
            s[c] = _mm256_add_epi32(s[c], _mm256_madd_epi16(p, m));
        }
    }
    const __m256i off = _mm256_load_si256((const __m256i *) (W + 256 + 64));
    const int32_t * sums = (const int32_t *) (X + 8 * C * 32 + 4 * C);
    for (int c = 0; c < C; ++c) s[c] = _mm256_add_epi32(s[c], _mm256_madd_epi16(off, _mm256_set1_epi32(sums[c])));
}

// sub_dots for signed levels, as int16 products: vpmaddubsw needs an unsigned operand, and the
// sign trick (|w| and x with w's sign) costs a vpsignb per product on the multiply ports, where
// vpmaddubsw and vpmaddwd already are (Zen 3 and 4: two such per cycle), three of them per 32
// multiply-adds. Here the record holds the 4-value groups of the 8 rows (rows 0, 2, 4, 6 first,
// then 1, 3, 5, 7: pack_weights) as int16 or bytes, and the activations were packed
// widened (4 int16 spread over the vector, wide_x): two vpmaddwd per 32 multiply-adds and the
// adds on the other ports. Byte records (step_bytes) are widened here, a vpmovsxbw per 16
// values shared by the columns. Each row's sum then sits in two lanes
// of lo (even rows) or hi (odd rows), gathered into natural order once per sub-block.
template <int S, int C, int kStep>
inline void sub_dots_wide(const uint8_t * W, const uint8_t * X, __m256i * s) {
    constexpr int KV = S / 4;
    __m256i lo[C], hi[C];
    for (int c = 0; c < C; ++c) lo[c] = hi[c] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int k = 0; k < KV; ++k) {
        const uint8_t * w = W + kStep * k;
        const __m256i wl = kStep == 64 ? _mm256_load_si256((const __m256i *) w)
                                       : _mm256_cvtepi8_epi16(_mm_load_si128((const __m128i *) w));
        const __m256i wh = kStep == 64 ? _mm256_load_si256((const __m256i *) (w + 32))
                                       : _mm256_cvtepi8_epi16(_mm_load_si128((const __m128i *) (w + 16)));
#pragma GCC unroll 4
        for (int c = 0; c < C; ++c) {
            // one load for both products (as memory operands the compiler loads it twice, and
            // the loads, two per cycle, would bound the loop)
            __m256i x = _mm256_load_si256((const __m256i *) (X + (k * C + c) * 32));
            KILN_PANEL_KEEP(x);
            const __m256i pl = _mm256_madd_epi16(wl, x), ph = _mm256_madd_epi16(wh, x);
            lo[c] = _mm256_add_epi32(lo[c], pl);
            hi[c] = _mm256_add_epi32(hi[c], ph);
            // a whole sub-block unrolled needs the order kept (as in sub_dots); a long one
            // (folded super-blocks) is a loop, where the kept values only cost register copies
            if constexpr (KV <= 8) {
                KILN_PANEL_KEEP(lo[c]);
                KILN_PANEL_KEEP(hi[c]);
            }
        }
    }
    for (int c = 0; c < C; ++c) {
        // lo: row 0 (2 lanes), 2, 4, 6; hi: 1, 3, 5, 7. Lane 2j of a = row 2j's first half,
        // lane 2j + 1 row 2j + 1's second; b, its pairs swapped, the other halves.
        const __m256i a = _mm256_blend_epi32(lo[c], hi[c], 0xAA);
        const __m256i b = _mm256_shuffle_epi32(_mm256_blend_epi32(hi[c], lo[c], 0xAA), 0xB1);
        s[c] = _mm256_add_epi32(a, b);
    }
}

// micro (below) for wide_x decoders. Their sums take 2 C registers (lo and hi), the weights and
// an activation 3 more, so the float sums of the C columns live in memory (L1), read and written
// once per sub-block; kept in registers they spilled inside the product loop instead. So do
// kScales16 decoders' (their int32 sums, two steps of weights, the scale and the pair sums).
template <typename D, int C, int kSuper>
void micro_mem_acc(int64_t nsb, const uint8_t * wg, const uint8_t * xp, float * dst, size_t dst_stride, int rows, bool add) {
    constexpr int S = D::kSub, KV = S / 4, kStep = step_bytes<D>();
    constexpr size_t wrec = w_record_of<D>, xrec = x_record<S, C, true>;
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(rows), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    alignas(32) float acc[C][kRows];
    for (int c = 0; c < C; ++c) {
        const __m256 a = !add ? _mm256_setzero_ps() : rows >= kRows ? _mm256_loadu_ps(dst + c * dst_stride)
                                                                    : _mm256_maskload_ps(dst + c * dst_stride, mask);
        _mm256_store_ps(acc[c], a);
    }
    for (int64_t sb = 0; sb < nsb; ++sb) {
        const uint8_t * W = wg + sb * wrec;
        const uint8_t * X = xp + sb * xrec;
        // the activations' scales: per sub-block (kSuper == 1) or of its super-block, whose sums
        // are plain sums
        const float * xf = (const float *) (X + KV * C * 32);
        const float * xd = (const float *) (xp + (sb - sb % kSuper) * xrec + KV * C * 32);
        __m256i s[C];
        if constexpr (wide_x<D>()) sub_dots_wide<S, C, kStep>(W, X, s);
        else sub_dots_scales16<C>(W, X, s);
        const __m256 scale = _mm256_load_ps((const float *) (W + w_floats_at<D>));
#pragma GCC unroll 4
        for (int c = 0; c < C; ++c) {
            __m256 a = _mm256_load_ps(acc[c]);
            a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[c]), _mm256_mul_ps(scale, _mm256_set1_ps(xd[c])), a);
            if constexpr (D::kBias) {
                const __m256 bias = _mm256_load_ps((const float *) (W + KV * kStep + 32));
                a = _mm256_fmadd_ps(bias, _mm256_set1_ps(kSuper == 1 ? xf[C + c] : xf[C + c] * xd[c]), a);
            }
            _mm256_store_ps(acc[c], a);
        }
        __asm__ volatile("" : : "r"(acc) : "memory");   // keep acc in memory (see above): it escapes here
    }
    for (int c = 0; c < C; ++c) {
        if (rows >= kRows) _mm256_storeu_ps(dst + c * dst_stride, _mm256_load_ps(acc[c]));
        else _mm256_maskstore_ps(dst + c * dst_stride, mask, _mm256_load_ps(acc[c]));
    }
}

// 8 rows x C columns over nsb sub-blocks, added to dst (add) or stored; rows < 8 valid lanes
// (micro: micro_mem_acc for wide_x and kScales16 decoders, micro_bytes for the others).
// kSuper > 1: the activations have one scale per kSuper sub-blocks (q8_K) and their packed sums
// are plain sums; the x scale is then applied once per super-block instead of per sub-block.
template <typename D, int C, int kSuper>
void micro_bytes(int64_t nsb, const uint8_t * wg, const uint8_t * xp, float * dst, size_t dst_stride, int rows, bool add) {
    constexpr int S = D::kSub, KV = S / 4, kStep = step_bytes<D>();
    constexpr size_t wrec = w_record_of<D>, xrec = x_record<S, C, true>;
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(rows), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    __m256 acc[C];
    for (int c = 0; c < C; ++c) {
        acc[c] = !add ? _mm256_setzero_ps() : rows >= kRows ? _mm256_loadu_ps(dst + c * dst_stride)
                                                             : _mm256_maskload_ps(dst + c * dst_stride, mask);
    }
    for (int64_t sb0 = 0; sb0 < nsb; sb0 += kSuper) {
        // kSuper == 1: straight into acc (a separate sum would cost an add per sub-block and
        // C more live registers, which AVX2's 16 cannot spare: they spill)
        __m256 part[C];
        for (int c = 0; c < C; ++c) part[c] = kSuper == 1 ? acc[c] : _mm256_setzero_ps();
        for (int j = 0; j < kSuper; ++j) {
            const uint8_t * W = wg + (sb0 + j) * wrec;
            const uint8_t * X = xp + (sb0 + j) * xrec;
            __m256i s[C];
            sub_dots<S, C, D::kMaxLevel>(W, X, s);
            const __m256 scale = _mm256_load_ps((const float *) (W + KV * kStep));
            const float * xf = (const float *) (X + KV * C * 32);
#pragma GCC unroll 4
            for (int c = 0; c < C; ++c) {
                const __m256 sc = kSuper == 1 ? _mm256_mul_ps(scale, _mm256_set1_ps(xf[c])) : scale;
                part[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[c]), sc, part[c]);
            }
            if constexpr (D::kBias) {
                const __m256 bias = _mm256_load_ps((const float *) (W + KV * kStep + 32));
                for (int c = 0; c < C; ++c) part[c] = _mm256_fmadd_ps(bias, _mm256_set1_ps(xf[C + c]), part[c]);
            }
        }
        if constexpr (kSuper == 1) {
            for (int c = 0; c < C; ++c) acc[c] = part[c];
        } else {
            const float * xd = (const float *) (xp + sb0 * xrec + KV * C * 32);
            for (int c = 0; c < C; ++c) acc[c] = _mm256_fmadd_ps(part[c], _mm256_set1_ps(xd[c]), acc[c]);
        }
    }
    if (rows >= kRows) {
        for (int c = 0; c < C; ++c) _mm256_storeu_ps(dst + c * dst_stride, acc[c]);
    } else {
        for (int c = 0; c < C; ++c) _mm256_maskstore_ps(dst + c * dst_stride, mask, acc[c]);
    }
}

template <typename D, int C, int kSuper>
void micro(int64_t nsb, const uint8_t * wg, const uint8_t * xp, float * dst, size_t dst_stride, int rows, bool add) {
    if constexpr (wide_x<D>() || scales16<D>()) micro_mem_acc<D, C, kSuper>(nsb, wg, xp, dst, dst_stride, rows, add);
    else micro_bytes<D, C, kSuper>(nsb, wg, xp, dst, dst_stride, rows, add);
}

#include "avx2/panel-drive.inc"

#undef KILN_PANEL_KEEP

} // namespace kiln_panel
} // namespace
