// The GBNF parser on arbitrary text, and the matcher on what it accepts: the input up to its first
// NUL is the grammar, the bytes after it are fed to the matcher in pieces of 1 to 4 bytes the way
// token texts arrive. A grammar is either refused with a message or runs, and an ambiguous one
// stops with a message within the matcher's limits.

#include "fuzz-support.h"

#include "llama-grammar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    std::string text, feed;
    kiln_fuzz::split_at_nul(data, size, text, feed);
    llama_gbnf::grammar g;
    std::string err;
    if (!llama_gbnf::parse(text, "root", g, err)) {
        if (err.empty()) kiln_fuzz::finding("grammar", "refused without a message");
        return 0;
    }
    if (g.root >= g.rules.size()) kiln_fuzz::finding("grammar", "root rule out of range");
    // limits a tenth of the defaults: an ambiguous grammar gives up in milliseconds here, so the
    // fuzzer's timeout (10 s) catches work the limits fail to bound
    llama_gbnf::matcher_limits limits;
    limits.max_stacks /= 10;
    limits.max_work /= 10;
    limits.max_nesting /= 10;
    llama_gbnf::matcher m(g, limits);
    size_t pos = 0;
    while (pos < feed.size()) {
        const size_t n = 1 + (uint8_t) feed[pos] % 4;
        const std::string piece = feed.substr(pos, n);
        const bool was_failed = m.failed();
        if (m.allows(piece) != m.accept(piece) && !(m.failed() && !was_failed)) {
            kiln_fuzz::finding("grammar", "allows() and accept() disagree");
        }
        pos += n;
    }
    if (m.failed()) {   // too ambiguous: said so, and nothing is allowed any more
        if (m.error().find("too ambiguous") == std::string::npos) kiln_fuzz::finding("grammar", "failed without the message");
        if (m.allows("a") || m.complete()) kiln_fuzz::finding("grammar", "a failed matcher still allows text");
    }
    m.complete();
    return 0;
}
