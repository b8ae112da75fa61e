"""pyarrow's side of the Parquet write comparison (benches/parquet.rs).

Usage: write.py DIR OUT

Reads the dataset the project's writer wrote in DIR (one file per table) into memory, takes the
settings from those files (codec, which columns are dictionary-encoded, which carry statistics,
row group size, data page size), then, for each line read on stdin, writes both tables again
into OUT with those settings exactly as the project's writer does (a temporary file, fsync,
rename, directory fsync) and prints the seconds it took. The tables are in memory before the
clock starts: what is timed is pyarrow's encoding and writing, not building the Arrow data.
"""

import os
import sys
import time

import pyarrow.parquet as pq

root, out = sys.argv[1], sys.argv[2]


def only_file(table):
    found = []
    for path, _, files in os.walk(os.path.join(root, f"table={table}")):
        found += [os.path.join(path, f) for f in files if f.endswith(".parquet")]
    if len(found) != 1:
        sys.exit(f"{root}: expected one file of table {table}, found {len(found)}")
    return found[0]


def settings(path):
    """The write options that reproduce the file's encoding."""
    meta = pq.ParquetFile(path).metadata
    group = meta.row_group(0)
    dictionary, statistics, codec = [], [], None
    for i in range(group.num_columns):
        column = group.column(i)
        name = column.path_in_schema
        # A list column's leaf is `name.list.element`; pyarrow's options take the top name.
        top = name.split(".")[0]
        codec = column.compression
        if column.has_dictionary_page:
            dictionary.append(top)
        if column.is_stats_set:
            statistics.append(top)
    return {
        "compression": codec.lower(),
        "use_dictionary": sorted(set(dictionary)),
        "write_statistics": sorted(set(statistics)) or False,
        "row_group_size": max(meta.row_group(g).num_rows for g in range(meta.num_row_groups)),
        "data_page_size": 1024 * 1024,
        "version": "2.6",
    }


tables = []
for name in ("reconciles", "steps"):
    path = only_file(name)
    tables.append((name, pq.read_table(path), settings(path)))
os.makedirs(out, exist_ok=True)
print(" ".join(f"{n}={t.num_rows}" for n, t, _ in tables), flush=True)
for _ in sys.stdin:
    started = time.perf_counter()
    for name, table, options in tables:
        tmp = os.path.join(out, f".{name}.parquet.tmp")
        with open(tmp, "wb") as sink:
            pq.write_table(table, sink, **options)
            sink.flush()
            os.fsync(sink.fileno())
        os.rename(tmp, os.path.join(out, f"{name}.parquet"))
        fd = os.open(out, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
    print(time.perf_counter() - started, flush=True)
