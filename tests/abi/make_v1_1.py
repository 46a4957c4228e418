#!/usr/bin/env python3
"""Derives tests/abi/v1_1/ (a 1.1-shaped copy of the ABI headers) from the
frozen 1.0 copy in tests/abi/v1_0/: what a later minor may do without a
major bump. Every struct that starts with struct_size gets a trailing field,
every table a trailing slot, the plain record bp_ew_instr_t a trailing
field, ops.def one more op and dtypes.def one more dtype; the minor becomes
1 and the size pins become lower bounds (the first released sizes stay).

Run from the repository root: python3 tests/abi/make_v1_1.py
"""
import os
import re
import shutil

SRC = "tests/abi/v1_0/backplane"
DST = "tests/abi/v1_1/backplane"

TABLES = ("bp_host_services", "bpp_core_table", "bpp_op_table", "bpp_caps_table",
          "bpp_exec_table", "bpp_comm_table", "bp_plugin_vtable", "bp_bootstrap")


def grow_structs(text):
    out = []
    stack = []  # names of the open struct bodies
    for line in text.splitlines(keepends=True):
        m = re.match(r"(typedef )?struct (\w+) \{", line)
        if m:
            stack.append([m.group(2), False])
        elif stack and re.match(r"\s+uint32_t struct_size;", line):
            stack[-1][1] = True
        elif stack and re.match(r"\}( \w+)?;", line):
            name, sized = stack.pop()
            if name in TABLES:
                out.append("  void (*slot_1_1)(void); /* appended in 1.1 (test header) */\n")
            elif sized or name == "bp_ew_instr":
                out.append("  uint64_t grown_1_1; /* appended in 1.1 (test header) */\n")
        out.append(line)
    return "".join(out)


def main():
    if os.path.isdir(DST):
        shutil.rmtree(DST)
    shutil.copytree(SRC, DST)
    for name in ("types.h", "plugin.h", "ops.h"):
        path = os.path.join(DST, name)
        with open(path) as f:
            text = f.read()
        text = grow_structs(text)
        text = re.sub(r"BP_STATIC_ASSERT\(sizeof\(([^)]*)\) ==", r"BP_STATIC_ASSERT(sizeof(\1) >=", text)
        text = text.replace("#define BP_ABI_VERSION_MINOR 0", "#define BP_ABI_VERSION_MINOR 1")
        with open(path, "w") as f:
            f.write(text)
    ops = os.path.join(DST, "ops.def")
    with open(ops) as f:
        text = f.read()
    last = max(int(m) for m in re.findall(r"^BP_OP\((\d+),", text, re.M))
    line = ('BP_OP(%d, grown_op_1_1, FUSED, UNARY_EW, BP_IN1(self), BP_OUT1(out), bp_no_attrs_t, '
            'unary_same, "(test) an op of minor 1")\n' % (last + 1))
    idx = [m.end() for m in re.finditer(r"^BP_OP\(.*\n", text, re.M)][-1]
    text = text[:idx] + line + text[idx:]
    with open(ops, "w") as f:
        f.write(text)
    dts = os.path.join(DST, "dtypes.def")
    with open(dts) as f:
        text = f.read()
    last = max(int(m) for m in re.findall(r"^BP_DTYPE_X\(\w+, (\d+),", text, re.M))
    idx = [m.end() for m in re.finditer(r"^BP_DTYPE_X\(.*\n", text, re.M)][-1]
    text = (text[:idx] + 'BP_DTYPE_X(GROWN_1_1, %d, "grown_1_1", 1, 8, UNSIGNED)\n' % (last + 1) +
            text[idx:])
    with open(dts, "w") as f:
        f.write(text)
    types = os.path.join(DST, "types.h")
    with open(types) as f:
        text = f.read()
    text = re.sub(r"BP_DTYPE_COUNT_ = (\d+)", lambda m: "BP_DTYPE_COUNT_ = %d" % (int(m.group(1)) + 1),
                  text)
    with open(types, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
