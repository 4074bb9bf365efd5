// GBNF grammars (the syntax llama.cpp defines): the parser that turns the text into rules, and the
// matcher that tracks where in the grammar a generation is. The matcher keeps every parse that
// is still possible as a "stack" of positions (the innermost rule's next element on top); a
// code point is allowed when some stack's top character class matches it. The stacks live in
// flat buffers that are reused, so checking and accepting tokens does not allocate once warm.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace llama_gbnf {

enum class elem_type : uint8_t {
    end,         // end of a rule
    alt,         // start of the next alternative
    rule_ref,    // value: rule id
    chr,         // value: code point; starts a character class
    chr_not,     // value: code point; starts a negated class ([^...])
    rng_upper,   // value: upper bound of a range whose lower bound is the previous element
    chr_alt,     // value: another code point of the same class
    any,         // '.': any code point
};

struct elem {
    elem_type type;
    uint32_t value;
};

struct grammar {
    std::vector<std::vector<elem>> rules;   // each: alternatives separated by alt, closed by end
    std::vector<std::string> names;          // rule id -> name (generated rules: name_N)
    uint32_t root = 0;
};

// Parse GBNF text. Returns false and a message naming line and column (1-based) on an error:
// syntax, an undefined rule, a missing root, left recursion (which the matcher cannot run), or
// repetitions that would expand the rules past k_max_grammar_elements.
constexpr size_t k_max_grammar_elements = size_t(1) << 22;
bool parse(const std::string & text, const std::string & root, grammar & out, std::string & err);

// UTF-8 decoding that carries an incomplete sequence across token boundaries.
struct utf8_state {
    uint32_t value = 0;   // bits of the code point so far
    uint8_t remaining = 0;   // continuation bytes still expected
    uint8_t total = 0;       // length of the sequence being decoded (for the partial range)
};

// The vocabulary as a trie of code points, so that filtering every token walks each shared
// prefix once (" the", " then", " there" share the step for ' ', then 't', 'h', 'e').
// Tokens whose text is not complete UTF-8 are listed apart and checked one by one.
struct token_trie {
    struct node {
        uint32_t cp = 0;             // the code point leading here
        uint32_t first_child = 0;    // children are nodes[first_child, first_child + n_children)
        uint32_t n_children = 0;
        uint32_t first_token = 0;    // tokens ending here: tokens[first_token, + n_tokens)
        uint32_t n_tokens = 0;
    };
    std::vector<node> nodes;         // nodes[0] is the root
    std::vector<int32_t> tokens;
    std::vector<int32_t> others;     // empty or not complete UTF-8
    uint32_t max_depth = 0;

    void build(const std::vector<std::string> & pieces, const std::vector<uint8_t> & skip);
};

// An ambiguous grammar (alternatives or nested repetitions that can match the same text, long
// runs of optional items) can keep a number of parses alive that grows exponentially with the
// text. The matcher bounds what one token may cost; past a bound it stops, reports the grammar as
// too ambiguous (error()) and allows nothing more, so a request fails with a message instead of
// taking seconds per token. The defaults are far above what JSON schemas and tool-call grammars
// need (tens of stacks, some thousand steps of work per character).
struct matcher_limits {
    size_t max_stacks = 4096;          // parses alive at once
    // stack elements written between two accepted tokens (trie walk, checks, the accept): with
    // ~10 ns each, a few tenths of a second at most; a JSON string over a 100k vocabulary: ~4M
    size_t max_work = 32u << 20;
    uint32_t max_nesting = 4096;       // rules entered without consuming a character
};

class matcher {
public:
    explicit matcher(const grammar & g, const matcher_limits & limits = {});

    void reset();
    // Whether the text (the bytes of a token) can come next; does not change the state.
    bool allows(const std::string & text);
    // Advance over the text; false (state unchanged) when the grammar does not allow it.
    bool accept(const std::string & text);
    // Sets allowed[t] = 1 for every trie token the grammar allows next (others untouched:
    // check them with allows()). Not valid while inside a multi-byte character.
    void allowed_trie_tokens(const token_trie & trie, std::vector<uint8_t> & allowed);
    bool inside_character() const { return utf8_.remaining > 0; }
    // The root rule has been matched completely (an end of generation is allowed).
    bool complete() const;
    size_t n_stacks() const { return cur_.size(); }
    // A limit was passed: the grammar is too ambiguous to follow. Nothing is allowed from then
    // on (reset() does not clear it); error() says which limit.
    bool failed() const { return !error_.empty(); }
    const std::string & error() const { return error_; }

private:
    // Stacks back to back. Past a few stacks a hash table indexes them, so adding a stack that
    // is already there costs one hash and one comparison instead of a scan of the set.
    struct stack_set {
        static constexpr size_t k_linear = 16;   // up to this many: a plain scan (the usual case)
        std::vector<const elem *> items;   // the stacks back to back, bottom first
        std::vector<uint32_t> offsets{ 0 };   // stack i is items[offsets[i], offsets[i+1])
        bool indexed = false;              // hashes, slot_of and table describe the stacks
        std::vector<uint64_t> hashes;      // per stack
        std::vector<uint32_t> slot_of;     // per stack: its slot in table
        std::vector<uint32_t> table;       // open addressing: stack index + 1, 0 = free; size 2^k
        void clear() {
            if (indexed) unindex();
            items.clear();
            offsets.resize(1);
        }
        size_t size() const { return offsets.size() - 1; }
        // Appends the stack unless the set has it already.
        void add(const std::vector<const elem *> & stack);
    private:
        void build_index();
        void unindex();
        void insert_slot(size_t s);
    };

    void expand(stack_set & out, uint32_t nesting);   // expands work_ until every top is a character class
    void add(stack_set & out);
    void step(const stack_set & in, uint32_t cp, stack_set & out);
    bool partial_possible(const stack_set & in, const utf8_state & st) const;
    // Runs the text from cur_; the result lands in *result (one of the scratch sets or cur_).
    bool run(const std::string & text, utf8_state & st, stack_set *& result);
    // the work budget is per token: refilled by reset() and by every accepted token
    void refill() { work_left_ = limits_.max_work; }
    void fail(const std::string & why);
    void fail_work();
    void fail_stacks();
    void fail_nesting();

    const grammar & g_;
    std::vector<const elem *> alt_starts_;   // the first element of every alternative, rule by rule
    std::vector<uint32_t> alt_first_;        // rule r's alternatives: alt_starts_[alt_first_[r], alt_first_[r+1])
    matcher_limits limits_;
    stack_set cur_;
    utf8_state utf8_;
    stack_set scratch_[2];
    std::vector<const elem *> work_;
    std::vector<stack_set> levels_;   // trie walk: the stacks after each depth
    size_t work_left_ = 0;
    uint32_t nesting_limit_ = 0;   // limits_.max_nesting, 0 once failed
    std::string error_;
    void walk(const token_trie & trie, uint32_t node, uint32_t depth, std::vector<uint8_t> & allowed);
};

} // namespace llama_gbnf
