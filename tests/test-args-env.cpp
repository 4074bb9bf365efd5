// LLAMA_ARG_* environment variables: a variable sets its flag, the command line wins over it,
// switches read 1/0, a bad value is an error naming the variable, and a variable of a flag the
// tool does not take is not read.
#include "arg.h"
#include "common.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace {

struct fake_env {
    std::map<std::string, std::string> vars;
    std::vector<std::string> asked;
    const char * get(const char * name) {
        asked.push_back(name);
        const auto it = vars.find(name);
        return it == vars.end() ? nullptr : it->second.c_str();
    }
};

// The parse a tool's main does: the environment, then the command line.
common_parse_result parse(fake_env & env, const std::vector<std::string> & args, common_params & p, common_tool tool) {
    common_parse_result r = common_params_apply_env(args, p, tool, [&](const char * n) { return env.get(n); });
    if (r.status != common_parse_result::ok) return r;
    return common_params_parse_args(args, p, tool);
}

TEST(ArgsEnv, VariablesSetTheirFlags) {
    fake_env env;
    env.vars = { { "LLAMA_ARG_CTX_SIZE", "1234" },
                 { "LLAMA_ARG_N_PARALLEL", "3" },
                 { "LLAMA_ARG_MODEL", "/models/x.gguf" },
                 { "LLAMA_ARG_HOST", "0.0.0.0" },
                 { "LLAMA_ARG_PORT", "9000" },
                 { "LLAMA_ARG_ALIAS", "my-model" },
                 { "LLAMA_ARG_CACHE_TYPE_K", "q8_0" },
                 { "LLAMA_ARG_FLASH_ATTN", "off" },
                 { "LLAMA_API_KEY", "k1,k2" },
                 { "LLAMA_ARG_ENDPOINT_METRICS", "1" },
                 { "LLAMA_ARG_NO_ENDPOINT_SLOTS", "true" },
                 { "LLAMA_ARG_NO_WEBUI", "1" },
                 { "LLAMA_ARG_STATIC_PATH", ::testing::TempDir() },
                 { "LLAMA_ARG_EMBEDDINGS", "on" },
                 { "LLAMA_ARG_POOLING", "last" } };
    common_params p;
    const auto r = parse(env, {}, p, COMMON_TOOL_SERVER);
    ASSERT_EQ(r.status, common_parse_result::ok) << r.message;
    EXPECT_EQ(p.n_ctx, 1234);
    EXPECT_EQ(p.n_parallel, 3);
    EXPECT_EQ(p.model, "/models/x.gguf");
    EXPECT_EQ(p.hostname, "0.0.0.0");
    EXPECT_EQ(p.port, 9000);
    EXPECT_EQ(p.model_alias, "my-model");
    EXPECT_EQ(p.cache_type_k, "q8_0");
    EXPECT_EQ(p.flash_attn_type, LLAMA_FLASH_ATTN_TYPE_DISABLED);
    EXPECT_EQ(p.api_keys, (std::vector<std::string>{ "k1", "k2" }));
    EXPECT_TRUE(p.endpoint_metrics);
    EXPECT_FALSE(p.endpoint_slots);
    EXPECT_FALSE(p.webui);
    EXPECT_EQ(p.public_path, ::testing::TempDir());
    EXPECT_TRUE(p.embedding);
    EXPECT_EQ(p.pooling, "last");
}

TEST(ArgsEnv, TheCommandLineWins) {
    fake_env env;
    env.vars = { { "LLAMA_ARG_CTX_SIZE", "1234" }, { "LLAMA_ARG_PORT", "9000" }, { "LLAMA_API_KEY", "from-env" },
                 { "LLAMA_ARG_THREADS", "3" } };
    common_params p;
    // short name, long name with '=', and a repeatable flag: none takes the variable too
    const auto r = parse(env, { "-c", "512", "--port=7000", "--api-key", "from-cli" }, p, COMMON_TOOL_SERVER);
    ASSERT_EQ(r.status, common_parse_result::ok) << r.message;
    EXPECT_EQ(p.n_ctx, 512);
    EXPECT_EQ(p.port, 7000);
    EXPECT_EQ(p.api_keys, (std::vector<std::string>{ "from-cli" }));
    EXPECT_EQ(p.n_threads, 3);   // not on the command line: the variable's
}

TEST(ArgsEnv, SwitchesReadTrueAndFalse) {
    for (const char * off : { "0", "false", "off", "" }) {
        fake_env env;
        env.vars = { { "LLAMA_ARG_ENDPOINT_METRICS", off } };
        common_params p;
        ASSERT_EQ(parse(env, {}, p, COMMON_TOOL_SERVER).status, common_parse_result::ok);
        EXPECT_FALSE(p.endpoint_metrics) << "'" << off << "'";
    }
    fake_env env;
    env.vars = { { "LLAMA_ARG_MLOCK", "maybe" } };
    common_params p;
    const auto r = parse(env, {}, p, COMMON_TOOL_SERVER);
    EXPECT_EQ(r.status, common_parse_result::error);
    EXPECT_NE(r.message.find("LLAMA_ARG_MLOCK"), std::string::npos) << r.message;
}

TEST(ArgsEnv, BadValuesNameTheVariable) {
    fake_env env;
    env.vars = { { "LLAMA_ARG_CTX_SIZE", "lots" } };
    common_params p;
    const auto r = parse(env, {}, p, COMMON_TOOL_SERVER);
    ASSERT_EQ(r.status, common_parse_result::error);
    EXPECT_NE(r.message.find("LLAMA_ARG_CTX_SIZE"), std::string::npos) << r.message;
    EXPECT_NE(r.message.find("--ctx-size"), std::string::npos) << r.message;
    // ... but not when the command line gives the flag: the variable is not read then
    common_params q;
    EXPECT_EQ(parse(env, { "--ctx-size", "64" }, q, COMMON_TOOL_SERVER).status, common_parse_result::ok);
    EXPECT_EQ(q.n_ctx, 64);
}

TEST(ArgsEnv, OnlyTheToolsOwnFlags) {
    // --host is the server's: llama-cli ignores LLAMA_ARG_HOST (and does not fail on it)
    fake_env env;
    env.vars = { { "LLAMA_ARG_HOST", "0.0.0.0" }, { "LLAMA_ARG_CTX_SIZE", "256" } };
    common_params p;
    const std::string host_before = p.hostname;
    ASSERT_EQ(parse(env, {}, p, COMMON_TOOL_CLI).status, common_parse_result::ok);
    EXPECT_EQ(p.hostname, host_before);
    EXPECT_EQ(p.n_ctx, 256);
}

} // namespace
