//! The flag's `groups` key as the driver writes it: the entries of the groups it drives, as
//! their rollouts say, and every other entry as it is (a person's per-group ramp, the group of a
//! rollout that is not valid, the group of a rollout that was deleted).

use crate::flag::{GroupRamp, GroupRef};

/// The `groups` value after a round: each entry of `current` whose group no rollout drives,
/// as written, then the entries of `driven`, one per line.
#[must_use]
pub fn merged_groups(current: Option<&str>, driven: &[GroupRamp]) -> String {
    let kept = current
        .unwrap_or_default()
        .split(['\n', ','])
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .filter(|entry| {
            // An entry that does not parse is kept: the flag's own parser names it.
            let group = entry.split_once(':').map_or(*entry, |(g, _)| g.trim());
            GroupRef::parse(group).is_none_or(|g| !driven.iter().any(|d| d.group.overlaps(&g)))
        })
        .map(str::to_owned);
    kept.chain(driven.iter().map(ToString::to_string))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flag::Ramp;
    use crate::vocab::Mode;

    fn ramp(group: &str, mode: Mode, percent: f64) -> GroupRamp {
        GroupRamp {
            group: GroupRef::parse(group).unwrap(),
            mode,
            ramp: Ramp::from_percent(percent).unwrap(),
        }
    }

    #[test]
    fn the_driven_groups_are_replaced_and_the_others_kept() {
        let driven = [ramp("hostedcluster/gated-components", Mode::Enforce, 25.0)];
        // A person's entry of another group stays; the driven group's old entry, written
        // with or without its plan, goes.
        assert_eq!(
            merged_groups(
                Some("non-critical-syncs: enforce 100, gated-components: enforce 5"),
                &driven
            ),
            "non-critical-syncs: enforce 100\nhostedcluster/gated-components: enforce 25%"
        );
        // Another plan's group of the same name is not the driven one.
        assert_eq!(
            merged_groups(Some("addon/gated-components: shadow"), &driven),
            "addon/gated-components: shadow\nhostedcluster/gated-components: enforce 25%"
        );
        // No rollout left: the entries stay as they are (deleting a rollout changes nothing).
        assert_eq!(
            merged_groups(Some("hostedcluster/gated-components: enforce 25"), &[]),
            "hostedcluster/gated-components: enforce 25"
        );
        assert_eq!(merged_groups(None, &[]), "");
        // An entry that does not parse is left for the flag's parser to name.
        assert_eq!(
            merged_groups(Some("???: sideways"), &[ramp("g", Mode::Shadow, 100.0)]),
            "???: sideways\ng: shadow"
        );
    }
}
