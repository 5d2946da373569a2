"""PDFs written by hand for the read_file tests, and a PNG reader to check what came back.

A text page is a Helvetica text object; an "image-only" page is a filled blue rectangle with no
text at all; the encrypted one uses the standard security handler (RC4, 40-bit, revision 2)
with a real user password, so pdfium asks for it (and opens it with it).
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from collections.abc import Sequence

BLUE = (51, 102, 204)  # the rectangle's fill: 0.2 0.4 0.8 rg
_PAD = bytes.fromhex("28BF4E5E4E758A4164004E56FFFA01082E2E00B6D0683E802F0CA9FE6453697A")


def _rc4(key: bytes, data: bytes) -> bytes:
    s, j = list(range(256)), 0
    for i in range(256):
        j = (j + s[i] + key[i % len(key)]) % 256
        s[i], s[j] = s[j], s[i]
    out, i, j = bytearray(), 0, 0
    for byte in data:
        i = (i + 1) % 256
        j = (j + s[i]) % 256
        s[i], s[j] = s[j], s[i]
        out.append(byte ^ s[(s[i] + s[j]) % 256])
    return bytes(out)


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def build_pdf(
    pages: Sequence[str | None],
    *,
    size: tuple[int, int] = (612, 792),
    user_password: str | None = None,
) -> bytes:
    """A PDF whose page i has the text ``pages[i]`` (lines split on newlines), or, for None, a
    blue rectangle and no text at all. ``user_password`` encrypts it (RC4 40-bit, R2)."""
    count = len(pages)
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(count))
    objects: dict[int, bytes] = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: f"<< /Type /Pages /Kids [{kids}] /Count {count} >>".encode(),
        3: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    }
    streams: dict[int, bytes] = {}
    for i, text in enumerate(pages):
        page, content = 4 + 2 * i, 5 + 2 * i
        objects[page] = (
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {size[0]} {size[1]}] "
            f"/Resources << /Font << /F1 3 0 R >> >> /Contents {content} 0 R >>"
        ).encode()
        if text is None:
            streams[content] = b"0.2 0.4 0.8 rg 100 100 400 600 re f"
        else:
            shows = " ".join(f"({_escape(line)}) Tj T*" for line in text.split("\n"))
            streams[content] = f"BT /F1 12 Tf 14 TL 72 720 Td {shows} ET".encode("latin-1")
    file_id = hashlib.md5(b"toolhub-test").digest()
    key = None
    if user_password is not None:
        permissions = -44
        owner_key = hashlib.md5((b"owner" + _PAD)[:32]).digest()[:5]
        padded = (user_password.encode() + _PAD)[:32]
        owner = _rc4(owner_key, padded)
        key = hashlib.md5(
            padded + owner + permissions.to_bytes(4, "little", signed=True) + file_id
        ).digest()[:5]
        objects[4 + 2 * count] = (
            f"<< /Filter /Standard /V 1 /R 2 /O <{owner.hex()}> /U <{_rc4(key, _PAD).hex()}> "
            f"/P {permissions} >>"
        ).encode()
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets: dict[int, int] = {}
    for number in sorted(objects.keys() | streams.keys()):
        offsets[number] = len(out)
        if number in streams:
            data = streams[number]
            if key is not None:
                object_key = hashlib.md5(key + number.to_bytes(3, "little") + b"\0\0").digest()
                data = _rc4(object_key[:10], data)
            out += f"{number} 0 obj\n<< /Length {len(data)} >>\nstream\n".encode()
            out += data + b"\nendstream\nendobj\n"
        else:
            out += f"{number} 0 obj\n".encode() + objects[number] + b"\nendobj\n"
    xref, total = len(out), max(offsets) + 1
    out += f"xref\n0 {total}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offsets[n]:010d} 00000 n \n".encode() for n in range(1, total))
    trailer = f"<< /Size {total} /Root 1 0 R /ID [<{file_id.hex()}> <{file_id.hex()}>]"
    if key is not None:
        trailer += f" /Encrypt {4 + 2 * count} 0 R"
    out += f"trailer\n{trailer} >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


MIXED = ["Hello page one\nsecond line", None, "Third (page) text"]


def png_info(data: bytes) -> tuple[int, int, tuple[int, int, int]]:
    """Width, height and the centre pixel of an 8-bit RGB PNG with filter type 0 rows."""
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    width, height, depth, colour = struct.unpack(">IIBB", data[16:26])
    assert (depth, colour) == (8, 2)
    pos, idat = 8, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        assert struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])[0] == zlib.crc32(
            kind + body
        )
        if kind == b"IDAT":
            idat += body
        pos += 12 + length
    rows = zlib.decompress(idat)
    row = rows[(height // 2) * (width * 3 + 1) :][: width * 3 + 1]
    assert row[0] == 0
    x = 1 + (width // 2) * 3
    return width, height, (row[x], row[x + 1], row[x + 2])
