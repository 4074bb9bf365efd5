// BitNet b1.58 types of ik_llama.cpp: IQ1_BN (id 134, 1.625 bpw), IQ2_BN (id 135, 2 bpw) and
// IQ2_BN_R4 (id 335, IQ2_BN with four rows woven). Layouts and decoders (shared with the CUDA
// kernels) are in quants-blocks.h / quants-blocks-interleaved.h; here are the encoders, the weave
// and the registration.
//
// Facts from the reference (ik_llama.cpp ggml/src/iqk/iqk_quantize.cpp, quantize_one_row_1bn /
// _2bn, repack_iq2_bn; ggml.c's type table: block 64, 13 / 16 bytes, row meta 2 / 4):
//   - the row scale is the largest magnitude of the row (iq1_bn stores it as fp16, iq2_bn as f32);
//   - a value becomes 0 when its magnitude is below half of that (the float maximum, before any
//     fp16 rounding), else its sign: levels 0 / 1 / 2 for -1 / 0 / +1. A row of zeros has
//     threshold 0, so its zeros get level 2 (+1) times scale 0, as in the reference's bytes;
//   - the importance matrix is not used (the reference ignores it: a ternary level has no
//     choice to weigh);
//   - the reference pairs these types with its q8_K64 activations (4 f32 scales per row, each for
//     the values whose index mod 16 falls in one quarter, then int8 per value). Kiln rounds their
//     activations to q8_0 (a scale per 32 values, at least as fine, and any row of 64-blocks is
//     whole q8_0 blocks), the activation type of every other 64-or-less-block weight.
#include "quants-interleaved.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace {

constexpr int QK_BN = 64;

float row_max_abs(const float * x, int64_t n) {
    float m = 0;
    for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
    return m;
}

inline int bn_level(float v, float thresh) { return std::fabs(v) < thresh ? 1 : v < 0 ? 0 : 2; }

// trits t[0..count) (0..2, t[0] the least significant) as a byte: the base-3 number over 3^5,
// scaled to 256 and rounded up (so that byte * 3^(4 - j) * 3 >> 8 gives trit j back).
inline uint8_t pack_trits_low_first(const int * t, int count) {
    int idx = 0, pow3 = 1;
    for (int j = 0; j < count; ++j, pow3 *= 3) idx += pow3 * t[j];
    return (uint8_t) ((256 * idx + 242) / 243);
}

void quantize_row_iq1_bn_ref(const float * x, void * vy, int64_t n) {
    const float max = row_max_abs(x, n), thresh = 0.5f * max;
    const ggml_fp16_t d = GGML_FP32_TO_FP16(max);
    std::memcpy(vy, &d, sizeof(d));
    auto * y = (block_iq1_bn *) ((char *) vy + sizeof(d));
    for (int64_t ib = 0; ib < n / QK_BN; ++ib, x += QK_BN) {
        int last[4];
        for (int g = 0; g < 4; ++g) {
            for (int b = 0; b < 3; ++b) {
                int t[5];
                for (int j = 0; j < 5; ++j) t[j] = bn_level(x[16 * g + 5 * b + j], thresh);
                y[ib].ql[3 * g + b] = pack_trits_low_first(t, 5);
            }
            last[g] = bn_level(x[16 * g + 15], thresh);
        }
        y[ib].extra = pack_trits_low_first(last, 4);
    }
}

void quantize_row_iq2_bn_ref(const float * x, void * vy, int64_t n) {
    const float max = row_max_abs(x, n), thresh = 0.5f * max;
    std::memcpy(vy, &max, sizeof(max));
    auto * y = (block_iq2_bn *) ((char *) vy + sizeof(max));
    for (int64_t ib = 0; ib < n / QK_BN; ++ib, x += QK_BN) {
        for (int j = 0; j < 16; ++j) {
            uint8_t q = 0;
            for (int l = 0; l < 4; ++l) q |= (uint8_t) (bn_level(x[j + 16 * l], thresh) << 2 * l);
            y[ib].qs[j] = q;
        }
    }
}

// iq2_bn_r4 from four iq2_bn rows: their f32 scales, then per block value v of row k moved from
// bits 2 (v / 16) of byte v % 16 to bits iq2_bn_r4_shift(v) of byte iq2_bn_r4_byte(k, v).
void weave_iq2_bn_r4(const char * const * rows, int64_t n, char * group) {
    for (int k = 0; k < 4; ++k) std::memcpy(group + 4 * k, rows[k], 4);
    auto * y = (iq2_bn_r4_block *) (group + 16);
    for (int64_t ib = 0; ib < n / QK_BN; ++ib) {
        for (int k = 0; k < 4; ++k) {
            const auto & b = ((const block_iq2_bn *) (rows[k] + 4))[ib];
            for (int v = 0; v < QK_BN; ++v) {
                const int level = (b.qs[v % 16] >> 2 * (v / 16)) & 3;
                y[ib].qs[iq2_bn_r4_byte(k, v)] |= (uint8_t) (level << iq2_bn_r4_shift(v));
            }
        }
    }
}

// A group of four rows (n = 4 * values per row), row by row.
void iq2_bn_r4_to_float(const void * vx, float * y, int64_t n) {
    const int64_t npr = n / 4;
    for (int k = 0; k < 4; ++k) {
        for (int64_t ch = 0; ch < npr / 32; ++ch) {
            kiln_interleaved_traits<GGML_TYPE_IQ2_BN_R4>::decode_row((const char *) vx, k, ch, y + k * npr + 32 * ch);
        }
    }
}

void register_bitnet_types() {
    ggml_type_traits_mut(GGML_TYPE_IQ1_BN)->from_float_ref = quantize_row_iq1_bn_ref;
    ggml_type_traits_mut(GGML_TYPE_IQ2_BN)->from_float_ref = quantize_row_iq2_bn_ref;
    register_weave<GGML_TYPE_IQ2_BN_R4, weave_iq2_bn_r4>();
    // products over decoded rows (q8_0 activations) where no SIMD kernel is registered
    register_float_path<GGML_TYPE_IQ1_BN>(kiln_row_to_float<GGML_TYPE_IQ1_BN>);   // quants-blocks.h, shared with the GPU
    register_float_path<GGML_TYPE_IQ2_BN>(kiln_row_to_float<GGML_TYPE_IQ2_BN>);
    register_float_path<GGML_TYPE_IQ2_BN_R4>(iq2_bn_r4_to_float);
}
GGML_REGISTER(register_bitnet_types);

} // namespace
