// Value semantics modelled on Python objects as jinja2 sees them.
#include "jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace kiln::jinja {

Error::Error(const std::string & message, int line, int column)
    : std::runtime_error("line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + message),
      message_(message), line_(line), column_(column) {}

const Value * CallArgs::get_keyword(std::string_view name) const {
    for (const auto & kv : keyword) {
        if (kv.first == name) {
            return &kv.second;
        }
    }
    return nullptr;
}

const Value * CallArgs::get(size_t index, std::string_view name) const {
    if (index < positional.size()) {
        return &positional[index];
    }
    return name.empty() ? nullptr : get_keyword(name);
}

Value Value::undefined(std::string name) {
    Value v;
    v.str_ = std::move(name);
    return v;
}

Value Value::array(std::vector<Value> items) {
    Value v;
    v.type_ = Type::Array;
    v.array_ = std::make_shared<Array>();
    v.array_->items = std::move(items);
    return v;
}

Value Value::tuple(std::vector<Value> items) {
    Value v = array(std::move(items));
    v.tuple_ = true;
    return v;
}

Value Value::generator(std::vector<Value> items) {
    Value v = array(std::move(items));
    v.generator_ = true;
    return v;
}

Value Value::object() {
    Value v;
    v.type_ = Type::Object;
    v.object_ = std::make_shared<Object>();
    return v;
}

void Value::freeze() {
    if (array_) array_->frozen = true;
    if (object_) object_->frozen = true;
}

bool Value::frozen() const { return (array_ && array_->frozen) || (object_ && object_->frozen); }

Value Value::name_space() {
    Value v = object();
    v.namespace_ = true;
    return v;
}

Value Value::function(std::string name, NativeFunction fn) {
    Value v;
    v.type_ = Type::Function;
    v.function_ = std::make_shared<Function>(Function{std::move(name), std::move(fn)});
    return v;
}

Value Value::markup(std::string s) {
    Value v(std::move(s));
    v.markup_ = true;
    return v;
}

std::string html_escape(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&#34;"; break;
            case '\'': out += "&#39;"; break;
            default: out += c;
        }
    }
    return out;
}

// Encoded keys start with \x01, which never begins a real string key in a chat template.
// 1, 1.0 and True are the same key in Python, so integral numbers share one encoding.
std::string object_key(const Value & key) {
    switch (key.type()) {
        case Value::Type::String: return key.as_string();
        case Value::Type::Bool:
        case Value::Type::Int: return "\x01i" + std::to_string(key.as_int());
        case Value::Type::Float:
            if (key.as_float() == (double) (int64_t) key.as_float()) {
                return "\x01i" + std::to_string((int64_t) key.as_float());
            }
            {
                // appended rather than "literal" + string: GCC 12 warns falsely (-Wrestrict) on that form
                std::string k = "\x01f";
                return k += format_float(key.as_float());
            }
        case Value::Type::None: return "\x01n";
        default: throw Error("unhashable type: '" + key.type_name() + "'");
    }
}

Value key_to_value(const std::string & key) {
    if (key.empty() || key[0] != '\x01') {
        return Value(key);
    }
    if (key[1] == 'i') {
        return Value((int64_t) std::strtoll(key.c_str() + 2, nullptr, 10));
    }
    if (key[1] == 'f') {
        return Value(std::strtod(key.c_str() + 2, nullptr));
    }
    return Value(nullptr);
}

double Value::as_float() const {
    switch (type_) {
        case Type::Float: return num_.d;
        case Type::Int: return (double) num_.i;
        case Type::Bool: return num_.b ? 1.0 : 0.0;
        default: return 0.0;
    }
}

const std::vector<Value> & Value::items() const { return array_->items; }
std::vector<Value> & Value::items() { return array_->items; }
const Object & Value::fields() const { return *object_; }
Object & Value::fields() { return *object_; }
const Function & Value::callable() const { return *function_; }

bool Value::truthy() const {
    switch (type_) {
        case Type::Undefined:
        case Type::None: return false;
        case Type::Bool: return num_.b;
        case Type::Int: return num_.i != 0;
        case Type::Float: return num_.d != 0.0;
        case Type::String: return !str_.empty();
        case Type::Array: return generator_ || !array_->items.empty();
        case Type::Object: return namespace_ || !object_->entries.empty();
        case Type::Function: return true;
    }
    return false;
}

std::string Value::str() const {
    if (type_ == Type::String) {
        return str_;
    }
    std::string out;
    append_str(out);
    return out;
}

void Value::append_str(std::string & out) const {
    switch (type_) {
        case Type::Undefined: return;
        case Type::String: out += str_; return;
        default: append_repr(out); return;
    }
}

void Value::append_repr(std::string & out) const {
    switch (type_) {
        case Type::Undefined: return;
        case Type::None: out += "None"; return;
        case Type::Bool: out += num_.b ? "True" : "False"; return;
        case Type::Int: out += std::to_string(num_.i); return;
        case Type::Float: out += format_float(num_.d); return;
        case Type::String: append_string_repr(out, str_); return;
        case Type::Array: {
            if (generator_) {
                out += "<generator object>";
                return;
            }
            const auto & v = array_->items;
            out += tuple_ ? '(' : '[';
            for (size_t i = 0; i < v.size(); ++i) {
                if (i) {
                    out += ", ";
                }
                v[i].append_repr(out);
            }
            if (tuple_ && v.size() == 1) {
                out += ',';
            }
            out += tuple_ ? ')' : ']';
            return;
        }
        case Type::Object: {
            if (namespace_) {
                out += "<Namespace ";
            }
            out += '{';
            bool first = true;
            for (const auto & kv : object_->entries) {
                if (!first) {
                    out += ", ";
                }
                first = false;
                key_to_value(kv.first).append_repr(out);
                out += ": ";
                kv.second.append_repr(out);
            }
            out += '}';
            if (namespace_) {
                out += '>';
            }
            return;
        }
        case Type::Function: out += "<function " + function_->name + ">"; return;
    }
}

std::string Value::type_name() const {
    switch (type_) {
        case Type::Undefined: return "Undefined";
        case Type::None: return "NoneType";
        case Type::Bool: return "bool";
        case Type::Int: return "int";
        case Type::Float: return "float";
        case Type::String: return "str";
        case Type::Array: return generator_ ? "generator" : tuple_ ? "tuple" : "list";
        case Type::Object: return namespace_ ? "Namespace" : "dict";
        case Type::Function: return "function";
    }
    return "object";
}

bool Value::equals(const Value & o) const {
    if (is_number() && o.is_number()) {
        if (type_ == Type::Float || o.type_ == Type::Float) {
            return as_float() == o.as_float();
        }
        return as_int() == o.as_int();
    }
    if (type_ != o.type_) {
        return false;
    }
    switch (type_) {
        case Type::Undefined:
        case Type::None: return true;
        case Type::String: return str_ == o.str_;
        case Type::Array: {
            if (generator_ || o.generator_) {
                return array_ == o.array_;
            }
            if (tuple_ != o.tuple_ || array_->items.size() != o.array_->items.size()) {
                return false;
            }
            for (size_t i = 0; i < array_->items.size(); ++i) {
                if (!array_->items[i].equals(o.array_->items[i])) {
                    return false;
                }
            }
            return true;
        }
        case Type::Object: {
            if (namespace_ || o.namespace_) {
                return object_ == o.object_;
            }
            if (object_->entries.size() != o.object_->entries.size()) {
                return false;
            }
            for (const auto & kv : object_->entries) {
                const Value * other = o.object_->find(kv.first);
                if (!other || !kv.second.equals(*other)) {
                    return false;
                }
            }
            return true;
        }
        case Type::Function: return function_ == o.function_;
        default: return false;
    }
}

bool Value::less(const Value & o) const {
    if (is_number() && o.is_number()) {
        if (type_ == Type::Float || o.type_ == Type::Float) {
            return as_float() < o.as_float();
        }
        return as_int() < o.as_int();
    }
    if (type_ == Type::String && o.type_ == Type::String) {
        return str_ < o.str_;   // UTF-8 byte order is code point order
    }
    if (type_ == Type::Array && o.type_ == Type::Array) {
        const auto & a = array_->items;
        const auto & b = o.array_->items;
        for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
            if (!a[i].equals(b[i])) {
                return a[i].less(b[i]);
            }
        }
        return a.size() < b.size();
    }
    if (type_ == Type::Undefined || o.type_ == Type::Undefined) {
        const std::string & hint = type_ == Type::Undefined ? str_ : o.str_;
        throw Error(hint.empty() ? std::string("value is undefined") : hint);
    }
    throw Error("'<' not supported between instances of '" + type_name() + "' and '" + o.type_name() + "'");
}

size_t Value::length() const {
    switch (type_) {
        case Type::Undefined: return 0;
        case Type::String: return utf8_length(str_);
        case Type::Array:
            if (!generator_) {
                return array_->items.size();
            }
            break;
        case Type::Object:
            if (!namespace_) {
                return object_->entries.size();
            }
            break;
        default: break;
    }
    throw Error("object of type '" + type_name() + "' has no len()");
}

const Value * Object::find(std::string_view key) const {
    for (const auto & kv : entries) {
        if (kv.first == key) {
            return &kv.second;
        }
    }
    return nullptr;
}

Value * Object::find(std::string_view key) {
    for (auto & kv : entries) {
        if (kv.first == key) {
            return &kv.second;
        }
    }
    return nullptr;
}

void Object::set(const std::string & key, Value value) {
    if (Value * v = find(key)) {
        *v = std::move(value);
    } else {
        entries.emplace_back(key, std::move(value));
    }
}

bool Object::erase(std::string_view key) {
    for (auto it = entries.begin(); it != entries.end(); ++it) {
        if (it->first == key) {
            entries.erase(it);
            return true;
        }
    }
    return false;
}

std::string format_float(double d) {
    if (std::isnan(d)) {
        return "nan";
    }
    if (std::isinf(d)) {
        return d < 0 ? "-inf" : "inf";
    }
    if (d == 0.0) {
        return std::signbit(d) ? "-0.0" : "0.0";
    }
    // Shortest round-trip digits, then laid out the way Python's repr does.
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
    std::string sci(buf, res.ptr);
    std::string out;
    size_t p = 0;
    if (sci[0] == '-') {
        out += '-';
        p = 1;
    }
    size_t e = sci.find('e');
    std::string digits;
    for (size_t i = p; i < e; ++i) {
        if (sci[i] != '.') {
            digits += sci[i];
        }
    }
    int exp = std::atoi(sci.c_str() + e + 1);
    if (exp >= -4 && exp < 16) {
        if (exp >= 0) {
            std::string int_part = digits.substr(0, std::min<size_t>(digits.size(), exp + 1));
            while ((int) int_part.size() < exp + 1) {
                int_part += '0';
            }
            std::string frac = digits.size() > (size_t) exp + 1 ? digits.substr(exp + 1) : "0";
            out += int_part + "." + frac;
        } else {
            out += "0." + std::string(-exp - 1, '0') + digits;
        }
    } else {
        out += digits[0];
        if (digits.size() > 1) {
            out += "." + digits.substr(1);
        }
        char eb[16];
        std::snprintf(eb, sizeof(eb), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
        out += eb;
    }
    return out;
}

// Decodes one code point at s[i]; malformed bytes decode as themselves (length 1).
static uint32_t utf8_decode(std::string_view s, size_t i, size_t & len) {
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

void append_string_repr(std::string & out, std::string_view s) {
    bool has_single = s.find('\'') != std::string_view::npos;
    bool has_double = s.find('"') != std::string_view::npos;
    char quote = has_single && !has_double ? '"' : '\'';
    out += quote;
    for (size_t i = 0; i < s.size();) {
        size_t len;
        uint32_t cp = utf8_decode(s, i, len);
        char buf[16];
        if (cp == (uint32_t) quote || cp == '\\') {
            out += '\\';
            out += (char) cp;
        } else if (cp == '\n') {
            out += "\\n";
        } else if (cp == '\r') {
            out += "\\r";
        } else if (cp == '\t') {
            out += "\\t";
        } else if (cp < 0x20 || (cp >= 0x7f && cp <= 0xa0) || cp == 0xad) {
            std::snprintf(buf, sizeof(buf), "\\x%02x", cp);
            out += buf;
        } else if ((cp >= 0x2028 && cp <= 0x2029) || (cp >= 0x200b && cp <= 0x200f) || cp == 0xfeff) {
            std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
            out += buf;
        } else {
            out.append(s.data() + i, len);
        }
        i += len;
    }
    out += quote;
}

void utf8_append(std::string & out, uint32_t cp) {
    if (cp < 0x80) {
        out += (char) cp;
    } else if (cp < 0x800) {
        out += (char) (0xc0 | (cp >> 6));
        out += (char) (0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        out += (char) (0xe0 | (cp >> 12));
        out += (char) (0x80 | ((cp >> 6) & 0x3f));
        out += (char) (0x80 | (cp & 0x3f));
    } else {
        out += (char) (0xf0 | (cp >> 18));
        out += (char) (0x80 | ((cp >> 12) & 0x3f));
        out += (char) (0x80 | ((cp >> 6) & 0x3f));
        out += (char) (0x80 | (cp & 0x3f));
    }
}

size_t utf8_length(std::string_view s) {
    size_t n = 0;
    for (unsigned char c : s) {
        n += (c & 0xc0) != 0x80;
    }
    return n;
}

std::vector<size_t> utf8_offsets(std::string_view s) {
    std::vector<size_t> offs;
    offs.reserve(s.size() + 1);
    for (size_t i = 0; i < s.size(); ++i) {
        if (((unsigned char) s[i] & 0xc0) != 0x80) {
            offs.push_back(i);
        }
    }
    offs.push_back(s.size());
    return offs;
}

bool utf8_is_ascii(std::string_view s) {
    for (unsigned char c : s) {
        if (c >= 0x80) {
            return false;
        }
    }
    return true;
}

static void append_json_string(std::string & out, std::string_view s, bool ensure_ascii) {
    out += '"';
    for (size_t i = 0; i < s.size(); ++i) {
        const char ch = s[i];
        unsigned char c = ch;
        if (ensure_ascii && c >= 0x80) {
            size_t len;
            uint32_t cp = utf8_decode(s, i, len);
            char buf[16];
            if (cp >= 0x10000) {
                cp -= 0x10000;
                std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
            } else {
                std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
            }
            out += buf;
            i += len - 1;
            continue;
        }
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof(buf), "\\u%04x", c);
                    out += buf;
                } else {
                    out += ch;
                }
        }
    }
    out += '"';
}

static void append_json_rec(std::string & out, const Value & v, const JsonOptions & opt, const std::string & unit,
                            int depth) {
    const bool pretty = !unit.empty() || opt.indent >= 0;
    const std::string & item_sep = !opt.item_separator.empty() ? opt.item_separator : (pretty ? std::string(",") : std::string(", "));
    auto newline = [&](int d) {
        if (pretty) {
            out += '\n';
            for (int i = 0; i < d; ++i) {
                out += unit;
            }
        }
    };
    switch (v.type()) {
        case Value::Type::None: out += "null"; return;
        case Value::Type::Bool: out += v.as_bool() ? "true" : "false"; return;
        case Value::Type::Int: out += std::to_string(v.as_int()); return;
        case Value::Type::Float: {
            double d = v.as_float();
            if (std::isnan(d)) {
                out += "NaN";
            } else if (std::isinf(d)) {
                out += d < 0 ? "-Infinity" : "Infinity";
            } else {
                out += format_float(d);
            }
            return;
        }
        case Value::Type::String: append_json_string(out, v.as_string(), opt.ensure_ascii); return;
        case Value::Type::Array: {
            if (v.is_generator()) {
                break;
            }
            const auto & items = v.items();
            if (items.empty()) {
                out += "[]";
                return;
            }
            out += '[';
            for (size_t i = 0; i < items.size(); ++i) {
                if (i) {
                    out += item_sep;
                }
                newline(depth + 1);
                append_json_rec(out, items[i], opt, unit, depth + 1);
            }
            newline(depth);
            out += ']';
            return;
        }
        case Value::Type::Object: {
            if (v.is_namespace()) {
                break;
            }
            const auto & entries = v.fields().entries;
            if (entries.empty()) {
                out += "{}";
                return;
            }
            std::vector<const std::pair<std::string, Value> *> order;
            for (const auto & kv : entries) {
                order.push_back(&kv);
            }
            if (opt.sort_keys) {
                std::stable_sort(order.begin(), order.end(), [](auto a, auto b) { return a->first < b->first; });
            }
            out += '{';
            for (size_t i = 0; i < order.size(); ++i) {
                if (i) {
                    out += item_sep;
                }
                newline(depth + 1);
                const std::string & key = order[i]->first;
                if (!key.empty() && key[0] == '\x01') {
                    Value k = key_to_value(key);
                    append_json_string(out, k.is_none() ? std::string("null") : k.str(), opt.ensure_ascii);
                } else {
                    append_json_string(out, key, opt.ensure_ascii);
                }
                out += opt.key_separator;
                append_json_rec(out, order[i]->second, opt, unit, depth + 1);
            }
            newline(depth);
            out += '}';
            return;
        }
        default: break;
    }
    throw Error("Object of type " + v.type_name() + " is not JSON serializable");
}

void append_json(std::string & out, const Value & v, const JsonOptions & opt) {
    std::string unit = opt.indent_str;
    if (unit.empty() && opt.indent > 0) {
        unit.assign(opt.indent, ' ');
    }
    append_json_rec(out, v, opt, unit, 0);
}

std::string to_json(const Value & v, const JsonOptions & opt) {
    std::string out;
    append_json(out, v, opt);
    return out;
}

} // namespace kiln::jinja
