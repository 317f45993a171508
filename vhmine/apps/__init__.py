"""Apps that ship inside the package: `curate.py` is the Streamlit curation app that `vhmine curate` serves.

The folder holds only app scripts: Streamlit puts a script's own folder first on sys.path, so no module here
may shadow a standard-library name.
"""
