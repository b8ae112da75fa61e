//! Bounds a local dataset (`--parquet-retention`, `--parquet-max-total-mib`): after each
//! rotation, whole parts are removed oldest first while they are older than the retention or
//! the dataset is over its size, and so are the rollout driver's files (`table=rollouts`). A
//! part is removed `reconciles` file first, its commit point (docs/parquet.md, "Layout"), so
//! readers never see a part that lost its `steps`: a process that dies between the removals
//! leaves files the readers skip as orphans and the next writer's repair removes. The newest
//! part always stays, even alone over the size.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use super::reader::{self, ReadError};
use super::schema::Table;

/// How much of a local dataset stays.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Retention {
    /// Parts that started longer ago than this are removed.
    pub max_age: Option<Duration>,
    /// While the dataset's files take more bytes than this, the oldest part is removed.
    pub max_bytes: Option<u64>,
}

impl Retention {
    /// Whether either bound is set.
    #[must_use]
    pub const fn bounds(&self) -> bool {
        self.max_age.is_some() || self.max_bytes.is_some()
    }
}

/// What a pass of [`enforce`] removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Removed {
    /// Whole parts removed for their age.
    pub parts_by_age: u64,
    /// Whole parts removed for the dataset's size.
    pub parts_by_size: u64,
    /// The rollout driver's files removed (for either reason).
    pub rollout_files: u64,
    /// Bytes of every file removed.
    pub bytes: u64,
    /// Bytes of the dataset's files left.
    pub left_bytes: u64,
}

impl Removed {
    /// Whole parts removed.
    #[must_use]
    pub const fn parts(&self) -> u64 {
        self.parts_by_age + self.parts_by_size
    }

    fn add(&mut self, other: &Self) {
        self.parts_by_age += other.parts_by_age;
        self.parts_by_size += other.parts_by_size;
        self.rollout_files += other.rollout_files;
        self.bytes += other.bytes;
        self.left_bytes = other.left_bytes;
    }
}

/// Prometheus counters of the removals (`EngineMetrics::retention_health`).
#[derive(Clone, Debug)]
pub struct RetentionHealth {
    /// Parts removed for their age.
    pub by_age: prometheus::IntCounter,
    /// Parts removed for the dataset's size.
    pub by_size: prometheus::IntCounter,
    /// Bytes removed.
    pub bytes: prometheus::IntCounter,
}

/// What can be removed: a whole part (its files in removal order) or a rollout driver's file.
struct Unit {
    /// When it began, seconds since the Unix epoch.
    secs: u64,
    files: Vec<PathBuf>,
    bytes: u64,
    part: bool,
}

/// Seconds since the Unix epoch of a part's name (`part-SECS-...`), or of a rollout file's
/// (`rollout-MICROS-...`); else of the file's modification time.
fn began(path: &Path) -> u64 {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let number = |prefix: &str| {
        name.strip_prefix(prefix)?
            .split('-')
            .next()?
            .parse::<u64>()
            .ok()
    };
    number("part-")
        .or_else(|| number("rollout-").map(|us| us / 1_000_000))
        .or_else(|| {
            std::fs::metadata(path)
                .and_then(|m| m.modified())
                .ok()?
                .duration_since(std::time::UNIX_EPOCH)
                .ok()
                .map(|d| d.as_secs())
        })
        .unwrap_or(0)
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// The dataset's removable units, oldest first, and the bytes of all its files (orphans too).
fn units(dir: &Path) -> Result<(Vec<Unit>, u64), ReadError> {
    let parts = reader::parts(dir)?;
    let mut units = Vec::with_capacity(parts.pairs.len());
    for (reconciles, steps) in &parts.pairs {
        let mut files = vec![reconciles.clone(), steps.clone()];
        files.extend(parts.writes_of(reconciles).map(Path::to_path_buf));
        units.push(Unit {
            secs: began(reconciles),
            bytes: files.iter().map(|f| size(f)).sum(),
            files,
            part: true,
        });
    }
    for file in super::rollouts::files(&super::Location::Local(dir.to_owned()))? {
        units.push(Unit {
            secs: began(&file),
            bytes: size(&file),
            files: vec![file],
            part: false,
        });
    }
    let orphans: u64 = parts.orphans.iter().map(|o| size(&o.path)).sum();
    let total = units.iter().map(|u| u.bytes).sum::<u64>() + orphans;
    units.sort_by(|a, b| (a.secs, &a.files[0]).cmp(&(b.secs, &b.files[0])));
    Ok((units, total))
}

/// Removes from the dataset at `dir` what `retention` does not keep, `now_secs` being the
/// time (seconds since the Unix epoch). A file that cannot be removed ends the pass (logged):
/// what was removed before it is returned.
///
/// # Errors
/// The dataset cannot be listed.
pub fn enforce(dir: &Path, retention: &Retention, now_secs: u64) -> Result<Removed, ReadError> {
    let (units, mut total) = units(dir)?;
    let newest_part = units.iter().rposition(|u| u.part);
    let mut removed = Removed::default();
    for (i, unit) in units.iter().enumerate() {
        if Some(i) == newest_part {
            continue;
        }
        let old = retention
            .max_age
            .is_some_and(|age| now_secs.saturating_sub(unit.secs) > age.as_secs());
        let big = retention.max_bytes.is_some_and(|max| total > max);
        if !old && !big {
            // Sorted by age: nothing later is older, and the size is within its bound.
            break;
        }
        if let Err(e) = remove_unit(dir, unit) {
            tracing::warn!(error = %e, "retention: cannot remove a file of the dataset; the pass ends here");
            break;
        }
        total = total.saturating_sub(unit.bytes);
        removed.bytes += unit.bytes;
        match (unit.part, old) {
            (false, _) => removed.rollout_files += 1,
            (true, true) => removed.parts_by_age += 1,
            (true, false) => removed.parts_by_size += 1,
        }
    }
    removed.left_bytes = total;
    Ok(removed)
}

/// Removes a unit's files in order, then the partition directories they leave empty (a part's
/// only: the rollout driver may be creating its directory).
fn remove_unit(dir: &Path, unit: &Unit) -> std::io::Result<()> {
    for file in &unit.files {
        match std::fs::remove_file(file) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(std::io::Error::new(
                    e.kind(),
                    format!("{}: {e}", file.display()),
                ));
            }
        }
    }
    if unit.part {
        for file in &unit.files {
            let roots: Vec<PathBuf> = Table::ALL
                .iter()
                .map(|t| dir.join(format!("table={}", t.as_str())))
                .collect();
            let mut parent = file.parent();
            while let Some(p) =
                parent.filter(|p| !roots.iter().any(|r| r == p) && p.starts_with(dir))
            {
                if std::fs::remove_dir(p).is_err() {
                    break;
                }
                parent = p.parent();
            }
        }
    }
    Ok(())
}

/// Retention as the sink's writer thread applies it after each rotation, with its totals.
#[derive(Debug)]
pub struct Bound {
    dir: PathBuf,
    retention: Retention,
    health: Option<RetentionHealth>,
    totals: Mutex<Removed>,
}

impl Bound {
    /// Retention of the dataset at `dir`.
    #[must_use]
    pub fn new(dir: PathBuf, retention: Retention, health: Option<RetentionHealth>) -> Self {
        Self {
            dir,
            retention,
            health,
            totals: Mutex::new(Removed::default()),
        }
    }

    /// One pass, now: counted, logged, exported.
    pub fn after_rotation(&self) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let removed = match enforce(&self.dir, &self.retention, now) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "retention: cannot list the dataset; nothing removed");
                return;
            }
        };
        if removed.parts() + removed.rollout_files > 0 {
            tracing::info!(
                dir = %self.dir.display(),
                parts_by_age = removed.parts_by_age,
                parts_by_size = removed.parts_by_size,
                rollout_files = removed.rollout_files,
                bytes = removed.bytes,
                left_bytes = removed.left_bytes,
                "retention: removed the oldest whole parts of the dataset"
            );
        }
        if let Some(h) = &self.health {
            h.by_age.inc_by(removed.parts_by_age);
            h.by_size.inc_by(removed.parts_by_size);
            h.bytes.inc_by(removed.bytes);
        }
        self.totals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .add(&removed);
    }

    /// Everything removed since the sink started.
    pub fn totals(&self) -> Removed {
        *self.totals.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_800_000_000;

    /// A part that began `ago` seconds before `NOW`: its three files of `bytes` each.
    fn part(dir: &Path, ago: u64, bytes: usize) -> Vec<PathBuf> {
        let secs = NOW - ago;
        ["reconciles", "steps", "writes"]
            .iter()
            .map(|table| {
                let d = dir.join(format!(
                    "table={table}/cluster=default/date=2027-01-15/hour={:02}",
                    ago % 24
                ));
                std::fs::create_dir_all(&d).unwrap();
                let f = d.join(format!("part-{secs}-abcd-{ago:06}.parquet"));
                std::fs::write(&f, vec![0_u8; bytes]).unwrap();
                f
            })
            .collect()
    }

    fn left(dir: &Path) -> usize {
        reader::parts(dir).unwrap().pairs.len()
    }

    #[test]
    fn the_size_bound_removes_the_oldest_whole_parts() {
        let dir = tempfile::tempdir().unwrap();
        let parts: Vec<_> = (1..=5).map(|ago| part(dir.path(), ago * 10, 100)).collect();
        let retention = Retention {
            max_age: None,
            max_bytes: Some(1_000),
        };
        let removed = enforce(dir.path(), &retention, NOW).unwrap();
        // 1,500 bytes in five parts of 300: the two oldest go.
        assert_eq!(
            (removed.parts_by_size, removed.bytes, removed.left_bytes),
            (2, 600, 900)
        );
        for (i, files) in parts.iter().enumerate() {
            // Oldest are the largest `ago`: parts[3] and parts[4].
            let gone = i >= 3;
            assert!(files.iter().all(|f| f.exists() != gone), "part {i}");
        }
        // Their hour directories, emptied, are gone too; the table roots stay.
        assert!(!parts[4][0].parent().unwrap().exists());
        assert!(dir.path().join("table=reconciles").exists());
        assert!(reader::parts(dir.path()).unwrap().orphans.is_empty());
        // A second pass within the bound removes nothing.
        assert_eq!(enforce(dir.path(), &retention, NOW).unwrap().parts(), 0);
    }

    #[test]
    fn the_age_bound_removes_what_began_before_it_and_keeps_the_newest_part() {
        let dir = tempfile::tempdir().unwrap();
        for ago in [100, 200, 300] {
            part(dir.path(), ago, 10);
        }
        let rollouts = dir
            .path()
            .join("table=rollouts/cluster=default/date=2027-01-15/hour=01");
        std::fs::create_dir_all(&rollouts).unwrap();
        let old = rollouts.join(format!(
            "rollout-{}-driver.parquet",
            (NOW - 250) * 1_000_000
        ));
        let new = rollouts.join(format!("rollout-{}-driver.parquet", (NOW - 5) * 1_000_000));
        std::fs::write(&old, b"x").unwrap();
        std::fs::write(&new, b"x").unwrap();
        let retention = Retention {
            max_age: Some(Duration::from_secs(150)),
            max_bytes: None,
        };
        let removed = enforce(dir.path(), &retention, NOW).unwrap();
        assert_eq!((removed.parts_by_age, removed.rollout_files), (2, 1));
        assert_eq!(left(dir.path()), 1);
        assert!(!old.exists() && new.exists());
        // Everything older than the bound: the newest part still stays.
        let all = Retention {
            max_age: Some(Duration::from_secs(1)),
            max_bytes: Some(1),
        };
        let removed = enforce(dir.path(), &all, NOW).unwrap();
        assert_eq!((removed.parts(), removed.rollout_files), (0, 1));
        assert_eq!(left(dir.path()), 1);
    }

    #[test]
    fn orphans_count_in_the_size_and_are_left_to_the_repair() {
        let dir = tempfile::tempdir().unwrap();
        part(dir.path(), 10, 100);
        part(dir.path(), 20, 100);
        let orphan = part(dir.path(), 30, 100);
        std::fs::remove_file(&orphan[0]).unwrap(); // its reconciles file: not a whole part
        let removed = enforce(
            dir.path(),
            &Retention {
                max_age: None,
                max_bytes: Some(500),
            },
            NOW,
        )
        .unwrap();
        // 800 bytes with the orphan's 200: the older whole part goes (500 left, within the
        // bound), the orphan stays.
        assert_eq!((removed.parts_by_size, removed.left_bytes), (1, 500));
        assert!(orphan[1].exists() && orphan[2].exists());
    }

    #[test]
    fn the_bound_counts_what_it_removed_and_exports_it() {
        let dir = tempfile::tempdir().unwrap();
        // Parts that began in 1970, by the real clock the bound reads: older than any bound.
        for began in [1_000_000, 2_000_000] {
            part(dir.path(), NOW - began, 50);
        }
        let counter = |name: &str| prometheus::IntCounter::new(name, name).unwrap();
        let health = RetentionHealth {
            by_age: counter("age"),
            by_size: counter("size"),
            bytes: counter("bytes"),
        };
        let bound = Bound::new(
            dir.path().to_owned(),
            Retention {
                max_age: Some(Duration::from_mins(1)),
                max_bytes: None,
            },
            Some(health.clone()),
        );
        bound.after_rotation();
        bound.after_rotation();
        let totals = bound.totals();
        assert_eq!((totals.parts_by_age, totals.bytes), (1, 150));
        assert_eq!((health.by_age.get(), health.by_size.get()), (1, 0));
        assert_eq!(health.bytes.get(), 150);
        assert_eq!(left(dir.path()), 1);
    }
}
