// The inverse of the weavers, for the products of repacked weights: a group turned back into the
// R rows of its plain twin runs the twin's own kernel, so a model repacked with -rtr or --repack
// gives exactly the original's logits until a layout has its own SIMD kernel.
//
// Rather than a hand-written inverse per layout, the inverse is read off the weaver: weaving R
// twin rows of one block (plus row metadata) with a single bit set shows where that bit lands.
// When every input bit lands on exactly one output bit of its own (the weaver is a bit
// permutation: all layouts but those with scrambled signs or re-encoded scales), the probe gives
// the inverse map; per block it is the same at every block index, so one map serves any row length.
#include "quants-interleaved.h"

#include <cstring>
#include <memory>
#include <mutex>

namespace {

struct unweave_map {
    bool ok = false;
    int R = 0;
    size_t meta_in = 0, meta_out = 0;     // row metadata of the twin and of the layout, per row
    size_t block_in = 0, block_out = 0;   // bytes of one block of columns: per twin row / per group
    // for every output bit of the probe group: source row, byte in that row, bit; -1 if always 0
    std::vector<int32_t> src;             // (row << 24) | (byte << 3) | bit
};

unweave_map probe(ggml_type type) {
    unweave_map m;
    const ggml_type_traits * tt = ggml_get_type_traits(type);
    const ggml_type base = tt->interleaved_base;
    if (!tt->weave || tt->nrows_interleaved <= 1 || tt->blck_size != ggml_blck_size(base) || tt->blck_size < 32) return m;
    const int R = tt->nrows_interleaved;
    const int64_t n = tt->blck_size;   // one block of columns
    const size_t row_in = ggml_row_size(base, n), row_out = ggml_row_size(type, n);
    m.R = R;
    m.meta_in = ggml_get_type_traits(base)->row_meta_size;
    m.meta_out = tt->row_meta_size;
    m.block_in = row_in - m.meta_in;
    m.block_out = R * (row_out - m.meta_out);
    if (m.meta_in != m.meta_out) return m;
    std::vector<char> in(R * row_in, 0), out(R * row_out);
    std::vector<const char *> rows(R);
    for (int k = 0; k < R; ++k) rows[k] = in.data() + k * row_in;
    auto weave = [&]() {
        std::fill(out.begin(), out.end(), 0);
        tt->weave(rows.data(), n, out.data());
    };
    weave();
    for (char c : out) {
        if (c) return m;   // not linear: zero rows must give a zero group
    }
    m.src.assign(out.size() * 8, -1);
    for (size_t i = 0; i < in.size() * 8; ++i) {
        in[i / 8] = (char) (1 << (i % 8));
        weave();
        in[i / 8] = 0;
        int32_t hit = -1;
        for (size_t j = 0; j < out.size() * 8; ++j) {
            if (out[j / 8] == 0) {
                j += 7;
                continue;
            }
            if (!((out[j / 8] >> (j % 8)) & 1)) continue;
            if (hit >= 0 || m.src[j] >= 0) return m;   // one bit landing twice, or two on one
            hit = (int32_t) j;
        }
        if (hit < 0) return m;   // a bit the layout drops
        const int row = (int) (i / (row_in * 8));
        const size_t bit_in_row = i % (row_in * 8);
        m.src[hit] = (row << 24) | (int32_t) bit_in_row;
    }
    m.ok = true;
    return m;
}

const unweave_map & map_of(ggml_type type) {
    static std::mutex mu;
    static std::unique_ptr<unweave_map> maps[GGML_TYPE_COUNT];
    std::lock_guard<std::mutex> lock(mu);
    if (!maps[type]) maps[type] = std::make_unique<unweave_map>(probe(type));
    return *maps[type];
}

} // namespace

bool ggml_interleaved_unweave(ggml_type type, const void * group, void * rows, int64_t n_per_row) {
    const unweave_map & m = map_of(type);
    if (!m.ok) return false;
    const int64_t nblk = n_per_row / ggml_blck_size(type);
    const size_t row_in = m.meta_in + nblk * m.block_in;
    const auto * g = (const uint8_t *) group;
    auto * r = (uint8_t *) rows;
    std::memset(r, 0, m.R * row_in);
    const size_t meta_bits = m.R * m.meta_out * 8;
    // the probe group: R metadata then one block of the R rows; larger groups repeat the block part
    for (size_t j = 0; j < m.src.size(); ++j) {
        const int32_t s = m.src[j];
        if (s < 0) continue;
        const int row = s >> 24;
        const size_t bit = (size_t) (s & 0xFFFFFF);
        if (j < meta_bits) {
            if ((g[j / 8] >> (j % 8)) & 1) r[row * row_in + bit / 8] |= (uint8_t) (1 << (bit % 8));
            continue;
        }
        const size_t jo = j - meta_bits, bi = bit - m.meta_in * 8;
        for (int64_t b = 0; b < nblk; ++b) {
            const size_t oj = meta_bits + b * m.block_out * 8 + jo;
            if ((g[oj / 8] >> (oj % 8)) & 1) {
                const size_t ib = m.meta_in * 8 + b * m.block_in * 8 + bi;
                r[row * row_in + ib / 8] |= (uint8_t) (1 << (ib % 8));
            }
        }
    }
    return true;
}
