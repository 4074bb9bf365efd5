// KV cache bookkeeping (src/llama-kv-cache.cpp): sequence membership kept as bit sets must agree
// with a plain reference (a std::set per cell) through random assign / remove / copy / keep /
// shift / release operations, and the attention mask built from the bits must equal the mask
// written straight from the definition. 70 sequences: two 64-bit words per cell, the second
// partly used.
#include "llama-graph.h"
#include "llama-kv-cache.h"

#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <random>
#include <set>
#include <vector>

namespace {

struct ref_cell {
    llama_pos pos = -1;
    std::set<llama_seq_id> seq;
};

struct reference {
    std::vector<ref_cell> cells;
    static bool in_range(llama_pos p, llama_pos p0, llama_pos p1) {
        return p >= (p0 < 0 ? 0 : p0) && p < (p1 < 0 ? INT32_MAX : p1);
    }
    void free_cell(ref_cell & c) { c = {}; }
    void seq_rm(llama_seq_id s, llama_pos p0, llama_pos p1) {
        for (auto & c : cells) {
            if (c.seq.empty() || !in_range(c.pos, p0, p1)) continue;
            if (s < 0) c.seq.clear();
            else c.seq.erase(s);
            if (c.seq.empty()) free_cell(c);
        }
    }
    void seq_cp(llama_seq_id a, llama_seq_id b, llama_pos p0, llama_pos p1) {
        for (auto & c : cells) {
            if (c.seq.count(a) && in_range(c.pos, p0, p1)) c.seq.insert(b);
        }
    }
    void seq_keep(llama_seq_id s) {
        for (auto & c : cells) {
            if (c.seq.empty()) continue;
            if (c.seq.count(s)) c.seq = { s };
            else free_cell(c);
        }
    }
    void seq_add(llama_seq_id s, llama_pos p0, llama_pos p1, llama_pos d) {
        for (auto & c : cells) {
            if (!c.seq.count(s) || !in_range(c.pos, p0, p1)) continue;
            c.pos += d;
            if (c.pos < 0) free_cell(c);
        }
    }
};

void expect_same(const llama_kv_cache & kv, const reference & ref, uint32_t n_seq, int step) {
    uint32_t used = 0;
    for (uint32_t i = 0; i < kv.size; ++i) {
        const ref_cell & r = ref.cells[i];
        used += r.seq.empty() ? 0 : 1;
        ASSERT_EQ(kv.cells[i].empty(), r.seq.empty()) << "cell " << i << " step " << step;
        if (r.seq.empty()) continue;
        ASSERT_EQ(kv.cells[i].pos, r.pos) << "cell " << i << " step " << step;
        ASSERT_EQ(kv.cells[i].n_seq, r.seq.size()) << "cell " << i << " step " << step;
        for (uint32_t s = 0; s < n_seq; ++s) {
            ASSERT_EQ(kv.has_seq(i, (llama_seq_id) s), r.seq.count((llama_seq_id) s) > 0) << "cell " << i << " seq " << s;
        }
    }
    ASSERT_EQ(kv.used, used) << "step " << step;
}

// One small layer of F16 rows: the tests look at the bookkeeping, not the rows.
void init_cache(llama_kv_cache & kv, uint32_t n_cells, uint32_t n_seq) {
    llama_kv_layer_shape shape;
    shape.n_embd_k = shape.n_embd_v = shape.head_dim_k = shape.n_rot = 32;
    std::string err;
    ASSERT_TRUE(kv.init({ shape }, n_cells, n_seq, GGML_TYPE_F16, GGML_TYPE_F16, err)) << err;
}

} // namespace

TEST(KvCache, BitSetsFollowTheReferenceAndTheMaskIsTheDefinition) {
    const uint32_t n_cells = 97, n_seq = 70;
    llama_kv_cache kv;
    init_cache(kv, n_cells, n_seq);
    if (HasFatalFailure()) return;
    ASSERT_EQ(kv.seq_words, 2u);
    reference ref;
    ref.cells.resize(n_cells);

    std::mt19937 rng(1234);
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    std::vector<float> mask, mask_swa;
    for (int step = 0; step < 3000; ++step) {
        const llama_seq_id s = pick(0, n_seq - 1), t = pick(0, n_seq - 1);
        const llama_pos p0 = pick(-1, 60), p1 = pick(-1, 80);
        switch (pick(0, 9)) {
            case 0: case 1: case 2: case 3: {   // a micro-batch of 1..8 tokens, some in two sequences
                const uint32_t n = (uint32_t) pick(1, 8);
                std::vector<uint32_t> cells;
                if (!kv.find_slots(n, cells)) break;
                std::vector<llama_pos> pos(n);
                std::vector<std::vector<llama_seq_id>> seqs(n);
                std::vector<int32_t> n_seq_id(n);
                std::vector<const llama_seq_id *> seq_id(n);
                for (uint32_t i = 0; i < n; ++i) {
                    pos[i] = pick(0, 70);
                    seqs[i] = { s };
                    if (pick(0, 3) == 0 && t != s) seqs[i].push_back(t);
                    n_seq_id[i] = (int32_t) seqs[i].size();
                    seq_id[i] = seqs[i].data();
                    kv.assign(cells[i], pos[i], seqs[i].data(), n_seq_id[i]);
                    ref.cells[cells[i]].pos = pos[i];
                    ref.cells[cells[i]].seq.insert(seqs[i].begin(), seqs[i].end());
                }
                // the mask of this micro-batch against the definition
                llama_ubatch ub;
                ub.n_tokens = n;
                ub.pos = pos.data();
                ub.n_seq_id = n_seq_id.data();
                ub.seq_id = seq_id.data();
                const uint32_t n_kv = n_cells;
                const llama_pos n_swa = 20;   // and the sliding-window mask beside it
                mask.assign((size_t) n * n_kv, 1.0f);
                mask_swa.assign((size_t) n * n_kv, 1.0f);
                kv.fill_mask(ub, n_kv, mask.data(), mask_swa.data(), n_swa);
                for (uint32_t i = 0; i < n; ++i) {
                    for (uint32_t j = 0; j < n_kv; ++j) {
                        bool sees = false;
                        for (llama_seq_id q : seqs[i]) sees |= ref.cells[j].seq.count(q) > 0;
                        sees &= ref.cells[j].pos <= pos[i];
                        const bool in_window = sees && pos[i] - ref.cells[j].pos < n_swa;
                        ASSERT_EQ(mask[(size_t) i * n_kv + j], sees ? 0.0f : -INFINITY) << "token " << i << " cell " << j << " step " << step;
                        ASSERT_EQ(mask_swa[(size_t) i * n_kv + j], in_window ? 0.0f : -INFINITY) << "window: token " << i << " cell " << j;
                    }
                }
                if (pick(0, 4) == 0) {   // the micro-batch failed: its cells go back
                    kv.release(cells);
                    for (uint32_t c : cells) ref.free_cell(ref.cells[c]);
                }
                break;
            }
            case 4: kv.seq_rm(s, p0, p1); ref.seq_rm(s, p0, p1); break;
            case 5: kv.seq_cp(s, t, p0, p1); if (s != t) ref.seq_cp(s, t, p0, p1); break;
            case 6: if (pick(0, 5) == 0) { kv.seq_keep(s); ref.seq_keep(s); } break;
            case 7: {
                const llama_pos d = pick(-40, 40);
                kv.seq_add(s, p0, p1, d);
                if (d != 0) ref.seq_add(s, p0, p1, d);
                break;
            }
            case 8: if (pick(0, 20) == 0) { kv.seq_rm(-1, -1, -1); ref.seq_rm(-1, -1, -1); } break;
            case 9: {   // ids outside [0, n_seq) change nothing
                EXPECT_FALSE(kv.seq_rm((llama_seq_id) n_seq, -1, -1));
                kv.seq_cp(s, (llama_seq_id) n_seq + 5, -1, -1);
                kv.seq_add(-3, -1, -1, 7);
                EXPECT_EQ(kv.seq_pos_max((llama_seq_id) n_seq), -1);
                break;
            }
        }
        expect_same(kv, ref, n_seq, step);
        if (HasFatalFailure()) return;
        llama_pos lo = -1, hi = -1;
        for (const auto & c : ref.cells) {
            if (!c.seq.count(s)) continue;
            lo = lo < 0 ? c.pos : std::min(lo, c.pos);
            hi = std::max(hi, c.pos);
        }
        ASSERT_EQ(kv.seq_pos_min(s), lo);
        ASSERT_EQ(kv.seq_pos_max(s), hi);
    }
}

// Continuous batching interleaves the tokens of several sequences in one micro-batch; fill_mask
// keeps the visibility rows of a few distinct sequence sets, so a set that comes back reuses its
// row. More distinct sets than rows kept (evictions), sets of two sequences, an id outside
// [0, n_seq) (ignored), positions before and after the cells': every row must equal the mask
// written from the definition, cell by cell.
TEST(KvCache, InterleavedSequencesGiveTheMaskOfTheDefinition) {
    const uint32_t n_cells = 300, n_seq = 70;
    llama_kv_cache kv;
    init_cache(kv, n_cells, n_seq);
    if (HasFatalFailure()) return;
    std::mt19937 rng(99);
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    // the distinct sets: 13 of them, more than fill_mask keeps
    const std::vector<std::vector<llama_seq_id>> sets = {
        { 0 }, { 1 }, { 2 }, { 3 }, { 65 }, { 69 }, { 0, 1 }, { 2, 66 }, { 4 }, { 5 },
        { 6, (llama_seq_id) n_seq + 3 }, { 7 }, { 64, 3 },
    };
    // the cache: cells of single sequences and some shared by two
    std::vector<llama_pos> cell_pos(n_cells, -1);
    std::vector<std::set<llama_seq_id>> cell_seq(n_cells);
    for (uint32_t c = 0; c + 20 < n_cells; ++c) {
        std::vector<llama_seq_id> seqs = { (llama_seq_id) pick(0, 8) };
        if (pick(0, 5) == 0) seqs.push_back(pick(0, 1) ? 64 + pick(0, 5) : pick(0, 8));
        cell_pos[c] = pick(0, 120);
        kv.assign(c, cell_pos[c], seqs.data(), (int) seqs.size());
        cell_seq[c].insert(seqs.begin(), seqs.end());
    }
    for (int round = 0; round < 20; ++round) {
        const uint32_t n = (uint32_t) pick(1, 64), n_kv = n_cells;
        std::vector<llama_pos> pos(n);
        std::vector<int32_t> n_seq_id(n);
        std::vector<const llama_seq_id *> seq_id(n);
        std::vector<size_t> which(n);
        for (uint32_t i = 0; i < n; ++i) {
            // mostly a different set from the token before: the interleaving of continuous batching
            which[i] = (size_t) (round % 2 ? pick(0, (int) sets.size() - 1) : (i * 5 + (uint32_t) round) % sets.size());
            pos[i] = pick(0, 130);
            n_seq_id[i] = (int32_t) sets[which[i]].size();
            seq_id[i] = sets[which[i]].data();
        }
        llama_ubatch ub;
        ub.n_tokens = n;
        ub.pos = pos.data();
        ub.n_seq_id = n_seq_id.data();
        ub.seq_id = seq_id.data();
        const llama_pos n_swa = 16;
        std::vector<float> mask((size_t) n * n_kv, 1.0f), mask_swa((size_t) n * n_kv, 1.0f);
        kv.fill_mask(ub, n_kv, mask.data(), mask_swa.data(), n_swa);
        for (uint32_t i = 0; i < n; ++i) {
            for (uint32_t j = 0; j < n_kv; ++j) {
                bool sees = false;
                for (llama_seq_id q : sets[which[i]]) sees |= cell_seq[j].count(q) > 0;
                sees &= cell_pos[j] <= pos[i];
                const bool in_window = sees && pos[i] - cell_pos[j] < n_swa;
                ASSERT_EQ(mask[(size_t) i * n_kv + j], sees ? 0.0f : -INFINITY) << "round " << round << " token " << i << " cell " << j;
                ASSERT_EQ(mask_swa[(size_t) i * n_kv + j], in_window ? 0.0f : -INFINITY) << "window: round " << round << " token " << i << " cell " << j;
            }
        }
    }
}
