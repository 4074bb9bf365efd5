// The vocabulary and chat template of the synthetic models. The merges are learned here, by
// byte-pair encoding over a built-in list of common English words weighted by their rank, so the
// vocabulary is the same on every machine without shipping a tokenizer file, and real text
// tokenizes into word-sized pieces (as with a trained GPT-2-style vocabulary, if smaller).
#include "synth.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

// Most frequent English words first (the rank sets the weight of each word).
const char * const k_words =
    "the of and to in a is that for it as was with be by on not he i this are or his from at which "
    "but have an they you were her she there been one all we their has would when if so no will "
    "more can what its who about out up also into them said time only some other than two could "
    "new first then these him may after any like people over year years did made my most such "
    "our between very through should because where just each those how well world while many "
    "before same under being both much last three state own during still life back since used "
    "war city work part later long school known found called government number where great "
    "between another however second around team game home came end following day united city "
    "against season down old left music high film began name series several national four "
    "until because early including best public group although along five within become took "
    "american north south west east house even though three album song church river place "
    "history system company book family land army area water power left small large little "
    "right good make way take see know get go come think look want give use find tell ask seem "
    "feel try leave call keep let begin help show hear play run move live believe hold bring "
    "write provide sit stand lose pay meet include continue set learn change lead understand "
    "watch follow stop create speak read allow add spend grow open walk win offer remember love "
    "consider appear buy wait serve die send expect build stay fall cut reach kill remain "
    "suggest raise pass sell require report decide pull story story king queen war battle "
    "station road line building center century field order point form hand head side week "
    "month night morning case fact group problem question service member law car job word "
    "business issue kind money student country program information mother father child "
    "children woman women man men friend girl boy president minister county population "
    "released released released production character episode published received written "
    "production described according considered located increased division british english "
    "french german australian york london storm tropical hurricane species design record "
    "released single league club player players football match final match again once "
    "never always often sometimes already together without within among toward upon "
    "because therefore however although whether unless while though rather quite "
    "once there here where every something nothing anything everything someone everyone "
    "little small large big long short young old new high low early late next last few "
    "important different possible able free full special clear certain whole real sure "
    "ing ed er ly tion ment ness able ers ies est";

// GPT-2's byte-to-character table: printable bytes stand for themselves, the others are moved
// to code points 256 and up, so every byte sequence is a string of visible characters.
std::vector<std::string> byte_symbols() {
    std::vector<int> order;
    for (int b = 33; b <= 126; ++b) order.push_back(b);
    for (int b = 161; b <= 172; ++b) order.push_back(b);
    for (int b = 174; b <= 255; ++b) order.push_back(b);
    std::vector<int> code(256, -1);
    for (int b : order) code[b] = b;
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
        if (code[b] < 0) {
            code[b] = 256 + extra++;
            order.push_back(b);
        }
    }
    // symbols in vocabulary order: id i is the byte order[i]
    std::vector<std::string> out;
    for (int b : order) {
        const int cp = code[b];
        std::string s;
        if (cp < 0x80) {
            s += (char) cp;
        } else {
            s += (char) (0xC0 | (cp >> 6));
            s += (char) (0x80 | (cp & 0x3F));
        }
        out.push_back(s);
    }
    return out;
}

} // namespace

kiln_synth_vocab kiln_synth_build_vocab(int32_t n_vocab, int32_t first_special) {
    kiln_synth_vocab v;
    const std::vector<std::string> bytes = byte_symbols();
    // byte value -> token id
    std::vector<int32_t> byte_id(256);
    {
        std::vector<int> order;
        for (int b = 33; b <= 126; ++b) order.push_back(b);
        for (int b = 161; b <= 172; ++b) order.push_back(b);
        for (int b = 174; b <= 255; ++b) order.push_back(b);
        std::vector<bool> seen(256, false);
        for (int b : order) seen[b] = true;
        for (int b = 0; b < 256; ++b) {
            if (!seen[b]) order.push_back(b);
        }
        for (int i = 0; i < 256; ++i) byte_id[order[i]] = i;
    }
    for (const std::string & s : bytes) {
        v.tokens.push_back(s);
        v.types.push_back(1);
    }

    // Training words: " word" (the usual form inside a sentence), " Word" and "word", with
    // weights falling with the rank of the word in the list.
    struct word {
        std::vector<int32_t> sym;
        int64_t weight;
    };
    std::vector<word> words;
    {
        std::vector<std::string> list;
        std::string cur;
        for (const char * p = k_words;; ++p) {
            if (*p == ' ' || *p == 0) {
                if (!cur.empty() && std::find(list.begin(), list.end(), cur) == list.end()) list.push_back(cur);
                cur.clear();
                if (*p == 0) break;
            } else {
                cur += *p;
            }
        }
        auto add = [&](const std::string & text, int64_t weight) {
            word w;
            for (unsigned char c : text) w.sym.push_back(byte_id[c]);
            w.weight = weight;
            if (w.sym.size() > 1 && weight > 0) words.push_back(std::move(w));
        };
        for (size_t r = 0; r < list.size(); ++r) {
            const int64_t weight = 100000 / (int64_t) (r + 10);
            std::string cap = list[r];
            cap[0] = (char) (cap[0] - 'a' + 'A');
            add(" " + list[r], weight);
            add(" " + cap, weight / 4);
            add(list[r], weight / 8);
            add(cap, weight / 8);
        }
        // whitespace and punctuation runs that the pre-tokenizer keeps together
        add("\n\n", 4000);
        add("  ", 2000);
        add("    ", 1000);
        add(" =", 1000);
        add(" @", 800);
        add("'s", 1500);
        add(" (", 1500);
        add(").", 500);
        add(".\n", 1000);
    }

    const int32_t max_merges = std::max(0, first_special - 256);
    while ((int32_t) v.merges.size() < max_merges) {
        std::unordered_map<uint64_t, int64_t> counts;
        for (const word & w : words) {
            for (size_t i = 0; i + 1 < w.sym.size(); ++i) {
                counts[(uint64_t) w.sym[i] << 32 | (uint32_t) w.sym[i + 1]] += w.weight;
            }
        }
        if (counts.empty()) break;
        uint64_t best = 0;
        int64_t best_count = -1;
        for (const auto & [key, count] : counts) {
            // ties go to the smaller pair of ids so the result never depends on hash order
            if (count > best_count || (count == best_count && key < best)) {
                best = key;
                best_count = count;
            }
        }
        const int32_t a = (int32_t) (best >> 32), b = (int32_t) (best & 0xffffffffu);
        const int32_t id = (int32_t) v.tokens.size();
        v.merges.push_back(v.tokens[a] + " " + v.tokens[b]);
        v.tokens.push_back(v.tokens[a] + v.tokens[b]);
        v.types.push_back(1);
        for (word & w : words) {
            std::vector<int32_t> out;
            out.reserve(w.sym.size());
            for (size_t i = 0; i < w.sym.size(); ++i) {
                if (i + 1 < w.sym.size() && w.sym[i] == a && w.sym[i + 1] == b) {
                    out.push_back(id);
                    ++i;
                } else {
                    out.push_back(w.sym[i]);
                }
            }
            w.sym = std::move(out);
        }
        words.erase(std::remove_if(words.begin(), words.end(), [](const word & w) { return w.sym.size() < 2; }),
                    words.end());
    }

    auto pad_to = [&](int32_t n) {
        while ((int32_t) v.tokens.size() < n) {
            v.tokens.push_back("[PAD" + std::to_string(v.tokens.size()) + "]");
            v.types.push_back(5);
        }
    };
    pad_to(first_special);
    // control tokens as Qwen3 has them; the tags are user-defined (printed as text)
    const std::pair<const char *, int32_t> specials[] = {
        { "<|endoftext|>", 3 }, { "<|im_start|>", 3 }, { "<|im_end|>", 3 }, { "<think>", 4 },
        { "</think>", 4 },      { "<tool_call>", 4 },  { "</tool_call>", 4 }, { "<|fim_pad|>", 3 },
    };
    v.id_endoftext = (int32_t) v.tokens.size();
    v.id_im_start  = v.id_endoftext + 1;
    v.id_im_end    = v.id_endoftext + 2;
    for (const auto & [text, type] : specials) {
        v.tokens.push_back(text);
        v.types.push_back(type);
    }
    pad_to(n_vocab);
    return v;
}

const char * kiln_synth_chat_template() {
    // Qwen3's conversation format: ChatML turns, <think> blocks for reasoning, tool calls as JSON
    // inside <tool_call> tags and tool results as user turns with <tool_response> tags.
    return "{%- if tools %}\n"
           "{{- '<|im_start|>system\\n' }}\n"
           "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}\n"
           "{{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
           "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}\n"
           "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}\n"
           "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments "
           "within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\"name\": <function-name>, \"arguments\": "
           "<args-json-object>}\\n</tool_call><|im_end|>\\n' }}\n"
           "{%- elif messages[0].role == 'system' %}\n"
           "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}\n"
           "{%- endif %}\n"
           "{%- for message in messages %}\n"
           "{%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}\n"
           "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}\n"
           "{%- elif message.role == 'assistant' %}\n"
           "{%- set content = message.content if message.content is string else '' %}\n"
           "{%- set reasoning = message.reasoning_content if message.reasoning_content is string else '' %}\n"
           "{%- if not reasoning and '</think>' in content %}\n"
           "{%- set reasoning = content.split('</think>')[0].split('<think>')[-1].strip('\\n') %}\n"
           "{%- set content = content.split('</think>')[-1].lstrip('\\n') %}\n"
           "{%- endif %}\n"
           "{{- '<|im_start|>assistant\\n' }}\n"
           "{%- if reasoning and loop.last %}{{- '<think>\\n' + reasoning + '\\n</think>\\n\\n' }}{%- endif %}\n"
           "{{- content }}\n"
           "{%- if message.tool_calls %}\n"
           "{%- for tool_call in message.tool_calls %}\n"
           "{%- set call = tool_call.function if tool_call.function else tool_call %}\n"
           "{%- if loop.first and content %}{{- '\\n' }}{%- elif not loop.first %}{{- '\\n' }}{%- endif %}\n"
           "{{- '<tool_call>\\n{\"name\": \"' + call.name + '\", \"arguments\": ' }}\n"
           "{%- if call.arguments is string %}{{- call.arguments }}{%- else %}{{- call.arguments | tojson }}{%- endif %}\n"
           "{{- '}\\n</tool_call>' }}\n"
           "{%- endfor %}\n"
           "{%- endif %}\n"
           "{{- '<|im_end|>\\n' }}\n"
           "{%- elif message.role == 'tool' %}\n"
           "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}\n"
           "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}\n"
           "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}\n"
           "{%- endif %}\n"
           "{%- endfor %}\n"
           "{%- if add_generation_prompt %}\n"
           "{{- '<|im_start|>assistant\\n' }}\n"
           "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}\n"
           "{%- endif %}\n";
}
