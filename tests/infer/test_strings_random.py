"""String tensors and the string operators against ONNX Runtime (npm onnxruntime-node 1.30,
tests/infer/ort_run.js), exactly: StringNormalizer (UTF-8 case mapping, empty strings,
stopwords compared with and without case), RegexFullMatch (anchors, Unicode classes),
StringSplit (maxsplit, the empty delimiter), StringConcat (broadcasting), Cast between
strings and numbers, and strings through Identity, Reshape, Squeeze, Unsqueeze, Concat,
Gather, Slice, Transpose, Flatten, Expand, Equal and Where. Refusals are checked by name.

The seeded random operators (RandomNormal, RandomUniform and their Like forms, Bernoulli,
Multinomial, training-mode Dropout) draw from accelkit's own generator (Philox4x32-10), so
their values are checked by statistics over 1e5 draws (mean, variance, rate), by
determinism with a seed and different streams for different seeds; shapes and types are
compared with ONNX Runtime's.

    AK_LIBRARY=build/libaccelkit.so PYTHONPATH=python python3 -m unittest test_strings_random
"""
import os
import sys
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))

import onnx  # noqa: E402  (Debian python3-onnx)
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as oh  # noqa: E402

from accelkit.inference import InferenceSession  # noqa: E402
from accelkit.onnxruntime import SessionOptions  # noqa: E402
from ort_case import OrtCase  # noqa: E402

NP_TO_TP = {np.dtype(np.float32): TP.FLOAT, np.dtype(np.float64): TP.DOUBLE,
            np.dtype(np.int64): TP.INT64, np.dtype(np.int32): TP.INT32,
            np.dtype(np.bool_): TP.BOOL}


def tp_of(a):
    return TP.STRING if a.dtype.kind in "USO" else NP_TO_TP[a.dtype]


def model(nodes, feeds, outputs, opset=20):
    """feeds: {name: example array} (graph inputs); outputs: names (types left open)."""
    g = oh.make_graph(nodes, "t",
                      [oh.make_tensor_value_info(n, tp_of(a), a.shape) for n, a in feeds.items()],
                      [onnx.ValueInfoProto(name=n) for n in outputs])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", opset)])
    m.ir_version = 8 if opset <= 18 else 9  # set by hand: onnx 1.12 knows IR 8 at most
    return m


def strings(*xs):
    return np.array(xs, dtype=object)


WORDS = strings("Straße", "", "ÉCOLE", "monday", "Monday", "naïve café", "ΣΊΣΥΦΟΣ", "x y")


class StringsTest(OrtCase):
    TMP_PREFIX = "ak-strings-"

    def check(self, m, name, feeds):
        """Every output equal to ONNX Runtime's, element for element."""
        path = self.save(m, name)
        got = InferenceSession(path).run(None, feeds)
        ort_feeds = {k: (v.astype(str) if v.dtype == object else v) for k, v in feeds.items()}
        want = self.ort(path, ort_feeds)
        self.assertEqual(len(got), len(want))
        for k, (g, w) in enumerate(zip(got, want)):
            msg = "%s output %d" % (name, k)
            self.assertEqual(g.shape, w.shape, msg)
            if w.dtype.kind == "U":
                self.assertEqual(g.dtype, object, msg)
                self.assertEqual(g.tolist(), w.astype(object).tolist(), msg)
            else:
                self.assertEqual(g.dtype, w.dtype, msg)
                np.testing.assert_array_equal(g, w, err_msg=msg)
        return got

    def normalizer(self, name, x, **attrs):
        # onnxruntime's default locale en_US.UTF-8 is not installed here; C.UTF-8 maps
        # case the same way (Unicode's simple mappings)
        attrs.setdefault("locale", "C.UTF-8")
        m = model([oh.make_node("StringNormalizer", ["x"], ["y"], **attrs)], {"x": x}, ["y"],
                  opset=17)
        return self.check(m, name, {"x": x})

    def test_normalizer(self):
        self.normalizer("lower", WORDS, case_change_action="LOWER")
        self.normalizer("upper", WORDS, case_change_action="UPPER")
        self.normalizer("none", WORDS)
        self.normalizer("stop_sensitive", WORDS, case_change_action="UPPER",
                        stopwords=["monday", "straße"], is_case_sensitive=1)
        self.normalizer("stop_insensitive", WORDS, case_change_action="LOWER",
                        stopwords=["MONDAY", "STRAßE", "école"], is_case_sensitive=0)
        self.normalizer("two_dim", WORDS.reshape(1, -1), case_change_action="UPPER",
                        stopwords=["x y"])
        [y] = self.normalizer("all_dropped", strings("a", "A"), stopwords=["a"])
        self.assertEqual(y.tolist(), [""])
        # en_US (and the default "") behave as C.UTF-8
        [want] = self.normalizer("c_utf8", WORDS, case_change_action="LOWER")
        for locale in ("en_US", ""):
            m = model([oh.make_node("StringNormalizer", ["x"], ["y"], case_change_action="LOWER",
                                    locale=locale)], {"x": WORDS}, ["y"], opset=17)
            got = InferenceSession(self.save(m, "locale")).run(None, {"x": WORDS})[0]
            self.assertEqual(got.tolist(), want.tolist())

    def test_normalizer_refusals(self):
        x = strings("a")
        m = model([oh.make_node("StringNormalizer", ["x"], ["y"], locale="tr_TR")], {"x": x},
                  ["y"], opset=17)
        self.refused(m, "locale_tr", {"x": x}, ["locale 'tr_TR'"])

    def regex(self, name, pattern, x):
        m = model([oh.make_node("RegexFullMatch", ["x"], ["y"], pattern=pattern)], {"x": x}, ["y"])
        self.check(m, name, {"x": x})

    def test_regex(self):
        x = strings("www.google.com", "www.facebook.com", "www.bbc.co.uk", "google.com", "",
                    "Ünïcödé", "abc123", "ABC", "a\nb")
        self.regex("domains", r"www\.[\w.-]+\.\bcom\b", x)
        self.regex("anchors", r"^[a-z]+\d*$", x)
        self.regex("unicode_letters", r"\p{L}+", x)
        self.regex("upper_class", r"\p{Lu}\p{Ll}*.*", x)
        self.regex("empty_pattern", "", x)
        self.regex("alternation", "abc|ABC|abc123", x)
        self.regex("dot_newline", "a.b", x)
        self.regex("two_dim", r".*o.*", x[:8].reshape(2, 4))

    def test_regex_refusal(self):
        x = strings("a")
        m = model([oh.make_node("RegexFullMatch", ["x"], ["y"], pattern="(ab")], {"x": x}, ["y"])
        self.refused(m, "bad_pattern", {"x": x}, ["pattern \"(ab\"", "cannot be compiled"])

    def split(self, name, x, **attrs):
        m = model([oh.make_node("StringSplit", ["x"], ["y", "n"], **attrs)], {"x": x}, ["y", "n"])
        self.check(m, name, {"x": x})

    def test_split(self):
        x = strings("a,b,,c", "", ",", "no delimiter", "ü,ö,ä,")
        self.split("comma", x, delimiter=",")
        self.split("comma_max1", x, delimiter=",", maxsplit=1)
        self.split("comma_max0", x, delimiter=",", maxsplit=0)
        self.split("multi_char", strings("a::b::c", "::", "a:b"), delimiter="::")
        w = strings("  hello   world ", "one", "", "   ", "a\tb\nc d", " ü  ö ")
        self.split("whitespace", w)
        self.split("empty_delimiter", w, delimiter="")
        self.split("whitespace_max1", w, maxsplit=1)
        self.split("two_dim", x[:4].reshape(2, 2), delimiter=",")
        self.split("all_empty", strings("", ""))

    def test_concat(self):
        x, y = strings("a", "", "ü"), strings("-", "ß", "")
        m = model([oh.make_node("StringConcat", ["x", "y"], ["z"])], {"x": x, "y": y}, ["z"])
        self.check(m, "concat", {"x": x, "y": y})
        y1 = strings("!")
        m = model([oh.make_node("StringConcat", ["x", "y"], ["z"])], {"x": x.reshape(3, 1),
                                                                      "y": y1}, ["z"])
        self.check(m, "concat_broadcast", {"x": x.reshape(3, 1), "y": y1})

    def test_cast(self):
        s = strings("1.5", "-0", "NaN", "INF", "-INF", "+INF", "1e-3", "  7", "0.1")
        m = model([oh.make_node("Cast", ["s"], ["f"], to=TP.FLOAT),
                   oh.make_node("Cast", ["s"], ["d"], to=TP.DOUBLE)], {"s": s}, ["f", "d"])
        self.check(m, "string_to_float", {"s": s})
        i = strings("12", "-7", "0", "9223372036854775807")
        m = model([oh.make_node("Cast", ["s"], ["i"], to=TP.INT64)], {"s": i}, ["i"])
        self.check(m, "string_to_int", {"s": i})
        n = np.array([0, -3, 42, 2**40], np.int64)
        m = model([oh.make_node("Cast", ["n"], ["s"], to=TP.STRING)], {"n": n}, ["s"])
        self.check(m, "int_to_string", {"n": n})
        # where onnxruntime's "%.8g" is also the shortest text that reads back
        v = [0.5, -2.25, 0.1, 1e-7, 3.4028235e38, np.nan, np.inf, -np.inf, 1.0, 100.0, 1e20,
             -0.0, 1 / 3, 123456789.0, 1e7, 123456.0]
        f = np.array(v, np.float32)
        m = model([oh.make_node("Cast", ["f"], ["s"], to=TP.STRING)], {"f": f}, ["s"])
        self.check(m, "float_to_string", {"f": f})
        # elsewhere the shortest text (the ONNX node tests' rule), not onnxruntime's digits
        f, d = np.array([0.0001, 0.3], np.float32), np.array([1 / 3, 0.1, 1e300, 2.5e-8])
        m = model([oh.make_node("Cast", ["f"], ["s"], to=TP.STRING),
                   oh.make_node("Cast", ["d"], ["t"], to=TP.STRING)], {"f": f, "d": d}, ["s", "t"])
        s, t = InferenceSession(self.save(m, "shortest")).run(None, {"f": f, "d": d})
        self.assertEqual(s.tolist(), ["0.0001", "0.3"])
        self.assertEqual(t.tolist(), ["0.3333333333333333", "0.1", "1e+300", "2.5e-08"])

    def test_cast_refusal(self):
        s = strings("abc")
        m = model([oh.make_node("Cast", ["s"], ["f"], to=TP.FLOAT)], {"s": s}, ["f"])
        self.refused(m, "bad_number", {"s": s}, ['"abc" is not a float32'])

    def test_tensor_ops(self):
        x = WORDS.reshape(2, 4)
        i = np.array([1, 0, 1], np.int64)
        axes = oh.make_tensor("axes", TP.INT64, [1], [0])
        nodes = [oh.make_node("Identity", ["x"], ["id"]),
                 oh.make_node("Reshape", ["x", "shape"], ["r"]),
                 oh.make_node("Unsqueeze", ["x", "axes"], ["u"]),
                 oh.make_node("Squeeze", ["u", "axes"], ["sq"]),
                 oh.make_node("Concat", ["x", "x"], ["c"], axis=1),
                 oh.make_node("Slice", ["x", "st", "en"], ["sl"]),
                 oh.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
                 oh.make_node("Flatten", ["x"], ["f"], axis=0),
                 oh.make_node("Expand", ["u", "big"], ["e"])]
        m = model(nodes, {"x": x}, ["id", "r", "u", "sq", "c", "sl", "t", "f", "e"])
        m.graph.initializer.extend([
            oh.make_tensor("shape", TP.INT64, [2], [4, 2]), axes,
            oh.make_tensor("st", TP.INT64, [2], [0, 1]), oh.make_tensor("en", TP.INT64, [2], [2, 3]),
            oh.make_tensor("big", TP.INT64, [3], [3, 2, 4])])
        self.check(m, "tensor_ops", {"x": x})
        # Gather against numpy: onnxruntime-node 1.30 gathers strings wrongly (rows of
        # [[a, b], [c, d]] by [1, 0, 1] come back as [[c, ""], [a, ""], [c, ""]])
        m = model([oh.make_node("Gather", ["x", "i"], ["g"], axis=0),
                   oh.make_node("Gather", ["x", "i"], ["g1"], axis=1)], {"x": x, "i": i},
                  ["g", "g1"])
        g, g1 = InferenceSession(self.save(m, "gather")).run(None, {"x": x, "i": i})
        self.assertEqual(g.tolist(), np.take(x, i, axis=0).tolist())
        self.assertEqual(g1.tolist(), np.take(x, i, axis=1).tolist())

    def test_string_constant(self):
        c = oh.make_tensor("c", TP.STRING, [2], [b"k\xc3\xa9", b""])
        x = strings("a", "b")
        m = model([oh.make_node("StringConcat", ["x", "c"], ["y"])], {"x": x}, ["y"])
        m.graph.initializer.append(c)
        self.check(m, "string_initializer", {"x": x})

    def test_equal_where(self):
        x, y = strings("a", "", "ü", "b"), strings("a", "", "u", "B")
        c = np.array([True, False, True, False])
        nodes = [oh.make_node("Equal", ["x", "y"], ["e"]),
                 oh.make_node("Equal", ["x", "k"], ["ek"]),
                 oh.make_node("Where", ["c", "x", "y"], ["w"]),
                 oh.make_node("Where", ["e", "k", "y"], ["wk"])]
        m = model(nodes, {"x": x, "y": y, "c": c}, ["e", "ek", "w", "wk"])
        m.graph.initializer.append(oh.make_tensor("k", TP.STRING, [1], [b"a"]))
        self.check(m, "equal_where", {"x": x, "y": y, "c": c})

    def test_folded_strings_saved(self):
        # a string computed from constants is folded at creation; the optimized model
        # written by the session keeps it as a string initializer
        c = oh.make_tensor("c", TP.STRING, [2], [b"ab", b"\xc3\xa9"])
        x = strings("x", "y")
        m = model([oh.make_node("StringNormalizer", ["c"], ["u"], case_change_action="UPPER"),
                   oh.make_node("StringConcat", ["x", "u"], ["y"])], {"x": x}, ["y"])
        m.graph.initializer.append(c)
        out = os.path.join(self.tmp, "folded_opt.onnx")
        so = SessionOptions()
        so.optimized_model_filepath = out
        want = InferenceSession(self.save(m, "folded"), so).run(None, {"x": x})[0]
        self.assertEqual(want.tolist(), ["xAB", "yÉ"])
        self.assertEqual([n.op_type for n in onnx.load(out).graph.node], ["StringConcat"])
        self.assertEqual(InferenceSession(out).run(None, {"x": x})[0].tolist(), want.tolist())

    def test_refused_operator(self):
        x = strings("a", "b")
        reps = np.array([2], np.int64)
        m = model([oh.make_node("Tile", ["x", "r"], ["y"])], {"x": x, "r": reps}, ["y"])
        self.refused(m, "tile_strings", {"x": x, "r": reps},
                     ["Tile", "string tensors are not supported by this operator"])


class RandomTest(OrtCase):
    TMP_PREFIX = "ak-random-"
    N = 100000

    def run_model(self, m, name, feeds=None):
        path = self.save(m, name)
        return path, InferenceSession(path).run(None, feeds or {})

    def same_types_as_ort(self, path, got, feeds=None):
        want = self.ort(path, feeds or {})
        for g, w in zip(got, want):
            self.assertEqual(g.shape, w.shape)
            self.assertEqual(g.dtype, w.dtype)

    def test_normal_uniform(self):
        n = self.N
        nodes = [oh.make_node("RandomNormal", [], ["a"], shape=[n], mean=2.0, scale=3.0, seed=1.0),
                 oh.make_node("RandomUniform", [], ["b"], shape=[n // 10, 10], low=-1.0, high=3.0,
                              seed=1.0, dtype=TP.DOUBLE),
                 oh.make_node("RandomNormal", [], ["c"], shape=[4], seed=2.0)]
        m = model(nodes, {}, ["a", "b", "c"])
        path, (a, b, c) = self.run_model(m, "normal_uniform")
        self.same_types_as_ort(path, [a, b, c])
        self.assertAlmostEqual(a.mean(), 2.0, delta=0.05)
        self.assertAlmostEqual(a.var(), 9.0, delta=0.2)
        self.assertAlmostEqual(b.mean(), 1.0, delta=0.03)
        self.assertAlmostEqual(b.var(), 16 / 12, delta=0.03)
        self.assertTrue(b.min() >= -1.0 and b.max() < 3.0)
        # the same seed gives the same draws in another session; another seed others
        _, (a2, b2, c2) = self.run_model(m, "normal_uniform")
        np.testing.assert_array_equal(a, a2)
        np.testing.assert_array_equal(b, b2)
        self.assertFalse(np.array_equal(a[:4], c))
        # a session's second run goes on in the stream
        s = InferenceSession(path)
        first, second = s.run(["a"], {})[0], s.run(["a"], {})[0]
        np.testing.assert_array_equal(first, a)
        self.assertFalse(np.array_equal(first, second))

    def test_threads_do_not_matter(self):
        m = model([oh.make_node("RandomUniform", [], ["a"], shape=[1000], seed=5.0)], {}, ["a"])
        path = self.save(m, "threads")
        one = InferenceSession(path, threads=1).run(None, {})[0]
        two = InferenceSession(path, threads=2).run(None, {})[0]
        np.testing.assert_array_equal(one, two)

    def test_unseeded_differs(self):
        m = model([oh.make_node("RandomUniform", [], ["a"], shape=[64])], {}, ["a"])
        path = self.save(m, "unseeded")
        a = InferenceSession(path).run(None, {})[0]
        b = InferenceSession(path).run(None, {})[0]
        self.assertFalse(np.array_equal(a, b))

    def test_never_merged_or_folded(self):
        # two identical unseeded nodes stay two (the optimizer merges duplicates), and a
        # node whose input is a constant is not folded (a second run draws again)
        nodes = [oh.make_node("RandomUniform", [], ["a"], shape=[16]),
                 oh.make_node("RandomUniform", [], ["b"], shape=[16]),
                 oh.make_node("Sub", ["a", "b"], ["d"]),
                 oh.make_node("RandomNormalLike", ["c"], ["n"], seed=1.0)]
        m = model(nodes, {}, ["d", "n"])
        m.graph.initializer.append(oh.make_tensor("c", TP.FLOAT, [8], [0] * 8))
        s = InferenceSession(self.save(m, "merge_fold"))
        d, n1 = s.run(None, {})
        n2 = s.run(None, {})[1]
        self.assertTrue(np.any(d != 0))
        self.assertFalse(np.array_equal(n1, n2))

    def test_like_and_bernoulli(self):
        x = np.full((self.N // 100, 100), 0.3, np.float32)
        nodes = [oh.make_node("RandomUniformLike", ["x"], ["u"], seed=3.0),
                 oh.make_node("RandomNormalLike", ["x"], ["n"], dtype=TP.DOUBLE, seed=3.0),
                 oh.make_node("Bernoulli", ["x"], ["b"], seed=4.0),
                 oh.make_node("Bernoulli", ["x"], ["bi"], dtype=TP.INT32, seed=4.0)]
        m = model(nodes, {"x": x}, ["u", "n", "b", "bi"], opset=15)
        path, (u, n, b, bi) = self.run_model(m, "like_bernoulli", {"x": x})
        self.same_types_as_ort(path, [u, n, b, bi], {"x": x})
        self.assertAlmostEqual(u.mean(), 0.5, delta=0.01)
        self.assertAlmostEqual(n.mean(), 0.0, delta=0.02)
        self.assertAlmostEqual(n.var(), 1.0, delta=0.03)
        self.assertAlmostEqual(b.mean(), 0.3, delta=0.01)
        self.assertTrue(set(np.unique(b)) <= {0.0, 1.0})
        np.testing.assert_array_equal(b.astype(np.int32), bi)  # same seed, same draws

    def test_multinomial(self):
        x = np.log(np.array([[0.1, 0.2, 0.7], [0.5, 0.5, 1e-9]], np.float32))
        m = model([oh.make_node("Multinomial", ["x"], ["y"], sample_size=self.N // 2, seed=7.0,
                                dtype=TP.INT64)], {"x": x}, ["y"], opset=15)
        path, (y,) = self.run_model(m, "multinomial", {"x": x})
        self.same_types_as_ort(path, [y], {"x": x})
        rates = np.bincount(y[0], minlength=3) / y.shape[1]
        np.testing.assert_allclose(rates, [0.1, 0.2, 0.7], atol=0.01)
        self.assertAlmostEqual((y[1] == 0).mean(), 0.5, delta=0.01)

    def test_dropout_training(self):
        x = np.ones((self.N,), np.float32)
        r, t = np.array(0.25, np.float32), np.array(True)
        m = model([oh.make_node("Dropout", ["x", "r", "t"], ["y", "mask"], seed=9)],
                  {"x": x, "r": r, "t": t}, ["y", "mask"], opset=13)
        feeds = {"x": x, "r": r, "t": t}
        path, (y, mask) = self.run_model(m, "dropout", feeds)
        self.same_types_as_ort(path, [y, mask], feeds)
        self.assertAlmostEqual(mask.mean(), 0.75, delta=0.01)
        np.testing.assert_array_equal(y, np.where(mask, np.float32(1 / 0.75), 0))
        off = InferenceSession(path).run(None, {"x": x, "r": r, "t": np.array(False)})
        np.testing.assert_array_equal(off[0], x)
        self.assertTrue(off[1].all())


if __name__ == "__main__":
    unittest.main()
