// jinja2 tests (`x is defined`, ...), the global functions chat templates call, and argument
// helpers shared by the built-ins.
#include "jinja/builtins.h"

#include <cmath>
#include <cstring>

namespace kiln::jinja {

Value arg_or(const CallArgs & args, size_t index, const char * name, const Value & fallback) {
    const Value * v = args.get(index, name);
    return v && !v->is_undefined() ? *v : fallback;
}

int64_t arg_int(const CallArgs & args, size_t index, const char * name, int64_t fallback) {
    const Value * v = args.get(index, name);
    if (!v || v->is_none() || v->is_undefined()) {
        return fallback;
    }
    if (v->is_int() || v->is_bool()) {
        return v->as_int();
    }
    if (v->is_float()) {
        return (int64_t) v->as_float();
    }
    throw Error(std::string("argument '") + name + "' must be an integer, not " + v->type_name());
}

bool arg_bool(const CallArgs & args, size_t index, const char * name, bool fallback) {
    const Value * v = args.get(index, name);
    return v && !v->is_undefined() ? v->truthy() : fallback;
}

static const Value & need(const CallArgs & args, size_t index, const char * test) {
    const Value * v = args.get(index, "");
    if (!v) {
        throw Error(std::string("test '") + test + "' needs an argument");
    }
    return *v;
}

bool apply_test(const std::string & name, const Value & v, const CallArgs & args) {
    const char * n = name.c_str();
    if (name == "defined") return !v.is_undefined();
    if (name == "undefined") return v.is_undefined();
    if (name == "none") return v.is_none();
    if (name == "boolean") return v.is_bool();
    if (name == "true") return v.is_bool() && v.as_bool();
    if (name == "false") return v.is_bool() && !v.as_bool();
    if (name == "integer") return v.is_int();
    if (name == "float") return v.is_float();
    if (name == "number") return v.is_number();
    if (name == "string") return v.is_string();
    if (name == "mapping") return v.is_mapping();
    if (name == "iterable") return v.is_array() || v.is_string() || v.is_mapping() || v.is_undefined();
    if (name == "sequence") return (v.is_array() && !v.is_generator()) || v.is_string() || v.is_mapping();
    if (name == "callable") return v.is_function();
    if (name == "escaped") return false;
    if (name == "lower") return v.is_string() && py_lower(v.as_string()) == v.as_string();
    if (name == "upper") return v.is_string() && py_upper(v.as_string()) == v.as_string();
    if (name == "odd" || name == "even" || name == "divisibleby") {
        if (v.is_undefined()) throw_undefined(v);
        if (!v.is_int() && !v.is_bool()) {
            if (v.is_float() && name == "divisibleby") {
                double d = need(args, 0, n).as_float();
                return d != 0 && std::fmod(v.as_float(), d) == 0;
            }
            throw Error("test '" + name + "' needs an integer, got " + v.type_name());
        }
        if (name == "odd") return (v.as_int() % 2) != 0;
        if (name == "even") return (v.as_int() % 2) == 0;
        const Value & d = need(args, 0, n);
        if (d.as_int() == 0) throw Error("integer division or modulo by zero");
        return v.as_int() % d.as_int() == 0;
    }
    if (name == "eq" || name == "equalto" || name == "==") return v.equals(need(args, 0, n));
    if (name == "ne" || name == "!=") return !v.equals(need(args, 0, n));
    if (name == "lt" || name == "lessthan" || name == "<") return binary_op("<", v, need(args, 0, n)).truthy();
    if (name == "le" || name == "<=") return binary_op("<=", v, need(args, 0, n)).truthy();
    if (name == "gt" || name == "greaterthan" || name == ">") return binary_op(">", v, need(args, 0, n)).truthy();
    if (name == "ge" || name == ">=") return binary_op(">=", v, need(args, 0, n)).truthy();
    if (name == "in") return contains(need(args, 0, n), v);
    if (name == "sameas") {
        const Value & o = need(args, 0, n);
        if (v.type() != o.type()) return false;
        if (v.is_none() || v.is_undefined()) return true;
        if (v.is_bool()) return v.as_bool() == o.as_bool();
        return v.equals(o);   // identity is not observable for immutable values
    }
    if (name == "filter" || name == "test") {
        return v.is_string();   // names of filters/tests; approximate
    }
    throw Error("No test named '" + name + "'.");
}

static Value make_range(const CallArgs & args) {
    if (args.positional.empty() || args.positional.size() > 3) {
        throw Error("range expected 1 to 3 arguments, got " + std::to_string(args.positional.size()));
    }
    for (const auto & a : args.positional) {
        if (!a.is_int() && !a.is_bool()) {
            throw Error("'" + a.type_name() + "' object cannot be interpreted as an integer");
        }
    }
    int64_t start = 0, stop, step = 1;
    if (args.positional.size() == 1) {
        stop = args.positional[0].as_int();
    } else {
        start = args.positional[0].as_int();
        stop = args.positional[1].as_int();
        if (args.positional.size() == 3) {
            step = args.positional[2].as_int();
        }
    }
    if (step == 0) {
        throw Error("range() arg 3 must not be zero");
    }
    int64_t count = step > 0 ? (stop > start ? (stop - start + step - 1) / step : 0) : (start > stop ? (start - stop - step - 1) / -step : 0);
    if (count > 100000) {   // the sandbox's MAX_RANGE
        throw Error("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    }
    std::vector<Value> out;
    out.reserve(count);
    for (int64_t i = 0; i < count; ++i) {
        out.emplace_back(start + i * step);
    }
    return Value::array(std::move(out));
}

static Value make_dict(const CallArgs & args, bool name_space) {
    Value obj = name_space ? Value::name_space() : Value::object();
    for (const auto & p : args.positional) {
        if (p.is_mapping()) {
            for (const auto & kv : p.fields().entries) {
                obj.fields().set(kv.first, kv.second);
            }
        } else if (p.is_array()) {
            for (const auto & pair : p.items()) {
                if (!pair.is_array() || pair.items().size() != 2) {
                    throw Error("dictionary update sequence element has wrong length");
                }
                obj.fields().set(object_key(pair.items()[0]), pair.items()[1]);
            }
        } else {
            throw Error("'" + p.type_name() + "' object is not iterable");
        }
    }
    for (const auto & kv : args.keyword) {
        obj.fields().set(kv.first, kv.second);
    }
    return obj;
}

Value get_global(const std::string & name, const std::optional<std::tm> & now) {
    if (name == "range") {
        return Value::function("range", make_range);
    }
    if (name == "dict") {
        return Value::function("dict", [](const CallArgs & a) { return make_dict(a, false); });
    }
    if (name == "namespace") {
        return Value::function("namespace", [](const CallArgs & a) { return make_dict(a, true); });
    }
    if (name == "raise_exception") {
        return Value::function("raise_exception", [](const CallArgs & a) -> Value {
            throw Error(a.positional.empty() ? std::string("raise_exception called") : a.positional[0].str());
        });
    }
    if (name == "strftime_now") {
        return Value::function("strftime_now", [now](const CallArgs & a) -> Value {
            const Value * fmt = a.get(0, "format");
            if (!fmt || !fmt->is_string()) {
                throw Error("strftime_now() needs a format string");
            }
            std::tm tm{};
            if (now) {
                tm = *now;
            } else {
                std::time_t t = std::time(nullptr);
                localtime_r(&t, &tm);
            }
            char buf[512];
            size_t n = std::strftime(buf, sizeof(buf), fmt->as_string().c_str(), &tm);
            return Value(std::string(buf, n));
        });
    }
    if (name == "joiner") {
        return Value::function("joiner", [](const CallArgs & a) -> Value {
            std::string sep = arg_or(a, 0, "sep", Value(", ")).str();
            auto used = std::make_shared<bool>(false);
            return Value::function("joiner", [sep, used](const CallArgs &) -> Value {
                if (!*used) {
                    *used = true;
                    return Value("");
                }
                return Value(sep);
            });
        });
    }
    if (name == "cycler") {
        return Value::function("cycler", [](const CallArgs & a) -> Value {
            auto items = std::make_shared<std::vector<Value>>(a.positional);
            auto pos = std::make_shared<size_t>(0);
            Value obj = Value::name_space();
            obj.fields().set("next", Value::function("next", [items, pos](const CallArgs &) -> Value {
                if (items->empty()) return Value();
                Value v = (*items)[*pos % items->size()];
                ++*pos;
                return v;
            }));
            obj.fields().set("reset", Value::function("reset", [pos](const CallArgs &) -> Value {
                *pos = 0;
                return Value(nullptr);
            }));
            return obj;
        });
    }
    return Value();
}

} // namespace kiln::jinja
