"""Rename the project's own words toward Kubernetes' vocabulary (issue 41, point 6).

Run from the repository root, after every branch is merged::

    .venv/bin/python scripts/rename_vocabulary.py            # rewrite the tree
    .venv/bin/python scripts/rename_vocabulary.py --check    # exit 1 if anything is left

It is idempotent: a second run finds no old name and changes nothing. What it renames
is the table ``RENAMES`` below (docs/developer.md, "Vocabulary", says why each name).

How it reads a file, so that it renames names and never a user's contract:

* Python (``app``, ``tests``, ``bench``, ``scripts``): by token (``tokenize``). A NAME
  token is a class, function, attribute, keyword argument or variable, and is renamed
  where its rule's ``paths`` cover the file. A string literal is renamed only where the
  whole literal is a distinctive old name (an ``__all__`` entry); inside an f-string
  only the ``{...}`` expressions are. Comments and docstrings get the prose rules.
  So metric names (``loadaware_extender_estimated_addition_max_fraction``), JSON keys
  (``"estimated_addition"`` in ``/debug``), annotation and label keys, ConfigMap keys,
  flags, environment variables and log fields stay as they are: they are literals,
  and ``\\b`` never matches inside ``a_b``.
* Markdown and C (comments only name these): the prose rules.
* Never: ``tests/fixtures`` (captured data), ``CHANGELOG.md`` (history says what the
  names were), generated simulator results, this script.

The descheduler state's ``memory`` variable is renamed by reading its meaning, not its
spelling (``memory`` is also the resource): in a function where it is typed, built or
used as ``DeschedulerState``/``PlannerState`` (or their old names), and as the
``memory`` field of a ``View``.
"""

from __future__ import annotations

import argparse
import ast
import io
import itertools
import json
import re
import subprocess
import sys
import tokenize
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROOTS = ("app", "tests", "bench", "scripts", "docs", "deploy", "README.md")
SKIP = (
    "tests/fixtures/",
    "docs/simulate-results",
    "CHANGELOG.md",
    "scripts/rename_vocabulary.py",
    "tests/test_rename_vocabulary.py",
)
TEXT_SUFFIXES = (".md", ".c", ".pyi")

ANNOTATOR = ("app/annotator/", "tests/annotator/")
CLASS_POLICY = (
    "app/policy/",
    "app/load/model.py",
    "app/policy_check/",
    "tests/test_policy_classes.py",
)


@dataclass(frozen=True)
class Rename:
    """One old name and its new one.

    ``paths``: where the name is renamed in code (prefixes; empty: everywhere).
    ``prose``: how it is renamed in comments, docstrings, Markdown and C:
    ``"any"`` as a word anywhere (the name says nothing else in English),
    ``"quoted"`` only inside a `code` span (it is also a plain English word), or
    ``"none"``. ``after``: only where the token before it is one of these (``"."``
    for an attribute, ``"def"`` for a definition)."""

    old: str
    new: str
    why: str
    paths: tuple[str, ...] = ()
    prose: str = "any"
    after: tuple[str, ...] = ()


RENAMES: tuple[Rename, ...] = (
    # --- the extender's Reserve (kube-scheduler's Reserve/Unreserve) -----------------
    Rename("Ledger", "Reserve", "what is reserved on each node: bound pods and reservations"),
    Rename("ledger", "reserve", "the extender's Reserve"),
    Rename("_ledger", "_reserve", "the extender's Reserve"),
    Rename("cancel", "unreserve", "kube-scheduler's Unreserve", paths=("app/extender/",),
           prose="none", after=("_ledger", "def@app/extender/reserve.py")),
    Rename("Addition", "Unsampled", "what a node's samples do not contain yet, app.load's word",
           prose="quoted"),
    Rename("NO_ADDITION", "NOTHING_UNSAMPLED", "no pod outside the samples"),
    Rename("addition", "unsampled", "a node's Unsampled",
           paths=("app/extender/", "tests/extender/"), prose="quoted"),
    Rename("estimated_additions", "unsampled_estimates", "each node's Unsampled fractions"),
    Rename("EstimatedAdditions", "UnsampledEstimates", "each node's Unsampled fractions"),
    Rename("additions", "unsampled", "each node's Unsampled fractions",
           paths=("app/extender/telemetry.py",), prose="none"),
    Rename("_additions", "_unsampled", "each node's Unsampled fractions",
           paths=("app/extender/telemetry.py",), prose="none"),
    # --- one pod's estimate on one node (module node_estimates) ----------------------
    Rename("Pricing", "NodeEstimates", "one pod's estimate on one node, remembered per shape"),
    Rename("_pricing", "_node_estimates", "the Reserve's NodeEstimates"),
    Rename("reprice", "reestimate", "estimate every reservation again under a new policy"),
    Rename("repriced", "reestimated", "the nodes whose estimates changed"),
    Rename("forget_prices", "forget_estimates", "the policy changed"),
    Rename("_price", "_estimate", "one shape's estimate on one node, remembered",
           paths=("app/extender/node_estimates.py",)),
    Rename("_priced", "_remembered", "the remembered estimates",
           paths=("app/extender/node_estimates.py",)),
    Rename("priced", "remembered", "the remembered estimate",
           paths=("app/extender/node_estimates.py",), prose="none"),
    # --- the prioritize answer: kube-scheduler's HostPriorityList --------------------
    Rename("wire_scores_and_preferred", "host_priorities_and_preferred",
           "the HostPriorityList and the preferred node's position"),
    Rename("wire_scores", "host_priorities", "the HostPriorityList's scores, in request order"),
    Rename("plain_wire_score", "plain_priority", "what a node that is not preferred is answered"),
    Rename("preferred_wire_score", "preferred_priority", "what the preferred node is answered"),
    Rename("test_wire_scores", "test_host_priorities", "its test"),
    # --- the scheduler that places replacements (module replacement_scheduler) -------
    Rename("SchedulerBeside", "ReplacementScheduler",
           "the configuration's 'scheduler': who places the evicted pods' replacements"),
    # --- the higher classes whose limits hold for a pod of a lower class --------------
    Rename("ClassesBeside", "ClassLimitsAbove", "the higher classes' limits, where their pods run"),
    Rename("Beside", "LimitsAbove", "the protocol of ClassLimitsAbove",
           paths=("app/policy/schema.py",), prose="quoted"),
    Rename("beside", "limits_above", "a class's policy's ClassLimitsAbove", paths=CLASS_POLICY,
           prose="quoted"),
    # --- the descheduler's state ConfigMap (descheduler's and kube's word: state) -----
    Rename("PlannerMemory", "PlannerState", "the dry-run loop's own hot-round counts"),
    Rename("Memory", "DeschedulerState", "what the state ConfigMap holds between runs",
           prose="quoted"),
    Rename("_read_memory", "_read_state", "reads the state ConfigMap"),
    Rename("memory_window_s", "state_window_s", "how far back the state must reach"),
    Rename("memory_line", "state_line", "explain's line about the state ConfigMap"),
    Rename("descheduler_memory", "descheduler_state", "e2e fixture: a fresh state ConfigMap"),
    # --- the annotator's record of its own hot-value writes ---------------------------
    Rename("HotValueLedger", "HotValueWrites", "what this replica wrote, and the next patches"),
    Rename("ledger", "writes", "the annotator's HotValueWrites", paths=ANNOTATOR, prose="none"),
    Rename("_ledger", "_writes", "the annotator's HotValueWrites", paths=ANNOTATOR, prose="none"),
    Rename("test_the_ledger_prefers_its_own_newer_write_over_a_lagging_cache",
           "test_its_own_newer_write_wins_over_a_lagging_cache", "its test"),
    # --- the three 'limits': connection limits say so -------------------------------
    Rename("EXTENDER_LIMITS", "EXTENDER_CONNECTION_LIMITS", "the extender's ConnectionLimits"),
    Rename("HEALTH_LIMITS", "HEALTH_CONNECTION_LIMITS", "the health server's ConnectionLimits"),
)

# Prose only: words and phrases in comments, docstrings and docs, never in a string the
# program prints (``paths`` as in ``Rename``; empty: everywhere).
STATE_FILES = (
    "app/descheduler/act.py",
    "app/descheduler/decide.py",
    "app/descheduler/descheduler.py",
    "app/descheduler/gather.py",
    "app/kube/state.py",
    "app/explain/gather.py",
    "docs/developer.md",
    "docs/install.md",
)
UNSAMPLED = ("app/extender/", "tests/extender/", "app/load/model.py")
PROSE: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("ledgers", "reserves", ()),
    ("ledger", "reserve", ()),
    ("Ledger", "Reserve", ()),
    ("prices every reservation", "estimates every reservation", ()),
    ("answer on the wire", "prioritize answer", ()),
    ("repriced", "re-estimated", ()),
    ("extender's reprice", "extender's reestimate", ()),
    ("remembered price", "remembered estimate", ()),
    ("reservation's price", "reservation's estimate", ()),
    # a node's Unsampled usage, where "addition" says it
    ("the estimated addition to its usage", "the unsampled estimate added to its usage", UNSAMPLED),
    ("estimated addition", "unsampled estimate", UNSAMPLED),
    ("node's addition", "node's unsampled usage", UNSAMPLED),
    ("whose addition", "whose unsampled usage", UNSAMPLED),
    (  # the one sentence the longer words push past the line length
        "else None and the nodes whose addition\n        changed:",
        "else None and the nodes\n        whose unsampled usage changed:",
        ("app/extender/reserve.py",),
    ),
    ("only the addition changes", "only ``unsampled`` changes", UNSAMPLED),
    ("the scheduler it plans beside", "the scheduler that places the replacements", ()),
    # the descheduler's state ConfigMap, where "memory" says it
    # (not docs/reference.md: its tables are the flags' help, which stays as printed)
    ("descheduler's memory", "descheduler's state", ("app/", "tests/", "bench/", *STATE_FILES,
                                                      "docs/troubleshooting.md",
                                                      "docs/security.md", "docs/tuning.md")),
    ("the memory's", "the state's", STATE_FILES),
    ("The memory", "The state", STATE_FILES),
    ("the memory", "the state", STATE_FILES),
    ("its memory", "its state", STATE_FILES),
    ("no memory", "no state", STATE_FILES),
    ("runs' memory", "runs' state", STATE_FILES),
    ("memory (recent", "state (recent", STATE_FILES),
    ("memory ConfigMap", "state ConfigMap", STATE_FILES),
)

# Files renamed with ``git mv``; every mention of the old path follows.
MOVES: tuple[tuple[str, str], ...] = (
    ("tests/descheduler/test_demand_memory.py", "tests/descheduler/test_demand_state.py"),
)

STATE_TYPES = {"Memory", "PlannerMemory", "DeschedulerState", "PlannerState"}
STATE_ATTRS = {"evictions", "hot_rounds", "moves", "demand", "exists", "resource_version",
               "recent"}
STATE_OLD = "memory"


def _covers(paths: Sequence[str], rel: str) -> bool:
    return not paths or any(rel.startswith(p) or rel == p for p in paths)


def _rules_for(rel: str) -> dict[str, Rename]:
    """The code rules in force in ``rel``: the most specific ``paths`` wins."""
    chosen: dict[str, tuple[int, Rename]] = {}
    for rule in RENAMES:
        if not _covers(rule.paths, rel):
            continue
        weight = max((len(p) for p in rule.paths if rel.startswith(p)), default=0)
        if rule.old not in chosen or weight > chosen[rule.old][0]:
            chosen[rule.old] = (weight, rule)
    return {old: rule for old, (_, rule) in chosen.items()}


def _word_sub(text: str, table: dict[str, str]) -> str:
    if not table:
        return text
    names = sorted(table, key=len, reverse=True)
    pattern = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, names)) + r")(?![\w-])")
    return pattern.sub(lambda m: table[m.group(1)], text)


_SPAN = re.compile(r"(`+)([^`]+?)\1")


KEEP = re.compile(r"(<!-- rename_vocabulary: keep -->.*?<!-- rename_vocabulary: end -->)", re.S)


def prose(text: str, rel: str) -> str:
    """Comments, docstrings, Markdown: ``any`` names everywhere, ``quoted`` in `code`;
    never between ``<!-- rename_vocabulary: keep -->`` and ``<!-- ...: end -->``
    (the table of old and new names)."""
    if KEEP.search(text):
        return "".join(p if KEEP.fullmatch(p) else prose(p, rel) for p in KEEP.split(text))
    rules = _rules_for(rel)
    anywhere = {r.old: r.new for r in RENAMES if r.prose == "any" and _covers(r.paths, rel)}
    anywhere = {old: new for old, new in anywhere.items() if old[0].isupper() or "_" in old}
    anywhere.update({old: new for old, new, paths in PROSE if _covers(paths, rel)})
    for old, new in MOVES:
        anywhere[old] = new
        anywhere[Path(old).name] = Path(new).name
    quoted = {old: r.new for old, r in rules.items() if r.prose in ("any", "quoted")}
    quoted.update(anywhere)
    text = _SPAN.sub(lambda m: m.group(1) + _word_sub(m.group(2), quoted) + m.group(1), text)
    # Outside the spans (a span's text is already new, so this leaves it alone).
    return _word_sub(text, anywhere)


def _state_spans(source: str) -> list[tuple[int, int]]:
    """Line ranges of the functions where ``memory`` is the descheduler's state."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []

    def type_name(node: ast.AST | None) -> str:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute):
            return node.attr
        if isinstance(node, ast.Subscript | ast.BinOp):
            return type_name(getattr(node, "value", None) or getattr(node, "left", None))
        return ""

    def means_state(scope: ast.AST) -> bool:
        for node in ast.walk(scope):
            typed = (
                isinstance(node, ast.arg) and node.arg == STATE_OLD and node.annotation
            ) or (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and node.target.id == STATE_OLD
            )
            if typed and type_name(getattr(node, "annotation", None)) in STATE_TYPES:
                return True
            used = (
                isinstance(node, ast.Attribute)
                and node.attr in STATE_ATTRS
                and isinstance(node.value, ast.Name)
                and node.value.id == STATE_OLD
            )
            if used:
                return True
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                named = [t.id for t in node.targets if isinstance(t, ast.Name)]
                if STATE_OLD in named and type_name(node.value.func) in STATE_TYPES:
                    return True
        return False

    spans = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            functions = ast.FunctionDef | ast.AsyncFunctionDef
            inner = [n for n in node.body if not isinstance(n, functions)]
            scope = node if not isinstance(node, ast.ClassDef) else ast.Module(inner, [])
            if means_state(scope):
                spans.append((node.lineno, node.end_lineno or node.lineno))
    return spans


def _binds_state(tokens: Sequence[tokenize.TokenInfo]) -> bool:
    """The file has a name ``state`` of its own (``from app.kube import state``)."""
    for before, token in itertools.pairwise(tokens):
        if token.type == tokenize.NAME and token.string == "state" and before.string != ".":
            return True
    return False


def python(source: str, rel: str) -> str:
    rules = _rules_for(rel)
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    spans = _state_spans(source)
    state_new = "saved_state" if _binds_state(tokens) else "state"

    def in_state(line: int) -> bool:
        return any(start <= line <= end for start, end in spans)

    def code_name(index: int, token: tokenize.TokenInfo) -> str:
        name = token.string
        before = _previous(tokens, index)
        if name == STATE_OLD:
            if in_state(token.start[0]) and before != ".":
                return state_new
            after_view = before == "." and _previous(tokens, index - 1) in ("view", "View")
            return "state" if after_view else name
        rule = rules.get(name)
        if rule is None:
            return name
        if rule.after:
            allowed = {a for a in rule.after if not a.startswith("def@")}
            defs = {a[4:] for a in rule.after if a.startswith("def@")}
            object_name = _previous(tokens, index - 1) if before == "." else None
            if not (object_name in allowed or (before == "def" and rel in defs)):
                return name
        return rule.new

    def expressions(text: str, line: int) -> str:
        table = {old: r.new for old, r in rules.items() if not r.after}

        def code(part: str) -> str:
            part = _word_sub(part, table)
            if in_state(line):  # the variable, never an attribute (``queries.memory``)
                part = re.sub(rf"(?<![\w.-]){STATE_OLD}(?![\w-])", state_new, part)
            return part

        parts = re.split(r"(\{\{|\}\}|\{[^{}]*\})", text)
        return "".join(
            code(p) if p.startswith("{") and not p.startswith("{{") else p for p in parts
        )

    distinct = {
        old: r.new for old, r in rules.items() if old[0].isupper() or "_" in old.strip("_")
    }
    edits: list[tuple[tuple[int, int], tuple[int, int], str]] = []
    for index, token in enumerate(tokens):
        new = token.string
        if token.type == tokenize.NAME:
            new = code_name(index, token)
        elif token.type == tokenize.COMMENT:
            new = prose(token.string, rel)
        elif token.type == tokenize.STRING:
            prefix = re.match(r"[A-Za-z]*", token.string).group(0).lower()  # type: ignore[union-attr]
            body = token.string[len(prefix):]
            quote = body[:3] if body[:3] in ('"""', "'''") else body[:1]
            inner = body[len(quote):-len(quote)]
            if inner in distinct:
                inner = distinct[inner]
            elif "f" in prefix:
                inner = expressions(inner, token.start[0])
            elif _standalone(tokens, index):  # a docstring, never a printed string
                inner = prose(inner, rel)
            new = token.string[: len(prefix)] + quote + inner + quote
        if new != token.string:
            edits.append((token.start, token.end, new))
    return _apply(source, edits)


def _standalone(tokens: Sequence[tokenize.TokenInfo], index: int) -> bool:
    """The string is a statement of its own (a docstring): nothing uses its value."""
    layout = {tokenize.NL, tokenize.COMMENT}
    before = next((t for t in reversed(tokens[:index]) if t.type not in layout), None)
    after = next((t for t in tokens[index + 1 :] if t.type not in layout), None)
    starts = before is None or before.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
    return starts and (after is None or after.type in (tokenize.NEWLINE, tokenize.ENDMARKER))


def _previous(tokens: Sequence[tokenize.TokenInfo], index: int) -> str | None:
    skip = {tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT}
    for token in reversed(tokens[:index]):
        if token.type not in skip:
            return token.string
    return None


def _apply(source: str, edits: Iterable[tuple[tuple[int, int], tuple[int, int], str]]) -> str:
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    out, at = [], 0
    for (srow, scol), (erow, ecol), new in edits:
        start, end = offsets[srow - 1] + scol, offsets[erow - 1] + ecol
        out.append(source[at:start])
        out.append(new)
        at = end
    out.append(source[at:])
    return "".join(out)


def files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--", *ROOTS], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.split()
    return [
        ROOT / rel
        for rel in listed
        if not rel.startswith(SKIP) and rel.endswith((".py", *TEXT_SUFFIXES))
    ]


def rewrite(path: Path) -> bool:
    rel = path.relative_to(ROOT).as_posix()
    text = path.read_text(encoding="utf-8")
    new = python(text, rel) if rel.endswith(".py") else prose(text, rel)
    if rel.endswith(".pyi"):
        new = _word_sub(new, {old: r.new for old, r in _rules_for(rel).items() if not r.after})
    if new == text:
        return False
    path.write_text(new, encoding="utf-8")
    return True


def move(check: bool) -> list[str]:
    moved = []
    for old, new in MOVES:
        if (ROOT / old).exists():
            moved.append(f"{old} -> {new}")
            if not check:
                subprocess.run(["git", "mv", old, new], cwd=ROOT, check=True)
    return moved


def table() -> str:
    """The renames as a Markdown table (docs/developer.md, "Vocabulary")."""
    rows = ["| old name | new name | what it is | where |", "| --- | --- | --- | --- |"]
    for rule in RENAMES:
        narrower = any(r.old == rule.old and r.paths for r in RENAMES if r is not rule)
        where = ", ".join(f"`{p}`" for p in rule.paths) if rule.paths else "everywhere"
        where = "everywhere else" if narrower and not rule.paths else where
        rows.append(f"| `{rule.old}` | `{rule.new}` | {rule.why} | {where} |")
    for old, new in MOVES:
        rows.append(f"| `{old}` | `{new}` | the file, by `git mv` | |")
    rows.append(
        f"| `{STATE_OLD}` (a `DeschedulerState` or `PlannerState`) | `state` (`saved_state` "
        "where the module `state` is imported) | the descheduler's state, not the resource "
        "| where typed or built as one |"
    )
    return "\n".join(rows)


def tidy(paths: Sequence[Path]) -> None:
    """Sort the imports and ``__all__`` lists the renames unsorted, and format (only) the
    statements a longer name pushed past the line length (``ruff format --range``)."""
    if not paths:
        return
    ruff = str(Path(sys.executable).parent / "ruff")
    names = [str(p) for p in paths]
    subprocess.run([ruff, "check", "-q", "--fix", "--select", "I001,RUF022", *names], cwd=ROOT)
    report = subprocess.run(
        [ruff, "check", "-q", "--select", "E501", "--output-format", "json", *names],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    long_lines = sorted(
        {(v["filename"], v["location"]["row"]) for v in json.loads(report.stdout or "[]")},
        reverse=True,  # bottom up: a formatted statement moves only the lines below it
    )
    for filename, row in long_lines:
        line = (ROOT / filename).read_text(encoding="utf-8").splitlines()[row - 1]
        if "#" in line and len(line.split("#", 1)[0].rstrip()) <= 100:
            continue  # the comment is long, not the code: the formatter would only wrap it oddly
        subprocess.run([ruff, "format", "-q", "--range", f"{row}:1-{row}:1000", filename], cwd=ROOT)
    left = subprocess.run(
        [ruff, "check", "-q", "--select", "E501", "--output-format", "concise", *names],
        cwd=ROOT, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    if left:  # a docstring or comment the formatter does not wrap
        print(f"rewrap by hand (ruff E501):\n{left}", file=sys.stderr)


def main(argv: Sequence[str] | None = None, out: Callable[[str], None] = print) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if a rename is due"
    )
    parser.add_argument(
        "--table", action="store_true", help="print the renames as docs/developer.md lists them"
    )
    args = parser.parse_args(argv)
    if args.table:
        out(table())
        return 0
    changed = move(args.check)
    for path in files():
        if args.check:
            rel = path.relative_to(ROOT).as_posix()
            text = path.read_text(encoding="utf-8")
            if (python(text, rel) if rel.endswith(".py") else prose(text, rel)) != text:
                changed.append(rel)
        elif rewrite(path):
            changed.append(path.relative_to(ROOT).as_posix())
    if not args.check:
        tidy([ROOT / rel for rel in changed if rel.endswith(".py")])
    for line in changed:
        out(line)
    out(f"{len(changed)} file(s) {'to change' if args.check else 'changed'}")
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
