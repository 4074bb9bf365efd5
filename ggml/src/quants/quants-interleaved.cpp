// Row-interleaved layouts of ik_llama.cpp (_r4 / _r8): the same bits as their base type, with
// the blocks of 4 or 8 consecutive rows woven together so one vector load holds the same block
// position of several rows.
//
// Convention (ggml.h): for a type with nrows_interleaved = R > 1, to_float(x, y, n) decodes one
// group of R rows: x points at the group (R * row_size bytes), n = R * row length, and y receives
// the R rows one after another. A gemm of such a type is called with nr a multiple of R and w at
// the start of a group (the CPU backend's chunking respects ggml_cpu_type_traits::rows_per_call).
//
// Decoders follow the reference's index arithmetic and float expressions exactly. The gemm of
// iq4_k_r4 / iq4_ks_r4 decodes each row into the common ik form and runs the exact q8_K integer
// dot; the other layouts use a float gemm over the decoded group (correct, not fast).
#include "quants-ik.h"
#include "quants-k.h"

#include "cpu-traits.h"

#include <cstring>
#include <vector>

namespace {

// Position p (0..31) of row k in a 64-byte 4-row nibble group (iq4_nl_r4, iq4_k_r4, iq4_ks_r4,
// q4_k_r4, q5_k_r4/q6_k_r4 low bits): byte offsets of the eight 4-value quarters.
inline int r4_nibble(const uint8_t * q, int k, int p) {
    static const uint8_t base[8] = { 0, 32, 0, 32, 16, 48, 16, 48 };
    const int quarter = p / 4;
    const uint8_t b = q[base[quarter] + 4 * k + (p % 4)];
    return (quarter % 4) >= 2 ? b >> 4 : b & 0xF;
}

struct iq4_nl_r4_block { ggml_fp16_t d[4]; uint8_t qs[64]; };
struct q4_0_r8_block { ggml_fp16_t d[8]; uint8_t qs[128]; };
struct q8_0_r8_block { ggml_fp16_t d[8]; int8_t qs[256]; };
struct iq5_k_r4_block { ggml_fp16_t d[4]; uint8_t extra[8]; uint8_t scales_h[16]; uint8_t scales_l[32]; uint8_t qs[512]; uint8_t qh[128]; };
struct iq4_xs_r8_block { ggml_fp16_t d[8]; uint8_t scales_h[16]; uint8_t scales_l[32]; uint8_t qs[1024]; };
struct q4_k_r4_block { ggml_fp16_t d[8]; uint8_t scales_h[16]; uint8_t scales_l[32]; uint8_t qs[512]; };
struct q5_k_r4_block { ggml_fp16_t d[8]; uint8_t scales_h[16]; uint8_t scales_l[32]; uint8_t qh[128]; uint8_t qs[512]; };
struct q6_k_r4_block { ggml_fp16_t d[4]; int8_t scales[64]; uint8_t qh[256]; uint8_t ql[512]; };
static_assert(sizeof(iq4_nl_r4_block) == 72 && sizeof(q4_0_r8_block) == 144 && sizeof(q8_0_r8_block) == 272, "r layouts");
static_assert(sizeof(iq4_k_r4_block) == 576 && sizeof(iq5_k_r4_block) == 704 && sizeof(iq4_ks_r4_block) == 544, "r layouts");
static_assert(sizeof(iq4_xs_r8_block) == 1088 && sizeof(q4_k_r4_block) == 576 && sizeof(q5_k_r4_block) == 704, "r layouts");
static_assert(sizeof(q6_k_r4_block) == 840, "r layouts");

// 6-bit scale of sub-block slot `is` (0..63) in the r4/r8 split scale arrays.
inline int split_scale6(const uint8_t * sl, const uint8_t * sh, int is) {
    return ((sl[is % 32] >> 4 * (is / 32)) & 0xF) | (((sh[is % 16] >> 2 * (is / 16)) & 3) << 4);
}

// ---------------------------------------------------------------------------------------------
// Row decoders into the common ik form (for the q8_K gemm) and to floats.

void iq4_k_r4_row(const iq4_k_r4_block & b, int k, ik_decoded & out) {
    out.d = GGML_FP16_TO_FP32(b.d[k]);
    for (int ib = 0; ib < 8; ++ib) {
        out.sc[2 * ib]     = (int16_t) (split_scale6(b.scales_l, b.scales_h, 8 * ib + k) - 32);
        out.sc[2 * ib + 1] = (int16_t) (split_scale6(b.scales_l, b.scales_h, 8 * ib + k + 4) - 32);
        const int8_t * v1 = ik_iq4k_values + ((b.extra[k] >> ib) & 1) * 16;
        const int8_t * v2 = ik_iq4k_values + ((b.extra[k + 4] >> ib) & 1) * 16;
        const uint8_t * q = b.qs + 64 * ib;
        for (int p = 0; p < 16; ++p) out.q[32 * ib + p] = v1[r4_nibble(q, k, p)];
        for (int p = 16; p < 32; ++p) out.q[32 * ib + p] = v2[r4_nibble(q, k, p)];
    }
}

void iq4_ks_r4_row(const iq4_ks_r4_block & b, float row_d, int k, ik_decoded & out) {
    out.d = row_d;
    for (int ib = 0; ib < 8; ++ib) {
        const uint8_t s = b.scales[4 * ib + k];
        out.sc[2 * ib] = out.sc[2 * ib + 1] = (int16_t) ((s & 254) - 127);
        const int8_t * v = ik_iq4k_values + (s & 1) * 16;
        for (int p = 0; p < 32; ++p) out.q[32 * ib + p] = v[r4_nibble(b.qs + 64 * ib, k, p)];
    }
}

void decoded_to_float(const ik_decoded & db, float * y) {
    for (int g = 0; g < QK_K / 16; ++g) {
        const float dl = db.d * (float) db.sc[g];
        for (int i = 16 * g; i < 16 * g + 16; ++i) y[i] = dl * (float) db.q[i];
    }
}

void iq4_k_r4_to_float(const void * vx, float * y, int64_t n) {
    const int64_t npr = n / 4;
    const auto * x = (const iq4_k_r4_block *) vx;
    ik_decoded db;
    for (int64_t ibl = 0; ibl < npr / QK_K; ++ibl) {
        for (int k = 0; k < 4; ++k) {
            iq4_k_r4_row(x[ibl], k, db);
            decoded_to_float(db, y + k * npr + ibl * QK_K);
        }
    }
}

void iq4_ks_r4_to_float(const void * vx, float * y, int64_t n) {
    const int64_t npr = n / 4;
    const float * dptr = (const float *) vx;
    const auto * x = (const iq4_ks_r4_block *) (dptr + 4);
    ik_decoded db;
    for (int64_t ibl = 0; ibl < npr / QK_K; ++ibl) {
        for (int k = 0; k < 4; ++k) {
            iq4_ks_r4_row(x[ibl], dptr[k], k, db);
            decoded_to_float(db, y + k * npr + ibl * QK_K);
        }
    }
}

void iq5_k_r4_to_float(const void * vx, float * y, int64_t n) {
    const int64_t npr = n / 4;
    const auto * x = (const iq5_k_r4_block *) vx;
    // fifth bit of position p: bit order of the qh byte is i, i+8, i+16, i+24, i+4, i+12, i+20, i+28
    static const uint8_t hbit[8] = { 0, 4, 1, 5, 2, 6, 3, 7 };
    for (int64_t ibl = 0; ibl < npr / QK_K; ++ibl) {
        const auto & b = x[ibl];
        for (int k = 0; k < 4; ++k) {
            const float d = GGML_FP16_TO_FP32(b.d[k]);
            for (int ib = 0; ib < 8; ++ib) {
                const float dl1 = d * (split_scale6(b.scales_l, b.scales_h, 8 * ib + k) - 32);
                const float dl2 = d * (split_scale6(b.scales_l, b.scales_h, 8 * ib + k + 4) - 32);
                const int8_t * v1 = ik_iq5nl_values + ((b.extra[k] >> ib) & 1) * 32;
                const int8_t * v2 = ik_iq5nl_values + ((b.extra[k + 4] >> ib) & 1) * 32;
                float * yr = y + k * npr + ibl * QK_K + 32 * ib;
                for (int p = 0; p < 32; ++p) {
                    const int h = (b.qh[16 * ib + 4 * k + p % 4] >> hbit[p / 4]) & 1;
                    const int l = r4_nibble(b.qs + 64 * ib, k, p) | (h << 4);
                    yr[p] = p < 16 ? dl1 * v1[l] : dl2 * v2[l];
                }
            }
        }
    }
}

void iq4_nl_r4_to_float(const void * vx, float * y, int64_t n) {
    const int64_t npr = n / 4;
    const auto * x = (const iq4_nl_r4_block *) vx;
    for (int64_t ib = 0; ib < npr / 32; ++ib) {
        for (int k = 0; k < 4; ++k) {
            const float d = GGML_FP16_TO_FP32(x[ib].d[k]);
            for (int p = 0; p < 32; ++p) y[k * npr + 32 * ib + p] = d * ik_iq4k_values[r4_nibble(x[ib].qs, k, p)];
        }
    }
}

void iq4_xs_r8_to_float(const void * vx, float * y, int64_t n) {
    const int64_t npr = n / 8;
    const auto * x = (const iq4_xs_r8_block *) vx;
    for (int64_t ibl = 0; ibl < npr / QK_K; ++ibl) {
        const auto & b = x[ibl];
        for (int k = 0; k < 8; ++k) {
            const float d = GGML_FP16_TO_FP32(b.d[k]);
            for (int ib = 0; ib < 8; ++ib) {
                const float dl = d * (split_scale6(b.scales_l, b.scales_h, 8 * ib + k) - 32);
                float * yr = y + k * npr + ibl * QK_K + 32 * ib;
                for (int l = 0; l < 4; ++l) {
                    for (int i = 0; i < 4; ++i) {
                        const uint8_t q = b.qs[128 * ib + 4 * k + i + 32 * l];
                        yr[8 * l + i]     = dl * ik_iq4k_values[q & 0xF];
                        yr[8 * l + i + 4] = dl * ik_iq4k_values[q >> 4];
                    }
                }
            }
        }
    }
}

void q4_0_r8_to_float(const void * vx, float * y, int64_t n) {
    const int64_t npr = n / 8;
    const auto * x = (const q4_0_r8_block *) vx;
    for (int64_t ib = 0; ib < npr / 32; ++ib) {
        for (int k = 0; k < 8; ++k) {
            const float d = GGML_FP16_TO_FP32(x[ib].d[k]);
            float * yr = y + k * npr + 32 * ib;
            for (int l = 0; l < 4; ++l) {
                for (int i = 0; i < 4; ++i) {
                    const uint8_t q = x[ib].qs[32 * l + 4 * k + i];
                    yr[4 * l + i]      = d * ((q & 0xF) - 8);
                    yr[4 * l + i + 16] = d * ((q >> 4) - 8);
                }
            }
        }
    }
}

void q8_0_r8_to_float(const void * vx, float * y, int64_t n) {
    const int64_t npr = n / 8;
    const auto * x = (const q8_0_r8_block *) vx;
    for (int64_t ib = 0; ib < npr / 32; ++ib) {
        for (int k = 0; k < 8; ++k) {
            const float d = GGML_FP16_TO_FP32(x[ib].d[k]);
            float * yr = y + k * npr + 32 * ib;
            for (int l = 0; l < 4; ++l) {
                for (int i = 0; i < 4; ++i) {
                    yr[4 * l + i]      = d * x[ib].qs[32 * l + 4 * k + i];
                    yr[4 * l + i + 16] = d * x[ib].qs[32 * l + 4 * k + i + 128];
                }
            }
        }
    }
}

void q4_k_r4_to_float(const void * vx, float * y, int64_t n) {
    const int64_t npr = n / 4;
    const auto * x = (const q4_k_r4_block *) vx;
    for (int64_t ibl = 0; ibl < npr / QK_K; ++ibl) {
        const auto & b = x[ibl];
        for (int k = 0; k < 4; ++k) {
            const float d = GGML_FP16_TO_FP32(b.d[k]), m = GGML_FP16_TO_FP32(b.d[k + 4]);
            for (int ib = 0; ib < 8; ++ib) {
                const int is = 4 * ib + k;
                const int h = b.scales_h[is % 16] >> 4 * (is / 16);
                const float dl = d * ((b.scales_l[is] & 0xF) | ((h & 3) << 4));
                const float ml = m * ((b.scales_l[is] >> 4) | ((h & 0xC) << 2));
                float * yr = y + k * npr + ibl * QK_K + 32 * ib;
                for (int p = 0; p < 32; ++p) yr[p] = dl * r4_nibble(b.qs + 64 * ib, k, p) - ml;
            }
        }
    }
}

void q5_k_r4_to_float(const void * vx, float * y, int64_t n) {
    const int64_t npr = n / 4;
    const auto * x = (const q5_k_r4_block *) vx;
    // fifth bit of position p: qh bit order i, i+8, i+4, i+12, i+16, i+24, i+20, i+28
    static const uint8_t hbit[8] = { 0, 2, 1, 3, 4, 6, 5, 7 };
    for (int64_t ibl = 0; ibl < npr / QK_K; ++ibl) {
        const auto & b = x[ibl];
        for (int k = 0; k < 4; ++k) {
            const float d = GGML_FP16_TO_FP32(b.d[k]), m = GGML_FP16_TO_FP32(b.d[k + 4]);
            for (int ib = 0; ib < 8; ++ib) {
                const int is = 4 * ib + k;
                const int h = b.scales_h[is % 16] >> 4 * (is / 16);
                const float dl = d * ((b.scales_l[is] & 0xF) | ((h & 3) << 4));
                const float ml = m * ((b.scales_l[is] >> 4) | ((h & 0xC) << 2));
                float * yr = y + k * npr + ibl * QK_K + 32 * ib;
                for (int p = 0; p < 32; ++p) {
                    const int hb = (b.qh[16 * ib + 4 * k + p % 4] >> hbit[p / 4]) & 1;
                    yr[p] = dl * (r4_nibble(b.qs + 64 * ib, k, p) | (hb << 4)) - ml;
                }
            }
        }
    }
}

void q6_k_r4_to_float(const void * vx, float * y, int64_t n) {
    const int64_t npr = n / 4;
    const auto * x = (const q6_k_r4_block *) vx;
    // two high bits of position p: (byte offset 0/16, shift) per quarter
    static const uint8_t hoff[8] = { 0, 0, 0, 0, 16, 16, 16, 16 };
    static const uint8_t hshift[8] = { 0, 4, 2, 6, 0, 4, 2, 6 };
    for (int64_t ibl = 0; ibl < npr / QK_K; ++ibl) {
        const auto & b = x[ibl];
        for (int k = 0; k < 4; ++k) {
            const float d = GGML_FP16_TO_FP32(b.d[k]);
            for (int ib = 0; ib < 8; ++ib) {
                const float dl1 = d * b.scales[8 * ib + k], dl2 = d * b.scales[8 * ib + k + 4];
                float * yr = y + k * npr + ibl * QK_K + 32 * ib;
                for (int p = 0; p < 32; ++p) {
                    const int q4 = p / 4;
                    const int h = (b.qh[32 * ib + hoff[q4] + 4 * k + p % 4] >> hshift[q4]) & 3;
                    const int l = (r4_nibble(b.ql + 64 * ib, k, p) | (h << 4)) - 32;
                    yr[p] = (p < 16 ? dl1 : dl2) * l;
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// gemms

// The group of R rows starting at w: the k-th row_size bytes of the woven group are at
// w + k * w_stride (contiguous when w_stride == row_size, as in tensors; gathered otherwise).
const char * group_bytes(const void * w, size_t w_stride, size_t row_size, int R, std::vector<char> & buf) {
    if (w_stride == row_size) return (const char *) w;
    buf.resize((size_t) R * row_size);
    for (int k = 0; k < R; ++k) std::memcpy(buf.data() + k * row_size, (const char *) w + k * w_stride, row_size);
    return buf.data();
}

// q8_K gemm of the 4-row layouts decoded through the common ik form.
template <typename Block, bool RowScale, void (*row_decode)(const Block &, float, int, ik_decoded &)>
void r4_gemm_q8_K(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
                  size_t dst_stride, int nr, int nc) {
    GGML_ASSERT(nr % 4 == 0);
    const int64_t nb = n / QK_K;
    const size_t row_size = (RowScale ? 4 : 0) + nb * sizeof(Block) / 4;
    thread_local std::vector<char> gather;
    ik_decoded db;
    for (int r0 = 0; r0 < nr; r0 += 4) {
        const char * group = group_bytes((const char *) w + r0 * w_stride, w_stride, row_size, 4, gather);
        const float * row_d = (const float *) group;
        const auto * blocks = (const Block *) (group + (RowScale ? 16 : 0));
        for (int k = 0; k < 4; ++k) {
            for (int c = 0; c < nc; ++c) dst[c * dst_stride + r0 + k] = 0.0f;
        }
        for (int64_t i = 0; i < nb; ++i) {
            for (int k = 0; k < 4; ++k) {
                row_decode(blocks[i], RowScale ? row_d[k] : 0.f, k, db);
                for (int c = 0; c < nc; ++c) {
                    const auto & a = ((const block_q8_K *) ((const char *) x + c * x_stride))[i];
                    dst[c * dst_stride + r0 + k] += (db.d * a.d) * (float) ik_block_dot_scalar(db, a.qs);
                }
            }
        }
    }
}

void iq4_k_r4_row_adapter(const iq4_k_r4_block & b, float, int k, ik_decoded & out) { iq4_k_r4_row(b, k, out); }

// Float gemm over decoded groups (f32 activations): every interleaved layout, exact products.
template <ggml_type T>
void r_gemm_f32(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
                size_t dst_stride, int nr, int nc) {
    const ggml_type_traits * tt = ggml_get_type_traits(T);
    const int R = tt->nrows_interleaved;
    GGML_ASSERT(nr % R == 0);
    thread_local std::vector<float> buf;
    thread_local std::vector<char> gather;
    buf.resize((size_t) R * n);
    const size_t row_size = ggml_row_size(T, n);
    for (int r0 = 0; r0 < nr; r0 += R) {
        tt->to_float(group_bytes((const char *) w + r0 * w_stride, w_stride, row_size, R, gather), buf.data(), R * n);
        for (int k = 0; k < R; ++k) {
            const float * wr = buf.data() + (size_t) k * n;
            for (int c = 0; c < nc; ++c) {
                const float * a = (const float *) ((const char *) x + c * x_stride);
                float s = 0;
                for (int64_t i = 0; i < n; ++i) s += wr[i] * a[i];
                dst[c * dst_stride + r0 + k] = s;
            }
        }
    }
}

template <ggml_type T>
void register_float_path(ggml_to_float_t to_float) {
    ggml_type_traits_mut(T)->to_float = to_float;
    ggml_cpu_register_gemm(T, GGML_CPU_ISA_SCALAR, GGML_TYPE_F32, r_gemm_f32<T>);
    ggml_cpu_type_traits_mut(T)->rows_per_call = ggml_get_type_traits(T)->nrows_interleaved;
}

// ---------------------------------------------------------------------------------------------
// Quantizers: quantize 4 rows with the base type, then weave them (the reference's recipe, so
// the quality is the base type's).

// Inverse of r4_nibble: store nibble v of position p of row k.
inline void r4_put_nibble(uint8_t * q, int k, int p, int v) {
    static const uint8_t base[8] = { 0, 32, 0, 32, 16, 48, 16, 48 };
    const int quarter = p / 4;
    uint8_t & b = q[base[quarter] + 4 * k + (p % 4)];
    b |= (uint8_t) ((quarter % 4) >= 2 ? v << 4 : v);
}

void repack_iq4_k(const block_iq4_k * const rows[4], int64_t nblock, iq4_k_r4_block * y) {
    for (int64_t ibl = 0; ibl < nblock; ++ibl) {
        std::memset(&y[ibl], 0, sizeof(y[ibl]));
        for (int k = 0; k < 4; ++k) {
            const block_iq4_k & b = rows[k][ibl];
            y[ibl].d[k] = b.d;
            for (int ib = 0; ib < 8; ++ib) {
                if ((b.extra >> (2 * ib)) & 1) y[ibl].extra[k] |= 1 << ib;
                if ((b.extra >> (2 * ib + 1)) & 1) y[ibl].extra[k + 4] |= 1 << ib;
                const int sh = b.scales_h[ib / 2] >> 4 * (ib % 2);
                const int s1 = (b.scales_l[ib] & 0xF) | ((sh & 3) << 4), s2 = (b.scales_l[ib] >> 4) | (((sh >> 2) & 3) << 4);
                for (int half = 0; half < 2; ++half) {
                    const int is = 8 * ib + k + 4 * half, s = half ? s2 : s1;
                    y[ibl].scales_l[is % 32] |= (uint8_t) ((s & 0xF) << 4 * (is / 32));
                    y[ibl].scales_h[is % 16] |= (uint8_t) ((s >> 4) << 2 * (is / 16));
                }
                for (int j = 0; j < 16; ++j) {
                    r4_put_nibble(y[ibl].qs + 64 * ib, k, j, b.qs[16 * ib + j] & 0xF);
                    r4_put_nibble(y[ibl].qs + 64 * ib, k, j + 16, b.qs[16 * ib + j] >> 4);
                }
            }
        }
    }
}

void repack_iq4_ks(const block_iq4_ks * const rows[4], int64_t nblock, iq4_ks_r4_block * y) {
    for (int64_t ibl = 0; ibl < nblock; ++ibl) {
        std::memset(&y[ibl], 0, sizeof(y[ibl]));
        for (int k = 0; k < 4; ++k) {
            const block_iq4_ks & b = rows[k][ibl];
            for (int ib = 0; ib < 8; ++ib) {
                y[ibl].scales[4 * ib + k] = b.scales[ib];
                for (int j = 0; j < 16; ++j) {
                    r4_put_nibble(y[ibl].qs + 64 * ib, k, j, b.qs[16 * ib + j] & 0xF);
                    r4_put_nibble(y[ibl].qs + 64 * ib, k, j + 16, b.qs[16 * ib + j] >> 4);
                }
            }
        }
    }
}

size_t quantize_iq4_k_r4(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix) {
    if (nrows % 4 != 0 || n_per_row % QK_K != 0) return 0;
    const size_t row_size = ggml_row_size(GGML_TYPE_IQ4_K, n_per_row);
    std::vector<char> tmp(4 * row_size);
    for (int64_t r = 0; r < nrows; r += 4) {
        if (!ik_quantize_iq4_k(src + r * n_per_row, tmp.data(), 4, n_per_row, imatrix)) return 0;
        const block_iq4_k * rows[4];
        for (int k = 0; k < 4; ++k) rows[k] = (const block_iq4_k *) (tmp.data() + k * row_size);
        repack_iq4_k(rows, n_per_row / QK_K, (iq4_k_r4_block *) ((char *) dst + r * row_size));
    }
    return nrows * row_size;
}

size_t quantize_iq4_ks_r4(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix) {
    if (nrows % 4 != 0 || n_per_row % QK_K != 0) return 0;
    const size_t row_size = ggml_row_size(GGML_TYPE_IQ4_KS, n_per_row);
    std::vector<char> tmp(4 * row_size);
    for (int64_t r = 0; r < nrows; r += 4) {
        if (!ik_quantize_iq4_ks(src + r * n_per_row, tmp.data(), 4, n_per_row, imatrix)) return 0;
        char * group = (char *) dst + r * row_size;
        const block_iq4_ks * rows[4];
        for (int k = 0; k < 4; ++k) {
            std::memcpy(group + 4 * k, tmp.data() + k * row_size, 4);   // the row scales come first
            rows[k] = (const block_iq4_ks *) (tmp.data() + k * row_size + 4);
        }
        repack_iq4_ks(rows, n_per_row / QK_K, (iq4_ks_r4_block *) (group + 16));
    }
    return nrows * row_size;
}

void register_interleaved_types() {
    register_float_path<GGML_TYPE_IQ4_NL_R4>(iq4_nl_r4_to_float);
    register_float_path<GGML_TYPE_IQ4_XS_R8>(iq4_xs_r8_to_float);
    register_float_path<GGML_TYPE_Q4_0_R8>(q4_0_r8_to_float);
    register_float_path<GGML_TYPE_Q8_0_R8>(q8_0_r8_to_float);
    register_float_path<GGML_TYPE_Q4_K_R4>(q4_k_r4_to_float);
    register_float_path<GGML_TYPE_Q5_K_R4>(q5_k_r4_to_float);
    register_float_path<GGML_TYPE_Q6_K_R4>(q6_k_r4_to_float);
    register_float_path<GGML_TYPE_IQ5_K_R4>(iq5_k_r4_to_float);

    ggml_type_traits_mut(GGML_TYPE_IQ4_K_R4)->to_float = iq4_k_r4_to_float;
    ggml_type_traits_mut(GGML_TYPE_IQ4_K_R4)->quantize = quantize_iq4_k_r4;
    ggml_cpu_register_gemm(GGML_TYPE_IQ4_K_R4, GGML_CPU_ISA_SCALAR, GGML_TYPE_Q8_K,
                           r4_gemm_q8_K<iq4_k_r4_block, false, iq4_k_r4_row_adapter>);
    ggml_cpu_type_traits_mut(GGML_TYPE_IQ4_K_R4)->rows_per_call = 4;
    ggml_type_traits_mut(GGML_TYPE_IQ4_KS_R4)->to_float = iq4_ks_r4_to_float;
    ggml_type_traits_mut(GGML_TYPE_IQ4_KS_R4)->quantize = quantize_iq4_ks_r4;
    ggml_cpu_register_gemm(GGML_TYPE_IQ4_KS_R4, GGML_CPU_ISA_SCALAR, GGML_TYPE_Q8_K,
                           r4_gemm_q8_K<iq4_ks_r4_block, true, iq4_ks_r4_row>);
    ggml_cpu_type_traits_mut(GGML_TYPE_IQ4_KS_R4)->rows_per_call = 4;
}
GGML_REGISTER(register_interleaved_types);

} // namespace
