"""The method: from loaded records to the Board, every statistic, verdict, tier, score and claim
(docs/statistics.md). Reads records, renders nothing."""
