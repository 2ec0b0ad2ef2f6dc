"""aclnn-cpu: Huawei CANN aclnn operators on the CPU.

Same contract as the NPU library: the two-phase API (``aclnnXxxGetWorkspaceSize`` then
``aclnnXxx``), the parameter rules, status codes and dtypes (float32, float16, bfloat16), plus a
functional API that allocates outputs. The C API ships too: see ``get_include()``,
``get_library_dir()`` and ``python -m aclnn_cpu --cflags --libs``.
"""
from __future__ import annotations

import glob as _glob
import os as _os


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _installed_build(here: str) -> str:
    """The package folder of the first installed distribution `aclnn-cpu` (in sys.path order)
    that has compiled modules and is not `here` (a checkout's own build metadata, such as its
    aclnn_cpu.egg-info, names the checkout itself); "" when there is none."""
    from importlib import metadata
    for dist in metadata.distributions():
        if (dist.metadata["Name"] or "").lower().replace("_", "-") != "aclnn-cpu":
            continue
        folder = _os.path.abspath(str(dist.locate_file("aclnn_cpu")))
        if _os.path.realpath(folder) != _os.path.realpath(here) and _glob.glob(_os.path.join(folder, "_glue*.so")):
            return folder
    return ""


def _compiled_parts() -> None:
    """Find this package's compiled modules, or say plainly why they are missing.

    An installed package (`pip install .`) or a checkout built in place (`pip install -e .`,
    `python setup.py build_ext --inplace`) has them beside this file. A source checkout that is
    not built has none; run from the checkout's root (the README's `python -m aclnn_cpu demo`),
    `import aclnn_cpu` finds that checkout first. Then the compiled modules of the installed
    distribution `aclnn-cpu` are used, found through its metadata, and only when that
    installation was made from the same Python sources (its .py and .pyi files byte for byte): a build of other sources
    is refused with an ImportError that says what differs, never used silently.
    `config()["library"]` shows which build answers.
    """
    here = _os.path.dirname(_os.path.abspath(__file__))
    if _glob.glob(_os.path.join(here, "_glue*.so")) or _glob.glob(_os.path.join(here, "_glue*.pyd")):
        return
    how = ("build it in place (`pip install -e .`) or install it (`pip install .`) and run from "
           "outside the checkout")
    installed = _installed_build(here)
    if not installed:
        raise ImportError(f"aclnn_cpu at {here} is a source checkout without compiled modules: {how}")
    differ = []
    for source in sorted(_glob.glob(_os.path.join(here, "*.py")) + _glob.glob(_os.path.join(here, "*.pyi"))):
        twin = _os.path.join(installed, _os.path.basename(source))
        if not _os.path.exists(twin) or _read(twin) != _read(source):
            differ.append(_os.path.basename(source))
    if differ:
        raise ImportError(f"aclnn_cpu at {here} is a source checkout without compiled modules, and the "
                          f"installed aclnn-cpu at {installed} was built from other sources "
                          f"({', '.join(differ)} differ): {how}")
    __path__.insert(0, installed)  # noqa: F821  (package __path__)


_compiled_parts()

from aclnn_cpu import _config  # noqa: E402
from aclnn_cpu import _ops  # noqa: E402
from aclnn_cpu._errors import (  # noqa: E402
    AclnnError,
    AclnnRuntimeError,
    InnerError,
    ParamInvalidError,
    ParamNullptrError,
    Status,
)
from aclnn_cpu._glue import Executor, empty_aligned  # noqa: E402
from aclnn_cpu._registry import OPS  # noqa: E402

__version__ = _config.version()

# Every registry op: functional name, aclnnXxx and aclnnXxxGetWorkspaceSize.
_op_names = []
for _op in OPS:
    for _name in (_op["python"], _op["name"], _op["name"] + "GetWorkspaceSize"):
        globals()[_name] = getattr(_ops, _name)
        _op_names.append(_name)
del _op, _name


def __getattr__(name: str):
    """``aclnn_cpu.torch`` (the PyTorch bridge) is imported on first use: it imports torch."""
    if name == "torch":
        import importlib
        return importlib.import_module("aclnn_cpu.torch")
    raise AttributeError(f"module 'aclnn_cpu' has no attribute {name!r}")


def set_num_threads(n: int) -> None:
    """Threads the kernels use (results are bitwise identical for any count)."""
    _config.set_num_threads(int(n))


def get_num_threads() -> int:
    return _config.get_num_threads()


def set_product(name: str) -> None:
    """Product line whose dtype rules apply: 'atlas_a2' (default), 'atlas_training', 'atlas_inference'."""
    _config.set_product(name)


def get_product() -> str:
    return _config.get_product()


def get_include() -> str:
    """Directory holding acl/acl.h and aclnnop/aclnn_<op>.h for C/C++ users."""
    return _os.path.join(_os.path.dirname(_config.__file__), "include")


def get_library_dir() -> str:
    """Directory holding libaclnn_cpu.so."""
    return _os.path.join(_os.path.dirname(_config.__file__), "lib")


def config() -> dict:
    """The configuration show_config() prints, as a dict."""
    return {
        "version": __version__,
        "isa": _config.get_isa(),
        "best_isa": _config.best_isa(),
        "available_isas": list(_config.available_isas()),
        "bf16_convert": ("avx512bf16 instructions" if _config.bf16_instructions() and _config.get_isa() == "avx512"
                         else "integer rounding"),
        "threads": _config.get_num_threads(),
        "caches": f"L1d {_config.l1d_bytes() >> 10} KiB, last level {_config.llc_bytes() >> 20} MiB (as the kernels plan)",
        "openmp": bool(_config.openmp()),
        "product": _config.get_product(),
        "soc": _config.soc_name(),
        "compiler": _config.compiler(),
        "library": _os.path.join(get_library_dir(), "libaclnn_cpu.so"),
        "ops": [op["name"] for op in OPS],
    }


def show_config() -> None:
    """Print version, ISA in use, threads, product and the registry's ops."""
    for key, value in config().items():
        if isinstance(value, list):
            value = ", ".join(value)
        print(f"{key:>15}: {value}")


__all__ = [
    "AclnnError", "AclnnRuntimeError", "Executor", "InnerError", "OPS", "ParamInvalidError",
    "ParamNullptrError", "Status", "config", "empty_aligned", "get_include", "get_library_dir", "get_num_threads",
    "get_product", "set_num_threads", "set_product", "show_config", *_op_names,
]
