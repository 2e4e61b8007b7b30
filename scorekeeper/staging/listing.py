"""Which files an input URI names, in which order: a file, a folder/prefix (recursively) or a glob.

The order is the full path's, so the rows' order (and every row_index) is a function of the files
alone. Supported formats are chosen by file name.
"""

from __future__ import annotations

import logging
import posixpath
import re
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

import pyarrow as pa

from scorekeeper.errors import InputError, NoInput
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


def _without_compression(name: str) -> str:
    """A file name without its compression suffix (reviews.csv.gz -> reviews.csv)."""
    return posixpath.splitext(name)[0] if compression(name) else name


def file_format(path: str) -> str | None:
    """The reader for a file, from its name's suffix (an http(s) URL's query string, such as a
    presigned URL's signature, is not part of its name)."""
    return FORMATS.get(posixpath.splitext(_without_compression(_url_name(path).lower()))[1])


def _sibling_runs(fs, output_root: str, paths: list[str]) -> list[str]:
    """Folders directly under output_root that hold a run (its request.json or work/ folder)."""
    root = output_root.rstrip("/")
    firsts = {p[len(root) + 1 :].split("/", 1)[0] for p in paths if p.startswith(root + "/") and "/" in p[len(root) + 1 :]}
    return [
        f"{root}/{c}"
        for c in sorted(firsts)
        if fs.exists(f"{root}/{c}/{RunFolder.REQUEST}") or fs.isdir(f"{root}/{c}/{RunFolder.WORK_DIR}")
    ]


HIDDEN_PREFIXES = (".", "_")
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"  # Hive's and Spark's spelling of a null partition value
_GLOB_CHARS = "*?["


def _is_url(path: str) -> bool:
    """An http(s) URL (fsspec's HTTP filesystem keeps the whole URL as the path): always one file,
    never a glob, since its `?` starts a query (a presigned URL's signature) and HTTP lists no folders."""
    return path.startswith(("http://", "https://"))


def _url_name(path: str) -> str:
    return urlsplit(path).path if _is_url(path) else path


def _is_glob(path: str) -> bool:
    return not _is_url(path) and any(ch in path for ch in _GLOB_CHARS)


def listing_root(path: str) -> str:
    """The folder a listing's rules apply below: the folder itself, or a glob's literal leading folders."""
    if not _is_glob(path):
        return path.rstrip("/")
    parts = path.split("/")
    first = next(i for i, part in enumerate(parts) if _is_glob(part))
    return "/".join(parts[:first])


def hidden(root: str, path: str, pattern: str | None = None) -> bool:
    """Whether a dataset reader skips the file: a path component below `root` starting with "." or
    "_" (pyarrow's and Spark's convention: .ipynb_checkpoints/, _temporary/, _SUCCESS, .crc files).
    A glob whose own component starts so (data/_staging*/x.csv) asks for it by name."""
    rel = path[len(root) :].strip("/").split("/")
    asked = pattern[len(root) :].strip("/").split("/") if pattern is not None and "**" not in pattern else []
    if len(asked) != len(rel):
        asked = [""] * len(rel)
    return any(part.startswith(HIDDEN_PREFIXES) and not want.startswith(HIDDEN_PREFIXES) for part, want in zip(rel, asked, strict=True))


def hive_values(root: str, path: str) -> dict[str, str | None]:
    """The `key=value` folders between `root` and the file (date=2026-11-30/part-0.parquet), as
    pyarrow's and Spark's hive partitioning read them: values URI-decoded, Hive's null spelled null."""
    values: dict[str, str | None] = {}
    for part in path[len(root) :].strip("/").split("/")[:-1]:
        key, eq, value = part.partition("=")
        if eq and key:
            value = unquote(value)
            values[unquote(key)] = None if value == HIVE_NULL else value
    return values


@dataclass(frozen=True)
class Partitions:
    """The hive partition columns of a listing: per file URI, its `key=value` folders' values.

    A key's type is pyarrow's inference over all its values: integers when every value is one
    (staged as int64, so label=0/ folders are integer label ids), text otherwise."""

    values: dict[str, dict[str, str | None]] = field(default_factory=dict)

    def keys(self) -> set[str]:
        return {k for v in self.values.values() for k in v}

    def of(self, uri: str) -> dict[str, str | None]:
        return self.values.get(uri, {})

    def arrow_type(self, key: str) -> pa.DataType:
        written = [w for v in self.values.values() if (w := v.get(key)) is not None]
        return pa.int64() if written and all(_INTEGER.fullmatch(w) for w in written) else pa.string()

    def column(self, uri: str, key: str, rows: int) -> pa.Array:
        """The key's value for every row of the file (null where its folders do not name the key)."""
        t = self.arrow_type(key)
        value = self.of(uri).get(key)
        return pa.nulls(rows, t) if value is None else pa.repeat(pa.scalar(int(value) if t == pa.int64() else value, t), rows)


_INTEGER = re.compile(r"-?[0-9]+")


@dataclass(frozen=True)
class Listing:
    """What listing found: the files to read, in order, the files skipped as hidden, the partitions."""

    files: list[InputFile]
    hidden: list[str] = field(default_factory=list)  # URIs, sorted
    partitions: Partitions = field(default_factory=Partitions)


def list_input_files(
    uri: str, what: str = "input", exclude: Location | None = None, log: logging.Logger | logging.LoggerAdapter | None = None
) -> list[InputFile]:
    """The files a URI names (`list_input`'s files)."""
    return list_input(uri, what, exclude, log).files


def list_input(
    uri: str, what: str = "input", exclude: Location | None = None, log: logging.Logger | logging.LoggerAdapter | None = None
) -> Listing:
    """The files a URI names: a file, a folder/prefix (recursively) or a glob; sorted by full path.

    Below a folder (or a glob's literal folders) the files a dataset reader skips are skipped
    (`hidden`) and listed, and `key=value` folders give partition columns. Files under `exclude`
    (the run's own folder, when output_uri lies inside the input folder) are not input: the run
    would otherwise read its own lease, staged input and predictions. Nor are the files of other
    runs beside it (folders under the same output_uri holding a run's request.json or work/): an
    earlier run's predictions are not rows of this one. `log` is where skipped files are reported
    (the flow passes its run's logger)."""
    log = log or logging.getLogger(__name__)
    fs, path = fs_and_path(uri)
    glob = _is_glob(path) and not _named_with_glob_characters(fs, path)
    root = listing_root(path) if glob else path.rstrip("/")
    found, paths = _found(fs, path, root, uri, what, glob)
    skipped = sorted(to_uri(fs, p) for p in set(found) - set(paths))
    if skipped:
        log.warning(
            "%s %s: skipping %d hidden file(s) (a folder or file name below it starts with '.' or '_', as dataset readers do): %s",
            what,
            redact_uri(uri),
            len(skipped),
            ", ".join(redact_uri(u) for u in skipped[:SHOWN]) + (", ..." if len(skipped) > SHOWN else ""),
        )
    if not paths:
        raise NoInput(
            f"{what} not found: {redact_uri(uri)} holds only hidden files ({len(skipped)}, e.g. {redact_uri(skipped[0])}); "
            "names below the input folder that start with '.' or '_' are not data"
        )
    if exclude is not None and type(exclude.fs) is type(fs):
        paths = _outside_runs(fs, paths, exclude, uri, what, log)
    _refuse_formats(fs, paths, uri, what)
    files = []
    partitions: dict[str, dict[str, str | None]] = {}
    for p in sorted(paths, key=lambda p: to_uri(fs, p)):
        info, format = fs.info(p), file_format(p)
        assert format is not None, "unsupported files were refused above"
        files.append(
            InputFile(uri=to_uri(fs, p), size=int(info.get("size") or 0), format=format, fingerprint=file_fingerprint(fs, p, info))
        )
        if p != path and hive_values(root, p):
            partitions[files[-1].uri] = hive_values(root, p)
    return Listing(files=files, hidden=skipped, partitions=Partitions(partitions))


def _named_with_glob_characters(fs, path: str) -> bool:
    """A file or folder whose name holds glob characters (`reviews [final].csv`, `exports [2024]/`)
    and that no glob matches: it is read as that file or folder, not as a pattern matching nothing."""
    return fs.exists(path) and not any(fs.isfile(p) for p in fs.glob(path))


def _found(fs, path: str, root: str, uri: str, what: str, glob: bool) -> tuple[list[str], list[str]]:
    """Every file the URI names (as a pattern when `glob`), and those of them that are not hidden;
    NoInput when it names none."""
    if glob:
        found = [p for p in fs.glob(path) if fs.isfile(p)]
        if not found:
            raise NoInput(f"{what} not found: no file matches {uri}")
        return found, [p for p in found if not hidden(root, p, path)]
    if _is_url(path):
        if not fs.isfile(path):
            raise NoInput(f"{what} not found: {redact_uri(uri)}")
        return [path], [path]
    if fs.isdir(path):
        found = fs.find(path)
        if not found:
            raise NoInput(f"{what} not found: the folder {uri} holds no files")
        return found, [p for p in found if not hidden(root, p)]
    if fs.isfile(path):
        return [path], [path]
    raise NoInput(f"{what} not found: {uri}")


def _outside_runs(fs, paths: list[str], exclude: Location, uri: str, what: str, log) -> list[str]:
    """The paths outside the run folder `exclude` and the other runs beside it (said in the log)."""
    own = exclude.path.rstrip("/")
    runs = (own, *_sibling_runs(fs, posixpath.dirname(own), paths))
    inside = [p for p in paths if any(p == r or p.startswith(r + "/") for r in runs)]
    if not inside:
        return paths
    log.warning(
        "%s %s: skipping %d file(s) of scorekeeper runs under %s",
        what,
        redact_uri(uri),
        len(inside),
        redact_uri(posixpath.dirname(exclude.uri.rstrip("/"))),
    )
    outside = [p for p in paths if p not in set(inside)]
    if not outside:
        raise NoInput(f"{what} not found: {redact_uri(uri)} holds no files outside the run folders of output_uri")
    return outside


def _refuse_formats(fs, paths: list[str], uri: str, what: str) -> None:
    """InputError for a file of an unsupported type, or a compressed Parquet file."""
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
    _refuse_compressed_twins(fs, paths, uri, what)


def _refuse_compressed_twins(fs, paths: list[str], uri: str, what: str) -> None:
    """InputError for files whose names differ only by a compression suffix (reviews.csv and
    reviews.csv.gz): one file kept beside its compressed copy, whose rows would be read twice."""
    stems: dict[str, list[str]] = {}
    for p in paths:
        stems.setdefault(_without_compression(_url_name(p)), []).append(p)
    twins = next((sorted(group) for group in stems.values() if len(group) > 1), None)
    if twins:
        raise InputError(
            f"{what} {uri}: {' and '.join(to_uri(fs, p) for p in twins)} are one file name with and without compression: "
            "a copy's rows would be read twice; remove one, or name the files to read with a glob"
        )
