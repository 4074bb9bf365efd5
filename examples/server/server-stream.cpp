#include "server-stream.h"

#include <algorithm>

// ---- stop strings --------------------------------------------------------------------------------

stop_matcher::stop_matcher(std::vector<std::string> stops) {
    for (auto & s : stops) {
        if (!s.empty()) stops_.push_back(std::move(s));
    }
}

std::string stop_matcher::feed(const std::string & piece) {
    if (stopped_) return {};
    pending_ += piece;

    // The earliest complete stop string wins; text after it is never sent.
    size_t best = std::string::npos;
    for (const auto & s : stops_) {
        const size_t at = pending_.find(s);
        if (at != std::string::npos && at < best) {
            best = at;
            stop_word_ = s;
        }
    }
    if (best != std::string::npos) {
        stopped_ = true;
        std::string out = pending_.substr(0, best);
        pending_.clear();
        return out;
    }

    // Hold back the longest tail that a later piece could complete into a stop string. Any stop
    // string that will appear therefore starts inside pending_, so the search above finds it.
    size_t hold = 0;
    for (const auto & s : stops_) {
        const size_t max_len = std::min(s.size() - 1, pending_.size());
        for (size_t len = max_len; len > hold; --len) {
            if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
                hold = len;
                break;
            }
        }
    }
    size_t send = pending_.size() - hold;
    send = utf8_complete_prefix(pending_.substr(0, send));
    std::string out = pending_.substr(0, send);
    pending_.erase(0, send);
    return out;
}

std::string stop_matcher::flush() {
    std::string out;
    out.swap(pending_);
    return out;
}

// ---- reasoning -----------------------------------------------------------------------------------

namespace {

// the markup's tags: open, close, and (harmony) what starts a message header and ends it
struct markup_tags {
    std::string open, close, header, header_end;
};

const markup_tags & tags_of(reasoning_markup m) {
    static const markup_tags think = { "<think>", "</think>", "", "" };
    static const markup_tags seed = { "<seed:think>", "</seed:think>", "", "" };
    static const markup_tags command_r = { "<|START_THINKING|>", "<|END_THINKING|>", "", "" };
    static const markup_tags mistral = { "[THINK]", "[/THINK]", "", "" };
    static const markup_tags harmony = { "<|channel|>analysis<|message|>", "<|end|>", "<|", "<|message|>" };
    switch (m) {
        case reasoning_markup::think: return think;
        case reasoning_markup::seed: return seed;
        case reasoning_markup::command_r: return command_r;
        case reasoning_markup::mistral: return mistral;
        case reasoning_markup::harmony: return harmony;
    }
    return think;
}

bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// Length of the longest suffix of s that is a proper prefix of tag.
size_t partial_tag_suffix(const std::string & s, const std::string & tag) {
    for (size_t len = std::min(tag.size() - 1, s.size()); len > 0; --len) {
        if (s.compare(s.size() - len, len, tag, 0, len) == 0) return len;
    }
    return 0;
}

} // namespace

const std::string & reasoning_open_tag(reasoning_markup markup) { return tags_of(markup).open; }
const std::string & reasoning_close_tag(reasoning_markup markup) { return tags_of(markup).close; }

reasoning_markup reasoning_markup_from_template(const std::string & src) {
    auto has = [&](const char * s) { return src.find(s) != std::string::npos; };
    // the more specific tags first: a template may also mention <think> in its instructions
    if (has("<|channel|>")) return reasoning_markup::harmony;
    if (has("<seed:think>")) return reasoning_markup::seed;
    if (has("<|START_THINKING|>")) return reasoning_markup::command_r;
    if (has("[THINK]") && has("[/THINK]")) return reasoning_markup::mistral;
    return reasoning_markup::think;
}

reasoning_splitter::reasoning_splitter(bool enabled, bool starts_inside, reasoning_markup markup) : markup_(markup) {
    if (!enabled) st_ = state::content;
    else if (starts_inside) {
        st_ = state::reasoning;
        skip_ws_ = true;
    } else {
        st_ = state::start;
    }
}

reasoning_splitter::delta reasoning_splitter::feed(const std::string & text) {
    delta out;
    held_ += text;
    step(out, false);
    return out;
}

reasoning_splitter::delta reasoning_splitter::flush() {
    delta out;
    step(out, true);
    return out;
}

void reasoning_splitter::step(delta & out, bool final) {
    const markup_tags & tags = tags_of(markup_);
    const std::string & k_open = tags.open;
    const std::string & k_close = tags.close;
    for (;;) {
        switch (st_) {
            case state::start: {
                // Only a block at the very start (after whitespace) is reasoning.
                size_t i = 0;
                while (i < held_.size() && is_ws(held_[i])) ++i;
                const std::string rest = held_.substr(i);
                if (rest.compare(0, k_open.size(), k_open) == 0 && rest.size() >= k_open.size()) {
                    held_.erase(0, i + k_open.size());
                    st_ = state::reasoning;
                    skip_ws_ = true;
                    continue;
                }
                const bool may_become_tag = k_open.compare(0, rest.size(), rest) == 0;   // rest is a prefix of the tag
                if (may_become_tag && !final) return;                                      // wait for more
                // harmony: a reply that starts with another channel's header (final, commentary)
                const std::string & h = tags.header;
                const bool header = !h.empty() && rest.size() >= h.size() && rest.compare(0, h.size(), h) == 0;
                if (!h.empty() && !final && rest.size() < h.size() && h.compare(0, rest.size(), rest) == 0) return;
                if (header) held_.erase(0, i);
                st_ = header ? state::skip_header : state::content;
                continue;
            }
            case state::reasoning: {
                if (skip_ws_) {
                    size_t i = 0;
                    while (i < held_.size() && is_ws(held_[i])) ++i;
                    held_.erase(0, i);
                    if (held_.empty() && !final) return;
                    skip_ws_ = false;
                }
                const size_t at = held_.find(k_close);
                if (at != std::string::npos) {
                    out.reasoning += held_.substr(0, at);
                    held_.erase(0, at + k_close.size());
                    st_ = tags.header_end.empty() ? state::skip_ws_after : state::skip_header;
                    continue;
                }
                size_t keep = final ? 0 : partial_tag_suffix(held_, k_close);
                size_t send = held_.size() - keep;
                if (!final) send = utf8_complete_prefix(held_.substr(0, send));
                out.reasoning += held_.substr(0, send);
                held_.erase(0, send);
                return;
            }
            case state::skip_header: {
                // harmony: drop "<|start|>assistant<|channel|>final<|message|>" (whatever the
                // channel), the answer follows it
                const size_t at = held_.find(tags.header_end);
                if (at == std::string::npos) {
                    if (final) held_.clear();
                    return;
                }
                // a message to a tool is a call: its header names the function
                if (held_.find(" to=") < at) {
                    st_ = state::content;
                    continue;
                }
                held_.erase(0, at + tags.header_end.size());
                st_ = state::content;
                continue;
            }
            case state::skip_ws_after: {
                size_t i = 0;
                while (i < held_.size() && is_ws(held_[i])) ++i;
                held_.erase(0, i);
                if (held_.empty()) return;
                st_ = state::content;
                continue;
            }
            case state::content:
                out.content += held_;
                held_.clear();
                return;
        }
    }
}

// ---- reasoning budget ------------------------------------------------------------------------------

reasoning_budget::reasoning_budget(int32_t budget, std::string open, std::string close, bool starts_inside)
    : budget_(budget), open_(std::move(open)), close_(std::move(close)) {
    if (budget_ < 0 || close_.empty()) st_ = state::over;
    else st_ = starts_inside ? state::inside : state::maybe_at_start;
}

void reasoning_budget::feed(const std::string & piece) {
    if (st_ == state::over) return;
    held_ += piece;
    if (st_ == state::maybe_at_start) {
        // only a block at the very start (after whitespace) is the reasoning
        size_t i = 0;
        while (i < held_.size() && is_ws(held_[i])) ++i;
        const size_t rest = held_.size() - i;
        if (rest >= open_.size() && held_.compare(i, open_.size(), open_) == 0) {
            held_.erase(0, i + open_.size());
            st_ = state::inside;   // the tokens after the opening tag count
            n_inside_ = 0;
            if (held_.empty()) return;
        } else {
            if (open_.compare(0, rest, held_, i, rest) != 0) {
                st_ = state::over;
                held_.clear();
            }
            return;
        }
    } else {
        ++n_inside_;
    }
    const size_t at = held_.find(close_);
    if (at != std::string::npos) {
        st_ = state::over;
        held_.clear();
        return;
    }
    // keep only what may be the start of the close tag
    const size_t keep = partial_tag_suffix(held_, close_);
    held_.erase(0, held_.size() - keep);
}

std::string reasoning_forced_close(const kiln::chat_template * tmpl, reasoning_markup markup) {
    const std::string & close = reasoning_close_tag(markup);
    if (tmpl) {
        // an assistant turn with reasoning, as the template writes it into a prompt
        const json messages = json::array({ { { "role", "user" }, { "content", "Q" } },
                                            { { "role", "assistant" }, { "reasoning_content", "kiln-reasoning" },
                                              { "content", "kiln-answer" } } });
        try {
            const std::string text = tmpl->apply(messages, nullptr, false, json{ { "enable_thinking", true } });
            const size_t r = text.find("kiln-reasoning"), c = r == std::string::npos ? r : text.find(close, r);
            const size_t a = c == std::string::npos ? c : text.find("kiln-answer", c);
            if (a != std::string::npos && a - c <= close.size() + 64) return text.substr(c, a - c);
        } catch (const std::exception &) {
            // a template that refuses such a turn: the markup's own separator below
        }
    }
    if (markup == reasoning_markup::harmony) return close + "<|start|>assistant<|channel|>final<|message|>";
    return close + "\n\n";
}

// ---- SSE -----------------------------------------------------------------------------------------

std::string sse_event(const json & data) { return "data: " + dump_json(data) + "\n\n"; }

std::string sse_done() { return "data: [DONE]\n\n"; }

std::string sse_named_event(const std::string & name, const json & data) {
    return "event: " + name + "\ndata: " + dump_json(data) + "\n\n";
}

std::string sse_error(int status, const std::string & message) {
    // as OpenAI does: the openai client libraries raise an APIError for a data event with "error"
    return sse_event(make_error_json(status, message));
}
