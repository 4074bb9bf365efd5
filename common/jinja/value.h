// Dynamic values of Kiln's Jinja engine, with Python's semantics (truthiness, str(), repr(),
// equality and ordering) because chat templates are written against Python jinja2.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::jinja {

// Every failure while parsing or rendering. `line`/`column` (1-based) are 0 until the error is
// attributed to a place in the template; what() then starts with "line L, column C: ".
class Error : public std::runtime_error {
public:
    explicit Error(const std::string & message) : std::runtime_error(message), message_(message) {}
    Error(const std::string & message, int line, int column);

    const std::string & message() const { return message_; }   // without the location
    int line() const { return line_; }
    int column() const { return column_; }
    bool located() const { return line_ > 0; }

private:
    std::string message_;
    int line_ = 0;
    int column_ = 0;
};

class Value;
struct Array;
struct Object;
struct Function;

// Arguments of a call: positional then keyword, as written at the call site.
struct CallArgs {
    std::vector<Value> positional;
    std::vector<std::pair<std::string, Value>> keyword;

    // The argument named `name` or at position `index` (or nullptr).
    const Value * get(size_t index, std::string_view name) const;
    const Value * get_keyword(std::string_view name) const;
};

using NativeFunction = std::function<Value(const CallArgs &)>;

class Value {
public:
    enum class Type : uint8_t { Undefined, None, Bool, Int, Float, String, Array, Object, Function };

    Value() = default;                       // undefined
    Value(std::nullptr_t) : type_(Type::None) {}
    Value(bool b) : type_(Type::Bool) { num_.b = b; }
    Value(int i) : type_(Type::Int) { num_.i = i; }
    Value(int64_t i) : type_(Type::Int) { num_.i = i; }
    Value(double d) : type_(Type::Float) { num_.d = d; }
    Value(std::string s) : type_(Type::String), str_(std::move(s)) {}
    Value(std::string_view s) : type_(Type::String), str_(s) {}
    Value(const char * s) : type_(Type::String), str_(s) {}

    static Value undefined(std::string name = {});   // name is kept for error messages
    static Value array(std::vector<Value> items = {});
    static Value tuple(std::vector<Value> items);
    // The lazy iterators jinja2's map/select/reject/... return: iterable, always true, but
    // without len(), indexing or JSON form (templates that forget `| list` fail there).
    static Value generator(std::vector<Value> items);
    static Value object();
    static Value name_space();                       // jinja2's namespace(): assignable attributes
    static Value function(std::string name, NativeFunction fn);
    // A string marked safe (jinja2's Markup): `markup + str` HTML-escapes the plain operand.
    static Value markup(std::string s);

    Type type() const { return type_; }
    bool is_undefined() const { return type_ == Type::Undefined; }
    bool is_none() const { return type_ == Type::None; }
    bool is_bool() const { return type_ == Type::Bool; }
    bool is_int() const { return type_ == Type::Int; }
    bool is_float() const { return type_ == Type::Float; }
    bool is_number() const { return type_ == Type::Int || type_ == Type::Float || type_ == Type::Bool; }
    bool is_string() const { return type_ == Type::String; }
    bool is_array() const { return type_ == Type::Array; }
    bool is_tuple() const { return type_ == Type::Array && tuple_; }
    bool is_generator() const { return type_ == Type::Array && generator_; }
    bool is_object() const { return type_ == Type::Object; }
    bool is_namespace() const { return type_ == Type::Object && namespace_; }
    bool is_mapping() const { return type_ == Type::Object && !namespace_; }
    bool is_function() const { return type_ == Type::Function; }
    bool is_markup() const { return type_ == Type::String && markup_; }

    bool as_bool() const { return num_.b; }
    int64_t as_int() const { return type_ == Type::Bool ? (num_.b ? 1 : 0) : num_.i; }
    double as_float() const;                     // ints and bools widen
    const std::string & as_string() const { return str_; }
    std::string & as_string() { return str_; }
    const std::string & undefined_name() const { return str_; }

    const std::vector<Value> & items() const;    // array elements
    std::vector<Value> & items();
    const Object & fields() const;               // object entries
    Object & fields();
    const Function & callable() const;

    // Python truthiness.
    bool truthy() const;
    // Python str(): strings as-is, True/False/None, floats like repr, containers as repr.
    std::string str() const;
    void append_str(std::string & out) const;
    // Python repr(): strings quoted.
    void append_repr(std::string & out) const;
    // Python's type name for messages ("str", "dict", "list", ...).
    std::string type_name() const;

    // Python ==, with 1 == 1.0 == True.
    bool equals(const Value & other) const;
    // Python <; throws Error for unorderable types.
    bool less(const Value & other) const;

    // Length of strings (code points), arrays and objects; throws for others.
    size_t length() const;

    // The caller's data (the render's inputs) is frozen: methods that modify (list.append,
    // dict.update, ...) refuse it, as Hugging Face's immutable sandbox refuses every container.
    // A list or dict the template made itself stays mutable (Kimi-K2-Thinking's template queues
    // tool-call ids with namespace(ids=[]).ids.append(...)). freeze() marks this container only.
    void freeze();
    bool frozen() const;

private:
    Type type_ = Type::Undefined;
    bool tuple_ = false;
    bool generator_ = false;
    bool namespace_ = false;
    bool markup_ = false;
    union {
        bool b;
        int64_t i;
        double d;
    } num_ = {};
    std::string str_;   // string contents, or the name of an undefined value
    std::shared_ptr<Array> array_;
    std::shared_ptr<Object> object_;
    std::shared_ptr<Function> function_;
};

struct Array {
    std::vector<Value> items;
    bool frozen = false;   // the caller's data: not to be modified (Value::freeze)
};

// Insertion-ordered string-keyed map (Python dicts keep insertion order and templates print them).
struct Object {
    std::vector<std::pair<std::string, Value>> entries;
    bool frozen = false;   // the caller's data: not to be modified (Value::freeze)

    const Value * find(std::string_view key) const;
    Value * find(std::string_view key);
    void set(const std::string & key, Value value);   // replaces in place or appends
    bool erase(std::string_view key);
};

struct Function {
    std::string name;
    NativeFunction fn;
};

// Python float repr (shortest round-trip, "1.0", "1e-05", "inf", "nan").
std::string format_float(double d);
// markupsafe.escape: & < > " ' become entities.
std::string html_escape(std::string_view s);

// Dicts may have non-string keys (`{0: 'a'}`); those are stored under an encoded string.
std::string object_key(const Value & key);
Value key_to_value(const std::string & key);

// Python repr of a string.
void append_string_repr(std::string & out, std::string_view s);

// UTF-8 helpers: strings are indexed and sliced by code point like Python str.
size_t utf8_length(std::string_view s);
std::vector<size_t> utf8_offsets(std::string_view s);   // byte offset of each code point, plus size
bool utf8_is_ascii(std::string_view s);
void utf8_append(std::string & out, uint32_t cp);   // cp encoded (1-4 bytes)

// json.dumps(value, ensure_ascii=False, indent=..., separators=..., sort_keys=...).
// indent < 0 means no indent (one line); indent_str overrides the indent unit when non-empty.
struct JsonOptions {
    int indent = -1;
    std::string indent_str;
    std::string item_separator;   // defaults: ", " without indent, "," with
    std::string key_separator = ": ";
    bool sort_keys = false;
    bool ensure_ascii = false;   // escape non-ASCII as \uXXXX (surrogate pairs above U+FFFF)
};
void append_json(std::string & out, const Value & v, const JsonOptions & opt);
std::string to_json(const Value & v, const JsonOptions & opt = {});

} // namespace kiln::jinja
