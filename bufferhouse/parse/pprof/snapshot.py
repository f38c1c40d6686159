"""A device memory profile as one typed reading: what each sample holds, and its stacks.

jax writes the profile with `jax.profiler.save_device_memory_profile` (XLA's
heap profile): one sample per (Python stack, size, device) of the live buffers,
and per (stack, code size) of the loaded executables, each with two values,
`allocations`/`count` and `space`/`bytes` (count times the size), and the
labels `kind` (buffer or executable) and, for buffers, `device` (as the
runtime names it: `cpu:0`, `cuda:0`, `TPU_0`). The stack is the Python
traceback jax recorded when the buffer was made, innermost frame first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: A frame is jax's own when its file lies under a `jax` or `jaxlib` directory
#: (site-packages or a source checkout): the allocating line of a sample is the
#: innermost frame that is not (jax's own traceback filter draws the same line).
_JAX_FILE = re.compile(r"(^|[/\\])(jax|jaxlib)[/\\]")


def is_jax_file(path: str) -> bool:
    return _JAX_FILE.search(path) is not None


@dataclass(frozen=True)
class Frame:
    """One Python frame of an allocation stack."""

    function: str
    file: str
    line: int

    @property
    def in_jax(self) -> bool:
        return is_jax_file(self.file)


@dataclass(frozen=True)
class LiveSample:
    """One sample: `count` live buffers (or executables) of `bytes` in all, made at `stack`."""

    kind: str
    device: str | None
    count: int
    bytes: int
    #: Index into Snapshot.stacks; None for a sample without a stack.
    stack: int | None
    #: Labels other than kind and device, as `key=value` (a number with its unit).
    labels: tuple[str, ...] = ()


@dataclass
class Snapshot:
    """What one device memory profile holds."""

    path: str
    #: SHA-256 of the uncompressed Profile: the snapshot's identity.
    content_hash: str
    #: Uncompressed bytes of the Profile message.
    bytes_read: int
    #: Profile.time_nanos; None when not recorded (jax leaves it 0).
    time_nanos: int | None
    #: sample_type as `type/unit`, in order.
    sample_types: tuple[str, ...]
    samples: list[LiveSample] = field(default_factory=list)
    #: Distinct stacks, each innermost frame first.
    stacks: list[tuple[Frame, ...]] = field(default_factory=list)

    def source_of(self, stack: int | None) -> Frame | None:
        """The allocating line: the innermost frame outside jax (see is_jax_file)."""
        if stack is None:
            return None
        return next((f for f in self.stacks[stack] if not f.in_jax), None)
