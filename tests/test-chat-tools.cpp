// Tool-call syntaxes: detection from the real chat templates in ../shared/templates, parsing of
// replies written in each family's format (single and parallel calls, text around them,
// truncated, malformed and unknown calls staying text), the streaming hold-back, and the
// grammars that force a call (every string they generate parses back to a call).
#include "chat-tools.h"
#include "llama-grammar.h"
#include "llama.h"
#include "testing.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

using json = nlohmann::ordered_json;

namespace {

const json k_tools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}}
])");

std::string read_template(const std::string & name) {
    std::ifstream f(kiln_test::shared_path("templates/" + name));
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

void expect_calls(const parsed_reply & r, const std::vector<std::pair<std::string, json>> & want, const std::string & content) {
    ASSERT_EQ(r.calls.size(), want.size()) << "content: " << r.content;
    for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(r.calls[i].name, want[i].first);
        EXPECT_EQ(json::parse(r.calls[i].arguments), want[i].second) << r.calls[i].arguments;
    }
    EXPECT_EQ(r.content, content);
}

void expect_text(tool_syntax s, const std::string & text) {
    const parsed_reply r = parse_tool_calls(s, text, k_tools);
    EXPECT_TRUE(r.calls.empty()) << text;
    EXPECT_EQ(r.content, text);
}

} // namespace

TEST(ChatTools, SyntaxFromTheShippedTemplates) {
    if (!kiln_test::file_exists(kiln_test::shared_path("templates/Qwen-Qwen3-0.6B.jinja"))) GTEST_SKIP() << "no templates";
    const std::pair<const char *, tool_syntax> cases[] = {
        { "Qwen-Qwen3-0.6B.jinja", tool_syntax::hermes },
        { "Qwen-Qwen2.5-7B-Instruct.jinja", tool_syntax::hermes },
        { "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", tool_syntax::hermes },
        { "Qwen3-Coder.jinja", tool_syntax::qwen_xml },
        { "Qwen3.5-4B.jinja", tool_syntax::qwen_xml },
        { "mistralai-Mistral-Nemo-Instruct-2407.jinja", tool_syntax::mistral },
        { "Mistral-Small-3.2-24B-Instruct-2506.jinja", tool_syntax::mistral },
        { "meta-llama-Llama-3.1-8B-Instruct.jinja", tool_syntax::llama3 },
        { "meta-llama-Llama-3.3-70B-Instruct.jinja", tool_syntax::llama3 },
        { "google-gemma-2-2b-it.jinja", tool_syntax::generic },
    };
    for (const auto & [file, syntax] : cases) {
        const std::string src = read_template(file);
        ASSERT_FALSE(src.empty()) << file;
        EXPECT_STREQ(tool_syntax_name(tool_syntax_from_template(src)), tool_syntax_name(syntax)) << file;
    }
}

TEST(ChatTools, Hermes) {
    const tool_syntax s = tool_syntax::hermes;
    expect_calls(parse_tool_calls(s, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>", k_tools),
                 { { "add", { { "a", 1 }, { "b", 2 } } } }, "");
    // text before, two calls, arguments given as a JSON string
    expect_calls(parse_tool_calls(s, "Let me check.\n<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\"}}</tool_call>\n"
                                     "<tool_call>\n{\"name\": \"add\", \"arguments\": \"{\\\"a\\\": 3, \\\"b\\\": 4}\"}\n</tool_call>",
                                  k_tools),
                 { { "get_weather", { { "city", "Oslo" } } }, { "add", { { "a", 3 }, { "b", 4 } } } }, "Let me check.\n");
    expect_text(s, "no calls here");
    expect_text(s, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1");                     // truncated
    expect_text(s, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n");                   // unclosed tag
    expect_text(s, "<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>");           // unknown function
    expect_text(s, "<tool_call>\n{name: add}\n</tool_call>");                                        // not JSON
    expect_text(s, "<tool_call>\n{\"name\": \"add\", \"arguments\": [1, 2]}\n</tool_call>");        // arguments not an object
}

TEST(ChatTools, QwenXml) {
    const tool_syntax s = tool_syntax::qwen_xml;
    const std::string call = "<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n"
                             "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>";
    expect_calls(parse_tool_calls(s, "Sure.\n\n" + call, k_tools), { { "get_weather", { { "city", "New York" }, { "days", 3 } } } },
                 "Sure.\n\n");
    // a string parameter that looks like a number stays a string
    expect_calls(parse_tool_calls(s, "<tool_call>\n<function=get_weather>\n<parameter=city>\n42\n</parameter>\n</function>\n</tool_call>"
                                     "\n<tool_call>\n<function=add>\n<parameter=a>\n1\n</parameter>\n<parameter=b>\n-2\n</parameter>\n"
                                     "</function>\n</tool_call>",
                                  k_tools),
                 { { "get_weather", { { "city", "42" } } }, { "add", { { "a", 1 }, { "b", -2 } } } }, "");
    expect_text(s, "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis");   // truncated
    expect_text(s, "<tool_call>\n<function=nope>\n</function>\n</tool_call>");
}

TEST(ChatTools, Mistral) {
    const tool_syntax s = tool_syntax::mistral;
    expect_calls(parse_tool_calls(s, "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}, "
                                     "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}, \"id\": \"abc123def\"}]",
                                  k_tools),
                 { { "add", { { "a", 1 }, { "b", 2 } } }, { "get_weather", { { "city", "Rome" } } } }, "");
    // the newer [ARGS] form
    expect_calls(parse_tool_calls(s, "[TOOL_CALLS]add[ARGS]{\"a\": 5, \"b\": 6}[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Lima\"}", k_tools),
                 { { "add", { { "a", 5 }, { "b", 6 } } }, { "get_weather", { { "city", "Lima" } } } }, "");
    expect_text(s, "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 1}");
    expect_text(s, "[TOOL_CALLS]add{\"a\": 1}");
}

TEST(ChatTools, Llama3AndGeneric) {
    expect_calls(parse_tool_calls(tool_syntax::llama3, "{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}", k_tools),
                 { { "add", { { "a", 1 }, { "b", 2 } } } }, "");
    expect_calls(parse_tool_calls(tool_syntax::llama3, "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Bern\"}}", k_tools),
                 { { "get_weather", { { "city", "Bern" } } } }, "");
    expect_text(tool_syntax::llama3, "{\"answer\": 42}");   // JSON, but not a call
    expect_text(tool_syntax::llama3, "The answer is {\"name\": \"add\"}");
    expect_calls(parse_tool_calls(tool_syntax::generic, "{\"tool_calls\": [{\"name\": \"add\", \"arguments\": {\"a\": 0, \"b\": 0}}]}", k_tools),
                 { { "add", { { "a", 0 }, { "b", 0 } } } }, "");
    expect_text(tool_syntax::generic, "{\"tool_calls\": [{\"name\": \"add\"");
}

TEST(ChatTools, StreamingHoldsBackPossibleCalls) {
    EXPECT_EQ(tool_text_safe_prefix(tool_syntax::hermes, "Hello"), 5u);
    EXPECT_EQ(tool_text_safe_prefix(tool_syntax::hermes, "Hello <tool"), 6u);    // might become <tool_call>
    EXPECT_EQ(tool_text_safe_prefix(tool_syntax::hermes, "Hello <b>"), 9u);
    EXPECT_EQ(tool_text_safe_prefix(tool_syntax::hermes, "Hi <tool_call>\n{\"na"), 3u);
    EXPECT_EQ(tool_text_safe_prefix(tool_syntax::mistral, "ok [TOOL"), 3u);
    EXPECT_EQ(tool_text_safe_prefix(tool_syntax::llama3, "  "), 0u);
    EXPECT_EQ(tool_text_safe_prefix(tool_syntax::llama3, " {\"name\""), 1u);
    EXPECT_EQ(tool_text_safe_prefix(tool_syntax::llama3, "Sure"), 4u);
}

// Strings the forcing grammar accepts parse back to calls: a hand-written call per syntax.
TEST(ChatTools, ForcingGrammarsAcceptCallsThatParse) {
    const std::pair<tool_syntax, std::string> cases[] = {
        { tool_syntax::hermes, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>" },
        { tool_syntax::qwen_xml, "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n\n</tool_call>" },
        { tool_syntax::mistral, "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}]" },
        { tool_syntax::llama3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\", \"days\": 2}}" },
        { tool_syntax::generic, "{\"tool_calls\": [{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}]}" },
    };
    for (const auto & [syntax, text] : cases) {
        const std::string g = tool_call_grammar(syntax, k_tools, true, "");
        llama_gbnf::grammar gr;
        std::string err;
        ASSERT_TRUE(llama_gbnf::parse(g, "root", gr, err)) << err << "\n" << g;
        llama_gbnf::matcher m(gr);
        EXPECT_TRUE(m.accept(text) && m.complete()) << tool_syntax_name(syntax) << ": " << text << "\n" << g;
        EXPECT_EQ(parse_tool_calls(syntax, text, k_tools).calls.size(), 1u) << tool_syntax_name(syntax);
        // a call to an undeclared function, or with a missing required argument, is refused
        llama_gbnf::matcher bad(gr);
        std::string wrong = text;
        wrong.replace(wrong.find(syntax == tool_syntax::qwen_xml || syntax == tool_syntax::llama3 ? "get_weather" : "add"), 3, "sub");
        EXPECT_FALSE(bad.accept(wrong) && bad.complete()) << wrong;
    }
    // a named choice allows only that function
    const std::string only_add = tool_call_grammar(tool_syntax::hermes, k_tools, false, "add");
    llama_gbnf::grammar gr;
    std::string err;
    ASSERT_TRUE(llama_gbnf::parse(only_add, "root", gr, err)) << err;
    llama_gbnf::matcher m(gr);
    EXPECT_FALSE(m.accept("<tool_call>\n{\"name\": \"get_weather\""));
    EXPECT_THROW(tool_call_grammar(tool_syntax::hermes, k_tools, false, "missing"), std::invalid_argument);
}
