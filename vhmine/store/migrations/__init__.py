"""Alembic migrations of the curation store, shipped inside the package so an installed vhmine can
upgrade a store. `vhmine.store.open_store` runs them; there is no alembic.ini.

To change the schema: copy the newest file in versions/ to the next number, set `revision` and
`down_revision`, write `upgrade()` with `op.*` calls (batch_alter_table for SQLite column changes),
update the table classes in vhmine/store/tables.py to match, and extend tests/store/test_store.py's
migration test with data written under the previous revision.
"""
