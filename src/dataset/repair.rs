//! Repairs what a writer that died left in a dataset directory: the parts of rotations it did
//! not finish committing, and its temporary files (`docs/parquet.md`, "Layout").

use std::fs::{self, File};
use std::path::Path;
use std::time::Duration;

use super::schema::Table;
use super::writer::{commit_file, temporary_name};

/// Completes or removes the parts of rotations a writer that died left (see
/// [`DatasetWriter::rotate`](super::DatasetWriter::rotate), which renames writes, then steps, then reconciles): a writes or
/// steps file without its reconciles file gets the missing later files from their prepared
/// temporary files when those are whole Parquet files; else, once older than `age` (a live
/// writer may be between its renames, or retrying), the orphan is removed. Returns how many
/// orphan files were (completed, removed).
pub fn repair_half_rotations(dir: &Path, age: Duration) -> (usize, usize) {
    let (mut completed, mut removed) = (0, 0);
    let Ok(orphans) = super::reader::parts(dir).map(|p| p.orphans) else {
        return (0, 0);
    };
    for orphan in orphans {
        // A reconciles file without steps cannot come from this writer's order.
        let later: &[Table] = match orphan.table {
            Table::Writes => &[Table::Steps, Table::Reconciles],
            Table::Steps => &[Table::Reconciles],
            Table::Reconciles => continue,
        };
        let Some(name) = orphan.path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let relative = orphan
            .path
            .strip_prefix(dir.join(format!("table={}", orphan.table.as_str())))
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let at = |table: Table| {
            dir.join(format!("table={}", table.as_str()))
                .join(relative.parent().unwrap_or(Path::new("")))
        };
        // Each later file: committed already (a writes orphan whose steps file was renamed:
        // the steps orphan completes the part), or completed from its whole temporary file.
        let mut whole = true;
        for &table in later {
            let table_dir = at(table);
            if table_dir.join(name).exists() {
                continue;
            }
            let tmp = table_dir.join(temporary_name(name));
            let readable = whole && parquet_whole(&tmp);
            if readable && commit_file(&table_dir, &tmp, name).is_ok() {
                continue;
            }
            whole = false;
        }
        if whole {
            completed += 1;
            continue;
        }
        let old = fs::metadata(&orphan.path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|m| m.elapsed().ok())
            .is_some_and(|e| e >= age);
        if old && fs::remove_file(&orphan.path).is_ok() {
            removed += 1;
        }
    }
    (completed, removed)
}

/// Whether `path` is a whole Parquet file (its footer reads).
fn parquet_whole(path: &Path) -> bool {
    // Guarded: the Parquet library panics on some damaged footers.
    super::reader::guarded(path, || {
        let file = File::open(path).map_err(|source| super::reader::ReadError::Io {
            path: path.to_owned(),
            source,
        })?;
        parquet::file::reader::SerializedFileReader::new(file).map_err(|e| {
            super::reader::ReadError::Invalid {
                path: path.to_owned(),
                message: e.to_string(),
            }
        })
    })
    .is_ok()
}

/// Removes temporary files left by writers that died (older than `age`) under `dir`; returns
/// how many were removed.
pub fn remove_stale_temporaries(dir: &Path, age: Duration) -> usize {
    let mut removed = 0;
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                stack.push(path);
            } else if path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.') && n.ends_with(".parquet.tmp"))
                && meta
                    .modified()
                    .ok()
                    .and_then(|m| m.elapsed().ok())
                    .is_some_and(|e| e >= age)
                && fs::remove_file(&path).is_ok()
            {
                removed += 1;
            }
        }
    }
    removed
}
