#!/usr/bin/env python3
"""
check_docs.py -- `make test` runs it: the documentation names only things that exist, and every
number it quotes says where it was measured.

    python3 dev/check_docs.py [FILE.md ...]     (default: README.md and doc/*.md)

For each Markdown file, outside fenced code blocks:
  1. every `backticked` path (a word with a '/' or a known file ending) names a file or a
     directory of the repository (globs like kernels/*.cuh must match something), or a program
     the Makefile builds (tests/bin/X, dev/bin/X: its rule, or its source tests/X.c or .cu, exists;
     a build without nvcc does not make the CUDA ones);
  2. every `backticked` C identifier with an underscore, or followed by "(", is defined in the
     sources (*.c, *.h, *.cu, *.cuh), as a function, macro, type or variable;
  3. every `backticked` flag of a trainer (`-x`, `-T 1`, `./train_mlp -m 784,10`) is one the
     flag table (run/args.h) or test_mlp's usage defines;
  4. every paragraph (a run of lines up to a blank line, a table row counting as its own
     paragraph) that quotes a measurement -- a number with a unit of time, speed, bandwidth or
     FLOP rate, a percentage of accuracy, an "x" speed-up -- also names where it comes from: an
     existing file under dev/results/ or dev/cuda/results/, or a `backticked` command that the
     repository can run (make ..., ./..., python3 dev/..., bash dev/...).
Inside fenced code blocks, the commands' paths are checked (rule 1) but numbers are not: they are
program output, shown as it looks.

Prints one line per problem (FILE:LINE: what), then "N passed, N failed" (files); exits 1 on any.
"""
import glob
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
ENDINGS = (".c", ".h", ".cu", ".cuh", ".py", ".sh", ".md", ".csv", ".log", ".txt", ".png", ".bin", ".json")
UNIT = (r"(?:ms|µs|us|ns|s/epoch|s per epoch|GB/s|TB/s|TFLOP/s|GFLOP/s|samples/s|k samples/s|M samples/s|"
        r"% of peak|% accuracy)")
# a number with a unit, a percentage, or a speed-up written as 10.2x
MEASURE = re.compile(r"\b\d+(?:[.,]\d+)?\s?(?:" + UNIT + r")|\b\d+(?:\.\d+)?\s?%|\b\d+(?:\.\d+)?x(?=[\s,;.)]|$)")
COMMAND = re.compile(r"`((?:make|\./|python3 dev/|bash dev/|PYTHONUNBUFFERED=1 python3 dev/)[^`]*)`")


def sources():
    text = []
    for pattern in ("*.c", "*.cu", "common/*.h", "data/*.h", "run/*.h", "kernels/*.cuh", "kernels/fast/**/*.cuh",
                    "kernels/fast/**/*.cu", "kernels/fast/**/*.h", "tests/*.c", "tests/*.h", "tests/*.cu", "dev/cuda/*.cu",
                    "dev/cuda/*.h", "dev/cuda/*.cuh"):
        for path in glob.glob(os.path.join(ROOT, pattern), recursive=True):
            with open(path, encoding="utf-8", errors="replace") as f:
                text.append(f.read())
    return "\n".join(text)


def flags():
    """The single-letter flags the programs take: the flag table, and test_mlp's own."""
    found = set()
    with open(os.path.join(ROOT, "run/args.h"), encoding="utf-8") as f:
        found.update(re.findall(r"\{'(\w)', \"", f.read()))
    test_mlp = os.path.join(ROOT, "test_mlp.cu")
    if os.path.exists(test_mlp):
        with open(test_mlp, encoding="utf-8") as f:
            text = f.read()
        found.update(re.findall(r'strcmp\(\w+(?:\[i\])?, "-(\w)"\)', text))
    found.add("h")
    return found


def path_exists(word):
    word = word.rstrip(".,:;)")
    if any(ch in word for ch in "*?["):
        return bool(glob.glob(os.path.join(ROOT, word)))
    if os.path.exists(os.path.join(ROOT, word)):
        return True
    # a binary that make builds from its source (tests/bin/NAME from tests/NAME.c or .cu, dev/bin/NAME
    # from dev/NAME.c or .cu), built here or not: a CPU-only build has no tests/bin/test_multi_gpu
    m = re.match(r"^(tests|dev)/bin/(?:san/)?(\w+)$", word)
    return bool(m) and any(os.path.exists(os.path.join(ROOT, m.group(1), m.group(2) + ext)) for ext in (".c", ".cu"))


def built_by_make(word):
    """A build output (tests/bin/X, dev/bin/X) that the Makefile makes, whether or not this build did
    (a CPU-only build makes no CUDA programs): its rule names it, or its source tests/X.c, .cu exists."""
    word = word.rstrip(".,:;)")
    m = re.match(r"^(tests|dev)/bin/([\w.\-]+)$", word)
    if not m:
        return False
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as f:
        if re.search(r"^" + re.escape(word) + r"\s*:", f.read(), re.M):
            return True
    return any(os.path.exists(os.path.join(ROOT, m.group(1), m.group(2) + ext)) for ext in (".c", ".cu"))


def looks_like_path(word):
    if " " in word or word.startswith(("-", "http", "$", "~")) or "=" in word or "://" in word:
        return False
    if word.startswith(("/usr", "/tmp", "/dev/", "/proc")):
        return False  # the system's, not the repository's
    if re.match(r"^[A-Z][A-Z_]*(/|$)", word):
        return False  # a placeholder the reader fills in: DIR/train/CLASS, FILE.csv
    return ("/" in word and re.match(r"^[\w.*\-/]+$", word) is not None) or word.endswith(ENDINGS)


def cites(text):
    """Whether a block of text names where its numbers come from."""
    if any(path_exists(p) for p in re.findall(r"(dev/(?:cuda/)?results/[\w.\-/*]+)", text)):
        return True
    return COMMAND.search(text) is not None


def check_file(md, src, known_flags, problems):
    rel = os.path.relpath(md, ROOT)
    with open(md, encoding="utf-8") as f:
        lines = f.read().split("\n")
    in_code = False
    blocks = []  # [first line number, text, is_table]: paragraphs and tables, outside code
    prev_blank = True
    for n, line in enumerate(lines, 1):
        if line.strip().startswith("```"):
            in_code = not in_code
            prev_blank = True
            continue
        if in_code:
            for word in re.findall(r"(?:^|\s)((?:dev/|tests/|data/|doc/|kernels/|common/|run/)[\w.\-/]+)", line):
                if looks_like_path(word) and not path_exists(word) and not built_by_make(word):
                    problems.append(f"{rel}:{n}: names {word}, which does not exist")
            continue
        if not line.strip():
            prev_blank = True
            continue
        if line.startswith("    ") and prev_blank:  # an indented code block: program output, shown as it is
            continue
        is_table = line.lstrip().startswith("|")
        if prev_blank or not blocks or blocks[-1][2] != is_table:
            blocks.append([n, line, is_table])
        else:
            blocks[-1][1] += " " + line
        prev_blank = False
        for code in re.findall(r"`([^`]+)`", line):
            words = code.split()
            first = words[0] if words else ""
            if looks_like_path(first) and not first.startswith("./"):
                if not path_exists(first) and not built_by_make(first):
                    problems.append(f"{rel}:{n}: names `{first}`, which does not exist")
            elif first.startswith("./"):
                binary = first[2:]
                made = {"train_mlp", "train_mlp_cpu", "train_mlp_fast", "test_mlp"}
                if binary not in made and not binary.startswith(("dev/", "tests/bin/")) and not path_exists(binary):
                    problems.append(f"{rel}:{n}: runs `{first}`, which nothing builds")
            ident = re.match(r"^([A-Za-z_]\w*)(\(.*\))?$", code)
            if ident and ("_" in ident.group(1) or ident.group(2)):
                if not re.search(r"\b" + re.escape(ident.group(1)) + r"\b", src):
                    problems.append(f"{rel}:{n}: names `{code}`, which no source file defines")
            for flag in re.findall(r"(?:^|\s)-(\w)(?=\s|$)", code):
                if flag not in known_flags and (first.startswith(("./train_mlp", "./test_mlp")) or code.startswith("-")):
                    problems.append(f"{rel}:{n}: names the flag -{flag}, which no trainer or test_mlp takes")
    for i, (n, text, is_table) in enumerate(blocks):
        plain = re.sub(r"`[^`]*`", "", text)
        m = MEASURE.search(plain)
        if not m:
            continue
        # a table's source may be named in the paragraph just before it (its caption)
        if cites(text) or (is_table and i > 0 and not blocks[i - 1][2] and cites(blocks[i - 1][1])):
            continue
        problems.append(f"{rel}:{n}: quotes a measurement ('{m.group(0)}') but names no result file or command "
                        f"it comes from")


def main():
    files = sys.argv[1:] or [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "doc", "*.md")))
    src = sources()
    known = flags()
    problems = []
    for md in files:
        check_file(os.path.abspath(md), src, known, problems)
    for p in problems:
        print(p)
    bad = {p.split(":")[0] for p in problems}
    print(f"{len(files)} files checked, {len(problems)} problems")
    print(f"{len(files) - len(bad)} passed, {len(bad)} failed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
