/* Jinja interpreter unit tests (ak_chat_template_*): outputs written by hand from
 * Jinja2's semantics for the constructs chat templates lean on, and every refusal — a
 * construct, filter or test outside the subset (AK_ERR_UNSUPPORTED naming it), syntax
 * errors with their line, raise_exception's message, undefined values, the limits
 * against hostile templates — plus the buffer-size protocol. The byte-for-byte checks
 * against Jinja2 itself are test_jinja_reference.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "accelkit/llm.h"

static const char k_msgs[] =
    "[{\"role\":\"system\",\"content\":\"Be brief.\"},"
    "{\"role\":\"user\",\"content\":\" Hi \"},"
    "{\"role\":\"assistant\",\"content\":\"Hello\"}]";

/* Renders `tmpl` over k_msgs; returns the status, the text in `out` when it worked. */
static ak_status render(const char *tmpl, const char *tools, int gen, char *out, size_t cap) {
    ak_chat_template *t = NULL;
    ak_status st = ak_chat_template_compile(tmpl, &t);
    if (st != AK_OK) return st;
    ak_chat_render_opts o = {k_msgs, tools, NULL, gen, "<s>", "</s>", 1721952000};
    size_t len = 0;
    st = ak_chat_template_render(t, &o, out, cap, &len);
    ak_chat_template_free(t);
    return st;
}

static void expect(const char *tmpl, const char *want) {
    char buf[4096];
    ak_status st = render(tmpl, NULL, 1, buf, sizeof buf);
    if (st != AK_OK) fail_msg("%s: %s", tmpl, ak_last_error());
    assert_string_equal(buf, want);
}

static void expect_error(const char *tmpl, ak_status want, const char *in_message) {
    char buf[256];
    ak_status st = render(tmpl, NULL, 1, buf, sizeof buf);
    if (st != want) fail_msg("%s: status %d, wanted %d (%s)", tmpl, st, want, ak_last_error());
    if (!strstr(ak_last_error(), in_message))
        fail_msg("%s: message '%s' lacks '%s'", tmpl, ak_last_error(), in_message);
}

static void test_whitespace(void **state) {
    (void)state;
    /* trim_blocks + lstrip_blocks: block tags on their own lines leave nothing */
    expect("{% for m in messages %}\n  {% if m.role == 'user' %}\n[{{ m.content }}]\n"
           "  {% endif %}\n{% endfor %}\n",
           "[ Hi ]\n");
    expect("a  {%- if true -%}  b  {%- endif -%}  c", "abc");
    expect("  {%+ if true %}kept{% endif +%}\n  {% if true %}stripped\n{% endif %}",
           "  kept\nstripped\n");
    expect("{% raw %}{{ not a var }}{% endraw %}{# comment #}\n  {{ 'k' }}\n", "{{ not a var }}  k");
    expect("a\r\nb\n", "a\nb"); /* newlines normalized, one trailing newline dropped */
}

static void test_loops(void **state) {
    (void)state;
    expect("{% for m in messages %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/"
           "{{ loop.length }}{{ '^' if loop.first }}{{ '$' if loop.last }} {% endfor %}",
           "1/0/3/3^ 2/1/2/3 3/2/1/3$ ");
    expect("{% for x in [] %}no{% else %}empty{% endfor %}|{% for i in range(10) %}"
           "{% if i is odd %}{% continue %}{% endif %}{% if i > 6 %}{% break %}{% endif %}"
           "{{ i }}{% endfor %}",
           "empty|0246");
    expect("{% for k, v in {'a': 1, 'b': [1, 2]}.items() %}{{ k }}={{ v }};{% endfor %}"
           "{% for m in messages if m.role != 'system' %}{{ loop.index }}{{ m.role }}{% endfor %}",
           "a=1;b=[1, 2];1user2assistant");
    /* a set inside a loop stays in the iteration; a namespace carries values out */
    expect("{% set x = 1 %}{% for i in range(2) %}{% set x = x + 10 %}{{ x }}{% endfor %}{{ x }}"
           "{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}"
           "{% endfor %}{{ ns.n }}",
           "111113");
}

static void test_macros_and_sets(void **state) {
    (void)state;
    expect("{% macro tag(name, body='-') %}<{{ name }}>{{ body }}</{{ name }}>{% endmacro %}"
           "{{ tag('a') }}{{ tag('b', body='x') }}{% set blk %}B{{ 1 + 2 }}{% endset %}{{ blk }}",
           "<a>-</a><b>x</b>B3");
    expect("{% set a, b = 1, 'two' %}{{ a }}{{ b }}", "1two");
}

static void test_expressions(void **state) {
    (void)state;
    expect("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 8 }} {{ 1 / 4 }} "
           "{{ 3 * 'ab' }} {{ 'x' ~ 1 ~ none }} {{ [1] + [2] }} {{ 10 - 2.5 }}",
           "3 -4 1 2 256 0.25 ababab x1None [1, 2] 7.5");
    expect("{{ 'h\xc3\xa9llo'[1:4] }}|{{ 'abc'[::-1] }}|{{ [1,2,3,4][-2:] }}|"
           "{{ 'a,b,,c'.split(',') }}|{{ '  x y  '.split() }}|{{ 'xxhixx'.strip('x') }}",
           "\xc3\xa9ll|cba|[3, 4]|['a', 'b', '', 'c']|['x', 'y']|hi");
    expect("{{ x is defined }} {{ none is none }} {{ 'a' in 'cat' }} {{ 2 not in [1] }} "
           "{{ 4 is divisibleby 2 }} {{ messages[0] is mapping }}",
           "False True True True True True");
}

static void test_filters(void **state) {
    (void)state;
    expect("{{ messages | map(attribute='role') | join(', ') }}|"
           "{{ messages | selectattr('role', 'equalto', 'user') | list | length }}|"
           "{{ x | default('dflt') }}|{{ '' | default('e', true) }}",
           "system, user, assistant|1|dflt|e");
    /* Hugging Face's tojson: no ASCII escaping, Python's separators */
    expect("{{ {'b': 1, 'a': [1, '\xc3\xa9', none, true, 1.5]} | tojson }}|"
           "{{ {'b': 1, 'a': {}} | tojson(indent=2, sort_keys=true) }}",
           "{\"b\": 1, \"a\": [1, \"\xc3\xa9\", null, true, 1.5]}|{\n  \"a\": {},\n  \"b\": 1\n}");
    expect("{{ 'line1\\nline2\\n\\nline4' | indent(2) }}", "line1\n  line2\n\n  line4");
}

static void test_context(void **state) {
    (void)state;
    char buf[512];
    /* tools are None unless given; bos/eos and add_generation_prompt reach the template */
    assert_int_equal(render("{{ bos_token }}{{ tools is none }}{{ add_generation_prompt }}"
                            "{{ eos_token }}", NULL, 0, buf, sizeof buf), AK_OK);
    assert_string_equal(buf, "<s>TrueFalse</s>");
    assert_int_equal(render("{{ tools | map(attribute='function.name') | join }}",
                            "[{\"function\":{\"name\":\"f\"}},{\"function\":{\"name\":\"g\"}}]",
                            1, buf, sizeof buf), AK_OK);
    assert_string_equal(buf, "fg");
    assert_int_equal(render("{{ strftime_now('%Y-%m-%d') }}", NULL, 1, buf, sizeof buf), AK_OK);
    assert_non_null(strstr(buf, "2024-07-2")); /* 1721952000 in any time zone */
}

static void test_refused(void **state) {
    (void)state;
    /* outside the subset: refused at compile time, naming what */
    expect_error("{{ x | batch(2) }}", AK_ERR_UNSUPPORTED, "filter 'batch'");
    expect_error("{{ x is escaped }}", AK_ERR_UNSUPPORTED, "test 'escaped'");
    expect_error("{% include 'other.jinja' %}", AK_ERR_UNSUPPORTED, "'include'");
    expect_error("{% for x in y recursive %}{% endfor %}", AK_ERR_UNSUPPORTED, "recursive");
    expect_error("{{ f(*args) }}", AK_ERR_UNSUPPORTED, "*args");
    expect_error("{{ x | tojson(separators=1) }}", AK_ERR_UNSUPPORTED, "separators");
    /* syntax errors name the line */
    expect_error("a\n{% if x %}\nb", AK_ERR_INVALID_ARG, "endif");
    expect_error("\n\n{{ 'open }}", AK_ERR_INVALID_ARG, "line 3");
    expect_error("{% endfor %}", AK_ERR_INVALID_ARG, "unexpected {% endfor %}");
    /* at render time */
    expect_error("{{ raise_exception('No tools here') }}", AK_ERR_INVALID_ARG, "No tools here");
    expect_error("{{ x.y }}", AK_ERR_INVALID_ARG, "'x' is undefined");
    expect_error("{{ 'a'.nosuchmethod() }}", AK_ERR_INVALID_ARG, "'nosuchmethod' is undefined");
    expect_error("{{ 'a' | trim(nope=1) }}", AK_ERR_UNSUPPORTED, "'nope'");
}

static void test_limits(void **state) {
    (void)state;
    expect_error("{% for a in range(100000) %}{% for b in range(1000) %}{% endfor %}{% endfor %}",
                 AK_ERR_INVALID_ARG, "loop iterations");
    expect_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", AK_ERR_INVALID_ARG,
                 "nested too deep");
    expect_error("{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(40) %}"
                 "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
                 AK_ERR_NO_MEMORY, "memory budget");
    char deep[2200];
    size_t n = 0;
    for (int i = 0; i < 500; i++) deep[n++] = '(';
    deep[n++] = '1';
    for (int i = 0; i < 500; i++) deep[n++] = ')';
    deep[n] = '\0';
    char tmpl[2300];
    strcpy(tmpl, "{{ ");
    strcat(tmpl, deep);
    strcat(tmpl, " }}");
    expect_error(tmpl, AK_ERR_INVALID_ARG, "nesting deeper");
    /* long chains nest as deep as parentheses */
    char chain[6100] = "{{ 1";
    for (int i = 0; i < 1000; i++) strcat(chain, "+1");
    strcat(chain, " }}");
    expect_error(chain, AK_ERR_INVALID_ARG, "nesting deeper");
    strcpy(chain, "{{ 'x'");
    for (int i = 0; i < 1000; i++) strcat(chain, "|trim");
    strcat(chain, " }}");
    expect_error(chain, AK_ERR_INVALID_ARG, "nesting deeper");
    expect("{{ 1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1 }}",
           "40");
}

static void test_size_protocol(void **state) {
    (void)state;
    ak_chat_template *t = NULL;
    assert_int_equal(ak_chat_template_compile("{{ 'abc' }}", &t), AK_OK);
    ak_chat_render_opts o = {"[]", NULL, NULL, 1, NULL, NULL, 0};
    size_t len = 0;
    char buf[8] = "zzzzzzz";
    assert_int_equal(ak_chat_template_render(t, &o, NULL, 0, &len), AK_ERR_INVALID_ARG);
    assert_int_equal(len, 3);
    assert_int_equal(ak_chat_template_render(t, &o, buf, 2, &len), AK_ERR_INVALID_ARG);
    assert_string_equal(buf, "zzzzzzz"); /* untouched when it does not fit */
    assert_int_equal(ak_chat_template_render(t, &o, buf, sizeof buf, &len), AK_OK);
    assert_string_equal(buf, "abc");
    /* bad JSON and NULLs are refused */
    o.messages_json = "[{";
    assert_int_equal(ak_chat_template_render(t, &o, buf, sizeof buf, &len), AK_ERR_INVALID_ARG);
    o.messages_json = "{}";
    assert_int_equal(ak_chat_template_render(t, &o, buf, sizeof buf, &len), AK_ERR_INVALID_ARG);
    assert_int_equal(ak_chat_template_render(t, NULL, buf, sizeof buf, &len), AK_ERR_INVALID_ARG);
    ak_chat_template_free(t);
    assert_int_equal(ak_chat_template_compile(NULL, &t), AK_ERR_INVALID_ARG);
    ak_chat_template_free(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whitespace),     cmocka_unit_test(test_loops),
        cmocka_unit_test(test_macros_and_sets), cmocka_unit_test(test_expressions),
        cmocka_unit_test(test_filters),        cmocka_unit_test(test_context),
        cmocka_unit_test(test_refused),        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_size_protocol),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
