"""Real data: locating and verifying the pinned files, and the corpora built from them."""
from .files import DataFileError, cache_dir, data_path, manifest

__all__ = ["DataFileError", "cache_dir", "data_path", "manifest"]
