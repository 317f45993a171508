"""Alembic migrations of the curation store, shipped inside the package so an installed vhmine can
upgrade a store. `vhmine.store.open_store` runs them; there is no alembic.ini.

To change the schema: copy the newest file in versions/ to the next number, set `revision` and
`down_revision`, write `upgrade()` with `op.*` calls (batch_alter_table for SQLite column changes) and
`downgrade()`, which keeps what it drops that the upgrade cannot make again (kept.py: people's decisions, the
store's secret) for the upgrade to put back, update the table classes in vhmine/store/tables.py to match, and
extend tests/store/test_store.py's migration test with data written under the previous revision
(tests/store/test_round_trip.py takes a store down to every earlier revision and up again).
"""

from vhmine.store.migrations.kept import drop_kept, keep, keep_rows, put_rows, put_values, table_of, take

__all__ = ["drop_kept", "keep", "keep_rows", "put_rows", "put_values", "table_of", "take"]
