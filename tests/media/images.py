"""Real images for the media tests, written by Pillow: with EXIF (GPS position, orientation)
and XMP where the format carries them, a pixel bomb's header, an SVG in disguise."""

from __future__ import annotations

import io
import struct

from PIL import ExifTags, Image

from app.media.checks import png_chunk

GPS = {1: "N", 2: (48.0, 51.0, 24.0), 3: "E", 4: (2.0, 21.0, 3.0)}
XMP = (
    b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF '
    b'xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description '
    b'xmlns:exif="http://ns.adobe.com/exif/1.0/" exif:GPSLatitude="48,51.4N"/>'
    b"</rdf:RDF></x:xmpmeta>"
)
SVG = (
    b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(document.cookie)">'
    b"<script>alert(1)</script></svg>"
)
HTML = b"<!doctype html><html><script>alert(document.cookie)</script></html>"


def exif_with_gps(orientation: int = 1) -> bytes:
    exif = Image.Exif()
    if orientation != 1:
        exif[0x0112] = orientation
    exif[ExifTags.IFD.GPSInfo] = GPS
    return exif.tobytes()


def image_bytes(
    fmt: str,
    size: tuple[int, int] = (64, 48),
    color: tuple[int, int, int] = (200, 10, 10),
    gps: bool = True,
    orientation: int = 1,
) -> bytes:
    """A `fmt` (JPEG, PNG, WEBP, GIF) image; with EXIF GPS and XMP where `fmt` holds them."""
    image = Image.new("RGB", size, color)
    out = io.BytesIO()
    options: dict[str, object] = {}
    if gps and fmt in ("JPEG", "WEBP", "PNG"):
        options["exif"] = exif_with_gps(orientation)
    if gps and fmt in ("JPEG", "WEBP"):
        options["xmp"] = XMP
    if fmt == "WEBP":
        options["lossless"] = True
    if gps and fmt == "GIF":  # no EXIF in GIF: a comment saying where
        options["comment"] = b"taken at 48.857N 2.351E"
    image.save(out, fmt, **options)
    data = out.getvalue()
    if gps and fmt == "GIF":  # and an XMP application extension before the trailer
        data = data[:-1] + gif_xmp_extension() + data[-1:]
    if gps and fmt == "PNG":  # Pillow writes no XMP into PNG: an iTXt chunk before IEND
        itxt = png_chunk(b"iTXt", b"XML:com.adobe.xmp\x00\x00\x00\x00\x00" + XMP)
        data = data[:-12] + itxt + data[-12:]
    return data


def gif_xmp_extension() -> bytes:
    """XMP in a GIF (Adobe's way): an application extension whose payload ends in the "magic
    trailer" that makes it read as data sub-blocks."""
    trailer = bytes([1, *range(255, -1, -1), 0])
    return b"\x21\xff\x0bXMP DataXMP" + XMP + trailer


def pixel_bomb(width: int = 50_000, height: int = 50_000) -> bytes:
    """A 1x1 PNG whose header claims `width` x `height` (a few dozen bytes)."""
    data = image_bytes("PNG", size=(1, 1), gps=False)
    ihdr = struct.pack(">II", width, height) + data[24:29]
    return data[:8] + png_chunk(b"IHDR", ihdr) + data[33:]


def pixels(data: bytes) -> tuple[tuple[int, int], bytes]:
    with Image.open(io.BytesIO(data)) as image:
        return image.size, image.convert("RGB").tobytes()
