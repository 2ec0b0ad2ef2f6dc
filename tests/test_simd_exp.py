"""simd.h's vector exp, fp32 and fp64, on every ISA level, against float64 / exact references.

fp32: every 61st float bit pattern of [-104, 89] (about 35 million values, both signs, the
subnormal results and the overflow edge included) against float64 exp, error in ulps of the
fp32 result: at most 1.01 ulp (the header's promise; 1.003 measured with FMA). fp64: random and edge values against
exp in extended precision (numpy's longdouble, 64-bit mantissa on x86), at most 2 ulps.
Special values: exp(-inf) = 0, exp(inf) = inf, NaN stays NaN, and results at the underflow
and overflow edges.
"""
from __future__ import annotations

import numpy as np
import pytest

from aclnn_cpu import _config


def simd_exp(x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    _config.simd_exp(x, out)
    return out


def ulps32(actual: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|actual - exact| in units of the fp32 ulp at exact (subnormal spacing below 2^-126)."""
    exponent = np.floor(np.log2(np.maximum(np.abs(exact), 2.0 ** -126)))
    ulp = 2.0 ** (exponent - 23)
    return np.abs(actual.astype(np.float64) - exact) / ulp


def test_float32_within_one_ulp(isa):
    bits = np.arange(0, 1 << 32, 61, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    x = x[np.isfinite(x) & (x >= -104.0) & (x <= 88.72)]
    x = np.concatenate([x, np.float32([0.0, -0.0, 1e-30, -1e-30, 88.72283, -87.33654, -103.97])])
    with np.errstate(over="ignore", under="ignore"):
        exact = np.exp(x.astype(np.float64))
    got = simd_exp(x)
    err = ulps32(got, exact)
    worst = int(np.argmax(err))
    assert err.max() <= 1.01, (x[worst], got[worst], exact[worst], err[worst])
    assert np.mean(err <= 0.5) > 0.99  # correctly rounded


def test_float32_special_values(isa):
    x = np.float32([-np.inf, np.inf, np.nan, -np.nan, 0.0, -0.0, -1000.0, 1000.0, 88.8, -104.5, 89.0,
                    -88.0, 1.0, -1.0])
    got = simd_exp(x)
    with np.errstate(over="ignore", under="ignore"):
        exact = np.exp(x.astype(np.float64)).astype(np.float32)
    assert np.isnan(got[2]) and np.isnan(got[3])
    keep = ~np.isnan(x)
    finite = keep & np.isfinite(exact)
    assert np.all(np.abs(got[finite].astype(np.float64) - exact[finite]) <= np.spacing(exact[finite])), got
    assert np.array_equal(got[keep & ~finite], exact[keep & ~finite])
    assert got[0] == 0.0 and got[1] == np.inf and got[4] == 1.0 and got[5] == 1.0
    assert got[6] == 0.0 and got[7] == np.inf and got[8] == np.inf and got[9] == 0.0


def test_float32_tails_and_lengths(isa):
    # lengths that end in every partial vector; the values do not depend on the lane
    rng = np.random.default_rng(1)
    x = rng.uniform(-20, 20, 97).astype(np.float32)
    whole = simd_exp(x)
    for n in range(1, 40):
        assert simd_exp(x[:n].copy()).tobytes() == whole[:n].tobytes()


def ulps64(actual: np.ndarray, exact: np.ndarray) -> np.ndarray:
    exponent = np.floor(np.log2(np.maximum(np.abs(exact.astype(np.float64)), 2.0 ** -1022)))
    ulp = np.ldexp(np.longdouble(1.0), (exponent - 52).astype(int))
    return (np.abs(actual.astype(np.longdouble) - exact) / ulp).astype(np.float64)


@pytest.mark.skipif(np.finfo(np.longdouble).nmant < 60, reason="needs an extended-precision longdouble")
def test_float64_within_two_ulps(isa):
    rng = np.random.default_rng(2)
    x = np.concatenate([rng.uniform(-745, 709.7, 400_000), rng.uniform(-1, 1, 100_000),
                        rng.uniform(-1e-8, 1e-8, 1000), [0.0, -0.0, 709.78, -708.39, -744.4, -745.1]])
    with np.errstate(over="ignore", under="ignore"):
        exact = np.exp(x.astype(np.longdouble))
    got = simd_exp(x)
    normal = np.abs(exact) >= 2.0 ** -1022
    err = ulps64(got, exact)
    assert err[normal].max() <= 2.0, x[normal][np.argmax(err[normal])]
    # subnormal results: within one subnormal step
    assert np.all(np.abs(got[~normal].astype(np.longdouble) - exact[~normal]) <= np.longdouble(2.0) ** -1074)


def test_float64_special_values(isa):
    x = np.array([-np.inf, np.inf, np.nan, 0.0, -800.0, 800.0, 709.8, -746.0])
    got = simd_exp(x)
    assert got[0] == 0.0 and got[1] == np.inf and np.isnan(got[2]) and got[3] == 1.0
    assert got[4] == 0.0 and got[5] == np.inf and got[6] == np.inf and got[7] == 0.0
