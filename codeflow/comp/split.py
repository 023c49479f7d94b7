"""Split a large top-level JSON array into shard files, streaming (never loading it whole).

Usage::

    python -m codeflow.comp.split codeflowbench_comp_test.json --out-dir shards/ \\
        --items-per-shard 50 [--start 0] [--end 462] [--tag-source-index] [--progress-every 100]

Reads the array element by element (``json.JSONDecoder.raw_decode`` on a
buffer refilled in 1 MiB reads), keeps the elements whose position is in
``[start, end)`` (stopping once past ``end``), optionally sets
``_source_index`` = that position on each (elements must then be objects),
and writes every ``items-per-shard`` of them to ``<out-dir>/<prefix>_00000.json``,
``_00001.json``... (one shard in memory at a time), then
``<out-dir>/manifest.json`` listing the shards with their index ranges.
Progress goes to standard error every ``--progress-every`` elements.

All or nothing: the shards are written into a hidden folder inside
``--out-dir`` and moved into place only once the whole input was read, so a
refused input (truncated, invalid) leaves no shard behind; a folder that
already holds shards or a manifest is refused (stale shards would mix with
new ones), as is a ``--prefix`` that is not a plain file name.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from simulator.base import cliargs
from simulator.base.errors import UserError, cli_entry
from simulator.base.io_utils import atomic_write_json
from simulator.base.outputs import check_output_name, check_output_path

_WS = re.compile(r"[ \t\n\r]*")
CHUNK = 1 << 20


class _Reader:
    """A text buffer over a file, refilled on demand; ``offset`` counts consumed characters."""

    def __init__(self, fh, chunk: int) -> None:
        self.fh, self.chunk = fh, chunk
        self.buf, self.pos, self.eof, self.base = "", 0, False, 0

    def fill(self) -> None:
        data = self.fh.read(self.chunk)
        if not data:
            self.eof = True
        self.base += self.pos
        self.buf, self.pos = self.buf[self.pos:] + data, 0
        self.chunk *= 2 if len(self.buf) > self.chunk else 1  # long elements: read more at once

    def peek(self) -> str:
        """The next non-whitespace character ('' at the end of the file)."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()
            if self.pos < len(self.buf) or self.eof:
                return self.buf[self.pos:self.pos + 1]
            self.fill()

    @property
    def offset(self) -> int:
        return self.base + self.pos


def iter_json_array(path: str | Path, chunk: int = CHUNK) -> Iterator[tuple[int, Any]]:
    """``(position, element)`` of the top-level JSON array in ``path``, one at a time."""
    decoder = json.JSONDecoder()
    try:
        fh = open(path, encoding="utf-8")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror or exc})") from None
    with fh:
        r = _Reader(fh, chunk)

        def error(what: str) -> UserError:
            return UserError(f"{path}: {what} at character {r.offset}")

        if r.peek() != "[":
            raise error("not a JSON array (expected '[')")
        r.pos += 1
        if r.peek() == "]":
            return
        i = 0
        while True:
            r.peek()
            while True:
                try:
                    item, end = decoder.raw_decode(r.buf, r.pos)
                except json.JSONDecodeError as exc:
                    if r.eof:
                        raise error(f"invalid JSON in element {i} ({exc.msg})") from None
                    r.fill()
                    continue
                if end == len(r.buf) and not r.eof:  # a number may go on in the next read
                    r.fill()
                    continue
                break
            r.pos = end
            yield i, item
            i += 1
            c = r.peek()
            if c == ",":
                r.pos += 1
            elif c == "]":
                r.pos += 1
                if r.peek():
                    raise error("data after the end of the array")
                return
            else:
                raise error(f"expected ',' or ']' after element {i - 1}")


def split(path: str | Path, out_dir: str | Path, per_shard: int, *, start: int = 0,
          end: int | None = None, tag: bool = False, prefix: str = "shard",
          progress_every: int = 0, chunk: int = CHUNK) -> dict[str, Any]:
    """Write the shards and the manifest; returns the manifest."""
    if per_shard < 1:
        raise UserError("--items-per-shard must be at least 1")
    if start < 0 or (end is not None and end < start):
        raise UserError(f"the index range [{start}, {end}) is empty or negative")
    if progress_every < 0:
        raise UserError(f"--progress-every must be an integer >= 0 (0: never), got {progress_every}")
    check_output_name(prefix, flag="--prefix")
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"--out-dir {str(out_dir)!r}: is a file, expected a directory")
    check_output_path(out_dir / f"{prefix}_00000.json", inputs=(path,), inside=out_dir, flag="--prefix")
    check_output_path(out_dir / "manifest.json", inputs=(path,), inside=out_dir, flag="--out-dir")
    stale = sorted(p.name for p in out_dir.glob("*.json")
                   if p.name == "manifest.json" or re.fullmatch(rf"{re.escape(prefix)}_\d+\.json", p.name))
    if stale:
        raise UserError(f"--out-dir {str(out_dir)!r}: already holds {stale[0]}"
                        f"{f' and {len(stale) - 1} more' if len(stale) > 1 else ''}; "
                        "split into an empty folder (stale shards would mix with the new ones)")
    created = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=".split-", dir=out_dir))
    try:
        manifest = _split_into(path, stage, per_shard, start=start, end=end, tag=tag, prefix=prefix,
                               progress_every=progress_every, chunk=chunk)
        for s in manifest["shards"]:
            os.replace(stage / s["file"], out_dir / s["file"])
        atomic_write_json(out_dir / "manifest.json", manifest)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        if created:
            shutil.rmtree(out_dir, ignore_errors=True)  # it was made here and holds nothing else
        raise
    shutil.rmtree(stage, ignore_errors=True)
    return manifest


def _split_into(path: str | Path, out_dir: Path, per_shard: int, *, start: int, end: int | None, tag: bool,
                prefix: str, progress_every: int, chunk: int) -> dict[str, Any]:
    shards: list[dict[str, Any]] = []
    batch: list[Any] = []
    kept: list[int] = []  # positions of the elements in ``batch``
    n_read = 0

    def flush() -> None:
        name = out_dir / f"{prefix}_{len(shards):05d}.json"
        atomic_write_json(name, batch, indent=None)
        shards.append({"file": name.name, "first_index": kept[0], "last_index": kept[-1],
                       "items": len(batch)})

    for i, item in iter_json_array(path, chunk):
        n_read = i + 1
        if progress_every and n_read % progress_every == 0:
            print(f"read {n_read} elements, {len(shards)} shards written", file=sys.stderr)
        if end is not None and i >= end:
            break
        if i < start:
            continue
        if tag:
            if not isinstance(item, dict):
                raise UserError(f"{path}: element {i} is not an object (--tag-source-index)")
            item = {**item, "_source_index": i}
        batch.append(item)
        kept.append(i)
        if len(batch) == per_shard:
            flush()
            batch, kept = [], []
    if batch:
        flush()
    if not shards:
        raise UserError(f"{path}: no element with an index in [{start}, {end}) "
                        f"({n_read} read)")
    return {"source": str(path), "items_per_shard": per_shard, "start": start, "end": end,
            "tagged_source_index": tag, "items_written": sum(s["items"] for s in shards), "shards": shards}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = cliargs.ArgumentParser(
        prog="python -m codeflow.comp.split",
        description="Split a large top-level JSON array into shards of N elements, streaming.")
    ap.add_argument("input", type=cliargs.input_path(), help="JSON file holding one top-level array")
    ap.add_argument("--out-dir", type=cliargs.output_path("dir"), required=True)
    ap.add_argument("--items-per-shard", type=int, required=True)
    ap.add_argument("--start", type=int, default=0, help="first index kept (default 0)")
    ap.add_argument("--end", type=int, default=None, help="first index not kept (default: all)")
    ap.add_argument("--tag-source-index", action="store_true",
                    help="set _source_index = the element's position on each element")
    ap.add_argument("--prefix", default="shard", help="shard file prefix (default shard)")
    ap.add_argument("--progress-every", type=int, default=0,
                    help="print progress to stderr every N elements (default: never)")
    return ap.parse_args(argv)


@cli_entry
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    m = split(args.input, args.out_dir, args.items_per_shard, start=args.start, end=args.end,
              tag=args.tag_source_index, prefix=args.prefix, progress_every=args.progress_every)
    print(f"wrote {m['items_written']} elements in {len(m['shards'])} shards to {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
