// Kiln's Jinja template engine: the subset of jinja2 that chat templates use, with Python
// semantics, configured like Hugging Face's apply_chat_template (trim_blocks, lstrip_blocks,
// loop controls, immutable sandbox: list.append and dict.update raise).
//
//   kiln::jinja::Template t(source);              // throws Error on a syntax error
//   kiln::jinja::Context ctx;
//   ctx.set("messages", messages_value);
//   std::string text = t.render(ctx);             // throws Error on a runtime error
#pragma once

#include "jinja/ast.h"
#include "jinja/value.h"

#include <ctime>
#include <optional>
#include <string>

namespace kiln::jinja {

// Variables visible to a template, plus the built-in globals (range, namespace, dict,
// raise_exception, strftime_now, ...), which a variable of the same name shadows.
class Context {
public:
    void set(const std::string & name, Value value) { vars_.set(name, std::move(value)); }
    const Value * get(const std::string & name) const { return vars_.find(name); }
    const Object & vars() const { return vars_; }

    // Clock used by strftime_now (local time of the machine when unset).
    std::optional<std::tm> now;

private:
    Object vars_;
};

class Template {
public:
    explicit Template(const std::string & source);
    std::string render(const Context & context) const;

private:
    std::string source_;   // normalized; positions in the tree refer to it
    Body body_;
};

} // namespace kiln::jinja
