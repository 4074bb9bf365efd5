// Tool-call syntaxes: detection from the real chat templates in ../shared/templates, parsing of
// replies written in each family's format (single and parallel calls, text around them,
// truncated, malformed and unknown calls staying text), the streaming hold-back, and the
// grammars that force a call (every string they generate parses back to a call).
#include "chat-template.h"
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
  {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city", "parameters": {"type": "object",
    "properties": {"city": {"type": "string", "description": "City"}, "days": {"type": "integer", "description": "Days"}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "add", "description": "Adds two integers", "parameters": {"type": "object",
    "properties": {"a": {"type": "integer", "description": "A"}, "b": {"type": "integer", "description": "B"}}, "required": ["a", "b"]}}}
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
    ASSERT_TRUE(kiln_test::file_exists(kiln_test::shared_path("templates/Qwen-Qwen3-0.6B.jinja")))
        << "no templates in " << kiln_test::shared_path("templates");
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
        { "llama-cpp-deepseek-r1.jinja", tool_syntax::deepseek_r1 },
        { "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", tool_syntax::deepseek_r1 },
        { "deepseek-ai-DeepSeek-V3.1.jinja", tool_syntax::deepseek_v31 },
        { "deepseek-ai-DeepSeek-V3.2.jinja", tool_syntax::deepseek_v32 },
        { "deepseek-ai-DeepSeek-V4.jinja", tool_syntax::deepseek_v4 },
        { "moonshotai-Kimi-K2.jinja", tool_syntax::kimi_k2 },
        { "Kimi-K2-Thinking.jinja", tool_syntax::kimi_k2 },
        { "GLM-4.6.jinja", tool_syntax::glm },
        { "GLM-4.7-Flash.jinja", tool_syntax::glm },
        { "ByteDance-Seed-OSS.jinja", tool_syntax::seed_xml },
        { "openai-gpt-oss-120b.jinja", tool_syntax::harmony },
        { "meetkai-functionary-medium-v3.1.jinja", tool_syntax::functionary_v31 },
        { "meetkai-functionary-medium-v3.2.jinja", tool_syntax::functionary_v32 },
        { "CohereForAI-c4ai-command-r-plus-tool_use.jinja", tool_syntax::command_r },
        { "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", tool_syntax::command_r7b },
        { "ibm-granite-granite-3.3-2B-Instruct.jinja", tool_syntax::granite },
        { "fireworks-ai-llama-3-firefunction-v2.jinja", tool_syntax::firefunction_v2 },
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
        { tool_syntax::qwen_xml, "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>" },
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

// ---- the families added for issue 18's second part ------------------------------------------------

namespace {

// The assistant turn a template writes for a message with these tool_calls: the conversation
// with that message, less the prompt that asks for it. What a model trained on the template
// writes in reply, end-of-turn markers included.
std::string template_reply(const std::string & file, const json & tool_calls) {
    const kiln::chat_template t(read_template(file), "<s>", "</s>");
    const json user = { { "role", "user" }, { "content", "Weather in Oslo, and 1+2?" } };
    const json assistant = { { "role", "assistant" }, { "content", "" }, { "tool_calls", tool_calls } };
    // (FireFunction v2's template also prints these two, which the server fills in)
    const json extra = { { "functions", k_tools.dump(2) }, { "datetime", "Jan 15 2026 09:30:00 GMT" } };
    const std::string asked = t.apply(json::array({ user }), k_tools, true, extra);
    const std::string full = t.apply(json::array({ user, assistant }), k_tools, false, extra);
    // templates differ in whether the generation prompt opens a thinking block: compare up to
    // where they agree
    size_t common = 0;
    while (common < asked.size() && common < full.size() && asked[common] == full[common]) ++common;
    // a tag the two share the start of ("<｜Assistant｜><think>" vs "<｜Assistant｜><｜tool▁calls▁begin｜>")
    // belongs to the reply
    const size_t lt = full.rfind('<', common ? common - 1 : 0);
    if (lt != std::string::npos && full.find('>', lt) >= common) common = lt;
    EXPECT_GT(common, 0u) << file << ": the prompt and the conversation share nothing";
    return full.substr(common);
}

json openai_call(const std::string & name, const json & args) {
    return { { "id", "call_1" }, { "type", "function" }, { "function", { { "name", name }, { "arguments", args } } } };
}

// The calls with their arguments as JSON text, as OpenAI sends them (Functionary v3.2's template
// concatenates them into the prompt as they are).
json with_string_arguments(json calls) {
    for (auto & c : calls) c["function"]["arguments"] = c["function"]["arguments"].dump();
    return calls;
}

} // namespace

// Each template renders an assistant message with calls; its family's parser gets those calls
// back, with the arguments, from that very text.
TEST(ChatTools, CallsWrittenByTheTemplatesParseBack) {
    const json weather = { { "city", "Oslo" }, { "days", 2 } }, add = { { "a", 1 }, { "b", 2 } };
    const json two = json::array({ openai_call("get_weather", weather), openai_call("add", add) });
    const json one = json::array({ openai_call("get_weather", weather) });
    const struct {
        const char * file;
        tool_syntax syntax;
        bool parallel;
    } cases[] = {
        // (llama-cpp-deepseek-r1.jinja pipes a map() into tojson, which Jinja refuses as Python does)
        { "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", tool_syntax::deepseek_r1, true },
        { "deepseek-ai-DeepSeek-V3.1.jinja", tool_syntax::deepseek_v31, true },
        { "deepseek-ai-DeepSeek-V3.2.jinja", tool_syntax::deepseek_v32, true },
        { "deepseek-ai-DeepSeek-V4.jinja", tool_syntax::deepseek_v4, true },
        { "moonshotai-Kimi-K2.jinja", tool_syntax::kimi_k2, true },
        // (its tool-call id queue is a list the template appends to: its own, so allowed)
        { "Kimi-K2-Thinking.jinja", tool_syntax::kimi_k2, true },
        { "GLM-4.6.jinja", tool_syntax::glm, true },
        { "GLM-4.7-Flash.jinja", tool_syntax::glm, true },
        { "ByteDance-Seed-OSS.jinja", tool_syntax::seed_xml, true },
        { "openai-gpt-oss-120b.jinja", tool_syntax::harmony, false },
        { "meetkai-functionary-medium-v3.1.jinja", tool_syntax::functionary_v31, true },
        { "meetkai-functionary-medium-v3.2.jinja", tool_syntax::functionary_v32, true },
        { "CohereForAI-c4ai-command-r-plus-tool_use.jinja", tool_syntax::command_r, true },
        { "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", tool_syntax::command_r7b, true },
        { "Qwen3-Coder.jinja", tool_syntax::qwen_xml, true },
        { "fireworks-ai-llama-3-firefunction-v2.jinja", tool_syntax::firefunction_v2, true },
    };
    for (const auto & c : cases) {
        SCOPED_TRACE(c.file);
        const json calls = c.parallel ? two : one;
        std::string reply;
        try {
            reply = template_reply(c.file, c.syntax == tool_syntax::functionary_v32 ? with_string_arguments(calls) : calls);
        } catch (const std::exception & e) {
            ADD_FAILURE() << c.file << " does not render: " << e.what();
            continue;
        }
        const parsed_reply r = parse_tool_calls(c.syntax, reply, k_tools);
        ASSERT_EQ(r.calls.size(), c.parallel ? 2u : 1u) << "reply: " << reply;
        EXPECT_EQ(r.calls[0].name, "get_weather");
        EXPECT_EQ(json::parse(r.calls[0].arguments), weather) << reply;
        if (c.parallel) {
            EXPECT_EQ(r.calls[1].name, "add");
            EXPECT_EQ(json::parse(r.calls[1].arguments), add) << reply;
        }
        // the call text is not left in the content
        EXPECT_EQ(r.content.find("get_weather"), std::string::npos) << r.content;
        // cut anywhere (a reply stopped by the token limit), the reply is text, or calls that
        // were complete where it stopped; streaming never holds back more than it has
        for (size_t cut = 0; cut < reply.size(); ++cut) {
            const std::string part = reply.substr(0, cut);
            const parsed_reply pr = parse_tool_calls(c.syntax, part, k_tools);
            if (pr.calls.empty() && c.syntax != tool_syntax::functionary_v32) { EXPECT_EQ(pr.content, part); }
            for (const auto & call : pr.calls) EXPECT_TRUE(call.name == "get_weather" || call.name == "add") << part;
            EXPECT_LE(tool_text_safe_prefix(c.syntax, part), part.size());
        }
    }
}

TEST(ChatTools, DeepSeek) {
    const std::string b = "<｜tool▁calls▁begin｜>", e = "<｜tool▁calls▁end｜>", cb = "<｜tool▁call▁begin｜>", ce = "<｜tool▁call▁end｜>",
                      sep = "<｜tool▁sep｜>";
    const std::string r1 = cb + "function" + sep + "add\n```json\n{\"a\": 1, \"b\": 2}\n```" + ce;
    expect_calls(parse_tool_calls(tool_syntax::deepseek_r1, "I will add.\n" + b + r1 + "\n" + r1 + e, k_tools),
                 { { "add", { { "a", 1 }, { "b", 2 } } }, { "add", { { "a", 1 }, { "b", 2 } } } }, "I will add.\n");
    const std::string v31 = cb + "get_weather" + sep + "{\"city\": \"Paris\"}" + ce;
    expect_calls(parse_tool_calls(tool_syntax::deepseek_v31, b + v31 + e, k_tools), { { "get_weather", { { "city", "Paris" } } } }, "");
    expect_text(tool_syntax::deepseek_v31, b + v31);                                          // no section end: truncated
    expect_text(tool_syntax::deepseek_v31, b + cb + "get_weather" + sep + "{\"city\": \"Par");   // cut inside the arguments
    expect_text(tool_syntax::deepseek_r1, b + cb + "function" + sep + "add\n```json\n{\"a\": 1}" + ce + e);   // fence not closed
    expect_text(tool_syntax::deepseek_v31, b + cb + "drop_table" + sep + "{}" + ce + e);       // unknown function
}

TEST(ChatTools, KimiK2) {
    const tool_syntax s = tool_syntax::kimi_k2;
    const std::string call0 = "<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Kyiv\"}<|tool_call_end|>";
    const std::string call1 = "<|tool_call_begin|>functions.add:1<|tool_call_argument_begin|>{\"a\": 2, \"b\": 5}<|tool_call_end|>";
    expect_calls(parse_tool_calls(s, "Checking.<|tool_calls_section_begin|>" + call0 + call1 + "<|tool_calls_section_end|>", k_tools),
                 { { "get_weather", { { "city", "Kyiv" } } }, { "add", { { "a", 2 }, { "b", 5 } } } }, "Checking.");
    expect_text(s, "<|tool_calls_section_begin|>" + call0);
    expect_text(s, "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\"");
    expect_text(s, "<|tool_calls_section_begin|><|tool_call_begin|>functions.nope:0<|tool_call_argument_begin|>{}<|tool_call_end|>"
                   "<|tool_calls_section_end|>");
}

TEST(ChatTools, Glm) {
    const tool_syntax s = tool_syntax::glm;
    // GLM-4.5/4.6 layout, then GLM-4.7's: a string stays a string, numbers are JSON
    expect_calls(parse_tool_calls(s, "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>2024</arg_value>\n"
                                     "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>"
                                     "<tool_call>add<arg_key>a</arg_key><arg_value>1</arg_value><arg_key>b</arg_key><arg_value>2</arg_value></tool_call>",
                                  k_tools),
                 { { "get_weather", { { "city", "2024" }, { "days", 3 } } }, { "add", { { "a", 1 }, { "b", 2 } } } }, "");
    // bytes that are not UTF-8 in a text value (a model may write any) do not break the call
    const parsed_reply bad_utf8 = parse_tool_calls(s, "<tool_call>get_weather<arg_key>city</arg_key><arg_value>O\xffslo</arg_value></tool_call>", k_tools);
    ASSERT_EQ(bad_utf8.calls.size(), 1u);
    EXPECT_EQ(json::parse(bad_utf8.calls[0].arguments)["city"], "O\xef\xbf\xbdslo");
    expect_text(s, "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo");
    expect_text(s, "<tool_call>get_weather\n<arg_key>city</arg_key>\nOslo</tool_call>");   // value without its tags
}

TEST(ChatTools, DeepSeekDsml) {
    const std::string call = "<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">12</｜DSML｜parameter>\n"
                             "<｜DSML｜parameter name=\"days\" string=\"false\">4</｜DSML｜parameter>\n</｜DSML｜invoke>";
    // a string="true" value stays a string even when it looks like a number
    expect_calls(parse_tool_calls(tool_syntax::deepseek_v32, "Sure.\n\n<｜DSML｜function_calls>\n" + call + "\n</｜DSML｜function_calls>", k_tools),
                 { { "get_weather", { { "city", "12" }, { "days", 4 } } } }, "Sure.\n\n");
    expect_calls(parse_tool_calls(tool_syntax::deepseek_v4, "<｜DSML｜tool_calls>\n" + call + "\n</｜DSML｜tool_calls>", k_tools),
                 { { "get_weather", { { "city", "12" }, { "days", 4 } } } }, "");
    expect_text(tool_syntax::deepseek_v32, "<｜DSML｜function_calls>\n" + call);                    // block not closed
    expect_text(tool_syntax::deepseek_v4, "<｜DSML｜function_calls>\n" + call + "\n</｜DSML｜function_calls>");   // V3.2's block
}

TEST(ChatTools, SeedOss) {
    const tool_syntax s = tool_syntax::seed_xml;
    expect_calls(parse_tool_calls(s, "<seed:tool_call>\n<function=add>\n<parameter=a>4</parameter>\n<parameter=b>5</parameter>\n"
                                     "</function>\n</seed:tool_call>",
                                  k_tools),
                 { { "add", { { "a", 4 }, { "b", 5 } } } }, "");
    // Qwen's wrapper is not Seed's
    expect_text(s, "<tool_call>\n<function=add>\n<parameter=a>4</parameter>\n</function>\n</tool_call>");
}

TEST(ChatTools, Harmony) {
    const tool_syntax s = tool_syntax::harmony;
    expect_calls(parse_tool_calls(s, "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
                                     "{\"city\": \"Tokyo\"}<|call|>",
                                  k_tools),
                 { { "get_weather", { { "city", "Tokyo" } } } }, "");
    // the recipient in the role part; <|call|> not shown (an end-of-generation token)
    expect_calls(parse_tool_calls(s, "<|channel|>commentary to=functions.add <|constrain|>json<|message|>{\"a\": 1, \"b\": 1}", k_tools),
                 { { "add", { { "a", 1 }, { "b", 1 } } } }, "");
    expect_calls(parse_tool_calls(s, "<|start|>assistant to=functions.add<|channel|>commentary json<|message|>{\"a\": 0, \"b\": 9}", k_tools),
                 { { "add", { { "a", 0 }, { "b", 9 } } } }, "");
    expect_text(s, "<|channel|>commentary to=functions.add <|constrain|>json<|message|>{\"a\": 1");
    expect_text(s, "<|channel|>commentary to=functions.shell <|constrain|>json<|message|>{}");
    expect_text(s, "The user wrote to=functions.add by hand.");
    // streaming holds a message header back until it is known to be a call or not
    EXPECT_EQ(tool_text_safe_prefix(s, "Hi <|start|>assistant<|channel|>commentary"), 3u);
    EXPECT_EQ(tool_text_safe_prefix(s, "Hi <"), 3u);
}

TEST(ChatTools, Functionary) {
    expect_calls(parse_tool_calls(tool_syntax::functionary_v31, "<function=add>{\"a\": 1, \"b\": 2}</function><function=get_weather>"
                                                                "{\"city\": \"Quito\"}</function>",
                                  k_tools),
                 { { "add", { { "a", 1 }, { "b", 2 } } }, { "get_weather", { { "city", "Quito" } } } }, "");
    expect_text(tool_syntax::functionary_v31, "<function=add>{\"a\": 1, \"b\": 2}");
    const tool_syntax v32 = tool_syntax::functionary_v32;
    expect_calls(parse_tool_calls(v32, "get_weather\n{\"city\": \"Lima\"}>>>add\n{\"a\": 3, \"b\": 4}", k_tools),
                 { { "get_weather", { { "city", "Lima" } } }, { "add", { { "a", 3 }, { "b", 4 } } } }, "");
    // text first ("all"), then a call; plain text alone loses its "all" prefix
    expect_calls(parse_tool_calls(v32, "all\nLet me look.>>>get_weather\n{\"city\": \"Lima\"}", k_tools),
                 { { "get_weather", { { "city", "Lima" } } } }, "Let me look.");
    EXPECT_EQ(parse_tool_calls(v32, "all\nHello there.", k_tools).content, "Hello there.");
    expect_text(v32, "get_weather\n{\"city\": ");
    EXPECT_EQ(tool_text_safe_prefix(v32, "all\nHello"), 0u);
}

TEST(ChatTools, CommandRAndGranite) {
    expect_calls(parse_tool_calls(tool_syntax::command_r, "Action:\n```json\n[\n    {\n        \"tool_name\": \"add\",\n        \"parameters\": "
                                                          "{\"a\": 1, \"b\": 2}\n    }\n]\n```",
                                  k_tools),
                 { { "add", { { "a", 1 }, { "b", 2 } } } }, "");
    expect_text(tool_syntax::command_r, "Action:\n```json\n[{\"tool_name\": \"add\", \"parameters\": {\"a\": 1}}]");   // fence open
    expect_calls(parse_tool_calls(tool_syntax::command_r7b, "<|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", "
                                                            "\"parameters\": {\"city\": \"Accra\"}},\n    {\"tool_call_id\": \"1\", "
                                                            "\"tool_name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 1}}\n]<|END_ACTION|>",
                                  k_tools),
                 { { "get_weather", { { "city", "Accra" } } }, { "add", { { "a", 1 }, { "b", 1 } } } }, "");
    expect_text(tool_syntax::command_r7b, "<|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"add\", \"parameters\": {}}]");
    expect_calls(parse_tool_calls(tool_syntax::granite, "<|tool_call|>[{\"name\": \"add\", \"arguments\": {\"a\": 7, \"b\": 8}}]", k_tools),
                 { { "add", { { "a", 7 }, { "b", 8 } } } }, "");
    expect_text(tool_syntax::granite, "<|tool_call|>[{\"name\": \"add\", \"arguments\": {\"a\": 7");
}

TEST(ChatTools, FireFunctionV2) {
    const tool_syntax s = tool_syntax::firefunction_v2;
    expect_calls(parse_tool_calls(s, "Checking. functools[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lima\"}}, "
                                     "{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}]",
                                  k_tools),
                 { { "get_weather", { { "city", "Lima" } } }, { "add", { { "a", 1 }, { "b", 2 } } } }, "Checking. ");
    expect_text(s, "functools[{\"name\": \"add\", \"arguments\": {\"a\": 1");              // truncated
    expect_text(s, "functools[{\"name\": \"rm\", \"arguments\": {}}]");                      // unknown function
    expect_text(s, "no functools here");
    EXPECT_EQ(tool_text_safe_prefix(s, "Sure functools"), 5u);   // may become the marker
}

// The new families' grammars: a call written in each syntax is accepted, and parses back.
TEST(ChatTools, NewFamiliesGrammarsAcceptTheirCalls) {
    const std::pair<tool_syntax, std::string> cases[] = {
        { tool_syntax::deepseek_r1, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>add\n```json\n{\"a\": 1, \"b\": 2}\n```"
                                    "<｜tool▁call▁end｜><｜tool▁calls▁end｜>" },
        { tool_syntax::deepseek_v31, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>add<｜tool▁sep｜>{\"a\": 1, \"b\": 2}<｜tool▁call▁end｜><｜tool▁calls▁end｜>" },
        { tool_syntax::kimi_k2, "<|tool_calls_section_begin|><|tool_call_begin|>functions.add:0<|tool_call_argument_begin|>"
                                "{\"a\": 1, \"b\": 2}<|tool_call_end|><|tool_calls_section_end|>" },
        { tool_syntax::glm, "<tool_call>add\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n<arg_key>b</arg_key>\n<arg_value>2</arg_value>\n</tool_call>" },
        { tool_syntax::seed_xml, "<seed:tool_call>\n<function=add>\n<parameter=a>\n1\n</parameter>\n<parameter=b>\n2\n</parameter>\n"
                                 "</function>\n</seed:tool_call>" },
        { tool_syntax::harmony, " to=functions.add <|constrain|>json<|message|>{\"a\": 1, \"b\": 2}" },
        { tool_syntax::functionary_v31, "<function=add>{\"a\": 1, \"b\": 2}</function>" },
        { tool_syntax::functionary_v32, "add\n{\"a\": 1, \"b\": 2}" },
        { tool_syntax::command_r, "Action:\n```json\n[{\"tool_name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}]\n```" },
        { tool_syntax::command_r7b, "<|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}]<|END_ACTION|>" },
        { tool_syntax::granite, "<|tool_call|>[{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}]" },
        { tool_syntax::firefunction_v2, "functools[{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}]" },
        { tool_syntax::deepseek_v32, "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"add\">\n<｜DSML｜parameter name=\"a\" string=\"false\">1"
                                     "</｜DSML｜parameter>\n<｜DSML｜parameter name=\"b\" string=\"false\">2</｜DSML｜parameter>\n"
                                     "</｜DSML｜invoke>\n</｜DSML｜function_calls>" },
    };
    for (const auto & [syntax, text] : cases) {
        SCOPED_TRACE(tool_syntax_name(syntax));
        const std::string g = tool_call_grammar(syntax, k_tools, true, "");
        llama_gbnf::grammar gr;
        std::string err;
        ASSERT_TRUE(llama_gbnf::parse(g, "root", gr, err)) << err << "\n" << g;
        llama_gbnf::matcher m(gr);
        EXPECT_TRUE(m.accept(text) && m.complete()) << text << "\n" << g;
        // the lazy grammar starts at the trigger: the text does too
        for (const std::string & t : tool_call_triggers(syntax)) EXPECT_EQ(text.rfind(t, 0), 0u) << t;
        // harmony's parser needs the header the forced grammar adds
        const std::string reply = syntax == tool_syntax::harmony ? "<|channel|>commentary" + text : text;
        const parsed_reply r = parse_tool_calls(syntax, reply, k_tools);
        ASSERT_EQ(r.calls.size(), 1u) << reply;
        EXPECT_EQ(json::parse(r.calls[0].arguments), json({ { "a", 1 }, { "b", 2 } }));
        // an undeclared function, or a required argument missing, does not fit
        std::string wrong = text;
        wrong.replace(wrong.find("add"), 3, "sub");
        llama_gbnf::matcher bad(gr);
        EXPECT_FALSE(bad.accept(wrong) && bad.complete()) << wrong;
    }
    // forced from the first token, harmony's grammar writes the channel first
    const std::string forced = tool_call_forced_grammar(tool_syntax::harmony, k_tools, false, "add");
    llama_gbnf::grammar gr;
    std::string err;
    ASSERT_TRUE(llama_gbnf::parse(forced, "root", gr, err)) << err << "\n" << forced;
    llama_gbnf::matcher m(gr);
    EXPECT_TRUE(m.accept("<|channel|>commentary to=functions.add <|constrain|>json<|message|>{\"a\": 1, \"b\": 2}") && m.complete());
}
