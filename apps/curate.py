"""The curation app from a checkout: `streamlit run apps/curate.py` (the store from VHMINE_DB, else data/vhmine.db).

A thin entry: the app itself ships inside the package as vhmine/apps/curate.py, which is what `vhmine curate`
serves from an installed vhmine. Streamlit runs this file again on every interaction, so it runs the
package's app module afresh each time rather than importing it once.
"""

import runpy

runpy.run_module("vhmine.apps.curate", run_name="__main__")
