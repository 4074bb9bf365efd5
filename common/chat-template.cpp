// Builds the variables Hugging Face passes to a chat template: messages, tools (only when
// given), add_generation_prompt, and the special tokens.
#include "chat-template.h"

namespace kiln {

jinja::Value json_to_value(const nlohmann::ordered_json & j) {
    using jinja::Value;
    switch (j.type()) {
        case nlohmann::ordered_json::value_t::null: return Value(nullptr);
        case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
        case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
        case nlohmann::ordered_json::value_t::number_unsigned: return Value((int64_t) j.get<uint64_t>());
        case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
        case nlohmann::ordered_json::value_t::string: return Value(j.get_ref<const std::string &>());
        case nlohmann::ordered_json::value_t::array: {
            std::vector<Value> items;
            items.reserve(j.size());
            for (const auto & e : j) {
                items.push_back(json_to_value(e));
            }
            Value arr = Value::array(std::move(items));
            arr.freeze();   // the caller's messages and tools: templates may read, not change them
            return arr;
        }
        case nlohmann::ordered_json::value_t::object: {
            Value obj = Value::object();
            auto & entries = obj.fields().entries;
            entries.reserve(j.size());
            for (auto it = j.begin(); it != j.end(); ++it) {
                entries.emplace_back(it.key(), json_to_value(it.value()));
            }
            obj.freeze();
            return obj;
        }
        default: return Value(nullptr);   // binary / discarded: not produced by JSON text
    }
}

chat_template::chat_template(const std::string & source, std::string bos_token, std::string eos_token)
    : template_(source), bos_token_(std::move(bos_token)), eos_token_(std::move(eos_token)) {}

std::string chat_template::apply(const nlohmann::ordered_json & messages, const nlohmann::ordered_json & tools,
                                 bool add_generation_prompt, const nlohmann::ordered_json & extra_context) const {
    if (!messages.is_array()) {
        throw jinja::Error("chat template: 'messages' must be an array");
    }
    if (!tools.is_null() && !tools.is_array()) {
        throw jinja::Error("chat template: 'tools' must be an array or null");
    }
    if (!extra_context.is_null() && !extra_context.is_object()) {
        throw jinja::Error("chat template: the extra context must be an object");
    }
    jinja::Context ctx;
    ctx.set("messages", json_to_value(messages));
    // Without tools the variable stays undefined (as in the reference renderings): several
    // templates iterate `tools` unguarded, which would fail on None.
    if (!tools.is_null()) {
        ctx.set("tools", json_to_value(tools));
    }
    ctx.set("add_generation_prompt", jinja::Value(add_generation_prompt));
    ctx.set("bos_token", jinja::Value(bos_token_));
    ctx.set("eos_token", jinja::Value(eos_token_));
    if (extra_context.is_object()) {
        for (auto it = extra_context.begin(); it != extra_context.end(); ++it) {
            ctx.set(it.key(), json_to_value(it.value()));
        }
    }
    ctx.now = now_;
    return template_.render(ctx);
}

} // namespace kiln
