"""The protobuf forms on the oldest protobuf runtime pyproject allows, and in pure Python.

pyproject says protobuf>=FLOOR and a venv resolves the newest (7.x), while users
beside TensorFlow and other stacks run 4.x, 5.x or 6.x. The committed *_pb2.py
come from an old protoc (parse/proto/regen.py) so that they load there; this
test proves it: protobuf FLOOR is pip-installed once into the test cache (a few
MB; BUFFERHOUSE_TEST_CACHE moves it) and put first on the path of a subprocess
that ingests the proto fixtures (.hlo.pb dumps and an XProf profile). Every
table must equal, row for row, what the installed runtime makes of them. Code
that refuses the runtime (protoc 27+ writes a version check) fails here.

Both runtimes run again in pure Python (PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION
=python, the workaround some of those stacks tell users to set): the generated
code takes another branch there, and that runtime raises UnicodeDecodeError, not
DecodeError, for a string that is not UTF-8, which must still be a located error.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import DATA, ROOT, pip_target, run_with

pytestmark = pytest.mark.slow  # installs and runs older protobuf releases

PROTO = DATA / "proto"
TREES = [PROTO / "proto_only", PROTO / "profile", PROTO / "profile_dump"]

#: Ingest the trees with whatever protobuf comes first on the path; digest every table.
SCRIPT = r"""
import hashlib, json, sys
import duckdb
import google.protobuf
from google.protobuf.internal import api_implementation
import bufferhouse

db, trees = sys.argv[1], sys.argv[2:]
report = bufferhouse.ingest(trees, db=db, jobs=1)
out = {
    "protobuf": google.protobuf.__version__,
    "protobuf_file": google.protobuf.__file__,
    "implementation": api_implementation.Type(),
    "loaded": len(report.loaded),
    "skipped": len(report.skipped),
    "failed": [str(o.error) for o in report.failed],
    "tables": {},
}
# Ids and times differ between two ingests of the same files; everything else may not.
SKIP = {"module_id", "run_id", "started_at"}
con = duckdb.connect(db, read_only=True)
tables = con.execute(
    "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'"
    " ORDER BY table_name"
).fetchall()
for (table,) in tables:
    columns = [
        name
        for name, in con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ?"
            " ORDER BY ordinal_position",
            [table],
        ).fetchall()
        if name not in SKIP and not name.endswith(("_module_id", "_run_id"))
    ]
    rows = con.execute(
        "SELECT " + ", ".join(f'"{c}"' for c in columns) + f' FROM "{table}"'
    ).fetchall()
    lines = sorted(json.dumps(r, sort_keys=True, default=repr) for r in rows)
    out["tables"][table] = [len(rows), hashlib.sha256("\n".join(lines).encode()).hexdigest()]
con.close()

# A string that is not UTF-8, in an HloProto and in an XSpace: a located error either way.
from bufferhouse.errors import DumpError
from bufferhouse.parse.proto import decode, hlo_pb2, xplane_pb2
from bufferhouse.parse.proto.wire import encode_varint
from bufferhouse.parse.proto.xplane import list_programs

def not_utf8(message):
    message.name = "\u00e9" * 4
    return message.SerializeToString().replace("\u00e9".encode() * 4, b"\xff" * 8)

out["bad_strings"] = []
plane = not_utf8(xplane_pb2.XPlane())
with open("bad.xplane.pb", "wb") as f:
    f.write(encode_varint(1 << 3 | 2) + encode_varint(len(plane)) + plane)
for name, read in [
    ("bad.hlo.pb", lambda: decode.decode_hlo_proto(not_utf8(hlo_pb2.HloProto().hlo_module), "bad.hlo.pb")),
    ("bad.xplane.pb", lambda: list_programs("bad.xplane.pb")),
]:
    try:
        read()
        out["bad_strings"].append([name, "read"])
    except DumpError as exc:
        out["bad_strings"].append([exc.path, exc.message.split(":")[0]])
print(json.dumps(out))
"""


def protobuf_floor() -> str:
    """The X of pyproject's `protobuf>=X`."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    found = re.findall(r'"protobuf>=([0-9.]+)"', text)
    assert len(found) == 1, found
    return found[0]


def _ingest(tmp_path: Path, name: str, first_on_path: Path | None, impl: str) -> dict:
    work = tmp_path / f"{name}-{impl}"
    work.mkdir()
    args = [SCRIPT, str(work / "w.duckdb"), *map(str, TREES)]
    return run_with(args, work, first_on_path, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=impl)


@pytest.fixture(scope="session")
def oldest_protobuf() -> Path:
    """A directory holding the oldest protobuf pyproject allows, to put first on the path."""
    floor = protobuf_floor()
    return pip_target(f"protobuf=={floor}", f"protobuf-{floor}", no_deps=True)


@pytest.fixture(scope="module")
def newest_upb(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The installed protobuf in its C runtime (upb, what pip's wheels give): the baseline."""
    return _ingest(tmp_path_factory.mktemp("pb"), "newest", None, "upb")


@pytest.mark.parametrize(
    ("runtime", "impl"), [("oldest", "upb"), ("oldest", "python"), ("newest", "python")]
)
def test_the_proto_forms_on_every_runtime(
    tmp_path: Path, oldest_protobuf: Path, newest_upb: dict, runtime: str, impl: str
) -> None:
    run = _ingest(tmp_path, runtime, oldest_protobuf if runtime == "oldest" else None, impl)
    newest = newest_upb
    if runtime == "oldest":
        assert run["protobuf"] == protobuf_floor()
        assert run["protobuf_file"].startswith(str(oldest_protobuf)), run["protobuf_file"]
        assert newest["protobuf"] != run["protobuf"]
    else:
        assert run["protobuf"] == newest["protobuf"]
    assert newest["implementation"] == "upb"  # the C runtime the decoders are written for
    assert run["implementation"] == impl
    for out in (newest, run):
        assert out["failed"] == []
        assert out["loaded"] == 6 + 2 + 2  # proto_only, the profile's programs, its dump
        assert out["skipped"] == 1  # before_optimizations.hlo.pb: no buffer assignment
        for table in ("modules", "allocations", "hlo_values", "assignments", "heap_events"):
            assert out["tables"][table][0] > 0, table
        assert out["bad_strings"] == [
            ["bad.hlo.pb", "not a readable HloProto"],
            ["bad.xplane.pb", "not a readable XProf profile (XSpace)"],
        ]
    assert run["tables"] == newest["tables"]
