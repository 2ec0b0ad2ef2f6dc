"""simd.h's StreamCursor stores exactly the bytes a plain store would, wherever the output starts.

The cursor joins 64-byte vectors that sit a constant distance past a line into whole lines it
streams, with masked plain stores for a run's first and last partial lines; consecutive rows
continue a run, a jump starts another. Through the self-test entry point
(`_config.simd_convert`, paths 4-7 + 256 * row), on every ISA level: destinations at every
even (16-bit) or 4-byte (fp32) offset within a line, lengths around multiples of a line, in
one row, in rows of several lengths taken in order (joined) and last row first (a jump per
row), single vectors and pairs. The result must equal NumPy's / ml_dtypes' conversion of the
source bit for bit, and the bytes around the destination must stay untouched.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from aclnn_cpu import _config
from aclnn_cpu._vocabulary import DTYPE_CODES

CODES = {np.dtype(np.float32): DTYPE_CODES["float32"], np.dtype(np.float16): DTYPE_CODES["float16"],
         np.dtype(ml_dtypes.bfloat16): DTYPE_CODES["bfloat16"]}
DESTINATIONS = [np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)]
GUARD = 0xA5


def line_aligned_bytes(nbytes: int) -> np.ndarray:
    raw = np.empty(nbytes + 64, np.uint8)
    start = -raw.ctypes.data % 64
    return raw[start:start + nbytes]


def through_cursor(src: np.ndarray, dst_dtype: np.dtype, offset: int, path: int) -> np.ndarray:
    """src converted into a destination `offset` bytes past a line, guard bytes checked."""
    size = dst_dtype.itemsize
    nbytes = src.size * size
    buf = line_aligned_bytes(offset + nbytes + 192)
    buf[...] = GUARD
    dst = buf[offset:offset + nbytes].view(dst_dtype)
    raw = np.uint16 if size == 2 else np.uint32
    _config.simd_convert(src.view(np.uint32), CODES[np.dtype(np.float32)], dst.view(raw), CODES[dst_dtype], path)
    assert (buf[:offset] == GUARD).all(), "wrote before the destination"
    assert (buf[offset + nbytes:] == GUARD).all(), "wrote past the destination"
    return dst.copy()


def cursor_path(pairs: bool, reverse: bool, row: int) -> int:
    return 4 + int(pairs) + 2 * int(reverse) + 256 * row


def lengths(line: int):
    """Element counts around 1-4 lines (and 0, 1), for `line` elements a line."""
    out = {0, 1, line // 2}
    for k in (1, 2, 3, 4, 9):
        out.update({k * line - 1, k * line, k * line + 1, k * line + line // 2 + 3})
    return sorted(n for n in out if n >= 0)


@pytest.mark.parametrize("dst_dtype", DESTINATIONS, ids=str)
def test_cursor_stores_the_plain_bytes_at_every_offset(isa, dst_dtype):
    rng = np.random.default_rng(7)
    size = dst_dtype.itemsize
    line = 64 // size
    src_all = (rng.standard_normal(12 * line + 64) * 3).astype(np.float32)
    src_all[::37] = 0.0
    src_all[5::41] = -0.0
    expected_all = src_all.astype(dst_dtype)
    for offset in range(0, 64, size):
        for n in lengths(line):
            src = src_all[:n]
            expected = expected_all[:n].view(np.uint8)
            for pairs in (False, True):
                for reverse, row in ((False, 0), (False, line - 3), (False, line), (False, 2 * line + 5),
                                     (True, line + 2), (True, 3 * line)):
                    got = through_cursor(src, dst_dtype, offset, cursor_path(pairs, reverse, row))
                    assert np.array_equal(got.view(np.uint8), expected), (
                        f"offset {offset} n {n} pairs {pairs} reverse {reverse} row {row}")


@pytest.mark.parametrize("dst_dtype", DESTINATIONS, ids=str)
def test_cursor_keeps_special_values(isa, dst_dtype):
    """NaN, infinities, denormals and signed zeros go through the joined lines unchanged (the
    same bits as the plain vector stores, which test_simd_conversions checks against NumPy)."""
    specials = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-40, 65520.0, 3.0e38],
                        np.float32)
    src = np.resize(specials, 64 * 5 + 7)
    plain = np.empty(src.size, dst_dtype)
    raw = np.uint16 if dst_dtype.itemsize == 2 else np.uint32
    _config.simd_convert(src.view(np.uint32), CODES[np.dtype(np.float32)], plain.view(raw), CODES[dst_dtype], 0)
    for offset in (4, 16, 36, 60):
        for pairs in (False, True):
            got = through_cursor(src, dst_dtype, offset, cursor_path(pairs, False, 50))
            assert got.view(np.uint8).tobytes() == plain.view(np.uint8).tobytes()


def test_cursor_paths_are_validated():
    x = np.zeros(4, np.uint32)
    y = np.zeros(4, np.uint32)
    for bad in (8, 255, 256 + 3, -1):
        with pytest.raises(ValueError):
            _config.simd_convert(x, 0, y, 0, bad)
    _config.simd_convert(x, 0, y, 0, 256 * 3 + 5)
