// The grammar matcher: the set of live parse stacks, advanced one code point at a time. A stack
// holds positions in the rules; its top is always a character class (or the stack is empty,
// meaning the root rule is complete). Rule references on top are expanded eagerly into one
// stack per alternative, so testing a code point is a scan of the tops. Sets of stacks are
// deduplicated through a hash table, and every call is bounded (matcher_limits) so that an
// ambiguous grammar fails with a message rather than growing without end.
#include "llama-grammar.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

namespace llama_gbnf {

namespace {

bool ends_sequence(const elem * pos) { return pos->type == elem_type::end || pos->type == elem_type::alt; }

// Whether the class at pos contains cp; *after is set to the element following the class.
bool class_matches(const elem * pos, uint32_t cp, const elem ** after) {
    if (pos->type == elem_type::any) {
        *after = pos + 1;
        return true;
    }
    const bool negated = pos->type == elem_type::chr_not;
    bool found = false;
    do {
        if (pos[1].type == elem_type::rng_upper) {
            found = found || (pos->value <= cp && cp <= pos[1].value);
            pos += 2;
        } else {
            found = found || pos->value == cp;
            pos += 1;
        }
    } while (pos->type == elem_type::chr_alt);
    *after = pos;
    return found != negated;
}

// Whether the class at pos contains some code point in [lo, hi] (an incomplete UTF-8 sequence).
bool class_intersects(const elem * pos, uint32_t lo, uint32_t hi) {
    if (pos->type == elem_type::any) return true;
    const bool negated = pos->type == elem_type::chr_not;
    do {
        const uint32_t a = pos->value;
        const uint32_t b = pos[1].type == elem_type::rng_upper ? pos[1].value : a;
        if (!negated && a <= hi && lo <= b) return true;
        // a negated class excludes all of [lo, hi] only if one range covers it
        if (negated && a <= lo && hi <= b) return false;
        pos += pos[1].type == elem_type::rng_upper ? 2 : 1;
    } while (pos->type == elem_type::chr_alt);
    return negated;
}

uint64_t hash_stack(const elem * const * begin, const elem * const * end) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t) (end - begin);
    for (const elem * const * it = begin; it != end; ++it) {
        const elem * p = *it;
        h = (h ^ (uint64_t) (uintptr_t) p) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
    }
    return h;
}

} // namespace

void matcher::stack_set::unindex() {
    // free only the slots in use: the table stays as large as the largest set seen
    for (uint32_t slot : slot_of) table[slot] = 0;
    hashes.clear();
    slot_of.clear();
    indexed = false;
}

void matcher::stack_set::insert_slot(size_t s) {
    const size_t mask = table.size() - 1;
    size_t i = hashes[s] & mask;
    while (table[i] != 0) i = (i + 1) & mask;
    table[i] = (uint32_t) s + 1;
    slot_of[s] = (uint32_t) i;
}

void matcher::stack_set::build_index() {
    // at most half full; every stack (re)placed in a table large enough for twice as many
    const size_t want = std::max<size_t>(64, 4 * (size() + 1));
    if (table.size() < want) {
        size_t cap = table.empty() ? 64 : table.size();
        while (cap < want) cap *= 2;
        table.assign(cap, 0);
    } else {
        for (size_t s = 0; s < slot_of.size(); ++s) table[slot_of[s]] = 0;
    }
    hashes.resize(size());
    slot_of.resize(size());
    for (size_t s = 0; s < size(); ++s) {
        if (!indexed) hashes[s] = hash_stack(items.data() + offsets[s], items.data() + offsets[s + 1]);
        insert_slot(s);
    }
    indexed = true;
}

void matcher::stack_set::add(const std::vector<const elem *> & stack) {
    const size_t n = stack.size();
    if (!indexed && size() < k_linear) {
        // a few stacks, the usual case: comparing lengths first rules out most of them
        for (size_t s = 0; s < size(); ++s) {
            const uint32_t b = offsets[s], e = offsets[s + 1];
            if (e - b == n && std::equal(stack.begin(), stack.end(), items.begin() + b)) return;
        }
    } else {
        if (!indexed || 2 * (size() + 1) > table.size()) build_index();
        const uint64_t h = hash_stack(stack.data(), stack.data() + n);
        const size_t mask = table.size() - 1;
        for (size_t i = h & mask; table[i] != 0; i = (i + 1) & mask) {
            const uint32_t s = table[i] - 1;
            const uint32_t b = offsets[s], e = offsets[s + 1];
            if (hashes[s] == h && e - b == n && std::equal(stack.begin(), stack.end(), items.begin() + b)) return;
        }
        hashes.push_back(h);
        slot_of.push_back(0);
        insert_slot(size());
    }
    items.insert(items.end(), stack.begin(), stack.end());
    offsets.push_back((uint32_t) items.size());
}

matcher::matcher(const grammar & g, const matcher_limits & limits) : g_(g), limits_(limits), nesting_limit_(limits.max_nesting) {
    // where each alternative of each rule starts, so expanding a rule visits only those
    alt_first_.reserve(g.rules.size() + 1);
    for (const std::vector<elem> & rule : g.rules) {
        alt_first_.push_back((uint32_t) alt_starts_.size());
        for (size_t i = 0; i < rule.size(); ++i) {
            if (i == 0 || rule[i - 1].type == elem_type::alt) alt_starts_.push_back(&rule[i]);
            if (rule[i].type == elem_type::end) break;
        }
    }
    alt_first_.push_back((uint32_t) alt_starts_.size());
    reset();
}

void matcher::fail(const std::string & why) {
    if (error_.empty()) error_ = "the grammar is too ambiguous to follow: " + why;
    // what is under way winds down at once: no stack can be added, no rule entered
    work_left_ = 0;
    nesting_limit_ = 0;
}

void matcher::reset() {
    cur_.clear();
    utf8_ = utf8_state{};
    if (failed()) return;
    refill();
    for (uint32_t a = alt_first_[g_.root]; a < alt_first_[g_.root + 1]; ++a) {
        work_.clear();
        if (!ends_sequence(alt_starts_[a])) work_.push_back(alt_starts_[a]);
        expand(cur_, 0);
    }
    if (failed()) cur_.clear();
    refill();
}

// The limits' messages, out of line: the checks stay cheap on the usual path.
[[gnu::cold, gnu::noinline]] void matcher::fail_work() {
    fail("following it costs more than " + std::to_string(limits_.max_work) +
         " steps of work for one token (alternatives or nested repetitions that match the same text?)");
}

[[gnu::cold, gnu::noinline]] void matcher::fail_stacks() {
    fail("more than " + std::to_string(limits_.max_stacks) +
         " parses are possible at once (alternatives or nested repetitions that match the same text?)");
}

[[gnu::cold, gnu::noinline]] void matcher::fail_nesting() {
    fail("more than " + std::to_string(limits_.max_nesting) +
         " rules are entered before the next character (a long run of optional items?)");
}

inline void matcher::add(stack_set & out) {
    // the cost of a stack is its length: hashing, comparing and copying it
    const size_t cost = work_.size() + 1;
    if (cost > work_left_) {
        if (!failed()) fail_work();
        return;
    }
    work_left_ -= cost;
    out.add(work_);
    if (out.size() > limits_.max_stacks) fail_stacks();
}

// Depth-first over the alternatives of rule references on top of work_; work_ is restored
// before returning. Parse-time checks rule out left recursion, so this terminates; nesting
// counts the rules entered on the way, which a long run of optional items makes deep.
void matcher::expand(stack_set & out, uint32_t nesting) {
    if (work_.empty() || work_.back()->type != elem_type::rule_ref) {
        add(out);
        return;
    }
    if (nesting >= nesting_limit_) {
        if (!failed()) fail_nesting();
        return;
    }
    const elem * ref = work_.back();
    work_.pop_back();
    const elem * next = ref + 1;
    if (!ends_sequence(next)) work_.push_back(next);
    const size_t base = work_.size();
    for (uint32_t a = alt_first_[ref->value]; a < alt_first_[ref->value + 1]; ++a) {
        const elem * start = alt_starts_[a];
        if (!ends_sequence(start)) work_.push_back(start);
        expand(out, nesting + 1);
        work_.resize(base);
    }
    if (!ends_sequence(next)) work_.pop_back();
    work_.push_back(ref);
}

void matcher::step(const stack_set & in, uint32_t cp, stack_set & out) {
    out.clear();
    for (size_t s = 0; s < in.size() && !failed(); ++s) {
        const uint32_t b = in.offsets[s], e = in.offsets[s + 1];
        if (b == e) continue;   // complete: nothing more can be matched on this one
        const elem * after = nullptr;
        if (!class_matches(in.items[e - 1], cp, &after)) continue;
        work_.assign(in.items.begin() + b, in.items.begin() + e - 1);
        if (!ends_sequence(after)) work_.push_back(after);
        expand(out, 0);
    }
    if (failed()) out.clear();
}

// A decoded multi-byte sequence is a code point UTF-8 may carry: not overlong, not a surrogate
// (JSON parsers and clients refuse those), not past U+10FFFF.
static bool valid_code_point(uint32_t v, int len) {
    static const uint32_t min_of_len[5] = { 0, 0, 0x80, 0x800, 0x10000 };
    return v >= min_of_len[len] && !(v >= 0xD800 && v <= 0xDFFF) && v <= 0x10FFFF;
}

bool matcher::partial_possible(const stack_set & in, const utf8_state & st) const {
    // the code points the missing continuation bytes could still produce
    const uint32_t shift = 6u * st.remaining;
    uint32_t lo = st.value << shift;
    const uint32_t hi = std::min<uint32_t>(lo | ((1u << shift) - 1), 0x10FFFF);
    // overlong forms are invalid: the smallest code point of each length
    static const uint32_t min_of_len[5] = { 0, 0, 0x80, 0x800, 0x10000 };
    lo = std::max(lo, min_of_len[st.total]);
    if (lo > hi) return false;
    if (lo >= 0xD800 && hi <= 0xDFFF) return false;   // only surrogates left
    for (size_t s = 0; s < in.size(); ++s) {
        const uint32_t b = in.offsets[s], e = in.offsets[s + 1];
        if (b != e && class_intersects(in.items[e - 1], lo, hi)) return true;
    }
    return false;
}

bool matcher::run(const std::string & text, utf8_state & st, stack_set *& result) {
    if (failed()) return false;
    stack_set * in = &cur_;
    int which = 0;
    for (const char ch : text) {
        const uint8_t c = (uint8_t) ch;
        if (st.remaining > 0) {
            if ((c >> 6) != 0x2) return false;   // invalid UTF-8
            st.value = (st.value << 6) | (c & 0x3f);
            if (--st.remaining > 0) continue;
            if (!valid_code_point(st.value, st.total)) return false;
        } else if (c < 0x80) {
            st.value = c;
        } else {
            const int len = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
            if (len == 0) return false;
            st.value = len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
            st.remaining = (uint8_t) (len - 1);
            st.total = (uint8_t) len;
            continue;
        }
        step(*in, st.value, scratch_[which]);
        in = &scratch_[which];
        which ^= 1;
        st.total = 0;
        if (in->size() == 0) return false;
    }
    if (st.remaining > 0 && !partial_possible(*in, st)) return false;
    result = in;
    return true;
}

bool matcher::allows(const std::string & text) {
    utf8_state st = utf8_;
    stack_set * result = nullptr;
    return run(text, st, result);
}

bool matcher::accept(const std::string & text) {
    utf8_state st = utf8_;
    stack_set * result = nullptr;
    if (!run(text, st, result)) return false;
    // the scratch set becomes the current one; its old buffers are scratch from now on
    if (result != &cur_) std::swap(cur_, *result);
    utf8_ = st;
    refill();
    return true;
}

bool matcher::complete() const {
    if (utf8_.remaining > 0 || failed()) return false;
    for (size_t s = 0; s < cur_.size(); ++s) {
        if (cur_.offsets[s] == cur_.offsets[s + 1]) return true;
    }
    return false;
}

} // namespace llama_gbnf

namespace llama_gbnf {

namespace {

// Code points of complete, valid UTF-8 text; false otherwise.
bool decode_utf8(const std::string & text, std::vector<uint32_t> & out) {
    out.clear();
    for (size_t i = 0; i < text.size();) {
        const uint8_t c = (uint8_t) text[i];
        const int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
        if (len == 0 || i + (size_t) len > text.size()) return false;
        uint32_t v = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
        for (int k = 1; k < len; ++k) {
            const uint8_t cc = (uint8_t) text[i + (size_t) k];
            if ((cc >> 6) != 0x2) return false;
            v = (v << 6) | (cc & 0x3f);
        }
        if (len > 1 && !valid_code_point(v, len)) return false;
        out.push_back(v);
        i += (size_t) len;
    }
    return !out.empty();
}

} // namespace

void token_trie::build(const std::vector<std::string> & pieces, const std::vector<uint8_t> & skip) {
    // sort the tokens by code point sequence; then each node's children are contiguous runs
    struct entry {
        std::vector<uint32_t> cps;
        int32_t token;
    };
    std::vector<entry> entries;
    std::vector<uint32_t> cps;
    others.clear();
    for (size_t t = 0; t < pieces.size(); ++t) {
        if (skip[t]) continue;
        if (decode_utf8(pieces[t], cps)) entries.push_back({ cps, (int32_t) t });
        else others.push_back((int32_t) t);
    }
    std::sort(entries.begin(), entries.end(), [](const entry & a, const entry & b) { return a.cps < b.cps; });
    nodes.assign(1, node{});
    tokens.clear();
    max_depth = 0;
    // breadth-first: the entries below a node at depth d form a range [lo, hi) of the sorted list
    struct range {
        uint32_t node, depth;
        size_t lo, hi;
    };
    std::vector<range> queue{ { 0, 0, 0, entries.size() } };
    for (size_t q = 0; q < queue.size(); ++q) {
        const range r = queue[q];
        size_t i = r.lo;
        // entries that end exactly at this depth come first in sorted order
        const uint32_t tok_begin = (uint32_t) tokens.size();
        while (i < r.hi && entries[i].cps.size() == r.depth) tokens.push_back(entries[i++].token);
        nodes[r.node].first_token = tok_begin;
        nodes[r.node].n_tokens = (uint32_t) tokens.size() - tok_begin;
        nodes[r.node].first_child = (uint32_t) nodes.size();
        while (i < r.hi) {
            const uint32_t cp = entries[i].cps[r.depth];
            size_t j = i;
            while (j < r.hi && entries[j].cps[r.depth] == cp) ++j;
            node child;
            child.cp = cp;
            nodes.push_back(child);
            queue.push_back({ (uint32_t) nodes.size() - 1, r.depth + 1, i, j });
            max_depth = std::max(max_depth, r.depth + 1);
            i = j;
        }
        nodes[r.node].n_children = (uint32_t) nodes.size() - nodes[r.node].first_child;
    }
}

void matcher::walk(const token_trie & trie, uint32_t n, uint32_t depth, std::vector<uint8_t> & allowed) {
    const token_trie::node & nd = trie.nodes[n];
    const stack_set & in = depth == 0 ? cur_ : levels_[depth];
    for (uint32_t c = 0; c < nd.n_children && !failed(); ++c) {
        const uint32_t child = nd.first_child + c;
        step(in, trie.nodes[child].cp, levels_[depth + 1]);
        if (levels_[depth + 1].size() == 0) continue;
        const token_trie::node & cn = trie.nodes[child];
        for (uint32_t k = 0; k < cn.n_tokens; ++k) allowed[(size_t) trie.tokens[cn.first_token + k]] = 1;
        if (cn.n_children > 0) walk(trie, child, depth + 1, allowed);
    }
}

void matcher::allowed_trie_tokens(const token_trie & trie, std::vector<uint8_t> & allowed) {
    if (levels_.size() < trie.max_depth + 1) levels_.resize(trie.max_depth + 1);
    if (failed()) return;
    walk(trie, 0, 0, allowed);
}

} // namespace llama_gbnf
