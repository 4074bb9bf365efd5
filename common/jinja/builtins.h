// Built-in behaviour shared by the evaluator: operators, attribute/item access and methods
// (ops.cpp), filters (filters.cpp), tests and global functions (tests.cpp).
// Functions throw an unlocated Error; the evaluator attaches the template position.
#pragma once

#include "jinja/value.h"

#include <ctime>
#include <optional>
#include <string>
#include <vector>

namespace kiln::jinja {

// ---- ops.cpp ----

// The error jinja2's Undefined raises when used in a way that needs a value.
[[noreturn]] void throw_undefined(const Value & undefined);
Value make_undefined_attr(const Value & obj, const std::string & name);

// obj.name with jinja2's sandboxed getattr: Python attribute (method) first, then item.
Value get_attr(const Value & obj, const std::string & name);
// obj[key]: item first, then attribute (for string keys).
Value get_item(const Value & obj, const Value & key);
// obj[start:stop:step] with Python semantics; absent bounds are null pointers.
Value slice(const Value & obj, const Value * start, const Value * stop, const Value * step);
// obj.name(args) for methods of str, dict and list; returns false if obj has no such method.
bool call_method(const Value & obj, const std::string & name, const CallArgs & args, Value & result);

// Binary operators: + - * / // % ** ~ == != < > <= >= in, "not in".
Value binary_op(const std::string & op, const Value & a, const Value & b);
bool contains(const Value & container, const Value & item);
// The items a for-loop or list() sees: list elements, string characters, dict keys.
std::vector<Value> iterate(const Value & v);
// Python "%" string formatting (printf style) as the sandbox allows it.
std::string percent_format(const std::string & fmt, const Value & args);
// Python str.format with positional and keyword fields.
std::string str_format(const std::string & fmt, const CallArgs & args);

// String helpers with Python semantics.
std::string py_strip(const std::string & s, const Value * chars, bool left, bool right);
std::string py_upper(const std::string & s);
std::string py_lower(const std::string & s);
std::string py_capitalize(const std::string & s);
std::vector<std::string> py_splitlines(const std::string & s);
std::string py_replace(const std::string & s, const std::string & old, const std::string & repl, int64_t count);

// ---- filters.cpp ----

// Applies the filter `name`; throws "no filter named 'name'" for unknown filters.
Value apply_filter(const std::string & name, const Value & input, const CallArgs & args);

// ---- tests.cpp ----

bool apply_test(const std::string & name, const Value & v, const CallArgs & args);

// Global functions: range, dict, namespace, joiner, cycler, raise_exception, strftime_now.
// Returns undefined if `name` is not a global.
Value get_global(const std::string & name, const std::optional<std::tm> & now);

// Argument helpers for built-ins.
Value arg_or(const CallArgs & args, size_t index, const char * name, const Value & fallback);
int64_t arg_int(const CallArgs & args, size_t index, const char * name, int64_t fallback);
bool arg_bool(const CallArgs & args, size_t index, const char * name, bool fallback);

} // namespace kiln::jinja
