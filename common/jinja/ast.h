// Syntax tree of a parsed template. Nodes are plain structs walked by the evaluator (eval.cpp).
#pragma once

#include "jinja/value.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kiln::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class ExprKind : uint8_t {
    Literal,    // value
    Name,       // name
    List,       // items
    Tuple,      // items
    Dict,       // items as key, value, key, value, ...
    Attr,       // a.name
    Index,      // a[b]
    Slice,      // a[b:c:d] (absent parts are null)
    Call,       // a(items, kwargs)
    Filter,     // a | name(items, kwargs); a is null inside {% filter %}
    Test,       // a is [not] name(items, kwargs); negated
    Unary,      // op a  ("-", "+", "not")
    Binary,     // a op b (arithmetic, comparisons, in, not in, ~)
    And,
    Or,
    Cond,       // b if a else c
};

struct Expr {
    ExprKind kind;
    size_t pos = 0;
    std::string name;   // variable/attribute/filter/test name, or operator
    Value value;        // Literal
    ExprPtr a, b, c;
    std::vector<ExprPtr> items;
    std::vector<std::pair<std::string, ExprPtr>> kwargs;
    ExprPtr star_args, star_kwargs;   // *args / **kwargs at a call site
    bool negated = false;

    Expr(ExprKind k, size_t p) : kind(k), pos(p) {}
};

enum class StmtKind : uint8_t {
    Text,        // text
    Output,      // {{ expr }}
    If,          // branches (condition, body); else_body
    For,         // target in iter [if cond]: body else else_body
    Set,         // target = expr
    SetBlock,    // {% set target %}body{% endset %} (optional filter in expr)
    Macro,       // name(params) body
    CallBlock,   // {% call(params) expr %}body{% endcall %}
    FilterBlock, // {% filter expr %}body{% endfilter %}
    Break,
    Continue,
    Scope,       // body only (generation blocks, with)
};

struct MacroParam {
    std::string name;
    ExprPtr default_value;   // null when required
};

struct Stmt {
    StmtKind kind;
    size_t pos = 0;
    std::string text;   // Text contents, Macro name
    ExprPtr expr;       // Output value, For iterable, Set value, CallBlock call, filter for FilterBlock/SetBlock
    ExprPtr target;     // For/Set target (Name, Tuple of Names, or Attr on a namespace)
    ExprPtr condition;  // For filter
    std::vector<std::pair<ExprPtr, Body>> branches;   // If
    Body body;
    Body else_body;
    std::vector<MacroParam> params;   // Macro, CallBlock

    Stmt(StmtKind k, size_t p) : kind(k), pos(p) {}
};

// Parses a normalized source (see normalize_newlines). Throws a located Error.
Body parse_template(const std::string & source);

} // namespace kiln::jinja
