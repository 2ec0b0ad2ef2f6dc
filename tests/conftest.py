"""Shared fixtures: the PyTorch oracle, ISA levels, thread counts, dtypes."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/support.py

import aclnn_cpu  # noqa: E402
from aclnn_cpu import _config  # noqa: E402

REQUIRE_TORCH = os.environ.get("ACLNN_CPU_REQUIRE_TORCH", "") not in ("", "0")


@pytest.fixture(scope="session")
def torch():
    """PyTorch, the test oracle. Skips without it, unless ACLNN_CPU_REQUIRE_TORCH=1 (then fails)."""
    try:
        import torch as _torch
    except ImportError:
        if REQUIRE_TORCH:
            pytest.fail("ACLNN_CPU_REQUIRE_TORCH=1 but torch is not installed")
        pytest.skip("torch not installed (oracle test)")
    return _torch


# Every ISA level this machine has; where the avx512 level can convert to bf16 with the
# AVX512-BF16 instructions, also that level with them off (the integer rounding path).
ISA_VARIANTS = list(_config.available_isas()) + (
    ["avx512-nobf16"] if _config.bf16_instructions_available() and "avx512" in _config.available_isas() else [])


@pytest.fixture(params=ISA_VARIANTS)
def isa(request):
    """Runs the test once per ISA variant this machine has, restoring the defaults afterwards."""
    previous, previous_bf16 = _config.get_isa(), _config.bf16_instructions()
    level, _, variant = request.param.partition("-")
    _config.set_isa(level)
    _config.set_bf16_instructions(variant != "nobf16" and _config.bf16_instructions_available())
    yield level
    _config.set_isa(previous)
    _config.set_bf16_instructions(previous_bf16)


@pytest.fixture
def threads():
    """A setter for the thread count that restores the previous count afterwards."""
    previous = aclnn_cpu.get_num_threads()
    yield aclnn_cpu.set_num_threads
    aclnn_cpu.set_num_threads(previous)


@pytest.fixture
def product():
    """A setter for the product line that restores the default afterwards."""
    previous = aclnn_cpu.get_product()
    yield aclnn_cpu.set_product
    aclnn_cpu.set_product(previous)


FLOAT_DTYPES = ["float32", "float16", "bfloat16"]


@pytest.fixture(params=FLOAT_DTYPES)
def dtype(request):
    """Each storage dtype of the library, as a NumPy dtype."""
    from support import np_dtype

    return np_dtype(request.param)
