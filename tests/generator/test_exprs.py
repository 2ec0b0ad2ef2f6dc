"""The C++ snippet tools: identifiers, message templates, display forms."""
from __future__ import annotations

import pytest

from registry.aclnn_gen.exprs import (Placeholder, cpp_identifiers, display_expr, parse_template,
                                      template_to_cpp)


def test_identifiers_skip_qualified_names_literals_and_numbers():
    expr = 'dim >= -std::max<int64_t>(rank(gradOutput), 1) && t.size() > 8ll && s == "abc x"'
    assert cpp_identifiers(expr) == ["dim", "std", "int64_t", "rank", "gradOutput", "t", "s"]


def test_template_parts_and_escaped_braces():
    parts = parse_template("dim {dim} not in [{-n}, {Shape{C}}) {{literal}}")
    assert parts == ["dim ", "dim", " not in [", "-n", ", ", "Shape{C}", ") {literal}"]
    assert [isinstance(p, Placeholder) for p in parts] == [False, True, False, True, False, True, False]


@pytest.mark.parametrize("bad", ["x {y", "x }", "x {}"])
def test_template_errors(bad):
    with pytest.raises(ValueError):
        parse_template(bad)


def test_template_to_cpp():
    assert template_to_cpp(parse_template('a "q" {n}')) == 'std::string("a \\"q\\" ") + to_string(n)'
    assert template_to_cpp(parse_template("{n} left")) == 'to_string(n) + " left"'


def test_display_expr():
    assert display_expr("checked_mul({N, C, HxW})") == "N * C * HxW"
    assert display_expr("checked_mul({dim(self, 1), N + 1})") == "dim(self, 1) * (N + 1)"
