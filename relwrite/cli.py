"""The `relwrite` command (also `python -m relwrite`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import numpy as np


class CommandError(Exception):
    """Bad user input: reported as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, not usage text plus a traceback."""

    def error(self, message: str):
        raise CommandError(message)


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


def _demo(args: argparse.Namespace) -> int:
    from relwrite import FunctionGraph, add, dprint, float64, function, mul, pprint, true_div
    from relwrite.engine import EquilibriumRewriter, PatternSub, print_profile

    x, y, z = float64("x"), float64("y"), float64("z")
    expr = add(z, mul(true_div(mul(y, x), y), true_div(z, x)))
    fgraph = FunctionGraph([x, y, z], [expr])
    print("The seed expression z + ((y * x) / y) * (z / x):\n")
    print("pprint:  ", pprint(expr))
    print("graph:   ", fgraph)
    print("dprint:")
    dprint(expr)

    simplify = EquilibriumRewriter(
        [
            PatternSub((true_div, (mul, "a", "b"), "b"), "a", name="mul_div_cancel_right"),
            PatternSub((true_div, (mul, "a", "b"), "a"), "b", name="mul_div_cancel_left"),
        ],
        name="simplify",
    )
    profile = simplify.rewrite(fgraph)
    print("\nrewritten with (a * b) / b -> a and (b * a) / b -> a, as one equilibrium run:")
    print("graph:   ", fgraph)
    print("pprint:  ", pprint(fgraph.outputs[0]))
    print()
    print_profile(profile)

    values = {"x": 2.0, "y": 3.0, "z": 5.0}
    before = function([x, y, z], expr)(**values)
    after = function(fgraph.inputs, fgraph.outputs[0])(*values.values())
    inputs = ", ".join(f"{k}={v}" for k, v in values.items())
    before, after = np.asarray(before).item(), np.asarray(after).item()
    print(f"\nevaluated with NumPy at {inputs}: before {before}, after {after}")
    return 0


def _rewrite(args: argparse.Namespace) -> int:
    from relwrite import FunctionGraph, parse, pprint
    from relwrite.engine import Query, mode_query, optdb, print_profile

    types = _typed_names(args.var)
    try:
        output = parse(args.expr, types)
    except SyntaxError as exc:
        where = f" at column {exc.offset}" if exc.offset else ""
        raise CommandError(f"cannot parse {args.expr!r}: {exc.msg}{where}") from None
    except (ValueError, TypeError) as exc:
        raise CommandError(str(exc).splitlines()[0]) from None
    if args.include:
        query = Query(include=args.include, exclude=args.exclude)
    else:
        try:
            query = mode_query(args.mode).excluding(*args.exclude)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
    fgraph = FunctionGraph(outputs=[output], clone=False)
    print("before:", pprint(fgraph.outputs[0]))
    profile = optdb.query(query).rewrite(fgraph)
    print("after: ", pprint(fgraph.outputs[0]))
    if args.profile:
        print()
        print_profile(profile)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="relwrite", description="Relational rewriting of array-expression graphs.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    demo = commands.add_parser("demo", help="build, print, rewrite and evaluate the seed expression")
    demo.set_defaults(run=_demo)

    rewrite = commands.add_parser("rewrite", help="rewrite an expression with the default pipeline")
    rewrite.add_argument("expr", help="the expression, e.g. 'exp(log(x)) * y / y'")
    rewrite.add_argument(
        "--var",
        action="append",
        default=[],
        metavar="NAME:TYPE",
        help="type a name (default: float64 scalar)",
    )
    rewrite.add_argument("--mode", default="fast_run", help="fast_run (default), fast_compile, o1..o4")
    rewrite.add_argument("--include", action="append", default=[], metavar="TAG", help="rewrites with TAG")
    rewrite.add_argument("--exclude", action="append", default=[], metavar="TAG", help="leave out TAG")
    rewrite.add_argument("--profile", action="store_true", help="print the rewriting profile")
    rewrite.set_defaults(run=_rewrite)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        return args.run(args)
    except CommandError as exc:
        print(f"relwrite: error: {exc}", file=sys.stderr)
        return 2
