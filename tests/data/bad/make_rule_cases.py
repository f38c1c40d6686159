"""Write the bad-input cases for the "exactly one" rules, misplaced lines and numbers
too large for their column (issue 21, items 1-3): each is sample 004 with one edit.

    python tests/data/bad/make_rule_cases.py

Lines below are 1-based lines of tests/data/samples/004_d7988b213309ef7a.txt.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent
SAMPLE = HERE.parent / "samples" / "004_d7988b213309ef7a.txt"


def duplicate(n: int):
    return lambda lines: [*lines[:n], lines[n - 1], *lines[n:]]


def move(n: int, after: int):
    def edit(lines):
        line = lines[n - 1]
        rest = lines[: n - 1] + lines[n:]
        at = after - (1 if after > n else 0)
        return [*rest[:at], line, *rest[at:]]

    return edit


def replace(n: int, old: str, new: str):
    def edit(lines):
        assert old in lines[n - 1], (n, old)
        return [*lines[: n - 1], lines[n - 1].replace(old, new, 1), *lines[n:]]

    return edit


#: name -> (what it tests, edit, line of the error, part of the message)
CASES = {
    "duplicate-live-range": (
        "A BufferLiveRange line printed twice: a value has one live range.",
        duplicate(73),
        74,
        "a second BufferLiveRange entry for slice_convert_fusion.2{}",
    ),
    "duplicate-peak-entry": (
        "A peak-list line printed twice: a value is listed at the peak once.",
        duplicate(80),
        81,
        "a second peak entry for slice_convert_fusion.1{}",
    ),
    "duplicate-used-block-header": (
        "A Used values header printed twice: one block per value.",
        duplicate(27),
        28,
        "used value 17 ends before its ' from instruction:' line",
    ),
    "duplicate-used-block": (
        "A whole Used values block printed twice.",
        lambda lines: lines[:33] + lines[26:33] + lines[33:],
        34,
        "value 17 listed twice in Used values",
    ),
    "duplicate-positions-line": (
        "' positions:' printed twice in a block.",
        duplicate(28),
        29,
        "'positions:' out of place in used value 17",
    ),
    "duplicate-uses-line": (
        "' uses:' printed twice in a block.",
        duplicate(31),
        32,
        "'uses:' out of place in used value 17",
    ),
    "duplicate-total-line": (
        "'Total bytes used' printed twice.",
        duplicate(15),
        16,
        "a second 'Total bytes used' line",
    ),
    "misplaced-total-line": (
        "'Total bytes used' after the Used values (it was read as instruction text and the "
        "module loaded with no total).",
        move(15, after=59),
        59,
        "'Total bytes used' line out of place",
    ),
    "misplaced-total-in-live-range": (
        "'Total bytes used' inside the HloLiveRange section.",
        move(15, after=76),
        76,
        "'Total bytes used' line out of place",
    ),
    "misplaced-value-line": (
        "A ' value:' line moved below a from instruction line (it was read as more "
        "instruction text; the error then named the Used values block of the value).",
        move(5, after=33),
        33,
        "line out of place after the instruction text of used value 17",
    ),
    "misplaced-allocation-line": (
        "An allocation header moved below a from instruction line.",
        move(6, after=40),
        40,
        "line out of place after the instruction text of used value 18",
    ),
    "duplicate-schedule-step": (
        "An InstructionSequence line printed twice.",
        duplicate(66),
        67,
        "InstructionSequence step 2, expected 3",
    ),
    "duplicate-sequence-header": (
        "'  InstructionSequence:' printed twice.",
        duplicate(63),
        64,
        "a second 'InstructionSequence:' list",
    ),
    "duplicate-peak-header": (
        "'  Live ranges at T (peak):' printed twice.",
        duplicate(77),
        78,
        "a second 'Live ranges at T (peak):' list",
    ),
    "duplicate-stack-trace-line": (
        "A stack-trace tree line printed twice: the remaining bytes no longer add up.",
        duplicate(88),
        89,
        "says remaining 4336 bytes, but the breakdown's total less the bytes listed so far is 2184",
    ),
    "swapped-used-blocks": (
        "Two Used values headers swapped: blocks in id order, named as placed.",
        lambda lines: [*lines[:26], lines[33], *lines[27:33], lines[26], *lines[34:]],
        34,
        "Used values not sorted by id at value 17",
    ),
    "color-past-64-bits": (
        "A memory space (@color) past 64 bits.",
        replace(3, "@0>", "@99999999999999999999>"),
        3,
        "color 99999999999999999999 does not fit in 64 bits",
    ),
    "color-past-32-bits": (
        "An allocation color past 32 bits (allocations.color is INTEGER).",
        replace(4, "maybe-live-out", "color 4294967296, maybe-live-out"),
        4,
        "color 4294967296 is too large for its column (allocations.color",
    ),
    "operand-past-32-bits": (
        "A use's operand number past 32 bits (uses.operand_number is INTEGER).",
        replace(24, "operand 0", "operand 4294967296"),
        24,
        "operand 4294967296 is too large for its column (uses.operand_number",
    ),
    "memory-space-past-32-bits": (
        "A layout memory space S(n) past 32 bits (hlo_values.memory_space is INTEGER).",
        replace(5, "{0}", "{0:S(4294967296)}"),
        5,
        "memory space S(n) 4294967296 in the value shape is too large",
    ),
    "schedule-length-past-32-bits": (
        "'HloLiveRange (max N)' past 32 bits (modules.schedule_length is INTEGER).",
        replace(62, "(max 6)", "(max 4294967296)"),
        62,
        "max 4294967296 is too large for its column (modules.schedule_length",
    ),
}


def main() -> None:
    lines = SAMPLE.read_text().split("\n")
    for name, (what, edit, line, message) in CASES.items():
        (HERE / f"{name}-buffer-assignment.txt").write_text("\n".join(edit(list(lines))))
        (HERE / f"{name}.expected").write_text(f"# {what}\nline: {line}\nmessage: {message}\n")


if __name__ == "__main__":
    main()
