#!/usr/bin/python3
"""Checks that the docs and comments stay true to the tree: every repository path named
in README.md, docs/*.md, or a comment of src/, include/, tests/, scripts/, bench/,
python/ and cmake/ exists, and no title or comment refers to the tracker ("issue N").
Also that the kit is self-contained: no code outside the tokenizer tests names a path
outside the repository (../shared, /work/).
Run from anywhere: tests/docs/check_docs.py [repo-root]."""
import re
import sys
from pathlib import Path

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[2])
TOP = ("src", "tests", "scripts", "docs", "bench", "python", "include", "cmake", "data",
       "examples", ".ci")
# a path: a top-level folder, then name characters; placeholders (<x>, {a,b}, *, N)
# are checked only up to the part before them
PATH_RE = re.compile(r"(?<![\w./-])(?:%s)/[\w./*{},<>-]*[\w*}>]" % "|".join(re.escape(t) for t in TOP))
OUTSIDE_RE = re.compile(r"\.\./shared\b|/work/")
# the tokenizer tests read llama.cpp's vocabulary test files from ../shared/llm/vocab
OUTSIDE_ALLOWED = {"tests/llm/shared_vocab.h", "tests/llm/test_tokenizer.c", "tests/llm/test_hf.c"}
ISSUE_RE = re.compile(r"\bissue ?#?\d+\b|\bissues #?\d+(?:,| and)", re.I)
CODE_EXT = {".c", ".h", ".def", ".py", ".sh", ".cmake", ".txt", ".js", ".proto"}
COMMENT_RE = {  # the parts of a source line that are prose
    "c": re.compile(r"/\*.*?(?:\*/|$)|//.*$|^\s*\*.*$"),
    "hash": re.compile(r"#.*$"),
}


def candidate_files():
    yield ROOT / "README.md"
    yield from sorted((ROOT / "docs").glob("*.md"))
    for top in ("src", "include", "tests", "scripts", "bench", "python", "cmake"):
        for p in sorted((ROOT / top).rglob("*")):
            if p.is_file() and (p.suffix in CODE_EXT or (p.suffix == "" and top == "scripts")):
                yield p
    yield ROOT / "CMakeLists.txt"
    yield ROOT / "Makefile"


def prose(path, line):
    if path.suffix == ".md":
        return line
    style = "c" if path.suffix in {".c", ".h", ".def", ".js", ".proto"} else "hash"
    return " ".join(m.group(0) for m in COMMENT_RE[style].finditer(line))


def path_exists(token):
    token = token.rstrip(".,:;)")
    parts = []
    for part in token.split("/"):
        if re.search(r"[*{}<>]|^[A-Z_]+$|\.\.\.", part):
            break  # a pattern or placeholder: check the folder before it
        parts.append(part)
    if not parts:
        return True
    p = ROOT.joinpath(*parts)
    return p.exists() or any(ROOT.glob("/".join(parts) + ".*"))


def main():
    bad = []
    for path in candidate_files():
        if not path.exists():
            continue
        rel = path.relative_to(ROOT)
        if rel.parts[:2] == ("tests", "docs"):
            continue  # this checker names patterns, not paths
        for no, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if path.suffix != ".md" and str(rel) not in OUTSIDE_ALLOWED and OUTSIDE_RE.search(line):
                bad.append(f"{rel}:{no}: names a path outside the repository")
            text = prose(path, line)
            if not text:
                continue
            for m in PATH_RE.finditer(text):
                if re.search(r"ctest `?$", text[:m.start()]):
                    continue  # a ctest test's name, not a path
                if not path_exists(m.group(0)):
                    bad.append(f"{rel}:{no}: names {m.group(0)}, which does not exist")
            for m in ISSUE_RE.finditer(text):
                bad.append(f"{rel}:{no}: refers to the tracker ('{m.group(0)}'); say what, not which issue")
    for b in bad:
        print(b)
    print(f"check_docs: {len(bad)} problem(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
