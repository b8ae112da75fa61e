//! CPU time from `/proc/self/stat`, for the benches that compare CPU rather than wall time.
#![allow(dead_code)] // each bench uses one of the two

use std::time::Duration;

/// `/proc/self/stat`'s fields from the third on (after the command name in parentheses, which
/// may hold spaces), summed at `first` and `first + 1`, in clock ticks (100 per second on Linux).
fn ticks(first: usize) -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    let rest = &stat[stat.rfind(')').expect("stat") + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let ticks: u64 = fields[first].parse::<u64>().expect("ticks")
        + fields[first + 1].parse::<u64>().expect("ticks");
    Duration::from_millis(ticks * 10)
}

/// CPU time of the whole process (every thread, live or ended): utime + stime.
pub fn process_cpu() -> Duration {
    ticks(11)
}

/// CPU time of the process's children that were waited for: cutime + cstime.
pub fn children_cpu() -> Duration {
    ticks(13)
}
