"""Stage 0, data: public image collections onto disk (`vhmine data coco`).

Reads COCO 2017's zips over HTTP; writes `data/coco/<split>/` and `data/coco/annotations/`. Entry:
`download_coco` in vhmine.data.coco; vhmine.data.download is the resumable, checksummed HTTP download it uses.
"""

from vhmine.data.coco import download_coco

__all__ = ["download_coco"]
