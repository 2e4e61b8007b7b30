"""Staging: read and validate the input files, and write them once as one Parquet file of fixed row groups.

The input order is fixed here (files sorted by full path, rows in file order) and every row gets
its `row_index`. Staging renames the user's columns to canonical ones (row_index, id, text,
text_pair, label, slice_*), so no user-supplied name ever reaches SQL, and writes row groups of
exactly `rows_per_range` rows, so range k is row group k and a scoring process reads only its
rows. Everything streams: no step holds the whole dataset.

The modules, in the order a run meets them:
  listing  which files a URI names (and which it skips), in which order
  presence whether the input holds any data at all (if_empty: a night without data)
  reader   one file's record batches, its read errors explained in one line
  columns  which user column becomes which canonical one, and the types each may hold
  writer   row groups of exactly `rows_per_range` rows
  stage    the staging itself: input rows and ground-truth files, and the staging cache's key
  truth_kinds  the multi-label and regression heads' ground-truth forms
  truth    the one rule by which a ground-truth column (or a multi-label list's elements) is
           matched to the model's labels, decided from its type and values

Plain functions only: no Prefect and no DuckDB (the flow's read step, tasks/read.py, adds those).
"""
