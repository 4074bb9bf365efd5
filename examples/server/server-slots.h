// The generation engine: N slots share one llama_context (each its own sequence id and a
// 1/N share of the context), a bounded queue of waiting tasks, and one thread that runs the
// decode loop. Every step puts the next token of each generating slot and chunks of the
// prompts being read into one llama_batch (continuous batching: a task that arrives joins at the
// next step), decodes it, samples each slot's next token and hands text deltas to the task's
// channel, which the HTTP thread of the request reads from.
#pragma once

#include "common.h"
#include "speculative.h"
#include "server-stream.h"
#include "server-utils.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

// What a request asks of the generation (parsed from the request by server-oai).
struct generation_params {
    common_params_sampling sampling;
    int32_t n_predict = -1;            // -1: until end of generation (or the slot context is full, without context shift)
    int32_t n_keep = 0;                // prompt tokens a context shift keeps (-1: the whole prompt)
    int32_t id_slot = -1;              // the slot to run on (-1: the one whose cache matches best)
    bool    cache_prompt = true;       // reuse what the slot's cache holds of the prompt
    std::vector<std::string> stop;
    bool    logprobs = false;          // report the chosen tokens' log-probabilities
    int32_t top_logprobs = 0;          // ... and this many alternatives each
    bool    post_sampling_probs = false;   // ... from the samplers' final distribution, not the model's
    bool    render_special = false;    // control tokens' text is part of the reply (harmony's channels)
    std::vector<llama_token> preserved;   // special tokens whose text is output (tool-call markers)
    // --reasoning-budget N / "thinking_budget_tokens": once N tokens have been generated inside
    // the reply's leading reasoning block (between these tags; from the start when the prompt
    // opened it), the slot writes reasoning_forced itself: the close tag and what the chat
    // template puts after it, and generation goes on with the answer. -1: no budget.
    int32_t reasoning_budget = -1;
    std::string reasoning_open, reasoning_close, reasoning_forced;
    bool reasoning_starts_inside = false;
    bool    timings_per_token = false; // streaming: every text event carries the task's timings so far
    bool    return_progress = false;   // streaming: a progress event after each step that reads prompt tokens
};

struct token_logprob {
    llama_token id;
    std::string piece;
    float logprob;
};

struct token_report {
    token_logprob chosen;
    std::vector<token_logprob> top;
};

// Why and how a task ended, with its counts and timings.
struct task_summary {
    std::string finish_reason;         // "stop" or "length"
    bool stopped_eos = false, stopped_word = false, stopped_limit = false;
    std::string stopping_word;
    int32_t n_prompt = 0;              // prompt tokens
    int32_t n_cached = 0;              // of those, reused from the slot's cache
    int32_t n_predicted = 0;
    int32_t n_shifted = 0;             // tokens dropped by context shifts
    int32_t n_drafted = 0;             // speculative decoding: tokens drafted
    int32_t n_draft_accepted = 0;      // ... and kept
    double t_prompt_ms = 0, t_predict_ms = 0;
    int32_t slot_id = -1;
};

// How far a task has read its prompt (llama.cpp's "prompt_progress").
struct prompt_progress {
    int32_t total = 0;                 // prompt tokens
    int32_t cache = 0;                 // of those, reused from the slot's cache
    int32_t processed = 0;             // of those, in the cache now (the reused ones included)
    double time_ms = 0;                // since the task started
};

// One message from the decode loop to the request: a text delta (maybe empty, with the token
// reports of the tokens decoded since the last one), prompt progress, the end, or an error.
struct task_event {
    std::string text;
    std::vector<token_report> tokens;
    bool is_final = false;
    bool has_timings = false;          // summary holds the counts and timings so far (timings_per_token)
    task_summary summary;              // when is_final or has_timings
    bool is_progress = false;          // only progress: no text, no tokens (return_progress)
    prompt_progress progress;
    int error_status = 0;              // non-zero: the task failed with this status and error
    std::string error;
};

// The queue between the decode loop (producer) and the HTTP thread (consumer) of one task.
class task_channel {
public:
    void push(task_event ev);
    // Waits up to timeout_ms for events; appends them to out. False on timeout with none.
    bool wait_pop(std::vector<task_event> & out, int timeout_ms);

private:
    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<task_event> events_;
};

struct server_task {
    int64_t id = 0;
    std::vector<llama_token> prompt;
    generation_params params;
    std::shared_ptr<task_channel> channel = std::make_shared<task_channel>();
    std::atomic<bool> cancelled{ false };   // the client went away: free the slot at the next step
    double t_queued_ms = 0;
};
using task_ptr = std::shared_ptr<server_task>;

// Counters for /metrics and /slots.
struct engine_metrics {
    uint64_t n_prompt_tokens_total = 0;     // prompt tokens evaluated (cached prefixes excluded)
    uint64_t n_predicted_total = 0;
    double   t_prompt_ms_total = 0;         // wall time of steps that read prompt tokens
    double   t_predict_ms_total = 0;        // ... and of steps that generated
    uint64_t n_decode_total = 0;            // llama_decode calls
    uint64_t n_context_shifts = 0;
    uint64_t n_drafted_total = 0;           // speculative decoding: tokens drafted
    uint64_t n_draft_accepted_total = 0;    // ... and kept
    uint64_t n_requests_total = 0;          // tasks accepted
    uint64_t n_requests_rejected = 0;       // queue full
    uint64_t n_busy_slots_sum = 0;          // summed over decode calls: average batch occupancy
    int32_t  n_processing = 0, n_deferred = 0;
    int32_t  kv_cells_used = 0, kv_cells_total = 0;
};

struct engine_params {
    int32_t n_slots = 1;
    int32_t n_ctx_slot = 0;    // context per slot: n_ctx / n_slots
    int32_t n_batch = 512;     // most tokens per step
    int32_t queue_capacity = 64;
    bool context_shift = true;   // a full slot drops old tokens and goes on (when the memory can shift)
    int32_t n_cache_reuse = 0;   // --cache-reuse: shortest chunk of the cache moved to where the prompt has it (0: off)
};

// /slots/{id}?action=save|restore|erase, run by the decode loop while the slot is idle.
enum class slot_action_kind { save, restore, erase };
struct slot_action_result {
    int status = 200;          // else the HTTP status of the error
    std::string error;
    size_t n_tokens = 0;       // tokens saved, restored or erased
    size_t n_bytes = 0;        // bytes written or read
    double ms = 0;
};

class slot_engine {
public:
    slot_engine(llama_context * ctx, engine_params params);
    // Speculative decoding: drafts from d (owned by the caller, used by the loop thread only).
    void set_drafter(drafter * d) { drafter_ = d; }
    ~slot_engine();

    void start();
    void stop();

    // Queue a task. False when the queue is full (the caller answers 503).
    bool submit(const task_ptr & task);
    // Wake the loop (a task was cancelled while waiting).
    void notify();

    int32_t n_ctx_slot() const { return params_.n_ctx_slot; }
    int32_t n_slots() const { return params_.n_slots; }
    engine_metrics metrics() const;
    json slots_json() const;
    // Waits until the loop has run the action on slot id (once it is idle); path is the file.
    slot_action_result slot_action(int32_t id, slot_action_kind kind, const std::string & path);

private:
    struct slot;
    void loop();
    bool step();   // one decode step; false when idle
    int32_t decode_slots_alone();   // after a failed step: each slot's tokens alone; returns tokens sampled
    int32_t decode(const llama_batch & batch);   // llama_decode, or the failure a test asked for
    void assign_waiting_tasks();
    void begin_task(slot & s, task_ptr task);
    // Samples the slot's token (and checks its drafts); returns the tokens generated.
    int32_t handle_output(slot & s, int32_t batch_index);
    llama_token emit_token(slot & s, int32_t batch_index);   // one sampled token to the task; null: it ended
    token_report post_sampling_report(llama_sampler * smpl, llama_token tok, const std::string & piece, int32_t k) const;
    void finish(slot & s, const std::string & reason);
    task_summary summary_so_far(const slot & s) const;
    void send_progress(slot & s);   // return_progress: how much of its prompt the slot has read   // counts and timings of the slot's task until now
    void fail(slot & s, int status, const std::string & message);
    void release(slot & s);
    size_t reuse_cache_chunks(slot & s, const std::vector<llama_token> & prompt, size_t keep);   // --cache-reuse
    struct pending_action;
    void run_slot_actions();
    slot_action_result run_slot_action(slot & s, const pending_action & a);
    bool shift_context(slot & s);   // make room in a full slot; false: it cannot, the task ends
    void snapshot_status();

    llama_context * ctx_;
    const llama_vocab * vocab_;
    engine_params params_;
    bool recurrent_;                 // the model keeps a recurrent state (prefix reuse via checkpoints)
    bool can_shift_;                 // llama_memory_can_shift
    std::string no_shift_reason_;
    std::vector<std::unique_ptr<slot>> slots_;
    llama_batch batch_{};
    // KILN_TEST_FAIL_DECODE_TOKEN=<id> in the environment (tests only): a decode of a batch that
    // holds this token fails, so a test can show one request failing while the others go on.
    llama_token fail_token_ = LLAMA_TOKEN_NULL;

    mutable std::mutex mutex_;       // queue_, metrics_, slot status for readers
    std::condition_variable cv_;
    std::deque<task_ptr> queue_;
    std::deque<std::shared_ptr<pending_action>> actions_;   // slot actions waiting for their slot
    engine_metrics metrics_;
    std::vector<json> status_;       // per slot, for /slots
    bool running_ = false;
    std::thread thread_;
    std::vector<float> probs_scratch_;
    drafter * drafter_ = nullptr;
    int32_t n_accepted_step_ = 0;    // drafted tokens kept in this step
};
