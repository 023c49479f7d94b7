"""An answer's body decoded within its cap: content codings undone piece by piece, the cap on the decoded size.

A client that lets its HTTP library undo ``Content-Encoding`` checks the size
after the fact: one 1,827-byte read of ``Content-Encoding: gzip, gzip``
decoded to 1 GiB in one synchronous call on the event loop (15 s past a 4 s
deadline, 2 GB resident). Here the executor reads the raw bytes and undoes
the coding itself:

* it offers only what it decodes (:data:`ACCEPT_ENCODING`: ``gzip, deflate``);
* ``identity`` (or no header), ``gzip`` (``x-gzip``) or ``deflate`` (zlib or
  raw) is decoded; a stacked coding (``gzip, gzip``: two non-identity codings)
  or one it did not offer (``br``, ``compress``, ...) is refused as
  :class:`DecodeFault` before a byte is decoded;
* every decompression call is bounded (``max_length``): no call produces
  more than the bytes left under the cap plus one, so each step of the event
  loop does bounded work, and the answer is cut (:class:`TooLarge`) as soon as
  its decoded size passes the cap; the bytes on the wire count against the
  same cap;
* a coded body that does not decode, ends early or carries bytes after its
  end is refused (:class:`DecodeFault`).
"""

from __future__ import annotations

import zlib

#: what the executor offers to decode (sent on every request)
ACCEPT_ENCODING = "gzip, deflate"
_CODINGS = {"gzip": "gzip", "x-gzip": "gzip", "deflate": "deflate"}


class DecodeFault(Exception):
    """The body's coding is refused or its bytes do not decode (the try's ``decode_error``)."""


class TooLarge(Exception):
    """The body passed the cap (on the wire or decoded): the try's ``too_large``."""


class BodyDecoder:
    """Feed raw body pieces, get the decoded body; ``cap`` bounds both the raw and the decoded bytes."""

    def __init__(self, content_encoding: str | None, cap: int) -> None:
        self.cap = int(cap)
        self.raw = 0
        self.size = 0
        self.parts: list[bytes] = []
        codings = [c.strip().lower() for c in (content_encoding or "").split(",")]
        codings = [c for c in codings if c and c != "identity"]
        if len(codings) > 1:
            raise DecodeFault(f"stacked content codings ({content_encoding}) are refused")
        if codings and codings[0] not in _CODINGS:
            raise DecodeFault(f"content coding {codings[0]!r} was not offered (Accept-Encoding: {ACCEPT_ENCODING})")
        self.coding = _CODINGS[codings[0]] if codings else None
        self._z = None
        if self.coding == "gzip":
            self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif self.coding == "deflate":
            self._z = zlib.decompressobj(zlib.MAX_WBITS)
        self._first = b""  # deflate: the first bytes, to retry as raw deflate if they are not zlib

    def _emit(self, data: bytes) -> None:
        self.size += len(data)
        if self.size > self.cap:
            raise TooLarge(f"the answer passed {self.cap} bytes (decoded)")
        if data:
            self.parts.append(data)

    def feed(self, chunk: bytes) -> None:
        """One raw piece of the body."""
        self.raw += len(chunk)
        if self.raw > self.cap:
            raise TooLarge(f"the answer passed {self.cap} bytes")
        if self._z is None:
            self._emit(chunk)
            return
        if self._z.eof:
            if chunk:
                raise DecodeFault(f"bytes after the end of the {self.coding} stream")
            return
        data = chunk
        try:
            while data and not self._z.eof:
                out = self._z.decompress(data, self.cap - self.size + 1)
                self._emit(out)
                data = self._z.unconsumed_tail
            if self._z.eof and (self._z.unused_data or data):
                raise DecodeFault(f"bytes after the end of the {self.coding} stream")
        except zlib.error as exc:
            if self.coding == "deflate" and self.size == 0 and not self._first:
                self._first = chunk  # not zlib-wrapped: try raw deflate once, from the start
                self._z = zlib.decompressobj(-zlib.MAX_WBITS)
                self.raw -= len(chunk)
                self.feed(chunk)
                return
            raise DecodeFault(f"the answer does not decode as {self.coding}: {exc}") from None

    def finish(self) -> bytes:
        """The decoded body once every raw piece was fed (a coded stream that did not end is refused)."""
        if self._z is not None:
            if not self._z.eof:
                raise DecodeFault(f"the {self.coding} stream ends early")
        return b"".join(self.parts)


__all__ = ["ACCEPT_ENCODING", "BodyDecoder", "DecodeFault", "TooLarge"]
