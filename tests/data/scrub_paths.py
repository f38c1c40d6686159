"""Cut the machine's own paths out of committed fixtures:
a path under a checkout this project's fixtures were made in (a worktree of this
repository, or any checkout in the folder beside it: tests/machine.py reads them from
the machine) loses the checkout's root, so it reads from the repository's root
(`tests/data/sizes/make_sizes.py`, `.venv/lib/python3.11/site-packages/jax/…`: a
library frame still reads as one).

Text dumps and logs are rewritten as text; HloProto dumps (.hlo.pb) and pprof
profiles (.prof, gzipped) and XProf profiles (.xplane.pb.gz, with the HloProtos they embed)
are parsed with bufferhouse's own generated messages, every
string field rewritten, and serialised again, so their nested lengths stay right.
Paths of other machines (the public dumps' /home/…, /root/…) are left as written. Run
from the repository root: `python -m tests.data.scrub_paths FILE…`.
"""

from __future__ import annotations

import gzip
import re
import sys
from pathlib import Path

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from bufferhouse.parse.proto import hlo_pb2, profile_pb2, wire, xplane_pb2
from tests import machine


def _machine_path() -> re.Pattern[str]:
    """A checkout's root: one of the repository's worktrees, or a folder one or two deep
    in the folder beside the checkout that holds one of the repository's top entries
    (a worktree since removed)."""
    tops = "|".join(
        re.escape(t) for t in sorted({p.name for p in machine.ROOT.iterdir()} | {".venv"})
    )
    by_length = sorted(machine.checkouts(), key=lambda c: -len(str(c)))  # a nested one first
    known = [re.escape(f"{c}/") for c in by_length]
    beside = re.escape(f"{machine.ROOT.parent}/") + r"(?:[^/\s]+/){1,2}?(?=(?:" + tops + r")/)"
    return re.compile("|".join([*known, beside]))


MACHINE_PATH = _machine_path()


def scrub_text(text: str) -> str:
    return MACHINE_PATH.sub("", text)


def scrub_message(msg: Message) -> None:
    """Rewrite every string field of `msg` and its sub-messages in place."""
    for field, value in msg.ListFields():
        if field.type == FieldDescriptor.TYPE_STRING:
            if wire.is_repeated(field):
                value[:] = [scrub_text(v) for v in value]
            else:
                setattr(msg, field.name, scrub_text(value))
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            if field.message_type.GetOptions().map_entry:
                items = list(value.items())
                for k, v in items:
                    if isinstance(v, Message):
                        scrub_message(v)
                    elif isinstance(v, str):
                        value[k] = scrub_text(v)
            elif wire.is_repeated(field):
                for v in value:
                    scrub_message(v)
            else:
                scrub_message(value)


def scrub_proto(data: bytes, cls: type[Message]) -> bytes:
    msg = cls()
    msg.ParseFromString(data)
    scrub_message(msg)
    return msg.SerializeToString()


def scrub_xspace(data: bytes) -> bytes:
    """An XProf profile (an XSpace, whose fields are all length-delimited: planes = 1,
    then strings; bufferhouse generates only XPlane): each plane's strings, and the
    HloProto each program's stat embeds."""
    out, at = bytearray(), 0
    while at < len(data):
        key, at = wire.read_varint(data, at)
        length, at = wire.read_varint(data, at)
        payload, at = data[at : at + length], at + length
        if key >> 3 == 1:
            plane = xplane_pb2.XPlane()
            plane.ParseFromString(payload)
            scrub_message(plane)
            for meta in plane.event_metadata.values():
                for stat in meta.stats:
                    if stat.WhichOneof("value") == "bytes_value" and MACHINE_PATH.search(
                        stat.bytes_value.decode("latin-1")
                    ):
                        stat.bytes_value = scrub_proto(stat.bytes_value, hlo_pb2.HloProto)
            payload = plane.SerializeToString()
        else:
            payload = scrub_text(payload.decode()).encode()
        out += wire.encode_varint(key) + wire.encode_varint(len(payload)) + payload
    return bytes(out)


def _gzipped(scrub, old: bytes) -> bytes:
    plain = gzip.decompress(old)
    new = scrub(plain)
    return old if new == plain else gzip.compress(new, compresslevel=9, mtime=0)


def scrub_file(path: Path) -> bool:
    """Rewrite `path` if it holds a machine path; True if it changed."""
    old = path.read_bytes()
    if path.name.endswith(".hlo.pb"):
        new = scrub_proto(old, hlo_pb2.HloProto)
    elif path.suffix == ".prof":
        new = _gzipped(lambda b: scrub_proto(b, profile_pb2.Profile), old)
    elif path.name.endswith(".xplane.pb.gz"):
        new = _gzipped(scrub_xspace, old)
    elif path.suffix == ".gz":
        new = _gzipped(lambda b: scrub_text(b.decode()).encode(), old)
    else:
        new = scrub_text(old.decode()).encode()
    if new == old:
        return False
    path.write_bytes(new)
    return True


def main(paths: list[str]) -> int:
    for p in paths:
        if scrub_file(Path(p)):
            print(f"scrubbed {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
