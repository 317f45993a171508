"""Stage 8, export: the store's ready instances -> a benchmark folder in one format, with a manifest.

Reads the curation store (vhmine.curate) and the images it records; writes `--out DIR` in a format of
vhmine.formats. Entry: `export_benchmark(store, ExportOptions(...))` in vhmine.export.job (the Python
API's `vhmine.api.export`). changelog: versions, content hash, the `--since` changelog; neardup: the
near-duplicate check; privacy: pseudonyms and public paths, used by all three; sampling: the per-mode sample, the
yes/no balance check and the counts.
"""

from vhmine.export.job import ExportOptions, export_benchmark
from vhmine.export.neardup import DupOptions

__all__ = ["ExportOptions", "DupOptions", "export_benchmark"]
