"""Constrained decoding end to end: random JSON schemas, random-weight model, real validator.

A seeded generator writes >= 200 JSON schemas covering the supported keywords (types and
type arrays, properties/required/additionalProperties, enum, const, items/prefixItems/
minItems/maxItems, nested objects, anyOf/oneOf, allOf, $ref to $defs/definitions with
recursion, minLength/maxLength, formats date/time/date-time/uuid, integer and number
ranges). `ak serve` runs a small random-weight model; each schema is sent as
response_format json_schema (or llama.cpp's json_schema field) at temperature 1, where the
model writes garbage and only the grammar gives the output its shape. Every output must
finish with "stop", parse, and validate with python3-jsonschema (Draft 2020-12, formats
checked). Plus the server's 400s for bad schemas, grammars and conflicting fields.

Run by ctest with AK_BIN = the ak binary; python3-jsonschema comes from scripts/setup (a
missing package fails the test naming it)."""
import concurrent.futures
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
N_SCHEMAS = 240

try:
    import jsonschema
except ImportError:  # a failure naming the package, never a skip
    jsonschema = None


# ---- the generator ------------------------------------------------------------------------

WORDS = ["id", "name", "kind", "size", "tags", "when", "note", "x", "y", "flag", "items",
         "meta", "a_b", "count", "level", "uuid", "zone", "value"]


# anchored, bounded patterns (an unanchored side or an unbounded repeat lets a random
# model write until max_tokens: valid, but never finished); Python's `re` validates them
PATTERNS = [r"^[A-Z]{2,3}-\d{3,5}$", r"^(red|gr[ae]y|blue)$", r"^\w{1,8}@\w{1,8}\.(com|org)$",
            r'^[^"\\]{0,6}"?\\?$', r"^\s?[\u00e0-\u00ff]{1,3}\.?$",
            r"^(?:\+\d{1,3} )?\(\d{3}\) \d{3}-\d{4}$", r"^[\x41-\x43]{2}\t\n?$",
            r"^\D{1,4}\W\S$", r"^[^a-z\d]{1,3}$", r"^(\d{4})-(0[1-9]|1[0-2])$",
            r"^.{2}[.]{0,2}$", r"^[😀-🙏é]{1,2}x*?$"]


def gen_string(rng):
    r = rng.random()
    if r < 0.25:
        return {"type": "string", "format": rng.choice(["date", "time", "date-time", "uuid"])}
    if r < 0.4:
        return {"type": "string", "pattern": rng.choice(PATTERNS)}
    s = {"type": "string", "maxLength": rng.randint(0, 12)}
    if rng.random() < 0.5:
        s["minLength"] = rng.randint(0, s["maxLength"])
    return s


def gen_integer(rng):
    s = {"type": "integer"}
    r = rng.random()
    if r < 0.3:
        lo = rng.randint(-1000, 1000)
        s["minimum"] = lo
        s["maximum"] = lo + rng.randint(0, 5000)
    elif r < 0.5:
        s["exclusiveMinimum"] = rng.randint(-50, 50)
        s["exclusiveMaximum"] = s["exclusiveMinimum"] + rng.randint(2, 300)
    elif r < 0.6:
        s["minimum"] = rng.randint(-20, 99999)
    elif r < 0.7:
        s["maximum"] = rng.randint(-99999, 20)
    return s


def gen_number(rng):
    s = {"type": "number"}
    if rng.random() < 0.3:
        s["minimum"] = rng.randint(-100, 100) + rng.choice([0, 0.5])
        s["maximum"] = s["minimum"] + rng.randint(1, 1000)
    return s


def gen_scalar(rng):
    r = rng.random()
    if r < 0.3:
        return gen_string(rng)
    if r < 0.5:
        return gen_integer(rng)
    if r < 0.6:
        return gen_number(rng)
    if r < 0.7:
        return {"type": "boolean"}
    if r < 0.75:
        return {"type": "null"}
    if r < 0.85:
        vals = [rng.choice([1, 2.5, "a", "b\"q", "é", True, None, "x y", -7]) for _ in range(rng.randint(1, 4))]
        return {"enum": vals}
    if r < 0.9:
        return {"const": rng.choice(["fixed", 3, {"k": [1, None]}, False])}
    return {"type": ["string", "null"], "maxLength": rng.randint(1, 6)}


def gen_schema(rng, depth, defs):
    if depth <= 0:
        return gen_scalar(rng)
    r = rng.random()
    if r < 0.35:
        return gen_object(rng, depth, defs)
    if r < 0.5:
        return gen_array(rng, depth, defs)
    if r < 0.58:
        # branches of different types, so that oneOf holds exactly once
        kinds = rng.sample([{"type": "integer", "maximum": 50}, {"type": "string", "maxLength": 5},
                            {"type": "null"}, {"type": "boolean"},
                            {"type": "array", "items": {"type": "integer"}, "maxItems": 2}], 2)
        return {rng.choice(["anyOf", "oneOf"]): kinds}
    if r < 0.63 and defs is not None:
        name = "d%d" % len(defs)
        defs[name] = gen_schema(rng, depth - 1, None)
        return {"$ref": "#/$defs/" + name}
    return gen_scalar(rng)


def gen_object(rng, depth, defs):
    names = rng.sample(WORDS, rng.randint(0, 4))
    props = {n: gen_schema(rng, depth - 1, defs) for n in names}
    s = {"type": "object", "properties": props}
    req = [n for n in names if rng.random() < 0.6]
    if req:
        s["required"] = req
    r = rng.random()
    if r < 0.5:
        s["additionalProperties"] = False
    elif r < 0.6:
        s["additionalProperties"] = {"type": "integer", "minimum": 0, "maximum": 9}
    return s


def gen_array(rng, depth, defs):
    s = {"type": "array", "maxItems": rng.randint(0, 3)}
    if rng.random() < 0.25:
        s["prefixItems"] = [gen_scalar(rng) for _ in range(rng.randint(1, 2))]
        s["items"] = gen_scalar(rng) if rng.random() < 0.5 else False
        s["maxItems"] = len(s["prefixItems"]) + rng.randint(0, 2)
    else:
        s["items"] = gen_schema(rng, depth - 1, defs)
    s["minItems"] = rng.randint(0, s["maxItems"])
    if "prefixItems" in s and s.get("items") is False:
        s["minItems"] = min(s["minItems"], len(s["prefixItems"]))
    return s


def special_schemas():
    """Hand-written cases: recursion, allOf, definitions, a top-level non-object."""
    linked = {"$defs": {"node": {"type": "object", "properties": {
        "v": {"type": "integer", "minimum": 0, "maximum": 9},
        "next": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/node"}]}},
        "required": ["v", "next"], "additionalProperties": False}},
        "$ref": "#/$defs/node"}
    old_defs = {"definitions": {"p": {"type": "object", "properties": {"n": {"type": "integer"}},
                                      "required": ["n"]}},
                "type": "object", "properties": {"p": {"$ref": "#/definitions/p"}}, "required": ["p"]}
    all_of = {"allOf": [{"type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a"]},
                        {"type": "object", "properties": {"b": {"type": "null"}}, "required": ["b"]}]}
    dates = {"type": "object", "properties": {f: {"type": "string", "format": f}
                                              for f in ["date", "time", "date-time", "uuid"]},
             "required": ["date", "time", "date-time", "uuid"]}
    patterns = [{"type": "string", "pattern": p} for p in PATTERNS]
    return patterns + [linked, old_defs, all_of, dates, {"type": "array", "items": {"type": "boolean"}, "maxItems": 4},
            {"type": "integer", "minimum": -5, "maximum": 5}, {"enum": ["red", "green"]}]


def make_schemas(seed, n):
    rng = random.Random(seed)
    out = special_schemas()
    while len(out) < n:
        defs = {}
        s = gen_object(rng, rng.randint(1, 3), defs)
        if defs:
            s["$defs"] = defs
        out.append(s)
    return out


# ---- the server ---------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port, path, body, timeout=120):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


class TestGrammarSchemas(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if jsonschema is None:
            raise RuntimeError("python3-jsonschema is missing: run scripts/setup (apt-get install python3-jsonschema)")
        ak = os.environ.get("AK_BIN", os.path.join(ROOT, "build", "ak"))
        cls.tmp = tempfile.TemporaryDirectory()
        model = os.path.join(cls.tmp.name, "m.gguf")
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "llm-make-model"), "--dim", "64",
                        "--layers", "2", "--heads", "4", "--kv-heads", "2", "--ffn", "192", "--ctx", "1024",
                        "--seed", "5", "--type", "f32", "--out", model], check=True, stdout=subprocess.DEVNULL)
        cls.port = free_port()
        # --max-concurrent above the 16 client threads: the server frees a request's slot
        # only after its response is sent, so a thread that got its answer and posts at once
        # may otherwise race its own previous request into a 429
        cls.proc = subprocess.Popen([ak, "serve", model, "--port", str(cls.port), "--max-seqs", "16",
                                     "--max-concurrent", "32"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for _ in range(300):
            try:
                urllib.request.urlopen("http://127.0.0.1:%d/health" % cls.port, timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise RuntimeError("ak serve did not start")

    @classmethod
    def tearDownClass(cls):
        cls.proc.terminate()
        cls.proc.wait(30)
        cls.tmp.cleanup()

    def generate(self, i, schema):
        body = {"prompt": "Answer in JSON: ", "max_tokens": 700, "temperature": 1.0, "seed": i}
        if i % 5 == 4:
            body["json_schema"] = schema
        else:
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "s%d" % i, "schema": schema, "strict": True}}
        return post(self.port, "/v1/completions", body)

    def test_random_schemas_all_valid(self):
        schemas = make_schemas(1234, N_SCHEMAS)
        self.assertGreaterEqual(len(schemas), 200)
        checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
        t0 = time.time()
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            results = list(pool.map(lambda a: self.generate(*a), enumerate(schemas)))
        failures = []
        for i, (schema, (status, resp)) in enumerate(zip(schemas, results)):
            if status != 200:
                failures.append((i, "HTTP %d %s" % (status, resp)))
                continue
            choice = resp["choices"][0]
            text = choice["text"]
            if choice["finish_reason"] != "stop":
                failures.append((i, "finish %s: %r" % (choice["finish_reason"], text)))
                continue
            try:
                value = json.loads(text)
                jsonschema.Draft202012Validator(schema, format_checker=checker).validate(value)
            except Exception as e:  # noqa: BLE001 - reported below with the schema
                failures.append((i, "%s: %r for %s" % (type(e).__name__, text, json.dumps(schema))))
        print("%d schemas in %.1f s" % (len(schemas), time.time() - t0), file=sys.stderr)
        self.assertEqual(failures, [], "%d of %d outputs invalid:\n%s" % (
            len(failures), len(schemas), "\n".join("%d: %s" % f for f in failures[:10])))

    def test_chat_json_schema(self):
        schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
        status, resp = post(self.port, "/v1/chat/completions", {
            "messages": [{"role": "user", "content": "hi"}], "max_tokens": 50, "temperature": 1,
            "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": schema}}})
        self.assertEqual(status, 200, resp)
        jsonschema.validate(json.loads(resp["choices"][0]["message"]["content"]), schema)

    def test_json_object_is_an_object(self):
        status, resp = post(self.port, "/v1/completions", {
            "prompt": "x", "max_tokens": 3, "temperature": 1, "response_format": {"type": "json_object"}})
        self.assertEqual(status, 200, resp)
        self.assertTrue(resp["choices"][0]["text"].startswith("{"), resp)

    def test_grammar_field(self):
        status, resp = post(self.port, "/v1/completions", {
            "prompt": "x", "max_tokens": 40, "temperature": 1,
            "grammar": 'root ::= ("yes" | "no") " " [0-9]{2}\n'})
        self.assertEqual(status, 200, resp)
        text = resp["choices"][0]["text"]
        self.assertRegex(text, r"^(yes|no) [0-9]{2}$")
        self.assertEqual(resp["choices"][0]["finish_reason"], "stop")

    def test_bad_requests_are_400_naming_the_problem(self):
        cases = [
            ({"grammar": "root ::= x\n"}, "undefined rule 'x'"),
            ({"grammar": "root ::= root \"a\"\n"}, "left-recursive"),
            ({"grammar": "root ::= [ab\n"}, "unterminated character class"),
            ({"json_schema": {"type": "object", "not": {}}}, "'not'"),
            ({"json_schema": {"type": "string", "pattern": "^(a)\\1$"}}, "backreference"),
            ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"multipleOf": 3}}}},
             "'multipleOf'"),
            ({"response_format": {"type": "json_object"}, "grammar": "root ::= \"a\"\n"}, "cannot be used together"),
            ({"json_schema": {}, "grammar": "root ::= \"a\"\n"}, "cannot be used together"),
            ({"response_format": {"type": "xml"}}, "not supported"),
        ]
        for extra, needle in cases:
            body = {"prompt": "x", "max_tokens": 5}
            body.update(extra)
            status, resp = post(self.port, "/v1/completions", body)
            self.assertEqual(status, 400, (extra, resp))
            self.assertIn(needle, resp["error"]["message"], extra)


if __name__ == "__main__":
    unittest.main()
