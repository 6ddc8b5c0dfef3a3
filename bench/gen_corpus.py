#!/usr/bin/env python3
"""Generate the benchmark's synthetic Python corpus (reproducible: fixed seed).

The corpus mixes, by file count, about 30% PyTorch training scripts (plain loops, AMP,
accelerate, Lightning modules, Hugging Face Trainer subclasses, nanoGPT-style scripts),
30% model definitions (nn.Module classes, layer loops) and 40% library code with no torch
at all (parsers, data structures, math utilities, CLI tools, web handlers). About one
training script in four carries one of the bugs oomlint looks for; the rest are correct.
File sizes run from 100 to 3000 lines, most of them short, as in real projects.

Every file comes from templates in this file, varied by a per-file random source seeded
from (seed, file index): the first N files are the same whatever --files says.

    python3 bench/gen_corpus.py OUT_DIR [--files 4000] [--seed 1234] [--verify]

Python 3.8+ standard library only.
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import string
import sys
import textwrap
from pathlib import Path

# Bump when the templates change: the benchmark regenerates a corpus whose stamp differs.
GENERATOR_VERSION = 6
DEFAULT_SEED = 20240611
MIN_LINES = 100
MAX_LINES = 3000

# --------------------------------------------------------------------------------------
# Vocabulary
# --------------------------------------------------------------------------------------

NOUNS = [
    "record", "token", "node", "item", "entry", "buffer", "packet", "segment", "frame",
    "sample", "feature", "vector", "graph", "edge", "vertex", "path", "query", "request",
    "response", "session", "user", "account", "order", "invoice", "event", "message",
    "channel", "stream", "chunk", "block", "page", "index", "key", "value", "field",
    "column", "row", "table", "schema", "option", "setting", "rule", "pattern", "span",
    "interval", "point", "shape", "grid", "cell", "signal", "metric", "score", "label",
    "image", "text", "document", "word", "sentence", "corpus", "region", "bucket", "slot",
    "ticket", "report", "summary", "profile", "snapshot", "version", "release", "asset",
]
VERBS = [
    "parse", "load", "build", "compute", "merge", "split", "filter", "normalize",
    "resolve", "encode", "decode", "render", "validate", "collect", "update", "apply",
    "transform", "flatten", "group", "sort", "scan", "emit", "format", "convert",
    "extract", "register", "dispatch", "serialize", "restore", "prune", "check", "read",
    "write", "fetch", "match", "select", "count", "trim", "pack", "unpack",
]
ADJECTIVES = [
    "raw", "clean", "sparse", "dense", "local", "global", "cached", "pending", "active",
    "default", "primary", "nested", "final", "partial", "shared", "current", "stale",
    "valid", "unique", "sorted", "merged", "weighted", "visible", "remote",
]
CLASS_SUFFIXES = [
    "Manager", "Parser", "Builder", "Registry", "Store", "Handler", "Reader", "Writer",
    "Pool", "Index", "Queue", "Tracker", "Resolver", "Loader", "Formatter", "Validator",
]
TASKS = [
    "image classification", "sentiment analysis", "language modelling", "segmentation",
    "speech recognition", "object detection", "question answering", "regression",
    "anomaly detection", "recommendation", "machine translation", "time-series forecasting",
]
SUBJECTS = [
    "the input", "each batch", "the configuration", "the current state", "the records",
    "the returned value", "the cache", "every entry", "the caller", "the result",
]
COMMENTS = [
    "keep this cheap: it runs once per step",
    "the order matters here, see the note above",
    "fall back to the defaults when nothing is configured",
    "guard against an empty input",
    "TODO: make this configurable",
    "copied values only, the originals stay untouched",
    "this mirrors the behaviour of the reference implementation",
    "avoid a division by zero on tiny inputs",
    "the last chunk may be shorter than the others",
    "NOTE: callers rely on the sorted order",
    "small enough to keep in memory",
    "logging only; does not change the result",
]


class Ctx:
    """Per-file state: the random source and the top-level names already taken."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.taken: set[str] = set()
        self.imports: set[str] = set()

    def choice(self, seq):
        return self.rng.choice(seq)

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def randint(self, a: int, b: int) -> int:
        return self.rng.randint(a, b)

    def sample(self, seq, k):
        return self.rng.sample(seq, k)

    def unique(self, base: str, camel: bool = False) -> str:
        name, i = base, 2
        while name in self.taken:
            name = f"{base}{i}" if camel else f"{base}_{i}"
            i += 1
        self.taken.add(name)
        return name

    def func(self, verbs=None, nouns=None) -> str:
        verb = self.choice(verbs or VERBS)
        noun = self.choice(nouns or NOUNS)
        if self.chance(0.3):
            return self.unique(f"{verb}_{self.choice(ADJECTIVES)}_{noun}")
        return self.unique(f"{verb}_{noun}")

    def cls(self, suffixes=None, nouns=None) -> str:
        noun = self.choice(nouns or NOUNS).capitalize()
        suffix = self.choice(suffixes or CLASS_SUFFIXES)
        if self.chance(0.3):
            return self.unique(self.choice(ADJECTIVES).capitalize() + noun + suffix, camel=True)
        return self.unique(noun + suffix, camel=True)

    def noun(self) -> str:
        return self.choice(NOUNS)

    def need(self, *lines: str) -> None:
        self.imports.update(lines)

    def comment(self, indent: int) -> str:
        return " " * indent + "# " + self.choice(COMMENTS)

    def maybe_comment(self, indent: int, p: float = 0.3) -> str:
        return self.comment(indent) if self.chance(p) else ""

    def sentence(self) -> str:
        forms = [
            "Return the {a} {n} for {s}.",
            "Compute {s} from the {a} {n}s.",
            "Apply the {a} {n} rules to {s}.",
            "Build a {a} {n} and return it.",
            "Check {s} against the {a} {n}.",
            "Collect the {n}s that {s} refers to.",
            "Split {s} into {a} {n}s.",
        ]
        return self.choice(forms).format(a=self.choice(ADJECTIVES), n=self.noun(), s=self.choice(SUBJECTS))

    def doc(self, indent: int, p: float = 0.7) -> str:
        """A docstring line (or block) at `indent`, or an empty line."""
        if not self.chance(p):
            return ""
        pad = " " * indent
        if self.chance(0.6):
            return f'{pad}"""{self.sentence()}"""'
        body = [self.sentence()]
        if self.chance(0.5):
            body.append("")
            body.append(f"The {self.choice(ADJECTIVES)} {self.noun()} is left unchanged; "
                        f"{self.choice(SUBJECTS)} is copied first.")
        lines = [f'{pad}"""{body[0]}']
        lines += [(pad + b) if b else "" for b in body[1:]]
        lines.append(f'{pad}"""')
        return "\n".join(lines)


def T(template: str, **kw) -> str:
    """Fill a template: `$name` placeholders, the rest is literal Python."""
    return string.Template(textwrap.dedent(template).strip("\n")).substitute(**kw)


def opt(flag: bool, text: str) -> str:
    return text if flag else ""


# --------------------------------------------------------------------------------------
# Generic helpers without torch (fillers for every category)
# --------------------------------------------------------------------------------------


def g_format_duration(c: Ctx) -> str:
    name = c.unique(c.choice(["format_duration", "human_duration", "pretty_seconds"]))
    return T('''
        def $name(seconds):
        $doc
            seconds = int(seconds)
            hours, rest = divmod(seconds, 3600)
            minutes, secs = divmod(rest, 60)
            if hours:
                return f"{hours}h{minutes:02d}m{secs:02d}s"
            if minutes:
                return f"{minutes}m{secs:02d}s"
            return f"{secs}s"
    ''', name=name, doc=c.doc(4))


def g_human_bytes(c: Ctx) -> str:
    name = c.unique(c.choice(["human_bytes", "format_size", "pretty_size"]))
    base = c.choice(["1024.0", "1000.0"])
    return T('''
        def $name(num, suffix="B"):
        $doc
            for unit in ("", "K", "M", "G", "T", "P"):
                if abs(num) < $base:
                    return f"{num:3.1f}{unit}{suffix}"
                num /= $base
            return f"{num:.1f}E{suffix}"
    ''', name=name, base=base, doc=c.doc(4))


def g_chunked(c: Ctx) -> str:
    name = c.unique(c.choice(["chunked", "batched", "take_chunks", "split_every"]))
    size = c.choice(["size", "n", "chunk_size"])
    return T('''
        def $name(items, $size):
        $doc
            if $size <= 0:
                raise ValueError("$size must be positive")
            chunk = []
            for item in items:
                chunk.append(item)
                if len(chunk) == $size:
                    yield chunk
                    chunk = []
            if chunk:
                yield chunk
    ''', name=name, size=size, doc=c.doc(4))


def g_flatten_dict(c: Ctx) -> str:
    name = c.unique(c.choice(["flatten_dict", "flatten_mapping", "to_dotted"]))
    sep = c.choice(['"."', '"/"', '"__"'])
    return T('''
        def $name(mapping, prefix="", sep=$sep):
        $doc
            flat = {}
            for key, value in mapping.items():
                full = f"{prefix}{sep}{key}" if prefix else str(key)
                if isinstance(value, dict):
                    flat.update($name(value, full, sep))
                else:
                    flat[full] = value
            return flat
    ''', name=name, sep=sep, doc=c.doc(4))


def g_retry(c: Ctx) -> str:
    c.need("import functools", "import time")
    name = c.unique(c.choice(["retry", "with_retries", "retrying"]))
    tries = c.randint(2, 6)
    return T('''
        def $name(times=$tries, delay=0.5, backoff=2.0, exceptions=(Exception,)):
        $doc
            def decorator(fn):
                @functools.wraps(fn)
                def wrapper(*args, **kwargs):
                    wait = delay
                    for attempt in range(1, times + 1):
                        try:
                            return fn(*args, **kwargs)
                        except exceptions:
                            if attempt == times:
                                raise
                            time.sleep(wait)
                            wait *= backoff
                    return None
                return wrapper
            return decorator
    ''', name=name, tries=tries, doc=c.doc(4))


def g_timer(c: Ctx) -> str:
    c.need("import time")
    name = c.cls(["Timer", "Stopwatch", "Clock"], ["step", "phase", "block", "section", "run"])
    return T('''
        class $name:
        $doc
            def __init__(self, label="block", sink=None):
                self.label = label
                self.sink = sink
                self.elapsed = 0.0
                self._start = None

            def __enter__(self):
                self._start = time.perf_counter()
                return self

            def __exit__(self, exc_type, exc, tb):
                self.elapsed = time.perf_counter() - self._start
                if self.sink is not None:
                    self.sink(f"{self.label}: {self.elapsed:.3f}s")
                return False
    ''', name=name, doc=c.doc(4))


def g_jsonl(c: Ctx) -> str:
    c.need("import json")
    rd = c.unique(c.choice(["read_jsonl", "load_jsonl", "iter_jsonl"]))
    wr = c.unique(c.choice(["write_jsonl", "dump_jsonl", "save_jsonl"]))
    return T('''
        def $rd(path):
        $doc
            with open(path, encoding="utf-8") as fh:
                for lineno, line in enumerate(fh, 1):
                    line = line.strip()
                    if not line or line.startswith("#"):
                        continue
                    try:
                        yield json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise ValueError(f"{path}:{lineno}: {exc}") from exc


        def $wr(path, rows):
            count = 0
            with open(path, "w", encoding="utf-8") as fh:
                for row in rows:
                    fh.write(json.dumps(row, sort_keys=True) + "\\n")
                    count += 1
            return count
    ''', rd=rd, wr=wr, doc=c.doc(4))


def g_slugify(c: Ctx) -> str:
    c.need("import re")
    name = c.unique(c.choice(["slugify", "make_slug", "to_identifier"]))
    return T('''
        _SLUG_RE = re.compile(r"[^a-z0-9]+")


        def $name(text, max_length=$maxlen):
        $doc
            slug = _SLUG_RE.sub("-", text.lower()).strip("-")
            if len(slug) > max_length:
                slug = slug[:max_length].rstrip("-")
            return slug or "item"
    ''', name=name, maxlen=c.choice([32, 48, 64, 80]), doc=c.doc(4))


def g_deep_merge(c: Ctx) -> str:
    name = c.unique(c.choice(["deep_merge", "merge_configs", "overlay"]))
    return T('''
        def $name(base, override):
        $doc
            merged = dict(base)
            for key, value in override.items():
                if isinstance(value, dict) and isinstance(merged.get(key), dict):
                    merged[key] = $name(merged[key], value)
                else:
                    merged[key] = value
            return merged
    ''', name=name, doc=c.doc(4))


def g_env_flag(c: Ctx) -> str:
    c.need("import os")
    name = c.unique(c.choice(["env_flag", "getenv_bool", "read_flag"]))
    return T('''
        _TRUTHY = {"1", "true", "yes", "on"}


        def $name(key, default=False):
        $doc
            raw = os.environ.get(key)
            if raw is None:
                return default
            return raw.strip().lower() in _TRUTHY
    ''', name=name, doc=c.doc(4))


def g_registry(c: Ctx) -> str:
    name = c.cls(["Registry"], ["handler", "plugin", "backend", "codec", "format", "command"])
    return T('''
        class $name:
        $doc
            def __init__(self, kind):
                self.kind = kind
                self._items = {}

            def register(self, key=None):
                def decorator(obj):
                    name = key or obj.__name__.lower()
                    if name in self._items:
                        raise KeyError(f"{self.kind} {name!r} is already registered")
                    self._items[name] = obj
                    return obj
                return decorator

            def get(self, key):
                try:
                    return self._items[key]
                except KeyError:
                    known = ", ".join(sorted(self._items))
                    raise KeyError(f"unknown {self.kind} {key!r}; known: {known}") from None

            def __contains__(self, key):
                return key in self._items

            def __len__(self):
                return len(self._items)
    ''', name=name, doc=c.doc(4))


def g_key_values(c: Ctx) -> str:
    name = c.unique(c.choice(["parse_key_values", "parse_overrides", "split_pairs"]))
    return T('''
        def $name(pairs, sep="="):
        $doc
            result = {}
            for pair in pairs:
                if sep not in pair:
                    raise ValueError(f"expected KEY{sep}VALUE, got {pair!r}")
                key, raw = pair.split(sep, 1)
                raw = raw.strip()
                if raw.lower() in ("true", "false"):
                    value = raw.lower() == "true"
                else:
                    try:
                        value = int(raw)
                    except ValueError:
                        try:
                            value = float(raw)
                        except ValueError:
                            value = raw
                result[key.strip()] = value
            return result
    ''', name=name, doc=c.doc(4))


def g_enum(c: Ctx) -> str:
    c.need("import enum")
    name = c.cls(["Kind", "Mode", "State", "Status", "Level"])
    members = c.sample(["PENDING", "RUNNING", "DONE", "FAILED", "SKIPPED", "QUEUED", "PAUSED",
                        "ACTIVE", "ARCHIVED", "DRAFT"], c.randint(3, 6))
    body = "\n".join(f'    {m} = "{m.lower()}"' for m in members)
    final = members[-1]
    return T('''
        class $name(enum.Enum):
        $body

            @classmethod
            def parse(cls, text):
                for member in cls:
                    if member.value == text.strip().lower():
                        return member
                raise ValueError(f"not a {cls.__name__}: {text!r}")

            @property
            def is_final(self):
                return self is type(self).$final
    ''', name=name, body=body, final=final)


def g_dataclass_model(c: Ctx) -> str:
    c.need("from dataclasses import dataclass, field")
    name = c.cls(["Record", "Entry", "Info", "Spec", "Item"], NOUNS)
    fields = c.sample(NOUNS, c.randint(2, 6))
    lines = []
    for f in fields:
        kind = c.choice(["str", "int", "float", "bool", "list"])
        default = {"str": '""', "int": "0", "float": "0.0", "bool": "False",
                   "list": "field(default_factory=list)"}[kind]
        lines.append(f"    {f}_{c.choice(['id', 'name', 'count', 'size', 'tags', 'ok'])}: {kind} = {default}")
    names = [ln.split(":")[0].strip() for ln in lines]
    to_dict = ", ".join(f'"{n}": self.{n}' for n in names)
    return T('''
        @dataclass
        class $name:
        $doc
        $fields

            def to_dict(self):
                return {$to_dict}

            @classmethod
            def from_dict(cls, data):
                known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
                return cls(**known)
    ''', name=name, fields="\n".join(lines), to_dict=to_dict, doc=c.doc(4))


GENERIC_FILLERS = [
    g_format_duration, g_human_bytes, g_chunked, g_flatten_dict, g_retry, g_timer, g_jsonl,
    g_slugify, g_deep_merge, g_env_flag, g_registry, g_key_values, g_enum, g_dataclass_model,
]


# --------------------------------------------------------------------------------------
# Torch helpers (fillers for training scripts and model files)
# --------------------------------------------------------------------------------------

TORCH = ("import torch",)
NN = ("import torch", "import torch.nn as nn")
FN = ("import torch", "import torch.nn.functional as F")


def t_average_meter(c: Ctx) -> str:
    name = c.cls(["Mean", "Meter", "Tally"], ["running", "smoothed", "window", "scalar"])
    return T('''
        class $name:
        $doc
            def __init__(self, label, precision=4):
                self.label = label
                self.precision = precision
                self.last = 0.0
                self.total = 0.0
                self.weight = 0

            def add(self, value, weight=1):
                self.last = float(value)
                self.total += self.last * weight
                self.weight += weight

            @property
            def mean(self):
                if not self.weight:
                    return 0.0
                return self.total / self.weight

            def clear(self):
                self.last, self.total, self.weight = 0.0, 0.0, 0

            def __repr__(self):
                p = self.precision
                return f"{self.label}={self.last:.{p}f} (mean {self.mean:.{p}f} over {self.weight})"
    ''', name=name, doc=c.doc(4))


def t_accuracy(c: Ctx) -> str:
    c.need(*TORCH)
    name = c.unique(c.choice(["hit_rates", "topk_hits", "ranked_accuracy"]))
    return T('''
        def $name(logits, labels, ks=(1, $k)):
        $doc
            with torch.no_grad():
                ranked = logits.topk(max(ks), dim=-1).indices
                hits = ranked.eq(labels.unsqueeze(-1))
                rates = {}
                for k in ks:
                    rates[f"top{k}"] = hits[..., :k].any(dim=-1).float().mean().item()
                return rates
    ''', name=name, k=c.choice([3, 5, 10]), doc=c.doc(4))


def t_count_params(c: Ctx) -> str:
    name = c.unique(c.choice(["count_parameters", "num_params", "parameter_count"]))
    return T('''
        def $name(model, trainable_only=True):
        $doc
            total = 0
            for param in model.parameters():
                if trainable_only and not param.requires_grad:
                    continue
                total += param.numel()
            return total
    ''', name=name, doc=c.doc(4))


def t_set_seed(c: Ctx) -> str:
    c.need(*TORCH, "import random", "import numpy as np")
    name = c.unique(c.choice(["set_seed", "seed_everything", "fix_seeds"]))
    det = c.chance(0.5)
    return T('''
        def $name(seed=$seed):
        $doc
            random.seed(seed)
            np.random.seed(seed)
            torch.manual_seed(seed)
            if torch.cuda.is_available():
                torch.cuda.manual_seed_all(seed)
        $det
    ''', name=name, seed=c.choice([0, 42, 1234, 1337, 2024]), doc=c.doc(4),
             det=opt(det, "    torch.backends.cudnn.deterministic = True\n    torch.backends.cudnn.benchmark = False"))


def t_checkpoint(c: Ctx) -> str:
    c.need(*TORCH, "import os")
    save = c.unique(c.choice(["save_snapshot", "store_state", "write_snapshot"]))
    load = c.unique(c.choice(["load_snapshot", "restore_state", "resume_state"]))
    return T('''
        def $save(folder, step, **objects):
        $doc
            os.makedirs(folder, exist_ok=True)
            payload = {"step": step}
            for key, obj in objects.items():
                payload[key] = obj.state_dict() if hasattr(obj, "state_dict") else obj
            final = os.path.join(folder, f"step_{step:07d}.pt")
            partial = final + ".partial"
            torch.save(payload, partial)
            os.replace(partial, final)
            return final


        def $load(path, device="cpu", **objects):
            payload = torch.load(path, map_location=device)
            for key, obj in objects.items():
                if key not in payload:
                    continue
                if hasattr(obj, "load_state_dict"):
                    obj.load_state_dict(payload[key])
            return payload.get("step", 0)
    ''', save=save, load=load, doc=c.doc(4))


def t_cosine_lr(c: Ctx) -> str:
    c.need("import math")
    name = c.unique(c.choice(["cosine_lr", "lr_at_step", "warmup_cosine"]))
    return T('''
        def $name(step, base_lr, warmup_steps, total_steps, min_lr=0.0):
        $doc
            if step < warmup_steps:
                return base_lr * (step + 1) / max(1, warmup_steps)
            if step >= total_steps:
                return min_lr
            progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
            coeff = 0.5 * (1.0 + math.cos(math.pi * progress))
            return min_lr + coeff * (base_lr - min_lr)
    ''', name=name, doc=c.doc(4))


def t_early_stopping(c: Ctx) -> str:
    name = c.cls(["Stopping", "Stopper", "Monitor"], ["early", "patience", "plateau"])
    return T('''
        class $name:
        $doc
            def __init__(self, patience=$patience, min_delta=0.0, mode="min"):
                self.patience = patience
                self.min_delta = min_delta
                self.mode = mode
                self.best = None
                self.bad_epochs = 0

            def improved(self, value):
                if self.best is None:
                    return True
                if self.mode == "min":
                    return value < self.best - self.min_delta
                return value > self.best + self.min_delta

            def __call__(self, value):
                if self.improved(value):
                    self.best = value
                    self.bad_epochs = 0
                    return False
                self.bad_epochs += 1
                return self.bad_epochs >= self.patience
    ''', name=name, patience=c.randint(3, 20), doc=c.doc(4))


def t_grad_norm(c: Ctx) -> str:
    c.need(*TORCH)
    name = c.unique(c.choice(["grad_norm", "global_grad_norm", "total_grad_norm"]))
    return T('''
        def $name(parameters, norm_type=2.0):
        $doc
            grads = [p.grad.detach() for p in parameters if p.grad is not None]
            if not grads:
                return 0.0
            norms = torch.stack([torch.norm(g, norm_type) for g in grads])
            return torch.norm(norms, norm_type).item()
    ''', name=name, doc=c.doc(4))


def t_build_optimizer(c: Ctx) -> str:
    c.need(*TORCH)
    name = c.unique(c.choice(["build_optimizer", "make_optimizer", "create_optimizer"]))
    return T('''
        def $name(model, name="adamw", lr=$lr, weight_decay=$wd, betas=(0.9, 0.95)):
        $doc
            decay, no_decay = [], []
            for pname, param in model.named_parameters():
                if not param.requires_grad:
                    continue
                if param.ndim < 2 or "norm" in pname or pname.endswith(".bias"):
                    no_decay.append(param)
                else:
                    decay.append(param)
            groups = [
                {"params": decay, "weight_decay": weight_decay},
                {"params": no_decay, "weight_decay": 0.0},
            ]
            if name == "adamw":
                return torch.optim.AdamW(groups, lr=lr, betas=betas)
            if name == "sgd":
                return torch.optim.SGD(groups, lr=lr, momentum=0.9, nesterov=True)
            raise ValueError(f"unknown optimizer {name!r}")
    ''', name=name, lr=c.choice(["3e-4", "1e-3", "6e-4", "1e-4", "5e-5"]),
             wd=c.choice(["0.01", "0.1", "0.05", "1e-4"]), doc=c.doc(4))


def t_config(c: Ctx) -> str:
    c.need("from dataclasses import dataclass, asdict")
    name = c.cls(["Config", "Args", "Settings", "Hparams"], ["train", "run", "experiment", "model", "data"])
    fields = [
        ("batch_size", "int", str(c.choice([8, 16, 32, 64, 128, 256]))),
        ("learning_rate", "float", c.choice(["3e-4", "1e-3", "2e-5", "5e-4"])),
        ("epochs", "int", str(c.randint(1, 100))),
        ("weight_decay", "float", c.choice(["0.0", "0.01", "0.1"])),
        ("warmup_steps", "int", str(c.choice([0, 100, 500, 2000]))),
        ("grad_clip", "float", c.choice(["1.0", "0.5", "5.0"])),
        ("num_workers", "int", str(c.choice([0, 2, 4, 8]))),
        ("seed", "int", str(c.choice([0, 42, 1337]))),
        ("output_dir", "str", c.choice(['"runs"', '"outputs"', '"checkpoints"'])),
        ("log_every", "int", str(c.choice([10, 50, 100]))),
        ("mixed_precision", "bool", c.choice(["True", "False"])),
    ]
    chosen = c.sample(fields, c.randint(5, len(fields)))
    body = "\n".join(f"    {n}: {t} = {v}" for n, t, v in chosen)
    return T('''
        @dataclass
        class $name:
        $doc
        $body

            def to_dict(self):
                return asdict(self)
    ''', name=name, body=body, doc=c.doc(4))


def t_collate(c: Ctx) -> str:
    c.need(*TORCH, "from torch.nn.utils.rnn import pad_sequence")
    name = c.unique(c.choice(["collate_fn", "pad_collate", "collate_batch"]))
    return T('''
        def $name(batch, pad_value=$pad):
        $doc
            inputs = [item[0] for item in batch]
            labels = torch.tensor([item[1] for item in batch], dtype=torch.long)
            lengths = torch.tensor([len(x) for x in inputs], dtype=torch.long)
            padded = pad_sequence(inputs, batch_first=True, padding_value=pad_value)
            mask = torch.arange(padded.size(1))[None, :] < lengths[:, None]
            return padded, mask, labels
    ''', name=name, pad=c.choice([0, -100, 1]), doc=c.doc(4))


def t_to_device(c: Ctx) -> str:
    c.need(*TORCH)
    name = c.unique(c.choice(["to_device", "move_to", "batch_to_device"]))
    return T('''
        def $name(batch, device, non_blocking=True):
        $doc
            if isinstance(batch, torch.Tensor):
                return batch.to(device, non_blocking=non_blocking)
            if isinstance(batch, dict):
                return {k: $name(v, device, non_blocking) for k, v in batch.items()}
            if isinstance(batch, (list, tuple)):
                return type(batch)($name(v, device, non_blocking) for v in batch)
            return batch
    ''', name=name, doc=c.doc(4))


def t_ema(c: Ctx) -> str:
    c.need(*TORCH, "import copy")
    name = c.cls(["Shadow", "Averager", "Tracker"], ["weight", "param", "ema", "polyak"])
    return T('''
        class $name:
        $doc
            def __init__(self, model, decay=$decay, warmup=$warmup):
                self.shadow = copy.deepcopy(model)
                self.shadow.requires_grad_(False)
                self.decay = decay
                self.warmup = warmup
                self.updates = 0

            def current_decay(self):
                ramp = (1 + self.updates) / (self.warmup + self.updates)
                return min(self.decay, ramp)

            def step(self, model):
                self.updates += 1
                keep = self.current_decay()
                with torch.no_grad():
                    pairs = zip(self.shadow.parameters(), model.parameters())
                    for mine, theirs in pairs:
                        mine.lerp_(theirs.detach(), 1.0 - keep)
                    for mine, theirs in zip(self.shadow.buffers(), model.buffers()):
                        mine.copy_(theirs)

            def state_dict(self):
                return {"shadow": self.shadow.state_dict(), "updates": self.updates}
    ''', name=name, decay=c.choice(["0.999", "0.9999", "0.995"]), warmup=c.choice([10, 100, 2000]),
             doc=c.doc(4))


def t_synthetic_dataset(c: Ctx) -> str:
    c.need(*TORCH, "from torch.utils.data import Dataset")
    name = c.cls(["Dataset"], ["synthetic", "random", "toy", "noise", "dummy"])
    return T('''
        class $name(Dataset):
        $doc
            def __init__(self, num_samples=$n, num_features=$f, num_classes=$k, seed=0):
                generator = torch.Generator().manual_seed(seed)
                self.x = torch.randn(num_samples, num_features, generator=generator)
                weights = torch.randn(num_features, num_classes, generator=generator)
                self.y = (self.x @ weights).argmax(dim=1)

            def __len__(self):
                return self.x.size(0)

            def __getitem__(self, idx):
                return self.x[idx], self.y[idx]
    ''', name=name, n=c.choice([1000, 4096, 10000, 50000]), f=c.choice([16, 32, 64, 128]),
             k=c.choice([2, 5, 10, 100]), doc=c.doc(4))


def t_metric_logger(c: Ctx) -> str:
    c.need("import json", "import os", "import time")
    name = c.cls(["Logger", "Writer", "Recorder"], ["metric", "scalar", "history", "run"])
    return T('''
        class $name:
        $doc
            def __init__(self, log_dir, filename="metrics.jsonl"):
                os.makedirs(log_dir, exist_ok=True)
                self.path = os.path.join(log_dir, filename)
                self.start = time.time()
                self.history = {}

            def log(self, step, **values):
                row = {"step": step, "time": round(time.time() - self.start, 3)}
                for key, value in values.items():
                    value = float(value)
                    row[key] = value
                    self.history.setdefault(key, []).append(value)
                with open(self.path, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(row) + "\\n")

            def best(self, key, mode="min"):
                values = self.history.get(key, [])
                if not values:
                    return None
                return min(values) if mode == "min" else max(values)
    ''', name=name, doc=c.doc(4))


def t_seed_worker(c: Ctx) -> str:
    c.need(*TORCH, "import random", "import numpy as np")
    name = c.unique(c.choice(["seed_worker", "worker_init_fn", "init_worker"]))
    return T('''
        def $name(worker_id):
        $doc
            worker_seed = torch.initial_seed() % 2**32
            np.random.seed(worker_seed + worker_id)
            random.seed(worker_seed + worker_id)
    ''', name=name, doc=c.doc(4))


def t_get_device(c: Ctx) -> str:
    c.need(*TORCH)
    name = c.unique(c.choice(["get_device", "pick_device", "default_device"]))
    return T('''
        def $name(prefer="cuda"):
        $doc
            if prefer == "cuda" and torch.cuda.is_available():
                return torch.device("cuda")
            if prefer in ("cuda", "mps") and getattr(torch.backends, "mps", None) is not None:
                if torch.backends.mps.is_available():
                    return torch.device("mps")
            return torch.device("cpu")
    ''', name=name, doc=c.doc(4))


TORCH_FILLERS = [
    t_average_meter, t_accuracy, t_count_params, t_set_seed, t_checkpoint, t_cosine_lr,
    t_early_stopping, t_grad_norm, t_build_optimizer, t_config, t_collate, t_to_device,
    t_ema, t_synthetic_dataset, t_metric_logger, t_seed_worker, t_get_device,
]


# --------------------------------------------------------------------------------------
# Model definitions (torch.nn)
# --------------------------------------------------------------------------------------

ACTS = ["nn.GELU()", "nn.ReLU()", "nn.SiLU()", "nn.Tanh()", "nn.LeakyReLU(0.1)"]


def m_mlp(c: Ctx) -> str:
    c.need(*NN)
    name = c.cls(["MLP", "FeedForward", "Projection", "Head"], ["", "gated", "deep", "output", "hidden"])
    act = c.choice(ACTS)
    drop = c.choice(["0.0", "0.1", "0.2"])
    mult = c.choice([2, 4, 8])
    return T('''
        class $name(nn.Module):
        $doc
            def __init__(self, dim, hidden_mult=$mult, dropout=$drop, bias=True):
                super().__init__()
                hidden = dim * hidden_mult
                self.fc1 = nn.Linear(dim, hidden, bias=bias)
                self.act = $act
                self.fc2 = nn.Linear(hidden, dim, bias=bias)
                self.drop = nn.Dropout(dropout)

            def forward(self, x):
                x = self.fc1(x)
                x = self.act(x)
                x = self.drop(x)
                x = self.fc2(x)
                return self.drop(x)
    ''', name=name, act=act, drop=drop, mult=mult, doc=c.doc(4))


def m_rmsnorm(c: Ctx) -> str:
    c.need(*NN)
    name = c.cls(["Norm", "RMSNorm", "LayerNorm"], ["rms", "scale", "simple", "fused"])
    return T('''
        class $name(nn.Module):
        $doc
            def __init__(self, dim, eps=$eps):
                super().__init__()
                self.eps = eps
                self.weight = nn.Parameter(torch.ones(dim))

            def _norm(self, x):
                return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

            def forward(self, x):
                output = self._norm(x.float()).type_as(x)
                return output * self.weight
    ''', name=name, eps=c.choice(["1e-5", "1e-6", "1e-8"]), doc=c.doc(4))


def m_attention(c: Ctx) -> str:
    c.need(*NN, "import torch.nn.functional as F", "import math")
    name = c.cls(["Attention", "SelfAttention", "MultiHeadAttention"], ["causal", "", "local", "cross"])
    sdpa = c.chance(0.5)
    body_sdpa = '''        mixed = F.scaled_dot_product_attention(
            q, k, v, dropout_p=self.p_drop if self.training else 0.0, is_causal=self.causal
        )'''
    body_manual = '''        scores = torch.matmul(q, k.transpose(-1, -2)) / self.scale
        if self.causal:
            n = scores.size(-1)
            future = self.future[:n, :n]
            scores = scores.masked_fill(future, torch.finfo(scores.dtype).min)
        weights = self.drop(scores.softmax(dim=-1))
        mixed = torch.matmul(weights, v)'''
    return T('''
        class $name(nn.Module):
        $doc
            def __init__(self, dim, n_heads=$heads, max_len=$maxlen, dropout=$drop, causal=True):
                super().__init__()
                if dim % n_heads:
                    raise ValueError(f"{dim} channels do not split into {n_heads} heads")
                self.n_heads = n_heads
                self.head_dim = dim // n_heads
                self.scale = math.sqrt(self.head_dim)
                self.p_drop = dropout
                self.causal = causal
                self.to_q = nn.Linear(dim, dim, bias=False)
                self.to_kv = nn.Linear(dim, 2 * dim, bias=False)
                self.out = nn.Linear(dim, dim)
                self.drop = nn.Dropout(dropout)
                future = torch.ones(max_len, max_len, dtype=torch.bool).triu(diagonal=1)
                self.register_buffer("future", future, persistent=False)

            def _split(self, t):
                return t.unflatten(-1, (self.n_heads, self.head_dim)).transpose(1, 2)

            def forward(self, x, context=None):
                source = x if context is None else context
                q = self._split(self.to_q(x))
                k, v = (self._split(t) for t in self.to_kv(source).chunk(2, dim=-1))
        $attn
                mixed = mixed.transpose(1, 2).flatten(-2)
                return self.drop(self.out(mixed))
    ''', name=name, heads=c.choice([4, 8, 12, 16]), maxlen=c.choice([256, 512, 1024, 2048]),
             drop=c.choice(["0.0", "0.1"]), attn=body_sdpa if sdpa else body_manual, doc=c.doc(4))


def m_block(c: Ctx, attn: str, mlp: str) -> str:
    c.need(*NN)
    name = c.cls(["Block", "Layer", "EncoderLayer", "DecoderLayer"], ["transformer", "", "residual", "pre_norm"])
    name = name.replace("_", "")
    return T('''
        class $name(nn.Module):
        $doc
            def __init__(self, dim, n_heads, dropout=0.0):
                super().__init__()
                self.ln_1 = nn.LayerNorm(dim)
                self.attn = $attn(dim, n_heads=n_heads, dropout=dropout)
                self.ln_2 = nn.LayerNorm(dim)
                self.mlp = $mlp(dim, dropout=dropout)

            def forward(self, x):
                x = x + self.attn(self.ln_1(x))
                x = x + self.mlp(self.ln_2(x))
                return x
    ''', name=name, attn=attn, mlp=mlp, doc=c.doc(4)), name


def m_transformer(c: Ctx) -> str:
    c.need(*NN, "import torch.nn.functional as F")
    attn_src = m_attention(c)
    attn = attn_src.split("class ", 1)[1].split("(", 1)[0]
    mlp_src = m_mlp(c)
    mlp = mlp_src.split("class ", 1)[1].split("(", 1)[0]
    block_src, block = m_block(c, attn, mlp)
    name = c.cls(["Model", "LM", "Transformer", "Decoder"], ["tiny", "token", "char", "small", "text"])
    sample = c.chance(0.6)
    sample_src = '''
    @torch.no_grad()
    def sample(self, prompt, steps, temperature=1.0, keep_top=None):
        tokens = prompt
        for _ in range(steps):
            window = tokens[:, -self.max_len:]
            logits, _ = self(window)
            scores = logits[:, -1] / max(temperature, 1e-5)
            if keep_top:
                cutoff = scores.topk(keep_top, dim=-1).values[:, -1:]
                scores = torch.where(scores < cutoff, torch.full_like(scores, float("-inf")), scores)
            choice = torch.multinomial(scores.softmax(dim=-1), 1)
            tokens = torch.cat([tokens, choice], dim=1)
        return tokens'''
    model = T('''
        class $name(nn.Module):
        $doc
            def __init__(self, vocab_size, dim=$dim, n_layers=$layers, n_heads=$heads, max_len=$maxlen, dropout=0.1):
                super().__init__()
                self.max_len = max_len
                self.embed = nn.Embedding(vocab_size, dim)
                self.positions = nn.Parameter(torch.zeros(1, max_len, dim))
                self.dropout = nn.Dropout(dropout)
                self.layers = nn.ModuleList()
                for _ in range(n_layers):
                    self.layers.append($block(dim, n_heads, dropout))
                self.norm = nn.LayerNorm(dim)
                self.unembed = nn.Linear(dim, vocab_size, bias=False)
        $tie
                self.reset_parameters()

            def reset_parameters(self):
                nn.init.trunc_normal_(self.positions, std=$std)
                for name, param in self.named_parameters():
                    if name.endswith("weight") and param.dim() == 2:
                        nn.init.xavier_uniform_(param)
                    elif name.endswith("bias"):
                        nn.init.zeros_(param)

            def forward(self, tokens, labels=None):
                length = tokens.size(1)
                if length > self.max_len:
                    raise ValueError(f"sequence of {length} tokens, at most {self.max_len}")
                h = self.dropout(self.embed(tokens) + self.positions[:, :length])
                for layer in self.layers:
                    h = layer(h)
                logits = self.unembed(self.norm(h))
                if labels is None:
                    return logits, None
                loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
                return logits, loss
        $sample
    ''', name=name, doc=c.doc(4), dim=c.choice([128, 256, 384, 512, 768]), layers=c.randint(2, 12),
         heads=c.choice([4, 8]), maxlen=c.choice([256, 512, 1024]), block=block,
         std=c.choice(["0.02", "0.01"]),
         tie=opt(c.chance(0.5), "        self.unembed.weight = self.embed.weight"),
         sample=sample_src if sample else "")
    return "\n\n\n".join([attn_src, mlp_src, block_src, model])


def m_resnet(c: Ctx) -> str:
    c.need(*NN)
    unit = c.cls(["Unit", "Cell", "Residual"], ["conv", "res", "skip", "stage"])
    net = c.cls(["Net", "Backbone", "Classifier"], ["small", "tiny", "image", "conv"])
    norm = c.choice(["nn.BatchNorm2d", "nn.InstanceNorm2d"])
    act = c.choice(["nn.ReLU", "nn.SiLU", "nn.GELU"])
    return T('''
        def conv_norm(cin, cout, k=3, stride=1):
            return nn.Sequential(
                nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False),
                $norm(cout),
            )


        class $unit(nn.Module):
        $doc
            def __init__(self, cin, cout, stride=1):
                super().__init__()
                self.main = nn.Sequential(conv_norm(cin, cout, 3, stride), $act(), conv_norm(cout, cout, 3))
                if stride == 1 and cin == cout:
                    self.skip = nn.Identity()
                else:
                    self.skip = conv_norm(cin, cout, 1, stride)
                self.act = $act()

            def forward(self, x):
                return self.act(self.main(x) + self.skip(x))


        class $net(nn.Module):
            def __init__(self, depths=($d1, $d2, $d3), widths=($w1, $w2, $w3), num_classes=$classes):
                super().__init__()
                self.stem = nn.Sequential(conv_norm(3, widths[0]), $act())
                stages = []
                cin = widths[0]
                for index, (depth, width) in enumerate(zip(depths, widths)):
                    units = []
                    for j in range(depth):
                        stride = 2 if (j == 0 and index > 0) else 1
                        units.append($unit(cin, width, stride))
                        cin = width
                    stages.append(nn.Sequential(*units))
                self.stages = nn.Sequential(*stages)
                self.classifier = nn.Linear(cin, num_classes)

            def forward(self, images):
                h = self.stages(self.stem(images))
                pooled = h.mean(dim=(2, 3))
                return self.classifier(pooled)
    ''', unit=unit, net=net, norm=norm, act=act, doc=c.doc(4), d1=c.randint(1, 3), d2=c.randint(1, 4),
             d3=c.randint(1, 4), w1=c.choice([16, 32]), w2=c.choice([64, 96]), w3=c.choice([128, 192, 256]),
             classes=c.choice([10, 100, 1000]))


def m_unet(c: Ctx) -> str:
    c.need(*NN, "import torch.nn.functional as F")
    stage = c.cls(["Stage", "Level"], ["conv", "unet", "scale"])
    net = c.cls(["UNet", "Segmenter", "Denoiser"], ["small", "tiny", "mask", ""])
    groups = c.choice([4, 8])
    return T('''
        class $stage(nn.Module):
        $doc
            def __init__(self, cin, cout, groups=$groups):
                super().__init__()
                self.layers = nn.Sequential(
                    nn.Conv2d(cin, cout, 3, padding=1),
                    nn.GroupNorm(min(groups, cout), cout),
                    nn.SiLU(),
                    nn.Conv2d(cout, cout, 3, padding=1),
                    nn.GroupNorm(min(groups, cout), cout),
                    nn.SiLU(),
                )

            def forward(self, x):
                return self.layers(x)


        class $net(nn.Module):
            def __init__(self, channels=$inch, classes=$classes, widths=$widths):
                super().__init__()
                self.encoders = nn.ModuleList()
                cin = channels
                for w in widths:
                    self.encoders.append($stage(cin, w))
                    cin = w
                self.middle = $stage(cin, cin)
                self.decoders = nn.ModuleList()
                for w in reversed(widths):
                    self.decoders.append($stage(cin + w, w))
                    cin = w
                self.head = nn.Conv2d(cin, classes, kernel_size=1)

            def forward(self, x):
                saved = []
                for encoder in self.encoders:
                    x = encoder(x)
                    saved.append(x)
                    x = F.avg_pool2d(x, 2)
                x = self.middle(x)
                for decoder in self.decoders:
                    skip = saved.pop()
                    x = F.interpolate(x, size=skip.shape[-2:], mode="nearest")
                    x = decoder(torch.cat([x, skip], dim=1))
                return self.head(x)
    ''', stage=stage, net=net, groups=groups, doc=c.doc(4), inch=c.choice([1, 3, 4]),
             classes=c.choice([1, 2, 21]), widths=c.choice(["(32, 64, 128)", "(16, 32, 64, 128)", "(64, 128, 256, 512)"]))


def m_positional(c: Ctx) -> str:
    c.need(*NN, "import math")
    name = c.cls(["Table", "Features", "Embedding"], ["sine", "fourier", "position", "timestep"])
    return T('''
        class $name(nn.Module):
        $doc
            def __init__(self, dim, max_len=$maxlen, base=$base, dropout=0.0):
                super().__init__()
                half = dim // 2
                rates = torch.exp(-math.log(base) * torch.arange(half, dtype=torch.float32) / half)
                angles = torch.arange(max_len, dtype=torch.float32)[:, None] * rates[None, :]
                table = torch.cat([angles.sin(), angles.cos()], dim=-1)
                if dim % 2:
                    table = torch.cat([table, torch.zeros(max_len, 1)], dim=-1)
                self.register_buffer("table", table, persistent=False)
                self.dropout = nn.Dropout(dropout)

            def forward(self, x):
                # x: (batch, length, dim)
                return self.dropout(x + self.table[: x.size(1)].unsqueeze(0).to(x.dtype))
    ''', name=name, maxlen=c.choice([512, 1024, 4096]), base=c.choice(["10000.0", "500.0"]),
             doc=c.doc(4))


def m_conv_encoder(c: Ctx) -> str:
    c.need(*NN)
    name = c.cls(["Encoder", "Stem", "FeatureExtractor"], ["conv", "audio", "image", "patch"])
    chans = [c.choice([16, 32, 64])]
    for _ in range(c.randint(2, 5)):
        chans.append(chans[-1] * c.choice([1, 2]))
    act = c.choice(ACTS)
    return T('''
        class $name(nn.Module):
        $doc
            def __init__(self, in_channels=$inch, channels=$chans, out_dim=$out):
                super().__init__()
                layers = []
                prev = in_channels
                for ch in channels:
                    layers.append(nn.Conv2d(prev, ch, kernel_size=3, stride=2, padding=1))
                    layers.append(nn.BatchNorm2d(ch))
                    layers.append($act)
                    prev = ch
                self.features = nn.Sequential(*layers)
                self.pool = nn.AdaptiveAvgPool2d(1)
                self.proj = nn.Linear(prev, out_dim)

            def forward(self, x):
                x = self.features(x)
                x = self.pool(x).flatten(1)
                return self.proj(x)

            @property
            def out_features(self):
                return self.proj.out_features
    ''', name=name, inch=c.choice([1, 3]), chans=tuple(chans), out=c.choice([128, 256, 512]),
             act=act, doc=c.doc(4))


def m_lstm(c: Ctx) -> str:
    c.need(*NN)
    name = c.cls(["Tagger", "Classifier", "Encoder", "RNN"], ["sequence", "lstm", "text", "gru"])
    cell = c.choice(["LSTM", "GRU"])
    unpack = "out, (h, _) = self.rnn(x)" if cell == "LSTM" else "out, h = self.rnn(x)"
    return T('''
        class $name(nn.Module):
        $doc
            def __init__(self, vocab_size, embed_dim=$emb, hidden=$hid, num_layers=$layers, num_classes=$classes, bidirectional=$bi):
                super().__init__()
                self.embed = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
                self.rnn = nn.$cell(embed_dim, hidden, num_layers=num_layers, batch_first=True, bidirectional=bidirectional)
                factor = 2 if bidirectional else 1
                self.head = nn.Sequential(nn.Dropout(0.2), nn.Linear(hidden * factor, num_classes))

            def forward(self, tokens, lengths=None):
                x = self.embed(tokens)
                $unpack
                if lengths is not None:
                    idx = (lengths - 1).clamp(min=0)
                    last = out[torch.arange(out.size(0), device=out.device), idx]
                else:
                    last = out[:, -1]
                return self.head(last)
    ''', name=name, cell=cell, unpack=unpack, emb=c.choice([64, 128, 300]),
             hid=c.choice([128, 256, 512]), layers=c.randint(1, 3), classes=c.choice([2, 5, 17]),
             bi=c.choice(["True", "False"]), doc=c.doc(4))


def m_moe(c: Ctx) -> str:
    c.need(*NN, "import torch.nn.functional as F")
    name = c.cls(["MoE", "Experts", "Router"], ["sparse", "topk", "mixture"])
    return T('''
        class $name(nn.Module):
        $doc
            def __init__(self, dim, num_experts=$experts, top_k=$topk, hidden_mult=4):
                super().__init__()
                self.top_k = top_k
                self.gate = nn.Linear(dim, num_experts, bias=False)
                self.experts = nn.ModuleList(
                    [nn.Sequential(nn.Linear(dim, dim * hidden_mult), nn.GELU(), nn.Linear(dim * hidden_mult, dim)) for _ in range(num_experts)]
                )

            def forward(self, x):
                shape = x.shape
                x = x.reshape(-1, shape[-1])
                scores = F.softmax(self.gate(x), dim=-1)
                weights, chosen = scores.topk(self.top_k, dim=-1)
                weights = weights / weights.sum(dim=-1, keepdim=True)
                out = torch.zeros_like(x)
                for i, expert in enumerate(self.experts):
                    mask = chosen == i
                    rows = mask.any(dim=-1)
                    if not rows.any():
                        continue
                    w = (weights * mask).sum(dim=-1, keepdim=True)[rows]
                    out[rows] = out[rows] + w * expert(x[rows])
                return out.reshape(shape)
    ''', name=name, experts=c.choice([4, 8, 16]), topk=c.choice([1, 2]), doc=c.doc(4))


def m_vae(c: Ctx) -> str:
    c.need(*NN, "import torch.nn.functional as F")
    name = c.cls(["VAE", "AutoEncoder"], ["variational", "latent", "beta", ""])
    return T('''
        class $name(nn.Module):
        $doc
            def __init__(self, input_dim=$inp, hidden=$hid, latent=$lat):
                super().__init__()
                self.encoder = nn.Sequential(nn.Linear(input_dim, hidden), nn.SiLU(), nn.Linear(hidden, 2 * latent))
                self.decoder = nn.Sequential(nn.Linear(latent, hidden), nn.SiLU(), nn.Linear(hidden, input_dim))

            def posterior(self, x):
                stats = self.encoder(x.flatten(1))
                mean, log_var = stats.chunk(2, dim=-1)
                return mean, log_var.clamp(-30.0, 20.0)

            def forward(self, x):
                mean, log_var = self.posterior(x)
                noise = torch.randn_like(mean)
                z = mean + noise * (0.5 * log_var).exp()
                return self.decoder(z), mean, log_var

            @staticmethod
            def objective(recon, x, mean, log_var, beta=$beta):
                rec = F.mse_loss(recon, x.flatten(1), reduction="none").sum(dim=1)
                kl = 0.5 * (mean.square() + log_var.exp() - 1.0 - log_var).sum(dim=1)
                return (rec + beta * kl).mean()
    ''', name=name, inp=c.choice([784, 1024, 3072]), hid=c.choice([256, 400, 512]),
             lat=c.choice([8, 16, 20, 32]), beta=c.choice(["1.0", "0.5", "4.0"]), doc=c.doc(4))


def m_lora(c: Ctx) -> str:
    c.need(*NN, "import math")
    name = c.cls(["Linear", "Adapter"], ["lora", "low_rank", "adapter"]).replace("_", "")
    inject = c.unique(c.choice(["inject_lora", "add_adapters", "wrap_linears"]))
    return T('''
        class $name(nn.Module):
        $doc
            def __init__(self, base, rank=$rank, alpha=$alpha, dropout=0.05):
                super().__init__()
                self.base = base
                self.rank = rank
                self.scaling = alpha / rank
                self.lora_a = nn.Parameter(torch.zeros(rank, base.in_features))
                self.lora_b = nn.Parameter(torch.zeros(base.out_features, rank))
                self.dropout = nn.Dropout(dropout)
                nn.init.kaiming_uniform_(self.lora_a, a=math.sqrt(5))
                for p in self.base.parameters():
                    p.requires_grad_(False)

            def forward(self, x):
                update = self.dropout(x) @ self.lora_a.t() @ self.lora_b.t()
                return self.base(x) + update * self.scaling


        def $inject(model, targets=("q_proj", "v_proj"), rank=$rank):
            for name, module in list(model.named_modules()):
                for child_name, child in list(module.named_children()):
                    if isinstance(child, nn.Linear) and child_name in targets:
                        setattr(module, child_name, $name(child, rank=rank))
            return model
    ''', name=name, inject=inject, rank=c.choice([4, 8, 16, 32]), alpha=c.choice([8, 16, 32]),
             doc=c.doc(4))


MODEL_MAIN = [m_transformer, m_resnet, m_unet, m_lstm, m_vae, m_conv_encoder, m_moe]
MODEL_PARTS = [m_mlp, m_rmsnorm, m_attention, m_positional, m_conv_encoder, m_lora, m_moe, m_vae]


def model_file(c: Ctx, target: int):
    blocks = [c.choice(MODEL_MAIN)(c)]
    fillers = MODEL_PARTS * 3 + [t_count_params, t_get_device, t_config, t_ema] + GENERIC_FILLERS[:4]
    while sum(b.count("\n") + 3 for b in blocks) < target:
        blocks.append(c.choice(fillers)(c))
    if c.chance(0.4):
        c.need(*TORCH)
        blocks.append(T('''
            if __name__ == "__main__":
                torch.manual_seed(0)
                print("smoke test of", __name__)
        '''))
    return blocks, {"kind": "model"}


# --------------------------------------------------------------------------------------
# Training scripts
# --------------------------------------------------------------------------------------

BUGS = ["append", "accumulate", "zero_grad", "no_grad", "dtype", "device"]
BUG_WEIGHTS = [3, 3, 3, 3, 1, 1]


def eval_fn(c: Ctx, bug: bool, style: str = "plain") -> tuple[str, str]:
    """An evaluation function; with `bug`, it runs the model with autograd on."""
    c.need(*TORCH)
    name = c.unique(c.choice(["evaluate", "validate", "eval_epoch", "run_validation"]))
    loader = c.choice(["val_loader", "loader", "eval_loader"])
    # Correct code either decorates the function or wraps the loop; the bug does neither.
    mode = "bug" if bug else c.choice(["decorator", "with", "inference_mode"])
    if style == "hf":
        loop = f'''for batch in {loader}:
    batch = {{k: v.to(device) for k, v in batch.items()}}
    outputs = model(**batch)
    total_loss += outputs.loss.item()
    preds = outputs.logits.argmax(dim=-1)
    correct += (preds == batch["labels"]).sum().item()
    count += batch["labels"].numel()'''
    else:
        loop = f'''for inputs, targets in {loader}:
    inputs, targets = inputs.to(device), targets.to(device)
    outputs = model(inputs)
    total_loss += criterion(outputs, targets).item() * targets.size(0)
    correct += (outputs.argmax(dim=1) == targets).sum().item()
    count += targets.size(0)'''
    if mode == "with":
        loop = "with torch.no_grad():\n" + textwrap.indent(loop, "    ")
    elif mode == "inference_mode":
        loop = "with torch.inference_mode():\n" + textwrap.indent(loop, "    ")
    deco = "@torch.no_grad()\n" if mode == "decorator" else ""
    crit = "" if style == "hf" else ", criterion"
    src = f'''{deco}def {name}(model, {loader}{crit}, device):
{c.doc(4)}
    model.eval()
    total_loss, correct, count = 0.0, 0, 0
{textwrap.indent(loop, "    ")}
    model.train()
    return total_loss / max(1, count), correct / max(1, count)'''
    return src, name


def train_plain(c: Ctx, bug, amp: bool):
    c.need(*NN, "from torch.utils.data import DataLoader", "import argparse", "import time")
    fn = c.unique(c.choice(["train_one_epoch", "train_epoch", "run_epoch", "fit_epoch"]))
    scaler_arg = ", scaler" if amp else ""
    zero = "        optimizer.zero_grad(set_to_none=True)" if c.chance(0.6) else "        optimizer.zero_grad()"
    pre_loop_zero = ""
    if bug == "zero_grad":
        pre_loop_zero, zero = "    optimizer.zero_grad()", ""
    clip = c.chance(0.5)
    if amp:
        c.need("from torch.cuda.amp import GradScaler" if c.chance(0.5) else "import torch")
        fwd = '''        with torch.autocast(device_type="cuda", dtype=torch.float16, enabled=scaler is not None):
            outputs = model(inputs)
            loss = criterion(outputs, targets)'''
        back = "        scaler.scale(loss).backward()"
        if clip:
            back += "\n        scaler.unscale_(optimizer)\n        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)"
        back += "\n        scaler.step(optimizer)\n        scaler.update()"
    else:
        fwd = '''        outputs = model(inputs)
        loss = criterion(outputs, targets)'''
        back = "        loss.backward()"
        if clip:
            back += "\n        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)"
        back += "\n        optimizer.step()"
    acc = "        running_loss += loss" if bug == "accumulate" else c.choice([
        "        running_loss += loss.item()", "        running_loss += loss.detach().item()",
        "        running_loss += float(loss)"])
    app = "        losses.append(loss)" if bug == "append" else c.choice([
        "        losses.append(loss.item())", "        losses.append(loss.detach().cpu())"])
    sched = c.chance(0.5)
    train_src = f'''def {fn}(model, loader, optimizer, criterion, device, epoch{scaler_arg}, scheduler=None, max_norm=1.0, log_every=50):
{c.doc(4)}
    model.train()
    running_loss = 0.0
    losses = []
    start = time.time()
{pre_loop_zero}
    for step, (inputs, targets) in enumerate(loader):
        inputs = inputs.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
{zero}
{fwd}
{back}
{opt(sched, "        if scheduler is not None:" + chr(10) + "            scheduler.step()")}
{acc}
{app}
        if step % log_every == 0:
{c.maybe_comment(12)}
            elapsed = time.time() - start
            print(f"epoch {{epoch}} step {{step}}/{{len(loader)}} loss {{running_loss / (step + 1):.4f}} ({{elapsed:.1f}}s)")
    return running_loss / max(1, len(loader)), losses'''
    ev_src, ev = eval_fn(c, bug == "no_grad")
    dev_bug = bug == "device"
    main = c.unique("main")
    model_cls = c.cls(["Net", "Model", "Classifier"], ["simple", "baseline", "mlp", "small"])
    c.need("from torch.utils.data import TensorDataset")
    model_src = T('''
        class $model(nn.Module):
            def __init__(self, in_features, num_classes, hidden=$hid):
                super().__init__()
                self.net = nn.Sequential(
                    nn.Linear(in_features, hidden),
                    nn.ReLU(),
                    nn.Dropout(0.1),
                    nn.Linear(hidden, num_classes),
                )

            def forward(self, x):
                return self.net(x)
    ''', model=model_cls, hid=c.choice([64, 128, 256, 512]))
    scaler_make = ("    scaler = torch.cuda.amp.GradScaler(enabled=args.amp)\n" if amp else "")
    scaler_pass = ", scaler" if amp else ""
    main_src = f'''def {main}():
    parser = argparse.ArgumentParser(description="{c.choice(TASKS)} baseline")
    parser.add_argument("--epochs", type=int, default={c.randint(3, 90)})
    parser.add_argument("--batch-size", type=int, default={c.choice([32, 64, 128, 256])})
    parser.add_argument("--lr", type=float, default={c.choice(["1e-3", "3e-4", "0.1", "0.01"])})
    parser.add_argument("--amp", action="store_true")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()

    device = torch.device(args.device)
    x = torch.randn(4096, 32)
    y = torch.randint(0, 10, (4096,))
    train_ds = TensorDataset(x[:3584], y[:3584])
    val_ds = TensorDataset(x[3584:], y[3584:])
    train_loader = DataLoader(train_ds, batch_size=args.batch_size, shuffle=True, num_workers=2, pin_memory=True)
    val_loader = DataLoader(val_ds, batch_size=args.batch_size * 2)

    model = {model_cls}(32, 10).to(device)
{opt(dev_bug, "    model.to(device)")}
    optimizer = torch.optim.{c.choice(["AdamW", "Adam", "SGD"])}(model.parameters(), lr=args.lr)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
    criterion = nn.CrossEntropyLoss()
{scaler_make}    best = 0.0
    for epoch in range(args.epochs):
        train_loss, _ = {fn}(model, train_loader, optimizer, criterion, device, epoch{scaler_pass})
        val_loss, val_acc = {ev}(model, val_loader, criterion, device)
        scheduler.step()
        print(f"epoch {{epoch}}: train {{train_loss:.4f}} val {{val_loss:.4f}} acc {{val_acc:.3f}}")
        if val_acc > best:
            best = val_acc
            torch.save(model.state_dict(), "best.pt")
    return best


if __name__ == "__main__":
    {main}()'''
    return [model_src, train_src, ev_src], [main_src]


def train_accelerate(c: Ctx, bug):
    c.need(*TORCH, "from accelerate import Accelerator", "from torch.utils.data import DataLoader",
           "from transformers import AutoModelForSequenceClassification, AutoTokenizer, get_scheduler",
           "import argparse")
    fn = c.unique(c.choice(["training_function", "train", "run_training"]))
    zero = "" if bug == "zero_grad" else "                optimizer.zero_grad()"
    acc = ("            total_loss += loss" if bug == "accumulate"
           else "            total_loss += loss.detach().float()")
    app = ("            step_losses.append(loss)" if bug == "append"
           else "            step_losses.append(loss.item())")
    eval_fwd = ("            outputs = model(**batch)" if bug == "no_grad"
                else "            with torch.no_grad():\n                outputs = model(**batch)")
    dtype_bug = bug == "dtype"
    dev_bug = bug == "device"
    name = c.choice(['"bert-base-cased"', '"roberta-base"', '"distilbert-base-uncased"',
                     '"microsoft/deberta-v3-small"'])
    load_kw = ", torch_dtype=torch.bfloat16" if dtype_bug else ""
    src = f'''def {fn}(args):
{c.doc(4)}
    accelerator = Accelerator(gradient_accumulation_steps=args.grad_accum, mixed_precision=args.mixed_precision)
    tokenizer = AutoTokenizer.from_pretrained({name})
    model = AutoModelForSequenceClassification.from_pretrained({name}, num_labels=args.num_labels{load_kw})
{opt(dtype_bug, "    model = model.to(torch.bfloat16)")}
{opt(dev_bug, "    model = model.to(accelerator.device)" + chr(10) + "    model.to(accelerator.device)")}
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    train_dataloader = DataLoader(args.train_dataset, shuffle=True, batch_size=args.batch_size)
    eval_dataloader = DataLoader(args.eval_dataset, batch_size=args.eval_batch_size)
    lr_scheduler = get_scheduler(
        "linear",
        optimizer=optimizer,
        num_warmup_steps=args.warmup_steps,
        num_training_steps=len(train_dataloader) * args.epochs,
    )
    model, optimizer, train_dataloader, eval_dataloader, lr_scheduler = accelerator.prepare(
        model, optimizer, train_dataloader, eval_dataloader, lr_scheduler
    )
    step_losses = []
    for epoch in range(args.epochs):
        model.train()
        total_loss = 0.0
        for step, batch in enumerate(train_dataloader):
            with accelerator.accumulate(model):
                outputs = model(**batch)
                loss = outputs.loss
                accelerator.backward(loss)
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                optimizer.step()
                lr_scheduler.step()
{zero}
{acc}
{app}
        model.eval()
        correct, seen = 0, 0
        for batch in eval_dataloader:
{eval_fwd}
            predictions = outputs.logits.argmax(dim=-1)
            predictions, references = accelerator.gather_for_metrics((predictions, batch["labels"]))
            correct += (predictions == references).sum().item()
            seen += references.numel()
        accelerator.print(f"epoch {{epoch}}: loss {{total_loss / len(train_dataloader):.4f}} acc {{correct / max(1, seen):.4f}}")
    accelerator.wait_for_everyone()
    unwrapped = accelerator.unwrap_model(model)
    unwrapped.save_pretrained(args.output_dir, save_function=accelerator.save)
    return step_losses'''
    main = c.unique("main")
    main_src = f'''def {main}():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default={c.randint(1, 5)})
    parser.add_argument("--lr", type=float, default={c.choice(["2e-5", "3e-5", "5e-5"])})
    parser.add_argument("--batch-size", type=int, default={c.choice([8, 16, 32])})
    parser.add_argument("--eval-batch-size", type=int, default=64)
    parser.add_argument("--grad-accum", type=int, default={c.choice([1, 2, 4, 8])})
    parser.add_argument("--warmup-steps", type=int, default=100)
    parser.add_argument("--max-grad-norm", type=float, default=1.0)
    parser.add_argument("--mixed-precision", default="bf16", choices=["no", "fp16", "bf16"])
    parser.add_argument("--num-labels", type=int, default=2)
    parser.add_argument("--output-dir", default="output")
    args = parser.parse_args()
    args.train_dataset = []
    args.eval_dataset = []
    {fn}(args)


if __name__ == "__main__":
    {main}()'''
    return [src], [main_src]


def train_lightning(c: Ctx, bug):
    lib = c.choice(["pl", "L"])
    c.need(*NN, "import torch.nn.functional as F")
    c.need("import pytorch_lightning as pl" if lib == "pl" else "import lightning as L")
    name = c.cls(["Module", "LitModel", "System", "Task"], ["lit", "classifier", "regression", "image"])
    manual = c.chance(0.35) or bug == "zero_grad"
    store = "        self.training_losses.append(loss)" if bug == "append" else c.choice([
        "        self.training_losses.append(loss.detach())",
        "        self.training_losses.append(loss.item())"])
    acc = "        self.running_loss += loss" if bug == "accumulate" else "        self.running_loss += loss.item()"
    if manual:
        zero = "" if bug == "zero_grad" else "        opt.zero_grad()"
        step = f'''    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        x, y = batch
{zero}
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        self.manual_backward(loss)
        self.clip_gradients(opt, gradient_clip_val=1.0, gradient_clip_algorithm="norm")
        opt.step()
{acc}
{store}
        self.log("train_loss", loss, prog_bar=True)'''
    else:
        step = f'''    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y)
{acc}
{store}
        self.log("train_loss", loss, on_step=True, on_epoch=True, prog_bar=True)
        return loss'''
    hidden = c.choice([64, 128, 256])
    ev_method = ""
    if bug == "no_grad":
        ev_method = '''

    def evaluate_loader(self, loader):
        self.eval()
        total = 0.0
        for x, y in loader:
            total += F.cross_entropy(self(x), y).item()
        return total / max(1, len(loader))'''
    src = f'''class {name}({lib}.LightningModule):
{c.doc(4)}
    def __init__(self, in_features={c.choice([16, 32, 784])}, num_classes={c.choice([2, 10, 100])}, lr={c.choice(["1e-3", "3e-4"])}):
        super().__init__()
        self.save_hyperparameters()
{opt(manual, "        self.automatic_optimization = False")}
        self.model = nn.Sequential(nn.Linear(in_features, {hidden}), nn.ReLU(), nn.Linear({hidden}, num_classes))
        self.training_losses = []
        self.running_loss = 0.0

    def forward(self, x):
        return self.model(x)

{step}

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        acc = (logits.argmax(dim=1) == y).float().mean()
        self.log_dict({{"val_loss": loss, "val_acc": acc}}, prog_bar=True)

    def on_train_epoch_end(self):
        if self.training_losses:
            self.log("epoch_loss_mean", sum(float(v) for v in self.training_losses) / len(self.training_losses))
        self.training_losses.clear()
        self.running_loss = 0.0

    def configure_optimizers(self):
        optimizer = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size={c.randint(5, 30)}, gamma=0.1)
        return {{"optimizer": optimizer, "lr_scheduler": scheduler}}{ev_method}'''
    main = c.unique("main")
    c.need("from torch.utils.data import DataLoader, TensorDataset")
    main_src = f'''def {main}():
    x = torch.randn(2048, 32)
    y = torch.randint(0, 10, (2048,))
    train = DataLoader(TensorDataset(x[:1792], y[:1792]), batch_size=64, shuffle=True)
    val = DataLoader(TensorDataset(x[1792:], y[1792:]), batch_size=128)
    model = {name}(in_features=32, num_classes=10)
    trainer = {lib}.Trainer(max_epochs={c.randint(2, 50)}, accelerator="auto", devices=1, precision="{c.choice(["32", "16-mixed", "bf16-mixed"])}", log_every_n_steps=10)
    trainer.fit(model, train, val)


if __name__ == "__main__":
    {main}()'''
    return [src], [main_src]


def train_hf_trainer(c: Ctx, bug):
    c.need(*NN, "import torch.nn.functional as F", "import numpy as np",
           "from transformers import AutoModelForSequenceClassification, AutoTokenizer, Trainer, TrainingArguments")
    name = c.cls(["Trainer"], ["weighted", "custom", "focal", "distill", "smooth"])
    store = ("        self.recent_losses.append(loss)" if bug == "append"
             else "        self.recent_losses.append(float(loss.detach()))")
    acc = ("        self.loss_total += loss" if bug == "accumulate" else "        self.loss_total += loss.item()")
    src = f'''class {name}(Trainer):
{c.doc(4)}
    def __init__(self, *args, class_weights=None, smoothing={c.choice(["0.0", "0.1"])}, **kwargs):
        super().__init__(*args, **kwargs)
        self.class_weights = class_weights
        self.smoothing = smoothing
        self.recent_losses = []
        self.loss_total = 0.0

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        targets = inputs.pop("labels")
        out = model(**inputs)
        weight = None
        if self.class_weights is not None:
            weight = torch.as_tensor(self.class_weights, dtype=out.logits.dtype, device=out.logits.device)
        loss = F.cross_entropy(out.logits.flatten(0, -2), targets.flatten(), weight=weight, label_smoothing=self.smoothing)
{acc}
{store}
        if len(self.recent_losses) > {c.choice([100, 500, 1000])}:
            del self.recent_losses[0]
        if return_outputs:
            return loss, out
        return loss'''
    metrics = c.unique(c.choice(["compute_metrics", "metrics_fn", "score_predictions"]))
    metrics_src = f'''def {metrics}(prediction):
    scores, gold = prediction.predictions, prediction.label_ids
    chosen = scores.argmax(axis=-1)
    report = {{"accuracy": float(np.mean(chosen == gold))}}
    for label in np.unique(gold):
        mask = gold == label
        report[f"recall_{{int(label)}}"] = float(np.mean(chosen[mask] == label))
    return report'''
    extra = []
    if bug == "no_grad":
        ev = c.unique(c.choice(["predict_texts", "infer_batch", "predict_labels"]))
        extra.append(f'''def {ev}(model, tokenizer, texts, device="cuda"):
    model.eval()
    encoded = tokenizer(texts, padding=True, truncation=True, return_tensors="pt").to(device)
    probabilities = model(**encoded).logits.softmax(dim=-1)
    return probabilities.argmax(dim=-1).tolist()''')
    ckpt = c.choice(['"bert-base-uncased"', '"distilroberta-base"', '"google/electra-small-discriminator"'])
    load_kw = ', device_map="auto"' if bug == "device" else ""
    dev_line = '    model.to("cuda")' if bug == "device" else ""
    dtype_kw = ", torch_dtype=torch.float16" if bug == "dtype" else ""
    dtype_line = "    model = model.half()" if bug == "dtype" else ""
    main = c.unique("main")
    main_src = f'''def {main}(train_dataset=None, eval_dataset=None):
    tokenizer = AutoTokenizer.from_pretrained({ckpt})
    model = AutoModelForSequenceClassification.from_pretrained({ckpt}, num_labels={c.choice([2, 3, 5])}{load_kw}{dtype_kw})
{dev_line}
{dtype_line}
    args = TrainingArguments(
        output_dir="{c.choice(["out", "results", "checkpoints"])}",
        learning_rate={c.choice(["2e-5", "3e-5", "5e-5"])},
        per_device_train_batch_size={c.choice([8, 16, 32])},
        per_device_eval_batch_size=64,
        num_train_epochs={c.randint(1, 5)},
        weight_decay=0.01,
        eval_strategy="epoch",
        save_strategy="epoch",
        load_best_model_at_end=True,
        bf16={c.choice(["True", "False"])},
        report_to="none",
    )
    trainer = {name}(
        model=model,
        args=args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        processing_class=tokenizer,
        compute_metrics={metrics},
        class_weights=[1.0, 2.0],
    )
    trainer.train()
    return trainer.evaluate()


if __name__ == "__main__":
    {main}()'''
    return [src, metrics_src] + extra, [main_src]


def train_nanogpt(c: Ctx, bug):
    c.need(*TORCH, "import math", "import os", "import time", "import numpy as np",
           "from contextlib import nullcontext")
    c.need("from model import GPT, GPTConfig")
    zero = "" if bug == "zero_grad" else "    optimizer.zero_grad(set_to_none=True)"
    track = ("    history.append(loss)" if bug == "append" else "    history.append(loss.item() * micro_steps)")
    acc = ("    recent += loss" if bug == "accumulate" else "    recent += loss.item()")
    deco = "" if bug == "no_grad" else "@torch.no_grad()\n"
    header = f'''run_dir = "{c.choice(["runs/char", "runs/web", "out"])}"
dataset = "{c.choice(["shakespeare", "tinystories", "enwik8", "code"])}"
eval_every = {c.choice([250, 500, 1000])}
eval_batches = {c.choice([20, 50, 100])}
log_every = {c.choice([10, 20, 50])}
micro_steps = {c.choice([1, 2, 4, 8, 16])}
batch_size = {c.choice([8, 16, 32, 64])}
context = {c.choice([128, 256, 512, 1024])}
layers = {c.choice([4, 6, 8, 12])}
heads = {c.choice([4, 6, 8])}
width = {c.choice([256, 384, 512, 768])}
dropout = {c.choice(["0.0", "0.1", "0.2"])}
peak_lr = {c.choice(["1e-3", "6e-4", "3e-4"])}
final_lr = peak_lr * {c.choice(["0.1", "0.05"])}
warmup = {c.choice([100, 200, 1000])}
total_iters = {c.choice([2000, 5000, 20000, 100000])}
clip = {c.choice(["1.0", "0.5", "0.0"])}
weight_decay = {c.choice(["0.1", "0.01"])}
use_compile = {c.choice(["True", "False"])}
device = "cuda" if torch.cuda.is_available() else "cpu"
amp_dtype = torch.bfloat16 if device == "cuda" and torch.cuda.is_bf16_supported() else torch.float16
autocast = torch.autocast(device_type="cuda", dtype=amp_dtype) if device == "cuda" else nullcontext()
splits = {{
    name: np.memmap(os.path.join("data", dataset, name + ".bin"), dtype=np.uint16, mode="r")
    for name in ("train", "val")
}}'''
    batch_src = '''def sample_batch(split):
    tokens = splits[split]
    starts = np.random.randint(0, len(tokens) - context - 1, size=batch_size)
    window = np.stack([tokens[s : s + context + 1] for s in starts]).astype(np.int64)
    block = torch.from_numpy(window)
    inputs, targets = block[:, :-1], block[:, 1:]
    if device == "cuda":
        inputs = inputs.pin_memory().to(device, non_blocking=True)
        targets = targets.pin_memory().to(device, non_blocking=True)
    return inputs, targets'''
    est_src = f'''{deco}def measure_losses():
    model.eval()
    result = {{}}
    for split in splits:
        total = 0.0
        for _ in range(eval_batches):
            inputs, targets = sample_batch(split)
            with autocast:
                _, loss = model(inputs, targets)
            total += loss.item()
        result[split] = total / eval_batches
    model.train()
    return result'''
    lr_src = '''def learning_rate(it):
    if it < warmup:
        return peak_lr * (it + 1) / warmup
    progress = min(1.0, (it - warmup) / max(1, total_iters - warmup))
    return final_lr + 0.5 * (peak_lr - final_lr) * (1.0 + math.cos(math.pi * progress))'''
    setup = '''config = GPTConfig(block_size=context, vocab_size=50304, n_layer=layers, n_head=heads, n_embd=width, dropout=dropout)
model = GPT(config).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=peak_lr, betas=(0.9, 0.95), weight_decay=weight_decay)
scaler = torch.amp.GradScaler("cuda", enabled=amp_dtype == torch.float16)
if use_compile:
    model = torch.compile(model)
os.makedirs(run_dir, exist_ok=True)'''
    loop = f'''inputs, targets = sample_batch("train")
best = float("inf")
history = []
recent = 0.0
it = 0
started = time.time()
while True:
    for group in optimizer.param_groups:
        group["lr"] = learning_rate(it)
    if it % eval_every == 0:
        losses = measure_losses()
        print(f"iter {{it}}: train {{losses['train']:.4f}} val {{losses['val']:.4f}}")
        if losses["val"] < best:
            best = losses["val"]
            state = {{"model": model.state_dict(), "optimizer": optimizer.state_dict(), "iter": it, "best": best}}
            torch.save(state, os.path.join(run_dir, "last.pt"))
    for micro in range(micro_steps):
        with autocast:
            _, loss = model(inputs, targets)
            loss = loss / micro_steps
        # the next batch loads while the GPU works on this one
        inputs, targets = sample_batch("train")
        scaler.scale(loss).backward()
    if clip:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    scaler.step(optimizer)
    scaler.update()
{zero}
{acc}
{track}
    if it % log_every == 0 and it > 0:
        elapsed = time.time() - started
        print(f"iter {{it}}: loss {{recent / log_every:.4f}}, {{elapsed / log_every * 1000:.0f}} ms/iter")
        recent = 0.0
        started = time.time()
    it += 1
    if it > total_iters:
        break'''
    return [header, batch_src, est_src, lr_src], [setup, loop]


TRAIN_STYLES = [
    ("plain", 4), ("amp", 3), ("accelerate", 2), ("lightning", 3), ("hf_trainer", 2), ("nanogpt", 2),
]


def training_file(c: Ctx, target: int):
    style = c.rng.choices([s for s, _ in TRAIN_STYLES], [w for _, w in TRAIN_STYLES])[0]
    bug = None
    if c.chance(0.25):
        bug = c.rng.choices(BUGS, BUG_WEIGHTS)[0]
        # Styles without a place for a given bug get another one.
        if style == "lightning" and bug in ("dtype", "device"):
            bug = "append"
        if style == "nanogpt" and bug in ("dtype", "device"):
            bug = "accumulate"
        if style in ("plain", "amp") and bug == "dtype":
            bug = "device"
        if style == "hf_trainer" and bug == "zero_grad":
            bug = "no_grad"
    if style in ("plain", "amp"):
        core, tail = train_plain(c, bug, style == "amp")
    elif style == "accelerate":
        core, tail = train_accelerate(c, bug)
    elif style == "lightning":
        core, tail = train_lightning(c, bug)
    elif style == "hf_trainer":
        core, tail = train_hf_trainer(c, bug)
    else:
        core, tail = train_nanogpt(c, bug)
    blocks = list(core)
    fillers = TORCH_FILLERS * 2 + GENERIC_FILLERS + [m_mlp, m_rmsnorm, m_positional]
    size = sum(b.count("\n") + 3 for b in blocks + tail)
    extra = []
    while size < target:
        b = c.choice(fillers)(c)
        extra.append(b)
        size += b.count("\n") + 3
    if style == "nanogpt":
        # Module-level script: helpers first, then the run.
        blocks = blocks[:1] + extra + blocks[1:]
    else:
        # Helpers sometimes before, sometimes after the core functions.
        cut = c.randint(0, len(extra))
        blocks = extra[:cut] + blocks + extra[cut:]
    return blocks + tail, {"kind": "train", "style": style, "bug": bug}


# --------------------------------------------------------------------------------------
# Library code without torch
# --------------------------------------------------------------------------------------


def l_lexer(c: Ctx) -> str:
    c.need("from dataclasses import dataclass")
    tok = c.cls(["Token", "Lexeme"], ["", "lex", "source"]).replace("_", "")
    fn = c.unique(c.choice(["tokenize", "lex", "scan_tokens"]))
    err = c.cls(["Error"], ["lex", "syntax", "scan"])
    keywords = c.unique("KEYWORDS")
    pairs = c.unique("TWO_CHAR_OPS")
    singles = c.unique("ONE_CHAR_OPS")
    kws = c.sample(["if", "else", "while", "for", "let", "fn", "return", "and", "or", "not",
                    "true", "false", "nil", "def", "end", "do"], c.randint(4, 9))
    return T('''
        @dataclass(frozen=True)
        class $tok:
            kind: str
            text: str
            line: int
            column: int


        class $err(Exception):
            pass


        $keywords = frozenset($kws)
        $pairs = ("==", "!=", "<=", ">=", "->", "&&", "||")
        $singles = frozenset("+-*/%<>=(){}[],.;:!")


        def $fn(source):
        $doc
            pos, line, col = 0, 1, 1
            size = len(source)
            while pos < size:
                ch = source[pos]
                if ch == "\\n":
                    pos, line, col = pos + 1, line + 1, 1
                    continue
                if ch in " \\t\\r":
                    pos, col = pos + 1, col + 1
                    continue
                if ch == "#":
                    stop = source.find("\\n", pos)
                    stop = size if stop < 0 else stop
                    col += stop - pos
                    pos = stop
                    continue
                start = pos
                if ch.isdigit():
                    while pos < size and (source[pos].isdigit() or source[pos] == "."):
                        pos += 1
                    kind = "NUMBER"
                elif ch.isalpha() or ch == "_":
                    while pos < size and (source[pos].isalnum() or source[pos] == "_"):
                        pos += 1
                    word = source[start:pos]
                    kind = word.upper() if word in $keywords else "NAME"
                elif ch == '"':
                    pos += 1
                    while pos < size and source[pos] != '"':
                        pos += 2 if source[pos] == "\\\\" else 1
                    if pos >= size:
                        raise $err(f"{line}:{col}: unterminated string")
                    pos += 1
                    kind = "STRING"
                elif source[pos : pos + 2] in $pairs:
                    pos += 2
                    kind = "OP"
                elif ch in $singles:
                    pos += 1
                    kind = "OP"
                else:
                    raise $err(f"{line}:{col}: unexpected character {ch!r}")
                yield $tok(kind, source[start:pos], line, col)
                col += pos - start
    ''', tok=tok, fn=fn, err=err, kws=tuple(sorted(kws)), keywords=keywords, pairs=pairs,
             singles=singles, doc=c.doc(4))


def l_parser(c: Ctx) -> str:
    c.need("from dataclasses import dataclass", "import operator", "import re")
    p = c.cls(["Parser"], ["expression", "arith", "formula", "query"])
    num, binop, unary, var = (c.unique(n, camel=True) for n in ("Num", "BinOp", "Unary", "Var"))
    ev = c.unique(c.choice(["evaluate", "eval_node", "interpret"]))
    return T('''
        @dataclass
        class $num:
            value: float


        @dataclass
        class $var:
            name: str


        @dataclass
        class $binop:
            op: str
            left: object
            right: object


        @dataclass
        class $unary:
            op: str
            operand: object


        _TOKENS_RE = re.compile(r"\\s*(?:(\\d+\\.?\\d*)|([A-Za-z_]\\w*)|(\\*\\*|[-+*/()%]))")


        class $p:
        $doc
            def __init__(self, text):
                self.tokens = []
                pos = 0
                text = text.strip()
                while pos < len(text):
                    m = _TOKENS_RE.match(text, pos)
                    if not m or m.end() == pos:
                        raise SyntaxError(f"bad input at {pos}: {text[pos:pos + 10]!r}")
                    number, name, op = m.groups()
                    if number is not None:
                        self.tokens.append(("num", float(number)))
                    elif name is not None:
                        self.tokens.append(("name", name))
                    else:
                        self.tokens.append(("op", op))
                    pos = m.end()
                self.pos = 0

            def peek(self):
                return self.tokens[self.pos] if self.pos < len(self.tokens) else ("eof", None)

            def advance(self):
                tok = self.peek()
                self.pos += 1
                return tok

            def expect(self, value):
                kind, got = self.advance()
                if got != value:
                    raise SyntaxError(f"expected {value!r}, got {got!r}")

            def parse(self):
                node = self.expression()
                if self.peek()[0] != "eof":
                    raise SyntaxError(f"trailing input: {self.peek()[1]!r}")
                return node

            def expression(self):
                node = self.term()
                while self.peek() in (("op", "+"), ("op", "-")):
                    op = self.advance()[1]
                    node = $binop(op, node, self.term())
                return node

            def term(self):
                node = self.power()
                while self.peek() in (("op", "*"), ("op", "/"), ("op", "%")):
                    op = self.advance()[1]
                    node = $binop(op, node, self.power())
                return node

            def power(self):
                node = self.unary()
                if self.peek() == ("op", "**"):
                    self.advance()
                    node = $binop("**", node, self.power())
                return node

            def unary(self):
                if self.peek() in (("op", "-"), ("op", "+")):
                    op = self.advance()[1]
                    return $unary(op, self.unary())
                return self.atom()

            def atom(self):
                kind, value = self.advance()
                if kind == "num":
                    return $num(value)
                if kind == "name":
                    return $var(value)
                if (kind, value) == ("op", "("):
                    node = self.expression()
                    self.expect(")")
                    return node
                raise SyntaxError(f"unexpected token {value!r}")


        _BINOPS = {
            "+": operator.add,
            "-": operator.sub,
            "*": operator.mul,
            "/": operator.truediv,
            "%": operator.mod,
            "**": operator.pow,
        }


        def $ev(node, env=None):
            env = env or {}
            if isinstance(node, $num):
                return node.value
            if isinstance(node, $var):
                if node.name not in env:
                    raise NameError(f"undefined variable {node.name!r}")
                return env[node.name]
            if isinstance(node, $unary):
                value = $ev(node.operand, env)
                return -value if node.op == "-" else value
            if isinstance(node, $binop):
                return _BINOPS[node.op]($ev(node.left, env), $ev(node.right, env))
            raise TypeError(f"unknown node {node!r}")
    ''', p=p, num=num, binop=binop, unary=unary, var=var, ev=ev, doc=c.doc(4))


def l_ini(c: Ctx) -> str:
    name = c.unique(c.choice(["parse_ini", "read_sections", "load_settings_text"]))
    err = c.cls(["Error"], ["config", "parse", "format"])
    return T('''
        class $err(ValueError):
            def __init__(self, lineno, message):
                super().__init__(f"line {lineno}: {message}")
                self.lineno = lineno


        def $name(text, comment_prefixes=("#", ";")):
        $doc
            sections = {}
            current = None
            for lineno, raw in enumerate(text.splitlines(), 1):
                line = raw.strip()
                if not line or line.startswith(comment_prefixes):
                    continue
                if line.startswith("[") and line.endswith("]"):
                    current = line[1:-1].strip()
                    if not current:
                        raise $err(lineno, "empty section name")
                    sections.setdefault(current, {})
                    continue
                if current is None:
                    raise $err(lineno, "key outside of a section")
                if "=" not in line:
                    raise $err(lineno, f"expected key = value, got {line!r}")
                key, value = (part.strip() for part in line.split("=", 1))
                if value[:1] in "\\"'" and value[-1:] == value[:1] and len(value) >= 2:
                    value = value[1:-1]
                sections[current][key] = value
            return sections
    ''', name=name, err=err, doc=c.doc(4))


def l_linked_list(c: Ctx) -> str:
    node = c.unique("_Node", camel=True)
    name = c.cls(["List", "Deque", "Chain"], ["linked", "double", "item"])
    return T('''
        class $node:
            __slots__ = ("value", "prev", "next")

            def __init__(self, value):
                self.value = value
                self.prev = None
                self.next = None


        class $name:
        $doc
            def __init__(self, items=()):
                self.head = None
                self.tail = None
                self.size = 0
                for item in items:
                    self.push_back(item)

            def push_back(self, value):
                node = $node(value)
                if self.tail is None:
                    self.head = self.tail = node
                else:
                    node.prev = self.tail
                    self.tail.next = node
                    self.tail = node
                self.size += 1
                return node

            def push_front(self, value):
                node = $node(value)
                if self.head is None:
                    self.head = self.tail = node
                else:
                    node.next = self.head
                    self.head.prev = node
                    self.head = node
                self.size += 1
                return node

            def remove(self, node):
                if node.prev is not None:
                    node.prev.next = node.next
                else:
                    self.head = node.next
                if node.next is not None:
                    node.next.prev = node.prev
                else:
                    self.tail = node.prev
                node.prev = node.next = None
                self.size -= 1
                return node.value

            def pop_front(self):
                if self.head is None:
                    raise IndexError("pop from an empty list")
                return self.remove(self.head)

            def __iter__(self):
                node = self.head
                while node is not None:
                    yield node.value
                    node = node.next

            def walk_backward(self):
                node = self.tail
                while node is not None:
                    yield node.value
                    node = node.prev

            def __len__(self):
                return self.size

            def __repr__(self):
                return f"{type(self).__name__}({list(self)!r})"
    ''', node=node, name=name, doc=c.doc(4))


def l_heap(c: Ctx) -> str:
    name = c.cls(["Heap", "PriorityQueue"], ["min", "binary", "task", "event"])
    return T('''
        class $name:
        $doc
            def __init__(self, key=None):
                self._data = []
                self._key = key or (lambda item: item)

            def push(self, item):
                self._data.append(item)
                self._sift_up(len(self._data) - 1)

            def pop(self):
                if not self._data:
                    raise IndexError("pop from an empty heap")
                last = self._data.pop()
                if not self._data:
                    return last
                top, self._data[0] = self._data[0], last
                self._sift_down(0)
                return top

            def peek(self):
                return self._data[0] if self._data else None

            def _sift_up(self, i):
                key = self._key
                while i > 0:
                    parent = (i - 1) // 2
                    if key(self._data[i]) < key(self._data[parent]):
                        self._data[i], self._data[parent] = self._data[parent], self._data[i]
                        i = parent
                    else:
                        break

            def _sift_down(self, i):
                key = self._key
                n = len(self._data)
                while True:
                    smallest = i
                    for child in (2 * i + 1, 2 * i + 2):
                        if child < n and key(self._data[child]) < key(self._data[smallest]):
                            smallest = child
                    if smallest == i:
                        return
                    self._data[i], self._data[smallest] = self._data[smallest], self._data[i]
                    i = smallest

            def __len__(self):
                return len(self._data)
    ''', name=name, doc=c.doc(4))


def l_trie(c: Ctx) -> str:
    name = c.cls(["Trie", "PrefixTree"], ["word", "prefix", "route"])
    return T('''
        class $name:
        $doc
            def __init__(self):
                self.children = {}
                self.terminal = False
                self.count = 0

            def insert(self, word):
                node = self
                for ch in word:
                    node = node.children.setdefault(ch, type(self)())
                    node.count += 1
                node.terminal = True

            def find(self, prefix):
                node = self
                for ch in prefix:
                    node = node.children.get(ch)
                    if node is None:
                        return None
                return node

            def __contains__(self, word):
                node = self.find(word)
                return node is not None and node.terminal

            def with_prefix(self, prefix, limit=$limit):
                start = self.find(prefix)
                if start is None:
                    return []
                results, stack = [], [(start, prefix)]
                while stack and len(results) < limit:
                    node, path = stack.pop()
                    if node.terminal:
                        results.append(path)
                    for ch in sorted(node.children, reverse=True):
                        stack.append((node.children[ch], path + ch))
                return results
    ''', name=name, limit=c.choice([10, 20, 50, 100]), doc=c.doc(4))


def l_lru(c: Ctx) -> str:
    c.need("from collections import OrderedDict")
    name = c.cls(["Cache", "LRU"], ["lru", "bounded", "memo", "result"])
    return T('''
        class $name:
        $doc
            def __init__(self, capacity=$cap):
                if capacity <= 0:
                    raise ValueError("capacity must be positive")
                self.capacity = capacity
                self._data = OrderedDict()
                self.hits = 0
                self.misses = 0

            def get(self, key, default=None):
                if key in self._data:
                    self._data.move_to_end(key)
                    self.hits += 1
                    return self._data[key]
                self.misses += 1
                return default

            def put(self, key, value):
                if key in self._data:
                    self._data.move_to_end(key)
                self._data[key] = value
                while len(self._data) > self.capacity:
                    self._data.popitem(last=False)

            def __len__(self):
                return len(self._data)

            @property
            def hit_rate(self):
                total = self.hits + self.misses
                return self.hits / total if total else 0.0
    ''', name=name, cap=c.choice([16, 128, 1024, 4096]), doc=c.doc(4))


def l_dsu(c: Ctx) -> str:
    name = c.cls(["Set", "UnionFind"], ["disjoint", "union", "component"])
    return T('''
        class $name:
        $doc
            def __init__(self, n):
                self.parent = list(range(n))
                self.rank = [0] * n
                self.components = n

            def find(self, x):
                root = x
                while self.parent[root] != root:
                    root = self.parent[root]
                while self.parent[x] != root:
                    self.parent[x], x = root, self.parent[x]
                return root

            def union(self, a, b):
                ra, rb = self.find(a), self.find(b)
                if ra == rb:
                    return False
                if self.rank[ra] < self.rank[rb]:
                    ra, rb = rb, ra
                self.parent[rb] = ra
                if self.rank[ra] == self.rank[rb]:
                    self.rank[ra] += 1
                self.components -= 1
                return True
    ''', name=name, doc=c.doc(4))


def l_graph(c: Ctx) -> str:
    c.need("import heapq", "from collections import defaultdict, deque")
    name = c.cls(["Graph", "Network"], ["directed", "weighted", "dependency", "route"])
    return T('''
        class $name:
        $doc
            def __init__(self):
                self.adj = defaultdict(list)

            def add_edge(self, u, v, weight=1.0, directed=$directed):
                self.adj[u].append((v, weight))
                if not directed:
                    self.adj[v].append((u, weight))
                self.adj.setdefault(v, self.adj[v])

            def bfs(self, start):
                seen, order, queue = {start}, [], deque([start])
                while queue:
                    node = queue.popleft()
                    order.append(node)
                    for nxt, _ in self.adj[node]:
                        if nxt not in seen:
                            seen.add(nxt)
                            queue.append(nxt)
                return order

            def shortest_paths(self, source):
                dist = {source: 0.0}
                heap = [(0.0, source)]
                while heap:
                    d, node = heapq.heappop(heap)
                    if d > dist.get(node, float("inf")):
                        continue
                    for nxt, w in self.adj[node]:
                        nd = d + w
                        if nd < dist.get(nxt, float("inf")):
                            dist[nxt] = nd
                            heapq.heappush(heap, (nd, nxt))
                return dist

            def topological_order(self):
                indegree = {node: 0 for node in self.adj}
                for node in list(self.adj):
                    for nxt, _ in self.adj[node]:
                        indegree[nxt] = indegree.get(nxt, 0) + 1
                ready = deque(sorted(n for n, d in indegree.items() if d == 0))
                order = []
                while ready:
                    node = ready.popleft()
                    order.append(node)
                    for nxt, _ in self.adj[node]:
                        indegree[nxt] -= 1
                        if indegree[nxt] == 0:
                            ready.append(nxt)
                if len(order) != len(indegree):
                    raise ValueError("graph has a cycle")
                return order
    ''', name=name, directed=c.choice(["True", "False"]), doc=c.doc(4))


def l_ring(c: Ctx) -> str:
    name = c.cls(["Buffer", "Ring"], ["ring", "circular", "window", "sample"])
    return T('''
        class $name:
        $doc
            def __init__(self, capacity):
                self._items = [None] * capacity
                self._start = 0
                self._size = 0

            def append(self, item):
                cap = len(self._items)
                end = (self._start + self._size) % cap
                self._items[end] = item
                if self._size == cap:
                    self._start = (self._start + 1) % cap
                else:
                    self._size += 1

            def __iter__(self):
                cap = len(self._items)
                for i in range(self._size):
                    yield self._items[(self._start + i) % cap]

            def __len__(self):
                return self._size

            def mean(self):
                values = list(self)
                return sum(values) / len(values) if values else 0.0
    ''', name=name, doc=c.doc(4))


def l_bloom(c: Ctx) -> str:
    c.need("import hashlib", "import math")
    name = c.cls(["Filter", "Bloom"], ["bloom", "seen", "membership"])
    return T('''
        class $name:
        $doc
            def __init__(self, expected_items=$n, false_positive_rate=$fp):
                size = -expected_items * math.log(false_positive_rate) / (math.log(2) ** 2)
                self.size = max(8, int(size))
                self.hashes = max(1, int(round(self.size / expected_items * math.log(2))))
                self.bits = bytearray((self.size + 7) // 8)

            def _positions(self, item):
                data = str(item).encode("utf-8")
                for i in range(self.hashes):
                    digest = hashlib.blake2b(data, digest_size=8, salt=i.to_bytes(2, "little")).digest()
                    yield int.from_bytes(digest, "little") % self.size

            def add(self, item):
                for pos in self._positions(item):
                    self.bits[pos // 8] |= 1 << (pos % 8)

            def __contains__(self, item):
                return all(self.bits[pos // 8] & (1 << (pos % 8)) for pos in self._positions(item))
    ''', name=name, n=c.choice([1000, 10000, 100000]), fp=c.choice(["0.01", "0.001", "0.05"]),
             doc=c.doc(4))


def l_matrix(c: Ctx) -> str:
    name = c.cls(["Matrix"], ["dense", "small", "square", ""])
    return T('''
        class $name:
        $doc
            def __init__(self, rows):
                self.rows = [list(map(float, row)) for row in rows]
                widths = {len(row) for row in self.rows}
                if len(widths) > 1:
                    raise ValueError("rows must have equal length")

            @classmethod
            def identity(cls, n):
                return cls([[1.0 if i == j else 0.0 for j in range(n)] for i in range(n)])

            @property
            def shape(self):
                return len(self.rows), len(self.rows[0]) if self.rows else 0

            def transpose(self):
                return type(self)([list(col) for col in zip(*self.rows)])

            def __matmul__(self, other):
                n, m = self.shape
                m2, p = other.shape
                if m != m2:
                    raise ValueError(f"shape mismatch: {self.shape} @ {other.shape}")
                cols = other.transpose().rows
                return type(self)([[sum(a * b for a, b in zip(row, col)) for col in cols] for row in self.rows])

            def determinant(self):
                n, m = self.shape
                if n != m:
                    raise ValueError("determinant of a non-square matrix")
                a = [row[:] for row in self.rows]
                det = 1.0
                for col in range(n):
                    pivot = max(range(col, n), key=lambda r: abs(a[r][col]))
                    if abs(a[pivot][col]) < 1e-12:
                        return 0.0
                    if pivot != col:
                        a[col], a[pivot] = a[pivot], a[col]
                        det = -det
                    det *= a[col][col]
                    for r in range(col + 1, n):
                        factor = a[r][col] / a[col][col]
                        for k in range(col, n):
                            a[r][k] -= factor * a[col][k]
                return det

            def __repr__(self):
                return f"{type(self).__name__}({self.rows!r})"
    ''', name=name, doc=c.doc(4))


def l_number_theory(c: Ctx) -> str:
    sieve = c.unique(c.choice(["primes_up_to", "sieve", "prime_list"]))
    egcd = c.unique(c.choice(["extended_gcd", "egcd", "bezout"]))
    inv = c.unique(c.choice(["mod_inverse", "modinv", "inverse_mod"]))
    return T('''
        def $sieve(limit):
        $doc
            if limit < 2:
                return []
            is_prime = bytearray([1]) * (limit + 1)
            is_prime[0] = is_prime[1] = 0
            for i in range(2, int(limit**0.5) + 1):
                if is_prime[i]:
                    is_prime[i * i :: i] = bytearray(len(range(i * i, limit + 1, i)))
            return [i for i, flag in enumerate(is_prime) if flag]


        def $egcd(a, b):
            old_r, r = a, b
            old_s, s = 1, 0
            old_t, t = 0, 1
            while r:
                q = old_r // r
                old_r, r = r, old_r - q * r
                old_s, s = s, old_s - q * s
                old_t, t = t, old_t - q * t
            return old_r, old_s, old_t


        def $inv(a, m):
            g, x, _ = $egcd(a, m)
            if g != 1:
                raise ValueError(f"{a} has no inverse modulo {m}")
            return x % m
    ''', sieve=sieve, egcd=egcd, inv=inv, doc=c.doc(4))


def l_stats(c: Ctx) -> str:
    c.need("import math")
    mean = c.unique(c.choice(["mean", "average", "arith_mean"]))
    var = c.unique(c.choice(["variance", "sample_variance", "var"]))
    pct = c.unique(c.choice(["percentile", "quantile", "nearest_rank"]))
    welford = c.cls(["Stats", "Accumulator"], ["running", "online", "welford"])
    return T('''
        def $mean(values):
        $doc
            values = list(values)
            if not values:
                raise ValueError("mean of empty data")
            return math.fsum(values) / len(values)


        def $var(values, ddof=1):
            values = list(values)
            if len(values) <= ddof:
                raise ValueError("not enough data points")
            m = $mean(values)
            return math.fsum((v - m) ** 2 for v in values) / (len(values) - ddof)


        def $pct(values, q):
            ordered = sorted(values)
            if not ordered:
                raise ValueError("percentile of empty data")
            if not 0 <= q <= 100:
                raise ValueError("q must be in [0, 100]")
            pos = (len(ordered) - 1) * q / 100.0
            lo, hi = math.floor(pos), math.ceil(pos)
            if lo == hi:
                return ordered[int(pos)]
            return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


        class $welford:
            def __init__(self):
                self.n = 0
                self.mean = 0.0
                self._m2 = 0.0

            def push(self, x):
                self.n += 1
                delta = x - self.mean
                self.mean += delta / self.n
                self._m2 += delta * (x - self.mean)

            @property
            def variance(self):
                return self._m2 / (self.n - 1) if self.n > 1 else 0.0

            @property
            def stddev(self):
                return math.sqrt(self.variance)
    ''', mean=mean, var=var, pct=pct, welford=welford, doc=c.doc(4))


def l_numeric(c: Ctx) -> str:
    simpson = c.unique(c.choice(["simpson", "integrate", "quad_simpson"]))
    newton = c.unique(c.choice(["newton", "find_root", "newton_raphson"]))
    bisect = c.unique(c.choice(["bisect_root", "bisection", "solve_interval"]))
    return T('''
        def $simpson(f, a, b, n=$n):
        $doc
            if n % 2:
                n += 1
            step = (b - a) / n
            total = f(a) + f(b)
            for i in range(1, n):
                total += f(a + i * step) * (4 if i % 2 else 2)
            return total * step / 3


        def $newton(f, df, x0, tol=1e-10, max_iter=$it):
            x = x0
            for _ in range(max_iter):
                d = df(x)
                if d == 0:
                    raise ZeroDivisionError("zero derivative")
                step = f(x) / d
                x -= step
                if abs(step) < tol:
                    return x
            raise RuntimeError("did not converge")


        def $bisect(f, lo, hi, tol=1e-9):
            flo = f(lo)
            if flo * f(hi) > 0:
                raise ValueError("the interval does not bracket a root")
            while hi - lo > tol:
                mid = (lo + hi) / 2
                fmid = f(mid)
                if flo * fmid <= 0:
                    hi = mid
                else:
                    lo, flo = mid, fmid
            return (lo + hi) / 2
    ''', simpson=simpson, newton=newton, bisect=bisect, n=c.choice([100, 200, 1000]),
             it=c.choice([50, 100]), doc=c.doc(4))


def l_polynomial(c: Ctx) -> str:
    name = c.cls(["Polynomial", "Poly"], ["", "dense", "real"])
    return T('''
        class $name:
        $doc
            def __init__(self, coeffs):
                coeffs = list(coeffs)
                while len(coeffs) > 1 and coeffs[-1] == 0:
                    coeffs.pop()
                self.coeffs = coeffs or [0]

            @property
            def degree(self):
                return len(self.coeffs) - 1

            def __call__(self, x):
                result = 0
                for c in reversed(self.coeffs):
                    result = result * x + c
                return result

            def __add__(self, other):
                n = max(len(self.coeffs), len(other.coeffs))
                a = self.coeffs + [0] * (n - len(self.coeffs))
                b = other.coeffs + [0] * (n - len(other.coeffs))
                return type(self)([x + y for x, y in zip(a, b)])

            def __mul__(self, other):
                out = [0] * (len(self.coeffs) + len(other.coeffs) - 1)
                for i, a in enumerate(self.coeffs):
                    for j, b in enumerate(other.coeffs):
                        out[i + j] += a * b
                return type(self)(out)

            def derivative(self):
                return type(self)([i * c for i, c in enumerate(self.coeffs)][1:] or [0])

            def __repr__(self):
                terms = [f"{c}x^{i}" for i, c in enumerate(self.coeffs) if c]
                return " + ".join(reversed(terms)) or "0"
    ''', name=name, doc=c.doc(4))


def l_vector(c: Ctx) -> str:
    c.need("import math", "from dataclasses import dataclass")
    name = c.cls(["Vec2", "Point", "Vector"], ["", "plane", "screen"])
    return T('''
        @dataclass(frozen=True)
        class $name:
        $doc
            x: float
            y: float

            def __add__(self, other):
                return type(self)(self.x + other.x, self.y + other.y)

            def __sub__(self, other):
                return type(self)(self.x - other.x, self.y - other.y)

            def __mul__(self, k):
                return type(self)(self.x * k, self.y * k)

            def dot(self, other):
                return self.x * other.x + self.y * other.y

            def cross(self, other):
                return self.x * other.y - self.y * other.x

            def norm(self):
                return math.hypot(self.x, self.y)

            def rotate(self, angle):
                c, s = math.cos(angle), math.sin(angle)
                return type(self)(self.x * c - self.y * s, self.x * s + self.y * c)
    ''', name=name, doc=c.doc(4))


def l_cli(c: Ctx) -> str:
    c.need("import argparse", "import sys", "from pathlib import Path", "import csv", "import json")
    tool = c.choice(["inventory", "report", "sync", "audit", "catalog", "ledger", "backup"])
    main = c.unique("main")
    cmd_list = c.unique(f"cmd_list_{c.noun()}s")
    cmd_stats = c.unique(f"cmd_{c.choice(['stats', 'summary', 'count'])}")
    cmd_export = c.unique(f"cmd_export_{c.choice(['json', 'csv'])}")
    return T('''
        def $cmd_list(args):
            root = Path(args.root)
            pattern = args.pattern or "*"
            count = 0
            for path in sorted(root.rglob(pattern)):
                if path.is_file():
                    print(path.relative_to(root))
                    count += 1
            print(f"{count} files", file=sys.stderr)
            return 0


        def $cmd_stats(args):
            totals = {}
            with open(args.input, newline="", encoding="utf-8") as fh:
                for row in csv.DictReader(fh):
                    key = row.get(args.group_by, "?")
                    totals[key] = totals.get(key, 0.0) + float(row.get(args.field) or 0)
            width = max((len(k) for k in totals), default=0)
            for key, value in sorted(totals.items(), key=lambda kv: -kv[1]):
                print(f"{key:<{width}}  {value:>12.2f}")
            return 0


        def $cmd_export(args):
            rows = []
            with open(args.input, newline="", encoding="utf-8") as fh:
                rows.extend(csv.DictReader(fh))
            out = sys.stdout if args.output == "-" else open(args.output, "w", encoding="utf-8")
            try:
                json.dump(rows, out, indent=2)
                out.write("\\n")
            finally:
                if out is not sys.stdout:
                    out.close()
            return 0


        def $main(argv=None):
        $doc
            parser = argparse.ArgumentParser(prog="$tool", description="$tool maintenance tool")
            parser.add_argument("-v", "--verbose", action="count", default=0)
            sub = parser.add_subparsers(dest="command", required=True)
            p_list = sub.add_parser("list", help="list files")
            p_list.add_argument("root")
            p_list.add_argument("--pattern")
            p_list.set_defaults(func=$cmd_list)
            p_stats = sub.add_parser("stats", help="aggregate a CSV column")
            p_stats.add_argument("input")
            p_stats.add_argument("--group-by", default="$group")
            p_stats.add_argument("--field", default="$field")
            p_stats.set_defaults(func=$cmd_stats)
            p_export = sub.add_parser("export", help="CSV to JSON")
            p_export.add_argument("input")
            p_export.add_argument("-o", "--output", default="-")
            p_export.set_defaults(func=$cmd_export)
            args = parser.parse_args(argv)
            try:
                return args.func(args)
            except (OSError, ValueError) as exc:
                print(f"$tool: error: {exc}", file=sys.stderr)
                return 1
    ''', main=main, cmd_list=cmd_list, cmd_stats=cmd_stats, cmd_export=cmd_export, tool=tool,
             group=c.noun(), field=c.choice(["amount", "size", "total", "price"]), doc=c.doc(4))


def l_logging_setup(c: Ctx) -> str:
    c.need("import logging", "import sys")
    name = c.unique(c.choice(["setup_logging", "configure_logging", "init_logging"]))
    return T('''
        def $name(verbosity=0, log_file=None):
        $doc
            level = logging.WARNING - 10 * min(verbosity, 2)
            handlers = [logging.StreamHandler(sys.stderr)]
            if log_file:
                handlers.append(logging.FileHandler(log_file, encoding="utf-8"))
            logging.basicConfig(
                level=level,
                format="%(asctime)s %(levelname)-8s %(name)s: %(message)s",
                handlers=handlers,
                force=True,
            )
            return logging.getLogger("$logger")
    ''', name=name, logger=c.choice(["app", "tool", "service", "worker"]), doc=c.doc(4))


def l_web(c: Ctx) -> str:
    c.need("import json", "import re", "from dataclasses import dataclass, field")
    req = c.unique("Request", camel=True)
    resp = c.unique("Response", camel=True)
    router = c.cls(["Router", "App", "Dispatcher"], ["", "http", "api"])
    return T('''
        @dataclass
        class $req:
            method: str
            path: str
            headers: dict = field(default_factory=dict)
            body: bytes = b""
            params: dict = field(default_factory=dict)

            def json(self):
                return json.loads(self.body.decode("utf-8") or "null")


        @dataclass
        class $resp:
            status: int = 200
            body: bytes = b""
            headers: dict = field(default_factory=dict)

            @classmethod
            def json(cls, payload, status=200):
                data = json.dumps(payload).encode("utf-8")
                return cls(status, data, {"Content-Type": "application/json", "Content-Length": str(len(data))})


        class $router:
        $doc
            def __init__(self):
                self.routes = []
                self.middleware = []

            def route(self, pattern, methods=("GET",)):
                regex = re.compile("^" + re.sub(r"<(\\w+)>", r"(?P<\\1>[^/]+)", pattern) + "$$")

                def decorator(handler):
                    self.routes.append((regex, tuple(m.upper() for m in methods), handler))
                    return handler
                return decorator

            def use(self, middleware):
                self.middleware.append(middleware)
                return middleware

            def dispatch(self, request):
                for mw in self.middleware:
                    early = mw(request)
                    if early is not None:
                        return early
                allowed = []
                for regex, methods, handler in self.routes:
                    match = regex.match(request.path)
                    if not match:
                        continue
                    if request.method not in methods:
                        allowed.extend(methods)
                        continue
                    request.params = match.groupdict()
                    try:
                        return handler(request)
                    except (KeyError, ValueError) as exc:
                        return $resp.json({"error": str(exc)}, status=400)
                if allowed:
                    return $resp.json({"error": "method not allowed", "allow": sorted(set(allowed))}, status=405)
                return $resp.json({"error": "not found"}, status=404)
    ''', req=req, resp=resp, router=router, doc=c.doc(4)), (req, resp, router)


def l_web_handlers(c: Ctx, resp: str) -> str:
    c.need("import hashlib", "import hmac", "import itertools")
    res = c.noun()
    store = c.unique(f"_{res.upper()}S")
    ids = c.unique(f"_{res.upper()}_IDS")
    lst = c.unique(f"list_{res}s")
    get = c.unique(f"get_{res}")
    create = c.unique(f"create_{res}")
    delete = c.unique(f"delete_{res}")
    auth = c.unique(c.choice(["require_token", "check_auth", "authenticate"]))
    page = c.unique(c.choice(["paginate", "page_of", "slice_page"]))
    return T('''
        $store = {}
        $ids = itertools.count(1)
        SECRET_$store = b"$secret"


        def $page(items, page=1, per_page=$per):
            page = max(1, int(page))
            per_page = max(1, min(int(per_page), 100))
            start = (page - 1) * per_page
            return {"items": items[start : start + per_page], "page": page, "total": len(items)}


        def $auth(request):
            token = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
            expected = hashlib.sha256(SECRET_$store).hexdigest()
            if not hmac.compare_digest(token, expected):
                return $resp.json({"error": "unauthorized"}, status=401)
            return None


        def $lst(request):
            items = sorted($store.values(), key=lambda item: item["id"])
            return $resp.json($page(items, request.params.get("page", 1)))


        def $get(request):
            item_id = int(request.params["id"])
            if item_id not in $store:
                return $resp.json({"error": "no such $res"}, status=404)
            return $resp.json($store[item_id])


        def $create(request):
            payload = request.json()
            if not isinstance(payload, dict) or not payload.get("name"):
                raise ValueError("name is required")
            item_id = next($ids)
            $store[item_id] = {"id": item_id, "name": str(payload["name"])[:200], "tags": list(payload.get("tags", []))}
            return $resp.json($store[item_id], status=201)


        def $delete(request):
            item_id = int(request.params["id"])
            $store.pop(item_id, None)
            return $resp(status=204)
    ''', store=store, ids=ids, lst=lst, get=get, create=create, delete=delete, auth=auth,
             page=page, resp=resp, res=res, per=c.choice([10, 20, 25, 50]),
             secret="".join(c.choice(string.ascii_letters) for _ in range(16)))


def l_http_server(c: Ctx) -> str:
    c.need("import json", "from http.server import BaseHTTPRequestHandler, HTTPServer")
    name = c.cls(["Handler"], ["request", "status", "health", "api"])
    serve = c.unique(c.choice(["serve", "run_server", "serve_forever"]))
    return T('''
        class $name(BaseHTTPRequestHandler):
        $doc
            server_version = "$ver"
            routes = {"/health": "health", "/version": "version"}

            def _send(self, status, payload):
                data = json.dumps(payload).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                name = self.routes.get(self.path.split("?", 1)[0])
                if name is None:
                    self._send(404, {"error": "not found", "path": self.path})
                    return
                getattr(self, "get_" + name)()

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    payload = json.loads(raw or b"{}")
                except ValueError:
                    self._send(400, {"error": "invalid JSON"})
                    return
                self._send(200, {"received": sorted(payload) if isinstance(payload, dict) else None})

            def get_health(self):
                self._send(200, {"status": "ok"})

            def get_version(self):
                self._send(200, {"version": self.server_version})

            def log_message(self, fmt, *args):
                pass


        def $serve(host="127.0.0.1", port=$port):
            httpd = HTTPServer((host, port), $name)
            try:
                httpd.serve_forever()
            except KeyboardInterrupt:
                pass
            finally:
                httpd.server_close()
    ''', name=name, serve=serve, ver=f"{c.noun()}/{c.randint(0, 3)}.{c.randint(0, 20)}",
             port=c.choice([8000, 8080, 5000, 9000]), doc=c.doc(4))


def l_validation(c: Ctx) -> str:
    name = c.unique(c.choice(["validate_payload", "check_schema", "validate_fields"]))
    err = c.cls(["Error"], ["validation", "schema", "field"])
    return T('''
        class $err(ValueError):
            def __init__(self, errors):
                super().__init__("; ".join(errors))
                self.errors = errors


        _TYPES_$err = {"str": str, "int": int, "float": (int, float), "bool": bool, "list": list, "dict": dict}


        def $name(payload, schema):
        $doc
            errors = []
            if not isinstance(payload, dict):
                raise $err(["payload must be an object"])
            for key, rule in schema.items():
                required = rule.get("required", False)
                if key not in payload:
                    if required:
                        errors.append(f"{key}: required")
                    continue
                value = payload[key]
                expected = _TYPES_$err[rule.get("type", "str")]
                if not isinstance(value, expected):
                    errors.append(f"{key}: expected {rule.get('type', 'str')}")
                    continue
                if "min" in rule and value < rule["min"]:
                    errors.append(f"{key}: below {rule['min']}")
                if "max" in rule and value > rule["max"]:
                    errors.append(f"{key}: above {rule['max']}")
                if "choices" in rule and value not in rule["choices"]:
                    errors.append(f"{key}: not one of {rule['choices']}")
            unknown = sorted(set(payload) - set(schema))
            if unknown:
                errors.append("unknown fields: " + ", ".join(unknown))
            if errors:
                raise $err(errors)
            return payload
    ''', name=name, err=err, doc=c.doc(4))


def l_table(c: Ctx) -> str:
    name = c.unique(c.choice(["render_table", "format_table", "tabulate"]))
    return T('''
        def $name(rows, headers=None, align=None, padding=$pad):
        $doc
            rows = [[str(cell) for cell in row] for row in rows]
            if headers:
                rows.insert(0, [str(h) for h in headers])
            if not rows:
                return ""
            ncols = max(len(row) for row in rows)
            rows = [row + [""] * (ncols - len(row)) for row in rows]
            widths = [max(len(row[i]) for row in rows) for i in range(ncols)]
            align = align or ["<"] * ncols
            gap = " " * padding
            lines = []
            for index, row in enumerate(rows):
                lines.append(gap.join(f"{cell:{a}{w}}" for cell, a, w in zip(row, align, widths)).rstrip())
                if headers and index == 0:
                    lines.append(gap.join("-" * w for w in widths))
            return "\\n".join(lines)
    ''', name=name, pad=c.choice([1, 2, 3]), doc=c.doc(4))


def l_dates(c: Ctx) -> str:
    c.need("from datetime import date, datetime, timedelta, timezone")
    rng_name = c.unique(c.choice(["date_range", "days_between", "iter_days"]))
    parse = c.unique(c.choice(["parse_timestamp", "parse_when", "to_datetime"]))
    biz = c.unique(c.choice(["add_business_days", "business_days_after", "workdays_later"]))
    return T('''
        def $rng_name(start, end, step_days=1):
        $doc
            current = start
            step = timedelta(days=step_days)
            while current <= end:
                yield current
                current += step


        def $parse(text):
            text = text.strip()
            for fmt in ("%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d"):
                try:
                    value = datetime.strptime(text, fmt)
                except ValueError:
                    continue
                if value.tzinfo is None:
                    value = value.replace(tzinfo=timezone.utc)
                return value
            raise ValueError(f"unrecognised timestamp {text!r}")


        def $biz(day, n, holidays=frozenset()):
            if not isinstance(day, date):
                raise TypeError("day must be a date")
            remaining = n
            while remaining > 0:
                day += timedelta(days=1)
                if day.weekday() < 5 and day not in holidays:
                    remaining -= 1
            return day
    ''', rng_name=rng_name, parse=parse, biz=biz, doc=c.doc(4))


def l_state_machine(c: Ctx) -> str:
    name = c.cls(["Machine", "Workflow", "Lifecycle"], ["state", "order", "job", "ticket"])
    states = c.sample(["draft", "open", "review", "approved", "closed", "rejected", "queued",
                       "running", "finished"], c.randint(3, 6))
    trans = {states[i]: [states[i + 1]] for i in range(len(states) - 1)}
    trans[states[-1]] = []
    return T('''
        class $name:
        $doc
            TRANSITIONS = $trans

            def __init__(self, state="$first"):
                if state not in self.TRANSITIONS:
                    raise ValueError(f"unknown state {state!r}")
                self.state = state
                self.history = [state]
                self.listeners = []

            def can(self, target):
                return target in self.TRANSITIONS[self.state]

            def advance(self, target):
                if not self.can(target):
                    raise ValueError(f"cannot go from {self.state!r} to {target!r}")
                previous, self.state = self.state, target
                self.history.append(target)
                for listener in self.listeners:
                    listener(previous, target)
                return self

            def step_back(self):
                if len(self.history) < 2:
                    raise ValueError("nothing to undo")
                self.history.pop()
                self.state = self.history[-1]
                return self.state
    ''', name=name, trans=repr(trans), first=states[0], doc=c.doc(4))


def l_text(c: Ctx) -> str:
    c.need("import re", "from collections import Counter")
    wrap = c.unique(c.choice(["wrap_text", "fill_paragraph", "reflow"]))
    freq = c.unique(c.choice(["word_frequencies", "count_words", "term_counts"]))
    return T('''
        _WORD_RE = re.compile(r"[A-Za-z']+")


        def $wrap(text, width=$width):
        $doc
            lines, current = [], []
            length = 0
            for word in text.split():
                if current and length + 1 + len(word) > width:
                    lines.append(" ".join(current))
                    current, length = [word], len(word)
                else:
                    length += len(word) + (1 if current else 0)
                    current.append(word)
            if current:
                lines.append(" ".join(current))
            return "\\n".join(lines)


        def $freq(text, stopwords=frozenset(), top=$top):
            counts = Counter(w.lower() for w in _WORD_RE.findall(text) if w.lower() not in stopwords)
            return counts.most_common(top)
    ''', wrap=wrap, freq=freq, width=c.choice([60, 72, 79, 100]), top=c.choice([10, 20, 50]),
             doc=c.doc(4))


LIB_THEMES = {
    "parsing": [l_lexer, l_parser, l_ini, l_text, l_validation],
    "structures": [l_linked_list, l_heap, l_trie, l_lru, l_dsu, l_graph, l_ring, l_bloom],
    "math": [l_matrix, l_number_theory, l_stats, l_numeric, l_polynomial, l_vector],
    "cli": [l_cli, l_logging_setup, l_table, l_dates, l_ini, l_text],
    "web": [l_http_server, l_validation, l_state_machine, l_dates],
}


def library_file(c: Ctx, target: int):
    theme = c.choice(sorted(LIB_THEMES))
    blocks = []
    if theme == "web":
        src, (req, resp, router) = l_web(c)
        blocks.append(src)
        blocks.append(l_web_handlers(c, resp))
    pool = LIB_THEMES[theme] * 3 + GENERIC_FILLERS
    size = sum(b.count("\n") + 3 for b in blocks)
    while size < target:
        b = c.choice(pool)(c)
        blocks.append(b)
        size += b.count("\n") + 3
    if theme == "cli":
        mains = [b for b in blocks if "def main(" in b]
        if mains:
            c.need("import sys")
            blocks.append('if __name__ == "__main__":\n    sys.exit(main())')
    return blocks, {"kind": "library", "theme": theme}


# --------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------

STDLIB_FIRST = ("import ", "from ")
THIRD_PARTY = ("torch", "numpy", "transformers", "accelerate", "lightning", "pytorch_lightning", "model")


def merge_from_imports(imports: set[str]) -> set[str]:
    """`from m import a` and `from m import b, c` become `from m import a, b, c`."""
    names: dict[str, set[str]] = {}
    out = set()
    for line in imports:
        if line.startswith("from "):
            module, _, rest = line[5:].partition(" import ")
            names.setdefault(module, set()).update(n.strip() for n in rest.split(","))
        else:
            out.add(line)
    for module, ns in names.items():
        out.add(f"from {module} import {', '.join(sorted(ns))}")
    return out


def render_imports(imports: set[str]) -> str:
    imports = merge_from_imports(imports)

    def group(line):
        mod = line.split()[1].split(".")[0]
        if line.startswith("from __future__"):
            return 0
        if mod in THIRD_PARTY:
            return 2 if mod != "model" else 3
        return 1

    groups: dict[int, list[str]] = {}
    for line in imports:
        groups.setdefault(group(line), []).append(line)
    parts = []
    for key in sorted(groups):
        plain = sorted(l for l in groups[key] if l.startswith("import "))
        froms = sorted(l for l in groups[key] if l.startswith("from "))
        parts.append("\n".join(plain + froms))
    return "\n\n".join(parts)


def module_doc(c: Ctx, meta) -> str:
    kind = meta["kind"]
    if kind == "train":
        first = f"Train a model for {c.choice(TASKS)} ({meta['style'].replace('_', ' ')} loop)."
    elif kind == "model":
        first = f"Model definitions for {c.choice(TASKS)}."
    else:
        first = f"{meta['theme'].capitalize()} helpers: {c.choice(ADJECTIVES)} {c.noun()} handling."
    if c.chance(0.5):
        return f'"""{first}"""'
    return f'"""{first}\n\nUsage notes live in the project README; this module has no side effects on import.\n"""'


def clean(text: str) -> str:
    """Trailing spaces off; at most two blank lines at top level, one inside a block."""
    lines = [line.rstrip() for line in text.split("\n")]
    out = []
    i = 0
    while i < len(lines):
        if lines[i]:
            out.append(lines[i])
            i += 1
            continue
        j = i
        while j < len(lines) and not lines[j]:
            j += 1
        nxt = lines[j] if j < len(lines) else ""
        keep = 1 if nxt[:1] in (" ", "\t") else 2
        out.extend([""] * min(keep, j - i))
        i = j
    return "\n".join(out).strip("\n") + "\n"


def draw_lines(rng: random.Random) -> int:
    """A size between MIN_LINES and MAX_LINES: median about 125 lines, mean about 350, a
    long tail up to MAX_LINES (most modules of a project are short, a few are long)."""
    u = rng.random()
    return int(MIN_LINES * (MAX_LINES / MIN_LINES) ** (u ** 4))


def make_file(seed: int, index: int):
    rng = random.Random(f"{seed}:{index}")
    c = Ctx(rng)
    r = rng.random()
    target = draw_lines(rng)
    # The header and blank lines between blocks count too: aim a little under.
    body_target = max(60, target - 20)
    if r < 0.30:
        blocks, meta = training_file(c, body_target)
    elif r < 0.60:
        blocks, meta = model_file(c, body_target)
    else:
        blocks, meta = library_file(c, body_target)
    head = module_doc(c, meta)
    imports = render_imports(c.imports)
    text = clean(head + "\n\n" + imports + "\n\n\n" + "\n\n\n".join(blocks))
    meta["lines"] = text.count("\n")
    meta["target"] = target
    return text, meta


def file_path(meta, index: int, rng: random.Random) -> str:
    project = f"project_{index % 48:02d}"
    kind = meta["kind"]
    if kind == "train":
        sub = rng.choice(["scripts", "train", "experiments", "tools"])
        stem = rng.choice(["train", "finetune", "run", "main", "fit"]) + "_" + rng.choice(NOUNS)
    elif kind == "model":
        sub = rng.choice(["models", "modeling", "nets", "layers"])
        stem = rng.choice(NOUNS) + "_" + rng.choice(["model", "net", "layers", "blocks", "modules"])
    else:
        sub = {"parsing": "parsing", "structures": "collections_ext", "math": "mathutil",
               "cli": "cli", "web": "server"}[meta["theme"]]
        stem = rng.choice(VERBS) + "_" + rng.choice(NOUNS)
    return f"{project}/src/{sub}/{stem}_{index:05d}.py"


def generate(out: Path, files: int, seed: int, verify: bool = False) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    manifest = {"seed": seed, "files": files, "generator_version": GENERATOR_VERSION,
                "kinds": {}, "styles": {}, "bugs": {}, "lines": 0, "bytes": 0}
    for i in range(files):
        text, meta = make_file(seed, i)
        rel = file_path(meta, i, random.Random(f"{seed}:path:{i}"))
        if verify:
            try:
                ast.parse(text, filename=rel)
            except SyntaxError as exc:
                raise SystemExit(f"generated file {rel} does not parse: {exc}")
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        data = text.encode("utf-8")
        path.write_bytes(data)
        manifest["kinds"][meta["kind"]] = manifest["kinds"].get(meta["kind"], 0) + 1
        if meta["kind"] == "train":
            manifest["styles"][meta["style"]] = manifest["styles"].get(meta["style"], 0) + 1
            bug = meta["bug"] or "none"
            manifest["bugs"][bug] = manifest["bugs"].get(bug, 0) + 1
        manifest["lines"] += meta["lines"]
        manifest["bytes"] += len(data)
        if meta["kind"] == "train":
            # The smallest and largest training scripts: the single-file latency inputs.
            small = manifest.get("smallest_train")
            if small is None or meta["lines"] < small["lines"]:
                manifest["smallest_train"] = {"path": rel, "lines": meta["lines"]}
            large = manifest.get("largest_train")
            if large is None or meta["lines"] > large["lines"]:
                manifest["largest_train"] = {"path": rel, "lines": meta["lines"]}
    return manifest


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="output folder (its old content is not removed)")
    ap.add_argument("--files", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--verify", action="store_true", help="check that every file parses (slower)")
    args = ap.parse_args(argv)
    manifest = generate(args.out, args.files, args.seed, args.verify)
    print(json.dumps(manifest, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
