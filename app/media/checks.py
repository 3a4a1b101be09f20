"""What an upload must be before it becomes a media object (decision 0080): one of four image
types, its magic bytes matching the declared type, at most MEDIA_MAX_BYTES, dimensions read
from the header (never a decode) and at most MEDIA_MAX_PIXELS, and its metadata (EXIF, XMP:
GPS positions among them) removed without re-encoding the image.

Stripping works on the container, never on the pixels:
- JPEG: APP1 segments holding Exif or XMP, APP13 (Photoshop IRB/IPTC: places, names) and
  comments (COM) are dropped; an EXIF orientation other than 1 comes back as a minimal APP1
  holding only it (the picture stays upright); from the start of scan on, copied as it is;
- PNG: eXIf and the text chunks (tEXt, zTXt, iTXt: XMP and "Raw profile type exif" travel in
  them) are dropped;
- WebP: the EXIF and XMP chunks are dropped and VP8X's flags for them cleared;
- GIF carries no EXIF: its comment extensions and XMP application extensions are dropped.
The result is parsed again: a container this code could not follow is refused, not stored.
"""

from __future__ import annotations

import io
import struct
import warnings
import zlib
from dataclasses import dataclass

from PIL import Image, UnidentifiedImageError

from app.errors import BadInput
from app.media.constants import CONTENT_TYPES, GIF, JPEG, PILLOW_FORMATS, PNG, WEBP

ORIENTATION_TAG = 0x0112


@dataclass(frozen=True, slots=True)
class CheckedImage:
    """Bytes fit to store: the type they are, their size in pixels, metadata gone."""

    data: bytes
    content_type: str
    width: int
    height: int


def check_content_type(content_type: str) -> str:
    if content_type not in CONTENT_TYPES:
        raise BadInput(f"An upload is one of {', '.join(CONTENT_TYPES)} (not {content_type!r}).")
    return content_type


def sniff(data: bytes) -> str | None:
    """The type the magic bytes say, among the four accepted; None for anything else."""
    if data.startswith(b"\xff\xd8\xff"):
        return JPEG
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return PNG
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return GIF
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return WEBP
    return None


def dimensions(data: bytes, content_type: str, max_pixels: int) -> tuple[int, int]:
    """(width, height) from the header: Image.open parses headers only, and the pixel bound is
    checked before anything could decode. Pillow's own bomb refusal is caught too."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=[PILLOW_FORMATS[content_type]]) as image:
                width, height = image.size
    except Image.DecompressionBombError:
        raise BadInput("The image has too many pixels.") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, struct.error):
        raise BadInput("The upload is not a readable image of its declared type.") from None
    if width < 1 or height < 1:
        raise BadInput("The image has no pixels.")
    if width * height > max_pixels:
        raise BadInput(f"The image has {width}x{height} pixels; at most {max_pixels} in all.")
    return width, height


def check_image(data: bytes, declared: str, max_bytes: int, max_pixels: int) -> CheckedImage:
    """The upload's bytes checked and stripped, or BadInput saying what is wrong."""
    check_content_type(declared)
    if len(data) > max_bytes:
        raise BadInput(f"An image is at most {max_bytes} bytes.")
    found = sniff(data)
    if found != declared:
        raise BadInput(f"The bytes are not {declared} (they look like {found or 'no image'}).")
    width, height = dimensions(data, declared, max_pixels)
    stripped = strip_metadata(data, declared)
    if dimensions(stripped, declared, max_pixels) != (width, height):
        raise BadInput("The image could not be stored as sent.")  # never a guess
    return CheckedImage(stripped, declared, width, height)


def strip_metadata(data: bytes, content_type: str) -> bytes:
    try:
        if content_type == JPEG:
            return _strip_jpeg(data)
        if content_type == PNG:
            return _strip_png(data)
        if content_type == WEBP:
            return _strip_webp(data)
        if content_type == GIF:
            return _strip_gif(data)
    except (IndexError, struct.error, ValueError):
        raise BadInput("The image's container is malformed.") from None
    return data


# -- JPEG --------------------------------------------------------------------------------------

_EXIF_ID = b"Exif\x00\x00"
_XMP_IDS = (b"http://ns.adobe.com/xap/1.0/\x00", b"http://ns.adobe.com/xmp/extension/\x00")
_APP1, _APP13, _COM, _SOS, _EOI = 0xE1, 0xED, 0xFE, 0xDA, 0xD9
# Markers without a length: TEM, RST0-7, SOI.
_STANDALONE = {0x01, 0xD8, *range(0xD0, 0xD8)}


def _orientation(data: bytes) -> int:
    with Image.open(io.BytesIO(data), formats=["JPEG"]) as image:
        value = image.getexif().get(ORIENTATION_TAG, 1)
    return value if isinstance(value, int) and 1 <= value <= 8 else 1


def _orientation_segment(orientation: int) -> bytes:
    exif = Image.Exif()
    exif[ORIENTATION_TAG] = orientation
    payload = _EXIF_ID + exif.tobytes()
    return b"\xff" + bytes([_APP1]) + struct.pack(">H", len(payload) + 2) + payload


def _strip_jpeg(data: bytes) -> bytes:
    orientation = _orientation(data)
    out = bytearray(data[:2])  # SOI
    i = 2
    while True:
        if data[i] != 0xFF:
            raise ValueError("not a marker")
        while data[i] == 0xFF:  # fill bytes
            i += 1
        marker = data[i]
        i += 1
        if marker in _STANDALONE:
            out += bytes([0xFF, marker])
            continue
        if marker == _EOI:
            out += bytes([0xFF, marker])
            return bytes(out)
        (length,) = struct.unpack(">H", data[i : i + 2])
        if length < 2 or i + length > len(data):
            raise ValueError("segment past the end")
        payload = data[i + 2 : i + length]
        segment = bytes([0xFF, marker]) + data[i : i + length]
        i += length
        if marker == _SOS:  # the entropy-coded data and what follows: as they are
            if orientation != 1:
                out += _orientation_segment(orientation)
            return bytes(out + segment + data[i:])
        if marker == _APP1 and (payload.startswith(_EXIF_ID) or payload.startswith(_XMP_IDS)):
            continue
        if marker in (_APP13, _COM):
            continue
        out += segment


# -- PNG ---------------------------------------------------------------------------------------

_PNG_DROPPED = {b"eXIf", b"tEXt", b"zTXt", b"iTXt"}


def _strip_png(data: bytes) -> bytes:
    out = bytearray(data[:8])
    i = 8
    while i < len(data):
        (length,) = struct.unpack(">I", data[i : i + 4])
        kind = data[i + 4 : i + 8]
        end = i + 12 + length
        if end > len(data):
            raise ValueError("chunk past the end")
        if kind not in _PNG_DROPPED:
            out += data[i:end]
        i = end
        if kind == b"IEND":
            return bytes(out)
    raise ValueError("no IEND")


def png_chunk(kind: bytes, payload: bytes) -> bytes:
    """A PNG chunk with its CRC (the tests build headers with it)."""
    crc = zlib.crc32(kind + payload) & 0xFFFFFFFF
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", crc)


# -- WebP --------------------------------------------------------------------------------------

_WEBP_DROPPED = {b"EXIF", b"XMP "}
_VP8X_EXIF, _VP8X_XMP = 0x08, 0x04


def _strip_webp(data: bytes) -> bytes:
    (riff_size,) = struct.unpack("<I", data[4:8])
    end = min(len(data), 8 + riff_size)
    out = bytearray(b"WEBP")
    i = 12
    while i + 8 <= end:
        kind = data[i : i + 4]
        (size,) = struct.unpack("<I", data[i + 4 : i + 8])
        stop = i + 8 + size + (size & 1)
        if i + 8 + size > end:
            raise ValueError("chunk past the end")
        chunk = bytearray(data[i:stop])
        i = stop
        if kind in _WEBP_DROPPED:
            continue
        if kind == b"VP8X":
            chunk[8] &= ~(_VP8X_EXIF | _VP8X_XMP) & 0xFF
        out += chunk
    return b"RIFF" + struct.pack("<I", len(out)) + bytes(out)


# -- GIF ---------------------------------------------------------------------------------------

_GIF_EXTENSION, _GIF_IMAGE, _GIF_TRAILER = 0x21, 0x2C, 0x3B
_GIF_COMMENT, _GIF_APPLICATION = 0xFE, 0xFF
_GIF_XMP_ID = b"XMP DataXMP"


def _gif_sub_blocks(data: bytes, i: int) -> int:
    """The index after a run of data sub-blocks starting at `i` (ended by a 0 size)."""
    while data[i]:
        i += data[i] + 1
    return i + 1


def _color_table(flags: int) -> int:
    return 3 * (2 ** ((flags & 0x07) + 1)) if flags & 0x80 else 0


def _strip_gif(data: bytes) -> bytes:
    i = 13 + _color_table(data[10])  # header and logical screen descriptor
    out = bytearray(data[:i])
    while True:
        block = data[i]
        if block == _GIF_TRAILER:
            return bytes(out + data[i : i + 1])
        if block == _GIF_IMAGE:
            end = i + 10 + _color_table(data[i + 9]) + 1  # descriptor, table, LZW code size
            end = _gif_sub_blocks(data, end)
            out += data[i:end]
        elif block == _GIF_EXTENSION:
            label = data[i + 1]
            end = _gif_sub_blocks(data, i + 2)
            xmp = label == _GIF_APPLICATION and data[i + 3 : i + 14] == _GIF_XMP_ID
            if label != _GIF_COMMENT and not xmp:
                out += data[i:end]
        else:
            raise ValueError("not a GIF block")
        i = end
