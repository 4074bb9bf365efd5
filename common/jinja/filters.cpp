// jinja2's built-in filters plus Hugging Face's tojson (json.dumps without ASCII or HTML
// escaping, keys in insertion order). Signatures and defaults follow jinja2 3.1.
#include "jinja/builtins.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <unordered_map>

namespace kiln::jinja {

namespace {

using FilterFn = Value (*)(const Value & in, const CallArgs & args);

std::string soft_str(const Value & v) {
    return v.str();
}

// jinja2's make_attrgetter: "a.b.0" walks items (then attributes), digits index lists.
Value get_path(const Value & item, const Value & attribute) {
    if (!attribute.is_string()) {
        return get_item(item, attribute);
    }
    Value cur = item;
    const std::string & path = attribute.as_string();
    size_t start = 0;
    while (true) {
        size_t dot = path.find('.', start);
        std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
        cur = digits ? get_item(cur, Value((int64_t) std::stoll(part))) : get_item(cur, Value(part));
        if (dot == std::string::npos) {
            return cur;
        }
        start = dot + 1;
    }
}

// Sort/unique/min/max compare strings case-insensitively unless case_sensitive is set.
Value sort_key(const Value & v, bool case_sensitive) {
    if (!case_sensitive && v.is_string()) {
        return Value(py_lower(v.as_string()));
    }
    return v;
}

std::vector<Value> items_of(const Value & v) {
    return iterate(v);
}

Value f_length(const Value & in, const CallArgs &) {
    return Value((int64_t) in.length());
}

// Markup in, Markup out: the string filters call str methods, which markupsafe wraps.
Value like(const Value & in, std::string s) {
    return in.is_markup() ? Value::markup(std::move(s)) : Value(std::move(s));
}

Value f_upper(const Value & in, const CallArgs &) { return like(in, py_upper(soft_str(in))); }
Value f_lower(const Value & in, const CallArgs &) { return like(in, py_lower(soft_str(in))); }
Value f_capitalize(const Value & in, const CallArgs &) { return like(in, py_capitalize(soft_str(in))); }

// jinja2's title: words split at whitespace, '-', and opening brackets.
Value f_title(const Value & in, const CallArgs &) {
    std::string s = soft_str(in), out;
    bool word_start = true;
    for (size_t i = 0; i < s.size();) {
        size_t len = 1;
        unsigned char c = s[i];
        if (c >= 0x80) {
            len = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
        }
        std::string ch = s.substr(i, len);
        bool sep = std::strchr(" \t\n\r\v\f-({[<", c) && c != 0;
        if (sep) {
            out += ch;
            word_start = true;
        } else {
            out += word_start ? py_upper(ch) : py_lower(ch);
            word_start = false;
        }
        i += len;
    }
    return Value(out);
}

Value f_trim(const Value & in, const CallArgs & args) {
    return like(in, py_strip(soft_str(in), args.get(0, "chars"), true, true));
}

Value f_replace(const Value & in, const CallArgs & args) {
    const Value * old = args.get(0, "old");
    const Value * repl = args.get(1, "new");
    if (!old || !repl) {
        throw Error("replace filter needs 'old' and 'new'");
    }
    return Value(py_replace(soft_str(in), old->str(), repl->str(), arg_int(args, 2, "count", -1)));
}

Value f_join(const Value & in, const CallArgs & args) {
    std::string sep = arg_or(args, 0, "d", Value("")).str();
    const Value * attribute = args.get(1, "attribute");
    std::string out;
    bool first = true;
    for (const auto & v : items_of(in)) {
        if (!first) {
            out += sep;
        }
        first = false;
        (attribute && !attribute->is_none() ? get_path(v, *attribute) : v).append_str(out);
    }
    return Value(out);
}

Value f_default(const Value & in, const CallArgs & args) {
    const Value & fallback = arg_or(args, 0, "default_value", Value(""));
    bool boolean = arg_bool(args, 1, "boolean", false);
    if (in.is_undefined() || (boolean && !in.truthy())) {
        return fallback;
    }
    return in;
}

Value f_first(const Value & in, const CallArgs &) {
    if (in.is_undefined()) {
        throw_undefined(in);
    }
    std::vector<Value> items = items_of(in);
    return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value f_last(const Value & in, const CallArgs &) {
    if (in.is_undefined()) {
        throw_undefined(in);
    }
    if (in.is_generator()) {
        throw Error("'generator' object is not reversible");
    }
    std::vector<Value> items = items_of(in);
    return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value f_list(const Value & in, const CallArgs &) {
    return Value::array(items_of(in));
}

Value f_string(const Value & in, const CallArgs &) {
    return in.is_string() ? in : Value(soft_str(in));
}

Value f_safe(const Value & in, const CallArgs &) {
    return Value::markup(soft_str(in));
}

Value f_int(const Value & in, const CallArgs & args) {
    const Value & fallback = arg_or(args, 0, "default", Value((int64_t) 0));
    int64_t base = arg_int(args, 1, "base", 10);
    if (in.is_int() || in.is_bool()) {
        return Value(in.as_int());
    }
    if (in.is_float()) {
        return std::isfinite(in.as_float()) ? Value((int64_t) in.as_float()) : fallback;
    }
    if (in.is_string()) {
        std::string s = py_strip(in.as_string(), nullptr, true, true);
        s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
        if (s.empty()) {
            return fallback;
        }
        char * end = nullptr;
        long long v = std::strtoll(s.c_str(), &end, (int) base);
        if (*end == 0) {
            return Value((int64_t) v);
        }
        double d = std::strtod(s.c_str(), &end);
        if (*end == 0 && std::isfinite(d)) {
            return Value((int64_t) d);
        }
    }
    return fallback;
}

Value f_float(const Value & in, const CallArgs & args) {
    const Value & fallback = arg_or(args, 0, "default", Value(0.0));
    if (in.is_number()) {
        return Value(in.as_float());
    }
    if (in.is_string()) {
        std::string s = py_strip(in.as_string(), nullptr, true, true);
        char * end = nullptr;
        double d = std::strtod(s.c_str(), &end);
        if (!s.empty() && *end == 0) {
            return Value(d);
        }
    }
    return fallback;
}

Value f_abs(const Value & in, const CallArgs &) {
    if (in.is_int() || in.is_bool()) {
        return Value((int64_t) std::llabs(in.as_int()));
    }
    if (in.is_float()) {
        return Value(std::fabs(in.as_float()));
    }
    throw Error("bad operand type for abs(): '" + in.type_name() + "'");
}

Value f_round(const Value & in, const CallArgs & args) {
    int64_t precision = arg_int(args, 0, "precision", 0);
    std::string method = arg_or(args, 1, "method", Value("common")).str();
    if (!in.is_number()) {
        throw Error("type " + in.type_name() + " doesn't define __round__ method");
    }
    if (!in.is_float() && method == "common") {
        return Value(in.as_int());
    }
    double scale = std::pow(10.0, (double) precision);
    double x = in.as_float();
    if (method == "ceil") {
        return Value(std::ceil(x * scale) / scale);
    }
    if (method == "floor") {
        return Value(std::floor(x * scale) / scale);
    }
    if (method != "common") {
        throw Error("method must be common, ceil or floor");
    }
    // printf rounds the exact binary value half-to-even, as Python's round() does
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.*f", (int) std::max<int64_t>(precision, 0), x);
    double r = std::strtod(buf, nullptr);
    if (precision < 0) {
        r = std::nearbyint(x * scale) / scale;
    }
    return Value(r);
}

// Hugging Face's tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
Value f_tojson(const Value & in, const CallArgs & args) {
    JsonOptions opt;
    opt.ensure_ascii = arg_bool(args, 0, "ensure_ascii", false);
    const Value * indent = args.get(1, "indent");
    if (indent && !indent->is_none() && !indent->is_undefined()) {
        if (indent->is_string()) {
            opt.indent_str = indent->as_string();
            opt.indent = 0;
        } else {
            opt.indent = (int) indent->as_int();
        }
    }
    const Value * seps = args.get(2, "separators");
    if (seps && seps->is_array() && seps->items().size() == 2) {
        opt.item_separator = seps->items()[0].str();
        opt.key_separator = seps->items()[1].str();
    }
    opt.sort_keys = arg_bool(args, 3, "sort_keys", false);
    return Value(to_json(in, opt));
}

Value f_items(const Value & in, const CallArgs &) {
    if (in.is_undefined()) {
        return Value::array();
    }
    if (!in.is_mapping()) {
        throw Error("Can only get item pairs from a mapping.");
    }
    std::vector<Value> out;
    for (const auto & kv : in.fields().entries) {
        out.push_back(Value::tuple({key_to_value(kv.first), kv.second}));
    }
    return Value::generator(std::move(out));
}

Value f_dictsort(const Value & in, const CallArgs & args) {
    bool case_sensitive = arg_bool(args, 0, "case_sensitive", false);
    std::string by = arg_or(args, 1, "by", Value("key")).str();
    bool reverse = arg_bool(args, 2, "reverse", false);
    if (!in.is_mapping()) {
        throw Error("dictsort filter needs a mapping, got " + in.type_name());
    }
    if (by != "key" && by != "value") {
        throw Error("You can only sort by either 'key' or 'value'");
    }
    std::vector<Value> out = f_items(in, {}).items();
    const size_t pos = by == "key" ? 0 : 1;
    std::stable_sort(out.begin(), out.end(), [&](const Value & a, const Value & b) {
        Value ka = sort_key(a.items()[pos], case_sensitive), kb = sort_key(b.items()[pos], case_sensitive);
        return reverse ? kb.less(ka) : ka.less(kb);
    });
    return Value::array(std::move(out));
}

// select/reject/selectattr/rejectattr share this: `attr` selects the tested value, the test
// name and its arguments follow.
Value select_impl(const Value & in, const CallArgs & args, bool with_attr, bool keep_when) {
    size_t first_test_arg = with_attr ? 1 : 0;
    Value attribute;
    if (with_attr) {
        const Value * a = args.get(0, "");
        if (!a) {
            throw Error("missing attribute name");
        }
        attribute = *a;
    }
    std::string test;
    CallArgs test_args;
    if (args.positional.size() > first_test_arg) {
        test = args.positional[first_test_arg].str();
        test_args.positional.assign(args.positional.begin() + first_test_arg + 1, args.positional.end());
        test_args.keyword = args.keyword;
    }
    std::vector<Value> out;
    if (!in.truthy()) {
        return Value::generator({});
    }
    for (const auto & item : items_of(in)) {
        Value v = with_attr ? get_path(item, attribute) : item;
        bool r = test.empty() ? v.truthy() : apply_test(test, v, test_args);
        if (r == keep_when) {
            out.push_back(item);
        }
    }
    return Value::generator(std::move(out));
}

Value f_select(const Value & in, const CallArgs & args) { return select_impl(in, args, false, true); }
Value f_reject(const Value & in, const CallArgs & args) { return select_impl(in, args, false, false); }
Value f_selectattr(const Value & in, const CallArgs & args) { return select_impl(in, args, true, true); }
Value f_rejectattr(const Value & in, const CallArgs & args) { return select_impl(in, args, true, false); }

Value f_map(const Value & in, const CallArgs & args) {
    std::vector<Value> out;
    if (!in.truthy()) {
        return Value::generator({});
    }
    if (const Value * attribute = args.get_keyword("attribute")) {
        const Value * fallback = args.get_keyword("default");
        for (const auto & item : items_of(in)) {
            Value v = get_path(item, *attribute);
            out.push_back(v.is_undefined() && fallback ? *fallback : v);
        }
        return Value::generator(std::move(out));
    }
    if (args.positional.empty()) {
        throw Error("map requires a filter argument");
    }
    std::string filter = args.positional[0].str();
    CallArgs rest;
    rest.positional.assign(args.positional.begin() + 1, args.positional.end());
    rest.keyword = args.keyword;
    for (const auto & item : items_of(in)) {
        out.push_back(apply_filter(filter, item, rest));
    }
    return Value::generator(std::move(out));
}

Value f_unique(const Value & in, const CallArgs & args) {
    bool case_sensitive = arg_bool(args, 0, "case_sensitive", false);
    const Value * attribute = args.get(1, "attribute");
    std::vector<Value> out, seen;
    for (const auto & item : items_of(in)) {
        Value key = sort_key(attribute && !attribute->is_none() ? get_path(item, *attribute) : item, case_sensitive);
        bool dup = false;
        for (const auto & s : seen) {
            if (s.equals(key)) {
                dup = true;
                break;
            }
        }
        if (!dup) {
            seen.push_back(key);
            out.push_back(item);
        }
    }
    return Value::generator(std::move(out));
}

Value f_sort(const Value & in, const CallArgs & args) {
    bool reverse = arg_bool(args, 0, "reverse", false);
    bool case_sensitive = arg_bool(args, 1, "case_sensitive", false);
    const Value * attribute = args.get(2, "attribute");
    std::vector<Value> attrs;
    if (attribute && attribute->is_string()) {
        size_t start = 0;
        const std::string & a = attribute->as_string();
        while (true) {
            size_t comma = a.find(',', start);
            attrs.emplace_back(py_strip(a.substr(start, comma == std::string::npos ? std::string::npos : comma - start), nullptr, true, true));
            if (comma == std::string::npos) break;
            start = comma + 1;
        }
    } else if (attribute && !attribute->is_none()) {
        attrs.push_back(*attribute);
    }
    std::vector<Value> items = items_of(in);
    std::vector<std::pair<Value, size_t>> keyed;
    for (size_t i = 0; i < items.size(); ++i) {
        Value key;
        if (attrs.empty()) {
            key = sort_key(items[i], case_sensitive);
        } else {
            std::vector<Value> parts;
            for (const auto & a : attrs) {
                parts.push_back(sort_key(get_path(items[i], a), case_sensitive));
            }
            // a list even for one attribute, as jinja2's multi-attrgetter: lists compare their
            // items with == first, so missing (undefined) attributes compare equal, not fail
            key = Value::array(std::move(parts));
        }
        keyed.emplace_back(std::move(key), i);
    }
    std::stable_sort(keyed.begin(), keyed.end(), [&](const auto & a, const auto & b) {
        return reverse ? b.first.less(a.first) : a.first.less(b.first);
    });
    std::vector<Value> out;
    for (auto & k : keyed) {
        out.push_back(items[k.second]);
    }
    return Value::array(std::move(out));
}

Value f_sum(const Value & in, const CallArgs & args) {
    const Value * attribute = args.get(0, "attribute");
    Value total = arg_or(args, 1, "start", Value((int64_t) 0));
    for (const auto & item : items_of(in)) {
        total = binary_op("+", total, attribute && !attribute->is_none() ? get_path(item, *attribute) : item);
    }
    return total;
}

Value min_max(const Value & in, const CallArgs & args, bool want_max) {
    bool case_sensitive = arg_bool(args, 0, "case_sensitive", false);
    const Value * attribute = args.get(1, "attribute");
    std::vector<Value> items = items_of(in);
    if (items.empty()) {
        return Value::undefined(std::string("No aggregated item, sequence was empty."));
    }
    size_t best = 0;
    Value best_key;
    for (size_t i = 0; i < items.size(); ++i) {
        Value key = sort_key(attribute && !attribute->is_none() ? get_path(items[i], *attribute) : items[i], case_sensitive);
        if (i == 0 || (want_max ? best_key.less(key) : key.less(best_key))) {
            best = i;
            best_key = key;
        }
    }
    return items[best];
}

Value f_min(const Value & in, const CallArgs & args) { return min_max(in, args, false); }
Value f_max(const Value & in, const CallArgs & args) { return min_max(in, args, true); }

Value f_reverse(const Value & in, const CallArgs &) {
    if (in.is_string()) {
        std::vector<Value> chars = iterate(in);
        std::string out;
        for (auto it = chars.rbegin(); it != chars.rend(); ++it) {
            out += it->as_string();
        }
        return Value(out);
    }
    std::vector<Value> items = items_of(in);
    std::reverse(items.begin(), items.end());
    return Value::generator(std::move(items));   // reversed() is an iterator too
}

Value f_escape(const Value & in, const CallArgs &) {
    return in.is_markup() ? in : Value::markup(html_escape(soft_str(in)));
}

Value f_forceescape(const Value & in, const CallArgs &) {
    return Value::markup(html_escape(soft_str(in)));
}

// jinja2's indent: the first line is indented only with first=True, blank lines only with blank=True.
Value f_indent(const Value & in, const CallArgs & args) {
    const Value & width = arg_or(args, 0, "width", Value((int64_t) 4));
    bool first = arg_bool(args, 1, "first", false);
    bool blank = arg_bool(args, 2, "blank", false);
    std::string unit = width.is_string() ? width.as_string() : std::string((size_t) std::max<int64_t>(0, width.as_int()), ' ');
    std::string s = soft_str(in) + "\n";
    std::vector<std::string> lines = py_splitlines(s);
    std::string out;
    for (size_t i = 0; i < lines.size(); ++i) {
        if (i > 0) {
            out += '\n';
            if (blank || !lines[i].empty()) {
                out += unit;
            }
        }
        out += lines[i];
    }
    if (first) {
        out = unit + out;
    }
    return Value(out);
}

Value f_wordcount(const Value & in, const CallArgs &) {
    std::string s = soft_str(in);
    int64_t n = 0;
    bool in_word = false;
    for (unsigned char c : s) {
        bool w = std::isalnum(c) || c == '_' || c >= 0x80;
        if (w && !in_word) {
            ++n;
        }
        in_word = w;
    }
    return Value(n);
}

Value f_center(const Value & in, const CallArgs & args) {
    CallArgs a;
    a.positional.push_back(Value(arg_int(args, 0, "width", 80)));
    Value r;
    call_method(Value(soft_str(in)), "center", a, r);
    return r;
}

Value f_batch(const Value & in, const CallArgs & args) {
    int64_t n = arg_int(args, 0, "linecount", 1);
    if (n <= 0) {
        throw Error("batch size must be positive");
    }
    const Value * fill = args.get(1, "fill_with");
    std::vector<Value> out, cur;
    for (const auto & item : items_of(in)) {
        cur.push_back(item);
        if ((int64_t) cur.size() == n) {
            out.push_back(Value::array(std::move(cur)));
            cur.clear();
        }
    }
    if (!cur.empty()) {
        if (fill && !fill->is_none()) {
            while ((int64_t) cur.size() < n) cur.push_back(*fill);
        }
        out.push_back(Value::array(std::move(cur)));
    }
    return Value::array(std::move(out));
}

Value f_format(const Value & in, const CallArgs & args) {
    if (!args.keyword.empty()) {
        Value obj = Value::object();
        for (const auto & kv : args.keyword) obj.fields().set(kv.first, kv.second);
        return Value(percent_format(soft_str(in), obj));
    }
    return Value(percent_format(soft_str(in), Value::tuple(args.positional)));
}

Value f_attr(const Value & in, const CallArgs & args) {
    const Value * name = args.get(0, "name");
    if (!name) throw Error("attr filter needs a name");
    return get_attr(in, name->str());
}

Value f_pprint(const Value & in, const CallArgs &) {
    std::string out;
    in.append_repr(out);
    return Value(out);
}

Value f_truncate(const Value & in, const CallArgs & args) {
    std::string s = soft_str(in);
    int64_t length = arg_int(args, 0, "length", 255);
    bool killwords = arg_bool(args, 1, "killwords", false);
    std::string end = arg_or(args, 2, "end", Value("...")).str();
    int64_t leeway = arg_int(args, 3, "leeway", 5);
    std::vector<size_t> offs = utf8_offsets(s);
    int64_t n = (int64_t) offs.size() - 1;
    if (n <= length + leeway) return Value(s);
    int64_t keep = std::max<int64_t>(0, length - (int64_t) utf8_length(end));
    std::string head = s.substr(0, offs[keep]);
    if (!killwords) {
        size_t sp = head.rfind(' ');
        if (sp != std::string::npos) head = head.substr(0, sp);
    }
    return Value(head + end);
}

const std::unordered_map<std::string, FilterFn> & filter_table() {
    static const std::unordered_map<std::string, FilterFn> table = {
        {"length", f_length}, {"count", f_length}, {"upper", f_upper}, {"lower", f_lower},
        {"title", f_title}, {"capitalize", f_capitalize}, {"trim", f_trim}, {"replace", f_replace},
        {"join", f_join}, {"default", f_default}, {"d", f_default}, {"first", f_first}, {"last", f_last},
        {"list", f_list}, {"string", f_string}, {"int", f_int}, {"float", f_float}, {"abs", f_abs},
        {"round", f_round}, {"tojson", f_tojson}, {"items", f_items}, {"dictsort", f_dictsort},
        {"select", f_select}, {"reject", f_reject}, {"selectattr", f_selectattr}, {"rejectattr", f_rejectattr},
        {"map", f_map}, {"unique", f_unique}, {"sort", f_sort}, {"sum", f_sum}, {"min", f_min}, {"max", f_max},
        {"reverse", f_reverse}, {"safe", f_safe}, {"escape", f_escape}, {"e", f_escape}, {"forceescape", f_forceescape},
        {"indent", f_indent}, {"wordcount", f_wordcount}, {"center", f_center}, {"batch", f_batch},
        {"format", f_format}, {"attr", f_attr}, {"pprint", f_pprint}, {"truncate", f_truncate},
    };
    return table;
}

} // namespace

Value apply_filter(const std::string & name, const Value & input, const CallArgs & args) {
    const auto & table = filter_table();
    auto it = table.find(name);
    if (it == table.end()) {
        throw Error("No filter named '" + name + "'.");
    }
    // Filters that turn their input into a string accept undefined as ""; the others see it
    // and decide (default, length, list, ...). Arithmetic ones raise like jinja2.
    if (input.is_undefined() && (name == "abs" || name == "round" || name == "dictsort")) {
        throw_undefined(input);
    }
    return it->second(input, args);
}

} // namespace kiln::jinja
