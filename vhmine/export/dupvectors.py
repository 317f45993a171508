"""The exported images' vectors for the near-duplicate check (vhmine.export.neardup): taken from an index that
holds the same bytes with the same encoders and precision, as `vhmine embed` computed them there, else embedded
now with those encoders in that precision (vhmine.embed.encoders), so the encoders load only for images no such
index holds (generated ones). Reads the indexes it is given (loaded) and the images it must embed; writes nothing.
"""

from __future__ import annotations

from vhmine.errors import ExportError, InputError


def encoder_specs(idx) -> tuple[str, str]:
    enc = idx.manifest.get("encoders") or {}
    try:
        return enc["clip"]["spec"], enc["dino"]["spec"]
    except (KeyError, TypeError):
        raise InputError(
            f"index {idx.name!r}: its manifest names no encoders (clip and dino spec); rebuild it with `vhmine embed`"
        ) from None


class _Locations:
    """The embed reader's source for images the store records: plain files or tar members (images.read_image_bytes)."""

    def extras(self, rec: dict) -> dict:
        return {}

    def stat(self, rec: dict) -> tuple[int, int]:
        return -1, -1

    def read(self, rec: dict) -> bytes:
        from vhmine.images import read_image_bytes

        return read_image_bytes(rec["path"])


def embed_images(
    paths: list[str],
    clip_spec: str,
    dino_spec: str,
    *,
    device=None,
    batch_size: int = 32,
    progress: bool = False,
    precision: str = "fp32",
):
    """(clip, dino): L2-normalised float32 rows of `paths`, as `vhmine embed` computes them in `precision` (the
    index's). `progress`: a bar, drawn from the start, since loading large encoders alone takes seconds."""
    import numpy as np
    from tqdm import tqdm

    from vhmine.embed import ShardReader, collate, load_clip, load_dino, resolve_device

    with tqdm(total=len(paths), desc="near duplicates: loading encoders", unit="img", disable=not progress) as bar:
        dev = resolve_device(device)
        clip_enc, dino_enc = load_clip(clip_spec, dev, precision), load_dino(dino_spec, dev, precision)
        bar.set_description("near duplicates: embedding")
        reader = ShardReader(
            _Locations(), [{"path": p} for p in paths], clip_enc.preprocess, dino_enc.preprocess, 89_478_485
        )
        clips, dinos = [], []
        for start in range(0, len(paths), batch_size):
            batch = collate([reader[k] for k in range(start, min(start + batch_size, len(paths)))])
            bad = [it for it in batch["items"] if it["status"] != "ok"]
            if bad:
                raise ExportError(
                    f"image {bad[0]['path']} cannot be embedded for the near-duplicate check "
                    f"({bad[0]['reason']}): restore it, or discard its instances in the app"
                )
            clips.append(clip_enc.encode(batch["clip"]).numpy())
            dinos.append(dino_enc.encode(batch["dino"]).numpy())
            bar.update(len(batch["items"]))
    return np.concatenate(clips).astype(np.float32), np.concatenate(dinos).astype(np.float32)


def encoders_key(idx) -> tuple:
    """What makes two indexes' vectors interchangeable: both encoders' specs and the precision they ran in."""
    from vhmine.embed import kept

    return (*encoder_specs(idx), kept(idx.manifest))


def index_vectors(shas: list[str], basis, indexes) -> dict[int, tuple]:
    """{k: (clip row, dino row)} for each shas[k] that an index with basis's encoders (encoders_key) holds:
    its vectors there are what `vhmine embed` computed from the same bytes, so those images need no encoder."""
    key, found = encoders_key(basis), {}
    for idx in indexes:
        try:
            if idx.clip is None or idx.images is None or encoders_key(idx) != key:
                continue
        except InputError:  # a manifest that names no encoders: none of its vectors is used
            continue
        row_of = {sha: r for r, sha in reversed(list(enumerate(idx.images["sha256"])))}
        for k, sha in enumerate(shas):
            if k not in found and sha in row_of:
                found[k] = (idx.clip[row_of[sha]], idx.dino[row_of[sha]])
    return found


def exported_vectors(
    files: list[str], shas: list[str], basis, indexes, *, device=None, batch_size: int = 32, progress: bool = False
):
    """(clip, dino, how many rows came from the indexes) of the exported images: from an index with basis's
    encoders where one holds the image (index_vectors), else embedded now in basis's precision; the encoders
    load only when some image is in no such index."""
    import numpy as np

    from vhmine.embed import kept

    found = index_vectors(shas, basis, indexes)
    todo = [k for k in range(len(files)) if k not in found]
    dims = basis.manifest["encoders"]["clip"]["dim"], basis.manifest["encoders"]["dino"]["dim"]
    clip, dino = np.empty((len(files), dims[0]), np.float32), np.empty((len(files), dims[1]), np.float32)
    for k, (c, d) in found.items():
        clip[k], dino[k] = c, d
    if todo:
        clip_spec, dino_spec = encoder_specs(basis)
        clip[todo], dino[todo] = embed_images(
            [files[k] for k in todo],
            clip_spec,
            dino_spec,
            device=device,
            batch_size=batch_size,
            progress=progress,
            precision=kept(basis.manifest) or "fp32",
        )
    return clip, dino, len(found)
