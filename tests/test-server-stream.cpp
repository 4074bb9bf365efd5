// The server's reasoning splitter (examples/server/server-stream.cpp) on every markup: <think>
// blocks (and Seed-OSS's, Command R7B's and Magistral's tags) and gpt-oss's harmony channels, whole and fed in every split (a streamed reply must
// concatenate to exactly the non-streamed one).
#include "server-stream.h"
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
