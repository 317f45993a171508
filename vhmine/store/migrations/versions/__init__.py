"""Schema revisions of the curation store, oldest first: 0001_initial, 0002_next_stages, 0003_secrets,
0004_response_endpoint, 0005_worker_status, 0006_blind_answers, 0007_drafts_errata, 0008_near_duplicates."""
