"""The small seeded tier of the mutation fuzzers of bench/ (issue 41): a few hundred inputs
each, the same every run, on every test run. The long runs (50,000 inputs each) and
their counts: bench/RESULTS.md, "Fuzzing the pprof and OOM readers and the pairing".

Each fuzzer fails an input that raises anything but the project's located error, runs
past its time or memory bound, half-loads (an event without all its buffers, a module
whose rows break the invariants) or, for the pairing, pairs a text with a proto whose
assignments differ by the fuzzer's own oracle.
"""

from __future__ import annotations

import pytest

from bench import fuzz_pairing, fuzz_pprof, oom_fuzz


@pytest.mark.parametrize(
    ("fuzzer", "inputs", "seed"),
    [(fuzz_pprof, 400, 1), (oom_fuzz, 200, 2), (fuzz_pairing, 150, 3)],
    ids=["pprof", "oom", "pairing"],
)
def test_a_seeded_tier_finds_nothing(fuzzer, inputs, seed, capsys):
    result = fuzzer.main(["--inputs", str(inputs), "--seed", str(seed)])
    capsys.readouterr()
    assert result["inputs"] == inputs == sum(result["outcomes"].values())
    assert result["failed"] == 0, result["first_failures"]
    # the tier reaches past the first refusal: some inputs read whole, some are refused
    assert len(result["outcomes"]) >= 3, result["outcomes"]
