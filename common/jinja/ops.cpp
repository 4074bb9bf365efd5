// Operators, attribute/item access, slicing and methods of str/dict/list, with the semantics of
// Python objects inside jinja2's ImmutableSandboxedEnvironment (the one Hugging Face uses):
// reading works as in Python, methods that mutate a list or dict raise a SecurityError.
#include "jinja/builtins.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace kiln::jinja {

// ---- undefined ----

void throw_undefined(const Value & undefined) {
    throw Error(undefined.undefined_name().empty() ? std::string("value is undefined") : undefined.undefined_name());
}

static std::string object_type_repr(const Value & obj) {
    if (obj.is_none()) {
        return "None";
    }
    return obj.type_name() + " object";
}

Value make_undefined_attr(const Value & obj, const std::string & name) {
    return Value::undefined("'" + object_type_repr(obj) + "' has no attribute '" + name + "'");
}

// ---- UTF-8 and Python string helpers ----

static uint32_t decode_at(const std::string & s, size_t i, size_t & len) {
    unsigned char c = s[i];
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (i + n > s.size()) {
        n = 1;
    }
    len = n;
    if (n == 1) {
        return c;
    }
    uint32_t cp = c & (0x7f >> n);
    for (int k = 1; k < n; ++k) {
        cp = (cp << 6) | (s[i + k] & 0x3f);
    }
    return cp;
}

static std::vector<uint32_t> decode(const std::string & s) {
    std::vector<uint32_t> cps;
    cps.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        size_t len;
        cps.push_back(decode_at(s, i, len));
        i += len;
    }
    return cps;
}

static bool py_isspace(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

// Case mapping covers ASCII, Latin-1, Greek and Cyrillic, which is what chat templates touch.
static uint32_t cp_upper(uint32_t c) {
    if (c >= 'a' && c <= 'z') return c - 32;
    if (c < 0x80) return c;
    if ((c >= 0xe0 && c <= 0xfe && c != 0xf7)) return c - 32;
    if (c >= 0x3b1 && c <= 0x3c9 && c != 0x3c2) return c - 32;
    if (c >= 0x430 && c <= 0x44f) return c - 32;
    if (c >= 0x450 && c <= 0x45f) return c - 80;
    return c;
}

static uint32_t cp_lower(uint32_t c) {
    if (c >= 'A' && c <= 'Z') return c + 32;
    if (c < 0x80) return c;
    if ((c >= 0xc0 && c <= 0xde && c != 0xd7)) return c + 32;
    if (c >= 0x391 && c <= 0x3a9 && c != 0x3a2) return c + 32;
    if (c >= 0x410 && c <= 0x42f) return c + 32;
    if (c >= 0x400 && c <= 0x40f) return c + 80;
    return c;
}

static bool cp_is_upper(uint32_t c) { return cp_lower(c) != c; }
static bool cp_is_lower(uint32_t c) { return cp_upper(c) != c || c == 0xdf; }
static bool cp_is_cased(uint32_t c) { return cp_is_upper(c) || cp_is_lower(c); }
static bool cp_is_alpha(uint32_t c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= 0xc0 && c != 0xd7 && c != 0xf7 && !py_isspace(c) &&
                                                               !(c >= 0x2000 && c <= 0x2bff) && !(c >= 0x3000 && c <= 0x303f));
}
static bool cp_is_digit(uint32_t c) { return c >= '0' && c <= '9'; }

static std::string map_cps(const std::string & s, uint32_t (*fn)(uint32_t)) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        size_t len;
        uint32_t cp = decode_at(s, i, len);
        if (len == 1 && cp >= 0x80) {
            out += s[i];   // invalid byte: keep as is
        } else {
            utf8_append(out, fn(cp));
        }
        i += len;
    }
    return out;
}

std::string py_upper(const std::string & s) { return map_cps(s, cp_upper); }
std::string py_lower(const std::string & s) { return map_cps(s, cp_lower); }

std::string py_capitalize(const std::string & s) {
    std::vector<uint32_t> cps = decode(s);
    std::string out;
    for (size_t i = 0; i < cps.size(); ++i) {
        utf8_append(out, i == 0 ? cp_upper(cps[i]) : cp_lower(cps[i]));
    }
    return out;
}

static std::string py_title(const std::string & s) {
    std::string out;
    bool prev_cased = false;
    for (uint32_t c : decode(s)) {
        if (cp_is_cased(c) || cp_is_alpha(c)) {
            utf8_append(out, prev_cased ? cp_lower(c) : cp_upper(c));
            prev_cased = true;
        } else {
            utf8_append(out, c);
            prev_cased = false;
        }
    }
    return out;
}

std::string py_strip(const std::string & s, const Value * chars, bool left, bool right) {
    std::vector<uint32_t> set;
    bool whitespace = !chars || chars->is_none() || chars->is_undefined();
    if (!whitespace) {
        if (!chars->is_string()) {
            throw Error("strip arg must be None or str");
        }
        set = decode(chars->as_string());
    }
    auto strip_it = [&](uint32_t c) {
        return whitespace ? py_isspace(c) : std::find(set.begin(), set.end(), c) != set.end();
    };
    size_t b = 0, e = s.size();
    if (left) {
        while (b < e) {
            size_t len;
            uint32_t c = decode_at(s, b, len);
            if (!strip_it(c)) {
                break;
            }
            b += len;
        }
    }
    if (right) {
        while (e > b) {
            size_t start = e - 1;
            while (start > b && ((unsigned char) s[start] & 0xc0) == 0x80) {
                --start;
            }
            size_t len;
            uint32_t c = decode_at(s, start, len);
            if (!strip_it(c)) {
                break;
            }
            e = start;
        }
    }
    return s.substr(b, e - b);
}

std::vector<std::string> py_splitlines(const std::string & s) {
    std::vector<std::string> lines;
    size_t start = 0;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\n' || s[i] == '\r') {
            lines.push_back(s.substr(start, i - start));
            if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') {
                ++i;
            }
            start = i + 1;
        }
    }
    if (start < s.size()) {
        lines.push_back(s.substr(start));
    }
    return lines;
}

std::string py_replace(const std::string & s, const std::string & old, const std::string & repl, int64_t count) {
    std::string out;
    if (old.empty()) {
        // Python inserts the replacement between every character and at both ends
        std::vector<size_t> offs = utf8_offsets(s);
        int64_t done = 0;
        for (size_t k = 0; k + 1 < offs.size(); ++k) {
            if (count < 0 || done < count) {
                out += repl;
                ++done;
            }
            out.append(s, offs[k], offs[k + 1] - offs[k]);
        }
        if (count < 0 || done < count) {
            out += repl;
        }
        return out;
    }
    size_t pos = 0;
    int64_t done = 0;
    while (count < 0 || done < count) {
        size_t hit = s.find(old, pos);
        if (hit == std::string::npos) {
            break;
        }
        out.append(s, pos, hit - pos);
        out += repl;
        pos = hit + old.size();
        ++done;
    }
    out.append(s, pos, std::string::npos);
    return out;
}

static std::vector<Value> py_split(const std::string & s, const Value * sep, int64_t maxsplit, bool from_right) {
    std::vector<std::string> parts;
    if (!sep || sep->is_none()) {
        // runs of whitespace; leading/trailing whitespace yields no empty parts
        std::vector<std::pair<size_t, size_t>> words;
        size_t i = 0;
        while (i < s.size()) {
            size_t len;
            while (i < s.size() && py_isspace(decode_at(s, i, len))) {
                i += len;
            }
            if (i >= s.size()) {
                break;
            }
            size_t start = i;
            while (i < s.size() && !py_isspace(decode_at(s, i, len))) {
                i += len;
            }
            words.emplace_back(start, i);
        }
        // past maxsplit the remainder is kept whole, including whitespace at its far end
        if (maxsplit < 0 || (int64_t) words.size() <= maxsplit) {
            for (auto & w : words) {
                parts.push_back(s.substr(w.first, w.second - w.first));
            }
        } else if (!from_right) {
            for (int64_t k = 0; k < maxsplit; ++k) {
                parts.push_back(s.substr(words[k].first, words[k].second - words[k].first));
            }
            parts.push_back(s.substr(words[maxsplit].first));
        } else {
            size_t keep = words.size() - maxsplit;
            parts.push_back(s.substr(0, words[keep - 1].second));
            for (size_t k = keep; k < words.size(); ++k) {
                parts.push_back(s.substr(words[k].first, words[k].second - words[k].first));
            }
        }
    } else {
        if (!sep->is_string()) {
            throw Error("must be str or None, not " + sep->type_name());
        }
        const std::string & d = sep->as_string();
        if (d.empty()) {
            throw Error("empty separator");
        }
        if (!from_right) {
            size_t pos = 0;
            int64_t n = 0;
            while (maxsplit < 0 || n < maxsplit) {
                size_t hit = s.find(d, pos);
                if (hit == std::string::npos) {
                    break;
                }
                parts.push_back(s.substr(pos, hit - pos));
                pos = hit + d.size();
                ++n;
            }
            parts.push_back(s.substr(pos));
        } else {
            size_t end = s.size();
            int64_t n = 0;
            std::vector<std::string> rev;
            while (maxsplit < 0 || n < maxsplit) {
                if (end < d.size()) {
                    break;
                }
                size_t hit = s.rfind(d, end - d.size());
                if (hit == std::string::npos) {
                    break;
                }
                rev.push_back(s.substr(hit + d.size(), end - hit - d.size()));
                end = hit;
                ++n;
            }
            rev.push_back(s.substr(0, end));
            parts.assign(rev.rbegin(), rev.rend());
        }
    }
    std::vector<Value> out;
    out.reserve(parts.size());
    for (auto & p : parts) {
        out.emplace_back(std::move(p));
    }
    return out;
}

// ---- attribute and item access ----

static bool is_dict_method(const std::string & n) {
    static const char * const names[] = {"items", "keys", "values", "get", "copy", "pop", "popitem",
                                         "setdefault", "update", "clear", "fromkeys"};
    for (const char * m : names) {
        if (n == m) return true;
    }
    return false;
}

static bool is_list_method(const std::string & n) {
    static const char * const names[] = {"append", "extend", "insert", "remove", "pop", "clear",
                                         "index", "count", "sort", "reverse", "copy"};
    for (const char * m : names) {
        if (n == m) return true;
    }
    return false;
}

static bool is_str_method(const std::string & n) {
    static const char * const names[] = {
        "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith", "endswith", "upper", "lower",
        "title", "capitalize", "swapcase", "casefold", "replace", "find", "rfind", "index", "rindex", "count", "join",
        "format", "isdigit", "isalpha", "isalnum", "isspace", "isupper", "islower", "isnumeric", "isdecimal",
        "istitle", "zfill", "center", "ljust", "rjust", "partition", "rpartition", "removeprefix", "removesuffix",
        "encode", "expandtabs", "format_map", "isidentifier", "isprintable", "isascii", "maketrans", "translate"};
    for (const char * m : names) {
        if (n == m) return true;
    }
    return false;
}

// Methods the immutable sandbox refuses on the caller's (frozen) data: reading them yields an
// undefined that raises when used. The template's own lists and dicts may be changed.
static bool is_mutator(const Value & obj, const std::string & n) {
    if (!obj.frozen()) {
        return false;
    }
    if (obj.is_array()) {
        return n == "append" || n == "clear" || n == "extend" || n == "insert" || n == "pop" || n == "remove" ||
               n == "reverse" || n == "sort";
    }
    return obj.is_mapping() && (n == "clear" || n == "pop" || n == "popitem" || n == "setdefault" || n == "update");
}

static Value bound_method(const Value & obj, const std::string & name) {
    if (is_mutator(obj, name)) {
        return Value::undefined("access to attribute '" + name + "' of '" + obj.type_name() + "' object is unsafe.");
    }
    return Value::function(name, [obj, name](const CallArgs & args) -> Value {
        Value r;
        call_method(obj, name, args, r);
        return r;
    });
}

Value get_attr(const Value & obj, const std::string & name) {
    switch (obj.type()) {
        case Value::Type::Undefined: throw_undefined(obj);
        case Value::Type::Object:
            if (!obj.is_namespace() && is_dict_method(name)) {
                return bound_method(obj, name);
            }
            if (const Value * v = obj.fields().find(name)) {
                return *v;
            }
            break;
        case Value::Type::String:
            if (is_str_method(name)) {
                return bound_method(obj, name);
            }
            break;
        case Value::Type::Array:
            if (is_list_method(name)) {
                return bound_method(obj, name);
            }
            break;
        default: break;
    }
    return make_undefined_attr(obj, name);
}

static bool normalize_index(int64_t & idx, size_t n) {
    if (idx < 0) {
        idx += (int64_t) n;
    }
    return idx >= 0 && idx < (int64_t) n;
}

Value get_item(const Value & obj, const Value & key) {
    if (obj.is_undefined()) {
        throw_undefined(obj);
    }
    if (key.is_undefined() && !obj.is_object()) {
        throw_undefined(key);
    }
    if (obj.is_generator()) {
        return Value::undefined("'generator' object is not subscriptable");
    }
    if (obj.is_array() && (key.is_int() || key.is_bool())) {
        int64_t idx = key.as_int();
        if (normalize_index(idx, obj.items().size())) {
            return obj.items()[idx];
        }
        return Value::undefined(obj.type_name() + " object has no element " + key.str());
    }
    if (obj.is_string() && (key.is_int() || key.is_bool())) {
        int64_t idx = key.as_int();
        const std::string & s = obj.as_string();
        if (utf8_is_ascii(s)) {
            if (normalize_index(idx, s.size())) {
                return Value(std::string(1, s[idx]));
            }
        } else {
            std::vector<size_t> offs = utf8_offsets(s);
            if (normalize_index(idx, offs.size() - 1)) {
                return Value(s.substr(offs[idx], offs[idx + 1] - offs[idx]));
            }
        }
        return Value::undefined("string index out of range");
    }
    if (obj.is_mapping() || (obj.is_namespace() && key.is_string())) {
        if (const Value * v = obj.fields().find(object_key(key))) {
            return *v;
        }
    }
    if (key.is_string()) {
        return get_attr(obj, key.as_string());
    }
    return Value::undefined("'" + object_type_repr(obj) + "' has no attribute '" + key.str() + "'");
}

static int64_t slice_bound(const Value * v, const char * what) {
    if (!v->is_int() && !v->is_bool()) {
        throw Error(std::string("slice indices must be integers or None, got ") + v->type_name() + " for " + what);
    }
    return v->as_int();
}

Value slice(const Value & obj, const Value * start_v, const Value * stop_v, const Value * step_v) {
    if (obj.is_undefined()) {
        throw_undefined(obj);
    }
    auto absent = [](const Value * v) { return !v || v->is_none(); };
    int64_t step = absent(step_v) ? 1 : slice_bound(step_v, "step");
    if (step == 0) {
        throw Error("slice step cannot be zero");
    }
    if ((!obj.is_array() && !obj.is_string()) || obj.is_generator()) {
        return Value::undefined("'" + object_type_repr(obj) + "' cannot be sliced");
    }
    const bool ascii = obj.is_string() && utf8_is_ascii(obj.as_string());
    std::vector<size_t> offs;
    int64_t n;
    if (obj.is_array()) {
        n = (int64_t) obj.items().size();
    } else if (ascii) {
        n = (int64_t) obj.as_string().size();
    } else {
        offs = utf8_offsets(obj.as_string());
        n = (int64_t) offs.size() - 1;
    }
    // Python's PySlice_AdjustIndices
    auto adjust = [&](const Value * v, int64_t def) {
        if (absent(v)) {
            return def;
        }
        int64_t i = slice_bound(v, "bound");
        if (i < 0) {
            i += n;
            if (i < 0) {
                i = step < 0 ? -1 : 0;
            }
        } else if (i >= n) {
            i = step < 0 ? n - 1 : n;
        }
        return i;
    };
    int64_t start = adjust(start_v, step < 0 ? n - 1 : 0);
    int64_t stop = adjust(stop_v, step < 0 ? -1 : n);
    std::vector<int64_t> idx;
    if (step > 0) {
        for (int64_t i = start; i < stop; i += step) idx.push_back(i);
    } else {
        for (int64_t i = start; i > stop; i += step) idx.push_back(i);
    }
    if (obj.is_array()) {
        std::vector<Value> out;
        out.reserve(idx.size());
        for (int64_t i : idx) {
            out.push_back(obj.items()[i]);
        }
        return obj.is_tuple() ? Value::tuple(std::move(out)) : Value::array(std::move(out));
    }
    const std::string & s = obj.as_string();
    std::string out;
    if (step == 1 && !idx.empty()) {
        return ascii ? Value(s.substr(start, stop - start)) : Value(s.substr(offs[start], offs[stop] - offs[start]));
    }
    for (int64_t i : idx) {
        if (ascii) {
            out += s[i];
        } else {
            out.append(s, offs[i], offs[i + 1] - offs[i]);
        }
    }
    return Value(std::move(out));
}

std::vector<Value> iterate(const Value & v) {
    switch (v.type()) {
        case Value::Type::Undefined: return {};
        case Value::Type::Array: return v.items();
        case Value::Type::String: {
            std::vector<Value> out;
            const std::string & s = v.as_string();
            for (size_t i = 0; i < s.size();) {
                size_t len;
                decode_at(s, i, len);
                out.emplace_back(s.substr(i, len));
                i += len;
            }
            return out;
        }
        case Value::Type::Object:
            if (!v.is_namespace()) {
                std::vector<Value> out;
                for (const auto & kv : v.fields().entries) {
                    out.push_back(key_to_value(kv.first));
                }
                return out;
            }
            break;
        default: break;
    }
    throw Error("'" + v.type_name() + "' object is not iterable");
}

bool contains(const Value & container, const Value & item) {
    switch (container.type()) {
        case Value::Type::Undefined: return false;
        case Value::Type::String:
            if (!item.is_string()) {
                throw Error("'in <string>' requires string as left operand, not " + item.type_name());
            }
            return container.as_string().find(item.as_string()) != std::string::npos;
        case Value::Type::Array:
            for (const auto & v : container.items()) {
                if (v.equals(item)) {
                    return true;
                }
            }
            return false;
        case Value::Type::Object:
            if (!container.is_namespace()) {
                return container.fields().find(object_key(item)) != nullptr;
            }
            break;
        default: break;
    }
    throw Error("argument of type '" + container.type_name() + "' is not iterable");
}

// ---- operators ----

static double floor_mod(double a, double b) {
    double m = std::fmod(a, b);
    if (m != 0.0 && ((m < 0) != (b < 0))) {
        m += b;
    }
    return m;
}

// Python has big integers; past int64 we fail instead of wrapping silently.
[[noreturn]] static void overflow() {
    throw Error("integer overflow (values beyond 64 bits are not supported)");
}

static int64_t add_i(int64_t a, int64_t b) {
    int64_t r;
    if (__builtin_add_overflow(a, b, &r)) overflow();
    return r;
}

static int64_t sub_i(int64_t a, int64_t b) {
    int64_t r;
    if (__builtin_sub_overflow(a, b, &r)) overflow();
    return r;
}

static int64_t mul_i(int64_t a, int64_t b) {
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r)) overflow();
    return r;
}

// Results a template could blow up to exhaust memory ('x' * 10**12) are refused.
static void check_size(double bytes) {
    if (bytes > 256.0 * 1024 * 1024) {
        throw Error("result too large (over 256 MiB)");
    }
}

static Value repeat(const Value & seq, int64_t times) {
    check_size((double) times * (seq.is_string() ? seq.as_string().size() : seq.items().size() * sizeof(Value)));
    if (seq.is_string()) {
        std::string out;
        for (int64_t i = 0; i < times; ++i) {
            out += seq.as_string();
        }
        return Value(std::move(out));
    }
    std::vector<Value> out;
    for (int64_t i = 0; i < times; ++i) {
        out.insert(out.end(), seq.items().begin(), seq.items().end());
    }
    return seq.is_tuple() ? Value::tuple(std::move(out)) : Value::array(std::move(out));
}

Value binary_op(const std::string & op, const Value & a, const Value & b) {
    if (op == "~") {
        std::string s = a.str();
        b.append_str(s);
        return Value(std::move(s));
    }
    if (op == "==") return Value(a.equals(b));
    if (op == "!=") return Value(!a.equals(b));
    if (op == "in") return Value(contains(b, a));
    if (op == "not in") return Value(!contains(b, a));
    if (a.is_undefined()) throw_undefined(a);
    if (b.is_undefined()) throw_undefined(b);
    if (op == "<") return Value(a.less(b));
    if (op == ">") return Value(b.less(a));
    if (op == "<=") return Value(!b.less(a));
    if (op == ">=") return Value(!a.less(b));

    const bool nums = a.is_number() && b.is_number();
    const bool ints = nums && !a.is_float() && !b.is_float();
    auto unsupported = [&]() -> Error {
        return Error("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
    };
    if (op == "+") {
        if (ints) return Value(add_i(a.as_int(), b.as_int()));
        if (nums) return Value(a.as_float() + b.as_float());
        if (a.is_string() && b.is_string()) {
            // Markup + str escapes the plain side (markupsafe), which templates hit via `'x'|safe + s`
            if (a.is_markup() != b.is_markup()) {
                return Value::markup(a.is_markup() ? a.as_string() + html_escape(b.as_string()) : html_escape(a.as_string()) + b.as_string());
            }
            return a.is_markup() ? Value::markup(a.as_string() + b.as_string()) : Value(a.as_string() + b.as_string());
        }
        if (a.is_array() && b.is_array() && a.is_tuple() == b.is_tuple()) {
            std::vector<Value> out = a.items();
            out.insert(out.end(), b.items().begin(), b.items().end());
            return a.is_tuple() ? Value::tuple(std::move(out)) : Value::array(std::move(out));
        }
        if (a.is_string() || a.is_array()) {
            std::string t = a.is_string() ? "str" : a.type_name();
            throw Error("can only concatenate " + t + " (not \"" + b.type_name() + "\") to " + t);
        }
        throw unsupported();
    }
    if (op == "-") {
        if (ints) return Value(sub_i(a.as_int(), b.as_int()));
        if (nums) return Value(a.as_float() - b.as_float());
        throw unsupported();
    }
    if (op == "*") {
        if (ints) return Value(mul_i(a.as_int(), b.as_int()));
        if (nums) return Value(a.as_float() * b.as_float());
        if ((a.is_string() || a.is_array()) && (b.is_int() || b.is_bool())) return repeat(a, b.as_int());
        if ((b.is_string() || b.is_array()) && (a.is_int() || a.is_bool())) return repeat(b, a.as_int());
        if (a.is_string() || a.is_array()) {
            throw Error("can't multiply sequence by non-int of type '" + b.type_name() + "'");
        }
        throw unsupported();
    }
    if (op == "/") {
        if (!nums) throw unsupported();
        if (b.as_float() == 0.0) throw Error("division by zero");
        return Value(a.as_float() / b.as_float());
    }
    if (op == "//") {
        if (!nums) throw unsupported();
        if (b.as_float() == 0.0) throw Error("integer division or modulo by zero");
        if (ints) {
            int64_t x = a.as_int(), y = b.as_int();
            if (x == INT64_MIN && y == -1) {
                overflow();
            }
            int64_t q = x / y;
            if ((x % y != 0) && ((x < 0) != (y < 0))) {
                --q;
            }
            return Value(q);
        }
        return Value(std::floor(a.as_float() / b.as_float()));
    }
    if (op == "%") {
        if (a.is_string()) return Value(percent_format(a.as_string(), b));
        if (!nums) throw unsupported();
        if (b.as_float() == 0.0) throw Error("integer division or modulo by zero");
        if (ints) {
            if (b.as_int() == -1) {
                return Value((int64_t) 0);
            }
            int64_t m = a.as_int() % b.as_int();
            if (m != 0 && ((m < 0) != (b.as_int() < 0))) {
                m += b.as_int();
            }
            return Value(m);
        }
        return Value(floor_mod(a.as_float(), b.as_float()));
    }
    if (op == "**") {
        if (!nums) throw unsupported();
        if (ints && b.as_int() >= 0) {
            int64_t r = 1, base = a.as_int();
            for (int64_t e = b.as_int(); e > 0; --e) {
                r = mul_i(r, base);
            }
            return Value(r);
        }
        return Value(std::pow(a.as_float(), b.as_float()));
    }
    throw Error("unknown operator '" + op + "'");
}

// ---- methods ----

[[noreturn]] static void unsafe(const Value & obj, const std::string & name) {
    throw Error("access to attribute '" + name + "' of '" + obj.type_name() + "' object is unsafe.");
}

static const std::string & str_arg(const CallArgs & args, size_t i, const char * name, const char * method) {
    const Value * v = args.get(i, name);
    if (!v || !v->is_string()) {
        throw Error(std::string(method) + "() argument must be str, not " + (v ? v->type_name() : std::string("nothing")));
    }
    return v->as_string();
}

static Value cp_index(const std::string & s, size_t byte_pos) {
    return Value((int64_t) utf8_length(std::string_view(s).substr(0, byte_pos)));
}

static bool call_str_method(const std::string & s, const std::string & name, const CallArgs & args, Value & r) {
    const Value none(nullptr);
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
        r = py_strip(s, args.get(0, "chars"), name != "rstrip", name != "lstrip");
    } else if (name == "split" || name == "rsplit") {
        r = Value::array(py_split(s, args.get(0, "sep"), arg_int(args, 1, "maxsplit", -1), name == "rsplit"));
    } else if (name == "splitlines") {
        std::vector<Value> out;
        for (auto & l : py_splitlines(s)) {
            out.emplace_back(std::move(l));
        }
        r = Value::array(std::move(out));
    } else if (name == "startswith" || name == "endswith") {
        const Value * p = args.get(0, "prefix");
        if (!p) {
            throw Error(name + "() takes at least 1 argument (0 given)");
        }
        std::vector<Value> options = p->is_array() ? p->items() : std::vector<Value>{*p};
        bool hit = false;
        for (const auto & o : options) {
            if (!o.is_string()) {
                throw Error(name + " first arg must be str or a tuple of str, not " + o.type_name());
            }
            const std::string & x = o.as_string();
            if (x.size() <= s.size() &&
                (name == "startswith" ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0)) {
                hit = true;
            }
        }
        r = Value(hit);
    } else if (name == "upper") {
        r = py_upper(s);
    } else if (name == "lower" || name == "casefold") {
        r = py_lower(s);
    } else if (name == "title") {
        r = py_title(s);
    } else if (name == "capitalize") {
        r = py_capitalize(s);
    } else if (name == "swapcase") {
        std::string out;
        for (uint32_t c : decode(s)) {
            utf8_append(out, cp_is_upper(c) ? cp_lower(c) : cp_upper(c));
        }
        r = out;
    } else if (name == "replace") {
        r = py_replace(s, str_arg(args, 0, "old", "replace"), str_arg(args, 1, "new", "replace"), arg_int(args, 2, "count", -1));
    } else if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
        const std::string & sub = str_arg(args, 0, "sub", name.c_str());
        size_t pos = name[0] == 'r' ? s.rfind(sub) : s.find(sub);
        if (pos == std::string::npos) {
            if (name == "index" || name == "rindex") {
                throw Error("substring not found");
            }
            r = Value((int64_t) -1);
        } else {
            r = cp_index(s, pos);
        }
    } else if (name == "count") {
        const std::string & sub = str_arg(args, 0, "sub", "count");
        int64_t n = 0;
        if (sub.empty()) {
            n = (int64_t) utf8_length(s) + 1;
        } else {
            for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) {
                ++n;
            }
        }
        r = Value(n);
    } else if (name == "join") {
        const Value * it = args.get(0, "iterable");
        if (!it) {
            throw Error("join() takes exactly one argument (0 given)");
        }
        std::string out;
        bool first = true;
        for (const auto & v : iterate(*it)) {
            if (!v.is_string()) {
                throw Error("sequence item: expected str instance, " + v.type_name() + " found");
            }
            if (!first) {
                out += s;
            }
            first = false;
            out += v.as_string();
        }
        r = out;
    } else if (name == "format") {
        r = str_format(s, args);
    } else if (name == "isdigit" || name == "isnumeric" || name == "isdecimal" || name == "isalpha" || name == "isalnum" ||
               name == "isspace" || name == "isascii") {
        std::vector<uint32_t> cps = decode(s);
        bool ok = !cps.empty() || name == "isascii";
        for (uint32_t c : cps) {
            bool d = cp_is_digit(c);
            bool a = cp_is_alpha(c);
            if (name == "isalpha") ok = ok && a;
            else if (name == "isalnum") ok = ok && (a || d);
            else if (name == "isspace") ok = ok && py_isspace(c);
            else if (name == "isascii") ok = ok && c < 0x80;
            else ok = ok && d;
        }
        r = Value(ok);
    } else if (name == "isupper" || name == "islower") {
        bool any_cased = false, ok = true;
        for (uint32_t c : decode(s)) {
            if (cp_is_cased(c)) {
                any_cased = true;
                ok = ok && (name == "isupper" ? cp_is_upper(c) : cp_is_lower(c));
            }
        }
        r = Value(any_cased && ok);
    } else if (name == "istitle") {
        r = Value(!s.empty() && py_title(s) == s);
    } else if (name == "zfill" || name == "center" || name == "ljust" || name == "rjust") {
        int64_t width = arg_int(args, 0, "width", 0);
        std::string fill = name == "zfill" ? "0" : arg_or(args, 1, "fillchar", Value(" ")).str();
        int64_t len = (int64_t) utf8_length(s);
        if (width <= len) {
            r = s;
            return true;
        }
        check_size((double) width * fill.size());
        int64_t pad = width - len;
        auto rep = [&](int64_t n) {
            std::string out;
            for (int64_t i = 0; i < n; ++i) out += fill;
            return out;
        };
        if (name == "ljust") {
            r = s + rep(pad);
        } else if (name == "rjust") {
            r = rep(pad) + s;
        } else if (name == "zfill") {
            bool sign = !s.empty() && (s[0] == '-' || s[0] == '+');
            r = sign ? s.substr(0, 1) + rep(pad) + s.substr(1) : rep(pad) + s;
        } else {
            int64_t left = pad / 2 + (pad & width & 1);
            r = rep(left) + s + rep(pad - left);
        }
    } else if (name == "partition" || name == "rpartition") {
        const std::string & sep = str_arg(args, 0, "sep", name.c_str());
        size_t p = name == "partition" ? s.find(sep) : s.rfind(sep);
        if (p == std::string::npos) {
            r = name == "partition" ? Value::tuple({Value(s), Value(""), Value("")}) : Value::tuple({Value(""), Value(""), Value(s)});
        } else {
            r = Value::tuple({Value(s.substr(0, p)), Value(sep), Value(s.substr(p + sep.size()))});
        }
    } else if (name == "removeprefix") {
        const std::string & x = str_arg(args, 0, "prefix", "removeprefix");
        r = s.compare(0, x.size(), x) == 0 ? s.substr(x.size()) : s;
    } else if (name == "removesuffix") {
        const std::string & x = str_arg(args, 0, "suffix", "removesuffix");
        r = !x.empty() && x.size() <= s.size() && s.compare(s.size() - x.size(), x.size(), x) == 0 ? s.substr(0, s.size() - x.size()) : s;
    } else {
        return false;
    }
    return true;
}

// The modifying methods of a dict the template made itself (Python's semantics and messages).
static void mutate_dict(const Value & obj, const std::string & name, const CallArgs & args, Value & result) {
    Value self = obj;   // shares the dict
    Object & o = self.fields();
    result = Value(nullptr);
    if (name == "update") {
        if (const Value * other = args.get(0, "")) {
            if (!other->is_mapping()) {
                throw Error("dict.update() expects a dict, got '" + other->type_name() + "'");
            }
            for (const auto & kv : other->fields().entries) {
                o.set(kv.first, kv.second);
            }
        }
        for (const auto & kv : args.keyword) {
            o.set(kv.first, kv.second);
        }
    } else if (name == "pop" || name == "setdefault") {
        const Value * key = args.get(0, "key");
        if (!key) {
            throw Error(name + " expected at least 1 argument, got 0");
        }
        const std::string k = object_key(*key);
        if (const Value * v = o.find(k)) {
            result = *v;
            if (name == "pop") {
                o.erase(k);
            }
        } else if (name == "setdefault") {
            result = arg_or(args, 1, "default", Value(nullptr));
            o.set(k, result);
        } else if (const Value * d = args.get(1, "default")) {
            result = *d;
        } else {
            throw Error("KeyError: " + key->str());
        }
    } else if (name == "popitem") {
        if (o.entries.empty()) {
            throw Error("popitem(): dictionary is empty");
        }
        result = Value::tuple({key_to_value(o.entries.back().first), o.entries.back().second});
        o.entries.pop_back();
    } else if (name == "clear") {
        o.entries.clear();
    } else {
        throw Error("dict." + name + " is not supported");
    }
}

// The modifying methods of a list the template made itself.
static void mutate_list(const Value & obj, const std::string & name, const CallArgs & args, Value & result) {
    Value self = obj;   // shares the list
    std::vector<Value> & items = self.items();
    result = Value(nullptr);
    const int64_t n = (int64_t) items.size();
    // a Python index: negative from the end
    auto index_arg = [&](const Value & v, int64_t def) {
        if (v.is_none()) {
            return def;
        }
        if (!v.is_int()) {
            throw Error("list indices must be integers, not " + v.type_name());
        }
        const int64_t i = v.as_int();
        return i < 0 ? i + n : i;
    };
    if (name == "append") {
        const Value * x = args.get(0, "object");
        if (!x) {
            throw Error("list.append() takes exactly one argument (0 given)");
        }
        check_size(((double) items.size() + 1) * sizeof(Value));
        items.push_back(*x);
    } else if (name == "extend") {
        const Value * x = args.get(0, "iterable");
        if (!x || !x->is_array()) {
            throw Error("list.extend() expects a list");
        }
        const std::vector<Value> add = x->items();   // a copy: l.extend(l) doubles l
        check_size(((double) items.size() + (double) add.size()) * sizeof(Value));
        items.insert(items.end(), add.begin(), add.end());
    } else if (name == "insert") {
        const Value * i = args.get(0, "index");
        const Value * x = args.get(1, "object");
        if (!i || !x) {
            throw Error("insert expected 2 arguments");
        }
        const int64_t at = std::clamp<int64_t>(index_arg(*i, n), 0, n);
        check_size(((double) items.size() + 1) * sizeof(Value));
        items.insert(items.begin() + at, *x);
    } else if (name == "pop") {
        if (items.empty()) {
            throw Error("pop from empty list");
        }
        const Value * i = args.get(0, "index");
        const int64_t at = i ? index_arg(*i, n - 1) : n - 1;
        if (at < 0 || at >= n) {
            throw Error("pop index out of range");
        }
        result = items[(size_t) at];
        items.erase(items.begin() + at);
    } else if (name == "remove") {
        const Value * x = args.get(0, "value");
        if (!x) {
            throw Error("list.remove() takes exactly one argument (0 given)");
        }
        for (size_t i = 0; i < items.size(); ++i) {
            if (items[i].equals(*x)) {
                items.erase(items.begin() + (long) i);
                return;
            }
        }
        throw Error("list.remove(x): x not in list");
    } else if (name == "clear") {
        items.clear();
    } else if (name == "reverse") {
        std::reverse(items.begin(), items.end());
    } else {
        throw Error("list." + name + "() is not supported (the sort filter is)");
    }
}

bool call_method(const Value & obj, const std::string & name, const CallArgs & args, Value & result) {
    if (obj.is_string()) {
        if (!is_str_method(name)) {
            return false;
        }
        if (!call_str_method(obj.as_string(), name, args, result)) {
            throw Error("str." + name + " is not supported");
        }
        return true;
    }
    if (obj.is_mapping()) {
        if (!is_dict_method(name)) {
            return false;
        }
        const auto & entries = obj.fields().entries;
        if (name == "items") {
            std::vector<Value> out;
            out.reserve(entries.size());
            for (const auto & kv : entries) {
                out.push_back(Value::tuple({key_to_value(kv.first), kv.second}));
            }
            result = Value::array(std::move(out));
        } else if (name == "keys") {
            std::vector<Value> out;
            for (const auto & kv : entries) {
                out.push_back(key_to_value(kv.first));
            }
            result = Value::array(std::move(out));
        } else if (name == "values") {
            std::vector<Value> out;
            for (const auto & kv : entries) {
                out.push_back(kv.second);
            }
            result = Value::array(std::move(out));
        } else if (name == "get") {
            const Value * key = args.get(0, "key");
            if (!key) {
                throw Error("get expected at least 1 argument, got 0");
            }
            const Value * v = obj.fields().find(object_key(*key));
            result = v ? *v : arg_or(args, 1, "default", Value(nullptr));
        } else if (name == "copy") {
            result = Value::object();
            result.fields().entries = obj.fields().entries;
        } else if (obj.frozen()) {
            unsafe(obj, name);
        } else {
            mutate_dict(obj, name, args, result);
        }
        return true;
    }
    if (obj.is_array()) {
        if (!is_list_method(name) || (obj.is_tuple() && name != "index" && name != "count")) {
            return false;
        }
        if (name == "index" || name == "count") {
            const Value * x = args.get(0, "value");
            if (!x) {
                throw Error(name + "() takes exactly one argument (0 given)");
            }
            int64_t n = 0;
            for (size_t i = 0; i < obj.items().size(); ++i) {
                if (obj.items()[i].equals(*x)) {
                    if (name == "index") {
                        result = Value((int64_t) i);
                        return true;
                    }
                    ++n;
                }
            }
            if (name == "index") {
                throw Error(x->str() + " is not in list");
            }
            result = Value(n);
        } else if (name == "copy") {
            result = Value::array(obj.items());
        } else if (obj.frozen()) {
            unsafe(obj, name);
        } else {
            mutate_list(obj, name, args, result);
        }
        return true;
    }
    return false;
}

// ---- formatting ----

static std::string pad_to(std::string s, int64_t width, bool left_align, char fill = ' ') {
    int64_t len = (int64_t) utf8_length(s);
    if (width <= len) {
        return s;
    }
    check_size((double) width);
    std::string padding(width - len, fill);
    return left_align ? s + padding : padding + s;
}

std::string percent_format(const std::string & fmt, const Value & args) {
    std::vector<Value> positional = args.is_tuple() ? args.items() : std::vector<Value>{args};
    const bool mapping = args.is_mapping();
    size_t next = 0;
    auto take = [&]() -> const Value & {
        if (next >= positional.size()) {
            throw Error("not enough arguments for format string");
        }
        return positional[next++];
    };
    std::string out;
    for (size_t i = 0; i < fmt.size(); ++i) {
        if (fmt[i] != '%') {
            out += fmt[i];
            continue;
        }
        if (++i >= fmt.size()) {
            throw Error("incomplete format");
        }
        const Value * arg = nullptr;
        if (fmt[i] == '(') {
            size_t close = fmt.find(')', i);
            if (close == std::string::npos || !mapping) {
                throw Error("format requires a mapping");
            }
            arg = args.fields().find(fmt.substr(i + 1, close - i - 1));
            if (!arg) {
                throw Error("KeyError: '" + fmt.substr(i + 1, close - i - 1) + "'");
            }
            i = close + 1;
        }
        std::string flags;
        while (i < fmt.size() && std::strchr("-+ 0#", fmt[i])) {
            flags += fmt[i++];
        }
        int64_t width = -1, prec = -1;
        if (i < fmt.size() && fmt[i] == '*') {
            width = take().as_int();
            ++i;
        }
        while (i < fmt.size() && std::isdigit((unsigned char) fmt[i])) {
            width = (width < 0 ? 0 : width) * 10 + (fmt[i++] - '0');
        }
        if (i < fmt.size() && fmt[i] == '.') {
            ++i;
            prec = 0;
            while (i < fmt.size() && std::isdigit((unsigned char) fmt[i])) {
                prec = prec * 10 + (fmt[i++] - '0');
            }
        }
        if (i >= fmt.size()) {
            throw Error("incomplete format");
        }
        char conv = fmt[i];
        if (conv == '%') {
            out += '%';
            continue;
        }
        const Value & v = arg ? *arg : (mapping ? args : take());
        std::string piece;
        char buf[512];
        std::string cflags = flags;
        switch (conv) {
            case 's': piece = v.str(); if (prec >= 0) piece = piece.substr(0, prec); break;
            case 'r':
            case 'a': v.append_repr(piece); break;
            case 'd':
            case 'i':
            case 'u':
                if (!v.is_number()) throw Error("%" + std::string(1, conv) + " format: a real number is required, not " + v.type_name());
                std::snprintf(buf, sizeof(buf), ("%" + cflags + "lld").c_str(), (long long) (v.is_float() ? (int64_t) v.as_float() : v.as_int()));
                piece = buf;
                break;
            case 'f': case 'F': case 'e': case 'E': case 'g': case 'G':
                if (!v.is_number()) throw Error("must be real number, not " + v.type_name());
                std::snprintf(buf, sizeof(buf), ("%" + cflags + "." + std::to_string(prec < 0 ? 6 : prec) + conv).c_str(), v.as_float());
                piece = buf;
                break;
            case 'x': case 'X': case 'o':
                std::snprintf(buf, sizeof(buf), ("%" + cflags + "ll" + conv).c_str(), (long long) v.as_int());
                piece = buf;
                break;
            case 'c': piece = v.is_string() ? v.as_string() : std::string(1, (char) v.as_int()); break;
            default: throw Error(std::string("unsupported format character '") + conv + "'");
        }
        bool left = flags.find('-') != std::string::npos;
        bool zero = flags.find('0') != std::string::npos && !left && conv != 's' && conv != 'r';
        if (zero && width > 0 && (int64_t) piece.size() < width) {
            bool sign = !piece.empty() && (piece[0] == '-' || piece[0] == '+');
            std::string digits = sign ? piece.substr(1) : piece;
            piece = (sign ? piece.substr(0, 1) : "") + std::string(width - piece.size(), '0') + digits;
        }
        out += pad_to(piece, width, left);
    }
    if (!mapping && next < positional.size() && args.is_tuple()) {
        throw Error("not all arguments converted during string formatting");
    }
    return out;
}

// Applies a format spec such as ">10", "<5", "^7", ".2f", "d", "05d".
static std::string apply_spec(const Value & v, const std::string & spec) {
    if (spec.empty()) {
        return v.str();
    }
    size_t i = 0;
    char fill = ' ', align = 0;
    if (spec.size() >= 2 && std::strchr("<>^=", spec[1])) {
        fill = spec[0];
        align = spec[1];
        i = 2;
    } else if (std::strchr("<>^=", spec[0])) {
        align = spec[0];
        i = 1;
    }
    if (i < spec.size() && spec[i] == '0') {
        fill = '0';
        if (!align) align = '=';
        ++i;
    }
    int64_t width = 0, prec = -1;
    while (i < spec.size() && std::isdigit((unsigned char) spec[i])) width = width * 10 + (spec[i++] - '0');
    if (i < spec.size() && spec[i] == '.') {
        ++i;
        prec = 0;
        while (i < spec.size() && std::isdigit((unsigned char) spec[i])) prec = prec * 10 + (spec[i++] - '0');
    }
    char type = i < spec.size() ? spec[i] : 0;
    std::string body;
    char buf[512];
    if (type == 'f' || type == 'e' || type == 'g' || type == '%') {
        double d = v.as_float() * (type == '%' ? 100.0 : 1.0);
        std::snprintf(buf, sizeof(buf), ("%." + std::to_string(prec < 0 ? 6 : prec) + (type == '%' ? 'f' : type)).c_str(), d);
        body = buf;
        if (type == '%') body += '%';
    } else if (type == 'd') {
        body = std::to_string(v.as_int());
    } else {
        body = v.str();
        if (prec >= 0 && v.is_string()) body = body.substr(0, prec);
    }
    if (!align) align = v.is_number() ? '>' : '<';
    int64_t len = (int64_t) utf8_length(body);
    if (width <= len) return body;
    check_size((double) width);
    int64_t pad = width - len;
    if (align == '<') return body + std::string(pad, fill);
    if (align == '>' ) return std::string(pad, fill) + body;
    if (align == '=') {
        bool sign = !body.empty() && (body[0] == '-' || body[0] == '+');
        return sign ? body.substr(0, 1) + std::string(pad, fill) + body.substr(1) : std::string(pad, fill) + body;
    }
    return std::string(pad / 2, fill) + body + std::string(pad - pad / 2, fill);
}

std::string str_format(const std::string & fmt, const CallArgs & args) {
    std::string out;
    size_t auto_index = 0;
    bool manual = false, automatic = false;
    for (size_t i = 0; i < fmt.size(); ++i) {
        char c = fmt[i];
        if (c == '}' ) {
            if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
                ++i;
            }
            out += '}';
            continue;
        }
        if (c != '{') {
            out += c;
            continue;
        }
        if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
            out += '{';
            ++i;
            continue;
        }
        size_t close = fmt.find('}', i);
        if (close == std::string::npos) {
            throw Error("Single '{' encountered in format string");
        }
        std::string field = fmt.substr(i + 1, close - i - 1);
        std::string spec;
        size_t colon = field.find(':');
        if (colon != std::string::npos) {
            spec = field.substr(colon + 1);
            field = field.substr(0, colon);
        }
        size_t bang = field.find('!');
        char conversion = 0;
        if (bang != std::string::npos) {
            conversion = bang + 1 < field.size() ? field[bang + 1] : 0;
            field = field.substr(0, bang);
        }
        // field name, then .attr / [key] accessors
        size_t name_end = field.find_first_of(".[");
        std::string head = field.substr(0, name_end);
        Value v;
        if (!head.empty() && std::isdigit((unsigned char) head[0])) {
            manual = true;
        } else if (head.empty()) {
            automatic = true;
        }
        if (manual && automatic) {
            throw Error("cannot switch from manual field specification to automatic field numbering");
        }
        if (head.empty()) {
            if (auto_index >= args.positional.size()) throw Error("Replacement index " + std::to_string(auto_index) + " out of range for positional args tuple");
            v = args.positional[auto_index++];
        } else if (std::isdigit((unsigned char) head[0])) {
            size_t k = std::stoul(head);
            if (k >= args.positional.size()) throw Error("Replacement index " + head + " out of range for positional args tuple");
            v = args.positional[k];
        } else {
            const Value * kw = args.get_keyword(head);
            if (!kw) throw Error("KeyError: '" + head + "'");
            v = *kw;
        }
        for (size_t p = name_end; p != std::string::npos && p < field.size();) {
            if (field[p] == '.') {
                size_t e = field.find_first_of(".[", p + 1);
                v = get_attr(v, field.substr(p + 1, e == std::string::npos ? std::string::npos : e - p - 1));
                p = e;
            } else {
                size_t e = field.find(']', p);
                std::string key = field.substr(p + 1, e - p - 1);
                v = !key.empty() && std::isdigit((unsigned char) key[0]) ? get_item(v, Value((int64_t) std::stoll(key))) : get_item(v, Value(key));
                p = e == std::string::npos ? e : e + 1;
            }
        }
        if (conversion == 'r') {
            std::string r;
            v.append_repr(r);
            v = Value(r);
        } else if (conversion == 's') {
            v = Value(v.str());
        }
        out += apply_spec(v, spec);
        i = close;
    }
    return out;
}

} // namespace kiln::jinja
