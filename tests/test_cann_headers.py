"""tools/check_cann_headers.py: the generated check catches every kind of drift from CANN's headers.

The check against the real headers (the pinned torch-npu wheel, downloaded) runs in `.ci/run`;
these tests run the same generator and compiler offline, against small stand-in headers, to
prove that a difference of each kind fails and that equality passes.
"""

from __future__ import annotations

import importlib.util
import pathlib
import re
import shutil
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("check_cann_headers", ROOT / "tools" / "check_cann_headers.py")
assert _spec is not None and _spec.loader is not None
chk = importlib.util.module_from_spec(_spec)
sys.modules["check_cann_headers"] = chk
_spec.loader.exec_module(chk)

pytestmark = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler")

OURS = """\
typedef int aclError;
typedef void *aclrtStream;
typedef struct aclDataBuffer aclDataBuffer;
typedef void (*aclrtCallback)(void *userData);
#define ACL_ERROR_INVALID_PARAM 100000
#define ACL_EVENT_SYNC 0x1
typedef enum { ACL_DT_UNDEFINED = -1, ACL_FLOAT = 0, ACL_BF16 = 27 } aclDataType;
aclError aclrtFree(void *devPtr);
aclDataBuffer *aclCreateDataBuffer(void *data, size_t size);
aclError aclrtLaunchCallback(aclrtCallback fn, void *userData, aclrtStream stream);
const char *aclGetRecentErrMsg(void);
"""

# as CANN writes them: error codes as static const int, macros, an enum with a tag
REAL_ACL = """\
#include <stdint.h>
#include <stddef.h>
typedef int aclError;
typedef void *aclrtStream;
typedef struct aclDataBuffer aclDataBuffer;
typedef void (*aclrtCallback)(void *userData);
static const int ACL_ERROR_INVALID_PARAM = 100000;
#define ACL_EVENT_SYNC 0x00000001u
typedef enum aclDataType_ { ACL_DT_UNDEFINED = -1, ACL_FLOAT = 0, ACL_BF16 = 27 } aclDataType;
extern aclError aclrtFree(void *devPtr);
extern aclDataBuffer *aclCreateDataBuffer(void *data, size_t size);
extern aclError aclrtLaunchCallback(aclrtCallback fn, void *userData, aclrtStream stream);
extern const char *aclGetRecentErrMsg(void);
"""


def _run(tmp_path: pathlib.Path, ours: str, real: str) -> tuple[int, str]:
    inc = tmp_path / "inc"
    (inc / "acl").mkdir(parents=True)
    (inc / "acl" / "acl.h").write_text(real)
    (inc / "acl" / "acl_op_compiler.h").write_text("/* nothing more */\n")
    header = tmp_path / "ours.h"
    header.write_text(ours)
    result: tuple[int, str] = chk.check(inc, header)
    return result


def test_equal_declarations_pass(tmp_path):
    status, report = _run(tmp_path, OURS, REAL_ACL)
    assert status == 0, report
    assert "4 functions, 3 typedefs, 1 opaque types, 1 enum types, 5 constants and enumerators: all equal" in report


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        # a parameter's type
        (("aclError aclrtFree(void *devPtr);", "aclError aclrtFree(const void *devPtr);"), "aclrtFree"),
        # a return type
        (("const char *aclGetRecentErrMsg(void);", "char *aclGetRecentErrMsg(void);"), "aclGetRecentErrMsg"),
        # a parameter too many
        (("aclError aclrtFree(void *devPtr);", "aclError aclrtFree(void *devPtr, int flags);"), "aclrtFree"),
        # a function CANN does not have
        (("const char *aclGetRecentErrMsg(void);", "const char *aclGetRecentErrMsg(void);\nvoid aclNoSuch(void);"),
         "aclNoSuch"),
        # a typedef
        (("typedef int aclError;", "typedef long aclError;"), "aclError"),
        # a function-pointer typedef
        (("typedef void (*aclrtCallback)(void *userData);", "typedef int (*aclrtCallback)(void *userData);"),
         "aclrtCallback"),
        # an opaque type CANN does not have
        (("typedef struct aclDataBuffer aclDataBuffer;",
          "typedef struct aclDataBuffer aclDataBuffer;\ntypedef struct aclNoSuchT aclNoSuchT;"), "aclNoSuchT"),
    ],
)  # fmt: skip
def test_declaration_drift_fails_to_compile(tmp_path, edit, expected):
    old, new = edit
    assert old in OURS
    status, report = _run(tmp_path, OURS.replace(old, new), REAL_ACL)
    assert status != 0
    assert "does not compile against CANN's headers" in report
    assert expected in report


@pytest.mark.parametrize(
    ("old", "new", "line"),
    [
        ("#define ACL_ERROR_INVALID_PARAM 100000", "#define ACL_ERROR_INVALID_PARAM 100001",
         "constant ACL_ERROR_INVALID_PARAM: CANN has 100000, aioge 100001"),
        ("#define ACL_EVENT_SYNC 0x1", "#define ACL_EVENT_SYNC 0x2", "constant ACL_EVENT_SYNC: CANN has 1, aioge 2"),
        ("ACL_BF16 = 27", "ACL_BF16 = 28", "constant ACL_BF16: CANN has 27, aioge 28"),
        ("ACL_DT_UNDEFINED = -1", "ACL_DT_UNDEFINED = -2", "constant ACL_DT_UNDEFINED: CANN has -1, aioge -2"),
    ],
)  # fmt: skip
def test_value_drift_is_reported_at_run_time(tmp_path, old, new, line):
    status, report = _run(tmp_path, OURS.replace(old, new), REAL_ACL)
    assert status == 1
    assert line in report
    assert "MISMATCH" in report


def test_a_constant_cann_lacks_fails(tmp_path):
    status, report = _run(tmp_path, OURS + "#define ACL_NO_SUCH_CONSTANT 7\n", REAL_ACL)
    assert status != 0
    assert "ACL_NO_SUCH_CONSTANT" in report


def test_the_project_header_parses_completely():
    # every declaration of cffi_build/acl.h is one the check compares (nothing silently skipped)
    decls = chk.parse_declarations(chk.HEADER.read_text())
    text = chk.HEADER.read_text()
    assert set(decls.functions) == set(re.findall(r"^[A-Za-z].*?\b(acl\w+)\(", text, re.M))
    assert len(decls.functions) >= 84
    assert len(decls.constants) >= 263
    assert {"aclDataType", "aclFormat", "aclrtMemcpyKind"} <= set(decls.enum_types)


def test_unobtainable_headers_fail_with_a_reason(tmp_path, capsys):
    bogus = tmp_path / "not-a-wheel.whl"
    bogus.write_bytes(b"not a zip")
    assert chk.main(["--wheel", str(bogus)]) == 1
    assert "cannot check" in capsys.readouterr().err
