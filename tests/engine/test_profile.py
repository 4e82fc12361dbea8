"""Profiles and print_profile: what each graph rewriter reports, printed in one place."""

import io
import re
import warnings

from etuples import etuple
from kanren import eq, lall, var
from unification import unify

from relwrite import FunctionGraph, add, exp, float64, log, neg, sin
from relwrite.engine import (
    EquilibriumRewriter,
    KanrenRelationSub,
    MergeRewriter,
    PatternSub,
    SequentialRewriter,
    constant_folding,
    in2out,
    node_rewriter,
    print_profile,
)
from relwrite.graph.ops import Cast

EXP_LOG = PatternSub((exp, (log, "a")), "a", name="exp_log")
EXP_TO_NEG_NEG = PatternSub((exp, "a"), (neg, (neg, "a")), name="exp_to_neg_neg")
NEG_NEG = PatternSub((neg, (neg, "a")), "a", name="neg_neg")


def printed(profile):
    out = io.StringIO()
    print_profile(profile, file=out)
    return out.getvalue()


@node_rewriter([exp, log, sin], name="looks_at_three_ops")
def looks_at_three_ops(fgraph, node):
    return False


def equilibrium_run():
    x = float64("x")
    fgraph = FunctionGraph([x], [add(sin(exp(x)), exp(log(x)))])
    rewriter = EquilibriumRewriter(
        [EXP_LOG, EXP_TO_NEG_NEG, NEG_NEG, looks_at_three_ops], name="canon", order="in_to_out"
    )
    return fgraph, rewriter.rewrite(fgraph)


def test_equilibrium_profile_counts():
    fgraph, profile = equilibrium_run()
    assert repr(fgraph) == "FunctionGraph(add(sin(x), x))"
    # start: add, sin, exp, exp, log = 5; inputs first, exp(x) -> neg(neg(x)) grows it to 6 at once;
    # the end has add and sin
    assert (profile.nodes_start, profile.nodes_end, profile.nodes_max) == (5, 2, 6)
    assert profile.rules["exp_to_neg_neg"].applied == 1
    assert profile.rules["exp_to_neg_neg"].nodes_created == 2
    assert profile.rules["neg_neg"].applied == 1 and profile.rules["neg_neg"].nodes_created == 0
    assert profile.rules["exp_log"].applied == 1
    assert profile.rules["looks_at_three_ops"].applied == 0
    assert profile.rules["looks_at_three_ops"].attempts >= 1
    assert sum(sum(p.applied.values()) for p in profile.passes) == profile.applied == 3


def test_print_profile_of_an_equilibrium_run():
    _, profile = equilibrium_run()
    text = printed(profile)
    lines = text.splitlines()
    assert lines[0] == "EquilibriumRewriter  canon"
    assert re.fullmatch(rf"  time [0-9.]+s for {len(profile.passes)} passes", lines[1])
    assert lines[2] == "  nodes (start, end, max) 5 2 6"
    pass_lines = [line for line in lines if re.match(r"\s+\d+ - [0-9.]+s \d+ \(", line)]
    assert len(pass_lines) == len(profile.passes)
    assert "('exp_to_neg_neg', 1)" in pass_lines[0] and "('exp_log', 1)" in pass_lines[0]
    assert "5 nodes" in pass_lines[0]
    assert "time - times applied - nodes created - name:" in text
    for name, created in [("exp_to_neg_neg", 2), ("neg_neg", 0), ("exp_log", 0)]:
        assert re.search(rf"^  [0-9.]+s - 1 - {created} - {name}$", text, re.M), name
    assert re.search(r"^  [0-9.]+s - in 1 rewriters that were never applied:$", text, re.M)
    assert re.search(r"^    [0-9.]+s - looks_at_three_ops \(\d+ tries\)$", text, re.M)
    # tracking three ops, it is still one rule: listed once
    assert text.count("looks_at_three_ops") == 1


def test_print_profile_reports_errors_and_early_stops():
    @node_rewriter([sin], name="boom")
    def boom(fgraph, node):
        raise RuntimeError("nope")

    forward = PatternSub((exp, (log, "a")), "a", name="forward")
    backward = PatternSub((exp, "a"), (exp, (log, (exp, "a"))), name="backward")
    x = float64("x")
    fgraph = FunctionGraph([x], [sin(exp(x))])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        profile = EquilibriumRewriter([boom, forward, backward], max_use_ratio=2).rewrite(fgraph)
    text = printed(profile)
    assert "  stopped early: backward applied 5 times (max_use_ratio 2)" in text
    assert re.search(r"^  rewriters that raised: boom \(\d+x\)$", text, re.M)
    fgraph.check_integrity()


def test_print_profile_reports_relations_out_of_budget_and_answers_of_the_wrong_type():
    def spin(lhs, rhs):
        """Looks for a natural number equal to -1, inside kanren's conjunction: stopped by the clock."""
        n = var()

        def naturals(state):
            k = 0
            while True:
                yield unify(n, k, state)
                k += 1

        return lall(eq(lhs, etuple(exp, var())), naturals, eq(n, -1))

    spinning = KanrenRelationSub(spin, tracks=[exp], name="spinning", max_seconds=0.05)
    wrong_type = PatternSub((sin, "a"), (Cast("float32"), "a"), name="wrong_type")
    x = float64("x")
    fgraph = FunctionGraph([x], [add(sin(exp(x)), sin(neg(x)))])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        profile = EquilibriumRewriter([spinning, wrong_type]).rewrite(fgraph)
    text = printed(profile)
    assert re.search(r"^  relations stopped by their budget: spinning \(1x\)$", text, re.M)
    assert re.search(r"^  answers of the wrong type skipped: wrong_type \(2x\)$", text, re.M)


def test_print_profile_of_walk_and_merge():
    x = float64("x")
    fgraph = FunctionGraph([x], [add(exp(log(x)), sin(x), sin(x))])
    walk = in2out(EXP_LOG)
    assert printed(walk.rewrite(fgraph)).splitlines()[:2] == [
        "WalkingGraphRewriter  WalkingGraphRewriter(exp_log)",
        "  nodes (start, end, changed) (5, 3, 1)",
    ]
    merge_text = printed(MergeRewriter().rewrite(fgraph))
    assert merge_text.splitlines()[:2] == [
        "MergeRewriter",
        "  merged nodes 1, merged constants 0, rejected 0",
    ]


def test_sequence_profiles_nest_with_their_steps_indented():
    x = float64("x")
    fgraph = FunctionGraph([x], [add(sin(exp(x)), exp(log(x)), sin(exp(x)))])
    inner = SequentialRewriter(
        EquilibriumRewriter([EXP_LOG, constant_folding], name="canon"), in2out(NEG_NEG), name="inner"
    )
    outer = SequentialRewriter(MergeRewriter(), inner, name="outer")
    profile = outer.rewrite(fgraph)
    assert profile.nodes_before == 7 and profile.nodes_after == 3
    lines = printed(profile).splitlines()
    assert lines[0] == "SequentialRewriter  outer  time " + lines[0].split("time ")[1]
    assert lines[0].endswith("for 7/3 nodes before/after rewriting")

    def indent_of(prefix):
        (line,) = [line for line in lines if line.lstrip().startswith(prefix)]
        return len(line) - len(line.lstrip())

    assert indent_of("SequentialRewriter  outer") == 0
    assert indent_of("SequentialRewriter  inner") == 4
    assert indent_of("EquilibriumRewriter  canon") == 8
    assert indent_of("MergeRewriter") == 4
    assert re.search(r"^  [0-9.]+s - \('inner', 'SequentialRewriter', 1\)$", "\n".join(lines), re.M)
    assert re.search(r"^      [0-9.]+s - \('canon', 'EquilibriumRewriter', 0\)$", "\n".join(lines), re.M)


def test_print_profile_writes_to_stdout_by_default(capsys):
    _, profile = equilibrium_run()
    print_profile(profile, indent=2)
    assert capsys.readouterr().out.startswith("  EquilibriumRewriter  canon\n")
