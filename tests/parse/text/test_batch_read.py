"""Text modules read as one batch (parse/text/batch_*.py) give, module by module, exactly
the Readings each gives read alone; a module the batch cannot read as the one-module
parse does is left to be parsed alone, never read differently (issue 39 item 2)."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import bufferhouse
from bufferhouse.parse import ParseResult, parse_files, parse_module
from bufferhouse.parse.batch import parse_batch
from bufferhouse.parse.discover import ModuleFiles, discover
from bufferhouse.parse.model import Reading
from bufferhouse.parse.reader import read_lines
from bufferhouse.parse.results import Failed
from bufferhouse.parse.text.batch_finish import finish_batch
from bufferhouse.parse.text.batch_scan import read_batch
from tests.conftest import DATA

#: Every fixture tree holding text dumps (a module's text read as a text module is, with
#: or without a proto beside it).
TREES = sorted(p.name for p in DATA.iterdir() if p.is_dir())


def _text_groups(root: Path) -> list[ModuleFiles]:
    return [g for g in discover([root]) if g.buffer_assignment is not None and g.xplane is None]


def _alone(group: ModuleFiles) -> Reading | Exception:
    try:
        return parse_module(group.dump_files(), group.hlo)
    except Exception as exc:  # the batch must leave every module refused alone
        return exc


def _batched(groups: list[ModuleFiles]) -> list[Reading | None]:
    scanned = read_batch([g.dump_files() for g in groups], [g.hlo for g in groups], 1 << 16)
    return finish_batch(scanned, read_lines).split()


def _assert_same(alone: Reading, batched: Reading, where: str) -> None:
    assert alone.tables.keys() == batched.tables.keys(), where
    for name, table in alone.tables.items():
        got = batched.tables[name]
        assert got.schema.equals(table.schema, check_metadata=True), (where, name)
        assert got.equals(table), (where, name)
    assert batched.facts == alone.facts, where
    assert [(type(w), vars(w)) for w in batched.warnings] == [
        (type(w), vars(w)) for w in alone.warnings
    ], where
    assert batched.sections == alone.sections, where
    assert batched.features == alone.features, where
    assert batched.form == alone.form, where


def _check(groups: list[ModuleFiles]) -> tuple[int, int]:
    """Batched == alone for every module the batch reads; (read, left)."""
    read = left = 0
    for group, got in zip(groups, _batched(groups)):
        alone = _alone(group)
        if got is None:
            left += 1
            continue
        read += 1
        assert not isinstance(alone, Exception), (group.display, alone)
        _assert_same(alone, got, group.display)
    return read, left


@pytest.mark.parametrize("tree", TREES)
def test_a_tree_read_as_one_batch_is_each_module_read_alone(tree: str) -> None:
    groups = _text_groups(DATA / tree)
    if not groups:
        pytest.skip(f"no text module under {tree}")
    read, _ = _check(groups)
    good = sum(not isinstance(_alone(g), Exception) for g in groups)
    assert read >= good // 2, f"{tree}: the batch read {read} of {good} good modules"


@pytest.mark.parametrize("seed", range(4))
def test_any_mix_of_modules_in_any_order_reads_as_alone(seed: int) -> None:
    """Random batches over all the fixtures: no key, offset or lookup crosses modules."""
    everything = [g for tree in TREES for g in _text_groups(DATA / tree)]
    rng = random.Random(seed)
    picked = rng.sample(everything, min(len(everything), 90))
    for start in range(0, len(picked), 30):
        _check(picked[start : start + rng.randint(5, 30)])


def test_the_corpus_reads_mostly_batched() -> None:
    """The batch is the path of the common case: it leaves only what it must."""
    read, left = _check(_text_groups(DATA / "corpus"))
    assert read > 0 and left <= read // 10, (read, left)


# -- bad modules among good ones ------------------------------------------------------------
def _copies(root: Path, copies: int) -> list[Path]:
    root.mkdir()
    out = []
    for i in range(copies):
        for src in sorted((DATA / "samples").glob("*.txt")):
            dest = root / f"c{i:02d}_{src.name}"
            shutil.copy(src, dest)
            out.append(dest)
    return out


def _edit(path: Path, how: str) -> None:
    lines = path.read_text().splitlines(keepends=True)
    if how == "cut":
        path.write_text("".join(lines[: len(lines) // 2]))
        return
    at = next(i for i, line in enumerate(lines) if line.startswith("allocation 1: size "))
    head = lines[at].rstrip("\n").removesuffix(":")
    if how == "attribute":  # a color that is no number
        lines[at] = f"{head}, color blue:\n".replace(", maybe-live-out, color", ", color")
    elif how == "too large":  # a color past the 32 bits of allocations.color
        lines[at] = f"{head.split(',')[0]}, color 99999999999:\n"
    path.write_text("".join(lines))


def _same_result(batched: ParseResult, alone: ParseResult, where: str) -> None:
    assert type(batched) is type(alone), (where, batched, alone)
    if isinstance(alone, Failed):
        assert vars(batched.error) == vars(alone.error), where
        return
    assert batched.row == alone.row, where
    assert batched.tables.keys() == alone.tables.keys(), where
    for name, table in alone.tables.items():
        assert batched.tables[name].equals(table), (where, name)
    assert [vars(w) for w in batched.warnings] == [vars(w) for w in alone.warnings], where


def test_bad_modules_fail_alone_with_their_own_errors(tmp_path: Path) -> None:
    files = _copies(tmp_path / "mixed", 8)  # 40 modules
    hows = {files[3]: "cut", files[17]: "attribute", files[30]: "too large"}
    for path, how in hows.items():
        _edit(path, how)
    groups = discover([tmp_path / "mixed"])
    results = parse_batch(groups)
    failed = {g.buffer_assignment for g, r in zip(groups, results) if isinstance(r, Failed)}
    assert failed == {str(p) for p in hows}
    for group, got in zip(groups, results):
        _same_result(got, parse_files(group), group.display)
    errors = {r.error.path: r.error for r in results if isinstance(r, Failed)}
    cut = errors[str(files[3])]
    assert cut.line > 0 and "truncated" in cut.message
    assert errors[str(files[17])].line > 0
    assert "too large" in errors[str(files[30])].message and errors[str(files[30])].line > 0
    # and through an ingest: the good ones land, each bad one is its located error
    report = bufferhouse.ingest(tmp_path / "mixed", tmp_path / "w.duckdb", jobs=1)
    assert len(report.loaded) == len(files) - len(hows)
    landed = {o.files.display: vars(o.error) for o in report.outcomes if o.status == "failed"}
    assert landed == {str(p): vars(errors[str(p)]) for p in hows}


def test_the_batch_reading_is_the_module_readings_laid_end_to_end() -> None:
    """Each batch table is the one-module tables of the modules it keeps, in batch order,
    with their batch index as an int32 `module` column."""
    groups = _text_groups(DATA / "corpus")[:40]
    scanned = read_batch([g.dump_files() for g in groups], [g.hlo for g in groups], 1 << 16)
    batch = finish_batch(scanned, read_lines)
    kept = [i for i in range(len(groups)) if not batch.left[i]]
    assert kept
    alone = {i: parse_module(groups[i].dump_files(), groups[i].hlo) for i in kept}
    for name, table in batch.tables.items():
        module = pa.array(table["module"].to_numpy())
        table = table.filter(pc.is_in(module, value_set=pa.array(kept, pa.int32())))
        want = pa.concat_tables(
            alone[i]
            .tables[name]
            .append_column("module", pa.array([i] * alone[i].tables[name].num_rows, pa.int32()))
            for i in kept
        )
        assert table.equals(want), name


def test_a_batch_wide_failure_sends_only_its_module_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step the batch cannot take for one module (here: made to raise) leaves that
    module alone, by halving the batch; the others are still read together."""
    import bufferhouse.parse.batch as batch

    files = _copies(tmp_path / "fleet", 4)
    poisoned = str(files[7])
    real_finish, real_parse = batch.finish_batch, batch.parse_files
    alone: list[str] = []

    def finish(scanned, read):
        if poisoned in scanned.ba_paths:
            raise RuntimeError("not batch-wide")
        return real_finish(scanned, read)

    def parse(group, *args, **kwargs):
        alone.append(group.buffer_assignment)
        return real_parse(group, *args, **kwargs)

    monkeypatch.setattr(batch, "finish_batch", finish)
    monkeypatch.setattr(batch, "parse_files", parse)
    groups = discover([tmp_path / "fleet"])
    results = parse_batch(groups)
    assert alone == [poisoned]
    monkeypatch.setattr(batch, "parse_files", real_parse)
    for group, got in zip(groups, results):
        _same_result(got, parse_files(group), group.display)
