#include "unicode.h"

#include <algorithm>
#include <array>

size_t unicode_len_utf8(uint8_t b) {
    if (b < 0x80) return 1;
    if ((b & 0xE0) == 0xC0) return 2;
    if ((b & 0xF0) == 0xE0) return 3;
    if ((b & 0xF8) == 0xF0) return 4;
    return 1;   // continuation or invalid lead byte: treated as a single byte
}

void unicode_append_utf8(std::string & out, uint32_t cpt) {
    if (cpt < 0x80) {
        out += (char) cpt;
    } else if (cpt < 0x800) {
        out += (char) (0xC0 | (cpt >> 6));
        out += (char) (0x80 | (cpt & 0x3F));
    } else if (cpt < 0x10000) {
        out += (char) (0xE0 | (cpt >> 12));
        out += (char) (0x80 | ((cpt >> 6) & 0x3F));
        out += (char) (0x80 | (cpt & 0x3F));
    } else if (cpt <= 0x10FFFF) {
        out += (char) (0xF0 | (cpt >> 18));
        out += (char) (0x80 | ((cpt >> 12) & 0x3F));
        out += (char) (0x80 | ((cpt >> 6) & 0x3F));
        out += (char) (0x80 | (cpt & 0x3F));
    } else {
        unicode_append_utf8(out, UNICODE_REPLACEMENT);
    }
}

std::string unicode_cpt_to_utf8(uint32_t cpt) {
    std::string s;
    unicode_append_utf8(s, cpt);
    return s;
}

uint32_t unicode_cpt_from_utf8(const std::string & s, size_t & off) {
    const size_t n = s.size();
    const uint8_t b0 = (uint8_t) s[off];
    if (b0 < 0x80) {
        off += 1;
        return b0;
    }
    size_t len;
    uint32_t cpt;
    if ((b0 & 0xE0) == 0xC0)      { len = 2; cpt = b0 & 0x1F; }
    else if ((b0 & 0xF0) == 0xE0) { len = 3; cpt = b0 & 0x0F; }
    else if ((b0 & 0xF8) == 0xF0) { len = 4; cpt = b0 & 0x07; }
    else { off += 1; return UNICODE_REPLACEMENT; }
    if (off + len > n) { off += 1; return UNICODE_REPLACEMENT; }
    for (size_t i = 1; i < len; ++i) {
        const uint8_t b = (uint8_t) s[off + i];
        if ((b & 0xC0) != 0x80) { off += 1; return UNICODE_REPLACEMENT; }
        cpt = (cpt << 6) | (b & 0x3F);
    }
    off += len;
    return cpt;
}

std::vector<uint32_t> unicode_cpts_from_utf8(const std::string & s) {
    std::vector<uint32_t> out;
    out.reserve(s.size());
    size_t off = 0;
    while (off < s.size()) {
        out.push_back(unicode_cpt_from_utf8(s, off));
    }
    return out;
}

uint16_t unicode_cpt_flags(uint32_t cpt) {
    // ASCII is by far the most common input: answer it from a small table built once.
    static const std::array<uint16_t, 128> ascii = [] {
        std::array<uint16_t, 128> a{};
        size_t r = 0;
        for (uint32_t c = 0; c < 128; ++c) {
            while (r + 1 < unicode_flag_ranges_count && unicode_flag_ranges[r + 1].first <= c) ++r;
            a[c] = unicode_flag_ranges[r].flags;
        }
        return a;
    }();
    if (cpt < 128) return ascii[cpt];
    if (cpt > 0x10FFFF) return 0;
    const unicode_flag_range * begin = unicode_flag_ranges;
    const unicode_flag_range * end   = unicode_flag_ranges + unicode_flag_ranges_count;
    const unicode_flag_range * it = std::upper_bound(begin, end, cpt,
        [](uint32_t c, const unicode_flag_range & r) { return c < r.first; });
    return (it - 1)->flags;   // ranges start at 0, so it > begin
}

uint32_t unicode_tolower(uint32_t cpt) {
    const unicode_cpt_map * begin = unicode_lowercase_map;
    const unicode_cpt_map * end   = unicode_lowercase_map + unicode_lowercase_map_count;
    const unicode_cpt_map * it = std::lower_bound(begin, end, cpt,
        [](const unicode_cpt_map & m, uint32_t c) { return m.from < c; });
    return (it != end && it->from == cpt) ? it->to : cpt;
}

uint32_t unicode_nfd_first(uint32_t cpt) {
    const unicode_nfd_range * begin = unicode_nfd_ranges;
    const unicode_nfd_range * end   = unicode_nfd_ranges + unicode_nfd_ranges_count;
    const unicode_nfd_range * it = std::upper_bound(begin, end, cpt,
        [](uint32_t c, const unicode_nfd_range & r) { return c < r.first; });
    if (it == begin) return cpt;
    --it;
    return cpt <= it->last ? it->to : cpt;
}

namespace {

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes map to themselves, the other 68 bytes to
// U+0100.. in byte order.
struct byte_map {
    std::array<std::string, 256> to_utf8;
    std::array<uint32_t, 256>    to_cpt;
    byte_map() {
        uint32_t next = 256;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            to_cpt[b] = printable ? (uint32_t) b : next++;
            to_utf8[b] = unicode_cpt_to_utf8(to_cpt[b]);
        }
    }
};

const byte_map & get_byte_map() {
    static const byte_map m;
    return m;
}

} // namespace

const std::string & unicode_byte_to_utf8(uint8_t byte) {
    return get_byte_map().to_utf8[byte];
}

bool unicode_utf8_to_byte(uint32_t cpt, uint8_t & byte) {
    // images are 0x21..0xFF (identity for printable bytes) and 0x100..0x143
    if (cpt < 0x100) {
        const bool printable = (cpt >= 0x21 && cpt <= 0x7E) || (cpt >= 0xA1 && cpt <= 0xAC) || (cpt >= 0xAE);
        if (!printable) return false;
        byte = (uint8_t) cpt;
        return true;
    }
    if (cpt >= 0x100 + 68) return false;
    const auto & m = get_byte_map();
    for (int b = 0; b < 256; ++b) {
        if (m.to_cpt[b] == cpt) { byte = (uint8_t) b; return true; }
    }
    return false;
}
