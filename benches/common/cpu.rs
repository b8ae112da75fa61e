//! CPU time from `/proc/PID/stat`, for the benches that compare CPU rather than wall time.
#![allow(dead_code)] // each bench uses some of them

use std::time::Duration;

/// The `stat` file's fields from the third on (after the command name in parentheses, which may
/// hold spaces), summed at `first` and `first + 1`, in clock ticks (100 per second on Linux);
/// `None` when the file cannot be read (a process that ended and was reaped).
fn ticks(stat: &str, first: usize) -> Option<Duration> {
    let stat = std::fs::read_to_string(stat).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let ticks =
        fields.get(first)?.parse::<u64>().ok()? + fields.get(first + 1)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// CPU time of the whole process (every thread, live or ended): utime + stime.
pub fn process_cpu() -> Duration {
    ticks("/proc/self/stat", 11).expect("/proc/self/stat")
}

/// CPU time of the process's children that were waited for: cutime + cstime.
pub fn children_cpu() -> Duration {
    ticks("/proc/self/stat", 13).expect("/proc/self/stat")
}

/// CPU time of another process (every thread): utime + stime; zero once it is gone.
pub fn of(pid: u32) -> Duration {
    ticks(&format!("/proc/{pid}/stat"), 11).unwrap_or_default()
}
