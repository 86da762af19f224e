#!/usr/bin/env python3
"""Writes tests/llm/tok_strings.json: the test strings of the tokenizer agreement tests
(tok_oracles.py), a few hundred, deterministic (a fixed seed, no external data).

Hand-picked cases (whitespace runs, digits, contractions in caps, code with tabs, special
tokens written in text, CJK, emoji with ZWJ and skin tones, combining marks, RTL) and
random mixes of the same pieces. Run again after changing it and check the file in:
    python3 tests/llm/tok_make_strings.py
"""
import json
import random
from pathlib import Path

FIXED = [
    "", " ", "  ", "   ", "\t", "\n", "\n\n\n", " \n \n", "\r\n", "Hello", " Hello", "Hello world",
    "Hello  world", "Hello   world  ", "hello\tworld", "  leading and trailing  ",
    "I'm", "I'M", "you'RE", "WE'LL", "they'VE", "she'D", "IT'S", "don't DON'T Don'T",
    "1", "12", "123", "1234", "12345", "1234567890", "3.14159", "1,000,000", "v1.2.3-rc4",
    "0x1F600", "2024-01-31T12:34:56Z", "+1 (555) 010-9999", "1e-10", "١٢٣٤٥", "一二三 123",
    "def f(x):\n\treturn x * 2\n", "if (a && b) { c++; }\n", "    indented = True",
    "for i in range(10):\n        print(i)", "<html><body class=\"x\">hi</body></html>",
    "SELECT * FROM t WHERE id = 42;", "#include <stdio.h>\nint main(void) { return 0; }",
    "a\u00a0b", "a\u2003b", "a\u3000b", "x\u200by", "tab\t\ttabs\t", "mixed \t \n space",
    "你好，世界！", "日本語のテキストです。", "한국어 텍스트", "中文English混合123",
    "😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "👩🏿‍💻 coding", "❤️🔥", "🇫🇷🇯🇵",
    "café", "cafe\u0301", "naïve résumé", "Ångström", "e\u0301\u0302\u0303", "Z\u0351\u0360a\u0363lgo",
    "مرحبا بالعالم", "שלום עולם", "עברית and English", "العربية ١٢٣",
    "Привет, мир!", "Γειά σου Κόσμε", "नमस्ते दुनिया", "สวัสดีชาวโลก", "ᚠᛇᚻ",
    "ǅungla ǈ ǋ", "ﬁﬂ ﬀ", "Ⅻ ½ ² ₃", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "\U0001F600\U0001F601\U0001F602",
    "<s>", "</s>", "<|endoftext|>", "<|im_start|>user\nhi<|im_end|>",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "<bos><start_of_turn>user\nhello<end_of_turn>", "[INST] hi [/INST]", "<unk>", "<pad>",
    "text<s>more</s>end", "<|endoftext|><|endoftext|>", "<｜User｜>hi<｜Assistant｜>",
    "...", "!!!", "???", "—–-", "«»„“", "\"quoted\"", "'single'", "a.b,c;d:e", "@#$%^&*()",
    "~`|\\", "ÀÁÂÃÄÅ", "ß ẞ", "İstanbul ı", "ﾊﾝｶｸ", "ＦＵＬＬ　ＷＩＤＴＨ",
]

PIECES = [
    "the", "The", "THE", " quick", "brown", "fox", "'s", "'LL", "n't", " ", "  ", "\t", "\n",
    "\n\n", "123", "4567", "9", "3.5", ",", ".", "!", "?", "(", ")", "{", "}", "->", "==", "_",
    "中文", "漢字", "かな", "カタカナ", "한글", "😀", "👍🏻", "👨‍💻", "🤷‍♀️", "é", "e\u0301",
    "a\u0308", "ñ", "ا", "لعربية", "ש", "עברית", "ру", "Ωμέγα", "ट", "ภาษา", "\u00a0",
    "<s>", "</s>", "<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<end_of_turn>", "x", "Y",
    "camelCase", "snake_case", "UPPER", "http://example.com/a?b=c", "#", "//", "/*", "*/",
]


def random_strings(n, seed=1234):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = rng.randint(1, 12)
        out.append("".join(rng.choice(PIECES) for _ in range(k)))
    return out


def main():
    strings = FIXED + random_strings(300 - len(FIXED))
    path = Path(__file__).with_name("tok_strings.json")
    path.write_text(json.dumps(strings, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    print(f"{path}: {len(strings)} strings")


if __name__ == "__main__":
    main()
