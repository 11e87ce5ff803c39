"""Putting documents in a user's files the way an upload does, and ingesting them in place;
hostile PDFs built in place (one content stream on every page, a stream slow to read)."""

from __future__ import annotations

import random
import uuid
from datetime import timedelta
from io import BytesIO

from fpdf import FPDF
from pypdf import PdfWriter
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

from app.files.roots import user_root
from app.files.sniff import sniff
from app.knowledge.ingest import is_document
from app.models import Upload
from app.services import Services
from tests.knowledge.corpus import FILLER


async def add_document(
    services: Services, user_id: str | uuid.UUID, filename: str, data: bytes, ingest: bool = True
) -> uuid.UUID:
    """An upload row and its file, ingested now (not in the background) unless told not to."""
    upload_id = uuid.uuid4()
    owner = uuid.UUID(str(user_id))
    relative = f"uploads/{upload_id}/{filename}"
    path = user_root(services.settings.data_dir, owner) / relative
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    mime = sniff(data[:4096])
    async with services.sessions() as db:
        db.add(
            Upload(
                id=upload_id,
                user_id=owner,
                filename=filename,
                stored_path=relative,
                mime=mime,
                size=len(data),
                sha256="0" * 64,
                created_at=services.clock.now() + timedelta(microseconds=1),
                ingest_status="pending" if is_document(mime) else None,
            )
        )
        await db.commit()
    if ingest:
        assert services.ingestor is not None
        await services.ingestor.ingest(upload_id)
    return upload_id


def pdf(*pages: str) -> bytes:
    """A PDF with one page of text per argument (an empty one is an empty page)."""
    document = FPDF()
    document.set_font("helvetica", size=12)
    for text in pages:
        document.add_page()
        if text:
            document.multi_cell(0, 8, text)
    return bytes(document.output())


def shared_stream_pdf(content: bytes, pages: int) -> bytes:
    """A PDF of `pages` pages that all draw one content stream (Helvetica as `/F1`): the file
    holds the stream once, a reader meets it on every page."""
    writer = PdfWriter()
    stream = DecodedStreamObject()
    stream.set_data(content)
    contents = writer._add_object(stream.flate_encode())
    font = writer._add_object(
        DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject("/Helvetica"),
            }
        )
    )
    resources = DictionaryObject({NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})})
    for _ in range(pages):
        page = writer.add_blank_page(612, 792)
        page[NameObject("/Contents")] = contents
        page[NameObject("/Resources")] = resources
    out = BytesIO()
    writer.write(out)
    return out.getvalue()


def dense_page(lines: int, seed: int = 7) -> bytes:
    """A content stream that shows `lines` lines of prose in 5-point type (a full page is ~150)."""
    rng = random.Random(seed)
    shown = [
        b"(" + " ".join(rng.choice(FILLER) for _ in range(16)).encode() + b". ) '"
        for _ in range(lines)
    ]
    return b"BT /F1 5 Tf 20 780 Td 5 TL\n" + b"\n".join(shown) + b"\nET\n"


def busy_page(operations: int) -> bytes:
    """A content stream of `operations` text moves that each show a space: slow to read (a
    reader walks every one), tiny once compressed, and next to no text."""
    return b"BT /F1 9 Tf\n" + b"1 0 Td ( ) Tj\n" * operations + b"ET\n"
