"""Which files an input URI names, in which order: a file, a folder/prefix (recursively) or a glob.

The order is the full path's, so the rows' order (and every row_index) is a function of the files
alone. Supported formats are chosen by file name.
"""

from __future__ import annotations

import logging
import posixpath

from scorekeeper.errors import InputError
from scorekeeper.redact import redact_uri
from scorekeeper.run_folder import InputFile, RunFolder
from scorekeeper.storage import Location, file_fingerprint, fs_and_path, to_uri

FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl"}
# Compressed text files, by suffix: fsspec's codec name (gzip, bz2, lzma: the standard library), or
# pyarrow's own zstd codec (fsspec has one only when the optional zstandard package is installed).
COMPRESSIONS = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz", ".zst": "zstd", ".zstd": "zstd"}
SHOWN = 5  # offending files or rows named in a message


def compression(path: str) -> str | None:
    """The codec a file name asks for (.csv.gz -> gzip), or None."""
    return COMPRESSIONS.get(posixpath.splitext(path.lower())[1])


def file_format(path: str) -> str | None:
    name = path.lower()
    if compression(name):
        name = posixpath.splitext(name)[0]
    return FORMATS.get(posixpath.splitext(name)[1])


def _sibling_runs(fs, output_root: str, paths: list[str]) -> list[str]:
    """Folders directly under output_root that hold a run (its request.json or work/ folder)."""
    root = output_root.rstrip("/")
    firsts = {p[len(root) + 1 :].split("/", 1)[0] for p in paths if p.startswith(root + "/") and "/" in p[len(root) + 1 :]}
    return [
        f"{root}/{c}"
        for c in sorted(firsts)
        if fs.exists(f"{root}/{c}/{RunFolder.REQUEST}") or fs.isdir(f"{root}/{c}/{RunFolder.WORK_DIR}")
    ]


def _hidden(path: str) -> bool:
    # Spark/Hadoop markers (_SUCCESS, .crc) and dot-files are not data.
    return any(part.startswith((".", "_")) for part in path.split("/")[-1:])


def list_input_files(
    uri: str, what: str = "input", exclude: Location | None = None, log: logging.Logger | logging.LoggerAdapter | None = None
) -> list[InputFile]:
    """The files a URI names: a file, a folder/prefix (recursively) or a glob; sorted by full path.

    Files under `exclude` (the run's own folder, when output_uri lies inside the input folder) are
    not input: the run would otherwise read its own lease, staged input and predictions. Nor are
    the files of other runs beside it (folders under the same output_uri holding a run's
    request.json or work/): an earlier run's predictions are not rows of this one. `log` is where
    skipped files are reported (the flow passes its run's logger)."""
    fs, path = fs_and_path(uri)
    if any(ch in path for ch in "*?["):
        paths = [p for p in fs.glob(path) if fs.isfile(p)]
        if not paths:
            raise InputError(f"{what} not found: no file matches {uri}")
    elif fs.isdir(path):
        paths = [p for p in fs.find(path) if not _hidden(p)]
        if not paths:
            raise InputError(f"{what} not found: the folder {uri} holds no files")
    elif fs.isfile(path):
        paths = [path]
    else:
        raise InputError(f"{what} not found: {uri}")
    if exclude is not None and type(exclude.fs) is type(fs):
        own = exclude.path.rstrip("/")
        runs = (own, *_sibling_runs(fs, posixpath.dirname(own), paths))
        inside = [p for p in paths if any(p == r or p.startswith(r + "/") for r in runs)]
        if inside:
            (log or logging.getLogger(__name__)).warning(
                "%s %s: skipping %d file(s) of scorekeeper runs under %s",
                what,
                redact_uri(uri),
                len(inside),
                redact_uri(posixpath.dirname(exclude.uri.rstrip("/"))),
            )
            paths = [p for p in paths if p not in set(inside)]
            if not paths:
                raise InputError(f"{what} not found: {redact_uri(uri)} holds no files outside the run folders of output_uri")
    unsupported = [p for p in paths if file_format(p) is None]
    if unsupported:
        raise InputError(
            f"{what} {uri}: unsupported file type for {', '.join(to_uri(fs, p) for p in unsupported[:SHOWN])}"
            " (expected .parquet, .csv, .jsonl/.ndjson/.json; .csv and .jsonl optionally .gz, .bz2, .xz or .zst)"
        )
    packed = [p for p in paths if file_format(p) == "parquet" and compression(p)]
    if packed:
        raise InputError(
            f"{what} {uri}: compressed Parquet file {to_uri(fs, packed[0])}; Parquet compresses its own pages: "
            "give the .parquet file itself"
        )
    files = []
    for p in sorted(paths, key=lambda p: to_uri(fs, p)):
        info = fs.info(p)
        files.append(
            InputFile(uri=to_uri(fs, p), size=int(info.get("size") or 0), format=file_format(p), fingerprint=file_fingerprint(fs, p, info))
        )
    return files
