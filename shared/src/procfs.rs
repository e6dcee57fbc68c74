//! `/proc/PID/stat`, read one way for every process the binaries look at
//! (the lead's process sessions, the teammate's reaper and its own argument
//! and environment blocks). The command name, field 2, may hold spaces and
//! `)`, so the fields are those after its last `)`.

use std::str::FromStr;

/// The fields of one `/proc/PID/stat`, numbered as proc(5) numbers them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    /// Fields 3 (the state) onwards.
    fields: Vec<String>,
}

impl Stat {
    /// The fields of a `stat` line.
    pub fn parse(line: &str) -> Option<Self> {
        let (_, rest) = line.rsplit_once(')')?;
        Some(Self {
            fields: rest.split_whitespace().map(str::to_owned).collect(),
        })
    }

    /// The stat of process `pid` (`"self"` for this one), if it is there.
    pub fn of(pid: &str) -> Option<Self> {
        Self::parse(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
    }

    /// Field `n` (from 1, as in proc(5): 4 the parent, 6 the session, 22
    /// the start time, 48 to 51 the argument and environment blocks).
    pub fn field<T: FromStr>(&self, n: usize) -> Option<T> {
        self.fields.get(n.checked_sub(3)?)?.parse().ok()
    }
}

/// The ids of every process now.
pub fn pids() -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_count_from_one_past_a_command_name_with_spaces_and_parentheses() {
        let stat = Stat::parse("42 (a) b) (c) S 7 9 11 0").expect("a stat line");
        assert_eq!(stat.field::<char>(3), Some('S'));
        assert_eq!(stat.field::<i32>(4), Some(7));
        assert_eq!(stat.field::<u32>(6), Some(11));
        assert_eq!(stat.field::<u32>(99), None);
        assert_eq!(
            stat.field::<u32>(1),
            None,
            "before the name: not a field here"
        );
        assert_eq!(Stat::parse("no name"), None);
    }

    #[test]
    fn this_process_is_among_the_processes_and_has_a_stat() {
        let me = i32::try_from(std::process::id()).expect("a pid");
        assert!(pids().contains(&me));
        let stat = Stat::of("self").expect("own stat");
        assert!(stat.field::<u64>(22).is_some(), "a start time");
    }
}
