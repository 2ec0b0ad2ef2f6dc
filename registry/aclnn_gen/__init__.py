"""aclnn_gen: generates every per-op artefact from registry/*.yaml.

    python -m registry.aclnn_gen [--check] [--root DIR]
    from registry.aclnn_gen import generate; generate(root, check=False)

Only PyYAML is needed. See registry/README.md for the YAML schema.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Union

from . import (emit_args_header, emit_c_header, emit_cython, emit_docs, emit_entry,
               emit_op_table, emit_registry, emit_vocabulary, vocabulary)
from .loader import RegistryError, load_op, load_registry
from .model import Op
from .writer import Outcome, sync

__all__ = ["RegistryError", "generate", "render", "load_registry", "load_op", "Outcome"]

PER_OP_EMITTERS = (emit_c_header, emit_args_header, emit_entry)
ALL_OPS_EMITTERS = (emit_cython.emit_pyx, emit_cython.emit_pyi, emit_registry.emit,
                    emit_docs.emit, emit_op_table.emit)


def render(ops: List[Op]) -> Dict[str, str]:
    """Relative path -> content of every generated file: the vocabulary's and those of these ops."""
    vocabulary.check()
    files: Dict[str, str] = dict(emit() for emit in emit_vocabulary.EMITTERS)
    for op in ops:
        for emitter in PER_OP_EMITTERS:
            path, text = emitter.emit(op)
            files[path] = text
    for emit_all in ALL_OPS_EMITTERS:
        path, text = emit_all(ops)
        files[path] = text
    return files


def generate(root: Union[str, Path] = ".", check: bool = False) -> Outcome:
    """Loads root/registry/*.yaml and brings the generated files up to date.

    Files are written only when their content changes (so builds do not recompile needlessly).
    With check=True nothing is written; the outcome lists stale, missing and orphaned files.
    Raises RegistryError (message 'registry/x.yaml:12: ...') when a YAML breaks the schema.
    """
    root = Path(root)
    ops = load_registry(root)
    return sync(root, render(ops), check)
