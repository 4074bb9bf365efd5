// A flag is a promise (common/arg-promises.cpp). The whole flag table is walked: each flag of
// each tool is either listed (refused with "X is not supported yet", or accepted with exactly one
// warning line and no effect on the parameters), or it sets a parameter that code outside the
// parser reads. Then one test per flag that used to be silently ignored.
#include "arg-promises.h"
#include "arg.h"
#include "common.h"
#include "testing.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace {

// Every parameter a flag can set, by name. A flag whose effect is not visible here is reported
// as "changes nothing": add the new field to this list.
template <class V> void visit_fields(common_params & p, V && v) {
    v("model", p.model);
    v("model_alias", p.model_alias);
    v("prompt", p.prompt);
    v("prompt_file", p.prompt_file);
    v("n_predict", p.n_predict);
    v("n_keep", p.n_keep);
    v("ctx_shift", p.ctx_shift);
    v("n_ctx", p.n_ctx);
    v("n_batch", p.n_batch);
    v("n_ubatch", p.n_ubatch);
    v("n_parallel", p.n_parallel);
    v("n_threads", p.n_threads);
    v("n_threads_batch", p.n_threads_batch);
    v("flash_attn_type", p.flash_attn_type);
    v("cache_type_k", p.cache_type_k);
    v("cache_type_v", p.cache_type_v);
    v("rope_freq_base", p.rope_freq_base);
    v("rope_freq_scale", p.rope_freq_scale);
    v("n_gpu_layers", p.n_gpu_layers);
    v("split_mode", p.split_mode);
    v("tensor_split", p.tensor_split);
    v("main_gpu", p.main_gpu);
    v("devices", p.devices);
    v("graph_reduce_type", p.graph_reduce_type);
    v("graph_reduce_form", p.graph_reduce_form);
    v("moe_split", p.moe_split);
    v("no_kv_offload", p.no_kv_offload);
    v("use_mmap", p.use_mmap);
    v("use_mlock", p.use_mlock);
    v("check_tensors", p.check_tensors);
    v("repack_tensors", p.repack_tensors);
    v("tensor_overrides", p.tensor_overrides);
    v("mla_attn", p.mla_attn);
    v("attn_max_batch", p.attn_max_batch);
    v("fused_moe", p.fused_moe);
    v("ser_n_min", p.ser_n_min);
    v("ser_threshold", p.ser_threshold);
    v("swa_full", p.swa_full);
    v("seed", p.sampling.seed);
    v("top_k", p.sampling.top_k);
    v("top_p", p.sampling.top_p);
    v("min_p", p.sampling.min_p);
    v("typ_p", p.sampling.typ_p);
    v("temp", p.sampling.temp);
    v("penalty_last_n", p.sampling.penalty_last_n);
    v("penalty_repeat", p.sampling.penalty_repeat);
    v("penalty_freq", p.sampling.penalty_freq);
    v("penalty_present", p.sampling.penalty_present);
    v("min_keep", p.sampling.min_keep);
    v("ignore_eos", p.sampling.ignore_eos);
    v("top_n_sigma", p.sampling.top_n_sigma);
    v("xtc_probability", p.sampling.xtc_probability);
    v("xtc_threshold", p.sampling.xtc_threshold);
    v("mirostat", p.sampling.mirostat);
    v("mirostat_tau", p.sampling.mirostat_tau);
    v("mirostat_eta", p.sampling.mirostat_eta);
    v("logit_bias", p.sampling.logit_bias);
    v("dry_multiplier", p.sampling.dry_multiplier);
    v("dry_base", p.sampling.dry_base);
    v("dry_allowed_length", p.sampling.dry_allowed_length);
    v("dry_penalty_last_n", p.sampling.dry_penalty_last_n);
    v("dry_sequence_breakers", p.sampling.dry_sequence_breakers);
    v("samplers", p.sampling.samplers);
    v("grammar", p.sampling.grammar);
    v("conversation_mode", p.conversation_mode);
    v("escape", p.escape);
    v("verbose_prompt", p.verbose_prompt);
    v("special", p.special);
    v("display_prompt", p.display_prompt);
    v("antiprompt", p.antiprompt);
    v("warmup", p.warmup);
    v("no_perf", p.no_perf);
    v("verbosity", p.verbosity);
    v("demo", p.demo);
    v("hostname", p.hostname);
    v("port", p.port);
    v("api_keys", p.api_keys);
    v("chat_template", p.chat_template);
    v("reasoning_format", p.reasoning_format);
    v("reasoning_budget", p.reasoning_budget);
    v("chat_template_kwargs", p.chat_template_kwargs);
    v("timeout_read", p.timeout_read);
    v("timeout_write", p.timeout_write);
    v("cors_origins", p.cors_origins);
    v("n_threads_http", p.n_threads_http);
    v("endpoint_metrics", p.endpoint_metrics);
    v("endpoint_slots", p.endpoint_slots);
    v("webui", p.webui);
    v("public_path", p.public_path);
    v("endpoint_props", p.endpoint_props);
    v("slot_save_path", p.slot_save_path);
    v("n_cache_reuse", p.n_cache_reuse);
    v("ssl_file_key", p.ssl_file_key);
    v("ssl_file_cert", p.ssl_file_cert);
    v("speculative.model", p.speculative.model);
    v("speculative.n_max", p.speculative.n_max);
    v("speculative.n_min", p.speculative.n_min);
    v("speculative.p_min", p.speculative.p_min);
    v("speculative.ngram", p.speculative.ngram);
    v("n_chunks", p.n_chunks);
    v("logits_file", p.logits_file);
    v("kl_divergence", p.kl_divergence);
    v("ppl_stride", p.ppl_stride);
    v("output_format", p.output_format);
    v("out_file", p.out_file);
    v("warmup_batch", p.warmup_batch);
    v("n_ctx_checkpoints", p.n_ctx_checkpoints);
    v("embedding", p.embedding);
    v("pooling", p.pooling);
}

template <class T> std::string show(const T & x) {
    if constexpr (std::is_same_v<T, std::string>) return x;
    else if constexpr (std::is_enum_v<T>) return std::to_string((int) x);
    else if constexpr (std::is_arithmetic_v<T>) return std::to_string(x);
    else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
        std::string s;
        for (const auto & e : x) s += e + "\n";
        return s;
    } else if constexpr (std::is_same_v<T, std::vector<llama_logit_bias>>) {
        std::string s;
        for (const auto & e : x) s += std::to_string(e.token) + ":" + std::to_string(e.bias) + "\n";
        return s;
    } else {
        std::string s;
        for (const auto & o : x) s += o.pattern + "=" + o.buft + "\n";
        return s;
    }
}

std::map<std::string, std::string> snapshot(common_params p) {
    std::map<std::string, std::string> m;
    visit_fields(p, [&](const char * name, auto & field) { m[name] = show(field); });
    return m;
}

// Every field moved off its default, so a switch that sets a field to its default value (-fmoe,
// --slots) still shows up as a change.
common_params perturbed() {
    common_params p;
    visit_fields(p, [](const char *, auto & f) {
        using T = std::remove_reference_t<decltype(f)>;
        if constexpr (std::is_same_v<T, bool>) f = !f;
        else if constexpr (std::is_enum_v<T>) f = (T) ((int) f + 1);
        else if constexpr (std::is_arithmetic_v<T>) f = (T) (f + 3);
        else if constexpr (std::is_same_v<T, std::string>) f = "zz";
        else if constexpr (std::is_same_v<T, std::vector<std::string>>) f = { "zz" };
        else if constexpr (std::is_same_v<T, std::vector<llama_logit_bias>>) f = { { 3, 1.0f } };
        else f = { { "zz", "CPU" } };
    });
    return p;
}

std::set<std::string> changed_fields(const common_params & before, const common_params & after) {
    const auto a = snapshot(before), b = snapshot(after);
    std::set<std::string> out;
    for (const auto & [k, v] : a) {
        if (b.at(k) != v) out.insert(k);
    }
    return out;
}

// The sources outside the flag table, read once: a field counts as used when some code reads it
// (obj.field or obj->field, not as the target of an assignment). In arg.cpp only the code after
// the table counts (its setters all write through a parameter named p).
const std::vector<std::pair<std::string, std::string>> & sources() {
    static const std::vector<std::pair<std::string, std::string>> files = [] {
        std::vector<std::pair<std::string, std::string>> out;
        const std::filesystem::path root(KILN_SOURCE_DIR);
        for (const char * dir : { "common", "src", "examples" }) {
            for (const auto & e : std::filesystem::recursive_directory_iterator(root / dir)) {
                const std::string ext = e.path().extension().string();
                if (ext != ".cpp" && ext != ".h") continue;
                std::ifstream in(e.path(), std::ios::binary);
                std::stringstream ss;
                ss << in.rdbuf();
                out.emplace_back(std::filesystem::relative(e.path(), root).string(), ss.str());
            }
        }
        return out;
    }();
    return files;
}

bool field_is_read_in_sources(const std::string & field) {
    const std::regex re("(\\w+)(\\.|->)" + field + "\\b(?!\\s*=[^=])");
    for (const auto & [path, text] : sources()) {
        for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it) {
            if (path == "common/arg.cpp" && (*it)[1] == "p") continue;
            return true;
        }
    }
    return false;
}

bool field_is_read(const std::string & field) {
    static std::map<std::string, bool> known;   // the scan is slow; each field is asked about many times
    const auto it = known.find(field);
    if (it != known.end()) return it->second;
    return known[field] = field_is_read_in_sources(field);
}

const common_tool k_tools[] = { COMMON_TOOL_CLI, COMMON_TOOL_SERVER, COMMON_TOOL_PERPLEXITY, COMMON_TOOL_SWEEP_BENCH,
                                COMMON_TOOL_IMATRIX };

std::string temp_file(const std::string & name, const std::string & content) {
    const std::string path = ::testing::TempDir() + "kiln-test-arg-promises-" + name;
    std::ofstream(path, std::ios::binary) << content;
    return path;
}

// Values to try for a flag that takes one: every one that parses is applied.
std::vector<std::string> candidate_values(const common_arg & a) {
    if (a.kind == common_arg_kind::none) return { "" };
    const std::vector<std::string> values = { temp_file("any.txt", "x\n"), ::testing::TempDir(), "7", "0", "0.5", "q8_0", "4,0.5", "exps=CPU",
                                              "blk=CUDA0", "bf16", "chatml", "http://a.example", "none", "layer", "graph", "ring", "experts", "deepseek", "jsonl", "csv", "off",
                                              "top_k;temp", "5+1", "root ::= \"x\"", "{\"type\": \"integer\"}",
                                              temp_file("any.gbnf", "root ::= \"x\"\n"), temp_file("any.json", "{\"type\": \"string\"}") };
    return values;
}

common_parse_result parse(const std::vector<std::string> & args, common_params & p, common_tool tool) {
    return common_params_parse_args(args, p, tool);
}

} // namespace

TEST(FlagPromises, EveryFlagIsUsedOrListed) {
    for (common_tool tool : k_tools) {
        for (const common_arg * a : common_args_for_tool(tool)) {
            if (a->has_name("-h") || a->has_name("--version") || a->has_name("--list-devices")) continue;   // print and exit
            const common_flag_status * promise = common_flag_promise_of(*a);
            for (const std::string & name : a->names) {
                const std::string where = std::string(common_tool_name(tool)) + " " + name;
                std::set<std::string> fields;
                int n_parsed = 0;
                for (const std::string & v : candidate_values(*a)) {
                    std::vector<std::string> args = { name };
                    if (a->kind != common_arg_kind::none) args.push_back(v);
                    for (const common_params & base : { common_params(), perturbed() }) {
                        common_params p = base;
                        const common_parse_result r = parse(args, p, tool);
                        if (promise && promise->promise == common_flag_promise::unsupported) {
                            ASSERT_EQ(r.status, common_parse_result::error) << where;
                            EXPECT_NE(r.message.find(name + " is not supported yet"), std::string::npos) << r.message;
                            ++n_parsed;
                            continue;
                        }
                        if (r.status != common_parse_result::ok) continue;   // not a value this flag takes
                        ++n_parsed;
                        const std::set<std::string> changed = changed_fields(base, p);
                        const bool ignored = !r.warnings.empty();
                        if (ignored) {
                            // listed, and only then: one line naming the flag, no effect at all
                            ASSERT_NE(promise, nullptr) << where << " warned without being listed: " << r.warnings[0];
                            EXPECT_EQ(r.warnings.size(), 1u) << where;
                            EXPECT_NE(r.warnings[0].find(name), std::string::npos) << r.warnings[0];
                            EXPECT_TRUE(changed.empty()) << where << " warned but changed " << *changed.begin();
                        } else {
                            EXPECT_TRUE(!promise || promise->promise == common_flag_promise::gpu_placement) << where;
                            fields.insert(changed.begin(), changed.end());
                        }
                    }
                }
                EXPECT_GT(n_parsed, 0) << where << ": no test value parses; add one to candidate_values()";
                if (promise && promise->promise != common_flag_promise::gpu_placement) continue;
                if (promise && !common_gpu_available() && fields.empty()) continue;   // every value asked for the GPU
                EXPECT_FALSE(fields.empty()) << where << " changes no parameter (not implemented? list it in "
                                             << "common/arg-promises.cpp; a new field? add it to visit_fields())";
                for (const std::string & f : fields) {
                    EXPECT_TRUE(field_is_read(f)) << where << " sets '" << f << "', which nothing outside the parser reads";
                }
            }
        }
    }
    common_log_set_verbosity(0);
}

// Every flag the promise table marks unsupported is refused by name, with a value when it takes one.
// (The table lists none at present; this keeps the refusal honest for the next one.)
TEST(FlagPromises, UnsupportedFlagsAreRefusedByName) {
    for (common_tool tool : k_tools) {
        for (const common_arg * a : common_args_for_tool(tool)) {
            const common_flag_status * promise = common_flag_promise_of(*a);
            if (!promise || promise->promise != common_flag_promise::unsupported) continue;
            std::vector<std::string> args = { a->names[0] };
            if (a->kind != common_arg_kind::none) args.push_back(candidate_values(*a).front());
            common_params p;
            const common_parse_result r = parse(args, p, tool);
            ASSERT_EQ(r.status, common_parse_result::error) << args[0];
            EXPECT_NE(r.message.find(args[0] + " is not supported yet ("), std::string::npos) << r.message;
        }
    }
}

TEST(FlagPromises, NoOpsByNatureWarnOnce) {
    for (const char * flag : { "-cb", "--cont-batching", "-nocb", "--no-cont-batching", "--jinja" }) {
        common_params p;
        const common_parse_result r = parse({ flag }, p, COMMON_TOOL_SERVER);
        ASSERT_EQ(r.status, common_parse_result::ok) << flag << ": " << r.message;
        ASSERT_EQ(r.warnings.size(), 1u) << flag;
        EXPECT_EQ(r.warnings[0].rfind(std::string(flag) + " has no effect: ", 0), 0u) << r.warnings[0];
    }
    common_params p;
    const common_parse_result r = parse({ "--simple-io", "--no-jinja", "-n", "5" }, p, COMMON_TOOL_CLI);
    ASSERT_EQ(r.status, common_parse_result::ok);
    EXPECT_EQ(r.warnings.size(), 2u);
    EXPECT_EQ(p.n_predict, 5);
}

TEST(FlagPromises, GpuPlacementWithoutGpuWarnsAndRunsOnTheCpu) {
    // the machine decides: with a usable GPU (or a registered device) there is nothing to warn about
    if (common_gpu_available()) GTEST_SKIP() << "a device is registered here (" << ggml_backend_dev_name(ggml_backend_dev_get(0)) << ")";
    common_params p;
    common_parse_result r = parse({ "-ngl", "99", "-sm", "row", "-ts", "3,1", "-mg", "1", "-ot", "exps=CUDA0", "-ot", "x=CPU" },
                                  p, COMMON_TOOL_SERVER);
    ASSERT_EQ(r.status, common_parse_result::ok) << r.message;
    ASSERT_EQ(r.warnings.size(), 5u);
    EXPECT_EQ(r.warnings[0].rfind("no usable GPU found, -ngl ignored", 0), 0u) << r.warnings[0];
    EXPECT_EQ(r.warnings[4].rfind("no usable GPU found, -ot ignored", 0), 0u) << r.warnings[4];
    EXPECT_EQ(p.split_mode, "layer");
    EXPECT_EQ(p.main_gpu, 0);
    ASSERT_EQ(p.tensor_overrides.size(), 1u);   // the CPU rule is kept
    EXPECT_EQ(p.tensor_overrides[0].buft, "CPU");

    // the model and context parameters a tool builds place nothing on a GPU
    llama_model_params mp;
    std::string err;
    ASSERT_TRUE(common_model_params_to_llama(p, mp, err)) << err;
    EXPECT_LE(mp.n_gpu_layers, 0);

    // asking for the CPU is no warning; bad values are still errors
    r = parse({ "-ngl", "0" }, p, COMMON_TOOL_CLI);
    EXPECT_TRUE(r.warnings.empty());
    r = parse({ "-ngl", "lots" }, p, COMMON_TOOL_CLI);
    EXPECT_EQ(r.status, common_parse_result::error);
    EXPECT_NE(r.message.find("-ngl"), std::string::npos);
    r = parse({ "-sm", "diagonal" }, p, COMMON_TOOL_CLI);
    EXPECT_EQ(r.status, common_parse_result::error);
    r = parse({ "-ot", "x=NPU0" }, p, COMMON_TOOL_CLI);   // neither a GPU nor the CPU: refused when converted
    ASSERT_EQ(r.status, common_parse_result::ok);
    EXPECT_TRUE(r.warnings.empty());
    EXPECT_FALSE(common_model_params_to_llama(p, mp, err));
    EXPECT_NE(err.find("NPU0"), std::string::npos) << err;
}

TEST(FlagPromises, NoPerfReachesTheContext) {
    common_params p;
    ASSERT_EQ(parse({ "--no-perf" }, p, COMMON_TOOL_PERPLEXITY).status, common_parse_result::ok);
    EXPECT_TRUE(common_context_params_to_llama(p).no_perf);   // test-model-load checks what the context does with it
}
