// The server's text handling without HTTP. The reasoning splitter (examples/server/server-stream.cpp)
// on every markup: <think> blocks (and Seed-OSS's, Command R7B's and Magistral's tags) and gpt-oss's
// harmony channels, whole and fed in every split (a streamed reply must concatenate to exactly the
// non-streamed one); the thinking budget; tool calls streamed in pieces (server-tools.cpp).
#include "server-stream.h"
#include "server-tools.h"
#include "testing.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <utility>

namespace {

using delta = reasoning_splitter::delta;

delta split_whole(const std::string & text, bool starts_inside, reasoning_markup m) {
    reasoning_splitter s(true, starts_inside, m);
    delta a = s.feed(text);
    const delta b = s.flush();
    a.reasoning += b.reasoning;
    a.content += b.content;
    return a;
}

// fed one byte at a time, and in two pieces at every cut
void expect_chunking_invariant(const std::string & text, bool starts_inside, reasoning_markup m, const delta & want) {
    reasoning_splitter s(true, starts_inside, m);
    delta acc;
    for (char c : text) {
        const delta d = s.feed(std::string(1, c));
        acc.reasoning += d.reasoning;
        acc.content += d.content;
    }
    const delta f = s.flush();
    EXPECT_EQ(acc.reasoning + f.reasoning, want.reasoning) << "byte by byte: " << text;
    EXPECT_EQ(acc.content + f.content, want.content) << "byte by byte: " << text;
    for (size_t cut = 0; cut <= text.size(); ++cut) {
        reasoning_splitter t(true, starts_inside, m);
        delta a = t.feed(text.substr(0, cut));
        const delta b = t.feed(text.substr(cut));
        const delta c = t.flush();
        EXPECT_EQ(a.reasoning + b.reasoning + c.reasoning, want.reasoning) << "cut at " << cut << ": " << text;
        EXPECT_EQ(a.content + b.content + c.content, want.content) << "cut at " << cut << ": " << text;
    }
}

struct split_case {
    std::string text;
    bool starts_inside;
    std::string reasoning, content;
};

void check(const split_case & c, reasoning_markup m) {
    const delta d = split_whole(c.text, c.starts_inside, m);
    EXPECT_EQ(d.reasoning, c.reasoning) << c.text;
    EXPECT_EQ(d.content, c.content) << c.text;
    expect_chunking_invariant(c.text, c.starts_inside, m, { c.reasoning, c.content });
}

} // namespace

TEST(ReasoningSplitter, ThinkBlocks) {
    const split_case cases[] = {
        { "<think>\nweighing it\n</think>\n\nThe answer.", false, "weighing it\n", "The answer." },
        { "  <think>a</think>b", false, "a", "b" },
        { "No reasoning <think>here</think>", false, "", "No reasoning <think>here</think>" },
        { "still thinking</think>done", true, "still thinking", "done" },
        { "<thin", false, "", "<thin" },
    };
    for (const auto & c : cases) check(c, reasoning_markup::think);
}

TEST(ReasoningSplitter, HarmonyChannels) {
    const std::string analysis = "<|channel|>analysis<|message|>", final_hdr = "<|start|>assistant<|channel|>final<|message|>";
    const split_case cases[] = {
        // the analysis channel, then the final one
        { analysis + "The user greets me.<|end|>" + final_hdr + "Hello!", false, "The user greets me.", "Hello!" },
        // a reply straight in the final channel: its header is dropped
        { "<|channel|>final<|message|>Hi there.", false, "", "Hi there." },
        // the prompt opened the analysis already
        { "Short.<|end|>" + final_hdr + "Done.", true, "Short.", "Done." },
        // a message to a tool after the analysis is a call: its header stays for the tool parser
        { analysis + "Need a tool.<|end|><|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\":1}",
          false, "Need a tool.", "<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\":1}" },
        // a commentary message to the user: only its text
        { analysis + "Say so.<|end|><|start|>assistant<|channel|>commentary<|message|>Working on it.", false, "Say so.",
          "Working on it." },
        // cut off inside the analysis: all of it is reasoning
        { analysis + "unfinished thou", false, "unfinished thou", "" },
        // plain text: content as it is
        { "Just text.", false, "", "Just text." },
    };
    for (const auto & c : cases) check(c, reasoning_markup::harmony);
    EXPECT_EQ(reasoning_open_tag(reasoning_markup::harmony), analysis);
}

TEST(ReasoningSplitter, DisabledPassesEverythingThrough) {
    reasoning_splitter s(false, false, reasoning_markup::harmony);
    const delta d = s.feed("<|channel|>analysis<|message|>x<|end|>");
    EXPECT_EQ(d.reasoning, "");
    EXPECT_EQ(d.content, "<|channel|>analysis<|message|>x<|end|>");
}

TEST(ReasoningSplitter, OtherFamiliesTags) {
    const struct {
        reasoning_markup markup;
        const char * open;
        const char * close;
    } families[] = {
        { reasoning_markup::seed, "<seed:think>", "</seed:think>" },
        { reasoning_markup::command_r, "<|START_THINKING|>", "<|END_THINKING|>" },
        { reasoning_markup::mistral, "[THINK]", "[/THINK]" },
    };
    for (const auto & f : families) {
        const std::string o = f.open, c = f.close;
        EXPECT_EQ(reasoning_open_tag(f.markup), o);
        EXPECT_EQ(reasoning_close_tag(f.markup), c);
        const split_case cases[] = {
            { o + "\nplan a, then b\n" + c + "\n\nThe answer.", false, "plan a, then b\n", "The answer." },
            { "still" + c + "done", true, "still", "done" },
            // another family's tags are text
            { "<think>x</think>y", false, "", "<think>x</think>y" },
            { o + "cut off", false, "cut off", "" },
        };
        for (const auto & k : cases) check(k, f.markup);
    }
}

// Each template in ../shared/templates teaches its model one markup; the detection reads it from
// the template's source.
TEST(ReasoningSplitter, MarkupFromTemplate) {
    const struct {
        const char * file;
        reasoning_markup want;
    } cases[] = {
        { "Qwen-Qwen3-0.6B.jinja", reasoning_markup::think },
        { "deepseek-ai-DeepSeek-V3.1.jinja", reasoning_markup::think },
        { "GLM-4.6.jinja", reasoning_markup::think },
        { "Kimi-K2-Thinking.jinja", reasoning_markup::think },
        { "ByteDance-Seed-OSS.jinja", reasoning_markup::seed },
        { "openai-gpt-oss-120b.jinja", reasoning_markup::harmony },
        { "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", reasoning_markup::command_r },
        { "mistralai-Ministral-3-14B-Reasoning-2512.jinja", reasoning_markup::mistral },
    };
    for (const auto & c : cases) {
        std::ifstream f(kiln_test::shared_path(std::string("templates/") + c.file));
        std::stringstream ss;
        ss << f.rdbuf();
        const std::string src = ss.str();
        ASSERT_FALSE(src.empty()) << c.file;
        EXPECT_EQ((int) reasoning_markup_from_template(src), (int) c.want) << c.file;
    }
}

// --reasoning-budget N: the budget counts the tokens written inside the leading block (from the
// first token when the prompt opened it, after the opening tag otherwise) and is spent at N.
TEST(ReasoningBudget, CountsTokensInsideTheLeadingBlock) {
    reasoning_budget b(3, "<think>", "</think>", true);
    EXPECT_FALSE(b.exhausted());
    for (const char * t : { "a", " b" }) b.feed(t);
    EXPECT_FALSE(b.exhausted());
    b.feed(" c");
    EXPECT_TRUE(b.exhausted());
    b.closed();
    EXPECT_FALSE(b.exhausted());

    // the model opens the block itself (after whitespace); the tag's own tokens do not count
    reasoning_budget m(2, "<think>", "</think>", false);
    for (const char * t : { "\n", "<th", "ink>" }) m.feed(t);
    EXPECT_FALSE(m.exhausted());
    m.feed("x");
    EXPECT_FALSE(m.exhausted());
    m.feed("y");
    EXPECT_TRUE(m.exhausted());
    EXPECT_EQ(m.n_inside(), 2);

    // a block the model closes within the budget, even with the tag split over tokens, is over
    reasoning_budget c(4, "<think>", "</think>", true);
    for (const char * t : { "ok", "</th", "ink>", "answer", "more", "text" }) c.feed(t);
    EXPECT_FALSE(c.exhausted());

    // budget 0: spent as soon as the block is open
    EXPECT_TRUE(reasoning_budget(0, "<think>", "</think>", true).exhausted());
    reasoning_budget z(0, "<think>", "</think>", false);
    EXPECT_FALSE(z.exhausted());
    z.feed("<think>");
    EXPECT_TRUE(z.exhausted());

    // a reply that does not start with the block is never cut; no budget is never spent
    reasoning_budget t(1, "<think>", "</think>", false);
    for (const char * p : { "Hello", " <think>", "x", "y" }) t.feed(p);
    EXPECT_FALSE(t.exhausted());
    reasoning_budget none;
    none.feed("<think>");
    EXPECT_FALSE(none.exhausted());
    reasoning_budget unlimited(-1, "<think>", "</think>", true);
    for (int i = 0; i < 100; ++i) unlimited.feed("w");
    EXPECT_FALSE(unlimited.exhausted());
}

// What a spent budget writes: the close tag and what the template puts before the answer.
TEST(ReasoningBudget, ForcedCloseFollowsTheTemplate) {
    auto tmpl = [](const char * file) {
        std::ifstream f(kiln_test::shared_path(std::string("templates/") + file));
        std::stringstream ss;
        ss << f.rdbuf();
        EXPECT_FALSE(ss.str().empty()) << file;
        return kiln::chat_template(ss.str(), "", "");
    };
    const kiln::chat_template qwen3 = tmpl("Qwen-Qwen3-0.6B.jinja");
    EXPECT_EQ(reasoning_forced_close(&qwen3, reasoning_markup::think), "</think>\n\n");
    const kiln::chat_template seed = tmpl("ByteDance-Seed-OSS.jinja");
    const std::string s = reasoning_forced_close(&seed, reasoning_markup::seed);
    EXPECT_EQ(s.rfind("</seed:think>", 0), 0u) << s;
    // no template, or one that shows no reasoning: the markup's close tag and a blank line
    EXPECT_EQ(reasoning_forced_close(nullptr, reasoning_markup::mistral), "[/THINK]\n\n");
    const kiln::chat_template plain("{% for m in messages %}{{ m.content }}{% endfor %}", "", "");
    EXPECT_EQ(reasoning_forced_close(&plain, reasoning_markup::think), "</think>\n\n");
    EXPECT_EQ(reasoning_forced_close(nullptr, reasoning_markup::harmony), "<|end|><|start|>assistant<|channel|>final<|message|>");
}

// Tool calls streamed as OpenAI does (tool_stream): a reply fed one byte at a time gives the
// text around the calls and, per call, a header (index, id, type, name, arguments "") and then
// argument pieces that add up to the call of the whole reply.
namespace {

struct reassembled {
    std::string content;
    json calls = json::array();
    std::vector<int> pieces;
};

// complete: the reply ends as calls (finish() lists them); otherwise it lists none
reassembled stream_tools(const tool_request & req, const std::string & reply, size_t step, bool complete = true) {
    tool_stream ts(&req);
    reassembled out;
    auto take = [&](const json & deltas) {
        for (const json & d : deltas) {
            const size_t i = d.at("index").get<size_t>();
            if (d.contains("id")) {
                EXPECT_EQ(i, out.calls.size()) << "calls open in order";
                EXPECT_EQ(d.at("type"), "function");
                EXPECT_EQ(d.at("function").at("arguments"), "") << "a call opens with empty arguments";
                out.calls.push_back({ { "id", d["id"] }, { "name", d["function"]["name"] }, { "arguments", "" } });
                out.pieces.push_back(0);
                continue;
            }
            EXPECT_FALSE(d.at("function").contains("name")) << "later deltas carry only arguments";
            EXPECT_LT(i, out.calls.size());
            if (i >= out.calls.size()) continue;
            out.calls[i]["arguments"] = out.calls[i]["arguments"].get<std::string>() + d["function"]["arguments"].get<std::string>();
            out.pieces[i]++;
        }
    };
    for (size_t at = 0; at < reply.size(); at += step) {
        tool_stream::delta d = ts.feed(reply.substr(at, step));
        out.content += d.content;
        take(d.calls);
    }
    tool_stream::result r = ts.finish();
    out.content += r.content;
    take(r.call_deltas);
    EXPECT_EQ(r.calls.size(), complete ? out.calls.size() : 0u);
    for (size_t i = 0; i < std::min(r.calls.size(), out.calls.size()); ++i) {
        EXPECT_EQ(r.calls[i]["id"], out.calls[i]["id"]);
        EXPECT_EQ(r.calls[i]["function"]["name"], out.calls[i]["name"]);
        EXPECT_EQ(r.calls[i]["function"]["arguments"], out.calls[i]["arguments"]);
    }
    return out;
}

const json k_weather_tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
  "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}])");

} // namespace

TEST(ToolStream, CallsStreamInPiecesAndTextAroundThem) {
    tool_request req;
    req.active = true;
    req.syntax = tool_syntax::hermes;
    req.tools = k_weather_tools;
    const std::string call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Santiago de Compostela\", \"days\": 3}}\n</tool_call>";
    const std::string reply = "Let me look that up.\n" + call + "\n" + call + "\nOne moment.";
    const parsed_reply whole = parse_tool_calls(req.syntax, reply, req.tools);
    ASSERT_EQ(whole.calls.size(), 2u);
    for (size_t step : { 1, 2, 7, 1000 }) {
        SCOPED_TRACE(step);
        const reassembled r = stream_tools(req, reply, step);
        EXPECT_EQ(r.content, whole.content);
        ASSERT_EQ(r.calls.size(), 2u);
        for (size_t i = 0; i < 2; ++i) {
            EXPECT_EQ(r.calls[i]["name"], "get_weather");
            EXPECT_EQ(r.calls[i]["arguments"], whole.calls[i].arguments);
        }
        if (step < 8) {
            EXPECT_GT(r.pieces[0], 3) << "the arguments come as they are written";
        }
    }
    // parallel_tool_calls false: one call
    req.parallel = false;
    EXPECT_EQ(stream_tools(req, reply, 1).calls.size(), 1u);
}

TEST(ToolStream, CallsInsideTheReasoningAreText) {
    // reasoning_format none: the reply keeps its reasoning, and a call written inside it is not one
    tool_request req;
    req.active = true;
    req.syntax = tool_syntax::hermes;
    req.tools = k_weather_tools;
    req.reasoning_open = "<think>";
    req.reasoning_close = "</think>";
    const std::string inner = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
    const std::string reply = "<think>maybe " + inner + "</think>\n\n" + inner;
    const reassembled r = stream_tools(req, reply, 1);
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0]["arguments"], "{\"city\":\"Oslo\"}");
    EXPECT_EQ(r.content, "<think>maybe " + inner + "</think>\n\n");
}

TEST(ToolStream, ACallCutOffStaysPartial) {
    // the token limit stops the reply inside a call: the stream has opened it and sent part of
    // its arguments, the text before it, and nothing of the call's text as content
    tool_request req;
    req.active = true;
    req.syntax = tool_syntax::hermes;
    req.tools = k_weather_tools;
    const reassembled r = stream_tools(req, "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Ber", 1, false);
    EXPECT_EQ(r.content, "Sure.\n");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0]["arguments"], "{\"city\":\"Ber");
}
