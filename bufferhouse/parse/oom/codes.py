"""XLA's error codes (`E1000: CompileTimeHbmOom: ...`) and the out-of-memory texts
that carry them.

XLA prefixes an error with its code and name (xla/error/error_codes.h,
XLA_ERROR_CODE_LIST; FormatMessageWithCode: `EXXXX: Name: <message>\\nSee
https://openxla.org/xla/errors/error_XXXX for more details.`). The catalogue
(openxla.org/xla/errors) lists these out-of-memory codes, each read here or by the
older grammar it wraps:

- E0100 RuntimeBufferAllocationFailure: `Error allocating device buffer: Attempting
  to allocate 8.00M. That was not possible. There are 6.43M free.; (0x0x1_HBM0)`.
- E0101 RuntimeProgramAllocationFailure: `Error loading program 'jit_f': Attempting
  to reserve 29.49G at the bottom of memory. ...` (tpu.py reads it).
- E1000 CompileTimeHbmOom: libtpu 0.0.50's one line `Ran out of memory on HBM, the
  total memory required for HLO temporaries (28.00G) exceeds available HBM (15.75G).
  HLO module: jit_step.`; the older `XLA:TPU compile permanent error. Ran out of
  memory in memory space hbm. Used X of Y hbm. ...` (tpu.py), whose libtpu log form
  ends `HLO module: jit_f. Memory usage report:`; and `Aborting compilation early
  because it's unlikely to have enough memory. Requires 3.84T, has 90.96G available.`
- E1001 CompileTimeScopedVmemOom: the one-line `Allocation (size=N) would exceed
  memory (size=M) :: #allocation...` (messages.py).
- E1002 (in the catalogue, not yet in error_codes.h): `TPU TensorCore Hbm usage:
  34.82G, SparseCore Hbm usage 174.10G, exceeding available bytes: 95.74G`.

E3000 CompileTimeSparseCoreAllocationFailure is printed as INTERNAL in words of a
numbered SparseCore memory space, not bytes: not an OOM event here.
"""

from __future__ import annotations

import re

from bufferhouse.parse.oom.sizes import SZ

#: `E1000: CompileTimeHbmOom:` anywhere in a line.
CODE = re.compile(r"(?<![\w])E(?P<code>\d{4}): (?P<name>[A-Z][A-Za-z0-9]+):")
#: The out-of-memory codes of the catalogue and their names (error_codes.h).
OOM_CODES = {
    "E0100": "RuntimeBufferAllocationFailure",
    "E0101": "RuntimeProgramAllocationFailure",
    "E1000": "CompileTimeHbmOom",
    "E1001": "CompileTimeScopedVmemOom",
    "E1002": "CompileTimeHbmOom",
}

HBM_REQUIRED = re.compile(
    r"Ran out of memory on (?P<space>[A-Za-z]+), the total memory required for"
    r" (?P<what>[\w ]+?) \((?P<req>" + SZ + r")\) exceeds available [A-Za-z]+"
    r" \((?P<cap>" + SZ + r")\)"
)
ABORT_EARLY = re.compile(
    r"Aborting compilation early because it's unlikely to have enough memory\."
    r" Requires (?P<req>" + SZ + r"), has (?P<cap>" + SZ + r") available"
)
SPARSE_CORE = re.compile(
    r"TensorCore Hbm usage:? (?P<tc>" + SZ + r"), SparseCore Hbm usage:? (?P<sc>" + SZ + r"),"
    r" exceeding available bytes:? (?P<cap>" + SZ + r")"
)
DEVICE_BUFFER = re.compile(
    r"Error allocating device buffer: Attempting to allocate (?P<req>" + SZ + r")\."
    r"(?: That was not possible\.)?(?: There are (?P<free>" + SZ + r") free\.)?"
    r"(?:[;\s]*\((?P<device>[^)]*)\))?"
)
HLO_MODULE = re.compile(r"HLO module: (?P<name>[\w.\-]+?)\.?(?:\s|$)")
SPACE_OF_DEVICE = re.compile(r"_(?P<space>[A-Za-z]+)\d*$")

#: Forms read here that start a message (start_kind): their first line is all they print.
COMPILE_FORMS = (HBM_REQUIRED, ABORT_EARLY, SPARSE_CORE)
RUNTIME_FORMS = (DEVICE_BUFFER,)


def starts(text: str) -> str | None:
    """`tpu_compile` or `tpu_runtime` when the line is one of the coded forms read here."""
    if any(p.search(text) for p in COMPILE_FORMS):
        return "tpu_compile"
    if any(p.search(text) for p in RUNTIME_FORMS):
        return "tpu_runtime"
    return None
