"""Alembic environment: migrate the connection that vhmine.store.open_store hands over."""

from alembic import context

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("vhmine migrations run through vhmine.store.open_store, which passes a connection")

context.configure(connection=connection, target_metadata=None, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
