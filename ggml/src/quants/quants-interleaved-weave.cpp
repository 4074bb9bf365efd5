// Quantizers of the row-interleaved layouts: quantize R rows with the plain twin
// (ggml_type_traits::interleaved_base), then weave them into the interleaved group. This is the
// reference's own recipe, so an interleaved type's quality is exactly its twin's, imatrix included,
// and the weaving is lossless (tests/test-quants-interleaved.cpp decodes both and compares).
//
// Each weaver is the inverse of the decoder in quants-interleaved.cpp: it reads the twin's blocks
// in their natural value order and stores every level, scale and flag where that decoder looks
// for it. Output groups are zeroed first, so weavers OR bits in.
#include "quants-interleaved.h"
#include "quants-legacy.h"

#include <cstring>
#include <vector>

namespace {

// The blocks of twin row k at block index i.
template <typename Block>
const Block & at(const char * const * rows, int k, int64_t i, size_t meta = 0) {
    return ((const Block *) (rows[k] + meta))[i];
}

// ---------------------------------------------------------------------------------------------
// 32-value legacy blocks

// q4_0_r8 / mxfp4_r8: a 32-value block's 16 nibble bytes in four 4-byte runs, row k's at 4 k of
// each 32-byte quarter; the row scale (fp16 d, e8m0 e) goes to slot k.
template <typename Twin, typename Woven, typename Scale>
void weave_nibbles_r8(const char * const * rows, int64_t n, char * group, Scale scale) {
    auto * y = (Woven *) group;
    for (int64_t ib = 0; ib < n / 32; ++ib) {
        for (int k = 0; k < 8; ++k) {
            const auto & b = at<Twin>(rows, k, ib);
            scale(y[ib], k, b);
            for (int l = 0; l < 4; ++l) std::memcpy(y[ib].qs + 32 * l + 4 * k, b.qs + 4 * l, 4);
        }
    }
}

void weave_q4_0_r8(const char * const * rows, int64_t n, char * group) {
    weave_nibbles_r8<block_q4_0, q4_0_r8_block>(rows, n, group,
                                                [](q4_0_r8_block & y, int k, const block_q4_0 & b) { y.d[k] = b.d; });
}

void weave_mxfp4_r8(const char * const * rows, int64_t n, char * group) {
    weave_nibbles_r8<block_mxfp4, mxfp4_r8_block>(rows, n, group,
                                                  [](mxfp4_r8_block & y, int k, const block_mxfp4 & b) { y.e[k] = b.e; });
}

void weave_q8_0_r8(const char * const * rows, int64_t n, char * group) {
    auto * y = (q8_0_r8_block *) group;
    for (int64_t ib = 0; ib < n / QK8_0; ++ib) {
        for (int k = 0; k < 8; ++k) {
            const auto & b = at<block_q8_0>(rows, k, ib);
            y[ib].d[k] = b.d;
            for (int l = 0; l < 4; ++l) {
                std::memcpy(y[ib].qs + 32 * l + 4 * k, b.qs + 4 * l, 4);
                std::memcpy(y[ib].qs + 128 + 32 * l + 4 * k, b.qs + 16 + 4 * l, 4);
            }
        }
    }
}

// The iq4 families store 32 values in 16 bytes, value j in the low nibble of byte j and value
// j + 16 in its high nibble; move them into row k of a 4-row nibble group.
void put_iq4_nibbles(const uint8_t * qs, int k, uint8_t * group) {
    for (int j = 0; j < 16; ++j) {
        r4_put_nibble(group, k, j, qs[j] & 0xF);
        r4_put_nibble(group, k, j + 16, qs[j] >> 4);
    }
}

void weave_iq4_nl_r4(const char * const * rows, int64_t n, char * group) {
    auto * y = (iq4_nl_r4_block *) group;
    for (int64_t ib = 0; ib < n / QK4_NL; ++ib) {
        for (int k = 0; k < 4; ++k) {
            const auto & b = at<block_iq4_nl>(rows, k, ib);
            y[ib].d[k] = b.d;
            put_iq4_nibbles(b.qs, k, y[ib].qs);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 256-value blocks

void weave_iq4_xs_r8(const char * const * rows, int64_t n, char * group) {
    auto * y = (iq4_xs_r8_block *) group;
    for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
        for (int k = 0; k < 8; ++k) {
            const auto & b = at<block_iq4_xs>(rows, k, ibl);
            y[ibl].d[k] = b.d;
            for (int ib = 0; ib < 8; ++ib) {
                const int ls = ((b.scales_l[ib / 2] >> 4 * (ib % 2)) & 0xF) | (((b.scales_h >> 2 * ib) & 3) << 4);
                put_split_scale6(y[ibl].scales_l, y[ibl].scales_h, 8 * ib + k, ls);
                // position v = 8 l + 4 h + i sits in nibble h of byte 128 ib + 32 l + 4 k + i
                for (int v = 0; v < 32; ++v) {
                    const int q = v < 16 ? b.qs[16 * ib + v] & 0xF : b.qs[16 * ib + v - 16] >> 4;
                    const int l = v / 8, h = (v / 4) % 2, i = v % 4;
                    y[ibl].qs[128 * ib + 32 * l + 4 * k + i] |= (uint8_t) (h ? q << 4 : q);
                }
            }
        }
    }
}

// q4_k_r4 / q5_k_r4 scale slot 4 ib + k: scale and min low nibbles in one byte, their top two
// bits in a nibble of scales_h.
template <typename RBlock>
void put_k4_scale_min(RBlock & y, int is, int sc, int m) {
    y.scales_l[is] = (uint8_t) ((sc & 0xF) | ((m & 0xF) << 4));
    y.scales_h[is % 16] |= (uint8_t) (((sc >> 4) | ((m >> 4) << 2)) << 4 * (is / 16));
}

// q4_K / q5_K level v (low 4 bits) of a block: sub-block pairs share 32 bytes, low nibble first.
inline int k4_low(const uint8_t * qs, int v) { return (qs[32 * (v / 64) + v % 32] >> 4 * ((v / 32) % 2)) & 0xF; }

// q4_K and q5_K share scales, mins and low nibbles; q5_K adds a fifth bit per value (qh[l] bit ib).
template <typename Plain, typename RBlock, bool FifthBit>
void weave_k45_r4(const char * const * rows, int64_t n, char * group) {
    auto * y = (RBlock *) group;
    for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
        for (int k = 0; k < 4; ++k) {
            const auto & b = at<Plain>(rows, k, ibl);
            y[ibl].d[k] = b.d;
            y[ibl].d[k + 4] = b.dmin;
            for (int ib = 0; ib < 8; ++ib) {
                uint8_t sc, m;
                k4_scale_min(ib, b.scales, sc, m);
                put_k4_scale_min(y[ibl], 4 * ib + k, sc, m);
                for (int p = 0; p < 32; ++p) {
                    r4_put_nibble(y[ibl].qs + 64 * ib, k, p, k4_low(b.qs, 32 * ib + p));
                    if constexpr (FifthBit) {
                        y[ibl].qh[16 * ib + 4 * k + p % 4] |= (uint8_t) (((b.qh[p] >> ib) & 1) << q5_k_r4_hbit(p));
                    }
                }
            }
        }
    }
}
void weave_q4_k_r4(const char * const * rows, int64_t n, char * group) { weave_k45_r4<block_q4_K, q4_k_r4_block, false>(rows, n, group); }
void weave_q5_k_r4(const char * const * rows, int64_t n, char * group) { weave_k45_r4<block_q5_K, q5_k_r4_block, true>(rows, n, group); }

// q6_K level v (0..63 unsigned): halves of 128 with 64 ql and 32 qh bytes; quarter j of a half
// takes nibble j / 2 of ql[l + 32 (j % 2)] and bits 2 j of qh[l].
inline int q6_level(const block_q6_K & b, int v) {
    const int half = v / 128, j = (v % 128) / 32, l = v % 32;
    const uint8_t * ql = b.ql + 64 * half;
    const uint8_t * qh = b.qh + 32 * half;
    return ((ql[l + 32 * (j % 2)] >> 4 * (j / 2)) & 0xF) | (((qh[l] >> 2 * j) & 3) << 4);
}

void weave_q6_k_r4(const char * const * rows, int64_t n, char * group) {
    auto * y = (q6_k_r4_block *) group;
    for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
        for (int k = 0; k < 4; ++k) {
            const auto & b = at<block_q6_K>(rows, k, ibl);
            y[ibl].d[k] = b.d;
            for (int ib = 0; ib < 8; ++ib) {
                y[ibl].scales[8 * ib + k] = b.scales[2 * ib];
                y[ibl].scales[8 * ib + k + 4] = b.scales[2 * ib + 1];
                for (int p = 0; p < 32; ++p) {
                    const int q = q6_level(b, 32 * ib + p);
                    r4_put_nibble(y[ibl].ql + 64 * ib, k, p, q & 0xF);
                    y[ibl].qh[32 * ib + q6_k_r4_hoff(p) + 4 * k + p % 4] |= (uint8_t) ((q >> 4) << q6_k_r4_hshift(p));
                }
            }
        }
    }
}

// iq4_k / iq5_k: per 32-value sub-block ib two 6-bit scales (low nibbles in scales_l[ib], top
// bits in scales_h[ib / 2]) and two shifted-grid bits (extra bits 2 ib, 2 ib + 1); in the r4
// form they go to slots 8 ib + k (+ 4) and bit ib of extra[k] (extra[k + 4]).
template <typename Plain, typename RBlock>
void weave_ik_scales(const Plain & b, int k, int ib, RBlock & y) {
    const int sh = b.scales_h[ib / 2] >> 4 * (ib % 2);
    for (int half = 0; half < 2; ++half) {
        const int s = ((b.scales_l[ib] >> 4 * half) & 0xF) | (((sh >> 2 * half) & 3) << 4);
        put_split_scale6(y.scales_l, y.scales_h, 8 * ib + k + 4 * half, s);
        if ((b.extra >> (2 * ib + half)) & 1) y.extra[k + 4 * half] |= (uint8_t) (1 << ib);
    }
}

void weave_iq4_k_r4(const char * const * rows, int64_t n, char * group) {
    auto * y = (iq4_k_r4_block *) group;
    for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
        for (int k = 0; k < 4; ++k) {
            const auto & b = at<block_iq4_k>(rows, k, ibl);
            y[ibl].d[k] = b.d;
            for (int ib = 0; ib < 8; ++ib) {
                weave_ik_scales(b, k, ib, y[ibl]);
                put_iq4_nibbles(b.qs + 16 * ib, k, y[ibl].qs + 64 * ib);
            }
        }
    }
}

// iq5_k levels: 64-value quarters of 32 qs bytes (low nibbles first) and qh bits 2 ib64 (+1).
template <typename Block>
inline int iq5_level(const Block & b, int v) {
    const int ib64 = v / 64, t = (v % 64) / 16, j = v % 16 + 16 * (t % 2);
    const int lo = (b.qs[32 * ib64 + j] >> 4 * (t / 2)) & 0xF;
    return lo | (((b.qh[j] >> (2 * ib64 + t / 2)) & 1) << 4);
}

void weave_iq5_k_r4(const char * const * rows, int64_t n, char * group) {
    auto * y = (iq5_k_r4_block *) group;
    for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
        for (int k = 0; k < 4; ++k) {
            const auto & b = at<block_iq5_k>(rows, k, ibl);
            y[ibl].d[k] = b.d;
            for (int ib = 0; ib < 8; ++ib) {
                weave_ik_scales(b, k, ib, y[ibl]);
                for (int p = 0; p < 32; ++p) {
                    const int q = iq5_level(b, 32 * ib + p);
                    r4_put_nibble(y[ibl].qs + 64 * ib, k, p, q & 0xF);
                    y[ibl].qh[16 * ib + 4 * k + p % 4] |= (uint8_t) ((q >> 4) << iq5_k_r4_hbit(p));
                }
            }
        }
    }
}

// iq2_k / iq3_k low levels: 2 bits of qs[32 (ib / 4) + j] at 2 (ib % 4) for value 32 ib + j.
inline int ik_crumb(const uint8_t * qs, int v) { return (qs[32 * (v / 128) + v % 32] >> 2 * ((v / 32) % 4)) & 3; }

template <typename RBlock>
void put_crumbs(const uint8_t * qs, int k, int ib, RBlock & y) {
    for (int p = 0; p < 32; ++p) y.qs[32 * ib + r4_crumb_byte(k, p)] |= (uint8_t) (ik_crumb(qs, 32 * ib + p) << r4_crumb_shift(p));
}

// The same from 32 natural-order levels (only their two low bits are stored).
void put_crumbs_levels(const uint8_t * u, int k, uint8_t * q) {
    for (int p = 0; p < 32; ++p) q[r4_crumb_byte(k, p)] |= (uint8_t) ((u[p] & 3) << r4_crumb_shift(p));
}

void weave_iq2_k_r4(const char * const * rows, int64_t n, char * group) {
    auto * y = (iq2_k_r4_block *) group;
    for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
        for (int k = 0; k < 4; ++k) {
            const auto & b = at<block_iq2_k>(rows, k, ibl);
            y[ibl].d[k] = b.d;
            for (int ib = 0; ib < 8; ++ib) {
                for (int half = 0; half < 2; ++half) {
                    const int is = 8 * ib + k + 4 * half;
                    y[ibl].scales[is % 32] |= (uint8_t) (((b.scales[ib] >> 4 * half) & 0xF) << 4 * (is / 32));
                    if ((b.extra >> (2 * ib + half)) & 1) y[ibl].extra[k + 4 * half] |= (uint8_t) (1 << ib);
                }
                put_crumbs(b.qs, k, ib, y[ibl]);
            }
        }
    }
}

void weave_iq3_k_r4(const char * const * rows, int64_t n, char * group) {
    auto * y = (iq3_k_r4_block *) group;
    for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
        for (int k = 0; k < 4; ++k) {
            const auto & b = at<block_iq3_k>(rows, k, ibl);
            y[ibl].d[k] = b.d;
            for (int ib = 0; ib < 8; ++ib) {
                for (int half = 0; half < 2; ++half) {
                    const int is = 8 * ib + k + 4 * half;
                    y[ibl].scales_l[is % 32] |= (uint8_t) (((b.scales_l[ib] >> 4 * half) & 0xF) << 4 * (is / 32));
                    y[ibl].scales_h[is % 8] |= (uint8_t) (((b.scales_h >> (2 * ib + half)) & 1) << (is / 8));
                    if ((b.extra >> (2 * ib + half)) & 1) y[ibl].extra[k + 4 * half] |= (uint8_t) (1 << ib);
                }
                put_crumbs(b.qs, k, ib, y[ibl]);
                for (int p = 0; p < 32; ++p) {
                    y[ibl].qh[16 * ib + 4 * k + p % 4] |= (uint8_t) (((b.qh[p] >> ib) & 1) << (p / 4));
                }
            }
        }
    }
}

// iq4_ks_r4: the four row scales (f32) lead the group, then the woven blocks.
void weave_iq4_ks_r4(const char * const * rows, int64_t n, char * group) {
    for (int k = 0; k < 4; ++k) std::memcpy(group + 4 * k, rows[k], 4);
    auto * y = (iq4_ks_r4_block *) (group + 16);
    for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
        for (int k = 0; k < 4; ++k) {
            const auto & b = at<block_iq4_ks>(rows, k, ibl, 4);
            for (int ib = 0; ib < 8; ++ib) {
                y[ibl].scales[4 * ib + k] = b.scales[ib];
                put_iq4_nibbles(b.qs + 16 * ib, k, y[ibl].qs + 64 * ib);
            }
        }
    }
}

// bf16_r16: column pairs of the 16 rows side by side (see bf16_r16_to_float).
void weave_bf16_r16(const char * const * rows, int64_t n, char * group) {
    auto * y = (ggml_bf16_t *) group;
    for (int64_t i = 0; i < n / 2; ++i) {
        for (int k = 0; k < 16; ++k) std::memcpy(y + 32 * i + 2 * k, rows[k] + 4 * i, 4);
    }
}

// q5_0 / q6_0: the natural-order levels of a block (5 or 6 bits), then r4 nibbles plus high bits.
void q5_0_levels(const block_q5_0 & b, uint8_t * L) {
    uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    for (int j = 0; j < 16; ++j) {
        L[j]      = (uint8_t) ((b.qs[j] & 0xF) | ((qh >> j) & 1) << 4);
        L[j + 16] = (uint8_t) ((b.qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4);
    }
}

void q6_0_levels(const block_q6_0 & b, uint8_t * L) {
    for (int j = 0; j < 16; ++j) {
        const int h = b.qh[j % 8] >> 4 * (j / 8);
        L[j]      = (uint8_t) ((b.qs[j] & 0xF) | (h & 3) << 4);
        L[j + 16] = (uint8_t) ((b.qs[j] >> 4) | ((h >> 2) & 3) << 4);
    }
}

void weave_q5_0_r4(const char * const * rows, int64_t n, char * group) {
    auto * y = (q5_0_r4_block *) group;
    uint8_t L[32];
    for (int64_t ib = 0; ib < n / QK5_0; ++ib) {
        for (int k = 0; k < 4; ++k) {
            const auto & b = at<block_q5_0>(rows, k, ib);
            y[ib].d[k] = b.d;
            q5_0_levels(b, L);
            for (int p = 0; p < 32; ++p) {
                r4_put_nibble(y[ib].qs, k, p, L[p] & 0xF);
                y[ib].qh[4 * k + p % 4] |= (uint8_t) ((L[p] >> 4) << q5_0_r4_hbit(p));
            }
        }
    }
}

void weave_q6_0_r4(const char * const * rows, int64_t n, char * group) {
    auto * y = (q6_0_r4_block *) group;
    uint8_t L[32];
    for (int64_t ib = 0; ib < n / QK6_0; ++ib) {
        for (int k = 0; k < 4; ++k) {
            const auto & b = at<block_q6_0>(rows, k, ib);
            y[ib].d[k] = b.d;
            q6_0_levels(b, L);
            for (int p = 0; p < 32; ++p) {
                r4_put_nibble(y[ib].qs, k, p, L[p] & 0xF);
                y[ib].qh[q6_0_r4_hoff(p) + 4 * k + p % 4] |= (uint8_t) ((L[p] >> 4) << q6_0_r4_hshift(p));
            }
        }
    }
}

// q2_K / q3_K: levels through the kernels' decoded form (u in natural order); 2 low bits as
// crumbs, q3_K's third bit in qh.
void weave_q2_k_r4(const char * const * rows, int64_t n, char * group) {
    auto * y = (q2_k_r4_block *) group;
    k_block_decoded db;
    for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
        for (int k = 0; k < 4; ++k) {
            const auto & b = at<block_q2_K>(rows, k, ibl);
            y[ibl].d[k] = b.d;
            y[ibl].d[k + 4] = b.dmin;
            for (int j = 0; j < 16; ++j) y[ibl].scales[4 * j + k] = b.scales[j];
            k_decode_q2_K(&b, db);
            for (int ib = 0; ib < 8; ++ib) put_crumbs_levels(db.u + 32 * ib, k, y[ibl].qs + 32 * ib);
        }
    }
}

void weave_q3_k_r4(const char * const * rows, int64_t n, char * group) {
    auto * y = (q3_k_r4_block *) group;
    k_block_decoded db;
    for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
        for (int k = 0; k < 4; ++k) {
            const auto & b = at<block_q3_K>(rows, k, ibl);
            y[ibl].d[k] = b.d;
            k_decode_q3_K(&b, db);
            for (int ib = 0; ib < 8; ++ib) {
                for (int half = 0; half < 2; ++half) {
                    put_split_scale6(y[ibl].scales_l, y[ibl].scales_h, 8 * ib + k + 4 * half, db.s[2 * ib + half] + 32);
                }
                const uint8_t * u = db.u + 32 * ib;
                put_crumbs_levels(u, k, y[ibl].qs + 32 * ib);
                for (int p = 0; p < 32; ++p) y[ibl].qh[16 * ib + 4 * k + p % 4] |= (uint8_t) (((u[p] >> 2) & 1) << (p / 4));
            }
        }
    }
}

// iq5_ks_r4: the four row scales (f32) lead the group; scale bytes copied, levels as iq5_k_r4.
void weave_iq5_ks_r4(const char * const * rows, int64_t n, char * group) {
    for (int k = 0; k < 4; ++k) std::memcpy(group + 4 * k, rows[k], 4);
    auto * y = (iq5_ks_r4_block *) (group + 16);
    for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
        for (int k = 0; k < 4; ++k) {
            const auto & b = at<block_iq5_ks>(rows, k, ibl, 4);
            for (int ib = 0; ib < 8; ++ib) {
                y[ibl].scales[4 * ib + k] = b.scales[ib];
                for (int p = 0; p < 32; ++p) {
                    const int q = iq5_level(b, 32 * ib + p);
                    r4_put_nibble(y[ibl].qs + 64 * ib, k, p, q & 0xF);
                    y[ibl].qh[16 * ib + 4 * k + p % 4] |= (uint8_t) ((q >> 4) << iq5_k_r4_hbit(p));
                }
            }
        }
    }
}

// q8_k_r8 / q8_k_r16 from q8_K rows: the f32 scale rounded to fp16 (as the reference does, so
// these are not lossless weaves), values in 4-value runs; r16 stores value + 128.
template <int R>
void weave_q8_k_rn(const char * const * rows, int64_t n, char * group) {
    const size_t block = 2 * R + R * QK_K;
    for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
        uint8_t * y = (uint8_t *) group + ibl * block;
        for (int k = 0; k < R; ++k) {
            const auto & b = at<block_q8_K>(rows, k, ibl);
            const ggml_fp16_t h = GGML_FP32_TO_FP16(b.d);
            std::memcpy(y + 2 * k, &h, 2);
            for (int j = 0; j < QK_K; ++j) {
                y[2 * R + R * 4 * (j / 4) + 4 * k + j % 4] = (uint8_t) (R == 16 ? b.qs[j] + 128 : b.qs[j]);
            }
        }
    }
}

// q8_KV_r8: the eight row scales (the first f32 of each q8_KV row), then 4-value runs.
void weave_q8_KV_r8(const char * const * rows, int64_t n, char * group) {
    auto * d = (float *) group;
    auto * q8 = (int8_t *) (d + 8);
    for (int k = 0; k < 8; ++k) {
        std::memcpy(d + k, rows[k], 4);
        const auto * x = (const int8_t *) (rows[k] + 8);
        for (int64_t j = 0; j < n; ++j) q8[128 * (j / 16) + 32 * ((j % 16) / 4) + 4 * k + j % 4] = x[j];
    }
}

void register_interleaved_quantizers() {
    register_weave<GGML_TYPE_Q4_0_R8, weave_q4_0_r8>();
    register_weave<GGML_TYPE_MXFP4_R8, weave_mxfp4_r8>();
    register_weave<GGML_TYPE_Q8_0_R8, weave_q8_0_r8>();
    register_weave<GGML_TYPE_IQ4_NL_R4, weave_iq4_nl_r4>();
    register_weave<GGML_TYPE_IQ4_XS_R8, weave_iq4_xs_r8>();
    register_weave<GGML_TYPE_Q4_K_R4, weave_q4_k_r4>();
    register_weave<GGML_TYPE_Q5_K_R4, weave_q5_k_r4>();
    register_weave<GGML_TYPE_Q6_K_R4, weave_q6_k_r4>();
    register_weave<GGML_TYPE_IQ2_K_R4, weave_iq2_k_r4>();
    register_weave<GGML_TYPE_IQ3_K_R4, weave_iq3_k_r4>();
    register_weave<GGML_TYPE_IQ4_K_R4, weave_iq4_k_r4>();
    register_weave<GGML_TYPE_IQ5_K_R4, weave_iq5_k_r4>();
    register_weave<GGML_TYPE_IQ4_KS_R4, weave_iq4_ks_r4>();
    register_weave<GGML_TYPE_BF16_R16, weave_bf16_r16>();
    register_weave<GGML_TYPE_Q5_0_R4, weave_q5_0_r4>();
    register_weave<GGML_TYPE_Q6_0_R4, weave_q6_0_r4>();
    register_weave<GGML_TYPE_Q2_K_R4, weave_q2_k_r4>();
    register_weave<GGML_TYPE_Q3_K_R4, weave_q3_k_r4>();
    register_weave<GGML_TYPE_IQ5_KS_R4, weave_iq5_ks_r4>();
    register_weave<GGML_TYPE_Q8_K_R8, weave_q8_k_rn<8>>();
    register_weave<GGML_TYPE_Q8_K_R16, weave_q8_k_rn<16>>();
    register_weave<GGML_TYPE_Q8_KV_R8, weave_q8_KV_r8>();
}
GGML_REGISTER(register_interleaved_quantizers);

} // namespace
