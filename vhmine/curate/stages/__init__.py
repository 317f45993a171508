"""What the other stages and commands read and write through curate, and the app's launcher.

Reads and writes the curation store for them: seed's mined pairs (`seeding`: runs, images, pairs, tasks),
the models' `descriptions`, `generations` and `responses` (`model_responses`), export's ready instances
(`records`) and image files (`images`, found by sha256), `vhmine status`'s counts (`overview`); `app`
launches the Streamlit app on the store. Stands on curate.work and curate.base.
"""
