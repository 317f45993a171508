"""The people who curate: workers and their sign-in, how far they agree, and what verifying drafts saves them.

Reads and writes the curation store's `workers` (tokens as sha256 hashes, token generations, chosen modes);
reads `reviews`, `response_labels` and the action log (agreement, savings), which it never writes. Stands on
curate.work and curate.base.
"""
