// Inside the tool-call parsers (not for callers: they use chat-tools.h). Each syntax is one
// tool_family row: its marker texts, how its calls are found and parsed in a reply, and how one
// call is written as GBNF. The rows live with their parsers: chat-tools-json.cpp (calls whose
// arguments are a JSON object) and chat-tools-tagged.cpp (arguments as tagged parameters, and
// gpt-oss's harmony messages); chat-tools.cpp dispatches.
#pragma once

#include "chat-tools.h"
#include "json-schema-grammar.h"

#include <string>
#include <vector>

namespace chat_tools_detail {

using json = nlohmann::ordered_json;

bool is_space(char c);
size_t skip_space(const std::string & s, size_t pos);
std::string trim(const std::string & s);
bool starts_with_at(const std::string & s, size_t pos, const std::string & lit);

// The JSON object or array starting at pos, parsed; *end set one past it. Discarded when there
// is none, or it is not closed or not valid.
json json_at(const std::string & s, size_t pos, size_t * end);

// Streaming (parse_tool_calls_partial): what a parser knows of the call a reply ends inside of.
// A parser given one does not fail where the text merely stops early: it fills this in and
// returns false, with the calls before it already in its list.
struct open_call {
    bool at_end = false;     // the text ended inside a call (or where one may follow)
    bool healed = false;     // read_json closed a JSON value the text ended inside of
    bool strip_comma = false;
    std::string name;        // once written in full and declared
    std::string arguments;   // the part of the arguments' JSON text no later text can change
};

// As json_at; with oc, a value the text ends inside of comes back healed: closed, with a marker
// string where the text stopped (oc->healed set), so the family's own logic can read it.
json read_json(const std::string & s, size_t pos, size_t * end, open_call * oc);

// Whether a (healed) value holds the marker: it is not complete yet.
bool is_partial(const json & v);

// The stable prefix of a healed arguments value's JSON text (the whole text when complete).
std::string partial_arguments(const json & args, const open_call & oc);

// A healed call object {name_key: NAME, args_key: {...}} into oc (name only once complete and
// declared; arguments as far as they are stable).
void open_object_call(const json & obj, const json & tools, open_call & oc, const char * name_key = "name",
                      const char * args_key = "");

// A call whose name is known and whose arguments read_json stopped in (healed, or not begun):
// open in oc. Returns false, for the parser to return.
bool open_arguments(open_call * oc, const std::string & name, const json & args);

// A call read in full whose closing text (expected at p) has not all been written: open in oc
// (when there is one and the text so far is the start of closing). Returns false.
bool call_awaits(open_call * oc, const parsed_tool_call & call, const std::string & s, size_t p, const std::string & closing);

// The calls of a JSON array of call objects, the last possibly healed (into oc); false when an
// element is not a call to a declared tool.
bool array_calls(const json & arr, const json & tools, std::vector<parsed_tool_call> & calls, open_call * oc,
                 const char * name_key, const char * args_key);

// Streaming a tagged parameter (XML-ish families): the arguments so far as the stable prefix of
// their JSON text: the complete parameters, then the open one's key and, when it is a string
// written raw, as much of its text as is sure (close_tag not yet seen; strip_newlines: one
// leading and one trailing newline are dropped, as the parsers do).
std::string tagged_arguments_prefix(const json & done, const std::string & pname, bool is_string, std::string value,
                                    const std::string & close_tag, bool strip_newlines);

// A parameter's schema type ("" when it has none).
std::string parameter_type(const json * fn, const std::string & param);

// The declared tool of that name (its "function" object), or null.
const json * find_tool(const json & tools, const std::string & name);

// {"<name_key>": NAME, "<args_key>": {...} or "{...}"} as a call to a declared tool; false if it
// is not one. args_key "" accepts "arguments" or "parameters".
bool object_to_call(const json & obj, const json & tools, parsed_tool_call & out, const char * name_key = "name",
                    const char * args_key = "");

// A call's arguments as JSON text. Bytes that are not UTF-8 (a model can write any) become
// U+FFFD instead of making the dump throw.
std::string arguments_json(const json & args);

// An arguments object given as JSON text, checked; false when it is not an object.
bool arguments_text(const json & args, std::string & out);

// A parameter's value written as plain text (XML-ish syntaxes): a string where the schema says
// string (or the text is not JSON), the parsed JSON value otherwise.
json text_parameter(const json * fn, const std::string & param, const std::string & text);

// The declared function's parameter schema (an empty object schema when it has none).
json tool_parameters(const json & tool_entry);

using parse_fn = bool (*)(const std::string & text, size_t pos, const json & tools, std::vector<parsed_tool_call> & calls,
                          size_t * end, open_call * oc);
using find_fn = size_t (*)(const std::string & text);
// GBNF of one call to `name` with parameter schema `params`.
using call_rule_fn = std::string (*)(json_schema_grammar_builder & b, const std::string & name, const json & params);

struct tool_family {
    tool_syntax syntax;
    const char * name;
    std::vector<std::string> markers;    // texts that are special tokens in the family's vocabularies
    std::vector<std::string> triggers;   // texts that open the calls (lazy grammars); empty: not marked
    find_fn find_calls;                  // where the calls start; null: at the first trigger
    parse_fn parse;
    call_rule_fn call_rule;
    // the GBNF literals around the calls: section opener, between calls, section closer; and
    // what a forced (not lazy) grammar writes before the opener
    std::string open, separator, close, forced_prefix;
    bool parallel = true;                // the syntax can hold several calls
    bool whole_reply = false;            // the calls are unmarked: a reply that is only whitespace may become one
    bool hold_everything = false;        // streaming cannot tell text from calls before the end
    std::vector<std::string> holds;      // a streamed reply is held from the first of these on (a call's header)
    std::string text_prefix;             // what the family writes before plain text (not part of it)
};

// The rows of each file.
const std::vector<tool_family> & json_tool_families();
const std::vector<tool_family> & tagged_tool_families();

} // namespace chat_tools_detail
