#!/usr/bin/env python3
"""oomlint's benchmark: oomlint against ruff on a generated and a real corpus.

Run it through bench/run.sh, which builds the release binary first. Steps:

1. generate the synthetic corpus (bench/gen_corpus.py, fixed seed) under
   target/bench/corpus/generated/;
2. create target/bench/venv and `pip install ruff` in it;
3. download wheels of real packages (`pip download --no-deps`) and unpack their *.py
   files under target/bench/corpus/pypi/<package>/ (skipped, with a message, when a
   download fails);
4. for each corpus (generated, pypi, both together): one warm-up round, then --rounds
   rounds that run oomlint, oomlint --no-prefilter and ruff's cheapest useful selection
   (plus oomlint -j 1 and -j 2 on the corpora named by --threads-on, by default the
   generated one) alternately, the order rotating each round; ruff --select ALL once; the
   share of files the prefilter skipped; a cached re-run against the I/O floor (cat of
   every file);
5. start-up and single-file latency: oomlint against ruff on one small and one large file;
6. a Markdown summary (also written to target/bench/summary.md, raw numbers to
   target/bench/results.json).

Every figure is measured here; nothing is asserted about time. Python 3.8+ stdlib only.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import gen_corpus  # noqa: E402

WORK = ROOT / "target" / "bench"
CORPUS = WORK / "corpus"
GEN_DIR = CORPUS / "generated"
GEN_MANIFEST = CORPUS / "generated.json"
PYPI_DIR = CORPUS / "pypi"
WHEELS = WORK / "wheels"
VENV = WORK / "venv"
CACHE_CWD = WORK / "cache-run"
BUILT = ROOT / "target" / "release" / "oomlint"
# The binary under test: a copy of BUILT taken at the start, so that a rebuild of
# target/release during the run (another cargo build in the same tree) cannot change it.
BIN = WORK / "bin" / "oomlint"

# Pinned so that the real corpus is the same from one run to the next; a pin that can no
# longer be downloaded falls back to the newest release (the summary says which ran).
PACKAGES = ["transformers==5.23.0", "diffusers==0.42.1", "timm==1.0.31", "lightning==2.6.6",
            "sympy==1.14.0"]
QUICK_PACKAGES = ["timm==1.0.31", "lightning==2.6.6"]

# Directory names that oomlint's walk (src/walk.rs SKIPPED_DIRS) or ruff's default
# `exclude` skip; hidden entries are skipped by both. The file count covers what both see.
SKIP_DIRS = {
    "venv", "__pycache__", "node_modules", "site-packages", "build", "dist", "__pypackages__",
    "_build", "buck-out",
}

RUFF_CHEAP = "E9,F63,F7,F82"
PREFILTER_RE = re.compile(r"prefilter: parsed (\d+) of (\d+) files \((\d+) skipped\)")
CHECKED_RE = re.compile(r"\((\d+) files? checked\)")
PROJECT_RE = re.compile(r"project: (\d+) of (\d+) files linted in the index's pass, (\d+) linted again")
CHUNKS_RE = re.compile(r"chunks: the lint parsed (\d+) of (\d+) bytes of the (\d+) files it parsed itself")
CALLGRIND_RE = re.compile(r"Collected : (\d+)")


def log(msg: str = "") -> None:
    print(msg, flush=True)


def step(msg: str) -> None:
    log(f"\n== {msg}")


# --------------------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------------------


class Result:
    __slots__ = ("wall", "cpu", "rss_kib", "rc", "stderr")

    def __init__(self, wall, cpu, rss_kib, rc, stderr):
        self.wall = wall
        self.cpu = cpu
        self.rss_kib = rss_kib
        self.rc = rc
        self.stderr = stderr


def timed(cmd, cwd=None, stdout=None, stdin=None) -> Result:
    """Run `cmd`: wall time around start and reaping; the child's own CPU time (user +
    system, all threads) and peak RSS from wait4."""
    with tempfile.TemporaryFile() as err:
        out = subprocess.DEVNULL if stdout is None else stdout
        t0 = time.perf_counter()
        proc = subprocess.Popen([str(c) for c in cmd], stdout=out, stderr=err, stdin=stdin,
                                cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        text = err.read().decode("utf-8", "replace")
    return Result(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, proc.returncode, text)


def capture(cmd, cwd=None, check=False, timeout=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True,
                          check=check, timeout=timeout)


def tail(text: str, n: int = 6) -> str:
    return "\n".join(text.strip().splitlines()[-n:])


# --------------------------------------------------------------------------------------
# Setup: corpus, venv, wheels
# --------------------------------------------------------------------------------------


def ensure_generated(files: int, seed: int) -> dict:
    stamp = {"files": files, "seed": seed, "generator_version": gen_corpus.GENERATOR_VERSION}
    if GEN_MANIFEST.exists() and GEN_DIR.is_dir():
        try:
            manifest = json.loads(GEN_MANIFEST.read_text())
        except ValueError:
            manifest = {}
        if all(manifest.get(k) == v for k, v in stamp.items()):
            log(f"generated corpus up to date ({files} files, seed {seed}): {rel(GEN_DIR)}")
            return manifest
    if GEN_DIR.exists():
        shutil.rmtree(GEN_DIR)
    t0 = time.perf_counter()
    manifest = gen_corpus.generate(GEN_DIR, files, seed)
    GEN_MANIFEST.write_text(json.dumps(manifest, indent=2, sort_keys=True))
    log(f"generated {files} files ({manifest['bytes'] / 1e6:.1f} MB, {manifest['lines']:,} lines) "
        f"in {time.perf_counter() - t0:.1f}s: {rel(GEN_DIR)}")
    log(f"  kinds {manifest['kinds']}; training styles {manifest['styles']}; bugs {manifest['bugs']}")
    return manifest


def ensure_venv() -> tuple[Path, str]:
    py = VENV / "bin" / "python"
    if not py.exists():
        log(f"creating {rel(VENV)}")
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    ruff = VENV / "bin" / "ruff"
    if not ruff.exists():
        log("pip install ruff")
        subprocess.run([str(py), "-m", "pip", "install", "--disable-pip-version-check", "-q", "ruff"],
                       check=True)
    version = capture([ruff, "--version"], check=True).stdout.strip()
    log(f"ruff: {version} ({rel(ruff)})")
    return ruff, version


def find_wheel(name: str, version: str | None) -> Path | None:
    stem = name.replace("-", "_").lower()
    found = []
    for whl in WHEELS.glob("*.whl"):
        parts = whl.name.split("-")
        if parts[0].lower() == stem and (version is None or parts[1] == version):
            found.append(whl)
    return sorted(found)[-1] if found else None


def download_wheel(spec: str) -> Path | None:
    name, _, version = spec.partition("==")
    whl = find_wheel(name, version or None)
    if whl:
        return whl
    WHEELS.mkdir(parents=True, exist_ok=True)
    py = VENV / "bin" / "python"
    for attempt in ([spec, name] if version else [name]):
        log(f"pip download --no-deps {attempt}")
        try:
            proc = capture([py, "-m", "pip", "download", "--disable-pip-version-check", "--no-deps",
                            "--only-binary=:all:", "-q", "-d", WHEELS, attempt], timeout=600)
        except subprocess.TimeoutExpired:
            log(f"  download of {attempt} timed out")
            continue
        if proc.returncode == 0:
            whl = find_wheel(name, version if attempt == spec else None)
            if whl:
                return whl
        log(f"  download of {attempt} failed: {tail(proc.stderr, 3) or 'no wheel found'}")
    return None


def extract_py(whl: Path, dest: Path) -> None:
    """Unpack only the *.py members of a wheel into dest (stamped by the wheel's name)."""
    stamp = dest / ".extracted-from"
    if stamp.exists() and stamp.read_text().strip() == whl.name:
        return
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    count = 0
    with zipfile.ZipFile(whl) as zf:
        for info in zf.infolist():
            name = info.filename
            if not name.endswith(".py") or name.startswith("/") or ".." in name.split("/"):
                continue
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out)
            count += 1
    stamp.write_text(whl.name + "\n")
    log(f"  unpacked {count} .py files of {whl.name} into {rel(dest)}")


def ensure_pypi(specs: list[str]) -> tuple[list[Path], list[str], list[str]]:
    """The package folders that make up the pypi corpus, their wheels, and what failed."""
    dirs, wheels, failed = [], [], []
    for spec in specs:
        name = spec.partition("==")[0]
        whl = download_wheel(spec)
        if whl is None:
            log(f"  skipping {name}: no wheel could be downloaded")
            failed.append(name)
            continue
        dest = PYPI_DIR / name
        try:
            extract_py(whl, dest)
        except (OSError, zipfile.BadZipFile) as exc:
            log(f"  skipping {name}: cannot unpack {whl.name}: {exc}")
            failed.append(name)
            continue
        dirs.append(dest)
        wheels.append(whl.name)
    return dirs, wheels, failed


# --------------------------------------------------------------------------------------
# Corpus facts
# --------------------------------------------------------------------------------------


def corpus_files(paths: list[Path]) -> list[Path]:
    files = []
    for root in paths:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in SKIP_DIRS)
            for f in sorted(filenames):
                if f.endswith(".py") and not f.startswith("."):
                    files.append(Path(dirpath) / f)
    return files


def corpus_facts(name: str, paths: list[Path]) -> dict:
    files = corpus_files(paths)
    size = lines = 0
    for f in files:
        data = f.read_bytes()
        size += len(data)
        lines += data.count(b"\n")
    listing = WORK / f"files-{name}.txt"
    listing.write_bytes(b"\0".join(str(f).encode() for f in files))
    return {"name": name, "paths": [str(p) for p in paths], "files": len(files), "bytes": size,
            "lines": lines, "listing": str(listing)}


# --------------------------------------------------------------------------------------
# oomlint feature detection
# --------------------------------------------------------------------------------------


def unsupported(res) -> bool:
    err = res.stderr.lower()
    return res.returncode == 2 and ("unexpected argument" in err or "unrecognized" in err
                                    or "found argument" in err)


def detect_features() -> dict:
    probe_dir = WORK / "probe"
    probe_dir.mkdir(parents=True, exist_ok=True)
    probe = probe_dir / "probe.py"
    probe.write_text("import torch\n\nlosses = []\nfor x in range(3):\n"
                     "    loss = torch.ones(1, requires_grad=True).sum()\n"
                     "    loss.backward()\n    losses.append(loss)\n")
    base = [BIN, "check", probe, "--exit-zero", "-q"]
    feats = {}
    feats["no_cache"] = not unsupported(capture(base + ["--no-cache"], cwd=probe_dir))
    nc = ["--no-cache"] if feats["no_cache"] else []
    feats["no_prefilter"] = not unsupported(capture(base + nc + ["--no-prefilter"], cwd=probe_dir))
    res = capture(base + nc + ["--prefilter-stats"], cwd=probe_dir)
    feats["prefilter_stats"] = not unsupported(res) and bool(PREFILTER_RE.search(res.stderr))
    feats["threads"] = not unsupported(capture(base + nc + ["-j", "1"], cwd=probe_dir))
    feats["parse_only"] = not unsupported(capture(base + nc + ["--parse-only"], cwd=probe_dir))
    feats["chunk"] = not unsupported(capture(base + nc + ["--chunk"], cwd=probe_dir))
    feats["project_stats"] = bool(PROJECT_RE.search(res.stderr))
    # A cache left by the probe runs is none of the benchmark's business.
    shutil.rmtree(probe_dir / ".oomlint_cache", ignore_errors=True)
    return feats


# --------------------------------------------------------------------------------------
# Measurements
# --------------------------------------------------------------------------------------


def summarize(walls: list[float], rss: list[int], cpus: list[float] | None = None) -> dict:
    out = {"median": statistics.median(walls), "min": min(walls), "max": max(walls),
           "runs": len(walls), "walls": walls, "rss_mib": max(rss) / 1024}
    if cpus:
        out["cpu"] = statistics.median(cpus)
    return out


def variants_for(paths: list[str], feats: dict, ruff: Path, with_threads: bool) -> list[tuple]:
    nc = ["--no-cache"] if feats["no_cache"] else []
    oom = [BIN, *paths, "-q", "--format", "concise", "--exit-zero", *nc]
    out = [("oomlint", "oomlint", oom)]
    if feats["no_prefilter"]:
        out.append(("oomlint_noprefilter", "oomlint --no-prefilter", oom + ["--no-prefilter"]))
    out.append(("ruff", f"ruff --select {RUFF_CHEAP}",
                [ruff, "check", "--select", RUFF_CHEAP, "--no-cache", "--exit-zero", "-q",
                 "--output-format", "concise", *paths]))
    if feats.get("parse_only"):
        out.append(("oomlint_parse", "oomlint --parse-only", oom + ["--parse-only"]))
    if with_threads and feats["threads"]:
        out.append(("oomlint_j1", "oomlint -j 1", oom + ["-j", "1"]))
        out.append(("oomlint_j2", "oomlint -j 2", oom + ["-j", "2"]))
    return out


def count_lines(path: Path) -> int:
    with open(path, "rb") as fh:
        return sum(1 for _ in fh)


def measure_corpus(facts: dict, feats: dict, ruff: Path, rounds: int, with_threads: bool) -> dict:
    paths = facts["paths"]
    variants = variants_for(paths, feats, ruff, with_threads)
    res = {"variants": {}, "labels": {}, "commands": {}, "findings": {}, "failed": {}}
    for key, label, cmd in variants:
        res["labels"][key] = label
        res["commands"][key] = " ".join(display_arg(c) for c in cmd)
    # Warm-up: every variant once, output kept to count the findings.
    log(f"warm-up: {', '.join(label for _, label, _ in variants)}")
    live = []
    for key, label, cmd in variants:
        with tempfile.NamedTemporaryFile(dir=WORK, delete=False) as out:
            r = timed(cmd, cwd=WORK, stdout=out)
        n = count_lines(Path(out.name))
        os.unlink(out.name)
        if r.rc != 0:
            log(f"  {label}: exit code {r.rc}, left out: {tail(r.stderr, 3)}")
            res["failed"][key] = f"exit code {r.rc}: {tail(r.stderr, 2)}"
            continue
        res["findings"][key] = n
        live.append((key, label, cmd))
        log(f"  {label}: {r.wall:.2f}s, {n} findings")
    walls = {key: [] for key, _, _ in live}
    rss = {key: [] for key, _, _ in live}
    cpus = {key: [] for key, _, _ in live}
    for rnd in range(rounds):
        shift = rnd % len(live)
        order = live[shift:] + live[:shift]
        parts = []
        for key, label, cmd in order:
            r = timed(cmd, cwd=WORK)
            if r.rc != 0:
                raise SystemExit(f"{label} failed in round {rnd + 1}: exit code {r.rc}\n{tail(r.stderr)}")
            walls[key].append(r.wall)
            rss[key].append(r.rss_kib)
            cpus[key].append(r.cpu)
            parts.append(f"{label} {r.wall:.2f}s")
        log(f"round {rnd + 1}/{rounds}: " + ", ".join(parts))
    for key, _, _ in live:
        res["variants"][key] = summarize(walls[key], rss[key], cpus[key])
    # ruff --select ALL, once, for reference.
    cmd_all = [ruff, "check", "--select", "ALL", "--no-cache", "--exit-zero", "-q",
               "--output-format", "concise", *paths]
    r = timed(cmd_all, cwd=WORK)
    res["labels"]["ruff_all"] = "ruff --select ALL (once)"
    res["commands"]["ruff_all"] = " ".join(display_arg(c) for c in cmd_all)
    if r.rc == 0:
        res["variants"]["ruff_all"] = summarize([r.wall], [r.rss_kib], [r.cpu])
        log(f"ruff --select ALL: {r.wall:.2f}s")
    else:
        res["failed"]["ruff_all"] = f"exit code {r.rc}: {tail(r.stderr, 2)}"
    # What the prefilter skipped, and which rules fired, in one extra run.
    nc = ["--no-cache"] if feats["no_cache"] else []
    stats_cmd = [BIN, *paths, "--statistics", "--exit-zero", *nc]
    if feats["prefilter_stats"]:
        stats_cmd.append("--prefilter-stats")
    # Chunking (off by default) changes no finding; the stats run says what it would keep.
    if feats.get("chunk"):
        stats_cmd.append("--chunk")
    proc = capture(stats_cmd, cwd=WORK)
    res["rule_counts"] = parse_statistics(proc.stdout)
    m = PREFILTER_RE.search(proc.stderr)
    if m:
        parsed, total, skipped = map(int, m.groups())
        res["prefilter"] = {"parsed": parsed, "total": total, "skipped": skipped}
        log(f"prefilter: parsed {parsed} of {total} files ({skipped} skipped, {skipped / max(1, total):.1%})")
    else:
        res["prefilter"] = None
        log("prefilter: n/a (--prefilter-stats not supported by this build)")
    m = PROJECT_RE.search(proc.stderr)
    if m:
        kept, total, again = map(int, m.groups())
        res["one_parse"] = {"kept": kept, "total": total, "again": again}
        log(f"one parse: {kept} of {total} files linted in the project index's pass, {again} parsed again")
    m = CHUNKS_RE.search(proc.stderr)
    if m:
        kept, total, files = map(int, m.groups())
        res["chunks"] = {"kept": kept, "total": total, "files": files}
        log(f"chunks (--chunk): the lint parsed {kept} of {total} bytes of the {files} files it parsed itself")
    m = CHECKED_RE.search(proc.stdout + proc.stderr)
    res["oomlint_files_checked"] = int(m.group(1)) if m else (res["prefilter"] or {}).get("total")
    return res


def parse_statistics(text: str) -> dict:
    counts = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].isdigit() and re.fullmatch(r"OOM\d+", parts[1]):
            counts[parts[1]] = int(parts[0])
    return counts


def ruff_file_count(ruff: Path, paths: list[str]) -> int | None:
    proc = capture([ruff, "check", "--show-files", "--no-cache", *paths], cwd=WORK)
    if proc.returncode != 0:
        return None
    return sum(1 for line in proc.stdout.splitlines() if line.strip().endswith(".py"))


def find_caches() -> list[Path]:
    found = []
    for base in [CACHE_CWD, WORK, ROOT, *(Path(p) for p in (GEN_DIR, PYPI_DIR))]:
        cand = base / ".oomlint_cache"
        if cand.is_dir():
            found.append(cand)
    for base in [GEN_DIR, PYPI_DIR]:
        if base.is_dir():
            for sub in base.iterdir():
                if (sub / ".oomlint_cache").is_dir():
                    found.append(sub / ".oomlint_cache")
    return found


def measure_cache_and_io(facts: dict, feats: dict, rounds: int) -> dict:
    out = {}
    listing = facts["listing"]
    cat_walls = []
    for i in range(rounds + 1):
        with open(listing, "rb") as stdin:
            r = timed(["xargs", "-0", "cat"], stdin=stdin)
        if r.rc != 0:
            out["io_error"] = tail(r.stderr, 2)
            break
        if i:
            cat_walls.append(r.wall)
    if cat_walls:
        out["cat"] = summarize(cat_walls, [0])
    files = [Path(p.decode()) for p in Path(listing).read_bytes().split(b"\0") if p]
    py_walls = []
    for i in range(4):
        t0 = time.perf_counter()
        total = 0
        for f in files:
            with open(f, "rb") as fh:
                total += len(fh.read())
        if i:
            py_walls.append(time.perf_counter() - t0)
    out["python_read"] = summarize(py_walls, [0])
    if not feats["no_cache"]:
        out["cached"] = None
        log("cached re-run: n/a (this build has no --no-cache, so no result cache)")
        return out
    CACHE_CWD.mkdir(parents=True, exist_ok=True)
    for c in find_caches():
        if WORK in c.parents:
            shutil.rmtree(c, ignore_errors=True)
    cmd = [BIN, *facts["paths"], "-q", "--format", "concise", "--exit-zero"]
    first = timed(cmd, cwd=CACHE_CWD)
    if first.rc != 0:
        out["cached"] = None
        out["cache_error"] = f"exit code {first.rc}: {tail(first.stderr, 2)}"
        return out
    walls, rss, cpus = [], [], []
    for _ in range(rounds):
        r = timed(cmd, cwd=CACHE_CWD)
        walls.append(r.wall)
        rss.append(r.rss_kib)
        cpus.append(r.cpu)
    out["cached"] = summarize(walls, rss, cpus)
    out["cache_fill"] = first.wall
    out["second_run"] = walls[0]
    out["cache_dirs"] = [str(c) for c in find_caches()]
    out["cached_command"] = " ".join(display_arg(c) for c in cmd)
    return out


def measure_latency(files: list[tuple[str, Path]], feats: dict, ruff: Path, runs: int) -> list[dict]:
    nc = ["--no-cache"] if feats["no_cache"] else []
    cases = [("start-up: --version", [BIN, "--version"], [ruff, "--version"], None)]
    for label, path in files:
        cases.append((label, [BIN, path, "--exit-zero", *nc],
                      [ruff, "check", "--no-cache", "--exit-zero", path], path))
    results = []
    for label, oom, rf, path in cases:
        for cmd in (oom, rf):  # warm-up
            timed(cmd, cwd=WORK)
        ow, rw, orss, rrss, ocpu, rcpu = [], [], [], [], [], []
        for _ in range(runs):
            a = timed(oom, cwd=WORK)
            b = timed(rf, cwd=WORK)
            ow.append(a.wall)
            rw.append(b.wall)
            orss.append(a.rss_kib)
            rrss.append(b.rss_kib)
            ocpu.append(a.cpu)
            rcpu.append(b.cpu)
        entry = {"label": label, "oomlint": summarize(ow, orss, ocpu), "ruff": summarize(rw, rrss, rcpu),
                 "oomlint_cmd": " ".join(display_arg(c) for c in oom),
                 "ruff_cmd": " ".join(display_arg(c) for c in rf)}
        if path is not None:
            data = path.read_bytes()
            entry["lines"] = data.count(b"\n")
            entry["bytes"] = len(data)
            entry["file"] = rel(path)
        results.append(entry)
        log(f"{label}: oomlint {entry['oomlint']['median'] * 1000:.1f} ms, "
            f"ruff {entry['ruff']['median'] * 1000:.1f} ms (medians of {runs})")
    return results


def measure_callgrind(files: list[Path], ruff: Path, n: int) -> dict | None:
    """Instructions executed (valgrind's callgrind, all threads) by oomlint -j 1 and by
    ruff's cheap selection on the first `n` files of `files`: repeatable where wall
    times on a shared machine are not."""
    if shutil.which("valgrind") is None:
        log("callgrind: n/a (valgrind not installed)")
        return None
    sub = WORK / "callgrind" / "corpus"
    if sub.exists():
        shutil.rmtree(sub)
    chosen = sorted(files)[:n]
    total = 0
    for i, f in enumerate(chosen):
        dest = sub / f"f{i:05d}_{f.name}"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(f.read_bytes())
        total += dest.stat().st_size
    vg = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
    cmds = {
        "oomlint": [BIN, sub, "-j", "1", "-q", "--format", "concise", "--exit-zero", "--no-cache"],
        "oomlint --parse-only": [BIN, sub, "-j", "1", "-q", "--format", "concise", "--exit-zero",
                                 "--no-cache", "--parse-only"],
        f"ruff --select {RUFF_CHEAP}": [ruff, "check", "--select", RUFF_CHEAP, "--no-cache",
                                        "--exit-zero", "-q", "--output-format", "concise", sub],
    }
    out = {"files": len(chosen), "bytes": total, "counts": {}}
    for label, cmd in cmds.items():
        proc = capture(vg + cmd, cwd=WORK)
        m = CALLGRIND_RE.search(proc.stderr)
        out["counts"][label] = int(m.group(1)) if m else None
        log(f"callgrind {label}: {out['counts'][label]:,} instructions" if m
            else f"callgrind {label}: n/a ({tail(proc.stderr, 2)})")
    return out


def measure_big_files(sizes: list[int]) -> list[dict]:
    """One file of `mb` MB for each size, made of the generated training scripts one
    after another: seconds and peak RSS per MB of source."""
    scripts = sorted(p for p in GEN_DIR.rglob("*.py") if b"backward()" in p.read_bytes())
    texts = [p.read_bytes() for p in scripts]
    out = []
    if not texts:
        log("big files: n/a (no training script in the generated corpus)")
        return out
    for mb in sizes:
        d = WORK / "big" / f"{mb}mb"
        d.mkdir(parents=True, exist_ok=True)
        # A project of its own: without a marker the file's project root is the oomlint
        # checkout, and the figure would include summarising the checkout's own files
        # (and a second lint when their facts change one of the file's answers).
        (d / "pyproject.toml").touch()
        f = d / "big.py"
        if not f.exists() or abs(f.stat().st_size - mb * 1_000_000) > 200_000:
            parts, n, i = [], 0, 0
            while n < mb * 1_000_000:
                t = texts[i % len(texts)]
                parts.append(t)
                n += len(t)
                i += 1
            f.write_bytes(b"".join(parts))
        size = f.stat().st_size
        cmd = [BIN, "big.py", "-q", "--format", "concise", "--exit-zero", "--no-cache"]
        r = timed(cmd, cwd=d)
        mbs = size / 1e6
        e = {"mb": mbs, "wall": r.wall, "cpu": r.cpu, "rss_mib": r.rss_kib / 1024, "rc": r.rc,
             "s_per_mb": r.cpu / mbs, "rss_per_mb": r.rss_kib / 1024 / mbs,
             "command": " ".join(display_arg(c) for c in cmd)}
        out.append(e)
        log(f"big file {mbs:.1f} MB: {r.wall:.2f}s wall, {r.cpu:.2f}s CPU ({e['s_per_mb']:.3f} s/MB), "
            f"peak RSS {e['rss_mib']:.0f} MiB ({e['rss_per_mb']:.1f} MiB/MB), exit {r.rc}")
    return out


# --------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------


def rel(p) -> str:
    p = Path(p)
    try:
        return str(p.relative_to(ROOT))
    except ValueError:
        return str(p)


def display_arg(a) -> str:
    s = str(a)
    if s.startswith(str(ROOT) + "/"):
        s = s[len(str(ROOT)) + 1:]
    return s


def snapshot_binary() -> None:
    BIN.parent.mkdir(parents=True, exist_ok=True)
    tmp = BIN.with_suffix(".tmp")
    shutil.copy2(BUILT, tmp)
    os.replace(tmp, BIN)


def machine_info() -> dict:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.0f} GiB"
    except OSError:
        pass
    nproc = capture(["nproc"]).stdout.strip() if shutil.which("nproc") else str(os.cpu_count())
    return {"cpu": model, "nproc": nproc, "memory": mem, "kernel": platform.release(),
            "python": platform.python_version()}


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def git_state() -> str:
    head = capture(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT).stdout.strip() or "unknown"
    dirty = capture(["git", "status", "--porcelain", "--", "src", "rules", "Cargo.toml", "Cargo.lock"],
                    cwd=ROOT).stdout.strip()
    return head + (" + uncommitted changes in src/rules/Cargo" if dirty else "")


def fmt_s(x: float) -> str:
    if x < 0.1:
        return f"{x * 1000:.1f} ms"
    return f"{x:.2f} s"


def mbps(facts, v):
    return facts["bytes"] / 1e6 / v["median"]


def report(ctx: dict) -> str:
    L = []
    m = ctx["machine"]
    L.append(f"### oomlint benchmark ({ctx['date']})")
    L.append("")
    L.append(f"- Machine: {m['cpu']}, nproc {m['nproc']}, {m['memory']} RAM, Linux {m['kernel']}; "
             f"load average {ctx['load_start']} at start, {ctx['load_end']} at end")
    L.append(f"- oomlint: {ctx['oomlint_version']} (git {ctx['git']}), release build, run as a copy "
             f"(`{rel(BIN)}`) so that a rebuild during the run cannot change it; {ctx['ruff_version']}")
    L.append(f"- Command: `{ctx['cmdline']}` ({ctx['rounds']} rounds after one warm-up round, "
             f"variants alternated, order rotated each round)")
    feats = ctx["features"]
    missing = [f"`{flag}`" for flag, key in (("--no-cache", "no_cache"), ("--no-prefilter", "no_prefilter"),
                                               ("--prefilter-stats", "prefilter_stats")) if not feats[key]]
    if missing:
        L.append(f"- Not supported by this build (skipped, n/a below): {', '.join(missing)}")
    if ctx["pypi_failed"]:
        L.append(f"- PyPI packages skipped (download failed): {', '.join(ctx['pypi_failed'])}")
    L.append("")
    L.append("| corpus | files | MB | lines | content | oomlint findings | ruff findings (cheap) | prefilter parsed / skipped |")
    L.append("| --- | ---: | ---: | ---: | --- | ---: | ---: | --- |")
    for c in ctx["corpora"]:
        f, r = c["facts"], c["result"]
        pf = r.get("prefilter")
        pf_s = (f"{pf['parsed']} / {pf['skipped']} ({pf['skipped'] / max(1, pf['total']):.0%} skipped)"
                if pf else "n/a")
        L.append(f"| {f['name']} | {f['files']:,} | {f['bytes'] / 1e6:.1f} | {f['lines']:,} | "
                 f"{c['content']} | {r['findings'].get('oomlint', 'n/a')} | "
                 f"{r['findings'].get('ruff', 'n/a')} | {pf_s} |")
    for c in ctx["corpora"]:
        counts = c["result"].get("rule_counts")
        if counts:
            by_rule = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
            L.append("")
            L.append(f"oomlint findings by rule on {c['facts']['name']}: {by_rule}.")
    bugs = ctx.get("injected_bugs")
    if bugs:
        L.append(f"Bugs injected in the generated training scripts: "
                 f"{', '.join(f'{k} {v}' for k, v in sorted(bugs.items()) if k != 'none')} "
                 f"({bugs.get('none', 0)} scripts without a bug).")
    L.append("")
    L.append("Full runs, no cache: wall time (median, min-max of the rounds), MB/s and files/s from the median, "
             "CPU time (user+sys, median), peak RSS (largest of the rounds), ratio of medians to ruff's cheap run "
             "in the same rounds:")
    L.append("")
    L.append("| corpus | run | median | min-max | MB/s | files/s | CPU | peak RSS | / ruff cheap |")
    L.append("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for c in ctx["corpora"]:
        f, r = c["facts"], c["result"]
        ruff_v = r["variants"].get("ruff")
        for key in ("oomlint", "oomlint_noprefilter", "oomlint_parse", "ruff", "ruff_all"):
            v = r["variants"].get(key)
            if v is None:
                if key == "oomlint_noprefilter" and not feats["no_prefilter"]:
                    L.append(f"| {f['name']} | oomlint --no-prefilter | n/a | | | | | | |")
                continue
            ratio = f"{v['median'] / ruff_v['median']:.2f}x" if ruff_v else "n/a"
            mm = f"{fmt_s(v['min'])}-{fmt_s(v['max'])}" if v["runs"] > 1 else "(1 run)"
            L.append(f"| {f['name']} | {r['labels'][key]} | {fmt_s(v['median'])} | {mm} | "
                     f"{mbps(f, v):.1f} | {f['files'] / v['median']:,.0f} | {fmt_s(v['cpu'])} | "
                     f"{v['rss_mib']:.0f} MiB | {ratio} |")
    L.append("")
    L.append("CPU time (user+sys, medians of the same rounds): oomlint / ruff cheap, and the analysis "
             "(oomlint minus --parse-only) over the parse:")
    L.append("")
    L.append("| corpus | oomlint CPU | ruff cheap CPU | oomlint / ruff (CPU) | oomlint / ruff (wall) | "
             "parse-only CPU | analysis / parse | linted in the index's pass |")
    L.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for c in ctx["corpora"]:
        r = c["result"]
        o, rf, po = (r["variants"].get(k) for k in ("oomlint", "ruff", "oomlint_parse"))
        if not (o and rf):
            continue
        one = r.get("one_parse")
        one_s = f"{one['kept']} of {one['total']} ({one['again']} parsed again)" if one else "n/a"
        po_s = fmt_s(po["cpu"]) if po else "n/a"
        an_s = f"{(o['cpu'] - po['cpu']) / po['cpu']:.0%}" if po and po["cpu"] > 0 else "n/a"
        L.append(f"| {c['facts']['name']} | {fmt_s(o['cpu'])} | {fmt_s(rf['cpu'])} | "
                 f"{o['cpu'] / rf['cpu']:.2f}x | {o['median'] / rf['median']:.2f}x | {po_s} | {an_s} | {one_s} |")
    L.append("")
    L.append("Chunked bytes vs total bytes (`--chunk`, off by default; the bytes of the files the lint "
             "parses itself, not the project index's whole-file parse):")
    L.append("")
    for c in ctx["corpora"]:
        ch = c["result"].get("chunks")
        if ch:
            L.append(f"- {c['facts']['name']}: {ch['kept']:,} of {ch['total']:,} bytes "
                     f"({ch['kept'] / max(1, ch['total']):.0%}) in {ch['files']} files")
        else:
            L.append(f"- {c['facts']['name']}: n/a (this build has no --chunk)")
    L.append("")
    cg = ctx.get("callgrind")
    if cg:
        L.append(f"Instructions under callgrind (repeatable; {cg['files']} generated files, "
                 f"{cg['bytes'] / 1e6:.2f} MB, one thread):")
        L.append("")
        L.append("| run | instructions | / ruff cheap |")
        L.append("| --- | ---: | ---: |")
        base = cg["counts"].get(f"ruff --select {RUFF_CHEAP}")
        for label, n in cg["counts"].items():
            ratio = f"{n / base:.2f}x" if n and base else "n/a"
            L.append(f"| {label} | {n:,} | {ratio} |" if n else f"| {label} | n/a | n/a |")
        L.append("")
    big = ctx.get("big_files") or []
    if big:
        L.append("One large file (generated training scripts one after another), one run each:")
        L.append("")
        L.append("| size | wall | CPU | CPU s/MB | peak RSS | RSS MiB/MB | exit |")
        L.append("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for e in big:
            L.append(f"| {e['mb']:.1f} MB | {fmt_s(e['wall'])} | {fmt_s(e['cpu'])} | {e['s_per_mb']:.3f} | "
                     f"{e['rss_mib']:.0f} MiB | {e['rss_per_mb']:.1f} | {e['rc']} |")
        L.append("")
        if len(big) > 1 and big[0]["s_per_mb"] > 0:
            L.append(f"Seconds per MB, largest / smallest: {big[-1]['s_per_mb'] / big[0]['s_per_mb']:.1f} "
                     f"(linear is 1; the issue's bound is 60).")
            L.append("")
    thr = [c for c in ctx["corpora"] if "oomlint_j1" in c["result"]["variants"]]
    if thr:
        L.append("Threads (oomlint, same rounds):")
        L.append("")
        L.append("| corpus | -j 1 | -j 2 | speed-up | CPU -j 1 / -j 2 | peak RSS -j 1 / -j 2 |")
        L.append("| --- | ---: | ---: | ---: | ---: | ---: |")
        for c in thr:
            v1, v2 = c["result"]["variants"]["oomlint_j1"], c["result"]["variants"]["oomlint_j2"]
            L.append(f"| {c['facts']['name']} | {fmt_s(v1['median'])} | {fmt_s(v2['median'])} | "
                     f"{v1['median'] / v2['median']:.2f}x | {fmt_s(v1['cpu'])} / {fmt_s(v2['cpu'])} | "
                     f"{v1['rss_mib']:.0f} / {v2['rss_mib']:.0f} MiB |")
        L.append("")
        L.append("The speed-up needs two idle cores: compare the load average above.")
        L.append("")
    L.append("Cached re-run against the I/O floor (medians):")
    L.append("")
    L.append("| corpus | cache fill | cached re-run | I/O floor (`xargs -0 cat`) | cached / floor | Python read of every file |")
    L.append("| --- | ---: | ---: | ---: | ---: | ---: |")
    for c in ctx["corpora"]:
        io = c["io"]
        cat = io.get("cat")
        cached = io.get("cached")
        cat_s = fmt_s(cat["median"]) if cat else "n/a"
        if cached:
            ratio = f"{cached['median'] / cat['median']:.1f}x" if cat else "n/a"
            L.append(f"| {c['facts']['name']} | {fmt_s(io['cache_fill'])} | {fmt_s(cached['median'])} | {cat_s} | "
                     f"{ratio} | {fmt_s(io['python_read']['median'])} |")
        else:
            L.append(f"| {c['facts']['name']} | n/a | n/a (no cache in this build) | {cat_s} | n/a | "
                     f"{fmt_s(io['python_read']['median'])} |")
    L.append("")
    if ctx["latency"]:
        L.append(f"Start-up and single-file latency (end to end, median of {ctx['latency_runs']} runs, min in brackets):")
        L.append("")
        L.append("| case | file | lines | oomlint | ruff check | oomlint / ruff |")
        L.append("| --- | --- | ---: | ---: | ---: | ---: |")
        for e in ctx["latency"]:
            o, r = e["oomlint"], e["ruff"]
            L.append(f"| {e['label']} | {e.get('file', '')} | {e.get('lines', '')} | "
                     f"{fmt_s(o['median'])} ({fmt_s(o['min'])}) | {fmt_s(r['median'])} ({fmt_s(r['min'])}) | "
                     f"{o['median'] / r['median']:.2f}x |")
        L.append("")
    L.append("Commands (CORPUS is the corpus's folder or folders; cwd target/bench):")
    L.append("")
    c0 = ctx["corpora"][0]["result"]
    paths0 = " ".join(display_arg(p) for p in ctx["corpora"][0]["facts"]["paths"])
    for key, cmd in c0["commands"].items():
        L.append(f"- {c0['labels'][key]}: `{cmd.replace(paths0, 'CORPUS')}`")
    io0 = ctx["corpora"][0]["io"]
    if io0.get("cached_command"):
        L.append(f"- cached re-run: `{io0['cached_command'].replace(paths0, 'CORPUS')}` in {rel(CACHE_CWD)} "
                 f"(the cache goes to the current directory), run once to fill the cache, then {ctx['rounds']} times")
    L.append("- I/O floor: `xargs -0 cat < FILE_LIST > /dev/null` over the same files")
    if ctx["latency"]:
        e = ctx["latency"][-1]
        L.append(f"- single file: `{e['oomlint_cmd']}` vs `{e['ruff_cmd']}`")
    L.append("- Wall time: `time.perf_counter()` around start and reaping of the process; peak RSS: `ru_maxrss` from `os.wait4`.")
    return "\n".join(L)


# --------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="bench/run.sh",
        description="Benchmark oomlint against ruff on a generated corpus and real PyPI packages.")
    ap.add_argument("--files", type=int, help="generated files (default 4000; --quick: 600)")
    ap.add_argument("--rounds", type=int, help="timed rounds after the warm-up (default 5; --quick: 2)")
    ap.add_argument("--quick", action="store_true",
                    help="a short run: 600 files, 2 rounds, 10 latency runs, only timm and lightning from PyPI")
    ap.add_argument("--seed", type=int, default=gen_corpus.DEFAULT_SEED)
    ap.add_argument("--packages", help="comma-separated PyPI requirements for the real corpus "
                                       f"(default {','.join(PACKAGES)})")
    ap.add_argument("--no-pypi", action="store_true", help="leave out the PyPI corpus")
    ap.add_argument("--latency-runs", type=int, help="runs per single-file case (default 30; --quick: 10)")
    ap.add_argument("--threads-on", default="generated",
                    help="corpora (comma-separated: generated, pypi, both; or all, none) on which "
                         "-j 1 and -j 2 join the rounds (default: generated)")
    ap.add_argument("--callgrind-files", type=int,
                    help="generated files run under valgrind's callgrind (default 200; --quick: 50; 0: none)")
    ap.add_argument("--big-sizes",
                    help="sizes in MB of the single large files (default 1,5,20,50; --quick: 1,5; none: skip)")
    ap.add_argument("--no-build", action="store_true", help=argparse.SUPPRESS)  # handled by run.sh
    args = ap.parse_args(argv)
    files = args.files or (600 if args.quick else 4000)
    rounds = args.rounds or (2 if args.quick else 5)
    latency_runs = args.latency_runs or (10 if args.quick else 30)
    specs = ([s.strip() for s in args.packages.split(",") if s.strip()] if args.packages
             else (QUICK_PACKAGES if args.quick else PACKAGES))
    if args.no_pypi:
        specs = []
    callgrind_files = args.callgrind_files if args.callgrind_files is not None else (50 if args.quick else 200)
    big_arg = args.big_sizes or ("1,5" if args.quick else "1,5,20,50")
    big_sizes = [] if big_arg == "none" else [int(x) for x in big_arg.split(",") if x.strip()]
    if files < 1 or rounds < 1 or latency_runs < 1:
        ap.error("--files, --rounds and --latency-runs must be positive")
    threads_on = {t.strip() for t in args.threads_on.split(",") if t.strip()}
    if "all" in threads_on:
        threads_on = {"generated", "pypi", "both"}
    threads_on.discard("none")
    if threads_on - {"generated", "pypi", "both"}:
        ap.error(f"--threads-on: unknown corpus {', '.join(sorted(threads_on - {'generated', 'pypi', 'both'}))}")

    t_start = time.perf_counter()
    ctx = {"date": time.strftime("%Y-%m-%d %H:%M %Z"), "machine": machine_info(), "load_start": loadavg(),
           "cmdline": os.environ.get("BENCH_CMDLINE") or "bench/run.sh " + " ".join(argv or sys.argv[1:]),
           "rounds": rounds, "latency_runs": latency_runs}
    if not BUILT.exists():
        raise SystemExit(f"{rel(BUILT)} is missing: run bench/run.sh (it builds it) or cargo build --release")
    WORK.mkdir(parents=True, exist_ok=True)
    ctx["git"] = git_state()
    snapshot_binary()
    ctx["oomlint_version"] = capture([BIN, "--version"]).stdout.strip()
    built = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(BUILT.stat().st_mtime))
    log(f"benchmarking {rel(BIN)}: a copy of {rel(BUILT)} (built {built}), {ctx['oomlint_version']}")

    step("corpus: generated")
    manifest = ensure_generated(files, args.seed)
    ctx["injected_bugs"] = manifest.get("bugs")
    step("ruff venv")
    ruff, ctx["ruff_version"] = ensure_venv()
    step("corpus: pypi")
    pypi_dirs, wheels, ctx["pypi_failed"] = ensure_pypi(specs) if specs else ([], [], [])
    if not specs:
        log("left out (--no-pypi)")
    ctx["wheels"] = wheels

    step("oomlint features")
    feats = detect_features()
    ctx["features"] = feats
    for flag, key in (("--no-cache", "no_cache"), ("--no-prefilter", "no_prefilter"),
                      ("--prefilter-stats", "prefilter_stats"), ("-j", "threads"),
                      ("--parse-only", "parse_only")):
        log(f"{flag}: {'supported' if feats[key] else 'NOT supported: skipped / n/a'}")

    corpora = [("generated", [GEN_DIR],
                f"synthetic, seed {args.seed}: {manifest['kinds'].get('train', 0)} training scripts, "
                f"{manifest['kinds'].get('model', 0)} model files, {manifest['kinds'].get('library', 0)} "
                f"files without torch")]
    if pypi_dirs:
        corpora.append(("pypi", pypi_dirs, ", ".join(w.split("-")[0] + " " + w.split("-")[1] for w in wheels)))
        corpora.append(("both", [GEN_DIR, *pypi_dirs], "generated + pypi"))
    # Each corpus folder is a project of its own: under target/bench its project root
    # would be the oomlint checkout, and every run would also model the repository's
    # fixtures (about a third more CPU on the generated corpus). ruff ignores an empty
    # pyproject.toml.
    for d in [GEN_DIR, *pypi_dirs]:
        (d / "pyproject.toml").touch()
    ctx["corpora"] = []
    for name, paths, content in corpora:
        step(f"corpus {name}")
        facts = corpus_facts(name, paths)
        log(f"{facts['files']:,} files, {facts['bytes'] / 1e6:.1f} MB, {facts['lines']:,} lines")
        n_ruff = ruff_file_count(ruff, facts["paths"])
        result = measure_corpus(facts, feats, ruff, rounds, name in threads_on)
        n_oom = result.get("oomlint_files_checked")
        for tool, n in (("ruff --show-files", n_ruff), ("oomlint", n_oom)):
            if n is not None and n != facts["files"]:
                log(f"NOTE: {tool} sees {n} files, the script counted {facts['files']}")
        facts["ruff_files"], facts["oomlint_files"] = n_ruff, n_oom
        io = measure_cache_and_io(facts, feats, rounds)
        if io.get("cached"):
            log(f"cached re-run {fmt_s(io['cached']['median'])} (fill {fmt_s(io['cache_fill'])}), "
                f"I/O floor {fmt_s(io['cat']['median']) if io.get('cat') else 'n/a'}")
        else:
            log(f"I/O floor {fmt_s(io['cat']['median']) if io.get('cat') else 'n/a'}")
        ctx["corpora"].append({"facts": facts, "result": result, "io": io, "content": content})

    if callgrind_files > 0:
        step(f"instruction counts: callgrind on {callgrind_files} generated files")
        ctx["callgrind"] = measure_callgrind(corpus_files([GEN_DIR]), ruff, callgrind_files)
    if big_sizes:
        step(f"single large files: {', '.join(f'{s} MB' for s in big_sizes)}")
        ctx["big_files"] = measure_big_files(big_sizes)

    step("start-up and single-file latency")
    lat_files = []
    for key, label in (("smallest_train", "small training script"), ("largest_train", "large training script")):
        if manifest.get(key):
            lat_files.append((label, GEN_DIR / manifest[key]["path"]))
    real = [PYPI_DIR / "transformers" / "transformers" / "models" / "llama" / "modeling_llama.py",
            PYPI_DIR / "timm" / "timm" / "models" / "vision_transformer.py"]
    for cand in real:
        if any(Path(d) in cand.parents for d in pypi_dirs) and cand.exists():
            lat_files.append(("real model file", cand))
            break
    ctx["latency"] = measure_latency(lat_files, feats, ruff, latency_runs)

    ctx["load_end"] = loadavg()
    ctx["elapsed"] = time.perf_counter() - t_start
    text = report(ctx)
    (WORK / "summary.md").write_text(text + "\n")
    (WORK / "results.json").write_text(json.dumps(ctx, indent=2, default=str))
    step(f"summary (benchmark took {ctx['elapsed'] / 60:.1f} min; also in {rel(WORK / 'summary.md')}, "
         f"raw numbers in {rel(WORK / 'results.json')})")
    log("")
    log(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
