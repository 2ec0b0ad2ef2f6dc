"""Text helpers shared by the emitters."""
from __future__ import annotations

import textwrap
from typing import List


def wrap(text: str, width: int, first: str = "", rest: str = "") -> List[str]:
    """Word-wraps one paragraph (newlines inside it become spaces)."""
    text = " ".join(text.split())
    if not text:
        return [first.rstrip()]
    return textwrap.wrap(text, width=width, initial_indent=first, subsequent_indent=rest,
                         break_long_words=False, break_on_hyphens=False)


def block_comment_safe(text: str) -> str:
    """Text that cannot end a /* */ comment early."""
    return text.replace("*/", "* /")
