"""Build of aclnn-cpu.

1. Runs the registry generator (registry/*.yaml -> C entry points, headers, Cython stubs, docs).
2. Builds the C++ core `aclnn_cpu/lib/libaclnn_cpu.so`: runtime + generated entry points, and
   every ops/*.cpp once per ISA level (baseline, AVX2+FMA+F16C, AVX-512: the levels of
   registry/aclnn_gen/vocabulary.py) for run-time dispatch.
3. Builds the Python extensions that link to it: the Cython glue and per-op stubs, and the
   pybind11 configuration module.

Environment: ACLNN_CPU_SANITIZE=1 builds everything with ASan+UBSan; ACLNN_CPU_DEBUG=1 builds -O0 -g;
CXX overrides the compiler.
"""
from __future__ import annotations

import concurrent.futures
import os
import platform
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

LIB_NAME = "aclnn_cpu"
IS_X86_64 = platform.machine().lower() in ("x86_64", "amd64")

# The ISA levels, read from their declaration (this runs before the package exists): the first is
# the portable baseline, the others x86-64 only.
from registry.aclnn_gen.vocabulary import ISA_LEVELS as DECLARED_ISA_LEVELS  # noqa: E402

ISA_LEVELS = DECLARED_ISA_LEVELS if IS_X86_64 else DECLARED_ISA_LEVELS[:1]


BF16_PROBE = """#include <immintrin.h>
int main() {
  __m512 x = _mm512_set1_ps(1.0f);
  __m512i y = (__m512i)_mm512_cvtne2ps_pbh(x, x);
  return (int)_mm512_fpclass_ps_mask(x, 0x20) + _mm_cvtsi128_si32(_mm512_castsi512_si128(y));
}
"""


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


SANITIZE = env_flag("ACLNN_CPU_SANITIZE")
DEBUG = env_flag("ACLNN_CPU_DEBUG")
SANITIZE_FLAGS = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=undefined"]
OPT_FLAGS = ["-O0", "-g"] if DEBUG else (["-O1", "-g"] if SANITIZE else ["-O3"])
# How GCC expands copies and clears of a known size: unrolled moves up to 512 bytes, the C
# library beyond (and for unknown sizes). GCC 12's generic tuning uses `rep stos`/`rep movs`
# for mid-size structs, each with a startup of tens of cycles; a tiny call through the C API
# makes about ten of them (zeroing an aclTensor, building and copying the kernel-facing views and
# plans): 580 -> 400 ns a call of an 8-element softmax, most of it from these flags.
STRINGOP_FLAGS = ["-mmemset-strategy=unrolled_loop:512:noalign,libcall:-1:noalign",
                  "-mmemcpy-strategy=unrolled_loop:512:noalign,libcall:-1:noalign"] if IS_X86_64 else []

# OpenMP 5.0's omp_pause_resource_all, which the fork handler of runtime/threads.cpp calls to
# release the forking thread's worker pool (libgomp exports it in its OMP_5.0 symbol set). The
# probe keeps older runtimes building; their forked children then run kernels on one thread.
OMP_PAUSE_PROBE = """#include <omp.h>
int main() { return omp_pause_resource_all(omp_pause_hard); }
"""
# LLVM's and Intel's OpenMP runtimes (kmp_* entry points) re-initialise themselves in a forked
# child; there a pause before each fork would only shut down regions other threads may be running.
OMP_KMP_PROBE = """extern "C" void kmp_set_defaults(const char*);
int main() { kmp_set_defaults(""); return 0; }
"""


def cxx_command() -> list[str]:
    cxx = os.environ.get("CXX") or sysconfig.get_config_var("CXX") or "c++"
    return shlex.split(cxx)


def compiler_accepts(flags: list[str], code: str = "int main() { return 0; }\n") -> bool:
    """Probe: does the compiler build a tiny program with these flags?"""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "probe.cpp"
        src.write_text(code)
        cmd = cxx_command() + flags + [str(src), "-o", str(Path(tmp) / "probe")]
        return subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0


def openmp_flags() -> list[str]:
    code = "#include <omp.h>\nint main() { return omp_get_max_threads() > 0 ? 0 : 1; }\n"
    if compiler_accepts(["-fopenmp"], code):
        return ["-fopenmp"]
    print("aclnn-cpu: the compiler has no OpenMP; building single-threaded", file=sys.stderr)
    return []


def project_version() -> str:
    """The version in pyproject.toml, compiled into the library so both always agree."""
    for line in (ROOT / "pyproject.toml").read_text().splitlines():
        if line.startswith("version"):
            return line.split("=", 1)[1].strip().strip('"')
    raise RuntimeError("no version in pyproject.toml")


def run_generator() -> None:
    from registry.aclnn_gen import generate, load_registry

    generate(ROOT)
    # An op's kernel lives in ops/<kernel>.cpp. Without it the library used to link anyway (a
    # shared object may leave symbols undefined) and every op then failed at import.
    missing = [f"{op.path}: kernel '{op.kernel}' has no source file ops/{op.kernel}.cpp"
               for op in load_registry(ROOT) if not (ROOT / "ops" / f"{op.kernel}.cpp").is_file()]
    if missing:
        raise SystemExit("\n".join(missing))


class CoreLibrary:
    """Compiles and links libaclnn_cpu.so with plain compiler calls (object files per ISA level)."""

    def __init__(self, build_temp: Path, out_dir: Path, openmp: list[str]):
        self.build_temp = build_temp
        self.out_dir = out_dir
        self.openmp = openmp
        # (name, ACLNN_ISA_LEVEL value, flags) of each level the compiler accepts; a level's
        # value is its position among the declared levels.
        self.levels = [(lvl.name, value, list(lvl.flags)) for value, lvl in enumerate(ISA_LEVELS)
                       if not lvl.flags or compiler_accepts(list(lvl.flags))]
        self.defines = [f"-D{lvl.macro}" for lvl in ISA_LEVELS
                        if lvl.macro and lvl.name in {name for name, _, _ in self.levels}]
        # AVX512-BF16 conversions inside the level that declares them, switched on at run time
        # only where the CPU has them (simd.h); a compiler without the flags just leaves them out.
        bf16 = {lvl.name: list(lvl.bf16_flags) for lvl in ISA_LEVELS if lvl.bf16_flags}
        with_bf16 = {name for name, _, flags in self.levels
                     if name in bf16 and compiler_accepts(flags + bf16[name], BF16_PROBE)}
        self.levels = [(name, value, flags + bf16[name] if name in with_bf16 else flags)
                       for name, value, flags in self.levels]
        if with_bf16:
            self.defines.append("-DACLNN_HAVE_AVX512BF16")
        if openmp and compiler_accepts(openmp, OMP_KMP_PROBE):
            self.defines.append("-DACLNN_OMP_HANDLES_FORK")
        elif openmp and compiler_accepts(openmp, OMP_PAUSE_PROBE):
            self.defines.append("-DACLNN_HAVE_OMP_PAUSE")
        stringops = STRINGOP_FLAGS if STRINGOP_FLAGS and compiler_accepts(STRINGOP_FLAGS) else []
        self.common = (["-std=c++17", "-fPIC", "-Wall", "-Wno-unknown-pragmas", f"-I{ROOT / 'include'}",
                        f'-DACLNN_CPU_VERSION="{project_version()}"']
                       + OPT_FLAGS + stringops + openmp + self.defines + (SANITIZE_FLAGS if SANITIZE else []))

    def jobs(self) -> list[tuple[Path, Path, list[str]]]:
        jobs = []
        for src in sorted((ROOT / "runtime").glob("*.cpp")) + sorted((ROOT / "runtime" / "generated").glob("*.cpp")):
            rel = src.relative_to(ROOT).with_suffix(".o")
            jobs.append((src, self.build_temp / "core" / rel, []))
        per_level = sorted((ROOT / "ops").glob("*.cpp")) + sorted((ROOT / "runtime" / "per_isa").glob("*.cpp"))
        for src in per_level:
            for name, value, flags in self.levels:
                obj = self.build_temp / "core" / src.parent.relative_to(ROOT) / name / (src.stem + ".o")
                # -ffp-contract=off: GCC would fuse a*b+c into FMA on the AVX levels even in ISO
                # mode; kernels decide where rounding happens, not the compiler.
                jobs.append((src, obj, flags + ["-ffp-contract=off", f"-DACLNN_ISA_LEVEL={value}"]))
        return jobs

    @staticmethod
    def check_isa_isolation(objects: list[Path]) -> None:
        """Fails when an ops object compiled for AVX2/AVX-512 defines a weak symbol outside its
        isa_* (or half.h's per-level half_*) namespace: the linker could pick that copy for baseline code (an inline function of
        a shared header, say) and crash CPUs without the instructions."""
        nm = shutil.which("nm")
        if nm is None:
            return
        above_baseline = {lvl.name for lvl in ISA_LEVELS[1:]}
        for obj in objects:
            level = obj.parent.name
            if level not in above_baseline:
                continue
            listing = subprocess.run([nm, "-C", "--defined-only", str(obj)], check=True,
                                     capture_output=True, text=True).stdout
            leaks = [line for line in listing.splitlines()
                     if len(line.split()) >= 3 and line.split()[1] in ("W", "V", "u")
                     and f"isa_{level}::" not in line and f"half_{level}::" not in line
                     and "__gxx_personality" not in line]
            if leaks:
                raise RuntimeError(f"{obj} defines shared weak symbols outside its ISA namespace "
                                   f"(put them in ACLNN_ISA_NS or make them static):\n" + "\n".join(leaks[:10]))

    @staticmethod
    def up_to_date(obj: Path, depfile: Path) -> bool:
        """The object is newer than its source and every header it included, as the compiler's
        -MMD dependency file lists them (a regenerated args header rebuilds only the objects
        that include it, not every object)."""
        if not (obj.exists() and depfile.exists()):
            return False
        # Make syntax: "obj: src hdr1 hdr2 \" with escaped spaces in paths.
        text = depfile.read_text().replace("\\\n", " ").replace("\\ ", "\0")
        deps = [d.replace("\0", " ") for d in text.partition(": ")[2].split()]
        built = obj.stat().st_mtime
        try:
            return bool(deps) and all(Path(d).stat().st_mtime <= built for d in deps)
        except OSError:  # a header that is gone
            return False

    def compile_one(self, job: tuple[Path, Path, list[str]]) -> Path:
        src, obj, flags = job
        stamp = obj.with_suffix(".flags")
        depfile = obj.with_suffix(".d")
        cmd = cxx_command() + self.common + flags + ["-MMD", "-MF", str(depfile), "-c", str(src), "-o", str(obj)]
        if stamp.exists() and stamp.read_text() == " ".join(cmd) and self.up_to_date(obj, depfile):
            return obj
        obj.parent.mkdir(parents=True, exist_ok=True)
        print(" ".join(cmd))
        subprocess.run(cmd, check=True)
        stamp.write_text(" ".join(cmd))
        return obj

    def build(self) -> Path:
        jobs = self.jobs()
        workers = max(1, os.cpu_count() or 1)
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            objects = list(pool.map(self.compile_one, jobs))
        self.check_isa_isolation(objects)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        target = self.out_dir / f"lib{LIB_NAME}.so"
        cmd = (cxx_command() + ["-shared", "-o", str(target)] + [str(o) for o in objects]
               + self.openmp + (SANITIZE_FLAGS if SANITIZE else [])
               + [f"-Wl,-soname,lib{LIB_NAME}.so"]
               # Any symbol left undefined (a kernel declared by the registry but never
               # defined) fails the link here rather than the import later. (The sanitizer
               # build resolves its runtime at load time, so it is left out there.)
               + ([] if SANITIZE else ["-Wl,--no-undefined"]))
        print(" ".join(cmd))
        subprocess.run(cmd, check=True)
        return target


class BuildExt(build_ext):
    """Generates, builds the core library, then the Python extensions linked against it."""

    def run(self):
        run_generator()
        openmp = openmp_flags()
        package_dir = Path(self.build_lib) / "aclnn_cpu"
        lib_dirs = [package_dir / "lib"]
        if self.inplace:
            lib_dirs.append(ROOT / "aclnn_cpu" / "lib")
        core = CoreLibrary(Path(self.build_temp), lib_dirs[0], openmp)
        target = core.build()
        for extra in lib_dirs[1:]:
            extra.mkdir(parents=True, exist_ok=True)
            shutil.copy2(target, extra / target.name)
        # Headers ship inside the package for C users (aclnn_cpu.get_include()).
        for dest_root in {package_dir, ROOT / "aclnn_cpu"} if self.inplace else {package_dir}:
            for sub in ("acl", "aclnn", "aclnnop"):
                dest = dest_root / "include" / sub
                if dest.exists():
                    shutil.rmtree(dest)
                shutil.copytree(ROOT / "include" / sub, dest)
        for ext in self.extensions:
            ext.library_dirs.append(str(lib_dirs[0]))
            ext.extra_compile_args += openmp + (SANITIZE_FLAGS if SANITIZE else [])
            ext.extra_link_args += (SANITIZE_FLAGS if SANITIZE else [])
        super().run()


def extensions() -> list[Extension]:
    import numpy
    import pybind11
    from Cython.Build import cythonize

    common = dict(
        language="c++",
        include_dirs=[str(ROOT / "include"), numpy.get_include()],
        libraries=[LIB_NAME],
        extra_compile_args=["-std=c++17"] + OPT_FLAGS,
        extra_link_args=["-Wl,-rpath,$ORIGIN/lib"],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    )
    cython_exts = [
        Extension("aclnn_cpu._glue", ["aclnn_cpu/_glue.pyx"], **common),
        Extension("aclnn_cpu._ops", ["aclnn_cpu/_ops.pyx"], **common),
    ]
    cythonized = cythonize(cython_exts, compiler_directives={"language_level": "3"},
                           include_path=[str(ROOT)], quiet=True)
    config = Extension("aclnn_cpu._config", ["aclnn_cpu/_config.cpp"],
                       **{**common, "include_dirs": common["include_dirs"] + [pybind11.get_include()]})
    return cythonized + [config]


run_generator()  # the generated .pyx must exist before cythonize() reads it
setup(ext_modules=extensions(), cmdclass={"build_ext": BuildExt})
