// Tree-walking evaluator. Scoping follows jinja2: each for-loop iteration and each macro call
// gets its own scope (so `set` inside them does not leak out), `if` does not; namespace()
// objects are shared references, which is how templates carry state out of loops.
#include "jinja/builtins.h"
#include "jinja/jinja.h"
#include "jinja/lexer.h"

namespace kiln::jinja {

namespace {

// Parents are borrowed: an enclosing scope outlives its children, and scopes that macros close
// over are kept by the interpreter (owning them from the macro value would form a cycle
// scope -> macro -> scope and leak).
struct Scope {
    Scope * parent = nullptr;
    Object vars;
};

enum class Flow { Normal, Break, Continue };

class Interpreter {
public:
    Interpreter(const std::string & source, const Context & ctx) : map_(source), ctx_(ctx) {
        scope_ = std::make_shared<Scope>();
    }

    std::string run(const Body & body) {
        std::string out;
        out.reserve(4096);
        out_ = &out;
        exec_body(body);
        return out;
    }

private:
    SourceMap map_;
    const Context & ctx_;
    std::shared_ptr<Scope> scope_;
    std::string * out_ = nullptr;
    int call_depth_ = 0;
    std::vector<std::shared_ptr<Scope>> closures_;   // scopes macros were defined in

    // Attributes an unlocated error to `pos`; the innermost node wins because it catches first.
    [[noreturn]] void relocate(const Error & e, size_t pos) const {
        if (e.located()) {
            throw e;
        }
        int line, col;
        map_.locate(pos, line, col);
        throw Error(e.message(), line, col);
    }

    [[noreturn]] void fail(size_t pos, const std::string & msg) const { relocate(Error(msg), pos); }

    Value lookup(const std::string & name) const {
        for (const Scope * s = scope_.get(); s; s = s->parent) {
            if (const Value * v = s->vars.find(name)) {
                return *v;
            }
        }
        if (const Value * v = ctx_.get(name)) {
            return *v;
        }
        Value g = get_global(name, ctx_.now);
        if (!g.is_undefined()) {
            return g;
        }
        return Value::undefined("'" + name + "' is undefined");
    }

    // ---- statements ----

    Flow exec_body(const Body & body) {
        for (const auto & s : body) {
            Flow f = exec(*s);
            if (f != Flow::Normal) {
                return f;
            }
        }
        return Flow::Normal;
    }

    Flow exec(const Stmt & s) {
        try {
            return exec_impl(s);
        } catch (const Error & e) {
            relocate(e, s.pos);
        }
    }

    Flow exec_impl(const Stmt & s) {
        switch (s.kind) {
            case StmtKind::Text: *out_ += s.text; return Flow::Normal;
            case StmtKind::Output: eval(*s.expr).append_str(*out_); return Flow::Normal;
            case StmtKind::If:
                for (const auto & br : s.branches) {
                    if (eval(*br.first).truthy()) {
                        return exec_body(br.second);
                    }
                }
                return exec_body(s.else_body);
            case StmtKind::For: return exec_for(s);
            case StmtKind::Set: assign(*s.target, eval(*s.expr)); return Flow::Normal;
            case StmtKind::SetBlock: {
                Value v(capture(s.body));
                if (s.expr) {
                    v = apply_filter_chain(*s.expr, v);
                }
                assign(*s.target, v);
                return Flow::Normal;
            }
            case StmtKind::Macro: scope_->vars.set(s.text, make_macro(s, s.text)); return Flow::Normal;
            case StmtKind::CallBlock: {
                Value caller = make_macro(s, "caller");
                eval_call(*s.expr, &caller).append_str(*out_);
                return Flow::Normal;
            }
            case StmtKind::FilterBlock: apply_filter_chain(*s.expr, Value(capture(s.body))).append_str(*out_); return Flow::Normal;
            case StmtKind::Break: return Flow::Break;
            case StmtKind::Continue: return Flow::Continue;
            case StmtKind::Scope: return exec_body(s.body);
        }
        return Flow::Normal;
    }

    std::string capture(const Body & body) {
        std::string buf;
        std::string * saved = out_;
        out_ = &buf;
        try {
            exec_body(body);
        } catch (...) {
            out_ = saved;
            throw;
        }
        out_ = saved;
        return buf;
    }

    void assign_name(const std::string & name, Value v) { scope_->vars.set(name, std::move(v)); }

    void unpack(const Expr & target, const Value & v) {
        if (!v.is_array()) {
            if (v.is_undefined()) {
                throw_undefined(v);
            }
            throw Error("cannot unpack non-iterable " + v.type_name() + " object");
        }
        const auto & items = v.items();
        if (items.size() != target.items.size()) {
            throw Error(items.size() < target.items.size()
                            ? "not enough values to unpack (expected " + std::to_string(target.items.size()) + ", got " + std::to_string(items.size()) + ")"
                            : "too many values to unpack (expected " + std::to_string(target.items.size()) + ")");
        }
        for (size_t i = 0; i < items.size(); ++i) {
            assign_name(target.items[i]->name, items[i]);
        }
    }

    void assign(const Expr & target, Value v) {
        if (target.kind == ExprKind::Name) {
            assign_name(target.name, std::move(v));
        } else if (target.kind == ExprKind::Tuple) {
            unpack(target, v);
        } else {   // Attr: ns.field = value
            Value obj = lookup(target.a->name);
            if (!obj.is_namespace()) {
                fail(target.pos, "cannot assign attribute on non-namespace object");
            }
            obj.fields().set(target.name, std::move(v));
        }
    }

    Flow exec_for(const Stmt & s) {
        Value iterable = eval(*s.expr);
        if (iterable.is_none() || iterable.is_bool() || iterable.is_int() || iterable.is_float() || iterable.is_function() ||
            iterable.is_namespace()) {
            fail(s.expr->pos, "'" + iterable.type_name() + "' object is not iterable");
        }
        std::vector<Value> items = iterate(iterable);
        auto parent = scope_;
        if (s.condition) {
            // `for x in xs if cond`: filtered before the loop so loop.length counts survivors
            std::vector<Value> kept;
            for (auto & item : items) {
                scope_ = std::make_shared<Scope>();
                scope_->parent = parent.get();
                bind_target(*s.target, item);
                bool keep = eval(*s.condition).truthy();
                scope_ = parent;
                if (keep) {
                    kept.push_back(std::move(item));
                }
            }
            items = std::move(kept);
        }
        if (items.empty()) {
            return exec_body(s.else_body);
        }
        const size_t n = items.size();
        auto cycle_index = std::make_shared<size_t>(0);
        Value cycle = Value::function("cycle", [cycle_index](const CallArgs & args) -> Value {
            if (args.positional.empty()) {
                throw Error("no items for cycling given");
            }
            return args.positional[*cycle_index % args.positional.size()];
        });
        for (size_t i = 0; i < n; ++i) {
            auto iter_scope = std::make_shared<Scope>();
            iter_scope->parent = parent.get();
            scope_ = iter_scope;
            *cycle_index = i;
            Value loop = Value::object();
            auto & f = loop.fields().entries;
            f.reserve(12);
            f.emplace_back("index", Value((int64_t) i + 1));
            f.emplace_back("index0", Value((int64_t) i));
            f.emplace_back("revindex", Value((int64_t) (n - i)));
            f.emplace_back("revindex0", Value((int64_t) (n - i - 1)));
            f.emplace_back("first", Value(i == 0));
            f.emplace_back("last", Value(i + 1 == n));
            f.emplace_back("length", Value((int64_t) n));
            f.emplace_back("depth", Value(1));
            f.emplace_back("depth0", Value(0));
            f.emplace_back("previtem", i > 0 ? items[i - 1] : Value::undefined("there is no previous item"));
            f.emplace_back("nextitem", i + 1 < n ? items[i + 1] : Value::undefined("there is no next item"));
            f.emplace_back("cycle", cycle);
            iter_scope->vars.set("loop", std::move(loop));
            bind_target(*s.target, items[i]);
            Flow flow;
            try {
                flow = exec_body(s.body);
            } catch (...) {
                scope_ = parent;
                throw;
            }
            scope_ = parent;
            if (flow == Flow::Break) {
                break;
            }
        }
        return Flow::Normal;
    }

    void bind_target(const Expr & target, const Value & item) {
        if (target.kind == ExprKind::Name) {
            assign_name(target.name, item);
        } else {
            unpack(target, item);
        }
    }

    // A macro (or a call block's `caller`) as a callable value closing over the current scope.
    Value make_macro(const Stmt & s, const std::string & name) {
        if (closures_.empty() || closures_.back() != scope_) {
            closures_.push_back(scope_);
        }
        Scope * closure = scope_.get();
        const Stmt * def = &s;
        return Value::function(name, [this, def, closure, name](const CallArgs & args) -> Value {
            return call_macro(*def, closure, name, args);
        });
    }

    Value call_macro(const Stmt & def, Scope * closure, const std::string & name, const CallArgs & args) {
        if (++call_depth_ > 100) {
            --call_depth_;
            throw Error("maximum macro recursion depth exceeded in '" + name + "'");
        }
        auto saved_scope = scope_;
        auto frame = std::make_shared<Scope>();
        frame->parent = closure;
        scope_ = frame;
        std::string result;
        try {
            std::vector<bool> bound(def.params.size(), false);
            std::vector<Value> varargs;
            for (size_t i = 0; i < args.positional.size(); ++i) {
                if (i < def.params.size()) {
                    frame->vars.set(def.params[i].name, args.positional[i]);
                    bound[i] = true;
                } else {
                    varargs.push_back(args.positional[i]);
                }
            }
            Value kwargs = Value::object();
            for (const auto & kv : args.keyword) {
                bool matched = false;
                for (size_t i = 0; i < def.params.size(); ++i) {
                    if (def.params[i].name == kv.first) {
                        if (bound[i]) {
                            throw Error("macro '" + name + "' got multiple values for argument '" + kv.first + "'");
                        }
                        frame->vars.set(kv.first, kv.second);
                        bound[i] = matched = true;
                    }
                }
                if (!matched) {
                    if (kv.first == "caller") {
                        frame->vars.set("caller", kv.second);
                    } else {
                        kwargs.fields().set(kv.first, kv.second);
                    }
                }
            }
            // defaults are evaluated in the macro's frame, in order, so they can use earlier params
            for (size_t i = 0; i < def.params.size(); ++i) {
                if (!bound[i]) {
                    const auto & p = def.params[i];
                    frame->vars.set(p.name, p.default_value ? eval(*p.default_value)
                                                            : Value::undefined("parameter '" + p.name + "' was not provided"));
                }
            }
            frame->vars.set("varargs", Value::tuple(std::move(varargs)));
            frame->vars.set("kwargs", kwargs);
            result = capture(def.body);
        } catch (...) {
            scope_ = saved_scope;
            --call_depth_;
            throw;
        }
        scope_ = saved_scope;
        --call_depth_;
        return Value(std::move(result));
    }

    // ---- expressions ----

    Value eval(const Expr & e) {
        try {
            return eval_impl(e);
        } catch (const Error & err) {
            relocate(err, e.pos);
        }
    }

    Value eval_impl(const Expr & e) {
        switch (e.kind) {
            case ExprKind::Literal: return e.value;
            case ExprKind::Name: return lookup(e.name);
            case ExprKind::List:
            case ExprKind::Tuple: {
                std::vector<Value> items;
                items.reserve(e.items.size());
                for (const auto & it : e.items) {
                    items.push_back(eval(*it));
                }
                return e.kind == ExprKind::List ? Value::array(std::move(items)) : Value::tuple(std::move(items));
            }
            case ExprKind::Dict: {
                Value obj = Value::object();
                for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
                    Value k = eval(*e.items[i]);
                    obj.fields().set(object_key(k), eval(*e.items[i + 1]));
                }
                return obj;
            }
            case ExprKind::Attr: {
                Value obj = eval(*e.a);
                return get_attr(obj, e.name);
            }
            case ExprKind::Index: {
                Value obj = eval(*e.a);
                return get_item(obj, eval(*e.b));
            }
            case ExprKind::Slice: {
                Value obj = eval(*e.a);
                Value bounds[3];
                const Value * ptr[3] = {nullptr, nullptr, nullptr};
                for (int k = 0; k < 3; ++k) {
                    if (e.items[k]) {
                        bounds[k] = eval(*e.items[k]);
                        ptr[k] = &bounds[k];
                    }
                }
                return slice(obj, ptr[0], ptr[1], ptr[2]);
            }
            case ExprKind::Call: return eval_call(e, nullptr);
            case ExprKind::Filter: {
                Value input = eval(*e.a);
                return apply_filter(e.name, input, eval_args(e));
            }
            case ExprKind::Test: {
                Value v = eval(*e.a);
                bool r = apply_test(e.name, v, eval_args(e));
                return Value(e.negated ? !r : r);
            }
            case ExprKind::Unary: {
                Value v = eval(*e.a);
                if (e.name == "not") {
                    return Value(!v.truthy());
                }
                if (v.is_undefined()) {
                    throw_undefined(v);
                }
                if (!v.is_number()) {
                    throw Error("bad operand type for unary " + e.name + ": '" + v.type_name() + "'");
                }
                if (e.name == "+") {
                    return v.is_bool() ? Value(v.as_int()) : v;
                }
                return v.is_float() ? Value(-v.as_float()) : Value(-v.as_int());
            }
            case ExprKind::Binary: {
                Value a = eval(*e.a);
                Value b = eval(*e.b);
                return binary_op(e.name, a, b);
            }
            case ExprKind::And: {
                Value a = eval(*e.a);
                return a.truthy() ? eval(*e.b) : a;
            }
            case ExprKind::Or: {
                Value a = eval(*e.a);
                return a.truthy() ? a : eval(*e.b);
            }
            case ExprKind::Cond: {
                if (eval(*e.a).truthy()) {
                    return eval(*e.b);
                }
                return e.c ? eval(*e.c) : Value::undefined("the inline if-expression evaluated to false and no else section was defined");
            }
        }
        return Value();
    }

    CallArgs eval_args(const Expr & e) {
        CallArgs args;
        args.positional.reserve(e.items.size());
        for (const auto & it : e.items) {
            args.positional.push_back(eval(*it));
        }
        if (e.star_args) {
            Value extra = eval(*e.star_args);
            for (auto & v : iterate(extra)) {
                args.positional.push_back(std::move(v));
            }
        }
        for (const auto & kv : e.kwargs) {
            args.keyword.emplace_back(kv.first, eval(*kv.second));
        }
        if (e.star_kwargs) {
            Value extra = eval(*e.star_kwargs);
            if (!extra.is_object()) {
                throw Error("argument after ** must be a mapping, not " + extra.type_name());
            }
            for (const auto & kv : extra.fields().entries) {
                args.keyword.emplace_back(kv.first, kv.second);
            }
        }
        return args;
    }

    Value eval_call(const Expr & e, const Value * caller) {
        CallArgs args = eval_args(e);
        if (caller) {
            args.keyword.emplace_back("caller", *caller);
        }
        Value callee;
        if (e.a->kind == ExprKind::Attr) {
            // method calls are dispatched directly instead of materializing a bound method
            Value obj = eval(*e.a->a);
            if (obj.is_undefined()) {
                throw_undefined(obj);
            }
            Value result;
            if (call_method(obj, e.a->name, args, result)) {
                return result;
            }
            callee = get_attr(obj, e.a->name);
        } else {
            callee = eval(*e.a);
        }
        if (callee.is_undefined()) {
            throw_undefined(callee);
        }
        if (!callee.is_function()) {
            throw Error("'" + callee.type_name() + "' object is not callable");
        }
        return callee.callable().fn(args);
    }

    // Applies a filter chain whose innermost input slot (a null `a`) receives `input`.
    Value apply_filter_chain(const Expr & e, const Value & input) {
        Value v = e.a ? apply_filter_chain(*e.a, input) : input;
        try {
            return apply_filter(e.name, v, eval_args(e));
        } catch (const Error & err) {
            relocate(err, e.pos);
        }
    }
};

} // namespace

Template::Template(const std::string & source) : source_(normalize_newlines(source)) {
    body_ = parse_template(source_);
}

std::string Template::render(const Context & context) const {
    try {
        Interpreter interp(source_, context);
        return interp.run(body_);
    } catch (const Error &) {
        throw;
    } catch (const std::exception & e) {
        // library failures (std::out_of_range from a huge number, bad_alloc) keep the contract
        throw Error(std::string("template rendering failed: ") + e.what());
    }
}

} // namespace kiln::jinja
