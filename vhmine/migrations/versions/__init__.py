"""Schema revisions of the curation store, oldest first: 0001_initial, 0002_next_stages."""
