"""llama.cpp's grammar sampler as the oracle of accelkit's GBNF masks.

The same GBNF text is compiled by accelkit (tests/llm/grammar_probe, the grammar state of
libaccelkit behind a line protocol) and by libllama (llama_sampler_init_grammar, through
python/accelkit/llamacpp.py), over the same GGUF vocabulary: llama2's SentencePiece one
(byte-fallback tokens, ▁ spaces) and gpt2's byte-level BPE one. Seeded random walks then
compare, at every step, the set of tokens each allows next, and advance both by one token
drawn from that set, until end of grammar or WALK_STEPS tokens. The grammars are written
here: JSON, arithmetic, UTF-8 classes (CJK, emoji, negated and `.`), bounded repetition,
plus JSON schemas turned into GBNF by accelkit's converter (so llama.cpp also checks that
the converter writes GBNF it parses).

Where the two differ by design, the difference is stated and checked, not hidden:
- control tokens (BOS <s>, <unk>, gpt2's <|endoftext|> when it is not EOS): llama.cpp
  matches their *text* ("<s>") against the grammar; accelkit gives them no bytes (they add
  nothing to the output) and never allows them. They are left out of the comparison, and
  the test checks accelkit never allows one.
- invalid UTF-8: llama.cpp's decoder takes F5..FF as lead bytes and lets overlong forms and
  surrogates through, so it may allow a token that puts bytes into the output the
  detokenizer turns into U+FFFD; accelkit's decoder is strict. A token llama.cpp alone
  allows must be one whose bytes, after the walk's text, are not valid UTF-8 (Python's
  strict decoder, incrementally: an unfinished last character is fine).

Run by ctest with AK_BIN (the ak of this build), PROBE (grammar_probe) and AK_LIBRARY.
"""
import codecs
import ctypes
import os
import random
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
from accelkit import llamacpp  # noqa: E402

WALKS = 8          # random walks per grammar and vocabulary
WALK_STEPS = 64    # tokens per walk at most

GRAMMARS = {
    "json": r'''
root   ::= value
value  ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ws ( string ws ":" ws value ( ws "," ws string ws ":" ws value )* )? ws "}"
array  ::= "[" ws ( value ( ws "," ws value )* )? ws "]"
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number ::= "-"? ( [0-9] | [1-9] [0-9]{1,15} ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]{1,3} )?
ws     ::= [ \t\n]{0,4}
''',
    "arithmetic": r'''
root ::= expr
expr ::= term ( ws [-+] ws term )*
term ::= factor ( ws [*/] ws factor )*
factor ::= [0-9]+ | "(" ws expr ws ")" | "-" factor
ws ::= " "?
''',
    "unicode": r'''
root ::= line ( "\n" line ){0,3}
line ::= ( cjk | emoji | latin | any-but-quote ) ( " " | cjk | latin | emoji )*
cjk ::= [一-鿿]
emoji ::= [😀-🙏] | "✨"
latin ::= [a-zA-Zàéèüß]
any-but-quote ::= "<" [^"\n<>]{1,6} ">" | "." .
''',
    "repetition": r'''
root ::= "ab"{2} x{1,3} ( "," y? ){0,2} z*
x ::= "x" | "xy"
y ::= [0-9]{2,4}
z ::= " end" | "!"
''',
}

SCHEMAS = {
    "schema-person": '{"type":"object","properties":{"name":{"type":"string","maxLength":12},'
                     '"age":{"type":"integer","minimum":0,"maximum":130},'
                     '"tags":{"type":"array","items":{"enum":["a","b","c"]},"maxItems":3}},'
                     '"required":["name","age"]}',
    "schema-oneof": '{"oneOf":[{"type":"object","properties":{"kind":{"const":"cat"},'
                    '"lives":{"type":"integer","minimum":1,"maximum":9}},"required":["kind","lives"]},'
                    '{"type":"object","properties":{"kind":{"const":"dog"},"good":{"type":"boolean"}},'
                    '"required":["kind"]}]}',
    "schema-date": '{"type":"array","items":{"type":"string","format":"date"},"minItems":1,"maxItems":2}',
}


def schema_gbnf(lib, schema):
    out = ctypes.c_char_p()
    lib.ak_llm_json_schema_to_gbnf.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_char_p)]
    lib.ak_llm_json_schema_to_gbnf.restype = ctypes.c_int
    raw = schema.encode()
    if lib.ak_llm_json_schema_to_gbnf(raw, len(raw), ctypes.byref(out)) != 0:
        raise AssertionError(f"accelkit refused the schema {schema}")
    return out.value.decode()


def utf8_prefix(raw):
    """raw is valid UTF-8 but for a last character that may be unfinished."""
    try:
        codecs.getincrementaldecoder("utf-8")("strict").decode(raw, final=False)
        return True
    except UnicodeDecodeError:
        return False


class Probe:
    """tests/llm/grammar_probe: accelkit's grammar state over stdin/stdout."""

    def __init__(self, probe, model, gbnf_path):
        self.proc = subprocess.Popen([probe, model, gbnf_path], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def ask(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            raise AssertionError(f"grammar_probe ended: {self.proc.stderr.read()}")
        return answer.strip()

    def allowed(self):
        answer = self.ask("mask")
        if answer.startswith("error"):
            raise AssertionError(answer)
        return set() if answer == "-" else {int(t) for t in answer.split()}

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        self.proc.stdout.close()
        self.proc.stderr.close()


class TestGrammarOracle(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ak = os.environ.get("AK_BIN", os.path.join(ROOT, "build", "ak"))
        cls.probe = os.environ.get("PROBE", os.path.join(os.path.dirname(cls.ak), "tests", "grammar_probe"))
        cls.libak = ctypes.CDLL(os.environ.get("AK_LIBRARY", os.path.join(os.path.dirname(cls.ak), "libaccelkit.so")))
        cls.tmp = tempfile.TemporaryDirectory()
        cls.models, cls.controls = {}, {}
        for vocab in ("llama2", "gpt2"):
            path = os.path.join(cls.tmp.name, vocab + ".gguf")
            subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "llm-make-model"), "--dim", "32",
                            "--layers", "1", "--heads", "2", "--kv-heads", "1", "--ffn", "64", "--vocab", vocab,
                            "--seed", "1", "--type", "f32", "--ak", cls.ak, "--out", path],
                           check=True, stdout=subprocess.DEVNULL)
            cls.models[vocab] = path

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def control_tokens(self, vocab, model):
        """Tokens whose text llama.cpp's grammar matches but that carry no output bytes."""
        if vocab not in self.controls:
            self.controls[vocab] = {t for t in range(model.n_vocab) if t != model.eos and
                                    model.token_to_piece(t, special=True) != model.token_to_piece(t, special=False)}
        return self.controls[vocab]

    def compare(self, vocab, name, gbnf):
        path = os.path.join(self.tmp.name, f"{name}.gbnf")
        with open(path, "w", encoding="utf-8") as f:
            f.write(gbnf)
        rng = random.Random(f"{vocab}/{name}")
        steps = 0
        with llamacpp.Model(self.models[vocab], vocab_only=True) as model:
            control = self.control_tokens(vocab, model)
            probe = Probe(self.probe, self.models[vocab], path)
            try:
                for walk in range(WALKS):
                    self.assertEqual(probe.ask("reset"), "ok")
                    with llamacpp.Grammar(model, gbnf) as oracle:
                        text = b""
                        for step in range(WALK_STEPS):
                            ours, theirs = probe.allowed(), set(oracle.allowed())
                            self.assertFalse(ours & control, f"{vocab}/{name}: control tokens allowed")
                            theirs -= control
                            theirs -= {t for t in theirs - ours if not utf8_prefix(text + model.token_to_piece(t))}
                            if ours != theirs:
                                only_ours, only_theirs = sorted(ours - theirs)[:8], sorted(theirs - ours)[:8]
                                self.fail(f"{vocab}/{name} walk {walk} after {text!r}: accelkit alone allows "
                                          f"{[(t, model.token_to_piece(t)) for t in only_ours]}, llama.cpp alone "
                                          f"{[(t, model.token_to_piece(t)) for t in only_theirs]}")
                            steps += 1
                            if not ours:
                                break
                            # prefer tokens other than EOS so walks go deep; EOS ends a walk
                            pick = sorted(ours - {model.eos}) or [model.eos]
                            token = rng.choice(pick) if rng.random() < 0.97 or model.eos not in ours else model.eos
                            self.assertEqual(probe.ask(f"accept {token}"), "ok")
                            oracle.accept(token)
                            if token == model.eos:
                                break
                            text += model.token_to_piece(token, special=False)
            finally:
                probe.close()
        print(f"{vocab}/{name}: {steps} masks identical", flush=True)
        # walks that ended at once would compare nothing
        self.assertGreaterEqual(steps, 3 * WALKS, f"{vocab}/{name}: the walks compared too few masks")

    def test_grammars(self):
        for vocab in self.models:
            for name, gbnf in GRAMMARS.items():
                with self.subTest(vocab=vocab, grammar=name):
                    self.compare(vocab, name, gbnf)

    def test_schema_grammars(self):
        for vocab in self.models:
            for name, schema in SCHEMAS.items():
                with self.subTest(vocab=vocab, schema=name):
                    self.compare(vocab, name, schema_gbnf(self.libak, schema))


if __name__ == "__main__":
    unittest.main()
