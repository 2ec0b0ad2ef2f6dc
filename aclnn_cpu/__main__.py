"""Command line: `python -m aclnn_cpu info | ops | demo | bench | golden | compare` and `--cflags --libs`
for C users."""
from __future__ import annotations

import argparse
import sys


def _cmd_info(_args) -> int:
    import aclnn_cpu

    aclnn_cpu.show_config()
    return 0


def _cmd_ops(_args) -> int:
    from aclnn_cpu._registry import OPS

    for op in OPS:
        inputs = [p["py_name"] for p in op["params"] if p["kind"] != "output"]
        outputs = [p["py_name"] for p in op["params"] if p["kind"] == "output"]
        print(f"{op['name']}: {op['summary']}")
        print(f"    python: {op['python']}({', '.join(inputs)}) -> {', '.join(outputs)}")
        document = f"   document: {op['source']}" if op["source"] else ""
        print(f"    products: {', '.join(op['products'])}{document}")
    return 0


def _cmd_demo(_args) -> int:
    from aclnn_cpu import demo

    return demo.main()


def _cmd_golden(args) -> int:
    from aclnn_cpu import golden

    return golden.main(args)


def _cmd_compare(args) -> int:
    from aclnn_cpu import precision

    return precision.main(args)


def _add_golden_commands(sub) -> None:
    """`golden` and `compare` (docs/golden.md)."""
    g = sub.add_parser("golden", help="golden data from ATK case files (docs/golden.md)")
    g.add_argument("cases", nargs="+", metavar="CASES", help="ATK case files (.json) or folders of them")
    g.add_argument("-o", "--output", required=True, metavar="DIR", help="one folder per case is written here")
    g.add_argument("--ids", help="case ids to run, e.g. 0-9,12")
    g.add_argument("--seed", type=int, default=0, help="seed of the drawn inputs (default 0)")
    g.add_argument("--shard", metavar="K/N", help="run every N-th selected case from the K-th (0 <= K < N)")
    g.add_argument("--max-bytes", help="skip cases needing more memory (default: a quarter of RAM; 4G, 500M)")
    g.add_argument("--progress", action="store_true", help="progress bar on stderr even when not a terminal")
    g.set_defaults(func=_cmd_golden)
    c = sub.add_parser("compare", help="precision metrics and verdicts of CANN's standards (docs/golden.md)")
    c.add_argument("actual", metavar="ACTUAL", help=".bin/.npy file, or a case folder")
    c.add_argument("golden", metavar="GOLDEN", help=".bin/.npy file, or a case folder")
    c.add_argument("--dtype", help="dtype of ACTUAL (and of a .bin GOLDEN); its thresholds apply")
    c.add_argument("--golden-dtype", help="dtype of a .bin GOLDEN when it differs from --dtype")
    c.add_argument("--shape", help="shape of .bin files, e.g. 2,3,4")
    c.add_argument("--third-party", metavar="T", help="the third-party result of the double benchmark")
    c.add_argument("--standard", help="single or double (default: the manifest's, else single)")
    c.add_argument("--level", default="L0", choices=("L0", "L1", "L2"), help="double-benchmark level")
    c.add_argument("--json", action="store_true", help="print the metrics as JSON")
    c.add_argument("--plot", metavar="FILE.png", help="draw the relative-error distribution (needs matplotlib)")
    c.set_defaults(func=_cmd_compare)


def _compile_flags(cflags: bool, libs: bool) -> str:
    import aclnn_cpu

    parts = []
    if cflags:
        parts.append(f"-I{aclnn_cpu.get_include()}")
    if libs:
        libdir = aclnn_cpu.get_library_dir()
        parts += [f"-L{libdir}", "-laclnn_cpu", f"-Wl,-rpath,{libdir}"]
    return " ".join(parts)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bench"]:
        # The suite parses its own options (argparse's REMAINDER drops leading "--x" options).
        from aclnn_cpu import bench

        return bench.main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m aclnn_cpu", description=__doc__)
    parser.add_argument("--cflags", action="store_true", help="compiler flags for the C API headers")
    parser.add_argument("--libs", action="store_true", help="linker flags for libaclnn_cpu (with rpath)")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("info", help="version, ISA in use, threads, product").set_defaults(func=_cmd_info)
    sub.add_parser("ops", help="list the registry's operators").set_defaults(func=_cmd_ops)
    sub.add_parser("demo", help="run each op's documented example and print it").set_defaults(func=_cmd_demo)
    sub.add_parser("bench", help="benchmark against PyTorch (bench --help lists its options)")
    _add_golden_commands(sub)
    args = parser.parse_args(argv)
    if args.cflags or args.libs:
        print(_compile_flags(args.cflags, args.libs))
        return 0
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return args.func(args)


def _run() -> int:
    try:
        code = main()
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        # The reader went away (`python -m aclnn_cpu demo | head`): stop quietly, as Unix tools
        # do. Point stdout at /dev/null so the interpreter's final flush cannot raise again.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a tool the pipe closed on


if __name__ == "__main__":
    sys.exit(_run())
