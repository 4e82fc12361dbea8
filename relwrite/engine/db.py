"""The rewrite database: rewriters registered by name, tags and position, selected by queries.

A `Query` picks entries by tag: an entry is taken when one of its tags (its
name counts as a tag) is in `include`, all of `require` are among them and
none of `exclude` is.  Opt-in tags (`unsafe`, `explore`) must be asked for:
an entry carrying one is taken only when the query includes or requires it.
A `SequenceDB` answers with a SequentialRewriter of the chosen entries in
position order; an `EquilibriumDB` with an EquilibriumRewriter over them.
Databases nest: a chosen sub-database is queried in turn (with
`subquery[name]` when given).  The default `optdb` is filled from the rule
catalogue by phase tags.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from relwrite.engine.equilibrium import EquilibriumRewriter
from relwrite.engine.folding import constant_folding
from relwrite.engine.fusion import FusionRewriter, useless_composite
from relwrite.engine.graph_rewriters import GraphRewriter, MergeRewriter, SequentialRewriter
from relwrite.engine.inplace import AddDestroyHandler, InplaceRewriter
from relwrite.engine.node_rewriters import KanrenRelationSub, NodeRewriter
from relwrite.graph.basic import Variable
from relwrite.graph.fg import FunctionGraph
from relwrite.relations import OPT_IN_TAGS, PHASES, catalogue


def _tags(tags: Iterable[str] | str | None) -> frozenset[str]:
    if tags is None:
        return frozenset()
    if isinstance(tags, str):
        return frozenset([tags])
    tags = frozenset(tags)
    for tag in tags:
        if not isinstance(tag, str):
            raise TypeError(f"tags must be strings, got {tag!r}")
    return tags


@dataclass(frozen=True)
class Query:
    """Which rewriters to take from a database (see the module docstring)."""

    include: frozenset[str] = frozenset()
    require: frozenset[str] = frozenset()
    exclude: frozenset[str] = frozenset()
    subquery: Mapping[str, Query] = field(default_factory=dict)

    def __init__(
        self,
        include: Iterable[str] | str | None = (),
        require: Iterable[str] | str | None = None,
        exclude: Iterable[str] | str | None = None,
        subquery: Mapping[str, Query] | None = None,
    ):
        object.__setattr__(self, "include", _tags(include))
        object.__setattr__(self, "require", _tags(require))
        object.__setattr__(self, "exclude", _tags(exclude))
        object.__setattr__(self, "subquery", dict(subquery or {}))

    def __hash__(self) -> int:
        return hash((self.include, self.require, self.exclude, tuple(sorted(self.subquery))))

    def including(self, *tags: str) -> Query:
        return replace(self, include=self.include | _tags(tags))

    def excluding(self, *tags: str) -> Query:
        return replace(self, exclude=self.exclude | _tags(tags))

    def requiring(self, *tags: str) -> Query:
        return replace(self, require=self.require | _tags(tags))

    def selects(self, name: str, tags: frozenset[str]) -> bool:
        labels = tags | {name}
        if (labels & OPT_IN_TAGS) - self.include - self.require:
            return False
        return bool(self.include & labels) and self.require <= labels and not self.exclude & labels


@dataclass
class _Entry:
    name: str
    item: Any
    tags: frozenset[str]
    position: float
    order: int


class RewriteDatabase:
    """Named, tagged rewriters and sub-databases; rules registered here also carry the database's name."""

    changes = 0
    """Registrations and removals in any database so far: a query's answer is rebuilt after one (a
    sub-database's contents are part of its parents' answers)."""

    def __init__(self, name: str | None = None):
        self.name = name
        self._entries: dict[str, _Entry] = {}
        self._built: dict[tuple, Any] = {}

    def register(
        self,
        name: str,
        item: Any,
        *tags: str,
        position: float | str = "last",
        overwrite_existing: bool = False,
    ) -> None:
        """Add `item` under `name`; registering a taken name again is a ValueError unless
        `overwrite_existing`, which replaces the entry (item, tags and position: all as given now).

        Names and tags share one namespace, since a query selects by both: a
        name may not be another entry's tag, nor a tag another entry's name
        (a query for it would select both entries).  A replacement that breaks
        a rule leaves the old entry in place.
        """
        if not isinstance(name, str) or not name:
            raise TypeError(f"register: the name must be a non-empty string, got {name!r}")
        if not isinstance(overwrite_existing, bool):
            raise TypeError(f"register: overwrite_existing must be True or False, got {overwrite_existing!r}")
        old = self._entries.get(name)
        if old is not None and not overwrite_existing:
            raise ValueError(
                f"register: {name!r} is already registered in {self}; "
                "pass overwrite_existing=True to replace it"
            )
        self._check(name, item)
        others = [e for e in self._entries.values() if e.name != name]
        if position == "last":
            position = max((e.position for e in others), default=0.0) + 1
        if not isinstance(position, (int, float)):
            raise TypeError(f"register: position must be a number or 'last', got {position!r}")
        labels = _tags(tags) | ({self.name} if self.name else set())
        self._check_labels(name, labels, others)
        order = old.order if old is not None else max((e.order for e in others), default=-1) + 1
        self._entries[name] = _Entry(name, item, labels, float(position), order)
        RewriteDatabase.changes += 1

    def _check_labels(self, name: str, tags: frozenset[str], others: Iterable[_Entry]) -> None:
        """Raise ValueError when `name` is the tag of one of `others` or one of `tags` its name."""
        if name == self.name:
            raise ValueError(
                f"register: the name {name!r} is the name of {self}, a tag of all its entries; "
                f"a query for {name!r} would select them all"
            )
        for entry in others:
            if name in entry.tags:
                raise ValueError(
                    f"register: the name {name!r} is a tag of {entry.name!r} in {self}; "
                    f"a query for {name!r} would select both"
                )
            if entry.name in tags:
                raise ValueError(
                    f"register: the tag {entry.name!r} of {name!r} is the name of another entry in {self}; "
                    f"a query for {entry.name!r} would select both"
                )

    def _check(self, name: str, item: Any) -> None:
        if not isinstance(item, (GraphRewriter, RewriteDatabase)):
            raise TypeError(f"register: {name!r} must be a graph rewriter or a database, got {item!r}")

    def remove(self, name: str) -> None:
        if name not in self._entries:
            raise KeyError(f"{name!r} is not registered in {self}")
        del self._entries[name]
        RewriteDatabase.changes += 1

    def __getitem__(self, name: str) -> Any:
        try:
            return self._entries[name].item
        except KeyError:
            raise KeyError(f"{name!r} is not registered in {self}") from None

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    def names(self) -> list[str]:
        return list(self._entries)

    def tags_of(self, name: str) -> frozenset[str]:
        return self._entries[name].tags

    def nested_names(self) -> frozenset[str]:
        """The names of the entries here and in every nested database."""
        return frozenset(name for db in self._databases() for name in db._entries)

    def nested_tags(self) -> frozenset[str]:
        """The tags of the entries here and in every nested database (with names: what queries select by)."""
        return frozenset(tag for db in self._databases() for e in db._entries.values() for tag in e.tags)

    def _databases(self) -> list[RewriteDatabase]:
        """This database and every database nested in it, each once."""
        found: dict[int, RewriteDatabase] = {id(self): self}
        stack = [self]
        while stack:
            for entry in stack.pop()._entries.values():
                if isinstance(entry.item, RewriteDatabase) and id(entry.item) not in found:
                    found[id(entry.item)] = entry.item
                    stack.append(entry.item)
        return list(found.values())

    def _selected(self, query: Query) -> list[tuple[_Entry, Any]]:
        chosen = []
        for entry in sorted(self._entries.values(), key=lambda e: (e.position, e.order)):
            if not query.selects(entry.name, entry.tags):
                continue
            item = entry.item
            if isinstance(item, RewriteDatabase):
                item = item.query(query.subquery.get(entry.name, query))
            chosen.append((entry, item))
        return chosen

    def query(self, *tags: Query | str, **kwargs: Any) -> Any:
        """The rewriter for a query, built once while the contents stay the same: a `Query`,
        `Query(**kwargs)`, or tags as strings, ``"+tag"`` to include, ``"-tag"`` to exclude and
        ``"&tag"`` to require (``optdb.query("+canonicalize", "-unsafe")``).

        Rewriters keep no state between runs, so one answer serves every graph.
        """
        if not tags:
            query = Query(**kwargs)
        elif len(tags) == 1 and not kwargs and isinstance(tags[0], Query):
            query = tags[0]
        elif not kwargs and all(isinstance(t, str) for t in tags):
            query = _parsed_query(tags)
        else:
            shown = ", ".join([*map(repr, tags), *(f"{k}={v!r}" for k, v in kwargs.items())])
            raise TypeError(
                f"query: expected a Query, Query's keywords or '+tag'/'-tag'/'&tag' strings, got {shown}"
            )
        key = (query, RewriteDatabase.changes)
        built = self._built.get(key)
        if built is None:
            if len(self._built) > 64:
                self._built.clear()
            built = self._built[key] = self._build(query)
        return built

    def _build(self, query: Query) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not build rewriters")

    def __str__(self) -> str:
        return f"{type(self).__name__}({self.name or ''})"


def _parsed_query(tags: Sequence[str]) -> Query:
    """The Query that ``"+a"``, ``"-b"`` and ``"&c"`` strings (include, exclude, require) spell."""
    kinds: dict[str, list[str]] = {"+": [], "-": [], "&": []}
    for tag in tags:
        if len(tag) < 2 or tag[0] not in kinds:
            raise ValueError(f"query: a tag string starts with '+', '-' or '&' and names a tag, got {tag!r}")
        kinds[tag[0]].append(tag[1:])
    return Query(include=kinds["+"], exclude=kinds["-"], require=kinds["&"])


class SequenceDB(RewriteDatabase):
    """Graph rewriters (and databases) applied in position order."""

    def _build(self, query: Query) -> SequentialRewriter:
        steps = []
        for entry, item in self._selected(query):
            item.name = item.name or entry.name
            steps.append(item)
        return SequentialRewriter(*steps, name=self.name)


class EquilibriumDB(RewriteDatabase):
    """Node and graph rewriters applied together until none applies."""

    def __init__(self, name: str | None = None, max_use_ratio: float = 10.0):
        super().__init__(name)
        self.max_use_ratio = max_use_ratio

    def _check(self, name: str, item: Any) -> None:
        if not isinstance(item, (NodeRewriter, GraphRewriter)):
            raise TypeError(f"register: {name!r} must be a node or graph rewriter, got {item!r}")

    def register(
        self,
        name: str,
        item: Any,
        *tags: str,
        position: float | str = "last",
        overwrite_existing: bool = False,
    ) -> None:
        super().register(name, item, *tags, position=position, overwrite_existing=overwrite_existing)
        if getattr(item, "name", None) is None:
            item.name = name

    def _build(self, query: Query) -> EquilibriumRewriter:
        rewriters = [item for _, item in self._selected(query)]
        return EquilibriumRewriter(rewriters, max_use_ratio=self.max_use_ratio, name=self.name)


def _default_optdb() -> SequenceDB:
    """merge1, the three phases filled from the rule catalogue by tags, elemwise fusion, merge2, the
    destroy handler (49.5), in-place marks (75), merge3."""
    db = SequenceDB("optdb")
    db.register("merge1", MergeRewriter(), "fast_run", "fast_compile", "merge", position=0)
    phases = {name: EquilibriumDB(name) for name in PHASES}
    phases["canonicalize"].register("constant_folding", constant_folding, "fast_run", "fast_compile")
    phases["specialize"].register("constant_folding", constant_folding, "fast_run")
    phases["canonicalize"].register("useless_composite", useless_composite, "fast_run", "fast_compile")
    phases["specialize"].register("useless_composite", useless_composite, "fast_run")
    for r in catalogue():
        if not r.phases:
            raise ValueError(f"catalogue rule {r.name} has no phase tag (one of {', '.join(PHASES)})")
        for phase in r.phases:  # a rule may serve several phases (add_zero: the zeros folding leaves too)
            phases[phase].register(r.name, KanrenRelationSub(r, name=r.name), *r.tags)
    db.register("canonicalize", phases["canonicalize"], "fast_run", "fast_compile", position=1)
    # fast_compile selects the stabilize phase too, and in it the rules tagged fast_compile (logsumexp)
    db.register("stabilize", phases["stabilize"], "fast_run", "fast_compile", position=1.5)
    db.register("specialize", phases["specialize"], "fast_run", position=2)
    # Fusion and merge2 share position 49; fusion, registered first, runs first, so merge2 merges
    # the Composites that compute the same thing.
    db.register("elemwise_fusion", FusionRewriter(), "fast_run", "fusion", position=49)
    db.register("merge2", MergeRewriter(), "fast_run", "merge", position=49)
    db.register("add_destroy_handler", AddDestroyHandler(), "fast_run", "inplace", position=49.5)
    db.register("inplace_marks", InplaceRewriter(), "fast_run", "inplace", position=75)
    db.register("merge3", MergeRewriter(), "fast_run", "merge", position=100)
    return db


optdb = _default_optdb()

MODES: dict[str, Query] = {
    "fast_compile": Query(include=["fast_compile"]),
    "fast_run": Query(include=["fast_run"]),
    "o1": Query(include=["fast_compile"]),
    "o2": Query(include=["fast_compile", "stabilize"]),
    "o3": Query(include=["fast_compile", "stabilize", "specialize"]),
    "o4": Query(include=["fast_run"]),
}


def mode_query(mode: str | Query) -> Query:
    """The query of a mode name (fast_compile, fast_run, o1..o4), or a Query itself."""
    if isinstance(mode, Query):
        return mode
    try:
        return MODES[mode]
    except KeyError:
        raise ValueError(f"unknown mode {mode!r}; known modes: {', '.join(MODES)}") from None


def rewrite_graph(
    graph: Variable | Sequence[Variable] | FunctionGraph,
    include: Iterable[str] = ("canonicalize",),
    *,
    custom_rewrite: GraphRewriter | None = None,
    clone: bool = False,
    exclude: Iterable[str] | None = None,
    require: Iterable[str] | None = None,
    db: RewriteDatabase | None = None,
) -> Any:
    """Rewrite a graph with the `optdb` rewriters the tags select, then `custom_rewrite`.

    Returns what was given: a FunctionGraph, one variable, or a list of them.
    With `clone=False` a variable's graph is rewritten in place.
    """
    if isinstance(graph, FunctionGraph):
        fgraph = graph.clone() if clone else graph
    else:
        outputs = [graph] if isinstance(graph, Variable) else list(graph)
        fgraph = FunctionGraph(outputs=outputs, clone=clone)
    rewriter = (db or optdb).query(Query(include=include, exclude=exclude, require=require))
    rewriter.rewrite(fgraph)
    if custom_rewrite is not None:
        custom_rewrite.rewrite(fgraph)
    if isinstance(graph, FunctionGraph):
        return fgraph
    if isinstance(graph, Variable):
        return fgraph.outputs[0]
    return list(fgraph.outputs)
