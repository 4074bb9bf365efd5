// Recursive-descent parser with jinja2's grammar and operator precedence (lowest first):
// conditional `a if b else c`, or, and, not, comparisons/in, + -, ~, * / // %, **,
// unary - +, then postfix (.attr, [index], (call)), filters `|` and tests `is`.
#include "jinja/ast.h"
#include "jinja/lexer.h"

#include <set>

namespace kiln::jinja {

namespace {

class Parser {
public:
    Parser(const std::string & source) : map_(source), tokens_(tokenize(source, map_)) {}

    Body parse() {
        Body body = parse_body({});
        if (cur().type != TokenType::Eof) {
            // parse_body only stops early at a block tag it does not own
            fail(cur().pos, "unexpected '" + peek_name(1) + "' tag");
        }
        return body;
    }

private:
    SourceMap map_;
    std::vector<Token> tokens_;
    size_t i_ = 0;
    int loop_depth_ = 0;
    int depth_ = 0;   // expression/block nesting; bounded so hostile input cannot overflow the stack
    struct Open {
        std::string tag;
        size_t pos;
    };
    std::vector<Open> open_blocks_;

    const Token & cur() const { return tokens_[i_]; }
    const Token & look(size_t k = 1) const { return tokens_[std::min(i_ + k, tokens_.size() - 1)]; }
    void advance() {
        if (i_ + 1 < tokens_.size()) {
            ++i_;
        }
    }

    [[noreturn]] void fail(size_t pos, const std::string & msg) const {
        int line, col;
        map_.locate(pos, line, col);
        throw Error(msg, line, col);
    }

    static std::string describe(const Token & t) {
        switch (t.type) {
            case TokenType::Text: return "template text";
            case TokenType::VarBegin: return "'{{'";
            case TokenType::VarEnd: return "'}}'";
            case TokenType::BlockBegin: return "'{%'";
            case TokenType::BlockEnd: return "'%}'";
            case TokenType::Name: return "'" + t.value + "'";
            case TokenType::String: return "string literal";
            case TokenType::Int:
            case TokenType::Float: return "number " + t.value;
            case TokenType::Op: return "'" + t.value + "'";
            case TokenType::Eof: return "end of template";
        }
        return "token";
    }

    bool is_op(const char * op) const { return cur().type == TokenType::Op && cur().value == op; }
    bool is_name(const char * name) const { return cur().type == TokenType::Name && cur().value == name; }
    bool skip_op(const char * op) {
        if (is_op(op)) {
            advance();
            return true;
        }
        return false;
    }
    bool skip_name(const char * name) {
        if (is_name(name)) {
            advance();
            return true;
        }
        return false;
    }
    void expect_op(const char * op) {
        if (!skip_op(op)) {
            fail(cur().pos, std::string("expected '") + op + "', got " + describe(cur()));
        }
    }
    std::string expect_name() {
        if (cur().type != TokenType::Name) {
            fail(cur().pos, "expected a name, got " + describe(cur()));
        }
        std::string n = cur().value;
        advance();
        return n;
    }
    void expect_block_end() {
        if (cur().type != TokenType::BlockEnd) {
            fail(cur().pos, "expected end of statement block '%}', got " + describe(cur()));
        }
        advance();
    }
    std::string peek_name(size_t k) const {
        const Token & t = look(k);
        return t.type == TokenType::Name ? t.value : std::string();
    }

    // ---- statements ----

    // Parses until EOF or a block tag whose name is in `ends` (left unconsumed, at the `{%`).
    Body parse_body(const std::set<std::string> & ends) {
        Body body;
        while (true) {
            const Token & t = cur();
            switch (t.type) {
                case TokenType::Eof:
                    if (!open_blocks_.empty()) {
                        const Open & o = open_blocks_.back();
                        int line, col;
                        map_.locate(o.pos, line, col);
                        std::string want;
                        for (const auto & e : ends) {
                            want += (want.empty() ? "'" : " or '") + e + "'";
                        }
                        fail(t.pos, "unexpected end of template: unclosed '" + o.tag + "' block opened at line " +
                                        std::to_string(line) + " (expected " + want + ")");
                    }
                    return body;
                case TokenType::Text: {
                    auto s = std::make_unique<Stmt>(StmtKind::Text, t.pos);
                    s->text = t.value;
                    body.push_back(std::move(s));
                    advance();
                    break;
                }
                case TokenType::VarBegin: {
                    auto s = std::make_unique<Stmt>(StmtKind::Output, t.pos);
                    advance();
                    s->expr = parse_tuple(true);
                    if (cur().type != TokenType::VarEnd) {
                        fail(cur().pos, "expected end of print statement '}}', got " + describe(cur()));
                    }
                    advance();
                    body.push_back(std::move(s));
                    break;
                }
                case TokenType::BlockBegin: {
                    std::string name = peek_name(1);
                    if (ends.count(name)) {
                        return body;
                    }
                    body.push_back(parse_statement());
                    break;
                }
                default: fail(t.pos, "unexpected " + describe(t));
            }
        }
    }

    // At `{% name`: consumes `{% name`.
    void expect_tag(const char * name) {
        advance();   // {%
        if (!is_name(name)) {
            fail(cur().pos, std::string("expected '") + name + "'");
        }
        advance();
    }

    Body parse_block_body(const std::string & tag, size_t pos, const std::set<std::string> & ends) {
        DepthGuard guard(*this, pos);
        open_blocks_.push_back({tag, pos});
        Body b = parse_body(ends);
        open_blocks_.pop_back();
        return b;
    }

    StmtPtr parse_statement() {
        const size_t pos = cur().pos;
        advance();   // {%
        if (cur().type != TokenType::Name) {
            fail(cur().pos, "expected a statement name after '{%', got " + describe(cur()));
        }
        const std::string name = cur().value;
        advance();
        if (name == "if") return parse_if(pos);
        if (name == "for") return parse_for(pos);
        if (name == "set") return parse_set(pos);
        if (name == "macro") return parse_macro(pos);
        if (name == "call") return parse_call_block(pos);
        if (name == "filter") return parse_filter_block(pos);
        if (name == "generation") return parse_scope(pos, "generation", "endgeneration");
        if (name == "break" || name == "continue") {
            if (loop_depth_ == 0) {
                fail(pos, "'" + name + "' outside of a loop");
            }
            expect_block_end();
            return std::make_unique<Stmt>(name == "break" ? StmtKind::Break : StmtKind::Continue, pos);
        }
        if (name.rfind("end", 0) == 0 || name == "else" || name == "elif") {
            fail(pos, "unexpected '" + name + "' tag" +
                          (open_blocks_.empty() ? std::string() : " (innermost open block is '" + open_blocks_.back().tag + "')"));
        }
        fail(pos, "Encountered unknown tag '" + name + "'.");
    }

    StmtPtr parse_if(size_t pos) {
        auto s = std::make_unique<Stmt>(StmtKind::If, pos);
        ExprPtr cond = parse_expression();
        expect_block_end();
        while (true) {
            Body body = parse_block_body("if", pos, {"elif", "else", "endif"});
            s->branches.emplace_back(std::move(cond), std::move(body));
            advance();   // {%
            std::string tag = cur().value;
            advance();
            if (tag == "elif") {
                cond = parse_expression();
                expect_block_end();
                continue;
            }
            if (tag == "else") {
                expect_block_end();
                s->else_body = parse_block_body("if", pos, {"endif"});
                expect_tag("endif");
            }
            expect_block_end();
            return s;
        }
    }

    StmtPtr parse_for(size_t pos) {
        auto s = std::make_unique<Stmt>(StmtKind::For, pos);
        s->target = parse_assign_target(false);
        if (!skip_name("in")) {
            fail(cur().pos, "expected 'in' in for loop, got " + describe(cur()));
        }
        s->expr = parse_tuple(false);
        if (skip_name("if")) {
            s->condition = parse_expression();
        }
        if (is_name("recursive")) {
            fail(cur().pos, "recursive for loops are not supported");
        }
        expect_block_end();
        ++loop_depth_;
        s->body = parse_block_body("for", pos, {"else", "endfor"});
        --loop_depth_;
        advance();
        std::string tag = cur().value;
        advance();
        if (tag == "else") {
            expect_block_end();
            s->else_body = parse_block_body("for", pos, {"endfor"});
            expect_tag("endfor");
        }
        expect_block_end();
        return s;
    }

    StmtPtr parse_set(size_t pos) {
        ExprPtr target = parse_assign_target(true);
        if (skip_op("=")) {
            auto s = std::make_unique<Stmt>(StmtKind::Set, pos);
            s->target = std::move(target);
            s->expr = parse_tuple(true);
            expect_block_end();
            return s;
        }
        auto s = std::make_unique<Stmt>(StmtKind::SetBlock, pos);
        s->target = std::move(target);
        if (is_op("|")) {
            s->expr = parse_filters(nullptr);
        }
        expect_block_end();
        s->body = parse_block_body("set", pos, {"endset"});
        expect_tag("endset");
        expect_block_end();
        return s;
    }

    void parse_params(std::vector<MacroParam> & params) {
        expect_op("(");
        while (!is_op(")")) {
            if (!params.empty()) {
                expect_op(",");
                if (is_op(")")) {
                    break;
                }
            }
            MacroParam p;
            p.name = expect_name();
            if (skip_op("=")) {
                p.default_value = parse_expression();
            }
            params.push_back(std::move(p));
        }
        advance();   // )
    }

    StmtPtr parse_macro(size_t pos) {
        auto s = std::make_unique<Stmt>(StmtKind::Macro, pos);
        s->text = expect_name();
        parse_params(s->params);
        expect_block_end();
        int saved = loop_depth_;
        loop_depth_ = 0;
        s->body = parse_block_body("macro", pos, {"endmacro"});
        loop_depth_ = saved;
        expect_tag("endmacro");
        if (cur().type == TokenType::Name && cur().value == s->text) {
            advance();
        }
        expect_block_end();
        return s;
    }

    StmtPtr parse_call_block(size_t pos) {
        auto s = std::make_unique<Stmt>(StmtKind::CallBlock, pos);
        if (is_op("(")) {
            parse_params(s->params);
        }
        s->expr = parse_expression();
        if (s->expr->kind != ExprKind::Call) {
            fail(s->expr->pos, "expected a call after 'call'");
        }
        expect_block_end();
        s->body = parse_block_body("call", pos, {"endcall"});
        expect_tag("endcall");
        expect_block_end();
        return s;
    }

    StmtPtr parse_filter_block(size_t pos) {
        auto s = std::make_unique<Stmt>(StmtKind::FilterBlock, pos);
        s->expr = parse_filter_chain_start();
        expect_block_end();
        s->body = parse_block_body("filter", pos, {"endfilter"});
        expect_tag("endfilter");
        expect_block_end();
        return s;
    }

    StmtPtr parse_scope(size_t pos, const char * tag, const char * end) {
        auto s = std::make_unique<Stmt>(StmtKind::Scope, pos);
        expect_block_end();
        s->body = parse_block_body(tag, pos, {end});
        expect_tag(end);
        expect_block_end();
        return s;
    }

    // `name`, `ns.attr`, or a tuple of names (optionally parenthesized).
    ExprPtr parse_assign_target(bool allow_attr) {
        const size_t pos = cur().pos;
        bool paren = skip_op("(");
        std::vector<ExprPtr> names;
        bool comma = false;
        while (true) {
            auto n = std::make_unique<Expr>(ExprKind::Name, cur().pos);
            n->name = expect_name();
            if (allow_attr && !comma && skip_op(".")) {
                auto a = std::make_unique<Expr>(ExprKind::Attr, n->pos);
                a->a = std::move(n);
                a->name = expect_name();
                n = std::move(a);
            }
            names.push_back(std::move(n));
            if (!skip_op(",")) {
                break;
            }
            comma = true;
            if (cur().type != TokenType::Name) {
                break;
            }
        }
        if (paren) {
            expect_op(")");
        }
        if (names.size() == 1 && !comma) {
            return std::move(names[0]);
        }
        for (const auto & n : names) {
            if (n->kind != ExprKind::Name) {
                fail(n->pos, "cannot assign to an attribute inside a tuple");
            }
        }
        auto t = std::make_unique<Expr>(ExprKind::Tuple, pos);
        t->items = std::move(names);
        return t;
    }

    // ---- expressions ----

    ExprPtr parse_tuple(bool with_condexpr, bool explicit_parens = false) {
        const size_t pos = cur().pos;
        std::vector<ExprPtr> items;
        bool comma = false;
        while (true) {
            if (!items.empty()) {
                if (!skip_op(",")) {
                    break;
                }
                comma = true;
            }
            // a trailing comma, or `()`
            if (cur().type == TokenType::VarEnd || cur().type == TokenType::BlockEnd || is_op(")") ||
                (!with_condexpr && is_name("if"))) {
                break;
            }
            items.push_back(with_condexpr ? parse_expression() : parse_or());
        }
        if (items.size() == 1 && !comma) {
            return std::move(items[0]);
        }
        if (items.empty() && !explicit_parens) {
            fail(cur().pos, "expected an expression, got " + describe(cur()));
        }
        auto t = std::make_unique<Expr>(ExprKind::Tuple, pos);
        t->items = std::move(items);
        return t;
    }

    struct DepthGuard {
        Parser & p;
        DepthGuard(Parser & parser, size_t pos) : p(parser) {
            if (++p.depth_ > 200) {
                p.fail(pos, "template nested too deeply");
            }
        }
        ~DepthGuard() { --p.depth_; }
    };

    ExprPtr parse_expression() {
        DepthGuard guard(*this, cur().pos);
        ExprPtr e = parse_or();
        while (is_name("if")) {
            const size_t pos = cur().pos;
            advance();
            auto c = std::make_unique<Expr>(ExprKind::Cond, pos);
            c->b = std::move(e);
            c->a = parse_or();
            if (skip_name("else")) {
                c->c = parse_expression();
            }
            e = std::move(c);
        }
        return e;
    }

    ExprPtr binary(ExprKind kind, std::string op, ExprPtr a, ExprPtr b, size_t pos) {
        auto e = std::make_unique<Expr>(kind, pos);
        e->name = std::move(op);
        e->a = std::move(a);
        e->b = std::move(b);
        return e;
    }

    ExprPtr parse_or() {
        ExprPtr e = parse_and();
        while (is_name("or")) {
            size_t pos = cur().pos;
            advance();
            e = binary(ExprKind::Or, "or", std::move(e), parse_and(), pos);
        }
        return e;
    }

    ExprPtr parse_and() {
        ExprPtr e = parse_not();
        while (is_name("and")) {
            size_t pos = cur().pos;
            advance();
            e = binary(ExprKind::And, "and", std::move(e), parse_not(), pos);
        }
        return e;
    }

    ExprPtr parse_not() {
        if (is_name("not")) {
            auto e = std::make_unique<Expr>(ExprKind::Unary, cur().pos);
            advance();
            e->name = "not";
            e->a = parse_not();
            return e;
        }
        return parse_compare();
    }

    ExprPtr parse_compare() {
        const size_t pos = cur().pos;
        std::vector<ExprPtr> operands;
        std::vector<std::pair<std::string, size_t>> ops;
        operands.push_back(parse_math1());
        while (true) {
            std::string op;
            const size_t op_pos = cur().pos;
            if (cur().type == TokenType::Op &&
                (cur().value == "==" || cur().value == "!=" || cur().value == "<" || cur().value == ">" ||
                 cur().value == "<=" || cur().value == ">=")) {
                op = cur().value;
                advance();
            } else if (is_name("in")) {
                op = "in";
                advance();
            } else if (is_name("not") && look().type == TokenType::Name && look().value == "in") {
                op = "not in";
                advance();
                advance();
            } else {
                break;
            }
            ops.emplace_back(op, op_pos);
            operands.push_back(parse_math1());
        }
        if (ops.empty()) {
            return std::move(operands[0]);
        }
        if (ops.size() == 1) {
            return binary(ExprKind::Binary, ops[0].first, std::move(operands[0]), std::move(operands[1]), ops[0].second);
        }
        // a < b < c means (a < b) and (b < c); the middle operand is evaluated twice, which is
        // harmless because expressions have no side effects in the sandbox
        ExprPtr result;
        for (size_t k = 0; k < ops.size(); ++k) {
            ExprPtr cmp = binary(ExprKind::Binary, ops[k].first, clone(*operands[k]), clone(*operands[k + 1]), ops[k].second);
            result = result ? binary(ExprKind::And, "and", std::move(result), std::move(cmp), pos) : std::move(cmp);
        }
        return result;
    }

    static ExprPtr clone(const Expr & e) {
        auto c = std::make_unique<Expr>(e.kind, e.pos);
        c->name = e.name;
        c->value = e.value;
        c->negated = e.negated;
        if (e.a) c->a = clone(*e.a);
        if (e.b) c->b = clone(*e.b);
        if (e.c) c->c = clone(*e.c);
        if (e.star_args) c->star_args = clone(*e.star_args);
        if (e.star_kwargs) c->star_kwargs = clone(*e.star_kwargs);
        for (const auto & it : e.items) c->items.push_back(it ? clone(*it) : nullptr);
        for (const auto & kv : e.kwargs) c->kwargs.emplace_back(kv.first, clone(*kv.second));
        return c;
    }

    ExprPtr parse_math1() {
        ExprPtr e = parse_concat();
        while (is_op("+") || is_op("-")) {
            std::string op = cur().value;
            size_t pos = cur().pos;
            advance();
            e = binary(ExprKind::Binary, op, std::move(e), parse_concat(), pos);
        }
        return e;
    }

    ExprPtr parse_concat() {
        ExprPtr e = parse_math2();
        while (is_op("~")) {
            size_t pos = cur().pos;
            advance();
            e = binary(ExprKind::Binary, "~", std::move(e), parse_math2(), pos);
        }
        return e;
    }

    ExprPtr parse_math2() {
        ExprPtr e = parse_pow();
        while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
            std::string op = cur().value;
            size_t pos = cur().pos;
            advance();
            e = binary(ExprKind::Binary, op, std::move(e), parse_pow(), pos);
        }
        return e;
    }

    ExprPtr parse_pow() {
        ExprPtr e = parse_unary(true);
        while (is_op("**")) {
            size_t pos = cur().pos;
            advance();
            e = binary(ExprKind::Binary, "**", std::move(e), parse_unary(true), pos);
        }
        return e;
    }

    ExprPtr parse_unary(bool with_filter) {
        DepthGuard guard(*this, cur().pos);
        ExprPtr e;
        if (is_op("-") || is_op("+")) {
            e = std::make_unique<Expr>(ExprKind::Unary, cur().pos);
            e->name = cur().value;
            advance();
            e->a = parse_unary(false);
        } else {
            e = parse_primary();
        }
        e = parse_postfix(std::move(e));
        if (with_filter) {
            e = parse_filter_expr(std::move(e));
        }
        return e;
    }

    ExprPtr parse_primary() {
        const Token & t = cur();
        const size_t pos = t.pos;
        switch (t.type) {
            case TokenType::Name: {
                auto e = std::make_unique<Expr>(ExprKind::Literal, pos);
                if (t.value == "true" || t.value == "True") {
                    e->value = Value(true);
                } else if (t.value == "false" || t.value == "False") {
                    e->value = Value(false);
                } else if (t.value == "none" || t.value == "None") {
                    e->value = Value(nullptr);
                } else {
                    e->kind = ExprKind::Name;
                    e->name = t.value;
                }
                advance();
                return e;
            }
            case TokenType::String: {
                std::string s;
                while (cur().type == TokenType::String) {   // adjacent literals concatenate
                    s += cur().value;
                    advance();
                }
                auto e = std::make_unique<Expr>(ExprKind::Literal, pos);
                e->value = Value(std::move(s));
                return e;
            }
            case TokenType::Int: {
                auto e = std::make_unique<Expr>(ExprKind::Literal, pos);
                e->value = Value(t.int_value);
                advance();
                return e;
            }
            case TokenType::Float: {
                auto e = std::make_unique<Expr>(ExprKind::Literal, pos);
                e->value = Value(t.float_value);
                advance();
                return e;
            }
            case TokenType::Op:
                if (t.value == "(") {
                    advance();
                    ExprPtr e = parse_tuple(true, true);
                    expect_op(")");
                    return e;
                }
                if (t.value == "[") {
                    advance();
                    auto e = std::make_unique<Expr>(ExprKind::List, pos);
                    while (!is_op("]")) {
                        if (!e->items.empty()) {
                            expect_op(",");
                            if (is_op("]")) {
                                break;
                            }
                        }
                        e->items.push_back(parse_expression());
                    }
                    advance();
                    return e;
                }
                if (t.value == "{") {
                    advance();
                    auto e = std::make_unique<Expr>(ExprKind::Dict, pos);
                    while (!is_op("}")) {
                        if (!e->items.empty()) {
                            expect_op(",");
                            if (is_op("}")) {
                                break;
                            }
                        }
                        e->items.push_back(parse_expression());
                        expect_op(":");
                        e->items.push_back(parse_expression());
                    }
                    advance();
                    return e;
                }
                break;
            default: break;
        }
        fail(pos, "unexpected " + describe(t) + " in expression");
    }

    ExprPtr parse_postfix(ExprPtr e) {
        while (true) {
            if (is_op(".")) {
                advance();
                if (cur().type == TokenType::Int) {
                    auto idx = std::make_unique<Expr>(ExprKind::Index, cur().pos);
                    auto lit = std::make_unique<Expr>(ExprKind::Literal, cur().pos);
                    lit->value = Value(cur().int_value);
                    advance();
                    idx->a = std::move(e);
                    idx->b = std::move(lit);
                    e = std::move(idx);
                    continue;
                }
                auto a = std::make_unique<Expr>(ExprKind::Attr, cur().pos);
                a->name = expect_name();
                a->a = std::move(e);
                e = std::move(a);
            } else if (is_op("[")) {
                e = parse_subscript(std::move(e));
            } else if (is_op("(")) {
                e = parse_call(std::move(e));
            } else {
                return e;
            }
        }
    }

    ExprPtr parse_subscript(ExprPtr target) {
        const size_t pos = cur().pos;
        advance();   // [
        std::vector<ExprPtr> parts;
        bool comma = false;
        while (!is_op("]")) {
            if (!parts.empty()) {
                expect_op(",");
                comma = true;
                if (is_op("]")) {
                    break;
                }
            }
            parts.push_back(parse_subscribed());
        }
        advance();
        if (parts.empty()) {
            fail(pos, "expected a subscript expression");
        }
        if (parts.size() == 1 && !comma && parts[0]->kind == ExprKind::Slice) {
            parts[0]->a = std::move(target);
            return std::move(parts[0]);
        }
        auto e = std::make_unique<Expr>(ExprKind::Index, pos);
        e->a = std::move(target);
        if (parts.size() == 1 && !comma) {
            e->b = std::move(parts[0]);
        } else {
            auto t = std::make_unique<Expr>(ExprKind::Tuple, pos);
            t->items = std::move(parts);
            e->b = std::move(t);
        }
        return e;
    }

    // An index expression or a slice `start:stop:step` (slice bounds go in items[0..2]).
    ExprPtr parse_subscribed() {
        const size_t pos = cur().pos;
        ExprPtr first;
        if (!is_op(":")) {
            first = parse_expression();
            if (!is_op(":")) {
                return first;
            }
        }
        advance();   // :
        auto s = std::make_unique<Expr>(ExprKind::Slice, pos);
        s->items.resize(3);
        s->items[0] = std::move(first);
        if (!is_op("]") && !is_op(",") && !is_op(":")) {
            s->items[1] = parse_expression();
        }
        if (skip_op(":")) {
            if (!is_op("]") && !is_op(",")) {
                s->items[2] = parse_expression();
            }
        }
        return s;
    }

    void parse_call_args(Expr & e) {
        expect_op("(");
        bool first = true;
        while (!is_op(")")) {
            if (!first) {
                expect_op(",");
                if (is_op(")")) {
                    break;
                }
            }
            first = false;
            if (skip_op("**")) {
                e.star_kwargs = parse_expression();
            } else if (skip_op("*")) {
                e.star_args = parse_expression();
            } else if (cur().type == TokenType::Name && look().type == TokenType::Op && look().value == "=") {
                std::string key = cur().value;
                advance();
                advance();
                e.kwargs.emplace_back(std::move(key), parse_expression());
            } else {
                if (!e.kwargs.empty()) {
                    fail(cur().pos, "positional argument follows keyword argument");
                }
                e.items.push_back(parse_expression());
            }
        }
        advance();
    }

    ExprPtr parse_call(ExprPtr callee) {
        auto e = std::make_unique<Expr>(ExprKind::Call, cur().pos);
        e->a = std::move(callee);
        parse_call_args(*e);
        return e;
    }

    std::string parse_dotted_name() {
        std::string name = expect_name();
        while (is_op(".") && look().type == TokenType::Name) {
            advance();
            name += "." + expect_name();
        }
        return name;
    }

    // `| f(args) | g` applied to `e` (null for {% filter %} and filtered {% set %} blocks).
    ExprPtr parse_filters(ExprPtr e) {
        while (is_op("|")) {
            advance();
            e = parse_one_filter(std::move(e));
        }
        return e;
    }

    ExprPtr parse_one_filter(ExprPtr e) {
        auto f = std::make_unique<Expr>(ExprKind::Filter, cur().pos);
        f->name = parse_dotted_name();
        f->a = std::move(e);
        if (is_op("(")) {
            parse_call_args(*f);
        }
        return f;
    }

    ExprPtr parse_filter_chain_start() {
        ExprPtr e = parse_one_filter(nullptr);
        return parse_filters(std::move(e));
    }

    ExprPtr parse_filter_expr(ExprPtr e) {
        while (true) {
            if (is_op("|")) {
                advance();
                e = parse_one_filter(std::move(e));
            } else if (is_name("is")) {
                e = parse_test(std::move(e));
            } else if (is_op("(")) {
                e = parse_call(std::move(e));
            } else {
                return e;
            }
        }
    }

    ExprPtr parse_test(ExprPtr e) {
        auto t = std::make_unique<Expr>(ExprKind::Test, cur().pos);
        advance();   // is
        if (skip_name("not")) {
            t->negated = true;
        }
        t->name = parse_dotted_name();
        t->a = std::move(e);
        if (is_op("(")) {
            parse_call_args(*t);
        } else if ((cur().type == TokenType::Name || cur().type == TokenType::String || cur().type == TokenType::Int ||
                    cur().type == TokenType::Float || is_op("(") || is_op("[") || is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and")) {
            if (is_name("is")) {
                fail(cur().pos, "cannot chain multiple tests with 'is'");
            }
            t->items.push_back(parse_postfix(parse_primary()));
        }
        return t;
    }
};

} // namespace

Body parse_template(const std::string & source) {
    return Parser(source).parse();
}

} // namespace kiln::jinja
