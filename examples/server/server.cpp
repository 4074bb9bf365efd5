// llama-server: an OpenAI-compatible HTTP server (and llama.cpp's native endpoints) on top of
// libllama. This file is the HTTP side: start-up, the routes, authentication, errors, and
// pumping a request's task events into a response or an SSE stream. The generation itself runs
// in server-slots (one decode loop for all slots); the wire formats live in server-oai.
#include "arg.h"
#include "chat-template.h"
#include "common.h"
#include "llama.h"
#include "server-http.h"
#include "server-anthropic.h"
#include "server-embeddings.h"
#include "server-oai.h"
#include "server-responses.h"
#include "server-slot-files.h"
#include "server-slots.h"
#include "server-stream.h"
#include "server-utils.h"
#include "server-webui.h"
#include "server-wire.h"
#include "synth.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <pthread.h>
#include <string>
#include <thread>
#include <vector>

namespace {

enum class server_state { loading, ready };

struct server_context {
    common_params params;
    std::atomic<server_state> state{ server_state::loading };

    llama_model * model = nullptr;
    llama_context * ctx = nullptr;
    std::unique_ptr<kiln::chat_template> tmpl;
    std::string tmpl_source;
    std::unique_ptr<slot_engine> engine;
    llama_model * draft_model = nullptr;            // -md
    llama_context * draft_ctx = nullptr;
    std::unique_ptr<drafter> drafts;                // speculative decoding (null: off)
    std::unique_ptr<embedding_engine> embeddings;   // --embedding: set, and the slot engine never starts
    server_info info;
    std::string model_path;
    std::string demo_file;   // the synthesized model, removed at exit
    bool demo = false;
    int64_t created = 0;
    std::atomic<int64_t> next_task_id{ 1 };

    ~server_context() {
        engine.reset();
        drafts.reset();
        if (draft_ctx) llama_free(draft_ctx);
        if (draft_model) llama_model_free(draft_model);
        if (ctx) llama_free(ctx);
        if (model) llama_model_free(model);
        if (!demo_file.empty()) {
            std::error_code ec;
            std::filesystem::remove(demo_file, ec);
        }
    }
};

// ---- HTTP helpers --------------------------------------------------------------------------------

void send_json(httplib::Response & res, const json & body, int status = 200) {
    res.status = status;
    res.set_content(dump_json(body), "application/json; charset=utf-8");
}

void send_error(httplib::Response & res, int status, const std::string & message, const std::string & type = "") {
    send_json(res, make_error_json(status, message, type), status);
}

json parse_body(const httplib::Request & req) { return parse_request_json(req.body); }

// Runs a handler; a refused request or a failure becomes an OpenAI error object.
httplib::Server::Handler guarded(std::function<void(const httplib::Request &, httplib::Response &)> fn) {
    return [fn = std::move(fn)](const httplib::Request & req, httplib::Response & res) {
        try {
            fn(req, res);
        } catch (const http_error & e) {
            send_error(res, e.status, e.what(), e.type);
        } catch (const json::exception & e) {
            send_error(res, 400, std::string("bad field type in the request: ") + e.what());
        } catch (const std::exception & e) {
            LOG_ERR("error while handling %s: %s\n", req.path.c_str(), e.what());
            send_error(res, 500, e.what());
        }
    };
}

bool authorized(const server_context & sc, const httplib::Request & req) {
    if (sc.params.api_keys.empty()) return true;
    std::string key;
    const std::string auth = req.get_header_value("Authorization");
    static const std::string bearer = "Bearer ";
    if (auth.compare(0, bearer.size(), bearer) == 0) key = auth.substr(bearer.size());
    else if (req.has_header("X-Api-Key")) key = req.get_header_value("X-Api-Key");
    // every key is compared, each in time that does not depend on where the bytes differ
    bool ok = false;
    for (const auto & k : sc.params.api_keys) ok |= !key.empty() && secrets_equal(key, k);
    return ok;
}

// CORS: browsers may call from the configured origins (--cors-origin; "*": any). Credentials
// (cookies, HTTP auth) are never allowed: the API key travels in a header the page sets itself.
void set_cors_headers(const server_context & sc, const httplib::Request & req, httplib::Response & res) {
    const std::vector<std::string> & allowed = sc.params.cors_origins;
    const std::string origin = req.get_header_value("Origin");
    if (std::find(allowed.begin(), allowed.end(), "*") != allowed.end()) {
        res.set_header("Access-Control-Allow-Origin", "*");
    } else {
        res.set_header("Vary", "Origin");
        if (origin.empty() || std::find(allowed.begin(), allowed.end(), origin) == allowed.end()) return;
        res.set_header("Access-Control-Allow-Origin", origin);
    }
    if (req.method == "OPTIONS") {
        res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Api-Key");
        res.set_header("Access-Control-Max-Age", "600");
    }
}

// ---- completions ---------------------------------------------------------------------------------

std::vector<task_ptr> submit_tasks(server_context & sc, const completion_request & creq) {
    std::vector<task_ptr> tasks;
    for (size_t i = 0; i < creq.prompts.size(); ++i) {
        auto t = std::make_shared<server_task>();
        t->id = sc.next_task_id++;
        t->prompt = creq.prompts[i];
        t->params = creq.gen;
        // the choices of one prompt ("n") must differ even when the request fixes the seed
        uint32_t & seed = t->params.sampling.seed;
        if (seed != LLAMA_DEFAULT_SEED) seed += (uint32_t) (i % (size_t) std::max(1, creq.n_per_prompt));
        if (!sc.engine->submit(t)) {
            for (auto & done : tasks) done->cancelled = true;
            sc.engine->notify();
            throw http_error(503, "the server is busy: all slots are in use and the queue is full; retry later");
        }
        tasks.push_back(std::move(t));
    }
    return tasks;
}

void cancel_tasks(server_context & sc, const std::vector<task_ptr> & tasks) {
    for (auto & t : tasks) t->cancelled = true;
    sc.engine->notify();
}

void refuse_if_embedding_server(const server_context & sc) {
    if (sc.embeddings) {
        throw http_error(501, "this server answers embeddings only (it was started with --embedding); start it without "
                              "--embedding for completions", "not_supported_error");
    }
}

// Runs a parsed request and answers it, whole or streamed; with an adapter, in its wire format.
void serve_completion(server_context & sc, const httplib::Request & req, httplib::Response & res,
                      std::shared_ptr<completion_request> creq, std::shared_ptr<wire_adapter> adapter) {
    std::vector<task_ptr> tasks = submit_tasks(sc, *creq);
    // to notice a client that leaves while its request waits in the queue or reads its prompt
    const int peer_fd = current_connection_socket();

    if (!creq->stream) {
        response_builder rb(*creq, sc.info.model_name);
        double t_checked = monotonic_ms();
        for (size_t i = 0; i < tasks.size(); ++i) {
            bool done = false;
            while (!done) {
                std::vector<task_event> events;
                tasks[i]->channel->wait_pop(events, 100);
                // events may come every few ms: look at the connection every 100 ms, not per event
                if (monotonic_ms() - t_checked >= 100) {
                    t_checked = monotonic_ms();
                    if (peer_hung_up(peer_fd)) {
                        LOG_INF("client %s:%d left before the reply; cancelling\n", req.remote_addr.c_str(), req.remote_port);
                        cancel_tasks(sc, tasks);
                        throw http_error(499, "the client closed the connection");
                    }
                }
                for (const auto & ev : events) {
                    if (ev.error_status) {
                        cancel_tasks(sc, tasks);
                        throw http_error(ev.error_status, ev.error);
                    }
                    if (ev.is_progress) continue;   // only streams ask for it
                    if (adapter) adapter->on_event(ev);
                    rb.add_event(i, ev);
                    done = done || ev.is_final;
                }
            }
        }
        send_json(res, adapter ? adapter->final_response(rb.final_response()) : rb.final_response());
        return;
    }

    // Streaming: the content provider runs on this request's HTTP thread, waiting for events and
    // writing them as SSE chunks. When the client goes away (its socket reports the hang-up, or
    // a write fails) the provider returns false and the releaser cancels the tasks, which frees
    // their slots at the next step and drops them from the queue.
    struct stream_state {
        std::shared_ptr<completion_request> creq;
        std::shared_ptr<wire_adapter> adapter;
        std::unique_ptr<response_builder> rb;
        std::vector<task_ptr> tasks;
        std::vector<bool> done;
        bool begun = false;
        int peer_fd = -1;
    };
    auto st = std::make_shared<stream_state>();
    st->creq = creq;
    st->adapter = adapter;
    st->rb = std::make_unique<response_builder>(*creq, sc.info.model_name);
    st->tasks = tasks;
    st->done.assign(tasks.size(), false);
    st->peer_fd = peer_fd;

    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    res.set_chunked_content_provider(
        "text/event-stream",
        [st](size_t, httplib::DataSink & sink) -> bool {
            auto write = [&](const std::string & s) { return s.empty() || sink.write(s.data(), s.size()); };
            auto chunk = [&](const json & c) { return st->adapter ? st->adapter->stream_chunk(c) : sse_event(c); };
            if (!st->begun) {
                st->begun = true;
                if (st->adapter && !write(st->adapter->stream_begin())) return false;
                for (const json & c : st->rb->stream_begin()) {
                    if (!write(chunk(c))) return false;
                }
                return true;
            }
            if (peer_hung_up(st->peer_fd)) return false;   // the client left: cancel now, not at the next write
            bool all_done = true, wrote = false;
            for (size_t i = 0; i < st->tasks.size(); ++i) {
                if (st->done[i]) continue;
                all_done = false;
                std::vector<task_event> events;
                // wait on the first unfinished task only; the others are drained without waiting
                st->tasks[i]->channel->wait_pop(events, wrote ? 0 : 100);
                for (const auto & ev : events) {
                    if (ev.error_status) {
                        write(st->adapter ? st->adapter->stream_error(ev.error_status, ev.error) : sse_error(ev.error_status, ev.error));
                        sink.done();
                        return true;
                    }
                    if (ev.is_progress && st->adapter) continue;   // Anthropic's and the Responses API's streams have no progress events
                    if (st->adapter) st->adapter->on_event(ev);
                    for (const json & c : st->rb->stream_event(i, ev)) {
                        if (!write(chunk(c))) return false;
                        wrote = true;
                    }
                    if (ev.is_final) st->done[i] = true;
                }
            }
            if (all_done) {
                for (const json & c : st->rb->stream_end()) {
                    if (!write(chunk(c))) return false;
                }
                if (st->adapter) {
                    if (!write(st->adapter->stream_end())) return false;
                } else if (st->rb->sends_done() && !write(sse_done())) {
                    return false;
                }
                sink.done();
                return true;
            }
            // nothing to send yet: make sure the client is still there
            if (wrote) return true;
            return !peer_hung_up(st->peer_fd) && (!sink.is_writable || sink.is_writable());
        },
        [st, &sc](bool) {
            // normal end or not: tasks that have not finished belong to a client that left
            bool any = false;
            for (size_t i = 0; i < st->tasks.size(); ++i) {
                if (!st->done[i]) {
                    st->tasks[i]->cancelled = true;
                    any = true;
                }
            }
            if (any) {
                LOG_INF("stream closed before the end; cancelling its %s\n", st->tasks.size() > 1 ? "tasks" : "task");
                sc.engine->notify();
            }
        });
}

void handle_completion(server_context & sc, const httplib::Request & req, httplib::Response & res, api_kind kind) {
    refuse_if_embedding_server(sc);
    const json body = parse_body(req);
    auto creq = std::make_shared<completion_request>(kind == api_kind::chat ? parse_chat_request(body, sc.info)
                                                                             : parse_completion_request(body, sc.info, kind));
    serve_completion(sc, req, res, std::move(creq), nullptr);
}

// ---- the other endpoints -------------------------------------------------------------------------

json model_meta(const server_context & sc) {
    const llama_vocab * vocab = llama_model_get_vocab(sc.model);
    return json{ { "vocab_type", (int) llama_vocab_type(vocab) },
                 { "n_vocab", llama_vocab_n_tokens(vocab) },
                 { "n_ctx_train", llama_model_n_ctx_train(sc.model) },
                 { "n_embd", llama_model_n_embd(sc.model) },
                 { "n_params", llama_model_n_params(sc.model) },
                 { "size", llama_model_size(sc.model) } };
}

json models_json(const server_context & sc) {
    json entry = { { "id", sc.info.model_name },
                   { "object", "model" },
                   { "created", sc.created },
                   { "owned_by", sc.demo ? "kiln-demo (random weights)" : "kiln" },
                   { "meta", model_meta(sc) } };
    if (sc.demo) entry["description"] = "a synthesized model with random weights: its output is meaningless";
    return json{ { "object", "list" }, { "data", json::array({ entry }) } };
}

json props_json(const server_context & sc) {
    const auto & sp = sc.params.sampling;
    const llama_vocab * vocab = llama_model_get_vocab(sc.model);
    const llama_token bos = llama_vocab_bos(vocab), eos = llama_vocab_eos(vocab);
    return json{
        { "default_generation_settings",
          { { "n_ctx", sc.engine->n_ctx_slot() },
            { "params",
              { { "n_predict", sc.params.n_predict },
                { "seed", sp.seed },
                { "temperature", sp.temp },
                { "top_k", sp.top_k },
                { "top_p", sp.top_p },
                { "min_p", sp.min_p },
                { "typical_p", sp.typ_p },
                { "repeat_last_n", sp.penalty_last_n },
                { "repeat_penalty", sp.penalty_repeat },
                { "presence_penalty", sp.penalty_present },
                { "frequency_penalty", sp.penalty_freq },
                { "n_keep", sc.params.n_keep } } } } },
        { "total_slots", sc.engine->n_slots() },
        { "model_path", sc.model_path },
        { "model_alias", sc.info.model_name },
        { "demo", sc.demo },
        { "embedding", sc.embeddings != nullptr },
        { "pooling", sc.embeddings ? pooling_name(sc.embeddings->pooling()) : "none" },
        { "chat_template", sc.tmpl_source },
        { "bos_token", bos == LLAMA_TOKEN_NULL ? "" : llama_vocab_get_text(vocab, bos) },
        { "eos_token", eos == LLAMA_TOKEN_NULL ? "" : llama_vocab_get_text(vocab, eos) },
        { "build_info", "kiln" },
        { "modalities", { { "vision", false }, { "audio", false } } },
        { "context_shift", sc.params.ctx_shift && llama_memory_can_shift(sc.ctx, nullptr) },
    };
}

std::string metrics_text(const server_context & sc) {
    const engine_metrics m = sc.engine->metrics();
    std::string out;
    auto add = [&](const char * name, const char * type, const char * help, double value) {
        char line[512];
        std::snprintf(line, sizeof line, "# HELP llamacpp:%s %s\n# TYPE llamacpp:%s %s\nllamacpp:%s %.6g\n", name, help, name, type,
                      name, value);
        out += line;
    };
    add("prompt_tokens_total", "counter", "Prompt tokens evaluated (reused cache prefixes excluded).", (double) m.n_prompt_tokens_total);
    add("prompt_seconds_total", "counter", "Wall time of decode steps that read prompt tokens.", m.t_prompt_ms_total / 1e3);
    add("tokens_predicted_total", "counter", "Tokens generated.", (double) m.n_predicted_total);
    add("tokens_predicted_seconds_total", "counter", "Wall time of decode steps that generated tokens.", m.t_predict_ms_total / 1e3);
    add("n_decode_total", "counter", "llama_decode calls.", (double) m.n_decode_total);
    add("n_context_shifts_total", "counter", "Context shifts of full slots.", (double) m.n_context_shifts);
    add("n_drafted_total", "counter", "Speculative decoding: tokens drafted.", (double) m.n_drafted_total);
    add("n_drafted_accepted_total", "counter", "Speculative decoding: drafted tokens the model kept.", (double) m.n_draft_accepted_total);
    add("draft_acceptance_rate", "gauge", "Speculative decoding: drafted tokens kept / drafted.",
        m.n_drafted_total ? (double) m.n_draft_accepted_total / m.n_drafted_total : 0.0);
    add("n_busy_slots_per_decode", "gauge", "Average busy slots per llama_decode call.",
        m.n_decode_total ? (double) m.n_busy_slots_sum / m.n_decode_total : 0.0);
    add("requests_total", "counter", "Tasks accepted (one per choice).", (double) m.n_requests_total);
    add("requests_rejected_total", "counter", "Requests refused because the queue was full.", (double) m.n_requests_rejected);
    add("prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s.",
        m.t_prompt_ms_total > 0 ? 1e3 * m.n_prompt_tokens_total / m.t_prompt_ms_total : 0.0);
    add("predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s.",
        m.t_predict_ms_total > 0 ? 1e3 * m.n_predicted_total / m.t_predict_ms_total : 0.0);
    add("kv_cache_usage_ratio", "gauge", "KV-cache usage (1 = full).",
        m.kv_cells_total > 0 ? (double) m.kv_cells_used / m.kv_cells_total : 0.0);
    add("kv_cache_tokens", "gauge", "KV-cache cells in use.", (double) m.kv_cells_used);
    add("requests_processing", "gauge", "Slots busy.", (double) m.n_processing);
    add("requests_deferred", "gauge", "Tasks waiting in the queue.", (double) m.n_deferred);
    return out;
}

void register_routes(httplib::Server & svr, server_context & sc) {
    // Before routing: CORS preflight, loading state, API key.
    svr.set_pre_routing_handler([&sc](const httplib::Request & req, httplib::Response & res) {
        set_cors_headers(sc, req, res);
        if (req.method == "OPTIONS") {
            res.status = 204;
            return httplib::Server::HandlerResponse::Handled;
        }
        const bool is_health = req.path == "/health" || req.path == "/v1/health";
        // answered here, a request's body is never read: the connection closes after the answer
        auto refuse = [&](int status, const char * message, const char * type) {
            send_error(res, status, message, type);
            if (req.has_header("Content-Length") || req.has_header("Transfer-Encoding")) {
                res.set_header("Connection", "close");
                close_connection_after_response();
            }
            return httplib::Server::HandlerResponse::Handled;
        };
        if (sc.params.webui && is_webui_request(req, sc.params.public_path)) return httplib::Server::HandlerResponse::Unhandled;
        if (sc.state.load() != server_state::ready) return refuse(503, "Loading model", "unavailable_error");
        if (!is_health && !authorized(sc, req)) return refuse(401, "Invalid API Key", "authentication_error");
        return httplib::Server::HandlerResponse::Unhandled;
    });
    // Unknown routes (and anything else that ends in an error without a body) answer JSON.
    svr.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request & req, httplib::Response & res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        if (res.status == 404) send_error(res, 404, "File Not Found: " + req.path, "not_found_error");
        else send_error(res, res.status, "HTTP error " + std::to_string(res.status));
        return httplib::Server::HandlerResponse::Handled;
    }));
    svr.set_exception_handler([](const httplib::Request &, httplib::Response & res, std::exception_ptr ep) {
        std::string msg = "unknown error";
        try {
            if (ep) std::rethrow_exception(ep);
        } catch (const std::exception & e) {
            msg = e.what();
        } catch (...) {
        }
        send_error(res, 500, msg);
    });

    if (sc.params.webui && !register_webui_routes(svr, sc.params.public_path)) {
        LOG_WRN("--path %s: not a directory any more; no web page is served\n", sc.params.public_path.c_str());
    }

    auto health = guarded([](const httplib::Request &, httplib::Response & res) { send_json(res, { { "status", "ok" } }); });
    svr.Get("/health", health);
    svr.Get("/v1/health", health);

    auto models = guarded([&sc](const httplib::Request &, httplib::Response & res) { send_json(res, models_json(sc)); });
    svr.Get("/v1/models", models);
    svr.Get("/models", models);
    svr.Get("/props", guarded([&sc](const httplib::Request &, httplib::Response & res) { send_json(res, props_json(sc)); }));
    svr.Get("/slots", guarded([&sc](const httplib::Request &, httplib::Response & res) {
                if (!sc.params.endpoint_slots) throw http_error(501, "the /slots endpoint is disabled (--no-slots)");
                send_json(res, sc.engine->slots_json());
            }));
    svr.Post(R"(/slots/([^/]*))", guarded([&sc](const httplib::Request & req, httplib::Response & res) {
                 if (!sc.params.endpoint_slots) throw http_error(501, "the /slots endpoint is disabled (--no-slots)");
                 refuse_if_embedding_server(sc);
                 const json body = req.body.empty() ? json::object() : parse_body(req);
                 send_json(res, run_slot_file_action(*sc.engine, sc.params.slot_save_path, req.matches[1].str(),
                                                     req.get_param_value("action"), body));
             }));
    svr.Post("/props", guarded([&sc](const httplib::Request & req, httplib::Response & res) {
                 if (!sc.params.endpoint_props) {
                     throw http_error(501, "this server does not support changing its properties: start it with --props", "not_supported_error");
                 }
                 // as in llama.cpp, nothing can be changed yet: a field asking to is refused, not ignored
                 const json body = parse_body(req);
                 if (!body.is_object()) throw http_error(400, "the request body must be a JSON object");
                 if (!body.empty()) throw http_error(400, "'" + body.begin().key() + "' cannot be changed at run time");
                 send_json(res, { { "success", true } });
             }));
    svr.Get("/metrics", guarded([&sc](const httplib::Request &, httplib::Response & res) {
                if (!sc.params.endpoint_metrics) throw http_error(501, "the /metrics endpoint is disabled (start with --metrics)");
                res.set_content(metrics_text(sc), "text/plain; version=0.0.4");
            }));

    auto chat = guarded([&sc](const httplib::Request & req, httplib::Response & res) { handle_completion(sc, req, res, api_kind::chat); });
    svr.Post("/v1/chat/completions", chat);
    svr.Post("/chat/completions", chat);
    auto completions = guarded(
        [&sc](const httplib::Request & req, httplib::Response & res) { handle_completion(sc, req, res, api_kind::completions); });
    svr.Post("/v1/completions", completions);
    svr.Post("/completions", completions);
    svr.Post("/completion", guarded([&sc](const httplib::Request & req, httplib::Response & res) {
                 handle_completion(sc, req, res, api_kind::native);
             }));

    svr.Post("/v1/messages", guarded([&sc](const httplib::Request & req, httplib::Response & res) {
                 refuse_if_embedding_server(sc);
                 auto creq = std::make_shared<completion_request>(parse_chat_request(anthropic_to_chat(parse_body(req), false), sc.info));
                 serve_completion(sc, req, res, creq, make_anthropic_adapter(*creq, sc.info.model_name));
             }));
    svr.Post("/v1/responses", guarded([&sc](const httplib::Request & req, httplib::Response & res) {
                 refuse_if_embedding_server(sc);
                 const json body = parse_body(req);
                 auto creq = std::make_shared<completion_request>(parse_chat_request(responses_to_chat(body), sc.info));
                 serve_completion(sc, req, res, creq, make_responses_adapter(body, *creq, sc.info.model_name));
             }));
    svr.Post("/v1/messages/count_tokens", guarded([&sc](const httplib::Request & req, httplib::Response & res) {
                 send_json(res, anthropic_count_tokens(parse_body(req), sc.info));
             }));

    svr.Post("/tokenize", guarded([&sc](const httplib::Request & req, httplib::Response & res) {
                 const json body = parse_body(req);
                 if (!body.is_object() || !body.contains("content") || !body["content"].is_string()) {
                     throw http_error(400, "'content' must be a string");
                 }
                 const bool add_special = body.value("add_special", false);
                 const bool with_pieces = body.value("with_pieces", false);
                 const llama_vocab * vocab = sc.info.vocab;
                 const auto tokens = common_tokenize(vocab, body["content"].get<std::string>(), add_special, true);
                 json out = json::array();
                 for (llama_token t : tokens) {
                     if (with_pieces) {
                         const std::string piece = common_token_to_piece(vocab, t, true);
                         json p = { { "id", t } };
                         // a piece that is not valid UTF-8 on its own is given as its bytes
                         if (utf8_complete_prefix(piece) == piece.size()) p["piece"] = piece;
                         else p["piece"] = bytes_json(piece);
                         out.push_back(std::move(p));
                     } else {
                         out.push_back(t);
                     }
                 }
                 send_json(res, { { "tokens", out } });
             }));
    svr.Post("/detokenize", guarded([&sc](const httplib::Request & req, httplib::Response & res) {
                 const json body = parse_body(req);
                 if (!body.is_object() || !body.contains("tokens") || !body["tokens"].is_array()) {
                     throw http_error(400, "'tokens' must be a list of token ids");
                 }
                 const int32_t n_vocab = llama_vocab_n_tokens(sc.info.vocab);
                 std::vector<llama_token> tokens;
                 for (const auto & t : body["tokens"]) {
                     if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= n_vocab) {
                         throw http_error(400, "'tokens' must hold token ids in 0.." + std::to_string(n_vocab - 1) +
                                                   " (got " + t.dump() + ")");
                     }
                     tokens.push_back(t.get<llama_token>());
                 }
                 send_json(res, { { "content", common_detokenize(sc.info.vocab, tokens, true) } });
             }));
    svr.Post("/apply-template", guarded([&sc](const httplib::Request & req, httplib::Response & res) {
                 const json body = parse_body(req);
                 if (!body.is_object()) throw http_error(400, "the request body must be a JSON object");
                 send_json(res, { { "prompt", render_chat_prompt(body, sc.info) } });
             }));
    auto need_embeddings = [&sc]() -> embedding_engine & {
        if (!sc.embeddings) throw http_error(501, "embeddings are off: start the server with --embedding", "not_supported_error");
        return *sc.embeddings;
    };
    svr.Post("/v1/embeddings", guarded([&sc, need_embeddings](const httplib::Request & req, httplib::Response & res) {
                 send_json(res, handle_oai_embeddings(parse_body(req), need_embeddings(), sc.info));
             }));
    auto native_embeddings = guarded([&sc, need_embeddings](const httplib::Request & req, httplib::Response & res) {
        send_json(res, handle_native_embeddings(parse_body(req), need_embeddings(), sc.info));
    });
    svr.Post("/embeddings", native_embeddings);
    svr.Post("/embedding", native_embeddings);
}

// ---- start-up ------------------------------------------------------------------------------------

// msg, and libllama's reason when it gave one
std::string with_last_error(std::string msg) {
    const char * why = llama_last_error();
    if (why && *why) msg += std::string(": ") + why;
    return msg;
}

// what: for the message ("model", "the draft model"); null with err set on failure
llama_model * load_model_file(common_params & params, const std::string & path, const char * what, std::string & err) {
    llama_model_params mparams;
    if (!common_model_params_to_llama(params, mparams, err)) return nullptr;
    llama_model * m = llama_model_load_from_file(path.c_str(), mparams);
    if (!m) err = with_last_error(std::string("failed to load ") + what + " '" + path + "'");
    return m;
}

// Speculative decoding (-md, --spec-type ngram-simple): the draft model gets a context of its
// own with one sequence per slot, its vocabulary checked against the main model's.
bool load_drafter(server_context & sc, int32_t n_ctx, int32_t n_slots, std::string & err) {
    common_params & params = sc.params;
    if (params.speculative.model.empty() && !params.speculative.ngram) return true;
    if (llama_model_is_recurrent(sc.model) || llama_model_is_hybrid(sc.model)) {
        LOG_WRN("speculative decoding is off: the model keeps a recurrent state, which cannot drop rejected drafts\n");
        return true;
    }
    if (!params.speculative.model.empty()) {
        sc.draft_model = load_model_file(params, params.speculative.model, "the draft model", err);
        if (!sc.draft_model) return false;
        if (!draft_vocab_compatible(llama_model_get_vocab(sc.model), llama_model_get_vocab(sc.draft_model), err)) {
            err = "the draft model '" + params.speculative.model + "' cannot draft for '" + params.model + "': " + err;
            return false;
        }
        if (llama_model_is_recurrent(sc.draft_model) || llama_model_is_hybrid(sc.draft_model)) {
            err = "the draft model '" + params.speculative.model + "' keeps a recurrent state, which cannot drop rejected drafts";
            return false;
        }
        llama_context_params cparams = common_context_params_to_llama(params);
        // every slot's history plus its drafts
        cparams.n_ctx = (uint32_t) (n_ctx + n_slots * (params.speculative.n_max + 1));
        cparams.n_seq_max = (uint32_t) n_slots;
        sc.draft_ctx = llama_init_from_model(sc.draft_model, cparams);
        if (!sc.draft_ctx) {
            err = with_last_error("failed to create the draft model's context");
            return false;
        }
    }
    draft_params dp;
    dp.n_max = params.speculative.n_max;
    dp.n_min = params.speculative.n_min;
    dp.p_min = params.speculative.p_min;
    dp.ngram = params.speculative.ngram;
    dp.n_vocab_target = llama_vocab_n_tokens(llama_model_get_vocab(sc.model));
    sc.drafts = std::make_unique<drafter>(dp, sc.draft_ctx, n_slots);
    sc.engine->set_drafter(sc.drafts.get());
    LOG_INF("speculative decoding: %s%s%s, up to %d tokens per step\n", params.speculative.model.empty() ? "" : "draft model ",
            params.speculative.model.c_str(), params.speculative.ngram ? (params.speculative.model.empty() ? "n-gram lookup" : " and n-gram lookup") : "", params.speculative.n_max);
    return true;
}

bool load_model(server_context & sc, std::string & err) {
    common_params & params = sc.params;
    if (params.model.empty() || params.demo) {
        LOG_WRN("no model given (-m): synthesizing a small demo model with RANDOM WEIGHTS; its replies are "
                "meaningless. Run `llama-server -m path/to/model.gguf` to serve a real model.\n");
        std::string path;
        if (!kiln_synth_demo_model(path, err)) {
            err = "could not synthesize the demo model: " + err;
            return false;
        }
        sc.demo_file = path;
        sc.demo = true;
        params.model = path;
    }
    sc.model_path = params.model;

    sc.model = load_model_file(params, params.model, "model", err);
    if (!sc.model) return false;
    const int32_t n_slots = std::max(1, params.n_parallel);
    llama_context_params cparams = common_context_params_to_llama(params);
    if (cparams.n_ctx == 0) cparams.n_ctx = (uint32_t) llama_model_n_ctx_train(sc.model);
    cparams.n_seq_max = (uint32_t) n_slots;
    sc.ctx = llama_init_from_model(sc.model, cparams);
    if (!sc.ctx) {
        err = with_last_error("failed to create the context");
        return false;
    }
    const int32_t n_ctx = (int32_t) llama_n_ctx(sc.ctx);
    const int32_t n_ctx_slot = n_ctx / n_slots;
    if (n_ctx_slot < 8) {
        err = "the context (-c " + std::to_string(n_ctx) + ") split over " + std::to_string(n_slots) +
              " slots (-np) leaves fewer than 8 tokens per slot";
        return false;
    }

    // chat template: --chat-template(-file), else the model's, else ChatML
    const llama_vocab * vocab = llama_model_get_vocab(sc.model);
    std::string source = params.chat_template;
    if (source.empty()) {
        const char * t = llama_model_chat_template(sc.model, nullptr);
        if (t) source = t;
    }
    if (source.empty()) {
        LOG_WRN("the model has no chat template; using ChatML for /v1/chat/completions\n");
        source = kiln::builtin_chat_template("chatml");   // the most common format; llama.cpp's fallback too
    }
    const llama_token bos = llama_vocab_bos(vocab), eos = llama_vocab_eos(vocab);
    try {
        sc.tmpl = std::make_unique<kiln::chat_template>(source, bos == LLAMA_TOKEN_NULL ? "" : llama_vocab_get_text(vocab, bos),
                                                         eos == LLAMA_TOKEN_NULL ? "" : llama_vocab_get_text(vocab, eos));
    } catch (const std::exception & e) {
        err = std::string("the chat template does not parse: ") + e.what();
        return false;
    }
    sc.tmpl_source = source;

    // warm-up: one token through the graph, every expert routed, so the first request pays
    // neither for allocations nor for first touches of the weights
    if (params.warmup && !common_warmup(sc.ctx)) {
        err = "the warm-up decode failed";
        return false;
    }

    std::string name = params.model_alias;
    if (name.empty()) name = sc.demo ? "kiln-demo" : std::filesystem::path(params.model).filename().string();
    sc.info.model_name = name;
    sc.info.vocab = vocab;
    sc.info.n_ctx_slot = n_ctx_slot;
    sc.info.n_slots = n_slots;
    sc.info.defaults = &sc.params;
    sc.info.tmpl = sc.tmpl.get();
    sc.info.markup = reasoning_markup_from_template(sc.tmpl_source);
    sc.info.tools_syntax = tool_syntax_from_template(sc.tmpl_source);
    sc.info.reasoning_forced = reasoning_forced_close(sc.tmpl.get(), sc.info.markup);

    engine_params ep;
    ep.n_slots = n_slots;
    ep.n_ctx_slot = n_ctx_slot;
    ep.n_batch = (int32_t) llama_n_batch(sc.ctx);
    ep.queue_capacity = std::max(16, 4 * n_slots);
    ep.context_shift = params.ctx_shift;
    ep.n_cache_reuse = params.n_cache_reuse;
    if (!params.slot_save_path.empty() && !prepare_slot_save_dir(params.slot_save_path, err)) return false;
    sc.engine = std::make_unique<slot_engine>(sc.ctx, ep);
    if (!params.embedding && !load_drafter(sc, n_ctx, n_slots, err)) return false;
    if (params.embedding) {
        const pooling_kind pooling = params.pooling.empty() ? pooling_of_model(sc.model) : pooling_from_name(params.pooling);
        sc.embeddings = std::make_unique<embedding_engine>(sc.ctx, pooling);
        LOG_INF("embeddings on (pooling %s): completions are refused\n", pooling_name(pooling));
    }
    sc.created = unix_time_s();
    LOG_INF("model '%s' loaded%s: %d slots of %d tokens (context %d), queue of %d\n", name.c_str(),
            sc.demo ? " (demo, random weights)" : "", n_slots, n_ctx_slot, n_ctx, ep.queue_capacity);
    return true;
}

} // namespace

int main(int argc, char ** argv) {
    server_context sc;
    if (!common_params_parse(argc, argv, sc.params, COMMON_TOOL_SERVER)) return 1;
    common_log_install();

    // Signals are taken by sigwait in the main thread; every other thread inherits the mask.
    std::signal(SIGPIPE, SIG_IGN);
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

    llama_backend_init();

    kiln_http_server svr;
    const int32_t n_slots = std::max(1, sc.params.n_parallel);
    // by default enough threads for every slot, every queued request and a few quick GETs;
    // further connections wait for the kernel's accept queue
    const size_t n_http_threads = sc.params.n_threads_http > 0 ? (size_t) sc.params.n_threads_http
                                                               : (size_t) (n_slots + std::max(16, 4 * n_slots) + 8);
    LOG_INF("llama-server: %zu HTTP threads\n", n_http_threads);
    svr.new_task_queue = [n_http_threads] { return new httplib::ThreadPool(n_http_threads); };
    svr.set_read_timeout(sc.params.timeout_read);
    svr.set_write_timeout(sc.params.timeout_write);
    svr.set_payload_max_length(64u << 20);
    register_routes(svr, sc);
    if (!sc.params.ssl_file_key.empty() || !sc.params.ssl_file_cert.empty()) {
        std::string err;
        if (sc.params.ssl_file_key.empty() || sc.params.ssl_file_cert.empty()) {
            LOG_ERR("error: HTTPS needs both --ssl-key-file and --ssl-cert-file\n");
            return 1;
        }
        if (!svr.enable_tls(sc.params.ssl_file_cert, sc.params.ssl_file_key, err)) {
            LOG_ERR("error: %s\n", err.c_str());
            return 1;
        }
    }
    const char * scheme = svr.tls() ? "https" : "http";

    int port = sc.params.port;
    if (port == 0) {
        port = svr.bind_to_any_port(sc.params.hostname);
        if (port <= 0) {
            LOG_ERR("error: cannot listen on %s (any port)\n", sc.params.hostname.c_str());
            return 1;
        }
    } else if (!svr.bind_to_port(sc.params.hostname, port)) {
        LOG_ERR("error: cannot listen on %s:%d (in use, or not an address of this machine)\n", sc.params.hostname.c_str(), port);
        return 1;
    }
    std::thread http([&svr] { svr.listen_after_bind(); });
    LOG_INF("server is listening on %s://%s:%d (loading the model; /health answers 503 until it is ready)\n", scheme,
            sc.params.hostname.c_str(), port);

    std::string err;
    if (!load_model(sc, err)) {
        LOG_ERR("error: %s\n", err.c_str());
        svr.stop();
        http.join();
        return 1;
    }
    // an embedding server decodes on the request threads (one at a time); the slot loop stays idle
    if (!sc.embeddings) sc.engine->start();
    sc.state = server_state::ready;
    LOG_INF("ready: %s://%s:%d/v1 serves '%s'\n", scheme, sc.params.hostname.c_str(), port, sc.info.model_name.c_str());
    if (sc.params.webui) LOG_INF("chat page: %s://%s:%d/\n", scheme, sc.params.hostname.c_str(), port);

    int sig = 0;
    sigwait(&sigs, &sig);
    LOG_INF("signal %d: shutting down\n", sig);
    sc.engine->stop();
    svr.stop();
    http.join();
    return 0;
}
