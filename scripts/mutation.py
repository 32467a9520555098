"""Driver of scripts/mutation: cosmic-ray per module, in parallel copies of the tree."""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cosmic_ray.work_db import WorkDB, use_db
from cosmic_ray.work_item import TestOutcome, WorkerOutcome

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "tests" / "mutation"
EXCLUDED_OPERATORS = [
    # `x is None` -> `x == None` and the like: the same for None, enums and other singletons.
    r"core/ReplaceComparisonOperator_Is_Eq",
    r"core/ReplaceComparisonOperator_IsNot_NotEq",
]


HUNK = re.compile(r"^@@ -(\d+)")


def equivalent_by_rule(before: str, after: str) -> bool:
    """`*,` -> `/,` in a signature makes the arguments before it positional-only and those
    after positional-or-keyword: every caller of a keyword-only function names those (the
    style, and mypy), so none notices."""
    return "*," in before and after == before.replace("*,", "/,", 1)


def mutated_source(source: str, diff: str) -> str | None:
    """`source` with the one line cosmic-ray's unified `diff` changes changed; None when the
    diff is not one changed line."""
    lines = source.splitlines()
    number = None
    replacement = None
    for line in diff.splitlines():
        found = HUNK.match(line)
        if found:
            number = int(found.group(1)) - 1
        elif number is None or line.startswith(("---", "+++")):
            continue
        elif line.startswith("-"):
            if replacement is not None or lines[number] != line[1:]:
                return None
            replacement = number
            number += 1
        elif line.startswith("+"):
            if replacement is None:
                return None
            lines[replacement] = line[1:]
        else:
            number += 1
    return "\n".join(lines) + "\n" if replacement is not None else None


def _without_signature_annotations(tree: ast.AST) -> str:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            node.returns = None
            arguments = node.args
            for arg in (
                *arguments.posonlyargs,
                *arguments.args,
                *arguments.kwonlyargs,
                arguments.vararg,
                arguments.kwarg,
            ):
                if arg is not None:
                    arg.annotation = None
    return ast.dump(tree)


def annotations_only(source: str, diff: str) -> bool:
    """Whether the mutant differs from `source` only in the annotations of a function's
    parameters or return (`Finding | None` -> `Finding + None`): every module has
    `from __future__ import annotations`, so those are never evaluated. Annotations of
    pydantic and dataclass fields are evaluated, so those are not judged here, nor modules
    that import typer (it reads its commands' annotations)."""
    mutated = mutated_source(source, diff)
    if mutated is None or "from __future__ import annotations" not in source:
        return False
    if re.search(r"^(import|from) typer", source, re.MULTILINE):
        return False
    try:
        changed = ast.parse(mutated)
    except SyntaxError:
        return False
    original = ast.parse(source)
    return ast.dump(original) != ast.dump(changed) and _without_signature_annotations(
        original
    ) == _without_signature_annotations(changed)


@dataclass
class Outcome:
    module: str
    mutants: int = 0
    killed: int = 0
    equivalent: int = 0
    survivors: list[dict[str, str]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ratio(self) -> float:
        """Killed among the mutants that a test could kill."""
        judged = self.mutants - self.equivalent
        return self.killed / judged if judged else 1.0


def tree_copy(into: Path) -> Path:
    """The working tree's files (tracked and new, not ignored), with a `migplan` package of
    links so that imports resolve to this copy before the editable install."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for name in filter(None, listed):
        source = ROOT / name.decode()
        if source.is_file():
            target = into / name.decode()
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    package = into / ".mutation" / "migplan"
    package.mkdir(parents=True)
    for folder in ("planner", "operator", "profiles"):
        (package / folder).symlink_to(into / folder)
    return into


def changed_line(diff: str | None, sign: str) -> str:
    """The first non-blank line the diff removes (`-`) or adds (`+`), trimmed."""
    lines = [
        line[1:].strip()
        for line in (diff or "").splitlines()
        if line.startswith(sign) and not line.startswith(sign * 3) and line[1:].strip()
    ]
    return lines[0] if lines else ""


def run_module(module: str, tests: list[str], equivalent: list[dict[str, str]]) -> Outcome:
    started = time.monotonic()
    outcome = Outcome(module)
    with tempfile.TemporaryDirectory(prefix="migplan-mutation-") as scratch:
        tree = tree_copy(Path(scratch) / "tree")
        session = Path(scratch) / "session.sqlite"
        command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
        config = Path(scratch) / "cosmic-ray.toml"
        config.write_text(
            "[cosmic-ray]\n"
            f"module-path = {json.dumps(module)}\n"
            "timeout = 120.0\n"
            "excluded-modules = []\n"
            f"test-command = {json.dumps(' '.join(command))}\n"
            "[cosmic-ray.distributor]\n"
            'name = "local"\n'
            "[cosmic-ray.filters.operators-filter]\n"
            f"exclude-operators = {json.dumps(EXCLUDED_OPERATORS)}\n"
        )
        env = {
            **os.environ,
            "PYTHONPATH": str(tree / ".mutation"),
            "PYTHONSAFEPATH": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            # No bytecode is read: a mutant is compiled from its source every time.
            "PYTHONPYCACHEPREFIX": str(Path(scratch) / "no-bytecode"),
        }
        tools = Path(sys.executable).parent
        for step in (
            [tools / "cosmic-ray", "init", config, session],
            [tools / "cr-filter-operators", session, config],
            [tools / "cr-filter-pragma", session],
            [tools / "cosmic-ray", "baseline", config],
            [tools / "cosmic-ray", "exec", config, session],
        ):
            ran = subprocess.run(
                [str(s) for s in step],
                check=False,
                cwd=tree,
                env=env,
                capture_output=True,
                text=True,
            )
            if ran.returncode != 0:
                raise SystemExit(
                    f"{module}: {Path(str(step[0])).name} failed:\n{ran.stderr[-3000:]}"
                )
        original = (tree / module).read_text()
        with use_db(str(session), WorkDB.Mode.open) as db:
            for _, result in db.completed_work_items:
                if result.worker_outcome is WorkerOutcome.SKIPPED:
                    continue  # an excluded operator, or a `# pragma: no mutate` line
                if result.test_outcome in (None, TestOutcome.INCOMPETENT):
                    continue  # the mutant does not even import: nothing to test
                outcome.mutants += 1
                if result.test_outcome is TestOutcome.KILLED:
                    outcome.killed += 1
                    continue
                before, after = changed_line(result.diff, "-"), changed_line(result.diff, "+")
                if (
                    equivalent_by_rule(before, after)
                    or annotations_only(original, result.diff or "")
                    or any(
                        e["module"] == module and e["before"] == before and e["after"] == after
                        for e in equivalent
                    )
                ):
                    outcome.equivalent += 1
                else:
                    outcome.survivors.append(
                        {"before": before, "after": after, "diff": result.diff or ""}
                    )
    outcome.seconds = round(time.monotonic() - started, 1)
    # Said as each module ends: a run of every module takes an hour or more.
    said = [
        f"{module}: {outcome.mutants} mutants, {outcome.killed} killed, "
        f"{outcome.equivalent} equivalent, {len(outcome.survivors)} survive "
        f"({outcome.ratio:.1%}, {outcome.seconds:.0f} s)",
        *(f"  - {s['before']}\n  + {s['after']}" for s in outcome.survivors),
    ]
    print("\n".join(said), file=sys.stderr, flush=True)
    return outcome


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("modules", nargs="*", help="modules to mutate (default: every listed)")
    parser.add_argument("--json", type=Path, default=ROOT / "bench" / "results" / "mutation.json")
    args = parser.parse_args()
    listed = tomllib.loads((CONFIG / "modules.toml").read_text())["modules"]
    equivalent = tomllib.loads((CONFIG / "equivalent.toml").read_text())["equivalent"]
    chosen = args.modules or list(listed)
    unknown = [m for m in chosen if m not in listed]
    if unknown:
        print(f"not in tests/mutation/modules.toml: {', '.join(unknown)}", file=sys.stderr)
        return 2
    jobs = int(os.environ.get("JOBS", os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        outcomes = list(pool.map(lambda m: run_module(m, listed[m]["tests"], equivalent), chosen))
    heads = ("mutants", "killed", "equiv.", "survive", "ratio")
    print(f"{'module':<32} " + " ".join(f"{h:>7}" for h in heads) + f" {'s':>6}")
    for o in outcomes:
        print(
            f"{o.module:<32} {o.mutants:>7} {o.killed:>7} {o.equivalent:>7} "
            f"{len(o.survivors):>7} {o.ratio:>7.1%} {o.seconds:>6.0f}"
        )
    total = Outcome(
        "all", *(sum(getattr(o, k) for o in outcomes) for k in ("mutants", "killed", "equivalent"))
    )
    print(
        f"{'all':<32} {total.mutants:>7} {total.killed:>6} {total.equivalent:>6} "
        f"{sum(len(o.survivors) for o in outcomes):>7} {total.ratio:>6.1%}"
    )
    for o in outcomes:
        for s in o.survivors:
            shown = (
                f"  - {s['before']}\n  + {s['after']}" if s["before"] or s["after"] else s["diff"]
            )
            print(f"\nsurvivor in {o.module}:\n{shown}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps({"modules": [asdict(o) | {"ratio": o.ratio} for o in outcomes]}, indent=2) + "\n"
    )
    return 1 if any(o.survivors for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
