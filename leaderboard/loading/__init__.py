"""The record and which records count: the schema every record is written and validated with,
loading a results directory, the selection of superseded and duplicate records, and the tuning
choice rule. ``schema`` and ``choice`` import only the standard library, so the code that writes
records imports them without pandas."""
