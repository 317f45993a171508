"""AutoHallusion-style image manipulation (`vhmine manipulate`): a second way to make VH cases.

Reads an embedded collection and its COCO annotations (or an Owl-ViT / OWLv2 detector's boxes); writes
edited images into the curation store's queues (vhmine.curate.work.add_generation) and a report. One
module per concern: scenes (objects, boxes, masks), prior (which object), strategies (the three
edits), questions (Table 9 templates), detect (correctness and consistency), metrics (ASR, MASR,
CASR), stored (earlier cases in the store, so reruns accumulate), run (the stage).
"""

from vhmine.manipulate.run import ManipulateOptions, ManipulateResult, manipulate

__all__ = ["ManipulateOptions", "ManipulateResult", "manipulate"]
