"""The ctypes structs of sbx/_lib.py have the C compiler's sizes and offsets."""
import ctypes
import pathlib
import shutil
import subprocess

import pytest

from sbx import _lib

TOP = pathlib.Path(__file__).resolve().parents[2]


def test_struct_layouts_match_the_headers(tmp_path):
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler to compare with")
    inc = pathlib.Path(_lib.LIB_PATH).parent / "include" / "sbx"
    lines = ['#include <stddef.h>', '#include <stdio.h>', '#include "sbx.h"',
             '#include "sbx_runner.h"', 'int main(void) {']
    want = []
    for cname, cls in _lib.STRUCTS.items():
        lines.append('printf("%%zu\\n", sizeof(struct %s));' % cname)
        want.append(ctypes.sizeof(cls))
        for field in cls._fields_:
            lines.append('printf("%%zu\\n", offsetof(struct %s, %s));' % (cname, field[0]))
            want.append(getattr(cls, field[0]).offset)
    lines.append("return 0; }")
    src = tmp_path / "abi.c"
    src.write_text("\n".join(lines))
    exe = tmp_path / "abi"
    subprocess.run([cc, "-I", str(inc), "-o", str(exe), str(src)], check=True)
    got = [int(x) for x in subprocess.run([str(exe)], capture_output=True, text=True,
                                          check=True).stdout.split()]
    assert len(got) == len(want)
    assert got == want
