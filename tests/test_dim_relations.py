"""Declared relations between dims (``tp.relate``), the polynomial algebra behind them, and their run-time check.

The algebra is checked against plain integer arithmetic (every size assignment in a small box), never
against numbers computed by the code under test; the plugin's own cases live in typecheck/.
"""

from __future__ import annotations

import itertools
import random
from typing import NewType

import pytest

import tensorplay as tp
from tensorplay import Tensor
from tensorplay.dimpoly import Poly, compare

A = NewType("A", int)
B = NewType("B", int)
Whole = NewType("Whole", int)
tp.relate(Whole, tp.dim(A) * B)
Sum = NewType("Sum", int)
tp.relate(Sum, tp.dim(A) + B + 1)


@tp.shapecheck
def split(x: Tensor[Whole], a: A, b: B) -> Tensor[A, B]:
    return x.reshape(a, b)


@tp.shapecheck
def join(x: Tensor[A], y: Tensor[B]) -> Tensor[Sum]:
    return tp.cat([x, y, tp.zeros(1)], 0)


def test_shapecheck_accepts_sizes_that_satisfy_the_relation() -> None:
    assert tuple(split(tp.randn(Whole(12)), A(3), B(4)).shape) == (3, 4)
    assert tuple(join(tp.randn(A(2)), tp.randn(B(5))).shape) == (8,)


def test_shapecheck_reports_sizes_that_break_the_relation() -> None:
    with pytest.raises(tp.ShapeError, match=r"split\(\): dim 'Whole' has size 12 .* declared relation Whole == "
                                             r".* gives 10 \(A=2, B=5\)"):
        split(tp.randn(Whole(12)), A(2), B(5))


def test_shapecheck_checks_the_relation_on_the_result_too() -> None:
    @tp.shapecheck
    def make(a: A, b: B) -> Tensor[Sum]:
        return tp.zeros(Sum(a + b))      # one short of A + B + 1
    with pytest.raises(tp.ShapeError, match=r"dim 'Sum' has size 5 \(bound by return value axis 0\).* gives 6"):
        make(A(2), B(3))


def test_shapecheck_skips_relations_whose_dims_are_not_bound() -> None:
    @tp.shapecheck
    def only_a(x: Tensor[A]) -> Tensor[A]:
        return x
    assert tuple(only_a(tp.randn(A(7))).shape) == (7,)


def test_relate_refuses_a_different_second_declaration_and_self_reference() -> None:
    with pytest.raises(ValueError, match="already declared"):
        tp.relate(Whole, tp.dim(A) + B)
    tp.relate(Whole, tp.dim(B) * A)       # the same relation again (a module imported twice) is fine
    with pytest.raises(ValueError, match="in terms of itself"):
        tp.relate(A, tp.dim(A) + 1)


def test_dim_arithmetic_refuses_what_is_not_a_dim() -> None:
    with pytest.raises(TypeError, match="expected a dim"):
        tp.dim("A")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="positive int divisor"):
        tp.dim(A) // 0
    with pytest.raises(TypeError, match="bool"):
        tp.dim(A) + True


# ---- the algebra, against integer arithmetic ----------------------------------------------------

NAMES = ("x", "y", "z")


def _random_poly(rng: random.Random) -> tuple[Poly, str]:
    """A random expression, as a Poly and as Python source over x, y, z."""
    def build(depth: int) -> tuple[Poly, str]:
        if depth == 0 or rng.random() < 0.3:
            if rng.random() < 0.4:
                n = rng.randint(-3, 4)
                return Poly.const(n), f"({n})"
            name = rng.choice(NAMES)
            return Poly.atom(name), name
        op = rng.choice("+-*/")
        left, ltext = build(depth - 1)
        if op == "/":
            k = rng.randint(1, 4)
            return left.floordiv(k), f"(({ltext}) // {k})"
        right, rtext = build(depth - 1)
        poly = left + right if op == "+" else left - right if op == "-" else left * right
        return poly, f"({ltext} {op} {rtext})"
    return build(3)


def test_polynomials_evaluate_like_python_integers() -> None:
    rng = random.Random(0)
    for _ in range(300):
        poly, text = _random_poly(rng)
        for values in itertools.product(range(1, 6), repeat=3):
            env = dict(zip(NAMES, values))
            assert poly.evaluate(env) == eval(text, {}, dict(env)), (text, env)  # noqa: S307


def test_compare_never_claims_a_difference_that_some_sizes_refute() -> None:
    """Soundness: ``False`` means unequal for all sizes >= 1 (declared ones >= 2); ``True`` means equal."""
    rng = random.Random(1)
    verdicts = {True: 0, False: 0, None: 0}
    for _ in range(400):
        (p, _), (q, _) = _random_poly(rng), _random_poly(rng)
        if rng.random() < 0.3:
            q = p + Poly.const(rng.randint(-1, 1))
        declared = set(rng.sample(NAMES, rng.randint(0, 3)))
        verdict = compare(p, q, {}, declared)
        verdicts[verdict] += 1
        for values in itertools.product(range(1, 7), repeat=3):
            env = dict(zip(NAMES, values))
            if any(env[n] < 2 for n in declared):
                continue
            same = p.evaluate(env) == q.evaluate(env)
            if verdict is True:
                assert same, (p, q, env)
            elif verdict is False:
                assert not same, (p, q, env, declared)
    assert all(verdicts.values()), verdicts   # the sample reaches every verdict


def test_compare_uses_the_relations() -> None:
    h, d, m, s = (Poly.atom(n) for n in ("H", "D", "M", "S"))
    rel = {"M": h * d}
    declared = {"H", "D", "M"}
    assert compare(s * m, s * h * d, rel, declared) is True
    assert compare(s * h * m, s * m, rel, declared) is False      # an extra factor of Heads >= 2
    assert compare(Poly.const(512), h * d, rel, declared) is None  # 8 * 64 would do
    assert compare(s - Poly.const(1), Poly.atom("T"), rel, declared) is None
