"""Command line: `python -m aclnn_cpu info | ops | demo | bench` and `--cflags --libs` for C users."""
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
