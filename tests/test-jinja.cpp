// Unit tests of Kiln's Jinja engine. Expected texts are what Python jinja2 3.1 renders with
// trim_blocks/lstrip_blocks, loop controls and the immutable sandbox (Hugging Face's setup).
#include "chat-template.h"
#include "jinja/jinja.h"

#include <gtest/gtest.h>

using kiln::jinja::Error;
using kiln::jinja::Value;
using json = nlohmann::ordered_json;

namespace {

std::string render(const std::string & source, const json & vars = json::object()) {
    kiln::jinja::Template t(source);
    kiln::jinja::Context ctx;
    for (auto it = vars.begin(); it != vars.end(); ++it) {
        ctx.set(it.key(), kiln::json_to_value(it.value()));
    }
    std::tm now{};
    now.tm_year = 126;
    now.tm_mon = 0;
    now.tm_mday = 15;
    now.tm_hour = 9;
    now.tm_min = 30;
    now.tm_wday = 4;
    ctx.now = now;
    return t.render(ctx);
}

// The located error a template raises (parse or render), or a failure.
Error error_of(const std::string & source, const json & vars = json::object()) {
    try {
        render(source, vars);
    } catch (const Error & e) {
        return e;
    }
    ADD_FAILURE() << "no error from: " << source;
    return Error("none");
}

} // namespace

TEST(Jinja, Literals) {
    EXPECT_EQ(render("{{ 42 }}|{{ -7 }}|{{ 1_000 }}|{{ 2.5 }}|{{ 'a' \"b\" }}"), "42|-7|1000|2.5|ab");
    EXPECT_EQ(render("{{ true }}{{ True }}{{ false }}{{ none }}{{ None }}"), "TrueTrueFalseNoneNone");
    EXPECT_EQ(render("{{ 'a\\tb\\n\\u00e9\\x41\\\\' }}"), "a\tb\n\xc3\xa9" "A\\");
    EXPECT_EQ(render("{{ [1, 'x', none, true, 1.0] }}"), "[1, 'x', None, True, 1.0]");
    EXPECT_EQ(render("{{ {'a': 1, 'b': [True, None, 'x']} }}"), "{'a': 1, 'b': [True, None, 'x']}");
    EXPECT_EQ(render("{{ (1,) }}|{{ (1, 2) }}|{{ () }}|{{ [] }}|{{ {} }}"), "(1,)|(1, 2)|()|[]|{}");
    EXPECT_EQ(render("{{ [\"it's\", 'say \"hi\"', 'both \\' \"', 'nl\\n'] }}"),
              "[\"it's\", 'say \"hi\"', 'both \\' \"', 'nl\\n']");
    EXPECT_EQ(render("{{ {0: 'a', 1: 'b'}[1] }}|{{ {1: 2} }}|{{ {1: 2}|tojson }}"), "b|{1: 2}|{\"1\": 2}");
}

TEST(Jinja, FloatsPrintLikePython) {
    EXPECT_EQ(render("{{ 1 / 3 }}|{{ 0.1 + 0.2 }}|{{ 1e-5 }}|{{ 1e20 }}|{{ 2.0 }}|{{ 1e15 }}|{{ 1e16 }}|{{ 123.456 }}"),
              "0.3333333333333333|0.30000000000000004|1e-05|1e+20|2.0|1000000000000000.0|1e+16|123.456");
    EXPECT_EQ(render("{{ 0.0001 }}|{{ -0.5 }}|{{ 3 * 1.5 }}|{{ 10 / 2 }}"), "0.0001|-0.5|4.5|5.0");
}

TEST(Jinja, Arithmetic) {
    EXPECT_EQ(render("{{ 1 + 2 * 3 }}|{{ (1 + 2) * 3 }}|{{ 10 - 2 - 3 }}|{{ 2 ** 10 }}|{{ 7 / 2 }}"), "7|9|5|1024|3.5");
    EXPECT_EQ(render("{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % 3 }}|{{ -7 % 3 }}|{{ 7.5 // 2 }}"), "3|-4|1|2|3.0");
    EXPECT_EQ(render("{{ -2 ** 2 }}|{{ 2 ** 3 ** 2 }}"), "4|64");   // jinja2: unary binds tighter; ** is left-assoc
    EXPECT_EQ(render("{{ 'ab' * 3 }}|{{ [1, 2] + [3] }}|{{ 'a' ~ 1 ~ none ~ true ~ undefined_var }}"), "ababab|[1, 2, 3]|a1NoneTrue");
    EXPECT_EQ(render("{{ '%s-%05.1f|%d' % ('x', 3.14159, 42) }}|{{ '%(a)s' % {'a': 1} }}"), "x-003.1|42|1");
}

TEST(Jinja, ComparisonsAndLogic) {
    EXPECT_EQ(render("{{ 1 == 1.0 }}|{{ 1 < 2 < 3 }}|{{ 3 > 2 > 2 }}|{{ 'b' > 'a' }}|{{ [1, 2] < [1, 3] }}|{{ true == 1 }}"),
              "True|True|False|True|True|True");
    EXPECT_EQ(render("{{ 'a' in 'cat' }}|{{ 2 in [1, 2] }}|{{ 'k' in {'k': 1} }}|{{ 3 not in [1] }}|{{ 'x' in undef }}"),
              "True|True|True|True|False");
    EXPECT_EQ(render("{{ 0 or 'x' }}|{{ 1 and 'y' }}|{{ not none }}|{{ [] or {} }}|{{ not x is defined }}"), "x|y|True|{}|True");
    EXPECT_EQ(render("{{ 'a' if false else 'b' }}|{{ 'a' if false }}|{{ 'c' if 1 }}"), "b||c");
}

TEST(Jinja, AttributeItemAndSlice) {
    json vars = {{"d", {{"a", 1}, {"items", "shadowed"}}}, {"l", {10, 20, 30}}};
    EXPECT_EQ(render("{{ d.a }}|{{ d['a'] }}|{{ d.missing }}|{{ d.get('missing', 5) }}|{{ d.get('missing') }}|{{ d['items'] }}", vars),
              "1|1||5|None|shadowed");
    EXPECT_EQ(render("{{ l[0] }}|{{ l[-1] }}|{{ l.1 }}|{{ l[5] }}|{{ l[1:] }}|{{ l[::-1] }}|{{ l[-2:] }}|{{ l[:1] }}", vars),
              "10|30|20||[20, 30]|[30, 20, 10]|[20, 30]|[10]");
    EXPECT_EQ(render("{{ 'hello'[::-1] }}|{{ 'h\xc3\xa9llo'[1:3] }}|{{ 'abc'[-5:] }}|{{ [0,1,2,3,4,5][::2] }}|{{ [0,1,2,3][3:0:-1] }}|{{ 'abc'[1] }}"),
              "olleh|\xc3\xa9l|abc|[0, 2, 4]|[3, 2, 1]|b");
    EXPECT_EQ(render("{{ none.foo }}|{{ (none.foo) is defined }}"), "|False");
}

TEST(Jinja, IfElifElse) {
    const char * t = "{% if x > 2 %}big{% elif x > 0 %}small{% else %}none{% endif %}";
    EXPECT_EQ(render(t, {{"x", 5}}), "big");
    EXPECT_EQ(render(t, {{"x", 1}}), "small");
    EXPECT_EQ(render(t, {{"x", 0}}), "none");
}

TEST(Jinja, ForLoopVariables) {
    EXPECT_EQ(render("{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}"
                     "{{ loop.first }}{{ loop.last }}{{ loop.length }} {% endfor %}"),
              "1032TrueFalse3 2121FalseFalse3 3210FalseTrue3 ");
    EXPECT_EQ(render("{% for x in [1, 2, 3] %}{{ loop.previtem|default('-') }}{{ x }}{{ loop.nextitem|default('-') }} {% endfor %}"),
              "-12 123 23- ");
    EXPECT_EQ(render("{% for x in range(4) %}{{ loop.cycle('a', 'b') }}{% endfor %}"), "abab");
    EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}|{% for x in undef %}x{% else %}u{% endfor %}"), "empty|u");
    EXPECT_EQ(render("{% for x in range(10) if x is odd %}{{ x }}{{ ',' if not loop.last }}{% endfor %}"), "1,3,5,7,9");
    EXPECT_EQ(render("{% for x in range(10) %}{% if x == 5 %}{% break %}{% endif %}{% if x is even %}{% continue %}{% endif %}{{ x }}{% endfor %}"),
              "13");
    EXPECT_EQ(render("{% for k, v in {'b': 1, 'a': 2}.items() %}{{ k }}={{ v }};{% endfor %}"), "b=1;a=2;");
    EXPECT_EQ(render("{% for k in {'b': 1, 'a': 2} %}{{ k }}{% endfor %}"), "ba");
    EXPECT_EQ(render("{% for a, b in [(1, 2), (3, 4)] %}{{ a + b }}{% endfor %}"), "37");
}

TEST(Jinja, ScopingAndNamespace) {
    EXPECT_EQ(render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}"), "21");
    EXPECT_EQ(render("{% set x = 1 %}{% if true %}{% set x = 2 %}{% endif %}{{ x }}"), "2");
    EXPECT_EQ(render("{% set ns = namespace(c=0, s='') %}{% for i in range(4) %}{% set ns.c = ns.c + i %}{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.c }} {{ ns.s }}"),
              "6 0123");
    EXPECT_EQ(render("{% set a, b = 1, 2 %}{{ a }}{{ b }}|{% set t = 1, 2 %}{{ t }}"), "12|(1, 2)");
    EXPECT_EQ(render("{% set s %}a{{ 1 }}b{% endset %}[{{ s }}]|{% set u | upper %}abc{% endset %}{{ u }}"), "[a1b]|ABC");
    EXPECT_EQ(render("{% set messages = messages[1:] %}{{ messages|length }}", {{"messages", {1, 2, 3}}}), "2");
}

TEST(Jinja, Macros) {
    EXPECT_EQ(render("{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!{% endmacro %}"
                     "{{ greet('Bob') }} {{ greet('Amy', greeting='Hi') }} {{ greet(greeting='Yo', name='Al') }}"),
              "Hello, Bob! Hi, Amy! Yo, Al!");
    EXPECT_EQ(render("{% macro m(a, b=a * 2) %}{{ a }}{{ b }}{{ c }}{% endmacro %}{% set c = 'g' %}{{ m(1) }}"), "12g");
    EXPECT_EQ(render("{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}inner{% endcall %}"),
              "<b>inner</b>");
    EXPECT_EQ(render("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}"), "321");
    EXPECT_EQ(render("{% macro v() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ v(1, 2, k=3) }}"), "(1, 2){'k': 3}");
}

TEST(Jinja, BlocksFilterRawGeneration) {
    EXPECT_EQ(render("{% filter upper %}abc{{ 'd' }}{% endfilter %}"), "ABCD");
    EXPECT_EQ(render("{% raw %}{{ x }}{% if %}{% endraw %}"), "{{ x }}{% if %}");
    EXPECT_EQ(render("{% generation %}x{{ 1 }}{% endgeneration %}"), "x1");   // HF's assistant-mask extension
}

TEST(Jinja, WhitespaceControl) {
    EXPECT_EQ(render("{% if true %}\nyes\n{% endif %}\nafter"), "yes\nafter");
    EXPECT_EQ(render("  {% if true %}\n  x\n  {% endif %}\n"), "  x\n");
    EXPECT_EQ(render("a  {{- 'b' -}}  \n c"), "abc");
    EXPECT_EQ(render("a\n  {%- if true -%}\n\n  b  {%- endif %}"), "ab");
    EXPECT_EQ(render("  {%+ if true %}x{% endif %}"), "  x");
    EXPECT_EQ(render("  {{ 'x' }}\n"), "  x");   // lstrip_blocks leaves {{ alone; one trailing newline dropped
    EXPECT_EQ(render("x\n\n"), "x\n");
    EXPECT_EQ(render("a {# comment #} b|line\n  {# c #}\nnext"), "a  b|line\nnext");
    EXPECT_EQ(render("a {#- c -#} b"), "ab");
    EXPECT_EQ(render("x {% if true %}y{% endif %} z"), "x y z");   // lstrip only at line starts
    EXPECT_EQ(render("{% for i in range(2) %}\n  - {{ i }}\n{% endfor %}"), "  - 0\n  - 1\n");
    EXPECT_EQ(render("a\r\nb"), "a\nb");
}

TEST(Jinja, StringFilters) {
    EXPECT_EQ(render("{{ 'hello wORLD-foo (bar'|title }}|{{ 'hELLO'|capitalize }}|{{ 'Ab'|upper }}{{ 'Ab'|lower }}"),
              "Hello World-Foo (Bar|Hello|ABab");
    EXPECT_EQ(render("{{ '  x \\n'|trim }}|{{ 'xxaxx'|trim('x') }}|{{ 'aaa'|replace('a', 'b', 2) }}|{{ 'a b  c'|wordcount }}"),
              "x|a|bba|3");
    EXPECT_EQ(render("[{{ 'ab'|center(6) }}]|{{ '%s-%d'|format('a', 3) }}|{{ '<a href=\"x\">&\\''|escape }}|{{ 'x'|e }}"),
              "[  ab  ]|a-3|&lt;a href=&#34;x&#34;&gt;&amp;&#39;|x");
    EXPECT_EQ(render("{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, first=true) }}|{{ 'a\\n\\nb'|indent(2, blank=true) }}"),
              "a\n  b\n\n  c|  a\n  b|a\n  \n  b");
    EXPECT_EQ(render("{{ 'abc'|reverse }}|{{ 'abc'|length }}|{{ 'h\xc3\xa9'|count }}|{{ 42|string ~ 'x' }}"), "cba|3|2|42x");
}

TEST(Jinja, Tojson) {
    EXPECT_EQ(render("{{ {'b': 1, 'a': [1, 2.5, '\xc3\xa9\"<'], 'c': none, 'd': true}|tojson }}"),
              "{\"b\": 1, \"a\": [1, 2.5, \"\xc3\xa9\\\"<\"], \"c\": null, \"d\": true}");
    EXPECT_EQ(render("{{ {'a': [1, {}], 'b': []}|tojson(indent=2) }}"), "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": []\n}");
    EXPECT_EQ(render("{{ '\xc3\xa9\xf0\x9f\x99\x82\\n'|tojson(ensure_ascii=True) }}"), "\"\\u00e9\\ud83d\\ude42\\n\"");
    EXPECT_EQ(render("{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}|{{ [1, 2]|tojson(separators=(',', ':')) }}"), "{\"a\": 2, \"b\": 1}|[1,2]");
    EXPECT_EQ(error_of("{{ x|tojson }}").message(), "Object of type Undefined is not JSON serializable");
}

TEST(Jinja, SequenceFilters) {
    json vars = {{"users", json::array({{{"name", "b"}, {"age", 30}, {"admin", true}},
                                        {{"name", "A"}, {"age", 20}, {"admin", false}},
                                        {{"name", "c"}, {"age", 25}}})}};
    EXPECT_EQ(render("{{ users|map(attribute='name')|join(', ') }}", vars), "b, A, c");
    EXPECT_EQ(render("{{ users|selectattr('admin')|map(attribute='name')|list }}", vars), "['b']");
    EXPECT_EQ(render("{{ users|rejectattr('admin')|map(attribute='name')|list }}", vars), "['A', 'c']");
    EXPECT_EQ(render("{{ users|selectattr('age', 'gt', 22)|map(attribute='name')|list }}", vars), "['b', 'c']");
    EXPECT_EQ(render("{{ users|selectattr('admin', 'defined')|list|length }}", vars), "2");
    EXPECT_EQ(render("{{ users|sort(attribute='name')|map(attribute='name')|join }}", vars), "Abc");
    EXPECT_EQ(render("{{ users|sort(attribute='age', reverse=true)|map(attribute='age')|list }}", vars), "[30, 25, 20]");
    EXPECT_EQ(render("{{ users|sum(attribute='age') }}|{{ (users|max(attribute='age')).name }}|{{ (users|min(attribute='age')).name }}", vars),
              "75|b|A");
    EXPECT_EQ(render("{{ [3, 1, 2]|sort }}|{{ ['b', 'A', 'c']|sort }}|{{ ['a', 'A', 'b']|unique|list }}|{{ [1, 2, 3]|reverse|list }}"),
              "[1, 2, 3]|['A', 'b', 'c']|['a', 'b']|[3, 2, 1]");
    EXPECT_EQ(render("{{ range(10)|select('odd')|list }}|{{ range(5)|reject('even')|list }}|{{ ['a', 'b']|map('upper')|list }}"),
              "[1, 3, 5, 7, 9]|[1, 3]|['A', 'B']");
    EXPECT_EQ(render("{{ [1, 2, 3]|first }}{{ [1, 2, 3]|last }}|{{ []|first is defined }}|{{ 'abc'|list }}|{{ [1, 2, 3, 4, 5]|batch(2)|list }}"),
              "13|False|['a', 'b', 'c']|[[1, 2], [3, 4], [5]]");
    EXPECT_EQ(render("{{ {'b': 1, 'A': 2}|dictsort }}|{{ {'b': 1, 'a': 2}|items|list }}|{{ {'x': 2, 'y': 1}|dictsort(by='value') }}"),
              "[('A', 2), ('b', 1)]|[('b', 1), ('a', 2)]|[('y', 1), ('x', 2)]");
    EXPECT_EQ(render("{{ [1, 2]|join('-') }}|{{ [1, 2]|length }}|{{ {'a': 1}|count }}|{{ undef|length }}"), "1-2|2|1|0");
    // map/select return generators in jinja2: always true, no len(), no JSON
    EXPECT_EQ(render("{{ 'yes' if []|select else 'no' }}"), "yes");
    EXPECT_EQ(error_of("{{ [1]|map('string')|tojson }}").message(), "Object of type generator is not JSON serializable");
}

TEST(Jinja, ConversionFilters) {
    EXPECT_EQ(render("{{ '42'|int }}|{{ '4.7'|int }}|{{ 'x'|int }}|{{ 'x'|int(7) }}|{{ 3.9|int }}|{{ true|int }}"), "42|4|0|7|3|1");
    EXPECT_EQ(render("{{ '1.5'|float }}|{{ 3|float }}|{{ 'x'|float }}|{{ -3|abs }}|{{ -2.5|abs }}"), "1.5|3.0|0.0|3|2.5");
    EXPECT_EQ(render("{{ 2.5|round }}|{{ 3.5|round }}|{{ 2.675|round(2) }}|{{ 3.7|round(method='floor') }}|{{ 3.2|round(0, 'ceil') }}|{{ 3|round }}"),
              "2.0|4.0|2.67|3.0|4.0|3");
    EXPECT_EQ(render("{{ undef|default('d') }}|{{ ''|default('d') }}|{{ ''|default('d', true) }}|{{ none|d('n') }}|{{ 0|d(5, boolean=true) }}"),
              "d||d|None|5");
    EXPECT_EQ(render("{{ 'x'|safe }}|{{ [1]|string }}|{{ none|string }}"), "x|[1]|None");
    // Markup + str escapes the plain string (markupsafe), e.g. `'...'|safe + value|tojson`
    EXPECT_EQ(render("{{ '<b>'|safe + '<i>' }}|{{ '<b>' ~ '<i>'|safe }}"), "<b>&lt;i&gt;|<b><i>");
}

TEST(Jinja, StringMethods) {
    EXPECT_EQ(render("{{ '  a b  '.strip() }}|{{ 'xxaxx'.lstrip('x') }}|{{ 'xxaxx'.rstrip('x') }}|{{ '\\n\\nb\\n'.lstrip('\\n') }}"), "a b|axx|xxa|b\n");
    EXPECT_EQ(render("{{ 'a,b,c'.split(',') }}|{{ 'a,b,c'.split(',', 1) }}|{{ ' a  b '.split() }}|{{ 'a,b,c'.rsplit(',', 1) }}"),
              "['a', 'b', 'c']|['a', 'b,c']|['a', 'b']|['a,b', 'c']");
    EXPECT_EQ(render("{{ 'x</think>y'.split('</think>')[-1] }}|{{ 'abc'.split('z') }}|{{ 'a\\nb\\r\\nc'.splitlines() }}"), "y|['abc']|['a', 'b', 'c']");
    EXPECT_EQ(render("{{ 'hello'.startswith('he') }}|{{ 'hello'.startswith(('x', 'hel')) }}|{{ 'hello'.endswith('lo') }}|{{ 'hello'.endswith('x') }}"),
              "True|True|True|False");
    EXPECT_EQ(render("{{ 'hello world\\'s'.title() }}|{{ 'aB'.upper() }}{{ 'aB'.lower() }}|{{ 'hELLO'.capitalize() }}|{{ 'aaa'.replace('a', 'b', 1) }}"),
              "Hello World'S|ABab|Hello|baa");
    EXPECT_EQ(render("{{ 'h\xc3\xa9llo'.find('l') }}|{{ 'hello'.rfind('l') }}|{{ 'hello'.find('z') }}|{{ 'hello'.count('l') }}|{{ '-'.join(['a', 'b']) }}"),
              "2|3|-1|2|a-b");
    EXPECT_EQ(render("{{ '{0}-{name}-{0}'.format(1, name='x') }}|{{ '{:>4}|{:.2f}'.format('a', 2.5) }}"), "1-x-1|   a|2.50");
    EXPECT_EQ(error_of("{{ '{}{0}'.format(1) }}").message(), "cannot switch from manual field specification to automatic field numbering");
    EXPECT_EQ(render("{{ '123'.isdigit() }}{{ '12a'.isdigit() }}{{ 'ab'.isalpha() }}{{ ' '.isspace() }}{{ 'AB'.isupper() }}{{ 'ab'.islower() }}"),
              "TrueFalseTrueTrueTrueTrue");
}

TEST(Jinja, DictAndListMethods) {
    json vars = {{"d", {{"a", 1}, {"b", 2}}}, {"l", {1, 2, 2}}};
    EXPECT_EQ(render("{{ d.keys()|list }}|{{ d.values()|list }}|{{ d.items()|list }}|{{ d.get('a') }}", vars),
              "['a', 'b']|[1, 2]|[('a', 1), ('b', 2)]|1");
    EXPECT_EQ(render("{{ l.index(2) }}|{{ l.count(2) }}", vars), "1|2");
    // the caller's data is frozen: methods that modify it are refused, as the immutable sandbox does
    EXPECT_EQ(error_of("{% set x = l.append(3) %}", vars).message(), "access to attribute 'append' of 'list' object is unsafe.");
    EXPECT_EQ(error_of("{{ d.update({'c': 3}) }}", vars).message(), "access to attribute 'update' of 'dict' object is unsafe.");
    EXPECT_EQ(error_of("{{ l.pop() }}", vars).message(), "access to attribute 'pop' of 'list' object is unsafe.");
    json nested = {{"m", {{{"role", "user"}}}}};
    EXPECT_EQ(error_of("{% set x = m[0].update({'role': 'x'}) %}", nested).message(),
              "access to attribute 'update' of 'dict' object is unsafe.");
    // ... while the template's own lists and dicts change as Python's do (Kimi-K2's templates
    // queue tool-call ids in namespace(ids=[]))
    EXPECT_EQ(render("{% set q = namespace(ids=[]) %}{% set _ = q.ids.append('a') %}{% set _ = q.ids.append('b') %}"
                     "{{ q.ids.pop(0) }}|{{ q.ids }}"),
              "a|['b']");
    EXPECT_EQ(render("{% set l = [3, 1] %}{% set _ = l.extend([4, 1]) %}{% set _ = l.insert(-1, 9) %}{% set _ = l.remove(1) %}"
                     "{% set _ = l.reverse() %}{{ l }}|{{ l.pop() }}|{{ l.pop(-1) }}|{{ l }}"),
              "[1, 9, 4, 3]|3|4|[1, 9]");
    EXPECT_EQ(render("{% set d = {'a': 1} %}{% set _ = d.update({'b': 2}, c=3) %}{{ d.setdefault('a', 5) }}{{ d.setdefault('e', 6) }}"
                     "|{{ d.pop('b') }}{{ d.pop('x', 0) }}|{{ d.popitem() }}|{{ d }}"),
              "16|20|('e', 6)|{'a': 1, 'c': 3}");
    // a copy of the caller's list is the template's own
    EXPECT_EQ(render("{% set c = l.copy() %}{% set _ = c.append(7) %}{{ c }}|{{ l }}", vars), "[1, 2, 2, 7]|[1, 2, 2]");
    EXPECT_EQ(error_of("{% set l = [] %}{{ l.pop() }}").message(), "pop from empty list");
    EXPECT_EQ(error_of("{% set l = [1] %}{{ l.remove(2) }}").message(), "list.remove(x): x not in list");
    EXPECT_EQ(error_of("{% set d = {} %}{{ d.pop('k') }}").message(), "KeyError: k");
}

TEST(Jinja, Tests) {
    EXPECT_EQ(render("{{ x is defined }}{{ x is undefined }}{{ none is none }}{{ 'a' is string }}{{ 1 is number }}{{ 1.5 is number }}"),
              "FalseTrueTrueTrueTrueTrue");
    EXPECT_EQ(render("{{ 1 is integer }}{{ 1.0 is integer }}{{ 1.0 is float }}{{ true is boolean }}{{ true is integer }}{{ {} is mapping }}"),
              "TrueFalseTrueTrueFalseTrue");
    EXPECT_EQ(render("{{ [] is iterable }}{{ 'a' is iterable }}{{ 1 is iterable }}{{ [] is sequence }}{{ {} is mapping }}{{ [] is mapping }}"),
              "TrueTrueFalseTrueTrueFalse");
    EXPECT_EQ(render("{{ range is callable }}{{ true is true }}{{ 1 is true }}{{ false is false }}{{ 3 is odd }}{{ 4 is even }}"),
              "TrueTrueFalseTrueTrueTrue");
    EXPECT_EQ(render("{{ 9 is divisibleby(3) }}{{ 9 is divisibleby 4 }}{{ 1 is eq 1 }}{{ 1 is ne 1 }}{{ 1 is lt 2 }}{{ 1 is gt 2 }}{{ 2 is in [1, 2] }}"),
              "TrueFalseTrueFalseTrueFalseTrue");
    EXPECT_EQ(render("{{ none is not none }}{{ x is not defined }}{{ none is sameas none }}{{ 'Ab' is lower }}{{ 'ab' is lower }}"),
              "FalseTrueTrueFalseTrue");
}

TEST(Jinja, Globals) {
    EXPECT_EQ(render("{{ range(3)|list }}|{{ range(1, 10, 3)|list }}|{{ range(3, 0, -1)|list }}|{{ dict(a=1, b='x') }}"),
              "[0, 1, 2]|[1, 4, 7]|[3, 2, 1]|{'a': 1, 'b': 'x'}");
    EXPECT_EQ(render("{{ strftime_now('%Y-%m-%d %H:%M') }}|{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%B %d, %Y') }}"),
              "2026-01-15 09:30|15 Jan 2026|January 15, 2026");
    EXPECT_EQ(render("{% set j = joiner('|') %}{% for x in 'abc' %}{{ j() }}{{ x }}{% endfor %}"), "a|b|c");
    EXPECT_EQ(render("{% set range = 5 %}{{ range }}"), "5");
    Error e = error_of("line 1\n{{ raise_exception('bad role: ' ~ 'x') }}");
    EXPECT_EQ(e.message(), "bad role: x");
    EXPECT_EQ(e.line(), 2);
}

TEST(Jinja, UndefinedBehaviour) {
    EXPECT_EQ(render("[{{ x }}]|{{ x|default('d') }}|{{ x is defined }}|{% for i in x %}{{ i }}{% endfor %}|{{ x|length }}"), "[]|d|False||0");
    EXPECT_EQ(render("{{ d.missing }}|{{ d.missing is defined }}", {{"d", json::object()}}), "|False");
    EXPECT_EQ(error_of("{{ x.y }}").message(), "'x' is undefined");
    EXPECT_EQ(error_of("{{ d.missing.y }}", {{"d", json::object()}}).message(), "'dict object' has no attribute 'missing'");
    EXPECT_EQ(error_of("{{ x + 1 }}").message(), "'x' is undefined");
    EXPECT_EQ(error_of("{{ foo() }}").message(), "'foo' is undefined");
    EXPECT_EQ(error_of("{{ x['k'] }}").message(), "'x' is undefined");
}

TEST(Jinja, RuntimeTypeErrors) {
    EXPECT_EQ(error_of("{{ 1 + 'a' }}").message(), "unsupported operand type(s) for +: 'int' and 'str'");
    EXPECT_EQ(error_of("{{ 'a' + 1 }}").message(), "can only concatenate str (not \"int\") to str");
    EXPECT_EQ(error_of("{{ 1 < 'a' }}").message(), "'<' not supported between instances of 'int' and 'str'");
    EXPECT_EQ(error_of("{% for x in none %}{% endfor %}").message(), "'NoneType' object is not iterable");
    EXPECT_EQ(error_of("{{ 1 // 0 }}").message(), "integer division or modulo by zero");
    EXPECT_EQ(error_of("{% set x.y = 1 %}", {{"x", json::object()}}).message(), "cannot assign attribute on non-namespace object");
}

TEST(Jinja, ErrorMessagesNameTheLine) {
    Error e = error_of("{{ 1 | nope }}");
    EXPECT_EQ(e.message(), "No filter named 'nope'.");
    EXPECT_EQ(e.line(), 1);
    EXPECT_EQ(e.column(), 8);
    EXPECT_NE(std::string(e.what()).find("line 1, column 8"), std::string::npos);

    e = error_of("a\nb\n  {{ x | nope2 }}");
    EXPECT_EQ(e.line(), 3);
    EXPECT_NE(e.message().find("nope2"), std::string::npos);

    e = error_of("{% if true %}\nabc\n");
    EXPECT_EQ(e.line(), 2);
    EXPECT_NE(e.message().find("unclosed 'if' block opened at line 1"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("'endif'"), std::string::npos) << e.message();

    e = error_of("x\n{% for a in b %}\n{% if a %}\n{% endfor %}");
    EXPECT_EQ(e.line(), 4);
    EXPECT_NE(e.message().find("endfor"), std::string::npos) << e.message();

    e = error_of("line1\n{{ 1 + }}");
    EXPECT_EQ(e.line(), 2);
    EXPECT_NE(e.message().find("unexpected '}}'"), std::string::npos) << e.message();

    e = error_of("\n\n{% frobnicate %}");
    EXPECT_EQ(e.line(), 3);
    EXPECT_EQ(e.message(), "Encountered unknown tag 'frobnicate'.");

    EXPECT_EQ(error_of("{{ 'abc }}").message(), "unterminated string literal");
    EXPECT_EQ(error_of("{% endif %}").message(), "unexpected 'endif' tag");
    EXPECT_EQ(error_of("{% break %}").message(), "'break' outside of a loop");
    EXPECT_EQ(error_of("{{ x").line(), 1);
    EXPECT_EQ(error_of("{# never closed").message(), "Missing end of comment tag");
    EXPECT_EQ(error_of("{{ 1 is nosuchtest }}").message(), "No test named 'nosuchtest'.");
    EXPECT_EQ(error_of("{{ [1, 2 }}").line(), 1);
    EXPECT_EQ(error_of("{% set %}").line(), 1);
}

TEST(Jinja, Jinja2Quirks) {
    EXPECT_EQ(render("{{ '  a  b  '.split(None, 1) }}|{{ '  a  b  '.rsplit(None, 1) }}|{{ 'a b '.split(None, 5) }}"),
              "['a', 'b  ']|['  a', 'b']|['a', 'b']");
    // (the template's own containers have their modifying methods; the caller's do not)
    EXPECT_EQ(render("{{ [1].append is defined }}|{{ [1].index is defined }}|{{ {}.update is defined }}"), "True|True|True");
    EXPECT_EQ(render("{{ l.append is defined }}|{{ l.index is defined }}", {{"l", {1}}}), "False|True");
    EXPECT_EQ(render("{{ [3, 1, 2]|sort(attribute='x') }}|{{ ['a', 1]|unique|list }}"), "[3, 1, 2]|['a', 1]");
    EXPECT_EQ(error_of("{{ {'a': 1}|items|length }}").message(), "object of type 'generator' has no len()");
    EXPECT_EQ(error_of("{{ [3, 1]|max(attribute='x') }}").message(), "'int object' has no attribute 'x'");
    EXPECT_EQ(error_of("{{ [1][5].role }}").message(), "list object has no element 5");
    EXPECT_EQ(error_of("{{ 'a' * 'b' }}").message(), "can't multiply sequence by non-int of type 'str'");
    EXPECT_EQ(error_of("{% for a, b in [1] %}{% endfor %}").message(), "cannot unpack non-iterable int object");
    EXPECT_EQ(render("a\n  {% if true %}\n  b\n  {% endif %}\n  c"), "a\n  b\n  c");
    EXPECT_EQ(render("{%- for m in [1, 2] %}\n  {{- m }}\n{% endfor -%}\n[end]"), "1\n2\n[end]");
    EXPECT_EQ(render("x  {# c #}\ny|{% raw %}\n  {{ a }}\n{% endraw %}\nq"), "x  y|\n  {{ a }}\nq");
}

// Hostile templates get an error, never a crash, a wrapped integer or an exhausted machine.
TEST(Jinja, LimitsAreErrors) {
    EXPECT_EQ(error_of("{{ 9223372036854775807 + 1 }}").message(), "integer overflow (values beyond 64 bits are not supported)");
    EXPECT_EQ(error_of("{{ 2 ** 64 }}").message(), "integer overflow (values beyond 64 bits are not supported)");
    EXPECT_EQ(error_of("{{ 'x' * 1000000000000 }}").message(), "result too large (over 256 MiB)");
    EXPECT_EQ(error_of("{{ range(1000000)|length }}").message(), "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    EXPECT_EQ(error_of("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}").message(), "template nested too deeply");
    EXPECT_EQ(error_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").message(), "maximum macro recursion depth exceeded in 'f'");
    EXPECT_EQ(render("{{ -9223372036854775807 - 1 }}"), "-9223372036854775808");
}

TEST(Jinja, ValueFormatting) {
    EXPECT_EQ(kiln::jinja::format_float(0.1), "0.1");
    EXPECT_EQ(kiln::jinja::format_float(1e22), "1e+22");
    EXPECT_EQ(kiln::jinja::format_float(-1.5e-7), "-1.5e-07");
    EXPECT_EQ(kiln::jinja::format_float(123456789012345678.0), "1.2345678901234568e+17");
    EXPECT_EQ(kiln::jinja::format_float(100.0), "100.0");
    Value obj = Value::object();
    obj.fields().set("z", Value(1));
    obj.fields().set("a", Value::array({Value("x"), Value(2.0), Value(nullptr)}));
    EXPECT_EQ(obj.str(), "{'z': 1, 'a': ['x', 2.0, None]}");
    EXPECT_EQ(kiln::jinja::to_json(obj), "{\"z\": 1, \"a\": [\"x\", 2.0, null]}");
    EXPECT_FALSE(Value().truthy());
    EXPECT_EQ(Value().str(), "");
    EXPECT_TRUE(Value(1).equals(Value(1.0)));
}
