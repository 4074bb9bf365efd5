// Grids as code planes for the VBMI kernels (avx512/quants-iq-vbmi.cpp, the plain lattice types;
// avx512/quants-interleaved-vbmi.cpp, their r4 layouts): each grid byte takes one of a few levels
// (iq2: 3, iq3: 8), so an entry is a 16-bit code (2 or 4 bits a value) whose two bytes are two
// planes of 256 or 512 bytes, 4 or 8 registers each, looked up 64 indices at a time by vpermi2b.
// Only files compiled with -mavx512vbmi include this; each gets its own copy (anonymous namespace).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace {

// A grid's code planes: entry i's code (value v in bits c v .. c v + c - 1, c = 16 / values an
// entry) is plane[0][i] | plane[1][i] << 8; level[j] is the level of code j mod 2^c.
template <int N>
struct grid_planes {
    alignas(64) uint8_t plane[2][N];
    alignas(64) uint8_t level[64];
};

// A type's planes, filled by the register function (zero-initialized storage: no static
// initializer in this folder).
template <typename Block, int N>
grid_planes<N> & planes_of() {
    static grid_planes<N> p;
    return p;
}

// The planes of an N-entry grid, false where its bytes take more than 2^c levels.
template <typename Grid, int N>
bool make_planes(const Grid * grid, grid_planes<N> & t) {
    constexpr int V = (int) sizeof(Grid), c = 16 / V;
    uint8_t levels[1 << c];
    int n = 0;
    for (int i = 0; i < N; ++i) {
        uint32_t code = 0;
        for (int v = 0; v < V; ++v) {
            const uint8_t byte = (uint8_t) (grid[i] >> 8 * v);
            int j = 0;
            while (j < n && levels[j] != byte) ++j;
            if (j == n) {
                if (n == (1 << c)) return false;
                levels[n++] = byte;
            }
            code |= (uint32_t) j << c * v;
        }
        t.plane[0][i] = (uint8_t) code;
        t.plane[1][i] = (uint8_t) (code >> 8);
    }
    for (int j = 0; j < 64; ++j) t.level[j] = j % (1 << c) < n ? levels[j % (1 << c)] : 0;
    return true;
}

// Plane bytes t[q] of 64 byte indices q (a 256-entry plane: two vpermi2b and a blend on bit 7).
inline __m512i plane_bytes(const uint8_t * t, __m512i q) {
    const __m512i lo = _mm512_permutex2var_epi8(_mm512_load_si512(t), q, _mm512_load_si512(t + 64));
    const __m512i hi = _mm512_permutex2var_epi8(_mm512_load_si512(t + 128), q, _mm512_load_si512(t + 192));
    return _mm512_mask_blend_epi8(_mm512_movepi8_mask(q), lo, hi);
}

} // namespace
