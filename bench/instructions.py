"""Time hlo.parse_instruction (common-form regex first) against the general tokenizer alone.

    python bench/instructions.py [--mb 100] [--format stacktrace] [--rounds 5] [--json FILE]

Inputs: the distinct ` from instruction:` texts of the committed corpus and samples, and of
one tests/synth module of --mb MB (built once under bench/_work/ by bench/ingest.py's
build_module, reused after). Ingest parses each distinct text once, so each set is parsed
whole, --rounds times per path, alternating the paths; reported is the best round in
microseconds per text of CPU time (time.process_time: this process only, so other work on
a shared machine inflates it less than wall time), the speedup, and the share of texts the
common-form regex takes. Both paths must agree on every text (same Instruction or the same
error), or the script exits with status 1.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.ingest import build_module
from bufferhouse.parse import hlo

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
MARK = " from instruction:"


def instruction_texts(paths: list[Path]) -> list[str]:
    """Distinct instruction texts, as ingest hands them to parse_instruction."""
    texts: dict[str, None] = {}
    for path in paths:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(MARK):
                    text = line[len(MARK) :].rstrip("\r\n")
                    texts[text[1:] if text.startswith(" ") else text] = None
    return list(texts)


def outcome(parse: Callable[[str], hlo.Instruction], text: str) -> object:
    try:
        return parse(text)
    except hlo.InstructionSyntaxError as e:
        return (type(e), str(e), e.pos)


def best_round(parse: Callable[[str], object], texts: list[str]) -> float:
    start = time.process_time()
    for text in texts:
        outcome(parse, text)
    return time.process_time() - start


def measure(label: str, texts: list[str], rounds: int) -> dict:
    disagree = sum(
        outcome(hlo.parse_instruction, t) != outcome(hlo._parse_general, t) for t in texts
    )
    common = sum(hlo._COMMON_FORM.match(t) is not None for t in texts)
    times: dict[str, float] = {"general": float("inf"), "parse_instruction": float("inf")}
    for _ in range(rounds):
        for name, parse in (
            ("general", hlo._parse_general),
            ("parse_instruction", hlo.parse_instruction),
        ):
            times[name] = min(times[name], best_round(parse, texts))
    row = {
        "set": label,
        "texts": len(texts),
        "common_form_share": common / len(texts),
        "general_us": times["general"] / len(texts) * 1e6,
        "parse_instruction_us": times["parse_instruction"] / len(texts) * 1e6,
        "speedup": times["general"] / times["parse_instruction"],
        "disagreements": disagree,
    }
    print(
        f"{label}: {len(texts):,} distinct texts, {row['common_form_share']:.1%} in the common "
        f"form; general {row['general_us']:.2f} us/text, parse_instruction "
        f"{row['parse_instruction_us']:.2f} us/text ({row['speedup']:.1f}x); "
        f"{disagree} disagreements",
        flush=True,
    )
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=100.0, help="size of the synth module")
    ap.add_argument("--format", default="stacktrace", help="tests/synth format")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", type=Path, help="write the rows here too")
    args = ap.parse_args(argv)
    corpus = sorted(DATA.glob("samples/*.txt")) + sorted(DATA.glob("corpus/**/*.txt.gz"))
    module = build_module(args.mb, args.format)
    rows = [
        measure("corpus + samples", instruction_texts(corpus), args.rounds),
        measure(
            f"synth {args.mb:g} MB {args.format}",
            instruction_texts(sorted(module.glob("*-buffer-assignment.txt"))),
            args.rounds,
        ),
    ]
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 1 if any(r["disagreements"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
