// Jinja templates on arbitrary text, rendered the way chat templates are: the input up to its
// first NUL is the template; after it, an optional JSON list of messages (a fixed conversation
// with a tool call otherwise). A template may be refused or raise, always as kiln::jinja::Error.

#include "fuzz-support.h"

#include "chat-template.h"

#include <ctime>

namespace {

const nlohmann::ordered_json & default_messages() {
    static const auto m = nlohmann::ordered_json::parse(R"([
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": null, "reasoning_content": "Call the tool.",
         "tool_calls": [{"id": "c1", "type": "function",
                         "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2]}}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "18 C"},
        {"role": "user", "content": [{"type": "text", "text": "And "}, {"type": "text", "text": "tomorrow?"}]}
    ])");
    return m;
}

const nlohmann::ordered_json & tools() {
    static const auto t = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {
        "name": "get_weather", "description": "Forecast",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
    return t;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    std::string source, rest;
    kiln_fuzz::split_at_nul(data, size, source, rest);
    nlohmann::ordered_json messages = default_messages();
    if (!rest.empty()) {
        auto parsed = kiln_fuzz::parse_json_bounded(rest);
        if (!parsed.is_discarded()) messages = std::move(parsed);
    }
    try {
        kiln::chat_template tmpl(source, "<s>", "</s>");
        std::tm now{};
        now.tm_year = 125;
        now.tm_mday = 1;
        tmpl.set_now(now);
        tmpl.apply(messages, tools(), size % 2 == 0, nlohmann::ordered_json{ { "enable_thinking", size % 3 == 0 } });
    } catch (const kiln::jinja::Error &) {
        // refused or raised: the documented outcome
    } catch (const std::exception & e) {
        kiln_fuzz::finding("jinja", std::string("not a kiln::jinja::Error: ") + e.what());
    }
    return 0;
}
