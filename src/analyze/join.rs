//! A part's `steps` rows joined to its `reconciles` rows while they are counted: each run of steps
//! rows (a reconcile's rows are contiguous) must be a reconcile of the part, taken once, with the
//! fate its reconcile has (what counting makes of it: plan, plan hash, time, cancelled).
//!
//! A flipped byte that leaves a file readable changes values, not the file's structure: in the
//! plain, Snappy-compressed `reconcile_id` chunk, one flipped back-reference split a reconcile's 42
//! steps rows into three runs under three ids, and the reconcile counted three times (`proptest`,
//! `tests/suite/parquet_fuzz.rs`). The files of such a part disagree, so the part is skipped whole
//! (its steps file's reason names its reconciles file), like a part with an unreadable file.
//!
//! Cost: one hash entry per reconcile of the part being read (its id and fate, freed with the
//! part: memory bounded by a part's size, flat in the dataset's rows), one lookup per run of steps
//! rows, and per steps row a comparison of its fate with its run's: 2.4% more instructions for
//! `analyze` over 2.4 M step rows of 56,819 reconciles (callgrind, one thread).

use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher};
use std::path::{Path, PathBuf};

/// The reconciles of one part by `reconcile_id`, each with its fate `F`, and the runs of steps
/// rows each may still take. Ids are held as 64-bit hashes (no string kept per reconcile): two
/// ids of one hash count as one id of their two rows, so a collision never skips a part, and a
/// damaged id goes unnoticed only if it takes another id's hash (one chance in 2^64 per pair).
pub struct Roster<F> {
    /// The part's `reconciles` file, named in every mismatch.
    reconciles: PathBuf,
    /// Hashes the ids, with keys of this process (the ids come from files).
    ids: RandomState,
    /// By id: the fate of its first reconciles row, and how many runs of that fate may still come.
    first: HashMap<u64, (F, u32), BuildHasherDefault<Hashed>>,
    /// By id and fate: the rows of an id recorded again with another fate (a reconcile recorded
    /// twice: rare).
    more: HashMap<(u64, F), u32>,
}

/// The hasher of keys that are hashes already: the key itself.
#[derive(Default)]
struct Hashed(u64);

impl Hasher for Hashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

impl<F: Copy + Eq + Hash> Roster<F> {
    /// An empty roster of the reconciles of the file `reconciles`.
    #[must_use]
    pub fn new(reconciles: &Path) -> Self {
        Self {
            reconciles: reconciles.to_owned(),
            ids: RandomState::new(),
            first: HashMap::default(),
            more: HashMap::new(),
        }
    }

    /// Room for `rows` more rows of the reconciles file.
    pub fn reserve(&mut self, rows: usize) {
        self.first.reserve(rows);
    }

    /// A row of the reconciles file.
    pub fn add(&mut self, id: &str, fate: F) {
        let id = self.ids.hash_one(id);
        match self.first.entry(id) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert((fate, 1));
            }
            std::collections::hash_map::Entry::Occupied(mut o) => match o.get_mut() {
                (first, n) if *first == fate => *n += 1,
                _ => *self.more.entry((id, fate)).or_default() += 1,
            },
        }
    }

    /// Takes the reconcile of a run of steps rows; `Err` says why there is none.
    fn take(&mut self, id: &str, fate: F) -> Result<(), String> {
        let hash = self.ids.hash_one(id);
        let left = match self.first.get_mut(&hash) {
            None => {
                return Err(format!(
                    "reconcile_id {} is not a reconcile of its part's reconciles file {}",
                    quoted(id),
                    self.reconciles.display()
                ));
            }
            Some((first, n)) if *first == fate && *n > 0 => Some(n),
            Some(_) => self.more.get_mut(&(hash, fate)).filter(|n| **n > 0),
        };
        match left {
            Some(n) => {
                *n -= 1;
                Ok(())
            }
            None => Err(format!(
                "the rows of reconcile_id {} disagree with its row in {}: another plan, plan hash \
                 or time, a cancelled reconcile, or a second run of its rows (a reconcile's rows \
                 are contiguous)",
                quoted(id),
                self.reconciles.display()
            )),
        }
    }
}

/// The id as a quoted string of bounded length (a damaged id can be any bytes).
fn quoted(id: &str) -> String {
    format!("{:?}", crate::util::yaml::bounded(id, 64))
}

/// The runs of a steps file, read row by row: where each starts, and whether the part's roster
/// has its reconcile.
pub struct Runs<'a, F> {
    /// The part's reconciles (`None`: its reconciles file could not be read, so the part is
    /// skipped whatever the steps say).
    roster: Option<&'a mut Roster<F>>,
    /// The run's id and fate.
    id: String,
    fate: Option<F>,
    /// Rows read.
    rows: u64,
}

impl<'a, F: Copy + Eq + Hash> Runs<'a, F> {
    /// The runs of one steps file, checked against `roster`.
    #[must_use]
    pub fn new(roster: Option<&'a mut Roster<F>>) -> Self {
        Self {
            roster,
            id: String::new(),
            fate: None,
            rows: 0,
        }
    }

    /// The next row: whether it starts a run (another reconcile id or fate than the row before);
    /// `Err` says why the part's files disagree. Inlined: it runs for every steps row, and a row
    /// nearly always continues its run.
    #[inline]
    pub fn next(&mut self, id: &str, fate: F) -> Result<bool, String> {
        self.rows += 1;
        if self.fate == Some(fate) && self.id == id {
            return Ok(false);
        }
        self.start(id, fate).map(|()| true)
    }

    /// A run starts: its reconcile taken from the roster.
    #[inline(never)]
    fn start(&mut self, id: &str, fate: F) -> Result<(), String> {
        if let Some(roster) = self.roster.as_deref_mut() {
            roster.take(id, fate).map_err(|why| {
                format!("row {}: {why}; one of the two files is damaged", self.rows)
            })?;
        }
        self.id.clear();
        self.id.push_str(id);
        self.fate = Some(fate);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{Roster, Runs};
    use std::path::Path;

    fn roster(rows: &[(&str, u8)]) -> Roster<u8> {
        let mut roster = Roster::new(Path::new("r.parquet"));
        for (id, fate) in rows {
            roster.add(id, *fate);
        }
        roster
    }

    fn read(roster: &mut Roster<u8>, rows: &[(&str, u8)]) -> Result<u32, String> {
        let mut runs = Runs::new(Some(roster));
        let mut started = 0;
        for (id, fate) in rows {
            started += u32::from(runs.next(id, *fate)?);
        }
        Ok(started)
    }

    #[test]
    fn each_run_takes_its_reconcile_once() {
        let mut r = roster(&[("a", 0), ("b", 0), ("c", 1)]);
        assert_eq!(
            read(&mut r, &[("a", 0), ("a", 0), ("b", 0), ("c", 1)]),
            Ok(3)
        );
        // A reconcile with no steps rows (cancelled) is fine.
        let mut r = roster(&[("a", 0), ("b", 2)]);
        assert_eq!(read(&mut r, &[("a", 0), ("a", 0)]), Ok(1));
    }

    #[test]
    fn a_run_the_part_does_not_have_is_a_mismatch_naming_the_reconciles_file() {
        // A reconcile's rows split by a changed id: the changed id is no reconcile of the part.
        let mut r = roster(&[("a", 0), ("b", 0)]);
        let why = read(&mut r, &[("a", 0), ("x", 0), ("a", 0)]).unwrap_err();
        assert_eq!(
            why,
            "row 2: reconcile_id \"x\" is not a reconcile of its part's reconciles file \
             r.parquet; one of the two files is damaged"
        );
        // Split into another reconcile's id: its second run.
        let mut r = roster(&[("a", 0), ("b", 0)]);
        let why = read(&mut r, &[("b", 0), ("a", 0), ("b", 0)]).unwrap_err();
        assert!(
            why.starts_with(
                "row 3: the rows of reconcile_id \"b\" disagree with its row in r.parquet"
            ),
            "{why}"
        );
        // Rows of another fate (plan) than their reconcile's.
        let mut r = roster(&[("a", 0)]);
        assert!(read(&mut r, &[("a", 0), ("a", 1)]).is_err());
        let mut r = roster(&[("a", 0)]);
        assert!(read(&mut r, &[("a", 1)]).is_err());
    }

    #[test]
    fn a_reconcile_recorded_twice_may_have_two_runs() {
        let mut r = roster(&[("a", 0), ("b", 0), ("a", 0), ("a", 1)]);
        assert_eq!(
            read(&mut r, &[("a", 0), ("b", 0), ("a", 0), ("a", 1)]),
            Ok(4)
        );
        let mut r = roster(&[("a", 0), ("a", 1)]);
        assert!(read(&mut r, &[("a", 1), ("a", 0), ("a", 1)]).is_err());
    }

    #[test]
    fn without_a_roster_runs_are_only_delimited() {
        let mut runs = Runs::new(None::<&mut Roster<u8>>);
        assert_eq!(runs.next("a", 0), Ok(true));
        assert_eq!(runs.next("a", 0), Ok(false));
        assert_eq!(runs.next("a", 1), Ok(true));
        assert_eq!(runs.next("b", 1), Ok(true));
    }
}
