// The shared command-line parser: every flag sets its field, bad command lines are errors that
// name the flag, each tool accepts only its own flags, and --help lists them.
#include "arg-promises.h"
#include "arg.h"
#include "chat-template.h"
#include "common.h"
#include "testing.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace {

common_parse_result parse(const std::vector<std::string> & args, common_params & p, common_tool tool = COMMON_TOOL_CLI) {
    return common_params_parse_args(args, p, tool);
}

common_params parse_ok(const std::vector<std::string> & args, common_tool tool = COMMON_TOOL_CLI) {
    common_params p;
    const auto r = parse(args, p, tool);
    EXPECT_EQ(r.status, common_parse_result::ok) << r.message;
    return p;
}

// Parse expecting an error; returns the message.
std::string parse_err(const std::vector<std::string> & args, common_tool tool = COMMON_TOOL_CLI) {
    common_params p;
    const auto r = parse(args, p, tool);
    EXPECT_EQ(r.status, common_parse_result::error) << "no error for: " << ::testing::PrintToString(args);
    return r.message;
}

std::string temp_file(const std::string & name, const std::string & content) {
    const std::string path = ::testing::TempDir() + "kiln-test-args-" + name;
    std::ofstream(path, std::ios::binary) << content;
    return path;
}

} // namespace

TEST(Args, Defaults) {
    const common_params p = parse_ok({});
    EXPECT_EQ(p.n_ctx, 4096);
    EXPECT_EQ(p.n_batch, 2048);
    EXPECT_EQ(p.n_ubatch, 512);
    EXPECT_EQ(p.n_predict, -1);
    EXPECT_EQ(p.flash_attn_type, LLAMA_FLASH_ATTN_TYPE_AUTO);
    EXPECT_EQ(p.sampling.seed, (uint32_t) LLAMA_DEFAULT_SEED);
    EXPECT_FLOAT_EQ(p.sampling.temp, 0.8f);
    EXPECT_TRUE(p.use_mmap);
    EXPECT_TRUE(p.fused_moe);
    EXPECT_EQ(p.conversation_mode, COMMON_CONVERSATION_MODE_AUTO);
}

TEST(Args, ModelPromptAndGeneration) {
    const common_params p = parse_ok({ "-m", "model.gguf", "-p", "Hello", "-n", "32", "-c", "1024", "-b", "256",
                                       "-ub", "64", "-t", "3", "-tb", "5", "-s", "42" });
    EXPECT_EQ(p.model, "model.gguf");
    EXPECT_EQ(p.prompt, "Hello");
    EXPECT_EQ(p.n_predict, 32);
    EXPECT_EQ(p.n_ctx, 1024);
    EXPECT_EQ(p.n_batch, 256);
    EXPECT_EQ(p.n_ubatch, 64);
    EXPECT_EQ(p.n_threads, 3);
    EXPECT_EQ(p.n_threads_batch, 5);
    EXPECT_EQ(p.sampling.seed, 42u);

    const common_params q = parse_ok({ "--model", "x.gguf", "--prompt", "Hi", "--n-predict", "-2", "--ctx-size", "0",
                                       "--batch-size", "8", "--ubatch-size", "4", "--threads", "-1",
                                       "--threads-batch", "2", "--seed", "-1" });
    EXPECT_EQ(q.model, "x.gguf");
    EXPECT_EQ(q.n_predict, -2);
    EXPECT_EQ(q.n_ctx, 0);
    EXPECT_EQ(q.n_batch, 8);
    EXPECT_EQ(q.n_ubatch, 4);
    EXPECT_EQ(q.n_threads, -1);
    EXPECT_EQ(q.n_threads_batch, 2);
    EXPECT_EQ(q.sampling.seed, (uint32_t) LLAMA_DEFAULT_SEED);
    EXPECT_EQ(parse_ok({ "-s", "4294967295" }).sampling.seed, 4294967295u);
}

TEST(Args, PromptFileAndEscapes) {
    const std::string path = temp_file("prompt.txt", "from a file\\n");
    const common_params p = parse_ok({ "-f", path });
    EXPECT_EQ(p.prompt, "from a file\\n");   // file contents are taken literally
    EXPECT_EQ(p.prompt_file, path);
    EXPECT_EQ(parse_ok({ "--file", path }).prompt, "from a file\\n");

    EXPECT_EQ(parse_ok({ "-p", "a\\nb\\t\\x41\\\\" }).prompt, "a\nb\tA\\");
    EXPECT_EQ(parse_ok({ "-e", "-p", "x\\n" }).prompt, "x\n");
    EXPECT_EQ(parse_ok({ "--escape", "-p", "x\\n" }).prompt, "x\n");
    EXPECT_EQ(parse_ok({ "--no-escape", "-p", "x\\n" }).prompt, "x\\n");
    EXPECT_EQ(parse_ok({ "-p", "bad \\xZZ \\q" }).prompt, "bad \\xZZ \\q");   // unknown escapes stay

    const std::string msg = parse_err({ "-f", "/nonexistent/dir/prompt.txt" });
    EXPECT_NE(msg.find("-f"), std::string::npos);
    EXPECT_NE(msg.find("/nonexistent/dir/prompt.txt"), std::string::npos);
}

TEST(Args, Sampling) {
    const common_params p = parse_ok({ "--temp", "0.25", "--top-k", "7", "--top-p", "0.5", "--min-p", "0.1",
                                       "--typical", "0.9", "--repeat-penalty", "1.1", "--repeat-last-n", "-1",
                                       "--presence-penalty", "0.3", "--frequency-penalty", "0.4", "--min-keep", "2",
                                       "--ignore-eos" });
    const auto & s = p.sampling;
    EXPECT_FLOAT_EQ(s.temp, 0.25f);
    EXPECT_EQ(s.top_k, 7);
    EXPECT_FLOAT_EQ(s.top_p, 0.5f);
    EXPECT_FLOAT_EQ(s.min_p, 0.1f);
    EXPECT_FLOAT_EQ(s.typ_p, 0.9f);
    EXPECT_FLOAT_EQ(s.penalty_repeat, 1.1f);
    EXPECT_EQ(s.penalty_last_n, -1);
    EXPECT_FLOAT_EQ(s.penalty_present, 0.3f);
    EXPECT_FLOAT_EQ(s.penalty_freq, 0.4f);
    EXPECT_EQ(s.min_keep, 2);
    EXPECT_TRUE(s.ignore_eos);
    EXPECT_FLOAT_EQ(parse_ok({ "--temp", "-1" }).sampling.temp, -1.0f);
    EXPECT_FLOAT_EQ(parse_ok({ "--temp=0" }).sampling.temp, 0.0f);   // --name=value form
}

TEST(Args, FlashAttention) {
    EXPECT_EQ(parse_ok({ "-fa" }).flash_attn_type, LLAMA_FLASH_ATTN_TYPE_ENABLED);   // bare: on
    EXPECT_EQ(parse_ok({ "-fa", "on" }).flash_attn_type, LLAMA_FLASH_ATTN_TYPE_ENABLED);
    EXPECT_EQ(parse_ok({ "-fa", "off" }).flash_attn_type, LLAMA_FLASH_ATTN_TYPE_DISABLED);
    EXPECT_EQ(parse_ok({ "--flash-attn", "auto" }).flash_attn_type, LLAMA_FLASH_ATTN_TYPE_AUTO);
    EXPECT_EQ(parse_ok({ "--flash-attn=off" }).flash_attn_type, LLAMA_FLASH_ATTN_TYPE_DISABLED);
    // a bare -fa followed by another flag leaves that flag alone
    const common_params p = parse_ok({ "-fa", "-c", "128" });
    EXPECT_EQ(p.flash_attn_type, LLAMA_FLASH_ATTN_TYPE_ENABLED);
    EXPECT_EQ(p.n_ctx, 128);
    const std::string msg = parse_err({ "-fa", "maybe" });
    EXPECT_NE(msg.find("-fa"), std::string::npos);
    EXPECT_NE(msg.find("maybe"), std::string::npos);
}

TEST(Args, CacheTypes) {
    const common_params p = parse_ok({ "-ctk", "q8_0", "-ctv", "q4_0" });
    EXPECT_EQ(p.cache_type_k, "q8_0");
    EXPECT_EQ(p.cache_type_v, "q4_0");
    for (const char * t : { "f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1", "q6_0", "q8_KV" }) {
        EXPECT_EQ(parse_ok({ "--cache-type-k", t }).cache_type_k, t);
        EXPECT_EQ(parse_ok({ "--cache-type-v", t }).cache_type_v, t);
    }
    EXPECT_EQ(common_kv_cache_type_from_str("q8_0"), GGML_TYPE_Q8_0);
    EXPECT_EQ(common_kv_cache_type_from_str("bf16"), GGML_TYPE_BF16);
    EXPECT_EQ(common_kv_cache_type_from_str("q4_K"), GGML_TYPE_COUNT);
    // offered only where the cache can hold it (test-model-load makes a context with each)
    EXPECT_EQ(common_kv_cache_type_from_str("q8_KV"), GGML_TYPE_Q8_KV);
    EXPECT_EQ(common_kv_cache_type_from_str("q8_kv"), GGML_TYPE_Q8_KV);   // ik_llama.cpp spells it q8_KV; case is free
    EXPECT_NE(parse_err({ "-ctk", "q8_KV_r8" }).find("unknown cache type"), std::string::npos);
    const std::string msg = parse_err({ "-ctk", "q4_K" });
    EXPECT_NE(msg.find("-ctk"), std::string::npos);
    EXPECT_NE(msg.find("q4_K"), std::string::npos);
    EXPECT_NE(parse_err({ "-ctv", "fp16" }).find("-ctv"), std::string::npos);
}

// GPU placement flags without a GPU and -rtr: test-arg-promises.cpp
TEST(Args, LoadingAndPlacement) {
    const common_params p = parse_ok({ "--no-mmap", "--mlock", "--check-tensors", "-ngl", "0", "-ot", "exps=CPU", "-ot",
                                       "blk\\.[0-3]\\.=CPU,attn=CPU" });
    EXPECT_FALSE(p.use_mmap);
    EXPECT_TRUE(p.use_mlock);
    EXPECT_EQ(p.n_gpu_layers, 0);
    EXPECT_TRUE(p.check_tensors);
    ASSERT_EQ(p.tensor_overrides.size(), 3u);
    EXPECT_EQ(p.tensor_overrides[0].pattern, "exps");
    EXPECT_EQ(p.tensor_overrides[0].buft, "CPU");
    EXPECT_EQ(p.tensor_overrides[1].pattern, "blk\\.[0-3]\\.");
    EXPECT_EQ(p.tensor_overrides[2].pattern, "attn");
    EXPECT_EQ(parse_ok({ "--gpu-layers", "0" }).n_gpu_layers, 0);
    EXPECT_EQ(parse_ok({ "--override-tensor", "x=CPU" }).tensor_overrides.size(), 1u);

    EXPECT_NE(parse_err({ "-ot", "noequals" }).find("-ot"), std::string::npos);
    EXPECT_NE(parse_err({ "-ot", "blk.(=CPU" }).find("regular expression"), std::string::npos);
    EXPECT_NE(parse_err({ "-sm", "diagonal" }).find("-sm"), std::string::npos);
    EXPECT_NE(parse_err({ "-ngl", "lots" }).find("-ngl"), std::string::npos);

    // conversion to the model params resolves the buffer types
    common_params q = parse_ok({ "-ot", "exps=CPU", "--no-mmap" });
    llama_model_params mp;
    std::string err;
    ASSERT_TRUE(common_model_params_to_llama(q, mp, err)) << err;
    EXPECT_FALSE(mp.use_mmap);
    ASSERT_NE(mp.tensor_buft_overrides, nullptr);
    EXPECT_STREQ(mp.tensor_buft_overrides[0].pattern, "exps");
    EXPECT_NE(mp.tensor_buft_overrides[0].buft, nullptr);
    EXPECT_EQ(mp.tensor_buft_overrides[1].pattern, nullptr);
    common_params r = parse_ok({ "-ot", "exps=NPU0" });
    EXPECT_FALSE(common_model_params_to_llama(r, mp, err));
    EXPECT_NE(err.find("NPU0"), std::string::npos);
}

TEST(Args, MoeAndMla) {
    const common_params p = parse_ok({ "-mla", "3", "-amb", "512", "-no-fmoe", "-ser", "6,0.4" });
    EXPECT_EQ(p.mla_attn, 3);
    EXPECT_EQ(p.attn_max_batch, 512);
    EXPECT_FALSE(p.fused_moe);
    EXPECT_EQ(p.ser_n_min, 6);
    EXPECT_FLOAT_EQ(p.ser_threshold, 0.4f);
    const common_params q = parse_ok({ "--mla-use", "1", "--attention-max-batch", "0", "--no-fused-moe", "--fused-moe",
                                       "--smart-expert-reduction", "7,1" });
    EXPECT_EQ(q.mla_attn, 1);
    EXPECT_TRUE(q.fused_moe);
    EXPECT_EQ(q.ser_n_min, 7);
    EXPECT_TRUE(parse_ok({ "-fmoe" }).fused_moe);
    EXPECT_NE(parse_err({ "-mla", "4" }).find("-mla"), std::string::npos);
    EXPECT_NE(parse_err({ "-ser", "6" }).find("-ser"), std::string::npos);
    EXPECT_NE(parse_err({ "-ser", "a,b" }).find("-ser"), std::string::npos);
    EXPECT_NE(parse_err({ "-amb", "-5" }).find("-amb"), std::string::npos);

    llama_context_params cp = common_context_params_to_llama(p);
    EXPECT_EQ(cp.mla, 3);
    EXPECT_EQ(cp.attn_max_batch, 512);
    EXPECT_FALSE(cp.fused_moe);
    EXPECT_EQ(cp.ser_n_min, 6);
    EXPECT_FLOAT_EQ(cp.ser_threshold, 0.4f);
}

TEST(Args, ContextParamsConversion) {
    const common_params p = parse_ok({ "-c", "2048", "-b", "512", "-ub", "128", "-t", "3", "-fa", "off", "-ctk", "q8_0",
                                       "-ctv", "bf16" });
    const llama_context_params cp = common_context_params_to_llama(p);
    EXPECT_EQ(cp.n_ctx, 2048u);
    EXPECT_EQ(cp.n_batch, 512u);
    EXPECT_EQ(cp.n_ubatch, 128u);
    EXPECT_EQ(cp.n_threads, 3);
    EXPECT_EQ(cp.n_threads_batch, 3);   // -tb defaults to -t
    EXPECT_EQ(cp.flash_attn_type, LLAMA_FLASH_ATTN_TYPE_DISABLED);
    EXPECT_EQ(cp.type_k, GGML_TYPE_Q8_0);
    EXPECT_EQ(cp.type_v, GGML_TYPE_BF16);
    EXPECT_EQ(cp.n_seq_max, 1u);
    // ubatch never exceeds batch
    EXPECT_EQ(common_context_params_to_llama(parse_ok({ "-b", "32", "-ub", "512" })).n_ubatch, 32u);
    EXPECT_GE(common_context_params_to_llama(parse_ok({})).n_threads, 1);
}

TEST(Args, CliSwitches) {
    const common_params p = parse_ok({ "-no-cnv", "--verbose-prompt", "-sp", "--no-warmup", "--no-perf", "--demo", "-v" });
    EXPECT_EQ(p.conversation_mode, COMMON_CONVERSATION_MODE_DISABLED);
    EXPECT_TRUE(p.verbose_prompt);
    EXPECT_TRUE(p.special);
    EXPECT_FALSE(p.warmup);
    EXPECT_TRUE(p.no_perf);
    EXPECT_TRUE(p.demo);
    EXPECT_EQ(p.verbosity, 1);
    common_log_set_verbosity(0);
    EXPECT_EQ(parse_ok({ "-cnv" }).conversation_mode, COMMON_CONVERSATION_MODE_ENABLED);
    EXPECT_EQ(parse_ok({ "--conversation" }).conversation_mode, COMMON_CONVERSATION_MODE_ENABLED);
    EXPECT_EQ(parse_ok({ "--no-conversation" }).conversation_mode, COMMON_CONVERSATION_MODE_DISABLED);
    EXPECT_TRUE(parse_ok({ "--special" }).special);
    const common_params r = parse_ok({ "-r", "User:", "--reverse-prompt", "###", "--no-display-prompt", "--simple-io" });
    EXPECT_EQ(r.antiprompt, (std::vector<std::string>{ "User:", "###" }));
    EXPECT_FALSE(r.display_prompt);
    EXPECT_NE(parse_err({ "-r", "" }).find("-r"), std::string::npos);
    EXPECT_EQ(parse_ok({ "--log-disable" }).verbosity, -1);
    common_log_set_verbosity(0);
}

TEST(Args, ChatTemplate) {
    const std::string path = temp_file("template.jinja", "{{ messages }}");
    const common_params p = parse_ok({ "--chat-template-file", path, "--reasoning-format", "deepseek" });
    EXPECT_EQ(p.chat_template, "{{ messages }}");
    EXPECT_EQ(p.reasoning_format, COMMON_REASONING_FORMAT_DEEPSEEK);
    // a built-in name gives its source; Jinja source stays; anything else names the built-ins
    EXPECT_EQ(parse_ok({ "--chat-template", "chatml" }).chat_template, kiln::builtin_chat_template("chatml"));
    EXPECT_EQ(parse_ok({ "--chat-template", "{{ bos_token }}x" }).chat_template, "{{ bos_token }}x");
    const std::string bad = parse_err({ "--chat-template", "chat-ml" });
    EXPECT_NE(bad.find("--chat-template"), std::string::npos) << bad;
    EXPECT_NE(bad.find("chatml, llama2, llama3"), std::string::npos) << bad;
    EXPECT_EQ(parse_ok({ "--reasoning-format", "none" }).reasoning_format, COMMON_REASONING_FORMAT_NONE);
    EXPECT_EQ(parse_ok({ "--reasoning-format", "deepseek-legacy" }).reasoning_format,
              COMMON_REASONING_FORMAT_DEEPSEEK_LEGACY);
    EXPECT_NE(parse_err({ "--reasoning-format", "r1" }).find("--reasoning-format"), std::string::npos);
    EXPECT_NE(parse_err({ "--chat-template-file", "/nonexistent.jinja" }).find("/nonexistent.jinja"), std::string::npos);
    // thinking off, and template variables given as JSON
    EXPECT_EQ(parse_ok({ "--reasoning-budget", "0" }).reasoning_budget, 0);
    EXPECT_EQ(parse_ok({}).reasoning_budget, -1);
    EXPECT_EQ(parse_ok({ "--reasoning-budget", "500" }).reasoning_budget, 500);   // tokens of thinking
    EXPECT_NE(parse_err({ "--reasoning-budget", "-2" }).find("--reasoning-budget"), std::string::npos);
    EXPECT_EQ(parse_ok({ "--chat-template-kwargs", "{\"enable_thinking\": false}" }).chat_template_kwargs,
              "{\"enable_thinking\":false}");
    for (const char * bad : { "[1]", "{\"a\":", "enable_thinking=false" }) {
        EXPECT_NE(parse_err({ "--chat-template-kwargs", bad }).find("--chat-template-kwargs"), std::string::npos) << bad;
    }
}

TEST(Args, Server) {
    const std::string keys = temp_file("keys.txt", "k1\n\nk2\r\n");
    const common_params p = parse_ok({ "--host", "0.0.0.0", "--port", "9000", "--alias", "qwen", "--api-key", "a,b",
                                       "--api-key-file", keys, "--timeout", "30", "--metrics", "--no-slots", "-np", "4",
                                       "-m", "m.gguf", "-c", "8192" },
                                     COMMON_TOOL_SERVER);
    EXPECT_EQ(p.hostname, "0.0.0.0");
    EXPECT_EQ(p.port, 9000);
    EXPECT_EQ(p.model_alias, "qwen");
    EXPECT_EQ(p.api_keys, (std::vector<std::string>{ "a", "b", "k1", "k2" }));
    EXPECT_EQ(p.timeout_read, 30);
    EXPECT_EQ(p.timeout_write, 30);
    EXPECT_TRUE(p.endpoint_metrics);
    EXPECT_FALSE(p.endpoint_slots);
    EXPECT_EQ(p.n_parallel, 4);
    EXPECT_TRUE(parse_ok({ "--slots" }, COMMON_TOOL_SERVER).endpoint_slots);
    EXPECT_EQ(parse_ok({ "--parallel", "2", "-a", "x" }, COMMON_TOOL_SERVER).n_parallel, 2);
    EXPECT_EQ(parse_ok({ "--parallel", "2", "-a", "x" }, COMMON_TOOL_SERVER).model_alias, "x");
    EXPECT_NE(parse_err({ "--port", "70000" }, COMMON_TOOL_SERVER).find("--port"), std::string::npos);
    EXPECT_NE(parse_err({ "--port", "80a" }, COMMON_TOOL_SERVER).find("--port"), std::string::npos);
    EXPECT_NE(parse_err({ "-np", "0" }, COMMON_TOOL_SERVER).find("-np"), std::string::npos);
    EXPECT_NE(parse_err({ "--api-key-file", "/nonexistent/keys" }, COMMON_TOOL_SERVER).find("/nonexistent/keys"),
              std::string::npos);
    EXPECT_EQ(parse_ok({}, COMMON_TOOL_SERVER).cors_origins, (std::vector<std::string>{ "*" }));
    EXPECT_EQ(parse_ok({ "--cors-origin", "https://a.example,http://b.example:8080" }, COMMON_TOOL_SERVER).cors_origins,
              (std::vector<std::string>{ "https://a.example", "http://b.example:8080" }));
    EXPECT_NE(parse_err({ "--cors-origin", "a.example" }, COMMON_TOOL_SERVER).find("--cors-origin"), std::string::npos);
    EXPECT_EQ(parse_ok({ "--threads-http", "3" }, COMMON_TOOL_SERVER).n_threads_http, 3);
    EXPECT_NE(parse_err({ "--threads-http", "0" }, COMMON_TOOL_SERVER).find("--threads-http"), std::string::npos);
}

// llama.cpp's --webui / --no-webui switches and ik_llama.cpp's --webui NAME
TEST(Args, ServerWebui) {
    EXPECT_TRUE(parse_ok({}, COMMON_TOOL_SERVER).webui);
    EXPECT_FALSE(parse_ok({ "--no-webui" }, COMMON_TOOL_SERVER).webui);
    EXPECT_FALSE(parse_ok({ "--webui", "none" }, COMMON_TOOL_SERVER).webui);
    EXPECT_TRUE(parse_ok({ "--no-webui", "--webui" }, COMMON_TOOL_SERVER).webui);
    EXPECT_TRUE(parse_ok({ "--no-webui", "--webui", "auto" }, COMMON_TOOL_SERVER).webui);
    EXPECT_TRUE(parse_ok({ "--no-webui", "--webui", "llamacpp" }, COMMON_TOOL_SERVER).webui);
    // a bare --webui takes no flag as its value
    const common_params p = parse_ok({ "--webui", "--port", "9000" }, COMMON_TOOL_SERVER);
    EXPECT_TRUE(p.webui);
    EXPECT_EQ(p.port, 9000);
    EXPECT_NE(parse_err({ "--webui", "svelte" }, COMMON_TOOL_SERVER).find("--webui"), std::string::npos);
    EXPECT_NE(parse_err({ "--no-webui" }, COMMON_TOOL_CLI).find("--no-webui"), std::string::npos);
    // --path: a directory of files to serve instead of the built-in page
    EXPECT_EQ(parse_ok({ "--path", ::testing::TempDir() }, COMMON_TOOL_SERVER).public_path, ::testing::TempDir());
    EXPECT_NE(parse_err({ "--path", temp_file("page.html", "<p>") }, COMMON_TOOL_SERVER).find("--path"), std::string::npos);
    EXPECT_NE(parse_err({ "--path", "/nonexistent/dir" }, COMMON_TOOL_SERVER).find("not a directory"), std::string::npos);
}

TEST(Args, PerplexityAndSweepBench) {
    const common_params p = parse_ok({ "-m", "m.gguf", "-f", temp_file("wiki.txt", "text"), "--chunks", "8",
                                       "--kl-divergence-base", "base.kld", "--kl-divergence", "-c", "128" },
                                     COMMON_TOOL_PERPLEXITY);
    EXPECT_EQ(p.n_chunks, 8);
    EXPECT_EQ(p.logits_file, "base.kld");
    EXPECT_TRUE(p.kl_divergence);
    EXPECT_EQ(p.prompt, "text");

    EXPECT_TRUE(parse_ok({ "--warmup-batch" }, COMMON_TOOL_SWEEP_BENCH).warmup_batch);
    EXPECT_EQ(parse_ok({ "--output-format", "jsonl" }, COMMON_TOOL_SWEEP_BENCH).output_format, "jsonl");
    // llama-bench parses its own comma lists (examples/llama-bench): no table row is for it
    EXPECT_TRUE(common_args_for_tool(COMMON_TOOL_BENCH).empty());
    // the same short name means something else for another tool
    EXPECT_EQ(parse_ok({ "-o", "imatrix.dat" }, COMMON_TOOL_IMATRIX).out_file, "imatrix.dat");
}

TEST(Args, Errors) {
    std::string msg = parse_err({ "--frobnicate" });
    EXPECT_NE(msg.find("--frobnicate"), std::string::npos);
    msg = parse_err({ "-c" });   // missing value
    EXPECT_NE(msg.find("-c"), std::string::npos);
    EXPECT_NE(msg.find("value"), std::string::npos);
    msg = parse_err({ "-c", "abc" });
    EXPECT_NE(msg.find("-c"), std::string::npos);
    EXPECT_NE(msg.find("abc"), std::string::npos);
    for (const auto & bad : std::vector<std::vector<std::string>>{
             { "-c", "12x" }, { "-c", "-5" }, { "-c", "99999999999" }, { "-c", "" }, { "-b", "0" }, { "-ub", "0" },
             { "-t", "0" }, { "-n", "-3" }, { "--temp", "hot" }, { "--temp", "nan" }, { "--top-p", "0.5.1" },
             { "--top-k", "1.5" }, { "-s", "-2" }, { "-s", "4294967296" }, { "--repeat-last-n", "-2" },
             { "--mlock=yes" }, { "-m" }, { "-p" } }) {
        msg = parse_err(bad);
        EXPECT_NE(msg.find(bad[0].substr(0, bad[0].find('='))), std::string::npos) << msg;
    }
    // stray positional arguments are errors too
    EXPECT_NE(parse_err({ "model.gguf" }).find("model.gguf"), std::string::npos);
    // a flag of another tool is refused with its name
    msg = parse_err({ "--port", "8080" }, COMMON_TOOL_CLI);
    EXPECT_NE(msg.find("--port"), std::string::npos);
    EXPECT_NE(msg.find("llama-cli"), std::string::npos);
    EXPECT_NE(parse_err({ "--temp", "0" }, COMMON_TOOL_PERPLEXITY).find("--temp"), std::string::npos);
}

TEST(Args, HelpAndVersion) {
    common_params p;
    auto r = parse({ "-c", "100", "--help" }, p);
    EXPECT_EQ(r.status, common_parse_result::help);
    EXPECT_NE(r.message.find("usage: llama-cli"), std::string::npos);
    for (const common_arg * a : common_args_for_tool(COMMON_TOOL_CLI)) {
        EXPECT_NE(r.message.find(a->names[0]), std::string::npos) << a->names[0];
    }
    EXPECT_EQ(r.message.find("--port"), std::string::npos);   // server-only flags are not listed
    EXPECT_NE(r.message.find("--ctx-size"), std::string::npos);
    EXPECT_EQ(parse({ "-h" }, p).status, common_parse_result::help);
    EXPECT_NE(common_params_usage(COMMON_TOOL_SERVER).find("--api-key-file"), std::string::npos);
    r = parse({ "--version" }, p);
    EXPECT_EQ(r.status, common_parse_result::version);
    EXPECT_NE(r.message.find("version"), std::string::npos);
}

// Every flag of every tool parses with a plausible value, and the table is consistent: names
// start with '-', no name appears twice for the same tool, every flag has help.
TEST(Args, EveryFlagParses) {
    const std::string file = temp_file("any.txt", "x");
    const std::string grammar_file = temp_file("any.gbnf", "root ::= \"x\"\n");
    const std::string schema_file = temp_file("any.json", "{\"type\": \"string\"}");
    const common_tool tools[] = { COMMON_TOOL_CLI, COMMON_TOOL_SERVER, COMMON_TOOL_PERPLEXITY,
                                  COMMON_TOOL_SWEEP_BENCH, COMMON_TOOL_BENCH, COMMON_TOOL_IMATRIX };
    for (common_tool tool : tools) {
        std::vector<std::string> seen;
        for (const common_arg * a : common_args_for_tool(tool)) {
            EXPECT_FALSE(a->help.empty()) << a->names[0];
            for (const std::string & n : a->names) {
                ASSERT_FALSE(n.empty());
                EXPECT_EQ(n[0], '-') << n;
                EXPECT_EQ(std::count(seen.begin(), seen.end(), n), 0) << n << " twice for " << common_tool_name(tool);
                seen.push_back(n);
            }
            if (a->has_name("-h") || a->has_name("--version") || a->has_name("--list-devices")) continue;
            // refused until implemented (test-arg-promises.cpp)
            const common_flag_status * promise = common_flag_promise_of(*a);
            if (promise && promise->promise == common_flag_promise::unsupported) continue;
            for (const std::string & n : a->names) {
                std::vector<std::string> args = { n };
                if (a->kind == common_arg_kind::required) {
                    const std::string & h = a->value_hint;
                    std::string v = "1";
                    if (h == "FNAME") v = n.find("grammar") != std::string::npos ? grammar_file
                                          : (n.find("json-schema") != std::string::npos || n == "-jf") ? schema_file
                                                                                                       : file;
                    else if (h == "DIR") v = ::testing::TempDir();
                    else if (h == "GRAMMAR") v = "root ::= \"x\"";
                    else if (h == "JSON") v = "{}";
                    else if (n == "--reasoning-budget") v = "0";   // thinking off
                    else if (h == "SCHEMA") v = "{\"type\": \"integer\"}";
                    else if (h == "SAMPLERS") v = "top_k;temperature";
                    else if (h == "TOKEN_ID(+/-)BIAS") v = "1+1";
                    else if (h == "TYPE") v = "q8_0";
                    else if (h == "K,T") v = "4,0.5";
                    else if (h == "PATTERN=TYPE,...") v = "exps=CPU";
                    else if (h == "MODE") v = "layer";
                    else if (h == "JINJA_TEMPLATE") v = "chatml";
                    else if (h == "ORIGIN[,ORIGIN...]") v = "http://a.example";
                    else if (h == "FORMAT") v = n == "--reasoning-format" ? "none" : "md";
                    else if (!h.empty() && h.front() == '{') v = h.substr(1, h.find_first_of(",}") - 1);   // {a,b,...}: a
                    args.push_back(v);
                }
                common_params p;
                const auto r = common_params_parse_args(args, p, tool);
                EXPECT_EQ(r.status, common_parse_result::ok) << common_tool_name(tool) << " " << n << ": " << r.message;
            }
        }
    }
    common_log_set_verbosity(0);
}
