"""Extraction: the cheapest tree by a cost, and distinct forms (up to AC) cheapest first."""

import math

from relwrite import constant, matrix, scalar, vector
from relwrite.engine.explore.costs import Depth, Flops, NodeCount
from relwrite.engine.explore.dot import egraph_dot
from relwrite.engine.explore.egraph import EGraph
from relwrite.engine.explore.extract import Trees, best_dag_tree, best_tree, enumerate_trees, ranked_trees
from relwrite.engine.explore.runner import Limits, Runner
from relwrite.graph import ops as o
from relwrite.graph.printing import pprint
from relwrite.relations import get_rule
from relwrite.relations.registry import rule

dot_assoc = rule(
    "dot_assoc", (o.dot, (o.dot, "A", "B"), "C"), (o.dot, "A", (o.dot, "B", "C")), tags=("explore",)
)
dot_distribute = rule(
    "dot_distribute",
    (o.dot, "A", (o.add, "x", "y")),
    (o.add, (o.dot, "A", "x"), (o.dot, "A", "y")),
    tags=("explore", "unsafe"),
)


def grown(expr, rules, direction="both"):
    g = EGraph()
    root = g.intern(expr)
    Runner(g, rules, direction, Limits(seconds=math.inf, rule_seconds=math.inf)).run([root])
    return g, root


def test_the_cheapest_tree_by_node_count():
    x = scalar("x")
    g, root = grown(o.log(1 + o.exp(x)), [get_rule("softplus")])
    trees = Trees(NodeCount())
    t = best_tree(g, root, trees)
    assert pprint(trees.graph(t)) == "softplus(x)"
    assert trees.cost[t] == 2


def test_flops_choose_the_cheap_association_of_a_matrix_chain():
    a, b = matrix("A", shape=(100, 100)), matrix("B", shape=(100, 100))
    x = vector("x", shape=(100,))
    g, root = grown(o.dot(o.dot(a, b), x), [dot_assoc], "forward")
    trees = Trees(Flops())
    t = best_tree(g, root, trees)
    assert pprint(trees.graph(t)) == "(A @ (B @ x))"  # 2 * 2e4 flops, not 2e6 + 2e4
    assert trees.cost[t] < 50_000
    x = matrix("x", shape=(100, 1000))  # now (A @ B) @ x is the cheap one
    g, root = grown(o.dot(a, o.dot(b, x)), [dot_assoc], "backward")
    trees = Trees(Flops())
    assert pprint(trees.graph(best_tree(g, root, trees))) == "((A @ B) @ x)"


def test_depth_prefers_balanced_forms():
    x = scalar("x")
    g, root = grown(o.log(1 + o.exp(x)), [get_rule("softplus"), get_rule("log1p")])
    trees = Trees(Depth())
    t = best_tree(g, root, trees)
    assert trees.cost[t] == 1


def test_forms_are_distinct_up_to_ac_and_cheapest_first():
    x, y, a = vector("x", shape=(4,)), vector("y", shape=(4,)), matrix("A", shape=(3, 4))
    g, root = grown(o.dot(a, x + y), [dot_distribute])
    trees = Trees(NodeCount())
    found = list(enumerate_trees(g, root, trees))
    assert [pprint(trees.graph(t)) for t in found] == ["(A @ (x + y))", "((A @ x) + (A @ y))"]
    costs = [trees.cost[t] for t in found]
    assert costs == sorted(costs)


def test_nested_and_flat_sums_are_one_form():
    xs = [scalar(f"x{k}") for k in range(3)]
    g = EGraph()
    root = g.intern(xs[0] + xs[1] + xs[2])
    nested = g.intern(o.add(xs[0], xs[1] + xs[2]), flatten=False)  # an e-node over the class of x1 + x2
    assert g.find(nested) != g.find(root)
    g.union(root, nested, "test")
    g.rebuild()
    assert len(g.nodes(root)) == 2
    trees = Trees(NodeCount())
    (form,) = enumerate_trees(g, root, trees)
    assert pprint(trees.graph(form)) == "(x0 + x1 + x2)"  # the flat one: fewer nodes


def test_enumeration_is_lazy_and_grows():
    x = scalar("x")
    g, root = grown(
        o.exp(x) * 2.0 + o.exp(x) * 3.0, [get_rule(n) for n in ("collect_terms", "sort_mul", "mul_one")]
    )
    trees = Trees(NodeCount())
    stream = enumerate_trees(g, root, trees, k=1)
    first = next(stream)
    assert trees.cost[first] == min(trees.cost[t] for t in [first, *stream])


def test_deep_classes_extract_without_recursion():
    x = scalar("x")
    e = x
    for k in range(5_000):
        e = o.exp(e) if k % 2 else o.neg(e)
    g = EGraph()
    root = g.intern(e)
    trees = Trees(NodeCount())
    t = best_tree(g, root, trees)
    assert trees.cost[t] == 5_001
    assert next(enumerate_trees(g, root, trees)) == t
    assert trees.graph(t).owner.op == o.exp


def test_the_egraph_picture_has_a_cluster_per_class():
    x = scalar("x")
    g, root = grown(o.log(1 + o.exp(x)), [get_rule("softplus")])
    text = egraph_dot(g, [root])
    assert text.startswith('digraph "egraph"')
    assert text.count("subgraph cluster_") == len(g.reachable([root]))
    assert 'label="softplus"' in text and "lhead=cluster_" in text


def test_a_dag_counts_a_shared_subterm_once():
    x = scalar("x")
    g = EGraph()
    root = g.intern(o.exp(x) * o.exp(x) + o.exp(x))
    trees = Trees(NodeCount())
    t = best_tree(g, root, trees)
    assert trees.cost[t] == 8 and trees.dag_cost(t) == 4  # x, exp(x), the product, the sum
    graph = trees.graph(t)
    exps = {v for v in graph.owner.inputs if v.owner.op == o.exp}
    exps |= {i for v in graph.owner.inputs if v.owner.op == o.mul for i in v.owner.inputs}
    assert len(exps) == 1  # one exp(x) node, used three times
    depth = Trees(Depth())
    assert depth.dag_cost(best_tree(g, root, depth)) == depth.cost[best_tree(g, root, depth)]


def test_a_shared_subterm_beats_an_unshared_one_of_equal_tree_cost():
    x = scalar("x")
    g = EGraph()
    unshared = g.intern(o.exp(x) * o.log(x))  # interned first: the tie-break by form would pick it
    shared = g.intern(o.exp(x) * o.exp(x))
    g.union(unshared, shared, "test")
    g.rebuild()
    for cost in (NodeCount(), Flops()):
        trees = Trees(cost)
        assert trees.cost[best_tree(g, unshared, trees)] == trees.cost[_tree_of(g, trees, shared)]
        t = best_dag_tree(g, unshared, trees)
        assert pprint(trees.graph(t)) == "(exp(x) * exp(x))"
        assert [pprint(trees.graph(t)) for t in ranked_trees(g, unshared, trees)] == [
            "(exp(x) * exp(x))",
            "(exp(x) * log(x))",
        ]


def _tree_of(g, trees, node):
    """The tree of a term node as interned (its exact term)."""
    leaf = g.leaf(node)
    if leaf is not None:
        return trees.of_leaf(leaf)
    children = tuple(_tree_of(g, trees, c) for c in g.exact_children(node))
    return trees.of_node(g.op(node), children, g.type(node))


def test_a_class_holding_a_constant_is_extracted_as_that_constant():
    x = scalar("x")
    for folded in (o.sqr(constant(1.0)), o.abs(constant(-1.0))):
        g = EGraph()
        root = g.intern(x * folded)
        trees = Trees(NodeCount())
        assert [pprint(trees.graph(t)) for t in enumerate_trees(g, root, trees)] == ["(1.0 * x)"]


def test_forms_differ_in_structure_not_in_neutral_or_folded_constant_factors():
    x, y = scalar("x"), scalar("y")
    g, root = grown(x * y * o.sqr(constant(1.0)), [get_rule("mul_one"), get_rule("fold_mul_constants")])
    trees = Trees(NodeCount())
    assert [pprint(trees.graph(t)) for t in enumerate_trees(g, root, trees)] == ["(x * y)"]
    g = EGraph()
    two = g.intern(o.mul(2.0, x))
    halves = g.intern(o.mul(constant(4.0), constant(0.5), x), flatten=False)
    g.union(two, halves, "test")
    g.rebuild()
    trees = Trees(NodeCount())
    assert [pprint(trees.graph(t)) for t in enumerate_trees(g, two, trees)] == ["(2.0 * x)"]
