"""The on-disk index of one collection, the room below embed (which writes it) and mine, seed, status,
export and outgrown (which read it). No module outside this package reads or writes an index's files.

Reads and writes `indexes/<name>/`: `manifest.json` (encoders, counts, checksums; written last),
`images.parquet` (row i: image_id, path, sha256, ...), `clip.faiss` and `dino.faiss` (faiss flat files, row i
= images.parquet row i), `skipped.csv` and `row_digests.npz` (each row's digest). One module per concern:

- layout: the files' names, a row's image id, writing the vector files and manifest.json, which indexes a
  folder holds (`list_indexes`, `default_index_name`), the manifest's checksum;
- collection: one finished index opened and checked (`open_index`, `open_named_index`, `CollectionIndex`),
  its row-range reader (`index_rows`), images found through indexes by content (`locate_image`), where many
  images are at once (`join_locations`: what a run writes for its pairs);
- rows: vectors and image ids read by row range, locally or from an fsspec URL, without loading the index
  (`IndexRows`, `open_vectors`), a flat file written row chunk by row chunk (`FlatWriter`), the image columns
  of chosen rows (`image_rows`) and of row ranges (`image_ranges`), parts of rows re-cut to one size (`regrouped`);
- digests: each row's digest (`row_digests`, of kind `DIGEST`: BLAKE2b of its bits), and the digests kept with
  the index (`row_digests.npz`, by `vhmine embed` as it writes the index: `keep_for_files`), checked against
  the rows where the vector files changed since they were checked (`file_states`) and taken again only for the
  chunks it does not vouch for (`stored_digests`);
- comparable: whether two indexes' encoders are one, by what they are (`encoder_differences`: encoder, width,
  precision, preprocessing), whatever path their specs were typed with.
"""

from __future__ import annotations

from vhmine.index.collection import (
    CollectionIndex,
    image_paths_by_sha,
    index_rows,
    join_locations,
    locate_image,
    open_index,
    open_named_index,
)
from vhmine.index.comparable import encoder_differences, precision_of, same_encoder
from vhmine.index.layout import (
    FORMAT_VERSION,
    IMAGES,
    MANIFEST,
    SKIPPED,
    VECTOR_FILES,
    default_index_name,
    image_id_for,
    index_folder,
    is_finished,
    list_indexes,
    manifest_sha256,
    read_faiss_vectors,
    read_manifest,
    write_faiss,
    write_index,
    write_manifest,
)

__all__ = [
    "FORMAT_VERSION",
    "IMAGES",
    "MANIFEST",
    "SKIPPED",
    "VECTOR_FILES",
    "default_index_name",
    "image_id_for",
    "index_folder",
    "is_finished",
    "list_indexes",
    "manifest_sha256",
    "read_faiss_vectors",
    "read_manifest",
    "write_faiss",
    "write_index",
    "write_manifest",
    "CollectionIndex",
    "image_paths_by_sha",
    "index_rows",
    "join_locations",
    "locate_image",
    "open_index",
    "open_named_index",
    "encoder_differences",
    "precision_of",
    "same_encoder",
    # rows (numpy): imported when first asked for, so importing the index's face stays light
    "FlatWriter",
    "IndexRows",
    "VectorFile",
    "id_width",
    "image_frame",
    "image_ranges",
    "image_rows",
    "open_vectors",
    "regrouped",
    # digests (numpy): likewise
    "CHUNK_ROWS",
    "DIGEST",
    "ROW_DIGESTS",
    "FileStates",
    "checked_digests",
    "chunk_checks",
    "file_states",
    "keep_for_files",
    "kept_location",
    "row_digests",
    "stored_digests",
    "stored_range",
    "store_streamed",
]


def __getattr__(name: str):
    # the names of rows and digests (numpy), listed in __all__ but not imported above: from their module
    if name in __all__:
        from vhmine.index import digests, rows

        for module in (rows, digests):
            if hasattr(module, name):
                return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
