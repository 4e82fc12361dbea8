"""The `relwrite` command (also `python -m relwrite`)."""

from __future__ import annotations

import argparse
import contextlib
import decimal
import importlib
import importlib.metadata
import importlib.util
import io
import os
import secrets
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from relwrite.command_text import json_text, unknown_choice
from relwrite.relations.runtime import RUN_DIRECTIONS


class CommandError(Exception):
    """Bad user input: reported as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, not usage text plus a traceback.

    With `expression=True` its one positional argument is an expression that
    may start with '-': argparse alone reads '-x' or '-(a + b)' as an unknown
    option.  Before parsing, the first argument that is neither one of the
    parser's options nor an option's value is taken as the expression and
    moved behind '--', so it is positional whatever its first character.
    Options are matched exactly (no abbreviations), so `--prof` is not
    mistaken for `--profile`.
    """

    def __init__(self, *args: Any, expression: bool = False, **kwargs: Any):
        self._expression = expression
        self._flags: set[str] = set()
        self._valued: set[str] = set()
        super().__init__(*args, allow_abbrev=not expression, **kwargs)

    def error(self, message: str):
        raise CommandError(message)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        (self._flags if action.nargs == 0 else self._valued).update(action.option_strings)
        return action

    def parse_known_args(self, args: Sequence[str] | None = None, namespace: Any = None):
        if self._expression and args is not None:
            args = self._expression_last(list(args))
        return super().parse_known_args(args, namespace)

    def _expression_last(self, args: list[str]) -> list[str]:
        i = 0
        while i < len(args):
            arg = args[i]
            if arg == "--" or not arg.startswith("-"):
                return args  # the expression is already positional
            if arg in self._valued:
                i += 2
            elif arg in self._flags or arg.partition("=")[0] in self._valued:
                i += 1
            else:  # the expression: it starts with '-'
                rest = args[i + 1 :]
                return args if "--" in rest else [*args[:i], *rest, "--", arg]
        return args


def _version() -> str:
    """The installed distribution's version, else (run from a source tree) the package's."""
    try:
        return importlib.metadata.version("relwrite")
    except importlib.metadata.PackageNotFoundError:
        import relwrite

        return relwrite.__version__


def _output_path(text: str) -> str:
    """An argparse type for a path the command writes: not empty (an empty path names no file)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a path to write, got {text!r}")
    return text


def _typed_names(specs: Sequence[str]) -> dict[str, str]:
    """`x:vector`, `A:matrix:float32` -> {name: type spec}."""
    types: dict[str, str] = {}
    for spec in specs:
        name, sep, type_spec = spec.partition(":")
        if not sep or not name.isidentifier() or not type_spec:
            raise CommandError(f"--var {spec!r}: expected NAME:TYPE, e.g. x:vector or A:matrix:float32")
        if name in types:
            raise CommandError(f"--var {name!r} is given twice")
        types[name] = type_spec
    return types


def _best_time(fn, *args, repeat: int = 7) -> float:
    """The best of `repeat` wall-clock times of `fn(*args)`, in seconds."""
    import time

    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn(*args)
        best = min(best, time.perf_counter() - start)
    return best


def _demo(args: argparse.Namespace) -> int:
    from relwrite import FunctionGraph, Mode, add, dprint, float64, function, mul, pprint, true_div, vector
    from relwrite.backends.c import c_available
    from relwrite.engine import Query, optdb, print_profile

    x, y, z = float64("x"), float64("y"), float64("z")
    expr = add(z, mul(true_div(mul(y, x), y), true_div(z, x)))
    fgraph = FunctionGraph([x, y, z], [expr])
    print("1. The seed expression z + ((y * x) / y) * (z / x):\n")
    print("pprint:  ", pprint(expr))
    print("graph:   ", fgraph)
    print("dprint:")
    dprint(expr)

    pipeline = Query(include=["canonicalize", "stabilize", "specialize", "unsafe"])
    profile = optdb.query(pipeline).rewrite(fgraph)
    print("\n2. Rewritten by the rule catalogue (canonicalize, stabilize, specialize, with unsafe rules):")
    print("graph:   ", fgraph)
    print("pprint:  ", pprint(fgraph.outputs[0]))
    print("rules applied:", ", ".join(f"{name} x{count}" for name, count in _applied(profile).items()))
    if args.profile:
        print()
        print_profile(profile)

    values = {"x": 2.0, "y": 3.0, "z": 5.0}
    before = function([x, y, z], expr, mode="fast_compile")(**values)
    after = function(fgraph.inputs, fgraph.outputs[0], mode="fast_compile")(*values.values())
    inputs = ", ".join(f"{k}={v}" for k, v in values.items())
    before, after = np.asarray(before).item(), np.asarray(after).item()
    print(f"\nevaluated at {inputs}: before {before}, after {after}")

    n = 1_000_000
    xv, yv, zv = vector("x"), vector("y"), vector("z")
    big = add(zv, mul(true_div(mul(yv, xv), yv), true_div(zv, xv)))
    compiled = function([xv, yv, zv], big, mode=Mode("c", Query(include=["fast_run", "unsafe"])))
    rng = np.random.default_rng(0)
    a, b, c = (rng.uniform(0.5, 2.0, n) for _ in range(3))

    def plain_numpy(a, b, c):
        return c + ((b * a) / b) * (c / a)

    assert np.allclose(compiled(a, b, c), plain_numpy(a, b, c))
    linker = "compiled C" if c_available() else "NumPy (no working C compiler)"
    ours, theirs = _best_time(compiled, a, b, c), _best_time(plain_numpy, a, b, c)
    print(
        f"\n3. The same expression on vectors of {n:,} float64, compiled (mode fast_run + unsafe, {linker}):"
    )
    print("graph:   ", compiled.fgraph)
    print(
        f"time:     relwrite {ours * 1e3:.2f} ms, plain numpy {theirs * 1e3:.2f} ms: "
        f"{theirs / ours:.1f}x faster"
    )
    return 0


def _applied(profile) -> dict[str, int]:
    """Rule -> times applied, over every equilibrium phase of a sequence profile."""
    counts: dict[str, int] = {}
    for *_, sub in profile.steps:
        for name, stats in getattr(sub, "rules", {}).items():
            if stats.applied:
                counts[name] = counts.get(name, 0) + stats.applied
    return counts


def _known_tags(tags: Sequence[str], option: str) -> list[str]:
    """`tags`, each checked to select something in optdb: a tag or the name of one of its rewriters."""
    from relwrite.engine import optdb
    from relwrite.relations import OPT_IN_TAGS

    known_tags = optdb.nested_tags() | OPT_IN_TAGS
    known_names = optdb.nested_names()
    for tag in tags:
        if tag not in known_tags and tag not in known_names:
            choices = [("known tags", known_tags), ("or a rewriter's name", known_names - known_tags)]
            raise CommandError(unknown_choice(f"unknown tag {tag!r} for {option}", tag, choices))
    return list(tags)


def _parse_expression(text: str, var_specs: Sequence[str]) -> Any:
    """The graph of `text` with the `--var NAME:TYPE` types; CommandError naming what is wrong."""
    return _parse_expressions([text], var_specs)[0]


def _parse_expressions(texts: Sequence[str], var_specs: Sequence[str]) -> list[Any]:
    """The graphs of `texts`, all with the `--var NAME:TYPE` types, each of which must name a
    variable of at least one of them; CommandError naming what is wrong."""
    from relwrite import parse
    from relwrite.graph.basic import graph_inputs
    from relwrite.graph_files import GraphFileError, is_graph_spec, load_graph

    types = _typed_names(var_specs)
    outputs = []
    for text in texts:
        if is_graph_spec(text):
            try:
                outputs.append(load_graph(text))
            except GraphFileError as exc:
                raise CommandError(str(exc)) from None
            continue
        try:
            outputs.append(parse(text, types))
        except SyntaxError as exc:
            where = f" at column {exc.offset}" if exc.offset else ""
            raise CommandError(f"cannot parse {text!r}: {exc.msg}{where}") from None
        except (ValueError, TypeError) as exc:
            raise CommandError(str(exc).splitlines()[0]) from None
    used = {v.name for v in graph_inputs(outputs)}
    for name in types:
        if name not in used:
            if len(texts) == 1:
                missing = f"the expression {texts[0]!r} has no variable {name!r}"
            else:
                missing = f"neither {' nor '.join(map(repr, texts))} has a variable {name!r}"
            raise CommandError(f"--var {name!r}: {missing}")
    return outputs


def _explore(args: argparse.Namespace) -> int:
    from relwrite.explore_command import ExploreError, run

    try:
        return run(args, _parse_expressions)
    except ExploreError as exc:
        raise CommandError(str(exc)) from None


def _improve(args: argparse.Namespace) -> int:
    from relwrite.improve_command import ImproveError, run

    try:
        return run(args)
    except ImproveError as exc:
        raise CommandError(str(exc)) from None


def _rewrite(args: argparse.Namespace) -> int:
    from relwrite import FunctionGraph, pprint
    from relwrite.engine import mode_query, optdb, print_profile
    from relwrite.graph.basic import Constant, graph_inputs
    from relwrite.report import RewriteLog, rewrite_report, write_report

    try:
        query = mode_query(args.mode)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    query = query.including(*_known_tags(args.include, "--include"))
    query = query.excluding(*_known_tags(args.exclude, "--exclude"))
    both = sorted(set(args.include) & set(args.exclude))
    if both:
        raise CommandError(f"tag {both[0]!r} is given to both --include and --exclude")
    output = _parse_expression(args.expr, args.var)
    inputs = sorted((v for v in graph_inputs([output]) if not isinstance(v, Constant)), key=lambda v: v.name)
    values = _eval_values(args.eval, inputs)
    before_text = pprint(output)
    before_values = _evaluated(inputs, output, values) if values is not None else None
    log = RewriteLog() if args.report else None
    fgraph = FunctionGraph(outputs=[output], clone=True, features=[log] if log is not None else ())
    profile = optdb.query(query).rewrite(fgraph)
    after = fgraph.outputs[0]
    applied = _applied(profile)
    if values is not None:  # the rewritten graph reads copies of the inputs: matched by name
        copies = {v.name: v for v in fgraph.inputs}
        after_values = _evaluated([copies[v.name] for v in inputs], after, values)
    c_source = _c_source(fgraph) if args.show_c else None
    if log is not None:
        profile_text = io.StringIO()
        print_profile(profile, file=profile_text)
        evaluated = (before_values, after_values) if values is not None else None
        page = rewrite_report(
            args.expr, output, after, log.steps, profile_text.getvalue(), args.mode, evaluated
        )
        try:
            write_report(args.report, page)
        except OSError as exc:
            raise CommandError(str(exc)) from None
    if args.json:
        document: dict[str, Any] = {"input": before_text, "output": pprint(after), "mode": args.mode}
        document["rules"] = applied
        if values is not None:
            document["eval"] = {"before": before_values.tolist(), "after": after_values.tolist()}
        if c_source is not None:
            document["c"] = c_source
        if args.profile:
            profile_lines = io.StringIO()
            print_profile(profile, file=profile_lines)
            document["profile"] = profile_lines.getvalue().splitlines()
        print(json_text(document))
        return 0
    print("before:", before_text)
    print("after: ", pprint(after))
    print("rules applied:", ", ".join(f"{name} x{count}" for name, count in applied.items()) or "none")
    if values is not None:
        print("evaluated before:", np.array2string(before_values, separator=", "))
        print("evaluated after: ", np.array2string(after_values, separator=", "))
    if c_source is not None:
        print()
        print(c_source or "/* the result runs no generated C */")
    if args.profile:
        print()
        print_profile(profile)
    return 0


def _eval_values(specs: Sequence[str], inputs: Sequence[Any]) -> list[np.ndarray] | None:
    """The `--eval NAME=V1,V2,...` values, one array per input of the expression (None: no --eval)."""
    if not specs:
        return None
    by_name = {v.name: v for v in inputs}
    given: dict[str, np.ndarray] = {}
    for spec in specs:
        name, sep, text = spec.partition("=")
        if not sep or name not in by_name:
            known = ", ".join(by_name) or "none"
            raise CommandError(
                f"--eval {spec!r}: expected NAME=VALUES for a variable of the expression: {known}"
            )
        var = by_name[name]
        if var.ndim > 1:
            raise CommandError(f"--eval {name}: {var.type} values cannot be written on the command line")
        tokens = text.split(",")
        if not var.ndim and len(tokens) != 1:
            raise CommandError(f"--eval {name}: {text!r} is not a number")
        dtype = var.type.numpy_dtype
        try:
            numbers = [_value_of(token.strip(), dtype, name) for token in tokens]
        except ValueError:
            expected = "a number" if not var.ndim else "a comma-separated list of numbers"
            raise CommandError(f"--eval {name}: {text!r} is not {expected}") from None
        array = np.array(numbers if var.ndim else numbers[0], dtype=dtype)
        error = var.type.value_error(array)
        if error is not None:
            raise CommandError(f"--eval {name}: {error}")
        given[name] = array
    missing = [name for name in by_name if name not in given]
    if missing:
        raise CommandError(f"--eval: no values for {', '.join(missing)}")
    return [given[v.name] for v in inputs]


_BOOLS = {"0": False, "1": True, "false": False, "true": True}


def _value_of(token: str, dtype: np.dtype, name: str) -> bool | int | float:
    """The number `token` for an input `name` of `dtype`, exactly: ValueError when it is not a number,
    CommandError when it is one the dtype cannot hold (out of its range, or not whole for an integer).

    Integers are read exactly (`1e3` is 1000, `1.5` is refused, never truncated);
    a finite float too large for the dtype is refused rather than made infinite
    (`inf` and `nan` are taken as written).
    """
    if dtype.kind == "b":
        if token.lower() not in _BOOLS:
            raise CommandError(f"--eval {name}: {token!r} is not a bool (0, 1, true or false)")
        return _BOOLS[token.lower()]
    try:
        exact = decimal.Decimal(token)
    except decimal.InvalidOperation:
        raise ValueError(token) from None
    if dtype.kind in "iu":
        if not exact.is_finite() or exact != exact.to_integral_value():
            raise CommandError(f"--eval {name}: {token} is not a whole number ({name} is {dtype.name})")
        info = np.iinfo(dtype)
        if not info.min <= exact <= info.max:
            raise CommandError(
                f"--eval {name}: {token} is out of range for {dtype.name} ({info.min} to {info.max})"
            )
        return int(exact)
    value = float(token)
    with np.errstate(over="ignore"):  # the overflow is what is being asked about
        held = np.asarray(value).astype(dtype)
    if exact.is_finite() and not np.isfinite(held):
        largest = str(np.finfo(dtype).max)  # in the dtype's own shortest digits
        raise CommandError(
            f"--eval {name}: {token} is out of range for {dtype.name} (largest finite magnitude {largest})"
        )
    return value


def _evaluated(inputs: Sequence[Any], output: Any, values: Sequence[np.ndarray]) -> np.ndarray:
    from relwrite.backends.numpy import numpy_function

    with np.errstate(all="ignore"):
        return np.asarray(numpy_function(list(inputs), output)(*values))


def _c_source(fgraph: Any) -> str:
    """The C the compiled result runs: every module's source (generated here, no compiler needed)."""
    from relwrite.backends.c import generated_sources

    modules = generated_sources(fgraph).items()
    return "\n\n".join(f"/* ---- the {name} module ---- */\n{source.strip()}" for name, source in modules)


def _rules(args: argparse.Namespace) -> int:
    from relwrite.relations import OPT_IN_TAGS, PHASES, catalogue
    from relwrite.relations.docs import catalogue_markdown, describe

    if args.markdown:
        if args.tag or args.name:
            raise CommandError("--markdown prints the whole catalogue; leave out --tag and --name")
        sys.stdout.write(catalogue_markdown())
        return 0
    rules = catalogue()
    known = set().union(PHASES, OPT_IN_TAGS, *(r.tags for r in rules))
    for tag in args.tag:
        if tag not in known:
            raise CommandError(unknown_choice(f"unknown tag {tag!r}", tag, [("known tags", known)]))
    chosen = [r for r in rules if all(tag in r.tags for tag in args.tag) and (args.name or "") in r.name]
    if args.json:
        document = [
            {
                "name": r.name,
                "tags": sorted(r.tags),
                "semantics": r.semantics,
                "directions": describe(r).directions,
                "backward": r.backward,
                "assumptions": [str(a) for a in r.assumptions],
                "examples": list(r.examples),
                "doc": r.doc,
            }
            for r in chosen
        ]
        print(json_text(document))
        return 0
    for r in chosen:
        d = describe(r)
        print(r.name)
        print(f"  tags:        {d.tags}")
        print(f"  semantics:   {d.semantics}")
        print(f"  directions:  {d.directions}")
        print(f"  assumptions: {d.assumptions}")
        print(f"  example:     {d.example_text}")
        print()
    filters = [f"tag {tag}" for tag in args.tag] + ([f"name containing {args.name!r}"] if args.name else [])
    if filters:
        print(f"{len(chosen)} of {len(rules)} rules ({', '.join(filters)})")
    else:
        print(f"{len(rules)} rules")
    return 0


def _load_module(spec: str) -> ModuleType:
    """An importable module name, or the path of a .py file."""
    path = Path(spec)
    from_file = spec.endswith(".py") or path.is_file()
    if from_file and not path.is_file():
        raise CommandError(f"no such file: {spec}")
    try:
        return _exec_file(path) if from_file else importlib.import_module(spec)
    except ModuleNotFoundError as exc:
        raise CommandError(f"cannot import module {spec!r}: {exc}") from None
    except Exception as exc:
        message = str(exc).splitlines()[0] if str(exc) else ""
        raise CommandError(f"importing {spec!r} failed: {type(exc).__name__}: {message}") from None


def _exec_file(path: Path) -> ModuleType:
    module_spec = importlib.util.spec_from_file_location(f"_relwrite_check_{path.stem}", path)
    if module_spec is None or module_spec.loader is None:
        raise ImportError(f"cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_spec.name] = module  # dataclasses and pickling look modules up there
    try:
        module_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_spec.name]
        raise
    return module


def _module_relations(module: ModuleType, spec: str) -> list[tuple[str, Any]]:
    """(name, relation) for the module-level Rule objects, then the entries of its RELATIONS list."""
    from relwrite.relations import Rule

    found: dict[int, tuple[str, Any]] = {}
    for value in vars(module).values():
        if isinstance(value, Rule):
            found.setdefault(id(value), (value.name, value))
    listed = getattr(module, "RELATIONS", ())
    if not isinstance(listed, (list, tuple)):
        raise CommandError(f"{spec}: RELATIONS must be a list of relations, got {type(listed).__name__}")
    for item in listed:
        if not callable(item):
            raise CommandError(f"{spec}: RELATIONS holds {item!r}, not a relation")
        name = item.name if isinstance(item, Rule) else getattr(item, "__name__", repr(item))
        found.setdefault(id(item), (name, item))
    if not found:
        raise CommandError(f"no rules found in {spec}: define module-level Rule objects or a RELATIONS list")
    return list(found.values())


def _indented(text: str, prefix: str) -> str:
    return "\n".join(prefix + line for line in text.splitlines() or [""])


def _check(args: argparse.Namespace) -> int:
    from relwrite.progress import Progress
    from relwrite.relations import catalogue

    try:
        from relwrite.testing.soundness import check_relation, hypothesis_files_in_cache
    except ModuleNotFoundError as exc:
        if exc.name != "hypothesis":
            raise
        raise CommandError(str(exc)) from None

    if args.max_examples is not None and args.max_examples < 1:
        raise CommandError(f"--max-examples must be at least 1, got {args.max_examples}")
    if args.module is None:
        source = "the catalogue"
        relations = [(r.name, r) for r in catalogue()]
    else:
        source = args.module
        relations = _module_relations(_load_module(args.module), args.module)
    if args.rule is not None:
        relations = [(name, rel) for name, rel in relations if name == args.rule]
        if not relations:
            raise CommandError(f"no rule named {args.rule!r} in {source}")
    seed = secrets.randbelow(2**32) if args.seed is None else args.seed
    options: dict[str, Any] = {"seed": seed}
    if args.max_examples is not None:
        options["max_examples"] = args.max_examples
    rules = f"{len(relations)} rule{'s' if len(relations) != 1 else ''}"
    if not args.json:
        print(f"checking {rules} of {source} (seed {seed})", flush=True)
    width = max(len(name) for name, _ in relations)
    failed, results = 0, []
    with hypothesis_files_in_cache(), Progress(len(relations), "checking", unit="rule") as bar:
        for done, (name, rel) in enumerate(relations):
            bar.update(done, rule=name)
            outcome, message, seconds = _check_one(check_relation, name, rel, options)
            failed += outcome == "FAIL"
            results.append(
                {"rule": name, "outcome": outcome, "seconds": round(seconds, 3), "message": message}
            )
            if args.json:
                continue
            print(f"  {name:<{width}}  {outcome}  {seconds:7.2f} s", flush=True)
            if message:
                print(_indented(message, "      "), flush=True)
    if args.json:
        document = {"source": source, "seed": seed, "passed": len(relations) - failed, "failed": failed}
        print(json_text({**document, "rules": results}))
        return 1 if failed else 0
    reproduce = f"; to reproduce, add --seed {seed}" if failed and args.seed is None else ""
    print(f"{len(relations) - failed} passed, {failed} failed{reproduce}")
    return 1 if failed else 0


def _check_one(
    check_relation: Callable, name: str, rel: Any, options: dict[str, Any]
) -> tuple[str, str, float]:
    """PASS or FAIL, the report's notes (or the counterexample, or the error a check raised), the time.

    What the check prints (hypothesis's reproduction hints, a relation's own
    prints) is kept off the progress lines and shown only with a failure.
    """
    printed = io.StringIO()
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(printed):
            report = check_relation(rel, **options)
    except AssertionError as exc:
        outcome, message = "FAIL", str(exc)
    except Exception as exc:
        outcome, message = "FAIL", f"the check raised {type(exc).__name__}: {exc}"
    else:
        notes = (note.removeprefix(f"{name}: ") for note in getattr(report, "notes", ()))
        outcome, message = "PASS", "\n".join(f"note: {note}" for note in notes)
    seconds = time.perf_counter() - start
    if outcome == "FAIL" and printed.getvalue().strip():
        message += "\nprinted during the check:\n" + printed.getvalue().rstrip()
    return outcome, message, seconds


def _expression_arguments(command: argparse.ArgumentParser, examples: str) -> None:
    """The expression argument and its `--var NAME:TYPE` options, as every expression command takes them."""
    command.add_argument(
        "expr",
        help=f"the expression, e.g. {examples}, or FILE.py:NAME (a graph the file builds, PyTensor's too)",
    )
    command.add_argument(
        "--var",
        action="append",
        default=[],
        metavar="NAME:TYPE",
        help="type a name (default: float64 scalar)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="relwrite", description="Relational rewriting of array-expression graphs.")
    parser.add_argument("--version", action="version", version=f"relwrite {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    demo = commands.add_parser("demo", help="build, print, rewrite, compile and time the seed expression")
    demo.add_argument("--profile", action="store_true", help="print the rewriting profile")
    demo.set_defaults(run=_demo)

    rewrite = commands.add_parser(
        "rewrite", help="rewrite an expression with a mode's pipeline", expression=True
    )
    _expression_arguments(rewrite, "'exp(log(x)) * y / y' or '-x * y'")
    rewrite.add_argument("--mode", default="fast_run", help="fast_run (default), fast_compile, o1..o4")
    rewrite.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="TAG",
        help="add the rewrites with TAG (a tag or a rewriter's name, e.g. unsafe) to the mode's",
    )
    rewrite.add_argument(
        "--exclude", action="append", default=[], metavar="TAG", help="leave out the rewrites with TAG"
    )
    rewrite.add_argument("--profile", action="store_true", help="print the rewriting profile")
    rewrite.add_argument(
        "--eval",
        action="append",
        default=[],
        metavar="NAME=VALUES",
        help="evaluate before and after rewriting with these values (x=1.5 or x=1,2,3), one per variable",
    )
    rewrite.add_argument("--show-c", action="store_true", help="print the generated C of the result")
    rewrite.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    rewrite.add_argument(
        "--report",
        type=_output_path,
        metavar="FILE",
        help="write a self-contained HTML page of the rewrite (pictures, rules, profile)",
    )
    rewrite.set_defaults(run=_rewrite)

    explore = commands.add_parser(
        "explore",
        help="list equivalent forms of an expression (rules run both ways), or prove two equal",
        expression=True,
    )
    _expression_arguments(explore, "'log(1 + exp(x))' or 'A @ (x + y)'")
    explore.add_argument("-n", type=int, metavar="N", help="how many forms to print (default 10)")
    explore.add_argument(
        "--cost", choices=("nodes", "flops", "depth", "accuracy"), help="order forms by (default nodes)"
    )
    explore.add_argument("--direction", default="both", choices=RUN_DIRECTIONS, help="run the rules")
    explore.add_argument(
        "--include", action="append", default=[], metavar="TAG", help="add opt-in rules (e.g. accuracy)"
    )
    explore.add_argument(
        "--safe-only",
        action="store_true",
        help="leave out the rules tagged unsafe (equal only where values are finite and assumptions hold)",
    )
    explore.add_argument(
        "--where",
        metavar="PRECONDITION",
        help="with --cost accuracy: sample the inputs where this holds, e.g. '0 < x < y and x != 1'",
    )
    explore.add_argument("--prove", metavar="OTHER", help="explain why EXPR equals OTHER, with assumptions")
    explore.add_argument("--limit-nodes", type=int, default=10_000, metavar="N", help="e-node budget")
    explore.add_argument("--limit-iterations", type=int, default=30, metavar="N", help="iteration budget")
    explore.add_argument(
        "--limit-seconds",
        type=float,
        default=5.0,
        metavar="S",
        help="time budget ('inf': none, so the outcome depends on the work budgets alone)",
    )
    explore.add_argument("--json", action="store_true", help="print machine-readable JSON")
    explore.add_argument(
        "--dot", type=_output_path, metavar="DIR", help="write pictures of the forms and the e-graph to DIR"
    )
    explore.add_argument(
        "--report",
        type=_output_path,
        metavar="FILE",
        help="write a self-contained HTML page: forms, derivations, accuracy plot (with --prove: the proof)",
    )
    explore.set_defaults(run=_explore)

    improve = commands.add_parser(
        "improve", help="the most accurate forms of FPBench benchmarks (FPCore files), as Herbie finds them"
    )
    improve.add_argument(
        "files",
        nargs="+",
        metavar="FILE.fpcore",
        help="FPCore files (every FPCore in each), or FILE.py:NAME (a scalar graph a Python file builds)",
    )
    improve.add_argument("--jobs", type=int, default=1, metavar="N", help="benchmarks run in N processes")
    improve.add_argument(
        "--limit-nodes", type=int, default=10_000, metavar="N", help="e-node budget per benchmark"
    )
    improve.add_argument(
        "--limit-iterations", type=int, default=30, metavar="N", help="iteration budget per benchmark"
    )
    improve.add_argument(
        "--limit-seconds",
        type=float,
        default=5.0,
        metavar="S",
        help="time budget per benchmark ('inf': none, so the outcome depends on the work budgets alone)",
    )
    improve.add_argument(
        "--out", type=_output_path, metavar="DIR", help="write the improved benchmarks to DIR (see --format)"
    )
    improve.add_argument(
        "--format",
        metavar="LIST",
        help="what --out writes, comma-separated: fpcore (improved.fpcore, the default), python, c",
    )
    improve.add_argument(
        "--report",
        type=_output_path,
        metavar="DIR",
        help="write an HTML page per benchmark (error plots, derivation, assumptions) and index.html",
    )
    improve.add_argument(
        "--no-series",
        dest="series",
        action="store_false",
        help="only forms equal to the input (no truncated series, which are approximations)",
    )
    improve.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    improve.set_defaults(run=_improve)

    rules = commands.add_parser("rules", help="print the rule catalogue")
    rules.add_argument("--tag", action="append", default=[], help="only rules with TAG (repeatable)")
    rules.add_argument("--name", metavar="SUBSTRING", help="only rules whose name contains SUBSTRING")
    rules.add_argument("--markdown", action="store_true", help="print the catalogue page docs/catalogue.md")
    rules.add_argument("--json", action="store_true", help="print the chosen rules as one JSON list")
    rules.set_defaults(run=_rules)

    check = commands.add_parser("check", help="run the soundness checks of the catalogue or of a module")
    check.add_argument(
        "module",
        nargs="?",
        metavar="MODULE",
        help="a module name or .py file with Rule objects or a RELATIONS list (default: the catalogue)",
    )
    check.add_argument("--rule", metavar="NAME", help="check only the rule called NAME")
    check.add_argument("--max-examples", type=int, metavar="N", help="examples per direction")
    check.add_argument(
        "--seed", type=int, metavar="N", help="start hypothesis from seed N, to reproduce a counterexample"
    )
    check.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    check.set_defaults(run=_check)
    return parser


def _check_environment() -> None:
    """The `RELWRITE_*` settings (docs/command-line.md), each checked before any command runs."""
    from relwrite.backends.c.compiler import environment_problems

    problems = environment_problems()
    if problems:
        raise CommandError("; ".join(problems))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (2: bad input, 130: interrupted)."""
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # --help and --version print, then exit
            return int(exc.code or 0)
        _check_environment()
        return args.run(args)
    except CommandError as exc:
        print(f"relwrite: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: what was running cleaned up on the way out; no traceback
        print("relwrite: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`relwrite rules | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
