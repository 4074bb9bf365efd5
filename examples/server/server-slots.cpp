#include "server-slots.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <numeric>

// ---- task_channel --------------------------------------------------------------------------------

void task_channel::push(task_event ev) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        events_.push_back(std::move(ev));
    }
    cv_.notify_all();
}

bool task_channel::wait_pop(std::vector<task_event> & out, int timeout_ms) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return !events_.empty(); })) return false;
    while (!events_.empty()) {
        out.push_back(std::move(events_.front()));
        events_.pop_front();
    }
    return true;
}

// ---- slots ---------------------------------------------------------------------------------------

struct slot_engine::slot {
    int32_t id = 0;
    task_ptr task;                                  // null when idle
    std::vector<llama_token> cache;                 // cache[i] is in the KV cache at position i of sequence id
    size_t n_prompt_fed = 0;                        // prompt tokens in the cache (or in this step's batch)
    llama_sampler * smpl = nullptr;
    stop_matcher stops;
    llama_token next_token = LLAMA_TOKEN_NULL;      // sampled, to be decoded next step
    int32_t out_index = -1;                         // its output row in this step's batch
    int32_t batch_first = 0, batch_count = 0;       // its tokens in this step's batch (contiguous)
    int32_t n_decoded = 0;
    int32_t n_cached = 0;
    int32_t n_shifted = 0;                          // tokens dropped by context shifts in this task
    std::vector<llama_token> draft;                 // drafted tokens decoded after next_token this step
    int32_t n_drafted = 0, n_draft_accepted = 0;    // in this task
    double t_start_ms = 0, t_first_token_ms = 0;
    uint64_t last_used = 0;                         // step counter, for least-recently-used choice
    std::vector<token_report> reports;              // token reports not yet sent
    reasoning_budget thinking;                      // the task's reasoning budget
    std::vector<llama_token> forced;                // tokens the slot writes next instead of sampling
    int32_t prompt_fed_step = 0;                    // prompt tokens in this step's batch

    ~slot() {
        if (smpl) llama_sampler_free(smpl);
    }
};

struct slot_engine::pending_action {
    int32_t id = 0;
    slot_action_kind kind = slot_action_kind::erase;
    std::string path;
    std::promise<slot_action_result> done;
};

slot_engine::slot_engine(llama_context * ctx, engine_params params)
    : ctx_(ctx), vocab_(llama_model_get_vocab(llama_get_model(ctx))), params_(params),
      recurrent_(llama_model_is_recurrent(llama_get_model(ctx)) || llama_model_is_hybrid(llama_get_model(ctx))) {
    const char * why = nullptr;
    can_shift_ = llama_memory_can_shift(ctx_, &why);
    no_shift_reason_ = why ? why : "";
    if (params_.context_shift && !can_shift_) {
        LOG_WRN("context shift is off for this model (%s): a full slot ends its request with 'length'\n", why);
    }
    params_.n_slots = std::max(1, params_.n_slots);
    params_.n_batch = std::max(params_.n_batch, params_.n_slots);   // every generating slot fits in a step
    for (int32_t i = 0; i < params_.n_slots; ++i) {
        auto s = std::make_unique<slot>();
        s->id = i;
        slots_.push_back(std::move(s));
    }
    batch_ = llama_batch_init(params_.n_batch, 0, 1);
    if (const char * t = std::getenv("KILN_TEST_FAIL_DECODE_TOKEN")) {
        fail_token_ = (llama_token) std::atoi(t);
        LOG_WRN("KILN_TEST_FAIL_DECODE_TOKEN: decoding a batch that holds token %d will fail (a test's fault)\n", fail_token_);
    }
    metrics_.kv_cells_total = (int32_t) llama_n_ctx(ctx_);
    snapshot_status();
}

slot_engine::~slot_engine() {
    stop();
    llama_batch_free(batch_);
}

void slot_engine::start() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (running_) return;
    running_ = true;
    thread_ = std::thread([this] { loop(); });
}

void slot_engine::stop() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!running_) return;
        running_ = false;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

bool slot_engine::submit(const task_ptr & task) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if ((int32_t) queue_.size() >= params_.queue_capacity) {
            metrics_.n_requests_rejected++;
            return false;
        }
        task->t_queued_ms = monotonic_ms();
        queue_.push_back(task);
        metrics_.n_requests_total++;
        metrics_.n_deferred = (int32_t) queue_.size();
    }
    cv_.notify_all();
    return true;
}

void slot_engine::notify() { cv_.notify_all(); }

slot_action_result slot_engine::slot_action(int32_t id, slot_action_kind kind, const std::string & path) {
    slot_action_result res;
    if (id < 0 || id >= params_.n_slots) {
        res.status = 400;
        res.error = "there is no slot " + std::to_string(id) + " (slots 0.." + std::to_string(params_.n_slots - 1) + ")";
        return res;
    }
    auto a = std::make_shared<pending_action>();
    a->id = id;
    a->kind = kind;
    a->path = path;
    std::future<slot_action_result> done = a->done.get_future();
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!running_) {
            res.status = 503;
            res.error = "the slots are not running";
            return res;
        }
        actions_.push_back(a);
    }
    cv_.notify_all();
    return done.get();
}

// On the loop thread, between steps: the actions whose slot is idle.
void slot_engine::run_slot_actions() {
    std::vector<std::shared_ptr<pending_action>> ready;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        for (auto it = actions_.begin(); it != actions_.end();) {
            if (slots_[(*it)->id]->task) {
                ++it;   // busy: after its task
            } else {
                ready.push_back(*it);
                it = actions_.erase(it);
            }
        }
    }
    for (auto & a : ready) a->done.set_value(run_slot_action(*slots_[a->id], *a));
}

slot_action_result slot_engine::run_slot_action(slot & s, const pending_action & a) {
    slot_action_result res;
    const double t0 = monotonic_ms();
    auto failed = [&](int status, const std::string & why) {
        res.status = status;
        res.error = why;
        return res;
    };
    switch (a.kind) {
        case slot_action_kind::save: {
            res.n_bytes = llama_state_seq_save_file(ctx_, a.path.c_str(), s.id, s.cache.data(), s.cache.size());
            if (res.n_bytes == 0) return failed(500, llama_last_error());
            res.n_tokens = s.cache.size();
            break;
        }
        case slot_action_kind::restore: {
            std::vector<llama_token> tokens(params_.n_ctx_slot);
            size_t n = 0;
            res.n_bytes = llama_state_seq_load_file(ctx_, a.path.c_str(), s.id, tokens.data(), tokens.size(), &n);
            if (res.n_bytes == 0) return failed(400, llama_last_error());
            tokens.resize(n);
            // the slot's bookkeeping: token i sits at position i
            const llama_pos lo = llama_memory_seq_pos_min(ctx_, s.id), hi = llama_memory_seq_pos_max(ctx_, s.id);
            if (n == 0 ? hi != -1 : lo != 0 || hi != (llama_pos) n - 1) {
                llama_memory_seq_rm(ctx_, s.id, -1, -1);
                s.cache.clear();
                return failed(400, "the file's cached positions do not match its " + std::to_string(n) + " tokens");
            }
            s.cache = std::move(tokens);
            res.n_tokens = n;
            break;
        }
        case slot_action_kind::erase:
            res.n_tokens = s.cache.size();
            llama_memory_seq_rm(ctx_, s.id, -1, -1);
            s.cache.clear();
            break;
    }
    res.ms = monotonic_ms() - t0;
    LOG_INF("slot %d: %s %s (%zu tokens)\n", s.id,
            a.kind == slot_action_kind::save ? "saved to" : a.kind == slot_action_kind::restore ? "restored from" : "erased",
            a.path.c_str(), res.n_tokens);
    return res;
}

engine_metrics slot_engine::metrics() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return metrics_;
}

json slot_engine::slots_json() const {
    std::lock_guard<std::mutex> lock(mutex_);
    json out = json::array();
    for (const json & j : status_) out.push_back(j);
    return out;
}

// Called with mutex_ held, by the loop thread: what /slots shows (the slots themselves belong to
// the loop thread).
void slot_engine::snapshot_status() {
    status_.clear();
    for (const auto & sp : slots_) {
        const slot & s = *sp;
        json j = {
            { "id", s.id },
            { "id_task", s.task ? s.task->id : -1 },
            { "n_ctx", params_.n_ctx_slot },
            { "is_processing", (bool) s.task },
            { "n_past", (int64_t) s.cache.size() },
            { "n_prompt_tokens", s.task ? (int64_t) s.task->prompt.size() : 0 },
            { "n_cached", s.n_cached },
            { "n_decoded", s.n_decoded },
            { "n_shifted", s.n_shifted },
        };
        if (s.task) {
            j["params"] = { { "n_predict", s.task->params.n_predict },
                            { "temperature", s.task->params.sampling.temp },
                            { "top_k", s.task->params.sampling.top_k },
                            { "top_p", s.task->params.sampling.top_p },
                            { "min_p", s.task->params.sampling.min_p },
                            { "stop", s.task->params.stop } };
        }
        status_.push_back(std::move(j));
    }
}

// ---- the loop ------------------------------------------------------------------------------------

void slot_engine::loop() {
    for (;;) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (!running_) break;
        }
        if (step()) continue;
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return !running_ || !queue_.empty() || !actions_.empty(); });
    }
    // shutting down: tell whoever still waits
    for (auto & sp : slots_) {
        if (sp->task) fail(*sp, 503, "the server is shutting down");
    }
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto & t : queue_) {
        task_event ev;
        ev.error_status = 503;
        ev.error = "the server is shutting down";
        t->channel->push(std::move(ev));
    }
    queue_.clear();
    for (auto & a : actions_) {
        slot_action_result res;
        res.status = 503;
        res.error = "the server is shutting down";
        a->done.set_value(res);
    }
    actions_.clear();
}

namespace {

size_t common_prefix(const std::vector<llama_token> & a, const std::vector<llama_token> & b) {
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    return n;
}

} // namespace

void slot_engine::assign_waiting_tasks() {
    static uint64_t use_counter = 0;
    for (;;) {
        task_ptr task;
        slot * best = nullptr;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            // drop tasks whose client left while they waited
            queue_.erase(std::remove_if(queue_.begin(), queue_.end(), [](const task_ptr & t) { return t->cancelled.load(); }),
                         queue_.end());
            if (queue_.empty()) {
                metrics_.n_deferred = 0;
                return;
            }
            // the idle slot whose cache shares the longest prefix with the prompt, else the least
            // recently used one
            size_t best_lcp = 0;
            const int32_t wanted = queue_.front()->params.id_slot;
            for (auto & sp : slots_) {
                if (sp->task || (wanted >= 0 && sp->id != wanted)) continue;
                const size_t lcp = common_prefix(sp->cache, queue_.front()->prompt);
                if (!best || lcp > best_lcp || (lcp == best_lcp && sp->last_used < best->last_used)) {
                    best = sp.get();
                    best_lcp = lcp;
                }
            }
            if (!best) return;
            task = queue_.front();
            queue_.pop_front();
            metrics_.n_deferred = (int32_t) queue_.size();
            best->last_used = ++use_counter;
        }
        begin_task(*best, task);
    }
}

void slot_engine::begin_task(slot & s, task_ptr task) {
    // Reuse the longest common prefix of the previous prompt and output; the last prompt token is
    // always decoded again so that its logits exist.
    size_t keep = task->params.cache_prompt ? common_prefix(s.cache, task->prompt) : 0;
    if (task->params.cache_prompt && params_.n_cache_reuse > 0 && can_shift_) keep = reuse_cache_chunks(s, task->prompt, keep);
    if (keep >= task->prompt.size()) keep = task->prompt.size() - 1;
    // a recurrent state resumes only where it kept a checkpoint (--ctx-checkpoints)
    keep = (size_t) llama_memory_seq_pos_resume(ctx_, s.id, (llama_pos) keep);
    if (!llama_memory_seq_rm(ctx_, s.id, (llama_pos) keep, -1)) {
        // the memory cannot go back there (a sliding-window layer dropped what it would need)
        llama_memory_seq_rm(ctx_, s.id, -1, -1);
        keep = 0;
    }
    s.cache.resize(keep);
    s.n_prompt_fed = keep;
    s.n_cached = (int32_t) keep;
    s.n_shifted = 0;
    s.draft.clear();
    s.n_drafted = s.n_draft_accepted = 0;
    s.n_decoded = 0;
    s.next_token = LLAMA_TOKEN_NULL;
    s.out_index = -1;
    s.reports.clear();
    s.stops = stop_matcher(task->params.stop);
    s.thinking = reasoning_budget(task->params.reasoning_budget, task->params.reasoning_open, task->params.reasoning_close,
                                  task->params.reasoning_starts_inside);
    s.forced.clear();
    if (s.smpl) llama_sampler_free(s.smpl);
    s.smpl = common_sampler_chain_from_params(task->params.sampling, params_.n_ctx_slot, vocab_);
    // the prompt is history for the repetition penalties
    for (llama_token t : task->prompt) llama_sampler_accept(s.smpl, t);
    // checked when the request was read; a failure here is an internal error
    std::string grammar_err;
    if (!common_sampler_add_grammar(s.smpl, vocab_, task->params.sampling, grammar_err)) {
        LOG_ERR("slot %d: %s\n", s.id, grammar_err.c_str());
    }
    s.t_start_ms = monotonic_ms();
    s.t_first_token_ms = 0;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        s.task = std::move(task);
    }
    LOG_DBG("slot %d: task %lld, %zu prompt tokens, %zu reused from the cache\n", s.id, (long long) s.task->id,
            s.task->prompt.size(), keep);
}

// --cache-reuse: past the common prefix, a run of at least n_cache_reuse cached tokens that the
// prompt has further on is moved there (the tokens between are dropped, the run's positions
// shifted), as llama.cpp does, so an edited conversation re-reads only what changed. Returns how
// much of the prompt the cache now holds.
size_t slot_engine::reuse_cache_chunks(slot & s, const std::vector<llama_token> & prompt, size_t keep) {
    std::vector<llama_token> & cache = s.cache;
    size_t head_c = keep, head_p = keep;   // next unmatched token of the cache / of the prompt
    while (head_c < cache.size() && head_p < prompt.size()) {
        size_t n = 0;
        while (head_c + n < cache.size() && head_p + n < prompt.size() && cache[head_c + n] == prompt[head_p + n]) ++n;
        if (n < (size_t) params_.n_cache_reuse) {
            ++head_c;
            continue;
        }
        // cells at positions [head_p, head_c) hold tokens the prompt does not have there
        if (!llama_memory_seq_rm(ctx_, s.id, (llama_pos) head_p, (llama_pos) head_c)) break;   // a window layer forbids it
        llama_memory_seq_add(ctx_, s.id, (llama_pos) head_c, (llama_pos) (head_c + n), (llama_pos) head_p - (llama_pos) head_c);
        for (size_t i = 0; i < n; ++i) cache[head_p + i] = cache[head_c + i];
        LOG_DBG("slot %d: cache reuse: %zu tokens moved from %zu to %zu\n", s.id, n, head_c, head_p);
        head_c += n;
        head_p += n;
    }
    // what is left past the reused runs goes (begin_task removes it from the memory)
    if (head_p > keep) cache.resize(head_p);
    return head_p;
}

void slot_engine::release(slot & s) {
    if (s.smpl) {
        llama_sampler_free(s.smpl);
        s.smpl = nullptr;
    }
    s.next_token = LLAMA_TOKEN_NULL;
    s.out_index = -1;
    std::lock_guard<std::mutex> lock(mutex_);
    s.task.reset();
}

void slot_engine::fail(slot & s, int status, const std::string & message) {
    task_event ev;
    ev.error_status = status;
    ev.error = message;
    s.task->channel->push(std::move(ev));
    // what the cache holds for this sequence is no longer known to be right
    llama_memory_seq_rm(ctx_, s.id, -1, -1);
    s.cache.clear();
    release(s);
}

task_summary slot_engine::summary_so_far(const slot & s) const {
    task_summary sum;
    sum.n_prompt = (int32_t) s.task->prompt.size();
    sum.n_cached = s.n_cached;
    sum.n_predicted = s.n_decoded;
    sum.n_shifted = s.n_shifted;
    sum.n_drafted = s.n_drafted;
    sum.n_draft_accepted = s.n_draft_accepted;
    const double now = monotonic_ms();
    const double first = s.t_first_token_ms > 0 ? s.t_first_token_ms : now;
    sum.t_prompt_ms = first - s.t_start_ms;
    sum.t_predict_ms = now - first;
    sum.slot_id = s.id;
    return sum;
}

void slot_engine::send_progress(slot & s) {
    task_event ev;
    ev.is_progress = true;
    ev.progress.total = (int32_t) s.task->prompt.size();
    ev.progress.cache = s.n_cached;
    ev.progress.processed = (int32_t) s.n_prompt_fed;
    ev.progress.time_ms = monotonic_ms() - s.t_start_ms;
    s.task->channel->push(std::move(ev));
}

void slot_engine::finish(slot & s, const std::string & reason) {
    task_event ev;
    if (!s.stops.stopped()) ev.text = s.stops.flush();
    ev.tokens = std::move(s.reports);
    s.reports.clear();
    ev.is_final = true;
    task_summary & sum = ev.summary;
    sum = summary_so_far(s);
    sum.finish_reason = reason;
    sum.stopped_word = s.stops.stopped();
    sum.stopping_word = s.stops.stop_word();
    sum.stopped_limit = reason == "length";
    sum.stopped_eos = reason == "stop" && !sum.stopped_word;
    s.task->channel->push(std::move(ev));
    LOG_DBG("slot %d: task %lld done (%s), %d prompt + %d generated tokens\n", s.id, (long long) s.task->id,
            reason.c_str(), sum.n_prompt, sum.n_predicted);
    release(s);
}

// The chosen token and the k most likely candidates in the distribution the sampler chain drew
// from (the softmax of what it kept): log-probabilities, -inf for a token it had removed.
token_report slot_engine::post_sampling_report(llama_sampler * smpl, llama_token tok, const std::string & piece, int32_t k) const {
    token_report rep;
    const llama_token_data_array kept = llama_sampler_last_candidates(smpl);
    float mx = -std::numeric_limits<float>::infinity();
    for (size_t i = 0; i < kept.size; ++i) mx = std::max(mx, kept.data[i].logit);
    double sum = 0.0;
    for (size_t i = 0; i < kept.size; ++i) sum += std::exp((double) kept.data[i].logit - mx);
    const float log_norm = mx + (float) std::log(sum);
    rep.chosen = { tok, piece, -std::numeric_limits<float>::infinity() };
    for (size_t i = 0; i < kept.size; ++i) {
        if (kept.data[i].id == tok) rep.chosen.logprob = kept.data[i].logit - log_norm;
    }
    const size_t n = std::min((size_t) std::max(k, 0), kept.size);
    std::partial_sort(kept.data, kept.data + n, kept.data + kept.size,
                      [](const llama_token_data & a, const llama_token_data & b) { return a.logit > b.logit; });
    for (size_t i = 0; i < n; ++i) {
        rep.top.push_back({ kept.data[i].id, common_token_to_piece(vocab_, kept.data[i].id, false), kept.data[i].logit - log_norm });
    }
    return rep;
}

llama_token slot_engine::emit_token(slot & s, int32_t batch_index) {
    if (s.t_first_token_ms == 0) s.t_first_token_ms = monotonic_ms();
    const generation_params & gp = s.task->params;
    if (gp.n_predict == 0) {   // max_tokens 0: the prompt is read, nothing is generated
        finish(s, "length");
        return LLAMA_TOKEN_NULL;
    }
    float * logits = llama_get_logits_ith(ctx_, batch_index);
    if (!logits) {
        fail(s, 500, "no logits for the slot's last token");
        return LLAMA_TOKEN_NULL;
    }
    const int32_t n_vocab = llama_vocab_n_tokens(vocab_);
    if (gp.sampling.ignore_eos) {
        for (llama_token t = 0; t < n_vocab; ++t) {
            if (llama_vocab_is_eog(vocab_, t)) logits[t] = -std::numeric_limits<float>::infinity();
        }
    }
    // log-softmax of the model's distribution, before the samplers change anything
    float log_norm = 0.0f;
    if (gp.logprobs && !gp.post_sampling_probs) {
        const float mx = *std::max_element(logits, logits + n_vocab);
        double sum = 0.0;
        for (int32_t i = 0; i < n_vocab; ++i) sum += std::exp((double) logits[i] - mx);
        log_norm = mx + (float) std::log(sum);
    }

    if (s.forced.empty() && s.thinking.exhausted()) {
        // the thinking budget is spent: close the block; the answer follows
        s.forced = common_tokenize(vocab_, gp.reasoning_forced, false, true);
        s.thinking.closed();
    }
    llama_token tok;
    if (!s.forced.empty()) {
        tok = s.forced.front();
        s.forced.erase(s.forced.begin());
        llama_sampler_accept(s.smpl, tok);   // the samplers' history (penalties, grammar) sees it too
    } else {
        tok = llama_sampler_sample(s.smpl, ctx_, batch_index);
    }
    if (const char * why = tok == LLAMA_TOKEN_NULL ? llama_sampler_error(s.smpl) : nullptr) {
        // the request's grammar is too ambiguous to follow: this request fails, the others go on
        LOG_WRN("slot %d: %s\n", s.id, why);
        fail(s, 400, std::string("the request's grammar (from 'grammar', 'json_schema', 'response_format' or 'tools'): ") + why);
        return LLAMA_TOKEN_NULL;
    }
    if (tok == LLAMA_TOKEN_NULL && !gp.sampling.grammar.empty()) {
        // the grammar allows no token of this vocabulary here: the reply ends with what it has
        // (a half-written tool call comes back as text), not with an error
        LOG_WRN("slot %d: the grammar allows no token here; the reply ends\n", s.id);
        finish(s, "stop");
        return LLAMA_TOKEN_NULL;
    }
    if (tok == LLAMA_TOKEN_NULL) {
        fail(s, 500, "sampling failed");
        return LLAMA_TOKEN_NULL;
    }
    s.n_decoded++;
    if (llama_vocab_is_eog(vocab_, tok) && !gp.sampling.ignore_eos) {
        finish(s, "stop");
        return LLAMA_TOKEN_NULL;
    }
    const bool keep_special =
        gp.render_special || std::find(gp.preserved.begin(), gp.preserved.end(), tok) != gp.preserved.end();
    const std::string piece = common_token_to_piece(vocab_, tok, keep_special);
    if (gp.logprobs && gp.post_sampling_probs) {
        s.reports.push_back(post_sampling_report(s.smpl, tok, piece, gp.top_logprobs));
    } else if (gp.logprobs) {
        token_report rep;
        rep.chosen = { tok, piece, logits[tok] - log_norm };
        const int32_t k = std::min(gp.top_logprobs, n_vocab);
        if (k > 0) {
            std::vector<llama_token> ids(n_vocab);
            std::iota(ids.begin(), ids.end(), 0);
            std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                              [&](llama_token a, llama_token b) { return logits[a] > logits[b]; });
            for (int32_t i = 0; i < k; ++i) {
                rep.top.push_back({ ids[i], common_token_to_piece(vocab_, ids[i], false), logits[ids[i]] - log_norm });
            }
        }
        s.reports.push_back(std::move(rep));
    }
    s.thinking.feed(piece);
    const std::string text = s.stops.feed(piece);
    // a text delta (with the token reports so far, unless the task ends here and its final event takes them)
    auto send_text = [&](bool with_reports) {
        task_event ev;
        ev.text = text;
        if (with_reports) {
            ev.tokens = std::move(s.reports);
            s.reports.clear();
        }
        if (gp.timings_per_token) {
            ev.has_timings = true;
            ev.summary = summary_so_far(s);
        }
        s.task->channel->push(std::move(ev));
    };
    if (s.stops.stopped()) {
        if (!text.empty()) send_text(false);
        finish(s, "stop");
        return LLAMA_TOKEN_NULL;
    }
    const bool limit = gp.n_predict >= 0 && s.n_decoded >= gp.n_predict;
    // the sampled token goes into the cache next step: it needs a free cell
    const bool ctx_full = !limit && (int32_t) s.cache.size() >= params_.n_ctx_slot && !shift_context(s);
    if (limit || ctx_full) {
        if (!text.empty()) send_text(false);
        finish(s, "length");
        return LLAMA_TOKEN_NULL;
    }
    if (!text.empty() || !s.reports.empty()) send_text(true);
    return tok;
}

int32_t slot_engine::handle_output(slot & s, int32_t batch_index) {
    // the drafted tokens were decoded after the slot's token, at the next batch rows: each is
    // kept while it is the token the model samples there, so the output is the one without drafts
    const size_t n_draft = s.draft.size();
    const int32_t n_before = s.n_decoded;
    size_t i = 0;
    llama_token tok;
    for (;; ++i) {
        tok = emit_token(s, batch_index + (int32_t) i);   // null: the task ended
        if (tok == LLAMA_TOKEN_NULL || i >= n_draft || tok != s.draft[i]) break;
        s.n_draft_accepted++;
        n_accepted_step_++;
    }
    // the KV rows of the drafts after the last kept one leave the cache
    const size_t n_rejected = n_draft - std::min(i, n_draft);
    if (n_rejected > 0 && s.cache.size() >= n_rejected) {
        s.cache.resize(s.cache.size() - n_rejected);
        llama_memory_seq_rm(ctx_, s.id, (llama_pos) s.cache.size(), -1);
    }
    s.draft.clear();
    s.next_token = tok;
    return s.n_decoded - n_before;
}

bool slot_engine::shift_context(slot & s) {
    if (!params_.context_shift) return false;
    if (!can_shift_) {
        LOG_INF("slot %d: the context is full and cannot shift (%s); stopping\n", s.id, no_shift_reason_.c_str());
        return false;
    }
    const int32_t n_keep = common_context_shift_keep(vocab_, s.task->prompt, s.task->params.n_keep);
    const int32_t n_past = (int32_t) s.cache.size();
    const int32_t n_dropped = common_context_shift(ctx_, s.id, n_past, n_keep);
    if (n_dropped == 0) {
        LOG_INF("slot %d: the context is full and the %d tokens kept (n_keep) leave nothing to drop; stopping\n", s.id, n_keep);
        return false;
    }
    s.cache.erase(s.cache.begin() + n_keep, s.cache.begin() + n_keep + n_dropped);
    s.n_shifted += n_dropped;
    LOG_DBG("slot %d: context shift: kept %d, dropped %d, %zu left\n", s.id, n_keep, n_dropped, s.cache.size());
    std::lock_guard<std::mutex> lock(mutex_);
    metrics_.n_context_shifts++;
    return true;
}

int32_t slot_engine::decode(const llama_batch & batch) {
    if (fail_token_ != LLAMA_TOKEN_NULL && std::find(batch.token, batch.token + batch.n_tokens, fail_token_) != batch.token + batch.n_tokens) {
        return -1;
    }
    return llama_decode(ctx_, batch);
}

int32_t slot_engine::decode_slots_alone() {
    int32_t n_sampled = 0;
    for (auto & sp : slots_) {
        slot & s = *sp;
        if (!s.task || s.batch_count == 0) continue;
        const int32_t first = s.batch_first;
        llama_batch part = batch_;
        part.n_tokens = s.batch_count;
        part.token += first;
        part.pos += first;
        part.n_seq_id += first;
        part.seq_id += first;
        part.logits += first;
        const int32_t rc = decode(part);
        if (rc != 0) {
            const char * why = llama_last_error();
            const std::string msg = "llama_decode failed (code " + std::to_string(rc) + ")" +
                                    (rc > 0 ? std::string(": no room in the KV cache") : why && *why ? std::string(": ") + why : std::string());
            LOG_ERR("slot %d: %s\n", s.id, msg.c_str());
            fail(s, 500, msg);
            continue;
        }
        if (s.out_index >= 0) {
            n_sampled += handle_output(s, s.out_index - first);
        }
    }
    return n_sampled;
}

bool slot_engine::step() {
    // clients that left: their slots are free from this step on
    for (auto & sp : slots_) {
        if (sp->task && sp->task->cancelled.load()) {
            LOG_INF("slot %d: task %lld cancelled (client disconnected)\n", sp->id, (long long) sp->task->id);
            release(*sp);
        }
    }
    run_slot_actions();
    assign_waiting_tasks();

    // Generating slots first (one token each), then prompt chunks in the room left.
    int32_t n = 0;
    auto add = [&](slot & s, llama_token t, bool want_logits) {
        if (s.batch_count == 0) s.batch_first = n;
        s.batch_count++;
        batch_.token[n] = t;
        batch_.pos[n] = (llama_pos) s.cache.size();
        batch_.n_seq_id[n] = 1;
        batch_.seq_id[n][0] = s.id;
        batch_.logits[n] = want_logits ? 1 : 0;
        if (want_logits && s.out_index < 0) s.out_index = n;
        s.cache.push_back(t);
        ++n;
    };
    bool any_prompt = false, any_gen = false;
    int32_t n_prompt_tokens = 0, n_sampled = 0;
    int32_t n_busy = 0, n_drafted_step = 0;
    int32_t n_gen_left = 0;   // generating slots not yet in the batch
    for (auto & sp : slots_) n_gen_left += sp->task && sp->next_token != LLAMA_TOKEN_NULL;
    for (auto & sp : slots_) {
        slot & s = *sp;
        s.out_index = -1;
        s.batch_count = 0;
        if (!s.task) continue;
        ++n_busy;
        if (s.next_token != LLAMA_TOKEN_NULL) {
            const std::vector<llama_token> & history = s.cache;
            if (drafter_ && !recurrent_) {
                // room for the drafts: in the batch (one row kept for every other generating
                // slot), in the slot's context, and within the task's token limit
                const generation_params & gp = s.task->params;
                int32_t room = std::min(params_.n_batch - n - n_gen_left, params_.n_ctx_slot - (int32_t) s.cache.size() - 2);
                if (gp.n_predict >= 0) room = std::min(room, gp.n_predict - s.n_decoded - 1);
                drafter_->draft(s.id, history, s.next_token, room, s.draft);
            }
            add(s, s.next_token, true);
            for (llama_token d : s.draft) add(s, d, true);
            s.n_drafted += (int32_t) s.draft.size();
            n_drafted_step += (int32_t) s.draft.size();
            s.next_token = LLAMA_TOKEN_NULL;
            any_gen = true;
            --n_gen_left;
        }
    }
    for (auto & sp : slots_) {
        slot & s = *sp;
        if (!s.task) continue;
        const auto & prompt = s.task->prompt;
        int32_t fed_now = 0;
        s.prompt_fed_step = 0;
        while (s.n_prompt_fed < prompt.size() && n < params_.n_batch) {
            const bool last = s.n_prompt_fed + 1 == prompt.size();
            // with a recurrent state the last prompt token gets a step of its own: the piece before
            // it leaves a checkpoint, from which the same prompt can later resume
            if (last && recurrent_ && fed_now > 0) break;
            ++fed_now;
            ++s.prompt_fed_step;
            add(s, prompt[s.n_prompt_fed], last);
            s.n_prompt_fed++;
            n_prompt_tokens++;
            any_prompt = true;
        }
    }
    if (n == 0) {
        std::lock_guard<std::mutex> lock(mutex_);
        metrics_.n_processing = 0;
        snapshot_status();
        return false;
    }

    batch_.n_tokens = n;
    const double t0 = monotonic_ms();
    const int32_t rc = decode(batch_);
    const double dt = monotonic_ms() - t0;
    if (rc != 0) {
        // llama_decode left the cache as it was: decode each slot's tokens on their own, so a
        // request that cannot be decoded ends with an error and the others go on
        LOG_WRN("llama_decode failed for a batch of %d slots (code %d); decoding them one by one\n", n_busy, rc);
        n_sampled += decode_slots_alone();
    } else {
        // progress first: the step that reads the end of a prompt also samples its first token
        for (auto & sp : slots_) {
            if (sp->task && sp->prompt_fed_step > 0 && sp->task->params.return_progress) send_progress(*sp);
        }
        for (auto & sp : slots_) {
            slot & s = *sp;
            if (s.task && s.out_index >= 0) {
                n_sampled += handle_output(s, s.out_index);
            }
        }
    }
    {
        std::lock_guard<std::mutex> lock(mutex_);
        metrics_.n_decode_total++;
        metrics_.n_busy_slots_sum += (uint64_t) n_busy;
        metrics_.n_prompt_tokens_total += (uint64_t) n_prompt_tokens;
        metrics_.n_predicted_total += (uint64_t) n_sampled;
        metrics_.n_drafted_total += (uint64_t) n_drafted_step;
        metrics_.n_draft_accepted_total += (uint64_t) n_accepted_step_;
        n_accepted_step_ = 0;
        // a mixed step counts for both: its tokens of each kind waited for the whole step
        if (any_prompt) metrics_.t_prompt_ms_total += dt;
        if (any_gen) metrics_.t_predict_ms_total += dt;
        int32_t busy_now = 0;
        for (auto & sp : slots_) busy_now += sp->task ? 1 : 0;
        metrics_.n_processing = busy_now;
        metrics_.kv_cells_used = llama_memory_n_used(ctx_);
        snapshot_status();
    }
    return true;
}
