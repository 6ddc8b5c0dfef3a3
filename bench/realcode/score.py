#!/usr/bin/env python3
"""Score oomlint against the hand-labelled real-code corpus.

usage: score.py [--bin PATH] [--root DIR] [--labels DIR] [--set NAME[,NAME]] [--json]

For every labels file (labels/<owner>+<name>.tsv) whose work tree ROOT/<owner>+<name>
exists, run the binary on the tree and match its findings to the labels by
(path relative to the repo root, line, rule):

  TP         current finding labelled TP, or matching an FN row (now found)
  FP         current finding labelled FP
  unlabelled current finding with no label (listed: they need judging)
  missed     TP/FN row with no current finding

precision = TP / (TP + FP)        recall = found / (found + missed)
(found = real rows, labelled TP or FN, that the binary reports now)

A finding that matches a TN row counts as a false alarm (FP): TN rows mark code
that must not be flagged.

Standard library only (Python 3.8+). Always exits 0 unless the arguments are bad.
"""

import argparse
import json
import os
import subprocess
import sys
from collections import OrderedDict, defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
VERDICTS = ("TP", "FP", "FN", "TN")
FAMILIES = ("1xx", "2xx", "3xx", "4xx", "5xx")


def family(rule):
    digits = "".join(ch for ch in rule if ch.isdigit())
    return (digits[0] + "xx") if digits else "?xx"


def read_labels(path):
    """Return (header dict, list of rows). Rows: dict path/line/rule/verdict/reason."""
    header = OrderedDict()
    rows = []
    problems = []
    with open(path, encoding="utf-8") as fh:
        for lineno, raw in enumerate(fh, 1):
            line = raw.rstrip("\n").rstrip("\r")
            if not line.strip():
                continue
            if line.startswith("#"):
                parts = line[1:].strip().split("\t", 1)
                key = parts[0].strip()
                header[key] = parts[1].strip() if len(parts) > 1 else ""
                continue
            cols = line.split("\t")
            if cols[:4] == ["path", "line", "rule", "verdict"]:
                continue  # column header
            if len(cols) < 4:
                problems.append("%s:%d: expected 5 tab-separated columns" % (path, lineno))
                continue
            try:
                ln = int(cols[1])
            except ValueError:
                problems.append("%s:%d: line is not a number: %r" % (path, lineno, cols[1]))
                continue
            verdict = cols[3].strip().upper()
            if verdict not in VERDICTS:
                problems.append("%s:%d: unknown verdict %r" % (path, lineno, cols[3]))
                continue
            rows.append({
                "path": cols[0].strip()[2:] if cols[0].strip().startswith("./") else cols[0].strip(),
                "line": ln,
                "rule": cols[2].strip(),
                "verdict": verdict,
                "reason": cols[4].strip() if len(cols) > 4 else "",
            })
    return header, rows, problems


def run_binary(binary, tree):
    cmd = [binary, tree, "--isolated", "--no-cache", "--exit-zero", "--format", "json"]
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        return None, "cannot run %s: %s" % (binary, exc)
    out = proc.stdout.decode("utf-8", "replace").strip()
    if not out:
        if proc.returncode != 0:
            return None, "exit %d: %s" % (proc.returncode, proc.stderr.decode("utf-8", "replace")[-500:])
        return [], None
    try:
        data = json.loads(out)
    except ValueError:
        # jsonl fallback
        try:
            data = [json.loads(l) for l in out.splitlines() if l.strip()]
        except ValueError as exc:
            return None, "unreadable output: %s" % exc
    return data, None


def relpath(path, tree):
    tree_abs = os.path.abspath(tree)
    p = path
    if not os.path.isabs(p):
        p = os.path.abspath(p)
    try:
        rel = os.path.relpath(p, tree_abs)
    except ValueError:
        rel = path
    if rel.startswith(".."):
        rel = path
    return rel.replace(os.sep, "/")


def new_counts():
    return {"TP": 0, "FP": 0, "unlabelled": 0, "missed": 0, "found": 0}


def ratios(c):
    prec = c["TP"] / float(c["TP"] + c["FP"]) if (c["TP"] + c["FP"]) else None
    rec = c["found"] / float(c["found"] + c["missed"]) if (c["found"] + c["missed"]) else None
    return prec, rec


def fmt_ratio(x):
    return "  -  " if x is None else "%5.1f%%" % (100.0 * x)


def score_repo(binary, tree, rows):
    findings, err = run_binary(binary, tree)
    if err:
        return None, err
    labels = {}
    for r in rows:
        labels.setdefault((r["path"], r["line"], r["rule"]), r)
    seen = set()
    per_rule = defaultdict(new_counts)
    unlabelled = []
    false_alarms = []
    for f in findings:
        key = (relpath(f.get("path", ""), tree), int(f.get("line", 0)), f.get("code", ""))
        if key in seen:
            continue
        seen.add(key)
        c = per_rule[key[2]]
        row = labels.get(key)
        if row is None:
            c["unlabelled"] += 1
            unlabelled.append(key)
        elif row["verdict"] in ("TP", "FN"):
            c["TP"] += 1
            c["found"] += 1
        else:  # FP, or a TN row that is now flagged
            c["FP"] += 1
            false_alarms.append((key, row["verdict"]))
    missed = []
    for key, row in labels.items():
        if row["verdict"] in ("TP", "FN") and key not in seen:
            per_rule[key[2]]["missed"] += 1
            missed.append(key)
    return {"per_rule": per_rule, "unlabelled": sorted(unlabelled), "missed": sorted(missed),
            "false_alarms": sorted(false_alarms), "findings": len(seen)}, None


def add(into, c):
    for k in into:
        into[k] += c.get(k, 0)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(REPO_ROOT, "target", "release", "oomlint"),
                    help="oomlint binary (default: target/release/oomlint of this repo)")
    ap.add_argument("--root", default=os.environ.get("OOMLINT_REALCODE", "/work/realcode"),
                    help="directory of work trees owner+name (default $OOMLINT_REALCODE or /work/realcode)")
    ap.add_argument("--labels", default=os.path.join(HERE, "labels"), help="labels directory")
    ap.add_argument("--set", default=None,
                    help="score only the repositories whose '# set' header is one of these "
                         "comma-separated names (e.g. fresh3,fresh5); default: every set")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args(argv)

    if not os.path.isdir(args.labels):
        ap.error("no labels directory: %s" % args.labels)

    repos = OrderedDict()
    skipped = []
    problems = []
    overall = new_counts()
    fam = OrderedDict((f, new_counts()) for f in FAMILIES)
    rules = defaultdict(new_counts)
    sets = OrderedDict()
    wanted = set(x.strip() for x in args.set.split(",") if x.strip()) if args.set else None

    for name in sorted(os.listdir(args.labels)):
        if not name.endswith(".tsv"):
            continue
        key = name[:-4]
        header, rows, probs = read_labels(os.path.join(args.labels, name))
        problems.extend(probs)
        if wanted is not None and header.get("set", "") not in wanted:
            continue
        tree = os.path.join(args.root, key)
        if not os.path.isdir(tree):
            skipped.append((key, "no work tree at %s" % tree))
            continue
        if not os.path.exists(args.bin):
            skipped.append((key, "no binary at %s" % args.bin))
            continue
        res, err = score_repo(args.bin, tree, rows)
        if err:
            skipped.append((key, err))
            continue
        tot = new_counts()
        for rule, c in res["per_rule"].items():
            add(tot, c)
            add(rules[rule], c)
            f = family(rule)
            fam.setdefault(f, new_counts())
            add(fam[f], c)
        add(overall, tot)
        add(sets.setdefault(header.get("set", "?"), new_counts()), tot)
        res["total"] = tot
        res["header"] = header
        res["verdict_rows"] = {v: sum(1 for r in rows if r["verdict"] == v) for v in VERDICTS}
        repos[key] = res

    if args.json:
        def pack(c):
            p, r = ratios(c)
            d = dict(c)
            d["precision"] = p
            d["recall"] = r
            return d
        out = {
            "binary": args.bin,
            "root": args.root,
            "repos": OrderedDict((k, {
                "repo": v["header"].get("repo", k.replace("+", "/", 1)),
                "commit": v["header"].get("commit"),
                "kind": v["header"].get("kind"),
                "findings": v["findings"],
                "total": pack(v["total"]),
                "rules": {r: pack(c) for r, c in sorted(v["per_rule"].items())},
                "unlabelled": ["%s:%d %s" % u for u in v["unlabelled"]],
                "missed": ["%s:%d %s" % m for m in v["missed"]],
                "false_alarms": ["%s:%d %s (%s)" % (k2[0], k2[1], k2[2], verdict) for k2, verdict in v["false_alarms"]],
            }) for k, v in repos.items()),
            "families": OrderedDict((f, pack(c)) for f, c in fam.items() if any(c.values())),
            "sets": OrderedDict((k, pack(c)) for k, c in sorted(sets.items())),
            "rules": OrderedDict((r, pack(c)) for r, c in sorted(rules.items())),
            "overall": pack(overall),
            "skipped": [{"repo": k, "why": why} for k, why in skipped],
            "label_problems": problems,
        }
        json.dump(out, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0

    width = max([len(k) for k in repos] + [len("OVERALL (%d repos)" % len(repos)), 20])

    def line(name, c):
        p, r = ratios(c)
        return "%-*s %4d %4d %5d %6d   %s  %s" % (
            width, name, c["TP"], c["FP"], c["unlabelled"], c["missed"], fmt_ratio(p), fmt_ratio(r))

    head = "%-*s %4s %4s %5s %6s   %6s  %6s" % (width, "", "TP", "FP", "unlab", "missed", "prec", "recall")
    print("binary: %s" % args.bin)
    print("root:   %s" % args.root)
    print()
    print("per repo")
    print(head)
    for k, v in repos.items():
        print(line(k, v["total"]))
    print()
    print("per rule family")
    print(head)
    for f, c in fam.items():
        if any(c.values()):
            print(line(f, c))
    print()
    print("per rule")
    print(head)
    for r, c in sorted(rules.items()):
        print(line(r, c))
    print()
    print("per set ('# set' header)")
    print(head)
    for k, c in sorted(sets.items()):
        print(line(k, c))
    print()
    print(line("OVERALL (%d repos)" % len(repos), overall))
    print()
    any_unl = [(k, v) for k, v in repos.items() if v["unlabelled"]]
    if any_unl:
        print("unlabelled findings (need judging):")
        for k, v in any_unl:
            print("  %s" % k)
            for u in v["unlabelled"]:
                print("    %s:%d %s" % u)
        print()
    any_missed = [(k, v) for k, v in repos.items() if v["missed"]]
    if any_missed:
        print("missed (labelled real, not reported):")
        for k, v in any_missed:
            print("  %s" % k)
            for m in v["missed"]:
                print("    %s:%d %s" % m)
        print()
    tn_hits = [(k, v) for k, v in repos.items() if any(vd == "TN" for _, vd in v["false_alarms"])]
    if tn_hits:
        print("reported on rows labelled TN (counted as FP):")
        for k, v in tn_hits:
            for key, vd in v["false_alarms"]:
                if vd == "TN":
                    print("  %s: %s:%d %s" % (k, key[0], key[1], key[2]))
        print()
    if skipped:
        print("skipped:")
        for k, why in skipped:
            print("  %s: %s" % (k, why))
        print()
    if problems:
        print("label file problems:")
        for p in problems:
            print("  " + p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
