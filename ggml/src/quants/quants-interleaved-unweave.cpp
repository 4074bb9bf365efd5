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

// One step of rebuilding a twin byte: dst |= shift(group byte & mask). The bits a weaver moved
// together keep their distance, so a byte takes one to four steps (whole bytes, nibbles, crumbs).
struct unweave_step {
    uint32_t dst;     // byte in the R twin rows of the probe (row * row_in + offset)
    uint32_t src;     // byte in the probe group
    uint8_t  mask;    // bits of the group byte
    int8_t   shift;   // > 0: left
    uint16_t row;     // dst's row and offset in it (metadata steps) or in its block (block steps)
    uint32_t off;
};

struct unweave_map {
    bool ok = false;
    int R = 0;
    size_t meta_in = 0, meta_out = 0;     // row metadata of the twin and of the layout, per row
    size_t block_in = 0, block_out = 0;   // bytes of one block of columns: per twin row / per group
    // for every output bit of the probe group: source row, byte in that row, bit; -1 if always 0
    std::vector<int32_t> src;             // (row << 24) | (byte << 3) | bit
    std::vector<unweave_step> meta_steps, block_steps;   // block steps: offsets within one block
};

// Group the probe's bit map into byte steps, split into row-metadata steps and per-block steps
// (offsets relative to the block, so they apply at every block index).
void build_steps(unweave_map & m) {
    const size_t row_in = m.meta_in + m.block_in, meta_bits = m.R * m.meta_out * 8;
    std::vector<unweave_step> steps;
    for (size_t j = 0; j < m.src.size(); ++j) {
        if (m.src[j] < 0) continue;
        const int row = m.src[j] >> 24;
        const size_t bit = (size_t) (m.src[j] & 0xFFFFFF);
        const uint32_t dst = (uint32_t) (row * row_in + bit / 8), src = (uint32_t) (j / 8);
        const int8_t shift = (int8_t) ((int) (bit % 8) - (int) (j % 8));
        bool merged = false;
        for (auto & st : steps) {
            if (st.dst == dst && st.src == src && st.shift == shift) {
                st.mask |= (uint8_t) (1 << (j % 8));
                merged = true;
                break;
            }
        }
        if (!merged) steps.push_back({ dst, src, (uint8_t) (1 << (j % 8)), shift, 0, 0 });
    }
    for (unweave_step st : steps) {
        st.row = (uint16_t) (st.dst / row_in);
        st.off = (uint32_t) (st.dst % row_in);
        if (st.src * 8 < meta_bits) {
            m.meta_steps.push_back(st);
        } else {
            st.src = (uint32_t) (st.src - meta_bits / 8);
            st.off = (uint32_t) (st.off - m.meta_in);
            m.block_steps.push_back(st);
        }
    }
}

inline uint8_t apply(const unweave_step & st, uint8_t v) {
    v &= st.mask;
    return (uint8_t) (st.shift >= 0 ? v << st.shift : v >> -st.shift);
}

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
    build_steps(m);
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
    for (const auto & st : m.meta_steps) r[st.row * row_in + st.off] |= apply(st, g[st.src]);
    const uint8_t * gb = g + m.R * m.meta_out;
    for (int64_t b = 0; b < nblk; ++b, gb += m.block_out) {
        uint8_t * rb = r + m.meta_in + b * m.block_in;
        for (const auto & st : m.block_steps) rb[st.row * row_in + st.off] |= apply(st, gb[st.src]);
    }
    return true;
}
