// Row-interleaved layouts of ik_llama.cpp (_r4 / _r8 / _r16), decoders and products: the same bits as their base type, with
// the blocks of 4 or 8 consecutive rows woven together so one vector load holds the same block
// position of several rows.
//
// Convention (ggml.h): for a type with nrows_interleaved = R > 1, to_float(x, y, n) decodes one
// group of R rows: x points at the group (R * row_size bytes), n = R * row length, and y receives
// the R rows one after another. A gemm of such a type is called with nr a multiple of R and w at
// the start of a group (the CPU backend's chunking respects ggml_cpu_type_traits::rows_per_call).
//
// Decoders follow the reference's index arithmetic and float expressions exactly. The scalar
// products go through r_gemm_decoded (quants-interleaved.h): back to the twin's rows and its
// kernel, or decoded floats for the layouts that cannot be unwoven; they are the reference the
// x86 kernels (cpu/avx2/panel-r8*.h, gemm-float.cpp) and the NEON ones are tested against.
#include "quants-interleaved.h"

#include "cpu-traits.h"

#include <cstring>
#include <vector>

namespace {

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

// 4-bit signed scale slots 8 ib + k (first 16 values) and 8 ib + k + 4 (second 16).
inline int nibble_slot(const uint8_t * s, int is) { return (s[is % 32] >> 4 * (is / 32)) & 0xF; }

void iq2_k_r4_row(const iq2_k_r4_block & b, float, int k, ik_decoded & out) {
    out.d = GGML_FP16_TO_FP32(b.d[k]);
    for (int ib = 0; ib < 8; ++ib) {
        const uint8_t * q = b.qs + 32 * ib;
        for (int half = 0; half < 2; ++half) {
            out.sc[2 * ib + half] = (int16_t) (nibble_slot(b.scales, 8 * ib + k + 4 * half) - 8);
            const int8_t * v = ik_iq2nl_values + ((b.extra[k + 4 * half] >> ib) & 1) * 4;
            for (int p = 16 * half; p < 16 * half + 16; ++p) out.q[32 * ib + p] = v[(q[r4_crumb_byte(k, p)] >> r4_crumb_shift(p)) & 3];
        }
    }
}

void iq3_k_r4_row(const iq3_k_r4_block & b, float, int k, ik_decoded & out) {
    out.d = GGML_FP16_TO_FP32(b.d[k]);
    for (int ib = 0; ib < 8; ++ib) {
        const uint8_t * q = b.qs + 32 * ib;
        const uint8_t * qh = b.qh + 16 * ib + 4 * k;
        for (int half = 0; half < 2; ++half) {
            const int is = 8 * ib + k + 4 * half;
            const int m = 2 * nibble_slot(b.scales_l, is) + 1;
            out.sc[2 * ib + half] = (int16_t) ((b.scales_h[is % 8] >> (is / 8)) & 1 ? -m : m);
            const int8_t * v = ik_iq3nl_values + ((b.extra[k + 4 * half] >> ib) & 1) * 8;
            for (int p = 16 * half; p < 16 * half + 16; ++p) {
                const int l = ((q[r4_crumb_byte(k, p)] >> r4_crumb_shift(p)) & 3) | (((qh[p % 4] >> (p / 4)) & 1) << 2);
                out.q[32 * ib + p] = v[l];
            }
        }
    }
}

void decoded_to_float(const ik_decoded & db, float * y) {
    for (int g = 0; g < QK_K / 16; ++g) {
        const float dl = db.d * (float) db.sc[g];
        for (int i = 16 * g; i < 16 * g + 16; ++i) y[i] = dl * (float) db.q[i];
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

// Decode a group of 4 rows through a row decoder into the common ik form.
template <typename Block, void (*row_decode)(const Block &, float, int, ik_decoded &)>
void r4_ik_to_float(const void * vx, float * y, int64_t n) {
    const int64_t npr = n / 4;
    const auto * x = (const Block *) vx;
    ik_decoded db;
    for (int64_t ibl = 0; ibl < npr / QK_K; ++ibl) {
        for (int k = 0; k < 4; ++k) {
            row_decode(x[ibl], 0.f, k, db);
            decoded_to_float(db, y + k * npr + ibl * QK_K);
        }
    }
}

// The walk shared by the 4-row interleaved super-block layouts: Block32(b, k, ib, yr) writes the
// 32 values of 32-block ib of row k of super-block b to yr; Rows f32 row scales (0 or 4) come
// before the blocks and are passed as row_d (nullptr without them).
template <typename Block, int Rows = 0, typename Block32>
void r4_superblocks_to_float(const void * vx, float * y, int64_t n, Block32 block32) {
    const int64_t npr = n / 4;
    const float * row_d = Rows ? (const float *) vx : nullptr;
    const auto * x = (const Block *) ((const float *) vx + Rows);
    for (int64_t ibl = 0; ibl < npr / QK_K; ++ibl) {
        for (int k = 0; k < 4; ++k) {
            for (int ib = 0; ib < 8; ++ib) block32(x[ibl], row_d, k, ib, y + k * npr + ibl * QK_K + 32 * ib);
        }
    }
}

// q4_k_r4 / q5_k_r4 scale and min: k_r4_scale_min (quants-blocks-interleaved.h).

void iq5_k_r4_to_float(const void * vx, float * y, int64_t n) {
    r4_superblocks_to_float<iq5_k_r4_block>(vx, y, n, [](const iq5_k_r4_block & b, const float *, int k, int ib, float * yr) {
        const float d = GGML_FP16_TO_FP32(b.d[k]);
        const float dl1 = d * (split_scale6(b.scales_l, b.scales_h, 8 * ib + k) - 32);
        const float dl2 = d * (split_scale6(b.scales_l, b.scales_h, 8 * ib + k + 4) - 32);
        const int8_t * v1 = ik_iq5nl_values + ((b.extra[k] >> ib) & 1) * 32;
        const int8_t * v2 = ik_iq5nl_values + ((b.extra[k + 4] >> ib) & 1) * 32;
        for (int p = 0; p < 32; ++p) {
            const int h = (b.qh[16 * ib + 4 * k + p % 4] >> iq5_k_r4_hbit(p)) & 1;
            const int l = r4_nibble(b.qs + 64 * ib, k, p) | (h << 4);
            yr[p] = p < 16 ? dl1 * v1[l] : dl2 * v2[l];
        }
    });
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

// q4_0_r8 and mxfp4_r8: per 32-value block, a scale per row, then four quarters of 32 bytes, row
// k's four bytes at 4 k; byte i of quarter l holds values 4 l + i (low nibble) and 16 + 4 l + i.
template <typename Block, typename Scale, typename Value>
void r8_nibbles_to_float(const void * vx, float * y, int64_t n, Scale scale, Value value) {
    const int64_t npr = n / 8;
    const auto * x = (const Block *) vx;
    for (int64_t ib = 0; ib < npr / 32; ++ib) {
        for (int k = 0; k < 8; ++k) {
            const float d = scale(x[ib], k);
            float * yr = y + k * npr + 32 * ib;
            for (int l = 0; l < 4; ++l) {
                for (int i = 0; i < 4; ++i) {
                    const uint8_t q = x[ib].qs[32 * l + 4 * k + i];
                    yr[4 * l + i]      = d * value(q & 0xF);
                    yr[4 * l + i + 16] = d * value(q >> 4);
                }
            }
        }
    }
}

void q4_0_r8_to_float(const void * vx, float * y, int64_t n) {
    r8_nibbles_to_float<q4_0_r8_block>(
        vx, y, n, [](const q4_0_r8_block & b, int k) { return GGML_FP16_TO_FP32(b.d[k]); }, [](int q) { return q - 8; });
}

void mxfp4_r8_to_float(const void * vx, float * y, int64_t n) {
    r8_nibbles_to_float<mxfp4_r8_block>(
        vx, y, n, [](const mxfp4_r8_block & b, int k) { return e8m0_to_fp32_half(b.e[k]); },
        [](int q) { return (int) kvalues_mxfp4[q]; });
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
    r4_superblocks_to_float<q4_k_r4_block>(vx, y, n, [](const q4_k_r4_block & b, const float *, int k, int ib, float * yr) {
        float dl, ml;
        k_r4_scale_min(b, k, ib, dl, ml);
        for (int p = 0; p < 32; ++p) yr[p] = dl * r4_nibble(b.qs + 64 * ib, k, p) - ml;
    });
}

void q5_k_r4_to_float(const void * vx, float * y, int64_t n) {
    r4_superblocks_to_float<q5_k_r4_block>(vx, y, n, [](const q5_k_r4_block & b, const float *, int k, int ib, float * yr) {
        float dl, ml;
        k_r4_scale_min(b, k, ib, dl, ml);
        for (int p = 0; p < 32; ++p) {
            const int hb = (b.qh[16 * ib + 4 * k + p % 4] >> q5_k_r4_hbit(p)) & 1;
            yr[p] = dl * (r4_nibble(b.qs + 64 * ib, k, p) | (hb << 4)) - ml;
        }
    });
}

void q6_k_r4_to_float(const void * vx, float * y, int64_t n) {
    r4_superblocks_to_float<q6_k_r4_block>(vx, y, n, [](const q6_k_r4_block & b, const float *, int k, int ib, float * yr) {
        const float d = GGML_FP16_TO_FP32(b.d[k]);
        const float dl1 = d * b.scales[8 * ib + k], dl2 = d * b.scales[8 * ib + k + 4];
        for (int p = 0; p < 32; ++p) {
            const int h = (b.qh[32 * ib + q6_k_r4_hoff(p) + 4 * k + p % 4] >> q6_k_r4_hshift(p)) & 3;
            const int l = (r4_nibble(b.ql + 64 * ib, k, p) | (h << 4)) - 32;
            yr[p] = (p < 16 ? dl1 : dl2) * l;
        }
    });
}

// bf16_r16: 16 rows woven two columns at a time, the pair (2 i, 2 i + 1) of row k at 32 i + 2 k
// (the operand shape of a bf16 pair dot product over 16 rows).
void bf16_r16_to_float(const void * vx, float * y, int64_t n) {
    const int64_t npr = n / 16;
    const auto * x = (const ggml_bf16_t *) vx;
    for (int64_t i = 0; i < npr / 2; ++i) {
        for (int k = 0; k < 16; ++k) {
            y[k * npr + 2 * i]     = ggml_compute_bf16_to_fp32(x[32 * i + 2 * k]);
            y[k * npr + 2 * i + 1] = ggml_compute_bf16_to_fp32(x[32 * i + 2 * k + 1]);
        }
    }
}

// q5_0_r4 / q6_0_r4: the reference writes d * q + m with m = -16 d (-32 d); both products are
// exact in float, so this equals the plain types' (q - 16) * d but for the sign of a zero (+0
// here, -0 there for a negative d; test-quants-blocks-interleaved).
void q5_0_r4_to_float(const void * vx, float * y, int64_t n) {
    const int64_t npr = n / 4;
    const auto * x = (const q5_0_r4_block *) vx;
    for (int64_t ib = 0; ib < npr / 32; ++ib) {
        for (int k = 0; k < 4; ++k) {
            const float d = GGML_FP16_TO_FP32(x[ib].d[k]), m = -16 * d;
            for (int p = 0; p < 32; ++p) {
                const int h = (x[ib].qh[4 * k + p % 4] >> q5_0_r4_hbit(p)) & 1;
                y[k * npr + 32 * ib + p] = d * (r4_nibble(x[ib].qs, k, p) | (h << 4)) + m;
            }
        }
    }
}

void q6_0_r4_to_float(const void * vx, float * y, int64_t n) {
    const int64_t npr = n / 4;
    const auto * x = (const q6_0_r4_block *) vx;
    for (int64_t ib = 0; ib < npr / 32; ++ib) {
        for (int k = 0; k < 4; ++k) {
            const float d = GGML_FP16_TO_FP32(x[ib].d[k]), m = -32 * d;
            for (int p = 0; p < 32; ++p) {
                const int h = (x[ib].qh[q6_0_r4_hoff(p) + 4 * k + p % 4] >> q6_0_r4_hshift(p)) & 3;
                y[k * npr + 32 * ib + p] = d * (r4_nibble(x[ib].qs, k, p) | (h << 4)) + m;
            }
        }
    }
}

inline int r4_crumb(const uint8_t * q, int k, int p) { return (q[r4_crumb_byte(k, p)] >> r4_crumb_shift(p)) & 3; }

void q2_k_r4_to_float(const void * vx, float * y, int64_t n) {
    r4_superblocks_to_float<q2_k_r4_block>(vx, y, n, [](const q2_k_r4_block & b, const float *, int k, int ib, float * yr) {
        const float d = GGML_FP16_TO_FP32(b.d[k]), m = GGML_FP16_TO_FP32(b.d[k + 4]);
        for (int half = 0; half < 2; ++half) {
            const uint8_t s = b.scales[8 * ib + k + 4 * half];
            const float dl = d * (s & 0xF), ml = m * (s >> 4);
            for (int p = 16 * half; p < 16 * half + 16; ++p) yr[p] = dl * r4_crumb(b.qs + 32 * ib, k, p) - ml;
        }
    });
}

void q3_k_r4_to_float(const void * vx, float * y, int64_t n) {
    r4_superblocks_to_float<q3_k_r4_block>(vx, y, n, [](const q3_k_r4_block & b, const float *, int k, int ib, float * yr) {
        const float d = GGML_FP16_TO_FP32(b.d[k]);
        const uint8_t * qh = b.qh + 16 * ib + 4 * k;
        for (int half = 0; half < 2; ++half) {
            const float dl = d * (split_scale6(b.scales_l, b.scales_h, 8 * ib + k + 4 * half) - 32);
            for (int p = 16 * half; p < 16 * half + 16; ++p) {
                const int l = r4_crumb(b.qs + 32 * ib, k, p) | (((qh[p % 4] >> (p / 4)) & 1) << 2);
                yr[p] = dl * (l - 4);
            }
        }
    });
}

void iq5_ks_r4_to_float(const void * vx, float * y, int64_t n) {
    r4_superblocks_to_float<iq5_ks_r4_block, 4>(vx, y, n, [](const iq5_ks_r4_block & b, const float * row_d, int k, int ib, float * yr) {
        const uint8_t sc = b.scales[4 * ib + k];
        const float dl = row_d[k] * ((sc & 254) - 127);
        const int8_t * v = ik_iq5nl_values + (sc & 1) * 32;
        for (int p = 0; p < 32; ++p) {
            const int h = (b.qh[16 * ib + 4 * k + p % 4] >> iq5_k_r4_hbit(p)) & 1;
            yr[p] = dl * v[r4_nibble(b.qs + 64 * ib, k, p) | (h << 4)];
        }
    });
}

// q8_k_r8 / q8_k_r16: fp16 row scales, then 4-value runs of the R rows; the r16 form stores
// value + 128 as unsigned (the reference decodes it as d * u - 128 d).
template <int R>
void q8_k_rn_to_float(const void * vx, float * y, int64_t n) {
    const int64_t npr = n / R;
    const size_t block = 2 * R + R * QK_K;
    for (int64_t ibl = 0; ibl < npr / QK_K; ++ibl) {
        const uint8_t * b = (const uint8_t *) vx + ibl * block;
        const uint8_t * qs = b + 2 * R;
        for (int k = 0; k < R; ++k) {
            ggml_fp16_t h;
            std::memcpy(&h, b + 2 * k, 2);
            const float d = GGML_FP16_TO_FP32(h);
            float * yr = y + k * npr + ibl * QK_K;
            for (int j = 0; j < QK_K; ++j) {
                const uint8_t q = qs[R * 4 * (j / 4) + 4 * k + j % 4];
                if constexpr (R == 16) yr[j] = d * q + (-128.f * d);
                else yr[j] = d * (int8_t) q;
            }
        }
    }
}

// q8_KV_r8: 8 f32 row scales, then per 16 values four 4-value runs of the 8 rows.
void q8_KV_r8_to_float(const void * vx, float * y, int64_t n) {
    const int64_t npr = n / 8;
    const float * dptr = (const float *) vx;
    const int8_t * q8 = (const int8_t *) (dptr + 8);
    for (int64_t ib = 0; ib < npr / 16; ++ib) {
        for (int k = 0; k < 8; ++k) {
            for (int l = 0; l < 4; ++l) {
                for (int i = 0; i < 4; ++i) y[k * npr + 16 * ib + 4 * l + i] = dptr[k] * q8[128 * ib + 32 * l + 4 * k + i];
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Batch products of q4_k_r4 / q5_k_r4 / q6_k_r4 with q8_0 activations (their twins' batch pair,
// cpu-traits.h): row k of a woven super-block in the plain k-quants' decoded form, then the plain
// scalar batch kernel's arithmetic (k_block_dot_q8_0), so that a repacked model's batch products
// are its original's bit for bit. The SIMD levels read the woven groups in the panel gemm
// (avx2/panel-r8-k.h, avx512/panel-r16-k.h) with the same records as the twins' batch kernels.

// q4_k_r4 / q5_k_r4: the 6-bit scale and min of slot 4 ib + k (k_r4_scale_min's bits).
template <typename Block>
void k_r4_decoded_coefs(const Block & b, int k, k_block_decoded & out) {
    for (int ib = 0; ib < 8; ++ib) {
        const int is = 4 * ib + k;
        const int h = b.scales_h[is % 16] >> 4 * (is / 16);
        out.s[2 * ib] = out.s[2 * ib + 1] = (int16_t) ((b.scales_l[is] & 0xF) | ((h & 3) << 4));
        out.mi[2 * ib] = out.mi[2 * ib + 1] = (int16_t) ((b.scales_l[is] >> 4) | ((h & 0xC) << 2));
    }
    out.d = GGML_FP16_TO_FP32(b.d[k]);
    out.dm = GGML_FP16_TO_FP32(b.d[k + 4]);
}

void q4_k_r4_decoded(const q4_k_r4_block & b, int k, k_block_decoded & out) {
    for (int ib = 0; ib < 8; ++ib) {
        for (int p = 0; p < 32; ++p) out.u[32 * ib + p] = (uint8_t) r4_nibble(b.qs + 64 * ib, k, p);
    }
    k_r4_decoded_coefs(b, k, out);
}

void q5_k_r4_decoded(const q5_k_r4_block & b, int k, k_block_decoded & out) {
    for (int ib = 0; ib < 8; ++ib) {
        for (int p = 0; p < 32; ++p) {
            const int hb = (b.qh[16 * ib + 4 * k + p % 4] >> q5_k_r4_hbit(p)) & 1;
            out.u[32 * ib + p] = (uint8_t) (r4_nibble(b.qs + 64 * ib, k, p) | (hb << 4));
        }
    }
    k_r4_decoded_coefs(b, k, out);
}

// q6_k_r4: levels u = q + 32, the offset folded into mi as q6_K's decoder does.
void q6_k_r4_decoded(const q6_k_r4_block & b, int k, k_block_decoded & out) {
    for (int ib = 0; ib < 8; ++ib) {
        for (int p = 0; p < 32; ++p) {
            const int h = (b.qh[32 * ib + q6_k_r4_hoff(p) + 4 * k + p % 4] >> q6_k_r4_hshift(p)) & 3;
            out.u[32 * ib + p] = (uint8_t) (r4_nibble(b.ql + 64 * ib, k, p) | (h << 4));
        }
        for (int half = 0; half < 2; ++half) {
            const int g = 2 * ib + half, sc = b.scales[8 * ib + k + 4 * half];
            out.s[g] = (int16_t) sc;
            out.mi[g] = (int16_t) (32 * sc);
        }
    }
    out.d = out.dm = GGML_FP16_TO_FP32(b.d[k]);
}

template <typename Block, void (*Decoded)(const Block &, int, k_block_decoded &)>
void k_r4_gemm_q8_0(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
                    size_t dst_stride, int nr, int nc) {
    GGML_ASSERT(nr % 4 == 0 && n % QK_K == 0);
    const int64_t nb = n / QK_K;
    const size_t row_size = nb * sizeof(Block) / 4;
    k_block_decoded blk;
    for (int r0 = 0; r0 < nr; r0 += 4) {
        const auto * g = (const Block *) ggml_cpu_contiguous_group((const char *) w + r0 * w_stride, w_stride, row_size, 4);
        for (int k = 0; k < 4; ++k) {
            for (int c = 0; c < nc; ++c) {
                const auto * a = (const block_q8_0 *) ((const char *) x + c * x_stride);
                float sum = 0.0f;
                for (int64_t b = 0; b < nb; ++b) {
                    Decoded(g[b], k, blk);
                    sum = k_block_dot_q8_0(blk, a + b * (QK_K / QK8_0), sum);
                }
                dst[c * dst_stride + r0 + k] = sum;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// gemms

void iq4_k_r4_row_adapter(const iq4_k_r4_block & b, float, int k, ik_decoded & out) { iq4_k_r4_row(b, k, out); }

// A 4-row layout decoded through a row decoder into the common ik form.
template <ggml_type T, typename Block, void (*row_decode)(const Block &, float, int, ik_decoded &)>
void register_r4_ik() {
    register_float_path<T>(r4_ik_to_float<Block, row_decode>);
}

void register_interleaved_types() {
    register_float_path<GGML_TYPE_IQ4_NL_R4>(iq4_nl_r4_to_float);
    register_float_path<GGML_TYPE_IQ4_XS_R8>(iq4_xs_r8_to_float);
    register_float_path<GGML_TYPE_Q4_0_R8>(q4_0_r8_to_float);
    register_float_path<GGML_TYPE_MXFP4_R8>(mxfp4_r8_to_float);
    register_float_path<GGML_TYPE_Q8_0_R8>(q8_0_r8_to_float);
    register_float_path<GGML_TYPE_Q4_K_R4>(q4_k_r4_to_float);
    register_float_path<GGML_TYPE_Q5_K_R4>(q5_k_r4_to_float);
    register_float_path<GGML_TYPE_Q6_K_R4>(q6_k_r4_to_float);
    register_float_path<GGML_TYPE_IQ5_K_R4>(iq5_k_r4_to_float);
    register_float_path<GGML_TYPE_BF16_R16>(bf16_r16_to_float);
    register_float_path<GGML_TYPE_Q5_0_R4>(q5_0_r4_to_float);
    register_float_path<GGML_TYPE_Q6_0_R4>(q6_0_r4_to_float);
    register_float_path<GGML_TYPE_Q2_K_R4>(q2_k_r4_to_float);
    register_float_path<GGML_TYPE_Q3_K_R4>(q3_k_r4_to_float);
    register_float_path<GGML_TYPE_IQ5_KS_R4>(iq5_ks_r4_to_float);
    register_float_path<GGML_TYPE_Q8_K_R8>(q8_k_rn_to_float<8>);
    register_float_path<GGML_TYPE_Q8_K_R16>(q8_k_rn_to_float<16>);
    register_float_path<GGML_TYPE_Q8_KV_R8>(q8_KV_r8_to_float);
    // plain q8_KV (the r8 twin's base, also a KV-cache type) runs the same decoded float gemm
    register_float_path<GGML_TYPE_Q8_KV>(q8_KV_to_float);

    register_r4_ik<GGML_TYPE_IQ2_K_R4, iq2_k_r4_block, iq2_k_r4_row>();
    register_r4_ik<GGML_TYPE_IQ3_K_R4, iq3_k_r4_block, iq3_k_r4_row>();
    register_r4_ik<GGML_TYPE_IQ4_K_R4, iq4_k_r4_block, iq4_k_r4_row_adapter>();
    register_float_path<GGML_TYPE_IQ4_KS_R4>(iq4_ks_r4_to_float);

    ggml_cpu_register_batch_gemm(GGML_TYPE_Q4_K_R4, GGML_CPU_ISA_SCALAR, GGML_TYPE_Q8_0, k_r4_gemm_q8_0<q4_k_r4_block, q4_k_r4_decoded>);
    ggml_cpu_register_batch_gemm(GGML_TYPE_Q5_K_R4, GGML_CPU_ISA_SCALAR, GGML_TYPE_Q8_0, k_r4_gemm_q8_0<q5_k_r4_block, q5_k_r4_decoded>);
    ggml_cpu_register_batch_gemm(GGML_TYPE_Q6_K_R4, GGML_CPU_ISA_SCALAR, GGML_TYPE_Q8_0, k_r4_gemm_q8_0<q6_k_r4_block, q6_k_r4_decoded>);
}
GGML_REGISTER(register_interleaved_types);

} // namespace
