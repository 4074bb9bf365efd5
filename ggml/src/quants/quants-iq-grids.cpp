// The host copies of the lattice i-quant grids (IQ1_S/IQ1_M, IQ2_XXS/XS/S, IQ3_XXS/S), defined from
// the initializers of quants-iq-grid-data.h (which the CUDA kernels' copies share), and the
// quantizers' search tables built from them.
#include "quants-iq.h"
#include "quants-iq-grid-data.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace ggml_iq {

const uint64_t iq2xxs_grid[256] = KILN_IQ2XXS_GRID;
const uint64_t iq2xs_grid[512] = KILN_IQ2XS_GRID;
const uint64_t iq2s_grid[1024] = KILN_IQ2S_GRID;
const uint32_t iq3xxs_grid[256] = KILN_IQ3XXS_GRID;
const uint32_t iq3s_grid[512] = KILN_IQ3S_GRID;
const uint64_t iq1s_grid[2048] = KILN_IQ1S_GRID;

} // namespace ggml_iq

// ---- search tables of the quantizers -------------------------------------------------------
//
// The quantizers round each group of 8 (or 4) scaled magnitudes to integer levels; the packed
// level vector u (2 or 3 bits per level) either is a grid point (map[u] = entry) or not, in
// which case the candidates tried are the grid points at the nwant smallest distinct squared
// distances from it, ordered by (distance, entry) as llama.cpp does.

namespace ggml_iq {
namespace {

struct owned_search_grid {
    std::vector<int8_t>   points;
    std::vector<int32_t>  map;
    std::vector<uint16_t> neighbours;
    search_grid           view;
};

// levels: n * dim grid levels (0..max_level).
owned_search_grid build_search_grid(const std::vector<uint8_t> & levels, int n, int dim, int bits, int nwant) {
    owned_search_grid g;
    const int max_level = bits == 2 ? 2 : 7;   // what the quantizers can produce
    g.points.resize((size_t) n * dim);
    for (size_t i = 0; i < g.points.size(); ++i) g.points[i] = (int8_t) (2 * levels[i] + 1);

    const int map_size = 1 << (bits * dim);
    g.map.assign(map_size, -1);   // -1: points at the empty list at offset 0
    g.neighbours.push_back(0);
    for (int k = 0; k < n; ++k) {
        int u = 0;
        for (int i = 0; i < dim; ++i) u |= levels[(size_t) k * dim + i] << (bits * i);
        g.map[u] = k;
    }

    std::vector<int> d2(n);
    std::vector<int> count(1024);
    int8_t pos[8];
    for (int u = 0; u < map_size; ++u) {
        if (g.map[u] >= 0) continue;
        bool reachable = true;
        for (int i = 0; i < dim; ++i) {
            const int l = (u >> (bits * i)) & ((1 << bits) - 1);
            reachable = reachable && l <= max_level;
            pos[i] = (int8_t) (2 * l + 1);
        }
        if (!reachable) continue;
        std::fill(count.begin(), count.end(), 0);
        for (int k = 0; k < n; ++k) {
            const int8_t * p = g.points.data() + (size_t) k * dim;
            int d = 0;
            for (int i = 0; i < dim; ++i) d += (p[i] - pos[i]) * (p[i] - pos[i]);
            d2[k] = d;
            ++count[d];
        }
        const size_t start = g.neighbours.size();
        g.map[u] = -(int32_t) start - 1;
        g.neighbours.push_back(0);
        int have = 0;
        for (int d = 0; d < (int) count.size() && have < nwant; ++d) {
            if (!count[d]) continue;
            ++have;
            for (int k = 0; k < n; ++k) {
                if (d2[k] == d) g.neighbours.push_back((uint16_t) k);
            }
        }
        g.neighbours[start] = (uint16_t) (g.neighbours.size() - start - 1);
    }
    g.view.n = n;
    g.view.dim = dim;
    g.view.bits = bits;
    g.view.points = g.points.data();
    g.view.map = g.map.data();
    g.view.neighbours = g.neighbours.data();
    return g;
}

template <typename T>
std::vector<uint8_t> grid_levels(const T * grid, int n, int dim, int (*level_of)(uint8_t)) {
    std::vector<uint8_t> levels((size_t) n * dim);
    for (int k = 0; k < n; ++k) {
        const uint8_t * b = grid_bytes(grid, k);
        for (int i = 0; i < dim; ++i) levels[(size_t) k * dim + i] = (uint8_t) level_of(b[i]);
    }
    return levels;
}

int iq2_level(uint8_t v) { return v == 0x08 ? 0 : v == 0x19 ? 1 : 2; }
int iq1_level(uint8_t v) { return (int) (int8_t) v + 1; }
int iq3xxs_level(uint8_t v) { return v == 0x3e ? 7 : (v - 4) / 8; }
int iq3s_level(uint8_t v) { return (v - 1) / 2; }

} // namespace

const search_grid & get_search_grid(ggml_type t) {
    // function-local statics: built on first use, once, thread-safe
    switch (t) {
        case GGML_TYPE_IQ2_XXS: {
            static const owned_search_grid g = build_search_grid(grid_levels(iq2xxs_grid, 256, 8, iq2_level), 256, 8, 2, 2);
            return g.view;
        }
        case GGML_TYPE_IQ2_XS: {
            static const owned_search_grid g = build_search_grid(grid_levels(iq2xs_grid, 512, 8, iq2_level), 512, 8, 2, 2);
            return g.view;
        }
        case GGML_TYPE_IQ2_S: {
            static const owned_search_grid g = build_search_grid(grid_levels(iq2s_grid, 1024, 8, iq2_level), 1024, 8, 2, 1);
            return g.view;
        }
        case GGML_TYPE_IQ1_S:
        case GGML_TYPE_IQ1_M: {
            static const owned_search_grid g = build_search_grid(grid_levels(iq1s_grid, 2048, 8, iq1_level), 2048, 8, 2, 3);
            return g.view;
        }
        case GGML_TYPE_IQ3_XXS: {
            static const owned_search_grid g = build_search_grid(grid_levels(iq3xxs_grid, 256, 4, iq3xxs_level), 256, 4, 3, 2);
            return g.view;
        }
        case GGML_TYPE_IQ3_S: {
            static const owned_search_grid g = build_search_grid(grid_levels(iq3s_grid, 512, 4, iq3s_level), 512, 4, 3, 3);
            return g.view;
        }
        default:
            GGML_ABORT("no i-quant search grid for this type");
    }
}

bool check_rows(const char * type_name, const float * src, int64_t nrows, int64_t n_per_row, int64_t block) {
    if (n_per_row % block != 0) {
        std::fprintf(stderr, "quantize %s: row length %lld is not a multiple of %lld\n", type_name,
                     (long long) n_per_row, (long long) block);
        return false;
    }
    for (int64_t i = 0; i < nrows * n_per_row; ++i) {
        if (!std::isfinite(src[i])) {
            std::fprintf(stderr, "quantize %s: non-finite value in row %lld, column %lld\n", type_name,
                         (long long) (i / n_per_row), (long long) (i % n_per_row));
            return false;
        }
    }
    return true;
}

} // namespace ggml_iq
