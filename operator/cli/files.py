"""Reading the CLI's input files (plan manifests, inventories) with one-line errors."""

from __future__ import annotations

import json
import os
import stat
import sys
import tempfile
import threading
from collections.abc import Hashable, Iterable
from pathlib import Path
from typing import Any, BinaryIO, cast

import yaml

from migplan.planner.api.inventory import Inventory
from migplan.planner.api.spec import GPUPartitionPlan
from migplan.planner.errors import MigplanInputError
from migplan.planner.plan import PreviousPlan
from migplan.planner.schema import parse_model

MAX_INPUT_BYTES = 64 * 2**20
"""Larger than any inventory (10,000 nodes take about 25 MB)."""
_BASE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MERGE = "tag:yaml.org,2002:merge"


class SafeLoader(_BASE_LOADER):  # type: ignore[valid-type,misc]
    """libyaml's safe loader where PyYAML was built with it (10,000-node inventories spent 19
    of 26 s in the pure-Python parser), constructing only plain YAML types, and refusing a key
    given twice in one mapping: YAML says keys are unique, PyYAML silently keeps the last."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._scalar_tags: dict[tuple[str, Any], str] = {}

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        """The tag of a node; a plain scalar's is remembered by its text, since matching the
        implicit-type patterns in Python was a third of loading a large inventory."""
        if kind is not yaml.ScalarNode:
            return super().resolve(kind, value, implicit)
        key = (value, implicit)
        tag = self._scalar_tags.get(key)
        if tag is None:
            tag = super().resolve(kind, value, implicit)
            if len(value) <= 256:
                self._scalar_tags[key] = tag
        return tag

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        """PyYAML's mapping construction in one pass, refusing a key the mapping itself gives
        twice (keys brought in by a `<<` merge may be overridden, as YAML allows)."""
        own = sum(1 for key_node, _ in node.value if key_node.tag != _MERGE)
        self.flatten_mapping(node)
        merged = len(node.value) - own
        mapping: dict[Any, Any] = {}
        seen: set[Any] = set()
        for position, (key_node, value_node) in enumerate(node.value):
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    "found unhashable key",
                    key_node.start_mark,
                )
            if position >= merged:
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} appears twice in one mapping", key_node.start_mark
                    )
                seen.add(key)
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping

    def construct_document(self, node: yaml.Node) -> Any:
        """The document, once its aliases are known not to blow it up: every alias stands for
        a whole copy once the planner reads it, so a few MB of `*a` could make gigabytes."""
        composed, expanded = _sizes(node)
        if expanded > max(MAX_ALIAS_GROWTH * composed, MIN_ALIAS_BUDGET):
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"its aliases expand {composed:,} values into {expanded:,} (more than "
                f"{MAX_ALIAS_GROWTH} times): write the values out or use fewer aliases",
                node.start_mark,
            )
        return super().construct_document(node)


MAX_ALIAS_GROWTH = 10
"""How many times aliases may multiply a document's values."""
MIN_ALIAS_BUDGET = 100_000
"""A small document may expand to this many values whatever its aliases do."""


def _sizes(root: yaml.Node) -> tuple[int, int]:
    """(values as written, an alias counting one; values once every alias is expanded) of a
    composed document."""
    expanded: dict[int, int] = {}
    written = 1
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:  # post-order without recursion: documents may nest deeply
        node, children_done = stack.pop()
        if id(node) in expanded:
            continue
        children = _children(node)
        if children_done or not children:
            expanded[id(node)] = 1 + sum(expanded.get(id(c), 0) for c in children)
            written += len(children)
            continue
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in expanded)
    return written, expanded[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


SAFE_LOADER = SafeLoader

MAX_FAST_DEPTH = 64
"""Deeper documents go to the full loader, which refuses the absurd ones with its message."""


class _Unusual(Exception):
    """The text uses what the event reader leaves to the full loader."""


_NO_KEY = object()
"""In the event reader: the open mapping waits for a key, not for a key's value."""
_UNSEEN = object()
"""In the event reader: a scalar text not resolved yet."""


def _documents_from_events(text: str) -> list[Any] | None:
    """The documents in `text`, built straight from libyaml's parser events (no node tree):
    the same values as SAFE_LOADER gives, at a quarter of the time on large inventories (an
    8,000-GPU inventory: 0.45 s instead of 2.0 s, most of which went to building and
    resolving the node tree). None where the text has anchors, aliases, explicit tags, merge
    keys, keys that are not scalars or nesting deeper than MAX_FAST_DEPTH: the full loader
    reads those. Syntax errors and keys given twice raise as the full loader's do."""
    reader = _EventReader(SafeLoader(text))
    try:
        return reader.read()
    except _Unusual:
        return None
    finally:
        reader.loader.dispose()


class _EventReader:
    """Builds documents from a loader's events; see `_documents_from_events`."""

    def __init__(self, loader: SafeLoader) -> None:
        self.loader = loader
        self.scalars: dict[tuple[str, tuple[bool, bool]], Any] = {}
        self.documents: list[Any] = []
        # Each open collection: [container, its key waiting for a value or _NO_KEY, keys seen].
        self.stack: list[list[Any]] = []

    def read(self) -> list[Any]:
        get_event = self.loader.get_event
        while True:
            event = get_event()
            kind = type(event)
            if kind is yaml.ScalarEvent:
                if event.anchor is not None:
                    raise _Unusual
                self.add(self.scalar(event), event)
            elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
                self.add(self.stack.pop()[0], event)
            elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
                if event.anchor is not None or event.tag is not None:
                    raise _Unusual
                if len(self.stack) >= MAX_FAST_DEPTH:
                    raise _Unusual
                mapping = kind is yaml.MappingStartEvent
                self.stack.append([{} if mapping else [], _NO_KEY, set()])
            elif kind is yaml.AliasEvent:
                raise _Unusual
            elif kind is yaml.StreamEndEvent:
                return [doc for doc in self.documents if doc is not None]

    def scalar(self, event: yaml.ScalarEvent) -> Any:
        """The value of a scalar; resolving a tag depends only on the text and whether it was
        plain, so each (text, plain) is resolved and constructed once."""
        if event.tag is not None and event.tag != "!":
            raise _Unusual
        key = (event.value, event.implicit)
        value = self.scalars.get(key, _UNSEEN)
        if value is _UNSEEN:
            tag = self.loader.resolve(yaml.ScalarNode, event.value, event.implicit)
            if tag == _MERGE:
                raise _Unusual
            node = yaml.ScalarNode(tag, event.value)
            value = self.scalars[key] = self.loader.construct_object(node, deep=True)
        return value

    def add(self, value: Any, event: yaml.Event) -> None:
        if not self.stack:
            self.documents.append(value)
            return
        top = self.stack[-1]
        if isinstance(top[0], list):
            top[0].append(value)
        elif top[1] is not _NO_KEY:
            top[0][top[1]] = value
            top[1] = _NO_KEY
        elif isinstance(value, dict | list):
            raise _Unusual
        elif value in top[2]:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"key {value!r} appears twice in one mapping",
                cast(yaml.Mark, event.start_mark),
            )
        else:
            top[2].add(value)
            top[1] = value


FIFO_WRITER_WAIT_SECONDS = 30.0
"""How long a named pipe may go without a writer before reading it is given up."""


def _open_for_reading(path: Path, *, wait: float) -> BinaryIO:
    """`path` opened for binary reading. Opening a named pipe blocks until something opens it
    for writing, possibly never: that wait is bounded by `wait` seconds (the opener thread is
    a daemon, so an abandoned open does not keep the process alive). Once open, a slow writer
    is waited for as long as it keeps the pipe open."""
    try:
        is_fifo = stat.S_ISFIFO(os.stat(path).st_mode)
    except OSError:
        is_fifo = False
    if not is_fifo:
        return path.open("rb")
    opened: list[BinaryIO] = []
    failed: list[OSError] = []

    def opener() -> None:
        try:
            opened.append(path.open("rb"))
        except OSError as exc:
            failed.append(exc)

    thread = threading.Thread(target=opener, name=f"open {path}", daemon=True)
    thread.start()
    thread.join(wait)
    if failed:
        raise failed[0]
    if not opened:
        raise MigplanInputError(
            f"{path}: a named pipe that nothing wrote to within {wait:g} s; "
            "start the writer first, or pass a file"
        )
    return opened[0]


STDIN = "-"
"""The file name that means standard input, as kubectl's `-f -`."""


def shown(path: Path) -> str:
    """How a message names `path` (`stdin` for `-`)."""
    return "stdin" if str(path) == STDIN else str(path)


def read_text(path: Path, *, limit: int = MAX_INPUT_BYTES, wait: float | None = None) -> str:
    """The UTF-8 text of `path` (standard input for `-`), refused when larger than `limit`
    bytes (/dev/zero included) or, for a named pipe, when no writer opens it within `wait`
    seconds (default FIFO_WRITER_WAIT_SECONDS)."""
    wait = FIFO_WRITER_WAIT_SECONDS if wait is None else wait
    try:
        if str(path) == STDIN:
            data = sys.stdin.buffer.read(limit + 1)
        else:
            with _open_for_reading(path, wait=wait) as handle:
                data = handle.read(limit + 1)
    except FileNotFoundError:
        raise MigplanInputError(f"{shown(path)}: no such file") from None
    except OSError as exc:
        raise MigplanInputError(f"{shown(path)}: cannot read: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise MigplanInputError(
            f"{shown(path)}: larger than {limit // 2**20} MiB; not an input migplan reads"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MigplanInputError(f"{shown(path)}: cannot read: {exc}") from None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise ValueError(f"key {key!r} appears twice in one object")
        found[key] = value
    return found


_TOO_LONG = "integer string conversion"
"""What Python says of an integer past its 4,300 digits."""
_TOO_LONG_SAID = "a number of more than 4300 digits"


def read_yaml_documents(path: Path) -> list[Any]:
    """Every YAML document in `path` (empty documents skipped). JSON, which is YAML too, is
    read by the JSON parser: a 10,000-node inventory takes about 1 s instead of 25 s."""
    text = read_text(path)
    if text.lstrip()[:1] in ("{", "["):
        try:
            document = json.loads(text, object_pairs_hook=_unique_keys)
        except RecursionError:
            raise MigplanInputError(f"{shown(path)}: not valid JSON: nested too deeply") from None
        except ValueError as exc:
            if "appears twice" in str(exc):
                raise MigplanInputError(f"{shown(path)}: not valid JSON: {exc}") from None
            if _TOO_LONG in str(exc):
                raise MigplanInputError(
                    f"{shown(path)}: not valid JSON: {_TOO_LONG_SAID}"
                ) from None
        else:
            return [document] if document is not None else []
    try:
        fast = _documents_from_events(text)
        if fast is not None:
            return fast
        return [doc for doc in yaml.load_all(text, Loader=SAFE_LOADER) if doc is not None]
    except RecursionError:
        raise MigplanInputError(f"{shown(path)}: not valid YAML: nested too deeply") from None
    except ValueError as exc:  # a scalar the resolver turns into an int or a date
        said = _TOO_LONG_SAID if _TOO_LONG in str(exc) else f"a date that does not exist ({exc})"
        raise MigplanInputError(f"{shown(path)}: not valid YAML: {said}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise MigplanInputError(f"{shown(path)}: not valid YAML{where}: {problem}") from None


def load_plan_manifest(path: Path) -> GPUPartitionPlan:
    """The first GPUPartitionPlan in `path` (other documents are ignored)."""
    for doc in read_yaml_documents(path):
        if isinstance(doc, dict) and doc.get("kind") == "GPUPartitionPlan":
            return parse_model(GPUPartitionPlan, doc, source=shown(path))
    raise MigplanInputError(f"{shown(path)}: no document of kind GPUPartitionPlan")


def load_inventory(path: Path) -> Inventory:
    """The Inventory in `path` (a single document)."""
    docs = read_yaml_documents(path)
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise MigplanInputError(f"{shown(path)}: expected one Inventory document (a mapping)")
    return parse_model(Inventory, docs[0], source=shown(path))


def load_previous_plan(path: Path, *, name: str) -> dict[tuple[str, int], str]:
    """The layouts of the earlier plan in `path` (a preview's `-o json` or `-o yaml`
    document) by node and GPU index, for a warm start of GPUPartitionPlan `name`. A plan of
    another GPUPartitionPlan is refused: it is likely the wrong file."""
    docs = read_yaml_documents(path)
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise MigplanInputError(
            f"{shown(path)}: expected one plan document (the output of "
            "`migplan preview ... -o json`)"
        )
    previous = parse_model(PreviousPlan, docs[0], source=shown(path))
    if previous.name is not None and previous.name != name:
        raise MigplanInputError(
            f"{shown(path)}: a plan of GPUPartitionPlan {previous.name!r}, not of {name!r}"
        )
    twice = previous.repeated()
    if twice is not None:
        raise MigplanInputError(f"{shown(path)}: lists GPU {twice} twice")
    return previous.layouts()


def write_atomically(path: Path, text: str, *, inputs: Iterable[Path] = ()) -> None:
    """Write `text` to `path` all at once: into a temporary file beside it, then renamed over
    it. A failed write leaves the previous file as it was; a symbolic link at `path` is
    replaced, never followed; a path that is one of `inputs` is refused. Something that is
    not a file — a terminal, `/dev/stdout`, `/dev/null`, a named pipe, or a link to one — is
    written into, never replaced (as root, replacing /dev/null would break the machine). A
    new file gets the usual permissions (0666 less the umask), a replaced one keeps its own."""
    target = Path(os.path.abspath(path))
    for source in inputs:
        if os.path.realpath(source) in (os.path.realpath(target), str(target)):
            raise MigplanInputError(f"{path}: refusing to overwrite an input file")
    if target.is_dir():
        raise MigplanInputError(f"{path}: is a directory")
    if _is_special(target):
        _write_into(path, target, text)
        return
    mode = _mode_for(target)
    try:
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    except OSError as exc:
        raise MigplanInputError(f"cannot write {path}: {exc.strerror}") from None
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except OSError as exc:
        os.unlink(temporary)
        raise MigplanInputError(f"cannot write {path}: {exc.strerror}") from None


def _is_special(target: Path) -> bool:
    """Whether `target` (or what a link there points at) exists and is not a regular file."""
    try:
        found = os.stat(target)
    except OSError:
        return False
    return not stat.S_ISREG(found.st_mode) and not stat.S_ISDIR(found.st_mode)


def _write_into(path: Path, target: Path, text: str) -> None:
    try:
        with open(target, "w", encoding="utf-8") as out:
            out.write(text)
    except OSError as exc:
        raise MigplanInputError(f"cannot write {path}: {exc.strerror}") from None


def _mode_for(target: Path) -> int:
    """The permissions a written file gets: the replaced file's, else 0666 less the umask."""
    try:
        if not target.is_symlink():
            return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        pass
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
