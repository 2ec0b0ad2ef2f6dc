"""Small, honest tools for the C++ snippets a YAML may carry (check/when/shape/value/message).

We do not parse C++: we only find the identifiers a snippet uses (to reject typos and undeclared
names at load time, with file:line) and split message templates into text and `{expr}` parts.
"""
from __future__ import annotations

import re
from typing import Iterator, List, Tuple, Union

# Names a snippet may use besides the op's params and the validate.h helpers.
CPP_ALLOWED_NAMES = frozenset({
    "std", "int64_t", "uint64_t", "int32_t", "Shape", "DType", "Product", "true", "false",
    "nullptr", "static_cast", "sizeof", "bool",
})

_STRING_LITERAL = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'')
_IDENTIFIER = re.compile(r"(::|\.|->)?\s*\b([A-Za-z_]\w*)")
_CALL = re.compile(r"(?<![\w:.>])([A-Za-z_]\w*)\s*\(")


def cpp_identifiers(expr: str) -> List[str]:
    """Unqualified identifiers of a C++ expression, in order of first use.

    Names after `::`, `.` or `->` are members or qualified names and are skipped; so are the
    contents of string and character literals. Number suffixes (8ll, 1e5) are not identifiers.
    """
    text = _STRING_LITERAL.sub('""', expr)
    seen = {}
    for m in _IDENTIFIER.finditer(text):
        if m.group(1):
            continue
        seen.setdefault(m.group(2), None)
    return list(seen)


def cpp_calls(expr: str) -> List[str]:
    """Names used as unqualified function calls: `dim(` in `dim(self, 1)`."""
    text = _STRING_LITERAL.sub('""', expr)
    return [m.group(1) for m in _CALL.finditer(text)]


def unbalanced(expr: str) -> str:
    """'' when (), [] and {} nest properly, else a short description of the first problem."""
    text = _STRING_LITERAL.sub('""', expr)
    pairs = {")": "(", "]": "[", "}": "{"}
    stack = []
    for ch in text:
        if ch in "([{":
            stack.append(ch)
        elif ch in pairs:
            if not stack or stack[-1] != pairs[ch]:
                return f"unexpected '{ch}'"
            stack.pop()
    if stack:
        return f"unclosed '{stack[-1]}'"
    return ""


class Placeholder(str):
    """A `{expr}` part of a message template: the C++ expression to print."""


TemplatePart = Union[str, Placeholder]


def parse_template(template: str) -> List[TemplatePart]:
    """Splits 'dim {dim} is out of range' into ['dim ', Placeholder('dim'), ' is out of range'].

    `{{` and `}}` are literal braces. A placeholder ends at its matching `}`, so expressions may
    themselves contain braces (`{Shape{C}}`). Raises ValueError on an unterminated placeholder.
    """
    parts: List[TemplatePart] = []
    text = []
    i = 0
    n = len(template)
    while i < n:
        ch = template[i]
        if ch == "{" and template.startswith("{{", i):
            text.append("{")
            i += 2
        elif ch == "}" and template.startswith("}}", i):
            text.append("}")
            i += 2
        elif ch == "{":
            depth = 1
            j = i + 1
            while j < n and depth:
                if template[j] == "{":
                    depth += 1
                elif template[j] == "}":
                    depth -= 1
                j += 1
            if depth:
                raise ValueError(f"unterminated placeholder starting at '{template[i:i + 20]}'")
            expr = template[i + 1:j - 1].strip()
            if not expr:
                raise ValueError("empty placeholder '{}' (write '{{' for a literal brace)")
            if text:
                parts.append("".join(text))
                text = []
            parts.append(Placeholder(expr))
            i = j
        elif ch == "}":
            raise ValueError("unmatched '}' (write '}}' for a literal brace)")
        else:
            text.append(ch)
            i += 1
    if text:
        parts.append("".join(text))
    return parts


def template_placeholders(template: str) -> Iterator[str]:
    for part in parse_template(template):
        if isinstance(part, Placeholder):
            yield str(part)


def cpp_string_literal(text: str) -> str:
    out = ['"']
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def template_to_cpp(parts: List[TemplatePart]) -> str:
    """A C++ std::string expression that renders the template (placeholders via to_string)."""
    pieces: List[str] = []
    for part in parts:
        if isinstance(part, Placeholder):
            pieces.append(f"to_string({part})")
        else:
            pieces.append(cpp_string_literal(part))
    if not pieces:
        return 'std::string()'
    if not isinstance(parts[0], Placeholder):
        pieces[0] = f"std::string({pieces[0]})"
    return " + ".join(pieces)


def split_template_pieces(parts: List[TemplatePart]) -> List[Tuple[bool, str]]:
    """[(is_expr, text)] for emitters that render templates for people (docs)."""
    return [(isinstance(p, Placeholder), str(p)) for p in parts]


_CHECKED_MUL = re.compile(r"checked_mul\(\{([^{}]*)\}\)")


def split_top_level(text: str, sep: str = ",") -> List[str]:
    """Splits at `sep` outside (), [], {} and string literals."""
    parts: List[str] = []
    depth = 0
    start = 0
    masked = _STRING_LITERAL.sub(lambda m: "_" * len(m.group(0)), text)
    for i, ch in enumerate(masked):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def display_expr(expr: str) -> str:
    """A C++ snippet as people read it: checked_mul({N, C, HxW}) -> N * C * HxW."""
    def product(m: "re.Match[str]") -> str:
        factors = [f.strip() for f in split_top_level(m.group(1))]
        return " * ".join(f if re.fullmatch(r"[\w.]+|\w+\(.*\)", f) else f"({f})" for f in factors)
    return _CHECKED_MUL.sub(product, expr)
