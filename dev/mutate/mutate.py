#!/usr/bin/env python3
"""
dev/mutate/mutate.py: mutation testing of mlp.cu (issue 20). A mutant is the source with one small
change that a reviewer would call a bug; a test suite that passes on it has a hole. Each mutant is
applied to a COPY of the tree (never the working tree), rebuilt and tested:

    killed     a test failed (or crashed, or ran past its time limit)
    survived   every test passed: a hole, or an equivalent mutant
    equivalent survived, and dev/mutate/equivalent.txt says why no test can tell it apart (not counted)
    invalid    it does not build: a slip of the list, not a mutant (not counted; fix or regenerate it)

    python3 dev/mutate/mutate.py cpu [-j N] [--only ID,ID] [--skip TEST,TEST] [--report FILE]
        the CPU mutants (cpu_mutations.txt, written by hand for the domain, and cpu_generated.txt,
        sampled from universalmutator), each against the CPU test binaries of `make test NVCC=none`
        (tests/bin/test_*, built as the Makefile builds them; and test_properties under ASan/UBSan):
        test_properties first, the slow ones last, stopping at the first that fails. A survivor has
        passed all of them. --skip test_properties,san/test_properties: the suite as it was before it.
    python3 dev/mutate/mutate.py gpu-check [-j N]
        builds every GPU mutant (gpu_mutations.txt) here with nvcc (no GPU needed): they must all build
    python3 dev/mutate/mutate.py generate [--seed S]
        samples cpu_generated.txt from universalmutator (pip install universalmutator), reproducibly
    python3 dev/mutate/mutate.py gpu-visit OUT [-j N] [--budget S]
        (on a GPU machine; what dev/mutate/gpu_visit.sh runs) builds and runs every GPU mutant
    python3 dev/mutate/mutate.py list|show ID|apply ID DIR|gpu-plan
        the mutants; one as a diff; one applied to a copy of the tree in DIR; the GPU mutants with what
        each needs rebuilt

The lists: blocks of `key: value` lines, one block per mutant, blank lines between (README.md).
"""
import argparse
import concurrent.futures as cf
import difflib
import glob
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
LISTS = {"cpu": ["cpu_mutations.txt", "cpu_generated.txt"], "gpu": ["gpu_mutations.txt"]}
NL = "<NL>"  # a line break inside find/replace

# The CPU test binaries, cheapest and most likely to kill first (a mutant stops at its first failure);
# last, test_properties again under AddressSanitizer and UBSan (clang), as `make test` runs it, for what
# only a sanitizer sees (a write past a buffer that happens to land in the allocator's slack)
CPU_TESTS = ["test_properties", "test_gradcheck", "test_fuzz_regressions", "test_cpu", "test_checkpoint",
             "test_run", "test_data", "san/test_properties"]


def test_cmd(t):
    """(make targets, command) of a CPU test: a sanitizer build runs the sanitizer build of the trainer"""
    if t.startswith("san/"):
        return ["tests/bin/san/train_mlp_cpu", f"tests/bin/{t}"], [f"tests/bin/{t}", "tests/bin/san/train_mlp_cpu"]
    return ["train_mlp_cpu", f"tests/bin/{t}"], [f"tests/bin/{t}", "./train_mlp_cpu"]
# what the copies leave out: build outputs, run outputs, the repository's own history, and the
# git-ignored carried copies (datasets and stb's headers are used where they are: build_env, link_data)
SKIP_DIRS = {".git", "build", "logs", ".old", ".whl", ".data", ".stb", "__pycache__"}
SKIP_PATHS = {"tests/bin", "dev/out", "dev/cuda/bin"}
SKIP_FILES = {"train_mlp", "train_mlp_cpu", "train_mlp_fast", "test_mlp"}


class MutantError(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# the lists

def parse_list(path):
    """Blocks of `key: value` lines separated by blank lines; '#' lines are comments."""
    recs, cur = [], {}
    with open(path) as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.rstrip("\n")
            if line.startswith("#"):
                continue
            if not line.strip():
                if cur:
                    recs.append(cur)
                    cur = {}
                continue
            m = re.match(r"([a-z_]+):\s?(.*)$", line)
            if not m:
                raise MutantError(f"{path}:{lineno}: not a 'key: value' line: {line!r}")
            key, val = m.group(1), m.group(2)
            if not cur:
                cur["_where"] = f"{os.path.relpath(path, ROOT)}:{lineno}"
            cur[key] = val
    if cur:
        recs.append(cur)
    for r in recs:
        for k in ("id", "file", "find", "replace", "kind"):
            if k not in r:
                raise MutantError(f"{r['_where']}: mutant without '{k}:'")
    return recs


def load_mutants(which):
    recs = []
    for name in LISTS[which]:
        path = os.path.join(HERE, name)
        if os.path.exists(path):
            for r in parse_list(path):
                r["list"] = name
                recs.append(r)
    ids = [r["id"] for r in recs]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise MutantError(f"duplicate mutant ids: {', '.join(dup)}")
    return recs


def load_equivalent():
    """equivalent.txt: `ID: why no test can tell it from the original`, one a line"""
    eq = {}
    path = os.path.join(HERE, "equivalent.txt")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith("#"):
                    mid, _, why = line.partition(":")
                    eq[mid.strip()] = why.strip()
    return eq


def apply_text(text, rec):
    """The source text with rec's change. `find` must occur once (after the first line containing
    `after`, when given, where its first occurrence counts); with `line`, the occurrence nearest that
    line is taken. Returns (new text, line number changed)."""
    find = rec["find"].replace(NL, "\n")
    repl = rec["replace"].replace(NL, "\n")
    start = 0
    if rec.get("after"):
        a = text.find(rec["after"])
        if a < 0:
            raise MutantError(f"{rec['id']}: 'after' text not found in {rec['file']}: {rec['after']!r}")
        start = a
    hits = [m.start() for m in re.finditer(re.escape(find), text)]
    hits = [h for h in hits if h >= start]
    if not hits:
        raise MutantError(f"{rec['id']}: 'find' text not found in {rec['file']}: {find!r}")
    if rec.get("after"):
        pos = hits[0]
    elif len(hits) == 1:
        pos = hits[0]
    elif rec.get("line"):
        want = int(rec["line"])
        pos = min(hits, key=lambda h: abs(text.count("\n", 0, h) + 1 - want))
    else:
        raise MutantError(f"{rec['id']}: 'find' text occurs {len(hits)} times in {rec['file']}: give 'after' or 'line'")
    new = text[:pos] + repl + text[pos + len(find):]
    if new == text:
        raise MutantError(f"{rec['id']}: the replacement changes nothing")
    return new, text.count("\n", 0, pos) + 1


def apply_to_tree(tree, rec):
    path = os.path.join(tree, rec["file"])
    with open(path) as f:
        old = f.read()
    new, line = apply_text(old, rec)
    with open(path, "w") as f:
        f.write(new)
    return old, line


def diff_of(rec, root=ROOT):
    path = os.path.join(root, rec["file"])
    with open(path) as f:
        old = f.read()
    new, _ = apply_text(old, rec)
    return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), "a/" + rec["file"],
                                        "b/" + rec["file"], n=1))


# ---------------------------------------------------------------------------------------------
# copies of the tree

def tree_files(root):
    """The files a copy needs: git's tracked and untracked-but-not-ignored files where git works,
    else every file but the build and run outputs."""
    try:
        out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root, check=True,
                             capture_output=True).stdout.decode()
        files = [f for f in out.split("\0") if f and os.path.isfile(os.path.join(root, f))]
        if files:
            return files
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    for d, dirs, names in os.walk(root):
        rel = os.path.relpath(d, root)
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS and os.path.normpath(os.path.join(rel, x)) not in SKIP_PATHS]
        for n in names:
            p = os.path.normpath(os.path.join(rel, n))
            if p not in SKIP_FILES:
                files.append(p)
    return files


def copy_tree(src, dst):
    os.makedirs(dst, exist_ok=True)
    for f in tree_files(src):
        os.makedirs(os.path.join(dst, os.path.dirname(f)), exist_ok=True)
        shutil.copy2(os.path.join(src, f), os.path.join(dst, f))


def build_env(env=None):
    """The environment for make: where libstb-dev is not installed, the stb headers carried in .stb/
    (make STB_INCLUDE=.stb), by absolute path, so that every copy builds with them"""
    env = dict(env or os.environ)
    if not os.path.exists("/usr/include/stb/stb_image.h") and os.path.exists(os.path.join(ROOT, ".stb", "stb_image.h")):
        env.setdefault("STB_INCLUDE", os.path.join(ROOT, ".stb"))
    return env


def link_data(tree):
    """The datasets the tests look for (git-ignored, so not copied), linked into a copy"""
    for d in (".data", "data/fashion-mnist", "data/mnist"):
        src, dst = os.path.join(ROOT, d), os.path.join(tree, d)
        if os.path.isdir(src) and not os.path.exists(dst):
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.symlink(src, dst)


def run(cmd, cwd, timeout=None, env=None):
    """(exit code, output); exit code 'timeout' when it ran past timeout seconds"""
    try:
        p = subprocess.run(cmd, cwd=cwd, shell=isinstance(cmd, str), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=timeout, env=env)
        return p.returncode, p.stdout.decode(errors="replace")
    except subprocess.TimeoutExpired as e:
        return "timeout", (e.stdout or b"").decode(errors="replace")
    except OSError as e:  # (no such program)
        return 127, str(e)


def first_failure(output):
    for line in output.splitlines():
        s = line.strip()
        if s.startswith("FAIL") or s.startswith("NOT OK") or s.startswith("error:") or "AddressSanitizer" in s:
            return s[:200]
    lines = [l for l in output.splitlines() if l.strip()]
    return lines[-1][:200] if lines else "(no output)"


# ---------------------------------------------------------------------------------------------
# the CPU run

def make_cmd(targets, jobs):
    return ["make", "--no-print-directory", "-s", f"-j{jobs}", "NVCC=none"] + targets


class CpuRunner:
    def __init__(self, args):
        self.args = args
        self.work = tempfile.mkdtemp(prefix="mlp_mutate_")
        self.env = build_env()
        if args.jobs > 1:
            self.env["OMP_NUM_THREADS"] = "1"  # the workers share the cores
        self.limits = {}
        self.lock = threading.Lock()

    def log(self, msg):
        with self.lock:
            print(msg, flush=True)

    def prepare(self):
        base = os.path.join(self.work, "base")
        self.log(f"copying the tree to {base} and building it (make NVCC=none)")
        copy_tree(ROOT, base)
        link_data(base)
        self.tests = [t for t in CPU_TESTS if t not in self.args.skip.split(",")]
        if not shutil.which("clang"):
            self.log("  (no clang here: the sanitizer build of test_properties is left out)")
            self.tests = [t for t in self.tests if not t.startswith("san/")]
        targets = sorted({x for t in self.tests for x in test_cmd(t)[0]})
        rc, out = run(make_cmd(targets, os.cpu_count() or 2), base, env=self.env)
        if rc != 0:
            sys.exit(f"error: the unmutated tree does not build:\n{out[-3000:]}")
        for t in self.tests:  # the unmutated tree must pass, and its times set each test's limit
            for attempt in range(2):  # (one retry: test_run's signal checks can lose a race on a busy machine)
                t0 = time.time()
                rc, out = run(test_cmd(t)[1], base, env=self.env)
                dt = time.time() - t0
                if rc == 0:
                    break
            if rc != 0:
                sys.exit(f"error: {t} fails on the unmutated tree (the mutation run would mean nothing): "
                         f"{first_failure(out)}")
            self.limits[t] = max(60.0, 5 * dt)
            self.log(f"  {t:22s} passes on the unmutated tree in {dt:5.1f} s (limit for a mutant {self.limits[t]:.0f} s)")
        self.workers = []
        for k in range(self.args.jobs):
            w = os.path.join(self.work, f"w{k}")
            shutil.copytree(base, w, symlinks=True)
            self.workers.append(w)
        self.free = list(self.workers)

    def one(self, rec):
        with self.lock:
            w = self.free.pop()
        t0 = time.time()
        try:
            old, line = apply_to_tree(w, rec)
        except MutantError as e:
            with self.lock:
                self.free.append(w)
            return {"status": "invalid", "by": "", "detail": str(e), "s": 0}
        path = os.path.join(w, rec["file"])
        res = {"status": "survived", "by": "", "detail": f"{rec['file']}:{line}"}
        try:
            for t in self.tests:
                targets, cmd = test_cmd(t)
                rc, out = run(make_cmd(targets, 1), w, env=self.env)
                if rc != 0:
                    err = [l for l in out.splitlines() if "error" in l]
                    res = {"status": "invalid", "by": "build", "detail": (err[0] if err else out[-300:]).strip()[:200]}
                    break
                rc, out = run(cmd, w, timeout=self.limits[t], env=self.env)
                if rc != 0 and rc != "timeout" and not (isinstance(rc, int) and rc > 128):
                    # a failed check, once more: a mutant fails every time, a race lost on a busy machine
                    # (test_run's Ctrl-C timing) does not; killed only when it fails twice
                    rc2, out2 = run(cmd, w, timeout=self.limits[t], env=self.env)
                    if rc2 == 0:
                        self.log(f"  ({rec['id']}: {t} failed once and passed when run again: {first_failure(out)})")
                        continue
                if rc == "timeout":
                    res = {"status": "killed", "by": t, "detail": f"ran past its {self.limits[t]:.0f} s limit"}
                    break
                if rc != 0:
                    sig = f" (signal {rc - 128})" if isinstance(rc, int) and rc > 128 else ""
                    res = {"status": "killed", "by": t, "detail": first_failure(out) + sig}
                    break
        finally:
            with open(path, "w") as f:  # back to the original (newer than every binary: all rebuild)
                f.write(old)
            with self.lock:
                self.free.append(w)
        res["s"] = time.time() - t0
        return res


def report_lines(recs, results, eq, title):
    lines, counts = [], {"killed": 0, "survived": 0, "equivalent": 0, "invalid": 0}
    by_test = {}
    w = max(len(r["id"]) for r in recs)
    for r in recs:
        res = results.get(r["id"])
        if res is None:
            continue
        st = res["status"]
        if st == "survived" and r["id"] in eq:
            st = "equivalent"
            res["detail"] = eq[r["id"]]
        counts[st] += 1
        if st == "killed":
            by_test[res["by"]] = by_test.get(res["by"], 0) + 1
        lines.append(f"{r['id']:{w}s}  {st:10s} {res['by']:22s} {res['detail']}")
    counted = counts["killed"] + counts["survived"]
    score = 100.0 * counts["killed"] / counted if counted else 0.0
    hand = sum(1 for r in recs if r["id"] in results and r["list"] != "cpu_generated.txt")
    summary = [
        f"{title}: {len(results)} mutants ({hand} hand-written, {len(results) - hand} from universalmutator)",
        f"  killed {counts['killed']}, survived {counts['survived']}, equivalent {counts['equivalent']} (not counted), "
        f"invalid {counts['invalid']} (not counted)",
        f"  mutation score: {counts['killed']} of {counted} = {score:.1f}%",
        "  killed by: " + ", ".join(f"{t} {n}" for t, n in sorted(by_test.items(), key=lambda x: -x[1])),
    ]
    return lines, summary


def cmd_cpu(args):
    recs = load_mutants("cpu")
    if args.only:
        want = set(args.only.split(","))
        recs = [r for r in recs if r["id"] in want]
    eq = load_equivalent()
    runner = CpuRunner(args)
    runner.prepare()
    results = {}
    t0 = time.time()
    with cf.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futs = {pool.submit(runner.one, r): r for r in recs}
        for n, fut in enumerate(cf.as_completed(futs), 1):
            r = futs[fut]
            res = fut.result()
            results[r["id"]] = res
            runner.log(f"[{n:3d}/{len(recs)}] {r['id']:34s} {res['status']:9s} {res['by']:18s} {res['s']:5.0f} s  "
                       f"{res['detail'][:90]}")
    lines, summary = report_lines(recs, results, eq, "CPU mutation run")
    text = "\n".join(summary) + f"\n  ({time.time() - t0:.0f} s, {args.jobs} workers)\n\n" + "\n".join(lines) + "\n"
    print("\n" + text)
    os.makedirs(os.path.dirname(os.path.abspath(args.report)), exist_ok=True)
    with open(args.report, "w") as f:
        f.write(text)
    print(f"report: {args.report}")
    if not args.keep:
        shutil.rmtree(runner.work, ignore_errors=True)
    else:
        print(f"work directory kept: {runner.work}")
    return 0


# ---------------------------------------------------------------------------------------------
# the GPU mutants: what each needs, and building them here

FAST_SOURCES = sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "kernels/fast/matmul/*.cu")))


def fast_object_inputs(root=ROOT):
    """The files the fast objects (build/fast/*.o) are compiled from: a mutant of any of them
    rebuilds those objects; any other mutant can share the unmutated tree's objects. Found by
    following the #include lines (the Makefile's own rule is coarser: it rebuilds them on any kernel)."""
    seen, todo = set(), list(FAST_SOURCES)
    while todo:
        f = os.path.normpath(todo.pop())
        if f in seen or not os.path.exists(os.path.join(root, f)):
            continue
        seen.add(f)
        with open(os.path.join(root, f)) as fh:
            for inc in re.findall(r'^\s*#\s*include\s+"([^"]+)"', fh.read(), re.M):
                todo.append(os.path.join(os.path.dirname(f), inc))
    return seen


def gpu_needs(rec, fast_inputs):
    """(rebuild the fast objects?, the binaries to build, the tests to run) for a GPU mutant.
    Mutants of a trainer's main() (`tests: trainer` in the list) are run through test_properties with
    the trainer binary; all others through test_mlp, which includes both trainers' model code."""
    fast = os.path.normpath(rec["file"]) in fast_inputs
    if rec.get("tests") == "trainer":
        binary = "train_mlp_fast" if rec["file"] == "train_mlp_fast.cu" else "train_mlp"
        return fast, [binary], ["test_properties"]
    return fast, ["test_mlp"], ["test_mlp"]


def cmd_gpu_plan(args):
    fast_inputs = fast_object_inputs()
    for r in load_mutants("gpu"):
        fast, targets, tests = gpu_needs(r, fast_inputs)
        print(f"{r['id']} {'fast' if fast else 'shared'} {','.join(targets)} {','.join(tests)}")
    return 0


def cmd_gpu_check(args):
    """Builds every GPU mutant here (nvcc needs no GPU): the targets gpu_visit.sh will build, with the
    Makefile's flags for sm_90 (GPU_ARCH=90, as on an H100 or H200). A mutant that does not build is
    invalid: fix it in the list."""
    recs = load_mutants("gpu")
    if args.only:
        want = set(args.only.split(","))
        recs = [r for r in recs if r["id"] in want]
    fast_inputs = fast_object_inputs()
    work = tempfile.mkdtemp(prefix="mlp_mutate_gpu_")
    base = os.path.join(work, "base")
    copy_tree(ROOT, base)
    print(f"building the unmutated fast objects in {base} ...", flush=True)
    objs = [f"build/fast/{os.path.basename(s)[:-3]}.o" for s in FAST_SOURCES]
    env = build_env()
    rc, out = run(["make", "--no-print-directory", "-s", f"-j{args.jobs}", "GPU_ARCH=90"] + objs, base, env=env)
    if rc != 0:
        sys.exit(f"error: the unmutated fast objects do not build:\n{out[-2000:]}")
    lock = threading.Lock()
    results = {}

    def one(r):
        d = os.path.join(work, r["id"])
        shutil.copytree(base, d, symlinks=True)
        try:
            apply_to_tree(d, r)
        except MutantError as e:
            return r, "invalid", str(e), 0
        fast, targets, _ = gpu_needs(r, fast_inputs)
        if not fast:  # the shared objects: newer than the mutated file, so make keeps them
            now = time.time() + 1
            for o in objs:
                os.utime(os.path.join(d, o), (now, now))
        t0 = time.time()
        rc, out = run(["make", "--no-print-directory", "-s", "-j4" if fast else "-j1", "GPU_ARCH=90"] + targets, d,
                      env=env)
        dt = time.time() - t0
        shutil.rmtree(d, ignore_errors=True)
        if rc != 0:
            err = [l for l in out.splitlines() if "error" in l]
            return r, "invalid", (err[0] if err else out[-300:]).strip()[:200], dt
        return r, "builds", ("rebuilt the fast objects; " if fast else "") + "built " + " ".join(targets), dt

    with cf.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for r, st, detail, dt in pool.map(one, recs):
            results[r["id"]] = st
            with lock:
                print(f"{r['id']:34s} {st:8s} {dt:5.0f} s  {detail}", flush=True)
    bad = [i for i, s in results.items() if s != "builds"]
    print(f"\nGPU mutants: {len(results)}; build here: {len(results) - len(bad)}; do not build: {len(bad)}"
          + (f" ({', '.join(bad)})" if bad else ""))
    shutil.rmtree(work, ignore_errors=True)
    return 1 if bad else 0


# ---------------------------------------------------------------------------------------------
# the GPU visit: every GPU mutant built and run on a machine with a GPU (gpu_visit.sh)

FAIL_LINE = re.compile(r"^\s*(FAIL|NOT OK)\b")
NUMBER = re.compile(r"[-+]?\d+(\.\d+)?(e[-+]?\d+)?")


def failures(log):
    """The failed checks of a test's output, with their numbers taken out (so that the same check
    failing with other numbers is the same failure), each with the case it belongs to."""
    case, out = "", set()
    for line in log.splitlines():
        if line.startswith("-- ") or line.startswith("== "):
            case = NUMBER.sub("#", line.strip())
        elif FAIL_LINE.match(line):
            out.add(case + " | " + NUMBER.sub("#", line.strip()))
    return out


def cmd_gpu_visit(args):
    """Builds and runs every GPU mutant on this machine (it needs a GPU), within args.budget seconds in
    all: the unmutated tree first (built, then ./test_mlp and test_properties with both trainers),
    then the mutants args.jobs at a time, each in its own copy of the built tree. A mutant that leaves
    the fast objects alone shares the unmutated ones (they are made newer than the mutated file, so make
    keeps them). Writes OUT/gpu_mutants.txt (a line per mutant, then the totals) and the logs."""
    t_start = time.time()
    out_dir = os.path.abspath(args.out)
    logs = os.path.join(out_dir, "gpu_mutant_logs")
    os.makedirs(logs, exist_ok=True)
    summary_path = os.path.join(out_dir, "gpu_mutants.txt")
    work = tempfile.mkdtemp(prefix="mlp_gpu_mutants_")
    base = os.path.join(work, "base")
    note = []

    def left():
        return args.budget - (time.time() - t_start)

    def say(msg):
        print(f"[{time.time() - t_start:5.0f} s] {msg}", flush=True)

    copy_tree(ROOT, base)
    link_data(base)  # (test_mlp's evaluation on Fashion-MNIST, where it is carried)
    ncpu = os.cpu_count() or 16
    say(f"building the unmutated tree in {base} (make -j{ncpu})")
    benv = build_env()
    rc, log = run(["make", "--no-print-directory", "-s", f"-j{ncpu}", "test_mlp", "train_mlp", "train_mlp_fast",
                   "train_mlp_cpu", "tests/bin/test_properties"], base, env=benv)
    open(os.path.join(logs, "base_build.log"), "w").write(log)
    if rc != 0:
        sys.exit(f"error: the unmutated tree does not build here (log: {logs}/base_build.log)")
    env = dict(benv, OMP_NUM_THREADS=str(max(1, ncpu // args.jobs)))  # (the mutants share the cores)
    say("the unmutated tree: ./test_mlp -X, and test_properties with both trainers")
    t0 = time.time()
    rc, base_mlp = run(["./test_mlp", "-X"], base, timeout=max(60, left() - 60), env=env)  # (timed as a mutant runs)
    t_mlp = time.time() - t0
    base_fail_mlp = set()
    if rc != 0:  # without -X, for the whole list of what fails already
        rc, base_mlp = run(["./test_mlp"], base, timeout=max(60, left() - 60), env=env)
        base_fail_mlp = failures(base_mlp)
        note.append(f"THE UNMUTATED ./test_mlp FAILS ({len(base_fail_mlp)} checks): a mutant counts as killed only "
                    "by a check the unmutated tree passes (gpu_mutant_logs/base_test_mlp.log)")
    open(os.path.join(logs, "base_test_mlp.log"), "w").write(base_mlp)
    if "no CUDA GPU here" in base_mlp:
        note.append("NO GPU HERE: test_mlp and the GPU trainers skipped every GPU check, so every mutant 'survives'; "
                    "these results mean nothing (run this on a machine with a GPU)")
    t0 = time.time()
    rc2, base_props = run(["tests/bin/test_properties", "./train_mlp_cpu", "./train_mlp", "./train_mlp_fast"], base,
                          timeout=300, env=env)
    t_props = time.time() - t0
    open(os.path.join(logs, "base_test_properties.log"), "w").write(base_props)
    base_fail_props = failures(base_props) if rc2 != 0 else set()
    if rc2 != 0:
        note.append(f"THE UNMUTATED test_properties FAILS with the GPU trainers ({len(base_fail_props)} checks)")
    say(f"unmutated: ./test_mlp -X {'passes' if not base_fail_mlp else 'FAILS'} in {t_mlp:.0f} s, test_properties "
        f"{'passes' if rc2 == 0 else 'FAILS'} in {t_props:.0f} s")

    fast_inputs = fast_object_inputs(base)
    recs = load_mutants("gpu")
    if args.only:
        want = set(args.only.split(","))
        recs = [r for r in recs if r["id"] in want]
    recs.sort(key=lambda r: not gpu_needs(r, fast_inputs)[0])  # the longest builds first
    objs = [os.path.join("build", "fast", os.path.basename(s)[:-3] + ".o") for s in FAST_SOURCES]
    results, lock = {}, threading.Lock()

    def one(r):
        if left() < 30:
            return "not run", "the time budget was spent", 0
        t0 = time.time()
        d = os.path.join(work, r["id"])
        shutil.copytree(base, d, symlinks=True)
        try:
            apply_to_tree(d, r)
        except MutantError as e:
            return "invalid", str(e), 0
        fast, targets, tests = gpu_needs(r, fast_inputs)
        if not fast:
            now = time.time() + 1
            for o in objs:
                os.utime(os.path.join(d, o), (now, now))
        rc, log = run(["make", "--no-print-directory", "-s", "-j4" if fast else "-j2"] + targets, d,
                      timeout=max(10, left() - 10), env=benv)
        if rc != 0:
            open(os.path.join(logs, r["id"] + ".build.log"), "w").write(log)
            shutil.rmtree(d, ignore_errors=True)
            return ("not run", "its build ran past the time budget", time.time() - t0) if rc == "timeout" else \
                   ("invalid", "does not build (log kept)", time.time() - t0)
        if tests == ["test_mlp"]:
            cmd, base_fail = (["./test_mlp"] if base_fail_mlp else ["./test_mlp", "-X"]), base_fail_mlp
            limit = min(max(10, left() - 5), 3 * t_mlp + 60)
        else:
            cmd, base_fail = ["tests/bin/test_properties", "./train_mlp_cpu", "./" + targets[0]], base_fail_props
            limit = min(max(10, left() - 5), 3 * t_props + 60)
        rc, log = run(cmd, d, timeout=limit, env=env)
        shutil.rmtree(d, ignore_errors=True)
        dt = time.time() - t0
        if rc == "timeout":
            open(os.path.join(logs, r["id"] + ".log"), "w").write(log)
            if limit < 3 * (t_mlp if tests == ["test_mlp"] else t_props) + 60:
                return "not run", "stopped by the time budget", dt
            return "killed", f"{cmd[0]} ran past {limit:.0f} s", dt
        new = failures(log) - base_fail
        if rc != 0 and (new or not base_fail):
            first = sorted(new)[0] if new else first_failure(log)
            if isinstance(rc, int) and rc > 128:
                first = f"signal {rc - 128}: " + first
            open(os.path.join(logs, r["id"] + ".log"), "w").write(log)
            return "killed", f"{cmd[0]}: {first}", dt
        open(os.path.join(logs, r["id"] + ".log"), "w").write(log)
        return "survived", f"{' '.join(cmd)} passes", dt

    say(f"{len(recs)} mutants, {args.jobs} at a time")
    with cf.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futs = {pool.submit(one, r): r for r in recs}
        for fut in cf.as_completed(futs):
            r = futs[fut]
            st, detail, dt = fut.result()
            with lock:
                results[r["id"]] = {"status": st, "by": "", "detail": detail, "s": dt}
                say(f"{r['id']:34s} {st:9s} {dt:4.0f} s  {detail[:110]}")
    eq = load_equivalent()
    recs_in_order = load_mutants("gpu")
    lines, counts = [], {}
    for r in recs_in_order:
        res = results.get(r["id"])
        if not res:
            continue
        st = res["status"]
        if st == "survived" and r["id"] in eq:
            st, res["detail"] = "equivalent", eq[r["id"]]
        counts[st] = counts.get(st, 0) + 1
        lines.append(f"{r['id']:34s} {st:10s} {res['detail']}")
    k, sv = counts.get("killed", 0), counts.get("survived", 0)
    text = [f"GPU mutation run on {gpu_name()}: {len(results)} mutants in {time.time() - t_start:.0f} s "
            f"({args.jobs} at a time)",
            f"  killed {k}, survived {sv}, equivalent {counts.get('equivalent', 0)} (not counted), invalid "
            f"{counts.get('invalid', 0)}, not run {counts.get('not run', 0)}",
            f"  mutation score: {k} of {k + sv} = {100.0 * k / max(1, k + sv):.1f}%"] + ["  " + n for n in note]
    with open(summary_path, "w") as f:
        f.write("\n".join(text) + "\n\n" + "\n".join(lines) + "\n")
    print("\n" + "\n".join(text) + f"\nsummary: {summary_path}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


def gpu_name():
    rc, out = run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], ROOT)
    return out.strip().splitlines()[0] if rc == 0 and out.strip() else "(no GPU found)"


# ---------------------------------------------------------------------------------------------
# sampling universalmutator's mutants

# The code each file's generated mutants are drawn from: the functions that compute (the model, the
# loop, the generators, the plan, the reader's checks), not the printing of boxes and messages.
GEN_SCOPE = {
    "train_mlp_cpu.c": ["matmul_forward_cpu", "matmul_backward_cpu", "sigmoid_forward_cpu", "sigmoid_backward_cpu",
                        "relu_forward_cpu", "relu_backward_cpu", "tanh_forward_cpu", "tanh_backward_cpu",
                        "softmax_xent_forward_backward_cpu", "sgd_update_cpu", "gather_batch_cpu",
                        "model_init_params_cpu", "model_forward_cpu", "model_backward_cpu", "argmax_cpu",
                        "evaluate_cpu"],
    "common/rng.h": ["splitmix64", "rng_seed", "rng_u64", "rng_below", "rng_permutation", "philox_round",
                     "philox_u32", "uniform_weight"],
    "run/train.h": ["split_holdout", "epoch_plan", "epoch_batch_size"],
    "data/idx.h": ["idx_read_stream"],
}
GEN_PER_FILE = {"train_mlp_cpu.c": 25, "common/rng.h": 20, "run/train.h": 12, "data/idx.h": 12}
# lines that only print or time (never mutated: nothing a test should pin down)
GEN_IGNORE = re.compile(r"snprintf|printf|box_row|now_seconds|idx_format_dims|\"")


def function_lines(lines, name):
    """1-based line numbers of the body of function `name` (from its definition to its closing brace)"""
    for i, l in enumerate(lines):
        if re.match(r"^(static\s+)?(inline\s+)?[\w\s\*]+\b" + re.escape(name) + r"\s*\(", l) and not l.rstrip().endswith(";"):
            depth, started = 0, False
            for j in range(i, len(lines)):
                depth += lines[j].count("{") - lines[j].count("}")
                started |= "{" in lines[j]
                if started and depth == 0:
                    return set(range(i + 1, j + 2))
    raise MutantError(f"function {name} not found")


def code_of(line, in_comment):
    """the line without comments; and whether a block comment is open after it"""
    out, i = "", 0
    while i < len(line):
        if in_comment:
            j = line.find("*/", i)
            if j < 0:
                return out, True
            i, in_comment = j + 2, False
        elif line.startswith("/*", i):
            in_comment, i = True, i + 2
        elif line.startswith("//", i):
            break
        else:
            out += line[i]
            i += 1
    return out, in_comment


def cmd_generate(args):
    exe = shutil.which("mutate") or args.mutate
    if not exe or not os.path.exists(exe):
        sys.exit("error: universalmutator's `mutate` not found ---> try: pip install universalmutator (or --mutate PATH)")
    rng = random.Random(args.seed)
    work = tempfile.mkdtemp(prefix="mlp_um_")
    base = os.path.join(work, "base")
    copy_tree(ROOT, base)
    out = [f"# Sampled by `python3 dev/mutate/mutate.py generate --seed {args.seed}` from universalmutator's C rules",
           "# (pip install universalmutator; universal.rules + c_like.rules), within the functions GEN_SCOPE names.",
           "# Regenerate rather than edit: a mutant that no longer applies or builds is replaced by the next one",
           "# of the seeded order.", ""]
    for rel, funcs in GEN_SCOPE.items():
        src = os.path.join(base, rel)
        with open(src) as f:
            text = f.read()
        lines = text.splitlines(True)
        scope = set()
        for fn in funcs:
            scope |= function_lines(lines, fn)
        mdir = os.path.join(work, "m_" + rel.replace("/", "_"))
        os.makedirs(mdir)
        # (a .h file is mutated as C: universalmutator picks rules by the language argument)
        run([exe, src, "c", "--noCheck", "--mutantDir", mdir], work)
        cands, seen = [], set()
        comment = False
        code = {}
        for i, l in enumerate(lines, 1):
            c, comment = code_of(l, comment)
            code[i] = c
        for name in sorted(os.listdir(mdir)):
            with open(os.path.join(mdir, name)) as f:
                mut = f.read().splitlines(True)
            sm = difflib.SequenceMatcher(a=lines, b=mut, autojunk=False)
            ops = [o for o in sm.get_opcodes() if o[0] != "equal"]
            if len(ops) != 1 or ops[0][0] != "replace" or ops[0][2] - ops[0][1] != 1:
                continue
            i = ops[0][1] + 1
            new = "".join(mut[ops[0][3]:ops[0][4]])
            old = lines[i - 1]
            if i not in scope or not code[i].strip() or code[i].lstrip().startswith("#") or GEN_IGNORE.search(old):
                continue
            newcode, _ = code_of(new.split("\n")[0], False)
            if new.count("\n") == 1 and newcode.strip() == code[i].strip():
                continue  # only a comment changed
            key = (i, new)
            if key in seen:
                continue
            seen.add(key)
            cands.append((i, old, new))
        rng.shuffle(cands)
        taken = 0
        print(f"{rel}: {len(cands)} candidate mutants in scope; taking {GEN_PER_FILE[rel]} that build", flush=True)
        for i, old, new in cands:
            if taken == GEN_PER_FILE[rel]:
                break
            find = old.rstrip("\n").strip()
            repl_lines = new.rstrip("\n").split("\n")
            indent = re.match(r"\s*", old).group(0)
            repl = NL.join([repl_lines[0].strip()] + [indent + l.strip() if not l.startswith(indent) else l
                                                        for l in repl_lines[1:]])
            rec = {"id": f"um-{os.path.basename(rel).split('.')[0]}-{taken + 1:02d}", "file": rel, "find": find,
                   "replace": repl, "line": str(i), "kind": "universalmutator"}
            try:  # applies where it should, and builds (the CPU trainer and a test that includes it)
                t = os.path.join(work, "t")
                if os.path.exists(t):
                    shutil.rmtree(t)
                shutil.copytree(base, t)
                apply_to_tree(t, rec)
            except MutantError:
                continue
            rc, _ = run(["gcc", "-std=gnu11", "-fsyntax-only", "-fopenmp", "-I/usr/include/stb", "train_mlp_cpu.c"], t)
            rc2, _ = run(["gcc", "-std=gnu11", "-fsyntax-only", "-fopenmp", "-I/usr/include/stb", "tests/test_properties.c"], t)
            if rc != 0 or rc2 != 0:
                continue
            taken += 1
            out += [f"id: {rec['id']}", f"kind: {rec['kind']}", f"file: {rel}", f"line: {i}", f"find: {find}",
                    f"replace: {repl}", ""]
    with open(os.path.join(HERE, "cpu_generated.txt"), "w") as f:
        f.write("\n".join(out))
    shutil.rmtree(work, ignore_errors=True)
    print(f"wrote {os.path.join(HERE, 'cpu_generated.txt')}")
    return 0


# ---------------------------------------------------------------------------------------------

def find_rec(mid):
    for which in ("cpu", "gpu"):
        for r in load_mutants(which):
            if r["id"] == mid:
                return r
    raise MutantError(f"no mutant {mid}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("cpu")
    p.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 2)
    p.add_argument("--only")
    p.add_argument("--keep", action="store_true")
    p.add_argument("--skip", default="", help="tests to leave out, e.g. test_properties (what the suite caught before it)")
    p.add_argument("--report", default=os.path.join(ROOT, "dev", "out", "mutate_cpu.txt"))
    p = sub.add_parser("gpu-check")
    p.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 2)
    p.add_argument("--only")
    sub.add_parser("gpu-plan")
    p = sub.add_parser("gpu-visit")
    p.add_argument("out")
    p.add_argument("-j", "--jobs", type=int, default=6)
    p.add_argument("--budget", type=float, default=450, help="seconds for the whole visit")
    p.add_argument("--only")
    p = sub.add_parser("generate")
    p.add_argument("--seed", type=int, default=20)
    p.add_argument("--mutate", help="path of universalmutator's mutate command")
    p = sub.add_parser("list")
    p.add_argument("which", nargs="?", default="all", choices=["all", "cpu", "gpu"])
    p = sub.add_parser("show")
    p.add_argument("id")
    p = sub.add_parser("apply")
    p.add_argument("id")
    p.add_argument("dir")
    args = ap.parse_args()
    # Started in the background (`cmd &`), a shell ignores SIGINT for us, and every test we start would
    # inherit that: test_run's Ctrl-C checks would fail on every mutant. A handler of our own comes
    # back as the default disposition in the programs we start.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        if args.cmd == "cpu":
            return cmd_cpu(args)
        if args.cmd == "gpu-check":
            return cmd_gpu_check(args)
        if args.cmd == "gpu-plan":
            return cmd_gpu_plan(args)
        if args.cmd == "gpu-visit":
            return cmd_gpu_visit(args)
        if args.cmd == "generate":
            return cmd_generate(args)
        if args.cmd == "list":
            for which in (["cpu", "gpu"] if args.which == "all" else [args.which]):
                for r in load_mutants(which):
                    print(f"{r['id']:34s} {r['kind']:22s} {r['file']}")
            return 0
        if args.cmd == "show":
            r = find_rec(args.id)
            print(f"# {r['id']} ({r['kind']}): {r.get('why', '')}")
            sys.stdout.write(diff_of(r))
            return 0
        if args.cmd == "apply":
            r = find_rec(args.id)
            _, line = apply_to_tree(args.dir, r)
            print(f"{r['id']}: {r['file']}:{line}")
            return 0
    except MutantError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
