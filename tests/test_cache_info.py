"""The cache sizes the kernels plan with (runtime/cache_info.cpp), read back against the machine.

The kernels choose streaming stores by the last-level cache and GroupNorm's write order by the
L1 data cache; a size read wrongly changes only speed, never results, so it is checked here, from
the same sources read independently in Python: cpu0's sysfs cache entries, else glibc's sysconf.
"""
from __future__ import annotations

import os
from pathlib import Path

import aclnn_cpu as ac
from aclnn_cpu import _config

CACHE_DIR = Path("/sys/devices/system/cpu/cpu0/cache")
UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def sysfs_caches():
    """(level, type, bytes) of each of cpu0's sysfs cache entries that can be read."""
    entries = []
    for index in sorted(CACHE_DIR.glob("index[0-9]*")):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            size = (index / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        scale = UNITS.get(size[-1:], 1)
        entries.append((level, kind, int(size.rstrip("KMG")) * scale))
    return entries


def sysconf(name):
    try:
        value = os.sysconf(name)
    except (ValueError, OSError):
        return -1
    return value


def test_l1_data_cache_is_cpu0s_level_1_data_cache():
    data = [size for level, kind, size in sysfs_caches() if level == 1 and kind == "Data"]
    if data:
        expected = data[0]
    else:
        expected = sysconf("SC_LEVEL1_DCACHE_SIZE")
        expected = expected if expected > 0 else 32 << 10
    assert _config.l1d_bytes() == expected


def test_last_level_cache_is_cpu0s_largest_cache():
    forced = os.environ.get("ACLNN_CPU_LLC_BYTES", "")
    sizes = [size for _, _, size in sysfs_caches()]
    if forced and int(forced) > 0:
        expected = int(forced)
    elif sizes:
        expected = max(sizes)
    else:
        expected = sysconf("SC_LEVEL3_CACHE_SIZE")
        if expected <= 0:
            expected = sysconf("SC_LEVEL2_CACHE_SIZE")
        expected = expected if expected > 0 else 32 << 20
    assert _config.llc_bytes() == expected


def test_config_reports_the_cache_sizes():
    caches = ac.config()["caches"]
    assert f"L1d {_config.l1d_bytes() >> 10} KiB" in caches
    assert f"last level {_config.llc_bytes() >> 20} MiB" in caches
