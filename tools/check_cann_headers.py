"""Check ``cffi_build/acl.h`` against CANN's own headers: every declaration and every value.

    python tools/check_cann_headers.py                  # download the pinned wheel, check, report
    python tools/check_cann_headers.py --wheel W.whl    # check against a wheel already on disk
    python tools/check_cann_headers.py --include DIR    # check against headers in DIR (DIR/acl/acl.h)

CANN's ACL headers ship inside the torch-npu wheel on PyPI (``torch_npu/include/acl``). The
wheel is only downloaded, never installed or imported, and only its ACL headers are extracted,
to a temporary directory that is removed on exit (nothing of CANN is committed here).

From ``cffi_build/acl.h`` this generates one C file that includes the real ``acl/acl.h`` and
``acl/acl_op_compiler.h`` and:

* checks that the type of every function CANN declares is compatible (C's rules, as for an
  assignment of function pointers, but exact about qualifiers) with the type aioge declares,
  so any difference in return or parameter types, or a function CANN lacks, fails to compile;
* checks every scalar and function-pointer typedef with ``__builtin_types_compatible_p``,
  and that every opaque struct and enum type name exists;
* compares every ``#define`` constant and every enumerator with CANN's value *at run time*
  (CANN declares its error codes as ``static const int``, which a ``_Static_assert`` cannot
  read), printing every mismatch.

Exit status 0 when everything matches; 1 on a mismatch, a declaration CANN lacks, or when the
headers cannot be obtained (the reason is printed: a check that cannot run is a failure).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field

import pycparser
from pycparser import c_ast, c_generator

ROOT = pathlib.Path(__file__).resolve().parent.parent
HEADER = ROOT / "cffi_build" / "acl.h"

#: the wheel the check is pinned to (any platform's wheel carries the same headers)
WHEEL_REQ = "torch-npu==2.14.0"
WHEEL_NAME = "torch_npu-2.14.0-cp311-cp311-manylinux_2_28_x86_64.whl"
WHEEL_SHA256 = "7736f7d82cf9f16c7dfc4537f7e7c638153da760273a193455e70857f912189e"
WHEEL_PLATFORM = ("--platform", "manylinux_2_28_x86_64", "--python-version", "3.11", "--abi", "cp311")
INCLUDE_PREFIX = "torch_npu/include/"
REAL_HEADERS = ("acl/acl.h", "acl/acl_op_compiler.h")

#: the standard typedefs acl.h relies on (it is included after <stdint.h>/<stddef.h>)
_STD_TYPES = ("int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t", "size_t")


class CheckError(Exception):
    """The check could not run (no headers, no compiler): reported, exit status 1."""


@dataclass
class Declarations:
    """What ``cffi_build/acl.h`` declares, as the C checks need it."""

    functions: dict[str, str] = field(default_factory=dict)  # name -> pointer declaration "T (*p)(...)"
    typedefs: dict[str, str] = field(default_factory=dict)  # name -> C type expression (scalars, fn ptrs)
    opaque: list[str] = field(default_factory=list)  # struct typedef names
    enum_types: list[str] = field(default_factory=list)  # enum typedef names
    constants: dict[str, int] = field(default_factory=dict)  # #define NAME value and enumerators


def parse_declarations(text: str) -> Declarations:
    """Parse acl.h (cffi's cdef dialect: plain C, ``#define NAME integer``) into :class:`Declarations`."""
    decls = Declarations()
    body_lines = []
    for line in text.splitlines():
        m = re.match(r"\s*#define\s+(\w+)\s+(\S+)\s*$", line)
        if m:
            decls.constants[m.group(1)] = int(m.group(2), 0)
        elif line.lstrip().startswith("#"):
            raise CheckError(f"acl.h: unexpected preprocessor line (cffi cannot parse it either): {line!r}")
        else:
            body_lines.append(line)
    body = re.sub(r"/\*.*?\*/", " ", "\n".join(body_lines), flags=re.S)
    prelude = "".join(f"typedef int {t};\n" for t in _STD_TYPES)
    ast = pycparser.CParser().parse(prelude + body, filename="acl.h")
    gen = c_generator.CGenerator()
    for node in ast.ext[len(_STD_TYPES) :]:
        if isinstance(node, c_ast.Typedef):
            _typedef(node, decls, gen)
        elif isinstance(node, c_ast.Decl) and isinstance(node.type, c_ast.FuncDecl):
            decls.functions[node.name] = _pointer_decl(node, gen)
        elif isinstance(node, c_ast.Decl) and isinstance(node.type, c_ast.Enum):
            _enumerators(node.type, decls)
        else:
            raise CheckError(f"acl.h: a declaration the check does not know how to compare: {gen.visit(node)}")
    return decls


def _typedef(node: c_ast.Typedef, decls: Declarations, gen: c_generator.CGenerator) -> None:
    inner = node.type.type if isinstance(node.type, c_ast.TypeDecl) else None
    if isinstance(inner, c_ast.Struct):
        decls.opaque.append(node.name)
    elif isinstance(inner, c_ast.Enum):
        decls.enum_types.append(node.name)
        _enumerators(inner, decls)
    else:  # a scalar or a function pointer: the type with the declarator's name left out
        clone = c_ast.Typename(name=None, quals=[], align=None, type=_strip_names(node.type))
        decls.typedefs[node.name] = gen.visit(clone)


def _strip_names(t: c_ast.Node) -> c_ast.Node:
    """The type node with every declarator name removed (an abstract type)."""
    if isinstance(t, c_ast.TypeDecl):
        return c_ast.TypeDecl(declname=None, quals=t.quals, align=None, type=t.type)
    if isinstance(t, c_ast.PtrDecl):
        return c_ast.PtrDecl(quals=t.quals, type=_strip_names(t.type))
    if isinstance(t, c_ast.FuncDecl):
        return c_ast.FuncDecl(args=t.args, type=_strip_names(t.type))
    return t


def _enumerators(enum: c_ast.Enum, decls: Declarations) -> None:
    for e in enum.values.enumerators if enum.values else ():
        if e.value is None:
            raise CheckError(f"acl.h: enumerator {e.name} has no explicit value")
        decls.constants[e.name] = _const_value(e.value)


def _const_value(v: c_ast.Node) -> int:
    if isinstance(v, c_ast.UnaryOp) and v.op == "-":
        return -_const_value(v.expr)
    if isinstance(v, c_ast.Constant):
        return int(v.value.rstrip("uUlL"), 0)
    raise CheckError(f"acl.h: enumerator value is not an integer literal: {v}")


def _pointer_decl(node: c_ast.Decl, gen: c_generator.CGenerator) -> str:
    """``T name(args)`` as ``T (*aioge_fp_name)(args)``."""
    func = node.type
    ptr = c_ast.PtrDecl(quals=[], type=c_ast.FuncDecl(args=func.args, type=_rename(func.type, f"aioge_fp_{node.name}")))
    return gen.visit(c_ast.Decl(name=None, quals=[], align=[], storage=[], funcspec=[], type=ptr, init=None,
                                bitsize=None))  # fmt: skip


def _rename(t: c_ast.Node, name: str) -> c_ast.Node:
    if isinstance(t, c_ast.TypeDecl):
        return c_ast.TypeDecl(declname=name, quals=t.quals, align=None, type=t.type)
    if isinstance(t, c_ast.PtrDecl):
        return c_ast.PtrDecl(quals=t.quals, type=_rename(t.type, name))
    raise CheckError(f"acl.h: unexpected return type node {type(t).__name__}")


def render_check(decls: Declarations) -> str:
    """The C program: compile-time checks of types, run-time comparison of values."""
    out = [
        "/* GENERATED by tools/check_cann_headers.py from cffi_build/acl.h -- checked against CANN's headers. */",
        "#include <stdint.h>",
        "#include <stddef.h>",
        "#include <stdio.h>",
    ]
    out += [f'#include "{h}"' for h in REAL_HEADERS]
    out.append("")
    for name, expr in decls.typedefs.items():
        out.append(f'_Static_assert(__builtin_types_compatible_p({name}, {expr}), "typedef {name}: CANN differs");')
    for name in decls.opaque:
        out.append(f"static {name} *aioge_opaque_{name} __attribute__((unused));")
    for name in decls.enum_types:
        out.append(f'_Static_assert(sizeof({name}) == sizeof(int), "enum {name}: not int-sized");')
    out.append("")
    for name, pdecl in decls.functions.items():
        out.append(f"typedef {pdecl};")
        out.append(
            f"_Static_assert(__builtin_types_compatible_p(__typeof__(&{name}), aioge_fp_{name}), "
            f'"{name}: CANN declares another type");'
        )
    out += ["", "int main(void) {", "    int bad = 0;"]
    for name, value in decls.constants.items():
        out.append(
            f"    if ((long long)({name}) != {value}LL) {{ "
            f'printf("constant {name}: CANN has %lld, aioge {value}\\n", (long long)({name})); bad++; }}'
        )
    out += [
        f'    printf("checked against CANN: {len(decls.functions)} functions, {len(decls.typedefs)} typedefs, '
        f"{len(decls.opaque)} opaque types, {len(decls.enum_types)} enum types, {len(decls.constants)} constants "
        f'and enumerators: %s\\n", bad ? "MISMATCH" : "all equal");',
        "    return bad ? 1 : 0;",
        "}",
        "",
    ]
    return "\n".join(out)


def compile_and_run(source: str, include: pathlib.Path, workdir: pathlib.Path) -> tuple[int, str]:
    """Compile the check against ``include`` and run it: (exit status, what it printed or the compiler said)."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise CheckError("no C compiler (cc or gcc) on PATH")
    src, exe = workdir / "aioge_acl_check.c", workdir / "aioge_acl_check"
    src.write_text(source)
    flags = ["-std=gnu11", "-Werror=incompatible-pointer-types", "-Werror=int-conversion",
             "-Werror=implicit-function-declaration", "-w"]  # fmt: skip
    built = subprocess.run([cc, *flags, f"-I{include}", str(src), "-o", str(exe)], capture_output=True, text=True)
    if built.returncode != 0:
        errors = [ln for ln in built.stderr.splitlines() if "error" in ln]
        return 1, "does not compile against CANN's headers:\n" + "\n".join(errors or built.stderr.splitlines())
    ran = subprocess.run([str(exe)], capture_output=True, text=True)
    return ran.returncode, ran.stdout + ran.stderr


def download_wheel(dest: pathlib.Path) -> pathlib.Path:
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", *WHEEL_PLATFORM,
           "--dest", str(dest), WHEEL_REQ]  # fmt: skip
    got = subprocess.run(cmd, capture_output=True, text=True)
    wheel = dest / WHEEL_NAME
    if got.returncode != 0 or not wheel.exists():
        tail = "\n".join(got.stderr.strip().splitlines()[-5:])
        raise CheckError(f"could not download {WHEEL_REQ} ({' '.join(cmd)}):\n{tail}")
    return wheel


def extract_headers(wheel: pathlib.Path, dest: pathlib.Path) -> pathlib.Path:
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if wheel.name == WHEEL_NAME and digest != WHEEL_SHA256:
        raise CheckError(f"{wheel.name}: sha256 {digest}, expected {WHEEL_SHA256}")
    with zipfile.ZipFile(wheel) as z:
        members = [m for m in z.namelist() if m.startswith(INCLUDE_PREFIX + "acl/") and m.endswith(".h")]
        if not members:
            raise CheckError(f"{wheel.name} has no {INCLUDE_PREFIX}acl/*.h")
        for m in members:
            z.extract(m, dest)
    return dest / INCLUDE_PREFIX


def check(include: pathlib.Path, header: pathlib.Path = HEADER) -> tuple[int, str]:
    decls = parse_declarations(header.read_text())
    with tempfile.TemporaryDirectory(prefix="aioge-acl-check-") as tmp:
        return compile_and_run(render_check(decls), include, pathlib.Path(tmp))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--wheel", type=pathlib.Path, help="a torch-npu wheel already on disk")
    src.add_argument("--include", type=pathlib.Path, help="a directory holding acl/acl.h")
    ap.add_argument("--header", type=pathlib.Path, default=HEADER, help="the declarations to check (acl.h)")
    ap.add_argument("--emit", action="store_true", help="print the generated C and exit")
    args = ap.parse_args(argv)
    try:
        if args.emit:
            print(render_check(parse_declarations(args.header.read_text())))
            return 0
        with tempfile.TemporaryDirectory(prefix="aioge-cann-headers-") as tmp:
            if args.include is not None:
                include = args.include
            else:
                wheel = args.wheel or download_wheel(pathlib.Path(tmp))
                include = extract_headers(wheel, pathlib.Path(tmp) / "x")
            status, report = check(include, args.header)
    except (CheckError, pycparser.c_parser.ParseError, zipfile.BadZipFile, OSError) as exc:
        print(f"check_cann_headers: cannot check: {exc}", file=sys.stderr)
        return 1
    print(report.rstrip(), file=sys.stdout if status == 0 else sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
