"""Reading an error-coded OOM line into its event: the code, its name, the module, and
what was required and available (the patterns are codes.py's, the Event grammar's; apart
from both so neither imports the other)."""

from __future__ import annotations

from bufferhouse.parse.oom.codes import (
    ABORT_EARLY,
    CODE,
    DEVICE_BUFFER,
    HBM_REQUIRED,
    HLO_MODULE,
    SPACE_OF_DEVICE,
    SPARSE_CORE,
)
from bufferhouse.parse.oom.grammar import Event


def read_code(ev: Event, text: str) -> None:
    """The error code, its name and the module the line names (`HLO module: jit_f.`)."""
    if m := CODE.search(text):
        ev.fields["error_code"] = f"E{m.group('code')}"
        ev.fields["error_name"] = m.group("name")
    if m := HLO_MODULE.search(text):
        ev.fields["program_name"] = m.group("name")


def read_first(ev: Event, text: str) -> None:
    """The figures of a coded form's line: what was required, what was available."""
    line = ev.line
    if m := HBM_REQUIRED.search(text):
        ev.fields.setdefault("memory_space", m.group("space").lower())
        ev.figure("used", m.group("req"), line)
        if m.group("what") == "HLO temporaries":
            ev.figure("program_requirement/hlo_temp", m.group("req"), line)
        ev.figure("capacity", m.group("cap"), line)
    elif m := ABORT_EARLY.search(text):
        ev.fields.setdefault("memory_space", "hbm")
        ev.figure("used", m.group("req"), line)
        ev.figure("capacity", m.group("cap"), line)
    elif m := SPARSE_CORE.search(text):
        ev.fields.setdefault("memory_space", "hbm")
        ev.figure("tensorcore_usage", m.group("tc"), line)
        ev.figure("sparsecore_usage", m.group("sc"), line)
        ev.figure("capacity", m.group("cap"), line)
        if "tensorcore_usage" in ev.figures and "sparsecore_usage" in ev.figures:
            ev.figures["used"] = ev.figures["tensorcore_usage"] + ev.figures["sparsecore_usage"]
    elif m := DEVICE_BUFFER.search(text):
        ev.figure("requested", m.group("req"), line)
        if m.group("free"):
            ev.figure("free", m.group("free"), line)
        device = m.group("device") or ""
        if sm := SPACE_OF_DEVICE.search(device):
            ev.fields.setdefault("memory_space", sm.group("space").lower())
        if device:
            ev.fields["device"] = device
