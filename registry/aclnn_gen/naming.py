"""Name conversions shared by the loader and the emitters."""
from __future__ import annotations

import keyword
import re

_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def snake_case(name: str) -> str:
    """CamelCase -> snake_case the way the aclnn header names do it.

    An underscore goes before an upper-case letter that follows a lower-case one, or that starts a
    new word after an acronym; digits glue to the word before them:
    SoftmaxBackward -> softmax_backward, GridSampler2DBackward -> grid_sampler2d_backward.
    """
    out = []
    for i, ch in enumerate(name):
        if ch.isupper() and i > 0:
            prev = name[i - 1]
            nxt = name[i + 1] if i + 1 < len(name) else ""
            if prev.islower() or (prev.isupper() and nxt.islower()):
                out.append("_")
        out.append(ch.lower())
    return "".join(out)


def python_name(c_name: str) -> str:
    """Default Python name of a C parameter: lowerCamel -> snake (gradOutput -> grad_output).

    Names that do not start lower-case (N, C, HxW) are kept: they are the documents' notation.
    """
    if not c_name[:1].islower():
        return c_name
    return snake_case(c_name)


def is_c_identifier(name: str) -> bool:
    return bool(_C_IDENTIFIER.match(name))


def is_python_identifier(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name)


def header_guard(path: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", path).upper() + "_"
