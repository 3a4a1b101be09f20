"""The engagement log (issue 35, item 5; docs/decisions/0077-engagement-log.md): impressions
and engagement events appended off the request path to a PostgreSQL table partitioned by
day, for features (source quality) and experiments (the per-arm report), and exported as
Parquet for offline training.

- kinds.py: the event kinds and a row's columns;
- writer.py: `EngagementLog`, the bounded in-process buffer COPYed in batches (best effort);
- partitions.py: one partition per UTC day, made ahead, dropped past retention;
- features.py: each author's source quality, computed by a job, read from an in-process map;
- export.py, report.py: the Parquet export and the per-version/arm report
  (`python -m app.ranking export|report`); periods.py: their `--since`/`--until`.
"""
