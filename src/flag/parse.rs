//! The flag ConfigMap's `data`, key by key, into a [`FlagSpec`]; a bad key is a [`FieldError`]
//! naming it.

use std::collections::BTreeMap;
use std::fmt;

use super::{FlagSpec, GroupRamp, GroupRef, Ramp};
use crate::vocab::Mode;

/// A key of the flag ConfigMap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Field {
    /// `data.mode`.
    Mode,
    /// `data.enforcedGroups`.
    EnforcedGroups,
    /// `data.candidateGroups`.
    CandidateGroups,
    /// `data.rampPercent`.
    RampPercent,
    /// `data.allowObjectOverride`.
    AllowObjectOverride,
    /// `data.groups`: per rollout group, its mode and ramp.
    Groups,
    /// A key the flag does not know (a typo, most often).
    Unknown,
    /// `binaryData`, which the flag does not read.
    BinaryData,
}

impl Field {
    /// Every field.
    pub const ALL: [Self; 8] = [
        Self::Mode,
        Self::EnforcedGroups,
        Self::CandidateGroups,
        Self::RampPercent,
        Self::AllowObjectOverride,
        Self::Groups,
        Self::Unknown,
        Self::BinaryData,
    ];

    /// The key in `data`, and the metric label (`unknown` for an unknown key).
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Mode => "mode",
            Self::EnforcedGroups => "enforcedGroups",
            Self::CandidateGroups => "candidateGroups",
            Self::RampPercent => "rampPercent",
            Self::AllowObjectOverride => "allowObjectOverride",
            Self::Groups => "groups",
            Self::Unknown => "unknown",
            Self::BinaryData => "binaryData",
        }
    }

    fn of_key(key: &str) -> Self {
        Self::ALL
            .into_iter()
            .find(|f| f.as_str() == key && *f != Self::Unknown && *f != Self::BinaryData)
            .unwrap_or(Self::Unknown)
    }
}

/// A bad key of the flag ConfigMap.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct FieldError {
    field: Field,
    key: String,
    value: String,
    message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let prefix = if self.field == Field::BinaryData {
            ""
        } else {
            "data."
        };
        // Echoed values are bounded: a megabyte of value never floods a log line or an Event.
        write!(
            f,
            "{prefix}{}: {:?}: {}",
            crate::util::yaml::bounded(&self.key, 100),
            crate::util::yaml::bounded(&self.value, 100),
            self.message
        )
    }
}

impl FieldError {
    pub(super) fn new(field: Field, value: String, message: String) -> Self {
        Self {
            field,
            key: field.as_str().to_owned(),
            value,
            message,
        }
    }

    /// The field (the metric label).
    #[must_use]
    pub const fn field(&self) -> Field {
        self.field
    }

    /// The value refused.
    #[must_use]
    pub fn value(&self) -> &str {
        &self.value
    }

    /// Why it was refused.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The key as written in the ConfigMap.
    #[must_use]
    pub fn key(&self) -> &str {
        &self.key
    }

    /// An error about `binaryData`, which the flag does not read.
    #[must_use]
    pub fn binary_data(keys: &[&String]) -> Self {
        Self::new(
            Field::BinaryData,
            keys.iter()
                .map(|k| k.as_str())
                .collect::<Vec<_>>()
                .join(","),
            "the flag reads `data` only; move these keys there".to_owned(),
        )
    }
}

/// The flag of `data`: each key present overrides the same setting of `defaults`.
pub(super) fn spec(
    data: &BTreeMap<String, String>,
    defaults: &FlagSpec,
) -> Result<FlagSpec, FieldError> {
    let mut spec = defaults.clone();
    for (key, raw) in data {
        let value = raw.trim();
        let field = Field::of_key(key);
        let bad = |message: &str| FieldError {
            field,
            key: key.clone(),
            value: raw.clone(),
            message: message.to_owned(),
        };
        match field {
            Field::Mode => {
                spec.mode = value
                    .parse::<Mode>()
                    .map_err(|_| bad("expected off, calibrate, shadow or enforce"))?;
            }
            Field::EnforcedGroups => {
                spec.enforced_groups = groups(value).map_err(|m| bad(&m))?;
            }
            Field::CandidateGroups => {
                // Empty means every group, as on the command line.
                let named = groups(value).map_err(|m| bad(&m))?;
                spec.candidate_groups = (!named.is_empty()).then_some(named);
            }
            Field::RampPercent => {
                spec.ramp = value
                    .parse::<f64>()
                    .ok()
                    .and_then(Ramp::from_percent)
                    .ok_or_else(|| {
                        bad("expected a percentage from 0 to 100 with at most two decimals")
                    })?;
            }
            Field::AllowObjectOverride => {
                spec.allow_object_override = match value {
                    "true" => true,
                    "false" => false,
                    _ => return Err(bad("expected true or false")),
                };
            }
            Field::Groups => {
                spec.groups = group_ramps(value).map_err(|m| bad(&m))?;
            }
            Field::Unknown | Field::BinaryData => {
                return Err(bad(
                    "unknown key; the flag reads mode, enforcedGroups, candidateGroups, rampPercent, allowObjectOverride and groups",
                ));
            }
        }
    }
    Ok(spec)
}

/// The `groups` key: entries separated by newlines or commas, each `GROUP: enforce PERCENT` (the
/// percentage optional, 100 by default, with or without `%`) or `GROUP: shadow`; `GROUP` may be
/// `PLAN/GROUP`. A group named twice is refused.
fn group_ramps(value: &str) -> Result<Vec<GroupRamp>, String> {
    const FORM: &str = "expected `GROUP: enforce PERCENT` or `GROUP: shadow`";
    let mut out: Vec<GroupRamp> = Vec::new();
    for (n, entry) in value
        .split(['\n', ','])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .enumerate()
    {
        let n = n + 1;
        let Some((name, rest)) = entry.split_once(':') else {
            return Err(format!("entry {n}: {FORM}"));
        };
        let group = GroupRef::parse(name)
            .ok_or_else(|| format!("entry {n}: {:?} is not GROUP or PLAN/GROUP", name.trim()))?;
        let mut words = rest.split_whitespace();
        let (mode, ramp) = match (words.next(), words.next(), words.next()) {
            (Some("enforce"), percent, None) => {
                let ramp = match percent {
                    None => Ramp::ALL,
                    Some(p) => p
                        .strip_suffix('%')
                        .unwrap_or(p)
                        .parse::<f64>()
                        .ok()
                        .and_then(Ramp::from_percent)
                        .ok_or_else(|| {
                            format!(
                                "entry {n}: {p:?} is not a percentage from 0 to 100 with at most two decimals"
                            )
                        })?,
                };
                (Mode::Enforce, ramp)
            }
            (Some("shadow"), None, None) => (Mode::Shadow, Ramp::ALL),
            (Some("shadow"), Some(_), _) => {
                return Err(format!(
                    "entry {n}: a group in shadow takes no percentage (its objects are all in shadow)"
                ));
            }
            _ => return Err(format!("entry {n}: {FORM}")),
        };
        if out.iter().any(|g| g.group == group) {
            return Err(format!("entry {n}: {group} is named twice"));
        }
        out.push(GroupRamp { group, mode, ramp });
    }
    Ok(out)
}

/// A list of groups: separated by commas, whitespace or newlines, each `group` or `plan/group`.
fn groups(value: &str) -> Result<Vec<GroupRef>, String> {
    let mut out: Vec<GroupRef> = Vec::new();
    for item in value
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
    {
        let group =
            GroupRef::parse(item).ok_or_else(|| format!("{item:?} is not GROUP or PLAN/GROUP"))?;
        if !out.contains(&group) {
            out.push(group);
        }
    }
    Ok(out)
}
