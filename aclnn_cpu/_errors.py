"""Status codes of the aclnn API and the exceptions that carry them."""
from __future__ import annotations

import enum


class Status(enum.IntEnum):
    """aclnn / acl status codes this library returns."""

    SUCCESS = 0
    ERR_PARAM_NULLPTR = 161001
    ERR_PARAM_INVALID = 161002
    ERR_RUNTIME_ERROR = 361001
    ERR_INNER = 561000
    ERR_INNER_NULLPTR = 561103


class AclnnError(Exception):
    """A failed aclnn call: ``.status`` is the code, ``str(err)`` the validator's message."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = int(status)
        self.message = message

    def __str__(self) -> str:
        return f"[{self.status}] {self.message}"


class ParamNullptrError(AclnnError, TypeError):
    """161001: a required tensor or array is missing (None / null)."""


class ParamInvalidError(AclnnError, ValueError):
    """161002: a parameter breaks one of the operator's rules."""


class AclnnRuntimeError(AclnnError, RuntimeError):
    """361001: the runtime failed."""


class InnerError(AclnnError):
    """561xxx: an internal error (for example out of memory)."""


def error_for(status: int, message: str) -> AclnnError:
    """The exception matching ``status``."""
    if status == Status.ERR_PARAM_NULLPTR:
        return ParamNullptrError(status, message)
    if status == Status.ERR_PARAM_INVALID:
        return ParamInvalidError(status, message)
    if 361000 <= status < 362000:
        return AclnnRuntimeError(status, message)
    if 561000 <= status < 562000:
        return InnerError(status, message)
    return AclnnError(status, message)
