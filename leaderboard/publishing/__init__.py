"""Releases on disk: writing one from records, reading and rebuilding it, its page, checking that
it reproduces, and what changed or regressed since an earlier one."""
