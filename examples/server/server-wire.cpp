// Request checks the translated APIs share (see server-wire.h).
#include "server-wire.h"

#include <algorithm>

void refuse_unknown_fields(const json & obj, std::initializer_list<const char *> known, const std::string & where,
                           const std::string & endpoint) {
    for (const auto & item : obj.items()) {
        if (std::none_of(known.begin(), known.end(), [&](const char * k) { return item.key() == k; })) {
            throw http_error(400, "'" + where + item.key() + "' is not supported by " + endpoint);
        }
    }
}

json text_parts_to_chat(const json & content, const std::string & where, const text_part_rules & rules) {
    if (content.is_string()) return content;
    if (!content.is_array()) throw http_error(400, "'" + where + "' must be a string or a list of content parts");
    json parts = json::array();
    for (size_t j = 0; j < content.size(); ++j) {
        const json & p = content[j];
        const std::string at = where + "[" + std::to_string(j) + "]";
        if (!p.is_object() || !p.contains("type") || !p["type"].is_string()) {
            throw http_error(400, "'" + at + "' must be a content part with a 'type'");
        }
        const std::string type = p["type"];
        if (std::none_of(rules.types.begin(), rules.types.end(), [&](const char * t) { return type == t; })) {
            throw http_error(400, "'" + at + ".type' '" + type + "' is not supported (only text parts are implemented)");
        }
        refuse_unknown_fields(p, rules.keys, at + ".", rules.endpoint);
        if (!p.contains("text") || !p["text"].is_string()) throw http_error(400, "'" + at + ".text' must be a string");
        parts.push_back({ { "type", "text" }, { "text", p["text"] } });
    }
    return parts;
}

chat_chunk_view read_chat_chunk(const json & chunk) {
    chat_chunk_view v;
    if (chunk.contains("usage") && chunk["usage"].is_object()) v.completion_tokens = chunk["usage"].value("completion_tokens", 0);
    if (!chunk.contains("choices") || chunk["choices"].empty()) return v;
    const json & choice = chunk["choices"][0];
    if (choice.contains("delta")) {
        const json & d = choice["delta"];
        if (d.contains("reasoning_content") && d["reasoning_content"].is_string()) v.reasoning = d["reasoning_content"];
        if (d.contains("content") && d["content"].is_string()) v.content = d["content"];
        if (d.contains("tool_calls") && d["tool_calls"].is_array()) {
            for (const json & tc : d["tool_calls"]) {
                chat_chunk_view::tool_call_delta t;
                t.index = tc.value("index", 0);
                t.id = tc.value("id", "");
                if (tc.contains("function")) {
                    t.name = tc["function"].value("name", "");
                    t.arguments = tc["function"].value("arguments", "");
                }
                v.tool_calls.push_back(std::move(t));
            }
        }
    }
    if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) v.finish_reason = choice["finish_reason"];
    return v;
}

json tools_list_to_chat(const json & body, const std::function<json(const json & tool, const std::string & at)> & to_chat) {
    if (!body.contains("tools")) return nullptr;
    if (!body["tools"].is_array()) throw http_error(400, "'tools' must be a list of tools");
    json tools = json::array();
    for (size_t i = 0; i < body["tools"].size(); ++i) {
        const std::string at = "tools[" + std::to_string(i) + "]";
        if (!body["tools"][i].is_object()) throw http_error(400, "'" + at + "' must be an object");
        tools.push_back(to_chat(body["tools"][i], at));
    }
    return tools;
}
