// Tool calls parsed while the reply is still being written (common/chat-tools-partial.cpp):
// each family's reply fed one byte at a time, as a server streams it. What the partial parse
// reports of a call's arguments must never be retracted (each report extends the last), the
// pieces must add up to the arguments of the finished, non-streamed parse, and long arguments
// must arrive in several pieces rather than whole at the end.
#include "chat-tools.h"
#include "testing.h"

#include <gtest/gtest.h>

using json = nlohmann::ordered_json;

namespace {

const json k_tools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}, "note": {"type": "string"}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}}
])");

// What a streaming client receives: per call, the name once and the arguments in pieces.
struct streamed {
    std::vector<std::string> names, arguments;
    std::vector<int> pieces;   // argument pieces per call
};

// Feeds text[0, n) for every n, as a stream does, checking that nothing is ever retracted.
streamed stream_bytes(tool_syntax syntax, const std::string & text) {
    streamed out;
    for (size_t n = 0; n <= text.size(); ++n) {
        const partial_reply p = parse_tool_calls_partial(syntax, text.substr(0, n), k_tools);
        for (size_t i = 0; i < p.calls.size() && i <= out.names.size(); ++i) {
            const parsed_tool_call & c = p.calls[i];
            if (i == out.names.size()) {
                out.names.push_back(c.name);
                out.arguments.emplace_back();
                out.pieces.push_back(0);
            }
            EXPECT_EQ(c.name, out.names[i]) << "call " << i << " renamed at " << n;
            const std::string & sent = out.arguments[i];
            if (c.arguments.size() > sent.size()) {
                EXPECT_EQ(c.arguments.compare(0, sent.size(), sent), 0)
                    << "call " << i << " retracted at byte " << n << ": sent " << sent << " now " << c.arguments;
                out.arguments[i] = c.arguments;
                out.pieces[i] += 1;
            } else {
                EXPECT_EQ(sent.compare(0, c.arguments.size(), c.arguments), 0) << "call " << i << " at byte " << n;
            }
        }
    }
    return out;
}

void expect_streams_like_whole(tool_syntax syntax, const std::string & text, size_t n_calls) {
    SCOPED_TRACE(tool_syntax_name(syntax));
    const parsed_reply whole = parse_tool_calls(syntax, text, k_tools);
    ASSERT_EQ(whole.calls.size(), n_calls) << text;
    const streamed s = stream_bytes(syntax, text);
    ASSERT_EQ(s.names.size(), n_calls) << text;
    for (size_t i = 0; i < n_calls; ++i) {
        EXPECT_EQ(s.names[i], whole.calls[i].name);
        EXPECT_EQ(s.arguments[i], whole.calls[i].arguments) << text;
    }
    // the first call's arguments hold a long string: it comes in many pieces
    EXPECT_GT(s.pieces[0], 3) << s.arguments[0];
}

const std::string k_long = "Llanfairpwllgwyngyll, \\\"Wales\\\" \\u00e9\\ud83d\\ude00 é";   // escapes, UTF-8, a surrogate pair
const std::string k_long_raw = "Llanfairpwllgwyngyll, \"Wales\" é😀 é";                  // the same written raw

} // namespace

TEST(ChatToolsPartial, JsonArgumentFamilies) {
    const std::string obj = "{\"city\": \"" + k_long + "\", \"days\": 12, \"note\": \"x\"}";
    const std::string add = "{\"a\": -3, \"b\": 40}";
    const std::string ds_b = "<｜tool▁calls▁begin｜>", ds_e = "<｜tool▁calls▁end｜>", cb = "<｜tool▁call▁begin｜>",
                      ce = "<｜tool▁call▁end｜>", sep = "<｜tool▁sep｜>";
    expect_streams_like_whole(tool_syntax::hermes,
                              "Let me see.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " + obj +
                                  "}\n</tool_call>\n<tool_call>\n{\"name\": \"add\", \"arguments\": " + add + "}\n</tool_call>",
                              2);
    expect_streams_like_whole(tool_syntax::mistral, "[TOOL_CALLS]get_weather[ARGS]" + obj + "[TOOL_CALLS]add[ARGS]" + add, 2);
    expect_streams_like_whole(tool_syntax::mistral,
                              "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": " + obj + "}, {\"name\": \"add\", \"arguments\": " +
                                  add + "}]",
                              2);
    expect_streams_like_whole(tool_syntax::llama3, "{\"name\": \"get_weather\", \"parameters\": " + obj + "}", 1);
    expect_streams_like_whole(tool_syntax::generic,
                              "{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": " + obj + "}, {\"name\": \"add\", \"arguments\": " +
                                  add + "}]}",
                              2);
    expect_streams_like_whole(tool_syntax::deepseek_r1,
                              "Sure.\n" + ds_b + cb + "function" + sep + "get_weather\n```json\n" + obj + "\n```" + ce + "\n" + cb + "function" +
                                  sep + "add\n```json\n" + add + "\n```" + ce + ds_e,
                              2);
    expect_streams_like_whole(tool_syntax::deepseek_v31, ds_b + cb + "get_weather" + sep + obj + ce + cb + "add" + sep + add + ce + ds_e, 2);
    expect_streams_like_whole(tool_syntax::kimi_k2,
                              "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>" + obj +
                                  "<|tool_call_end|><|tool_call_begin|>functions.add:1<|tool_call_argument_begin|>" + add +
                                  "<|tool_call_end|><|tool_calls_section_end|>",
                              2);
    expect_streams_like_whole(tool_syntax::harmony,
                              "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>" + obj + "<|call|>",
                              1);
    expect_streams_like_whole(tool_syntax::functionary_v31, "<function=get_weather>" + obj + "</function><function=add>" + add + "</function>", 2);
    expect_streams_like_whole(tool_syntax::functionary_v32, "get_weather\n" + obj + ">>>add\n" + add, 2);
    expect_streams_like_whole(tool_syntax::command_r,
                              "Action:\n```json\n[\n  {\"tool_name\": \"get_weather\", \"parameters\": " + obj +
                                  "},\n  {\"tool_name\": \"add\", \"parameters\": " + add + "}\n]\n```",
                              2);
    expect_streams_like_whole(tool_syntax::command_r7b,
                              "<|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": " + obj +
                                  "}, {\"tool_call_id\": \"1\", \"tool_name\": \"add\", \"parameters\": " + add + "}]<|END_ACTION|>",
                              2);
    expect_streams_like_whole(tool_syntax::firefunction_v2,
                              "Let me check. functools[{\"name\": \"get_weather\", \"arguments\": " + obj + "}, {\"name\": \"add\", \"arguments\": " +
                                  add + "}]",
                              2);
    expect_streams_like_whole(tool_syntax::granite,
                              "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": " + obj + "}, {\"name\": \"add\", \"arguments\": " +
                                  add + "}]",
                              2);
}

TEST(ChatToolsPartial, TaggedParameterFamilies) {
    expect_streams_like_whole(tool_syntax::qwen_xml,
                              "Sure.\n<tool_call>\n<function=get_weather>\n<parameter=city>\n" + k_long_raw +
                                  "\n</parameter>\n<parameter=days>\n12\n</parameter>\n<parameter=note>\n</para\n</parameter>\n"
                                  "</function>\n</tool_call>\n<tool_call>\n<function=add>\n<parameter=a>\n1\n</parameter>\n"
                                  "<parameter=b>\n2\n</parameter>\n</function>\n</tool_call>",
                              2);
    expect_streams_like_whole(tool_syntax::seed_xml,
                              "<seed:tool_call>\n<function=get_weather>\n<parameter=city>" + k_long_raw +
                                  "</parameter>\n<parameter=days>3</parameter>\n</function>\n</seed:tool_call>",
                              1);
    expect_streams_like_whole(tool_syntax::glm,
                              "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>" + k_long_raw +
                                  "\n</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>"
                                  "<tool_call>add<arg_key>a</arg_key><arg_value>1</arg_value><arg_key>b</arg_key><arg_value>2</arg_value></tool_call>",
                              2);
    const std::string dsml_call = "<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">" + k_long_raw +
                                  "</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" string=\"false\">4</｜DSML｜parameter>\n</｜DSML｜invoke>";
    expect_streams_like_whole(tool_syntax::deepseek_v32, "<｜DSML｜function_calls>\n" + dsml_call + "\n</｜DSML｜function_calls>", 1);
    expect_streams_like_whole(tool_syntax::deepseek_v4, "<｜DSML｜tool_calls>\n" + dsml_call + "\n</｜DSML｜tool_calls>", 1);
}

// A call is opened as soon as its name is complete, before any argument; a name that is not a
// declared function is never opened; plain text is no call.
TEST(ChatToolsPartial, OpensOnlyDeclaredNames) {
    partial_reply p = parse_tool_calls_partial(tool_syntax::hermes, "<tool_call>\n{\"name\": \"get_weather\"", k_tools);
    ASSERT_EQ(p.calls.size(), 1u);
    EXPECT_TRUE(p.last_open);
    EXPECT_EQ(p.calls[0].name, "get_weather");
    EXPECT_EQ(p.calls[0].arguments, "");
    EXPECT_TRUE(parse_tool_calls_partial(tool_syntax::hermes, "<tool_call>\n{\"name\": \"get_wea", k_tools).calls.empty());
    EXPECT_TRUE(parse_tool_calls_partial(tool_syntax::hermes, "<tool_call>\n{\"name\": \"rm\", \"arguments\": {", k_tools).calls.empty());
    EXPECT_TRUE(parse_tool_calls_partial(tool_syntax::hermes, "Just some text {\"a\": 1", k_tools).calls.empty());
    // a number is sent only once it has ended; a string value as it grows
    p = parse_tool_calls_partial(tool_syntax::hermes, "<tool_call>{\"name\": \"add\", \"arguments\": {\"a\": 12", k_tools);
    ASSERT_EQ(p.calls.size(), 1u);
    EXPECT_EQ(p.calls[0].arguments, "{\"a\":");
    p = parse_tool_calls_partial(tool_syntax::hermes, "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Ber", k_tools);
    ASSERT_EQ(p.calls.size(), 1u);
    EXPECT_EQ(p.calls[0].arguments, "{\"city\":\"Ber");
    // complete: the whole arguments, even before the closing tag
    p = parse_tool_calls_partial(tool_syntax::hermes, "<tool_call>{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool", k_tools);
    ASSERT_EQ(p.calls.size(), 1u);
    EXPECT_EQ(p.calls[0].arguments, "{\"a\":1,\"b\":2}");
}
