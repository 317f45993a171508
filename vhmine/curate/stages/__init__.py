"""What the other stages and commands read and write through curate, and the app's launcher.

Reads and writes the curation store for them: seed's mined pairs (`seeding`: runs, images, pairs, tasks),
the models' `descriptions`, `generations` and `responses` (`model_responses`), export's ready instances
(`records`) and image files (`images`, found by sha256), `vhmine status`'s counts (`overview`); `app`
launches the Streamlit app on the store. Stands on curate.work and curate.base.

Its face: the names in `__all__` below, grouped by the module that holds them; the other rooms and stages import
them from here, never from one of its modules.
"""

from vhmine.curate.stages.app import default_app_path, run_app, streamlit_command
from vhmine.curate.stages.descriptions import add_description, description_texts, latest_descriptions
from vhmine.curate.stages.generations import recorded_renders
from vhmine.curate.stages.images import image_bytes, image_file, image_stamp
from vhmine.curate.stages.model_responses import (
    claim_endpoint,
    mode_responses,
    responses_saying,
    set_automatic_verdict,
    stored_responses,
)
from vhmine.curate.stages.overview import ModeCounts, StoreOverview, store_overview
from vhmine.curate.stages.records import InstanceRecord, get_instance, ready_instances
from vhmine.curate.stages.seeding import SeedRaced, add_mined_pairs, known_pairs

__all__ = [
    # app
    "default_app_path",
    "run_app",
    "streamlit_command",
    # descriptions
    "add_description",
    "description_texts",
    "latest_descriptions",
    # generations
    "recorded_renders",
    # images
    "image_bytes",
    "image_file",
    "image_stamp",
    # model_responses
    "claim_endpoint",
    "mode_responses",
    "responses_saying",
    "set_automatic_verdict",
    "stored_responses",
    # overview
    "ModeCounts",
    "StoreOverview",
    "store_overview",
    # records
    "InstanceRecord",
    "get_instance",
    "ready_instances",
    # seeding
    "SeedRaced",
    "add_mined_pairs",
    "known_pairs",
]
