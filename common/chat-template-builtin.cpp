// Built-in chat templates: the names llama.cpp users pass to --chat-template, each written as a
// Jinja template for Kiln's engine. Each renders the conversation format of the model family the
// name stands for (messages with string content; tool calls need the model's own template). Where
// ../shared/golden/templates.json holds that family's real template, the test renders the golden
// conversations with both (tests/test-chat-templates.cpp).
#include "chat-template.h"

#include <stdexcept>

namespace kiln {

namespace {

struct builtin_template {
    const char * name;
    const char * source;
};

// In every template, C is a message's text: its content, or '' when it is null (an assistant
// message that only calls tools).
#define C "(m.content if m.content is string else '')"

const builtin_template k_builtin_templates[] = {
    { "chatml",
      "{%- for m in messages -%}{{- '<|im_start|>' + m.role + '\\n' + " C " + '<|im_end|>\\n' -}}{%- endfor -%}"
      "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}" },

    // Llama 2 chat: the system prompt opens the first user turn inside <<SYS>> markers; each
    // exchange is its own <s>...</s>.
    { "llama2",
      "{%- set ns = namespace(sys='') -%}"
      "{%- for m in messages -%}{%- if m.role == 'system' -%}{%- set ns.sys = ns.sys + " C " -%}{%- endif -%}{%- endfor -%}"
      "{%- for m in messages -%}"
      "{%- if m.role == 'user' -%}"
      "{%- set text = " C " -%}"
      "{%- if ns.sys -%}{%- set text = '<<SYS>>\\n' + ns.sys + '\\n<</SYS>>\\n\\n' + text -%}{%- set ns.sys = '' -%}{%- endif -%}"
      "{{- bos_token + '[INST] ' + (text | trim) + ' [/INST]' -}}"
      "{%- elif m.role == 'assistant' -%}{{- ' ' + (" C " | trim) + ' ' + eos_token -}}{%- endif -%}"
      "{%- endfor -%}" },

    { "llama3",
      "{%- for m in messages -%}{%- if loop.first -%}{{- bos_token -}}{%- endif -%}"
      "{{- '<|start_header_id|>' + m.role + '<|end_header_id|>\\n\\n' + (" C " | trim) + '<|eot_id|>' -}}{%- endfor -%}"
      "{%- if add_generation_prompt -%}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}{%- endif -%}" },

    { "llama4",
      "{{- bos_token -}}"
      "{%- for m in messages -%}{{- '<|header_start|>' + m.role + '<|header_end|>\\n\\n' + (" C " | trim) + '<|eot|>' -}}{%- endfor -%}"
      "{%- if add_generation_prompt -%}{{- '<|header_start|>assistant<|header_end|>\\n\\n' -}}{%- endif -%}" },

    // Mistral v1 (7B v0.1/v0.2): spaces around [INST], the system prompt before the first user turn.
    { "mistral-v1",
      "{%- set ns = namespace(sys='') -%}"
      "{%- for m in messages -%}{%- if m.role == 'system' -%}{%- set ns.sys = ns.sys + " C " + '\\n\\n' -%}{%- endif -%}{%- endfor -%}"
      "{{- bos_token -}}"
      "{%- for m in messages -%}"
      "{%- if m.role == 'user' -%}{{- ' [INST] ' + ns.sys + " C " + ' [/INST]' -}}{%- set ns.sys = '' -%}"
      "{%- elif m.role == 'assistant' -%}{{- ' ' + " C " + eos_token -}}{%- endif -%}"
      "{%- endfor -%}" },

    // Mistral v3 (7B v0.3, Mixtral 8x22B) and v3-tekken (Nemo): the system prompt goes into the
    // last user turn; tekken drops the spaces.
    { "mistral-v3",
      "{%- set ns = namespace(sys='', last=-1) -%}"
      "{%- for m in messages -%}{%- if m.role == 'system' -%}{%- set ns.sys = ns.sys + " C " + '\\n\\n' -%}"
      "{%- elif m.role == 'user' -%}{%- set ns.last = loop.index0 -%}{%- endif -%}{%- endfor -%}"
      "{{- bos_token -}}"
      "{%- for m in messages -%}"
      "{%- if m.role == 'user' -%}{{- '[INST] ' + (ns.sys if loop.index0 == ns.last else '') + " C " + '[/INST]' -}}"
      "{%- elif m.role == 'assistant' -%}{{- ' ' + " C " + eos_token -}}{%- endif -%}"
      "{%- endfor -%}" },
    { "mistral-v3-tekken",
      "{%- set ns = namespace(sys='', last=-1) -%}"
      "{%- for m in messages -%}{%- if m.role == 'system' -%}{%- set ns.sys = ns.sys + " C " + '\\n\\n' -%}"
      "{%- elif m.role == 'user' -%}{%- set ns.last = loop.index0 -%}{%- endif -%}{%- endfor -%}"
      "{{- bos_token -}}"
      "{%- for m in messages -%}"
      "{%- if m.role == 'user' -%}{{- '[INST]' + (ns.sys if loop.index0 == ns.last else '') + " C " + '[/INST]' -}}"
      "{%- elif m.role == 'assistant' -%}{{- " C " + eos_token -}}{%- endif -%}"
      "{%- endfor -%}" },

    // Mistral v7 (Mistral Small 3, Large 2411): a system prompt block of its own.
    { "mistral-v7",
      "{{- bos_token -}}"
      "{%- for m in messages -%}"
      "{%- if m.role == 'system' -%}{{- '[SYSTEM_PROMPT] ' + " C " + '[/SYSTEM_PROMPT]' -}}"
      "{%- elif m.role == 'user' -%}{{- '[INST] ' + " C " + '[/INST]' -}}"
      "{%- elif m.role == 'assistant' -%}{{- ' ' + " C " + eos_token -}}{%- endif -%}"
      "{%- endfor -%}" },
    { "mistral-v7-tekken",
      "{{- bos_token -}}"
      "{%- for m in messages -%}"
      "{%- if m.role == 'system' -%}{{- '[SYSTEM_PROMPT]' + " C " + '[/SYSTEM_PROMPT]' -}}"
      "{%- elif m.role == 'user' -%}{{- '[INST]' + " C " + '[/INST]' -}}"
      "{%- elif m.role == 'assistant' -%}{{- " C " + eos_token -}}{%- endif -%}"
      "{%- endfor -%}" },

    // Phi-3 / 3.5: a finished conversation (no generation prompt) ends with the EOS token.
    { "phi3",
      "{%- for m in messages -%}{{- '<|' + m.role + '|>\\n' + " C " + '<|end|>\\n' -}}{%- endfor -%}"
      "{%- if add_generation_prompt -%}{{- '<|assistant|>\\n' -}}{%- else -%}{{- eos_token -}}{%- endif -%}" },

    { "phi4",
      "{%- for m in messages -%}{{- '<|im_start|>' + m.role + '<|im_sep|>' + " C " + '<|im_end|>' -}}{%- endfor -%}"
      "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant<|im_sep|>' -}}{%- endif -%}" },

    // Gemma: roles user and model; a system prompt opens the first user turn (as Gemma 3 does).
    { "gemma",
      "{%- set ns = namespace(sys='') -%}"
      "{%- for m in messages -%}{%- if m.role == 'system' -%}{%- set ns.sys = ns.sys + (" C " | trim) + '\\n\\n' -%}{%- endif -%}{%- endfor -%}"
      "{{- bos_token -}}"
      "{%- for m in messages -%}{%- if m.role != 'system' -%}"
      "{%- set role = 'model' if m.role == 'assistant' else m.role -%}"
      "{{- '<start_of_turn>' + role + '\\n' + (ns.sys if role == 'user' else '') + (" C " | trim) + '<end_of_turn>\\n' -}}"
      "{%- if role == 'user' -%}{%- set ns.sys = '' -%}{%- endif -%}"
      "{%- endif -%}{%- endfor -%}"
      "{%- if add_generation_prompt -%}{{- '<start_of_turn>model\\n' -}}{%- endif -%}" },

    { "zephyr",
      "{%- for m in messages -%}{{- '<|' + m.role + '|>\\n' + " C " + eos_token + '\\n' -}}{%- endfor -%}"
      "{%- if add_generation_prompt -%}{{- '<|assistant|>\\n' -}}{%- endif -%}" },

    { "vicuna",
      "{%- for m in messages -%}"
      "{%- if m.role == 'system' -%}{{- " C " + '\\n\\n' -}}"
      "{%- elif m.role == 'user' -%}{{- 'USER: ' + " C " + '\\n' -}}"
      "{%- elif m.role == 'assistant' -%}{{- 'ASSISTANT: ' + " C " + eos_token + '\\n' -}}{%- endif -%}"
      "{%- endfor -%}"
      "{%- if add_generation_prompt -%}{{- 'ASSISTANT:' -}}{%- endif -%}" },

    // DeepSeek Coder
    { "deepseek",
      "{{- bos_token -}}"
      "{%- for m in messages -%}"
      "{%- if m.role == 'system' -%}{{- " C " -}}"
      "{%- elif m.role == 'user' -%}{{- '### Instruction:\\n' + " C " + '\\n' -}}"
      "{%- elif m.role == 'assistant' -%}{{- '### Response:\\n' + " C " + '\\n<|EOT|>\\n' -}}{%- endif -%}"
      "{%- endfor -%}"
      "{%- if add_generation_prompt -%}{{- '### Response:\\n' -}}{%- endif -%}" },

    // DeepSeek V2
    { "deepseek2",
      "{{- bos_token -}}"
      "{%- for m in messages -%}"
      "{%- if m.role == 'system' -%}{{- " C " + '\\n\\n' -}}"
      "{%- elif m.role == 'user' -%}{{- 'User: ' + " C " + '\\n\\n' -}}"
      "{%- elif m.role == 'assistant' -%}{{- 'Assistant: ' + " C " + eos_token -}}{%- endif -%}"
      "{%- endfor -%}"
      "{%- if add_generation_prompt -%}{{- 'Assistant:' -}}{%- endif -%}" },

    // DeepSeek V3 and R1: the system prompts first (joined by blank lines), then the turns.
    { "deepseek3",
      "{%- set ns = namespace(sys='') -%}"
      "{%- for m in messages -%}{%- if m.role == 'system' -%}"
      "{%- set ns.sys = ns.sys + ('\\n\\n' if ns.sys else '') + " C " -%}{%- endif -%}{%- endfor -%}"
      "{{- bos_token + ns.sys -}}"
      "{%- for m in messages -%}"
      "{%- if m.role == 'user' -%}{{- '<｜User｜>' + " C " -}}"
      "{%- elif m.role == 'assistant' -%}"
      "{{- '<｜Assistant｜>' + " C " + '<｜end▁of▁sentence｜>' -}}"
      "{%- endif -%}"
      "{%- endfor -%}"
      "{%- if add_generation_prompt -%}{{- '<｜Assistant｜>' -}}{%- endif -%}" },

    { "command-r",
      "{{- bos_token -}}"
      "{%- for m in messages -%}"
      "{%- set tok = '<|SYSTEM_TOKEN|>' if m.role == 'system' else '<|USER_TOKEN|>' if m.role == 'user' else '<|CHATBOT_TOKEN|>' -%}"
      "{{- '<|START_OF_TURN_TOKEN|>' + tok + (" C " | trim) + '<|END_OF_TURN_TOKEN|>' -}}"
      "{%- endfor -%}"
      "{%- if add_generation_prompt -%}{{- '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' -}}{%- endif -%}" },

    { "chatglm4",
      "{{- '[gMASK]<sop>' -}}"
      "{%- for m in messages -%}{{- '<|' + m.role + '|>\\n' + " C " -}}{%- endfor -%}"
      "{%- if add_generation_prompt -%}{{- '<|assistant|>' -}}{%- endif -%}" },

    { "granite",
      "{%- for m in messages -%}{{- '<|start_of_role|>' + m.role + '<|end_of_role|>' + " C " + '<|end_of_text|>\\n' -}}{%- endfor -%}"
      "{%- if add_generation_prompt -%}{{- '<|start_of_role|>assistant<|end_of_role|>' -}}{%- endif -%}" },

    { "falcon3",
      "{%- for m in messages -%}{{- '<|' + m.role + '|>\\n' + " C " + '\\n' -}}{%- endfor -%}"
      "{%- if add_generation_prompt -%}{{- '<|assistant|>\\n' -}}{%- endif -%}" },
};

#undef C

} // namespace

const char * builtin_chat_template(const std::string & name) {
    for (const builtin_template & t : k_builtin_templates) {
        if (name == t.name) return t.source;
    }
    return nullptr;
}

std::vector<std::string> builtin_chat_template_names() {
    std::vector<std::string> names;
    for (const builtin_template & t : k_builtin_templates) names.emplace_back(t.name);
    return names;
}

std::string chat_template_source(const std::string & name_or_source) {
    if (name_or_source.find("{%") != std::string::npos || name_or_source.find("{{") != std::string::npos) {
        return name_or_source;
    }
    if (const char * s = builtin_chat_template(name_or_source)) return s;
    std::string names;
    for (const std::string & n : builtin_chat_template_names()) names += (names.empty() ? "" : ", ") + n;
    throw std::invalid_argument("'" + name_or_source + "' is neither a built-in template (" + names +
                                ") nor Jinja source (text with {% or {{); for a file use --chat-template-file");
}

} // namespace kiln
