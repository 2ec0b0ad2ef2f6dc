"""The SIMD loads and stores of simd.h, bit for bit, on every ISA variant.

fp32 -> bf16 must equal ml_dtypes (round to nearest even, NaN -> 0x7FC0 | sign, denormals
kept), fp32 -> fp16 must equal NumPy (NaN: a NaN of the same sign), and the widening loads
must be exact. Each conversion runs through the three store paths the kernels use: single
vectors with a partial tail, pairs (bf16 pairs are split into even and odd elements), and
streamed pairs from a misaligned start; and through the scalar element conversions of half.h
that the kernels use where they gather and scatter (F16C instructions from the AVX2 level).
The inputs cover every bf16 (or fp16) value with the rounding-critical low bits under it, all
NaN and denormal classes, and random bit patterns.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from aclnn_cpu import _config
from aclnn_cpu._vocabulary import DTYPE_CODES

# NaN and out-of-range inputs are the point here; NumPy's cast warnings about them are not.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered in cast",
                                        "ignore:overflow encountered in cast")

CODES = {name: DTYPE_CODES[name] for name in ("float32", "float16", "bfloat16")}  # aclDataType
PATHS = {"vectors": 0, "pairs": 1, "streamed": 2, "scalar": 3}


def _float32_patterns() -> np.ndarray:
    """fp32 bit patterns around every bf16 value: exact, just above, halfway (ties both ways),
    just below the next, plus random patterns."""
    high = np.arange(1 << 16, dtype=np.uint32) << 16
    low = np.array([0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF], np.uint32)
    rng = np.random.default_rng(1234)
    random = rng.integers(0, 1 << 32, size=200_003, dtype=np.uint64).astype(np.uint32)
    bits = np.concatenate([(high[:, None] | low[None, :]).ravel(), random])
    return bits.view(np.float32)


def _float16_boundaries() -> np.ndarray:
    """fp32 values around every fp16 value and midway between neighbours (ties), as fp32."""
    h = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)
    finite = h[np.isfinite(h)]
    ordered = np.unique(finite)
    mid = (ordered[:-1].astype(np.float64) + ordered[1:].astype(np.float64)) / 2
    mid32 = mid.astype(np.float32)
    near = np.concatenate([np.nextafter(mid32, np.float32(np.inf)), np.nextafter(mid32, np.float32(-np.inf))])
    big = np.array([65504.0, 65519.99, 65520.0, 1e6, np.inf, -np.inf, np.nan, -np.nan], np.float32)
    return np.concatenate([h, mid32, near, big, _float32_patterns()[::7]])


def _convert(src: np.ndarray, dst_dtype, path: str, offset: int = 0) -> np.ndarray:
    """Runs the self-test conversion; `offset` elements of slack shift the destination so the
    streamed path starts misaligned and has to peel."""
    src = np.ascontiguousarray(src)
    dst_full = np.full(src.size + offset + 1, 0x5A5A, np.uint16 if np.dtype(dst_dtype).itemsize == 2 else np.uint32)
    dst = dst_full[offset:offset + src.size].view(dst_dtype)
    _config.simd_convert(src.view(_raw(src.dtype)), CODES[np.dtype(src.dtype).name if src.dtype != ml_dtypes.bfloat16 else "bfloat16"],
                         dst.view(_raw(dst.dtype)), CODES[_name(dst_dtype)], PATHS[path])
    assert (dst_full[offset + src.size:] == 0x5A5A).all(), "wrote past the end"
    assert (dst_full[:offset] == 0x5A5A).all(), "wrote before the start"
    return dst


def _raw(dtype) -> np.dtype:
    return np.dtype(np.uint16) if np.dtype(dtype).itemsize == 2 else np.dtype(np.uint32)


def _name(dtype) -> str:
    return "bfloat16" if np.dtype(dtype) == np.dtype(ml_dtypes.bfloat16) else np.dtype(dtype).name


@pytest.fixture(params=list(PATHS))
def path(request):
    return request.param


def test_float32_to_bfloat16_equals_ml_dtypes(isa, path):
    x = _float32_patterns()
    expected = x.astype(ml_dtypes.bfloat16).view(np.uint16)
    for offset in (0, 3):
        got = _convert(x, ml_dtypes.bfloat16, path, offset).view(np.uint16)
        bad = np.flatnonzero(got != expected)
        assert bad.size == 0, (f"{bad.size} mismatches, e.g. fp32 bits {x.view(np.uint32)[bad[:5]]} -> "
                               f"{got[bad[:5]]} (ml_dtypes {expected[bad[:5]]})")


def test_bfloat16_nan_and_denormal_rules(isa, path):
    # The lanes vcvtneps2bf16 would get wrong: denormals it flushes, NaN payloads it keeps,
    # mixed into vectors of ordinary values so both the fast and the fixed path run.
    special = np.array([0x00000001, 0x007FFFFF, 0x80000001, 0x00400000, 0x0000FFFF, 0x00008000,
                        0x7F800001, 0x7FA00000, 0xFFC00001, 0x7FC12345, 0xFF800001, 0x7F800000,
                        0x00808000, 0x3F808000, 0x3F818000], np.uint32)
    ordinary = np.linspace(-3, 3, 61, dtype=np.float32).view(np.uint32)
    x = np.concatenate([ordinary, special, ordinary, special[::-1], ordinary]).view(np.float32)
    got = _convert(x, ml_dtypes.bfloat16, path).view(np.uint16)
    np.testing.assert_array_equal(got, x.astype(ml_dtypes.bfloat16).view(np.uint16))
    nan = np.isnan(x)
    assert ((got[nan] & 0x7FFF) == 0x7FC0).all()
    assert (got[nan] >> 15 == (x.view(np.uint32)[nan] >> 31)).all()


def test_float32_to_float16_equals_numpy(isa, path):
    x = _float16_boundaries()
    expected = x.astype(np.float16)
    got = _convert(x, np.float16, path, offset=5)
    nan = np.isnan(expected)
    np.testing.assert_array_equal(got.view(np.uint16)[~nan], expected.view(np.uint16)[~nan])
    assert np.isnan(got[nan]).all()
    assert (np.signbit(got[nan]) == np.signbit(x[nan])).all()


@pytest.mark.parametrize("src_dtype", [ml_dtypes.bfloat16, np.float16], ids=["bfloat16", "float16"])
def test_widening_loads_are_exact(isa, path, src_dtype):
    src = np.arange(1 << 16, dtype=np.uint16).view(src_dtype)
    src = np.concatenate([src, src[:37]])  # a tail
    got = _convert(src, np.float32, path)
    expected = src.astype(np.float32)
    nan = np.isnan(expected)
    np.testing.assert_array_equal(got.view(np.uint32)[~nan], expected.view(np.uint32)[~nan])
    assert np.isnan(got[nan]).all()
    assert (np.signbit(got[nan]) == np.signbit(expected[nan])).all()


def _half_to_float_bits(h: np.ndarray) -> np.ndarray:
    """half.h's widening, from the formulas: NaN keeps its payload and gets the quiet bit."""
    h = h.astype(np.uint32)
    sign, magnitude = (h & 0x8000) << 16, h & 0x7FFF
    normal = (magnitude << 13) + ((127 - 15) << 23)
    subnormal = (magnitude.astype(np.float64) * 2.0**-24).astype(np.float32).view(np.uint32)
    payload = (magnitude & 0x3FF) << 13
    special = 0x7F800000 | payload | np.where(payload != 0, 0x00400000, 0).astype(np.uint32)
    out = np.where(magnitude >= 0x7C00, special, np.where(magnitude >= 0x0400, normal, subnormal))
    return (sign | out).astype(np.uint32)


def test_float16_special_lanes_mixed_with_ordinary_ones(isa, path):
    # Every fp16 pattern in a shuffled order, so inf/NaN/subnormal lanes share vectors with
    # ordinary ones (in order they sit in whole vectors of their own), and the conversions'
    # rare-lane fix-ups must leave the other lanes alone. NaN bits are checked exactly: the
    # payload kept and quieted, as vcvtph2ps / vcvtps2ph do.
    order = np.random.default_rng(7).permutation(1 << 16)
    h = np.arange(1 << 16, dtype=np.uint16)[order]
    got = _convert(h.view(np.float16), np.float32, path).view(np.uint32)
    np.testing.assert_array_equal(got, _half_to_float_bits(h))

    f = np.concatenate([h.view(np.float16).astype(np.float32), _float16_boundaries()])
    f = f[np.random.default_rng(8).permutation(f.size)]
    bits = f.view(np.uint32)
    nan = np.isnan(f)
    expected = f.astype(np.float16).view(np.uint16).copy()
    expected[nan] = ((bits[nan] >> 16) & 0x8000) | 0x7E00 | ((bits[nan] >> 13) & 0x3FF)
    np.testing.assert_array_equal(_convert(f, np.float16, path, offset=3).view(np.uint16), expected)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16], ids=["float32", "float16", "bfloat16"])
def test_round_trip_through_same_dtype(isa, path, dtype):
    # load_pair/store_pair of one type give back the very bits (non-NaN), whatever the lane order.
    bits = np.arange(1 << 16, dtype=np.uint32)
    if np.dtype(dtype).itemsize == 2:
        src = bits.astype(np.uint16).view(dtype)
    else:
        src = (bits * 65521 + 12345).astype(np.uint32).view(np.float32)
    got = _convert(src, dtype, path, offset=1)
    raw = src.view(_raw(dtype))
    keep = ~np.isnan(src.astype(np.float32))
    np.testing.assert_array_equal(got.view(_raw(dtype))[keep], raw[keep])


def test_bf16_instruction_switch():
    available = _config.bf16_instructions_available()
    previous = _config.bf16_instructions()
    try:
        assert _config.set_bf16_instructions(False)
        assert not _config.bf16_instructions()
        assert _config.set_bf16_instructions(True) == available
        assert _config.bf16_instructions() == available
    finally:
        _config.set_bf16_instructions(previous)


def test_selftest_rejects_bad_codes():
    x = np.zeros(4, np.float32)
    y = np.zeros(4, np.uint16)
    with pytest.raises(ValueError):
        _config.simd_convert(x, 0, y, 2, 8)
    with pytest.raises(ValueError):
        _config.simd_convert(x, 0, y, 7, 0)
    with pytest.raises(ValueError):
        _config.simd_convert(x, 1, y, 2, 0)  # float32 data under the float16 code
