use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use sha2::{Digest, Sha256};

use super::*;

type Case<'a> = (&'a [(&'a str, &'a str)], Field, &'a str);
use crate::plan::embedded;

fn plans() -> Vec<Arc<ReconcilePlan>> {
    embedded::NAMES
        .iter()
        .map(|n| Arc::new(embedded::load(n).expect("shipped plan")))
        .collect()
}

fn config_map(rv: &str, data: &[(&str, &str)]) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.namespace = Some("ops".into());
    cm.metadata.name = Some("flag".into());
    cm.metadata.resource_version = Some(rv.into());
    cm.data = Some(
        data.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<BTreeMap<_, _>>(),
    );
    cm
}

fn live() -> LiveFlag {
    LiveFlag::new(FlagSpec::default(), plans()).expect("defaults are valid")
}

#[test]
fn keys_override_the_defaults_one_by_one() {
    let flag = live();
    let cm = config_map(
        "7",
        &[
            ("mode", "enforce"),
            (
                "enforcedGroups",
                "non-critical-syncs, addon-install-progression/status-patches",
            ),
            ("rampPercent", "5"),
        ],
    );
    assert!(matches!(flag.apply(Some(&cm)), Ok(Applied::Changed { .. })));
    let state = flag.current();
    assert_eq!(state.spec.mode, Mode::Enforce);
    assert_eq!(state.spec.ramp, Ramp::from_percent(5.0).unwrap());
    assert!(
        !state.spec.allow_object_override,
        "absent key keeps the default"
    );
    assert_eq!(state.spec.candidate_groups, None);
    assert_eq!(state.generation, 1);
    assert_eq!(
        state.source,
        Source::ConfigMap {
            name: "ops/flag".into(),
            resource_version: "7".into()
        }
    );
    let hc = plans()
        .into_iter()
        .find(|p| p.name() == "hostedcluster")
        .unwrap();
    let addon = plans()
        .into_iter()
        .find(|p| p.name() != "hostedcluster")
        .unwrap();
    assert_eq!(
        state.spec.for_plan(&hc).enforced_groups(),
        ["non-critical-syncs"]
    );
    assert_eq!(
        state.spec.for_plan(&addon).enforced_groups(),
        ["status-patches"]
    );
    // The same content at a new resourceVersion changes nothing but the source.
    let again = config_map(
        "8",
        &[
            ("mode", "enforce"),
            (
                "enforcedGroups",
                "non-critical-syncs addon-install-progression/status-patches",
            ),
            ("rampPercent", "5.00"),
        ],
    );
    assert_eq!(flag.apply(Some(&again)), Ok(Applied::Unchanged));
    // Deleting the ConfigMap goes back to the command line's flag.
    assert!(matches!(flag.apply(None), Ok(Applied::Changed { .. })));
    assert_eq!(flag.current().source, Source::CommandLine);
    assert_eq!(flag.current().spec.mode, Mode::Shadow);
}

#[test]
fn an_invalid_config_map_names_its_field_and_keeps_the_last_valid_flag() {
    let flag = live();
    flag.apply(Some(&config_map("1", &[("mode", "enforce")])))
        .expect("valid");
    let cases: [Case; 7] = [
        (
            &[("mode", "enforced")],
            Field::Mode,
            "data.mode: \"enforced\": expected off, calibrate, shadow or enforce",
        ),
        (
            &[("rampPercent", "150")],
            Field::RampPercent,
            "data.rampPercent: \"150\"",
        ),
        (
            &[("rampPercent", "0.001")],
            Field::RampPercent,
            "at most two decimals",
        ),
        (
            &[("allowObjectOverride", "yes")],
            Field::AllowObjectOverride,
            "expected true or false",
        ),
        (
            &[("enforcedGroups", "no-such-group")],
            Field::EnforcedGroups,
            "data.enforcedGroups: \"no-such-group\": no plan has this rollout group; known: hostedcluster/non-critical-syncs",
        ),
        (
            &[("candidateGroups", "hostedcluster/status-patches")],
            Field::CandidateGroups,
            "no plan has this rollout group",
        ),
        (
            &[("rampPrecent", "5")],
            Field::Unknown,
            "data.rampPrecent: \"5\": unknown key",
        ),
    ];
    for (data, field, text) in cases {
        let error = flag.apply(Some(&config_map("2", data))).unwrap_err();
        assert_eq!(error.field(), field, "{data:?}");
        assert!(error.to_string().contains(text), "{error} lacks {text:?}");
        let state = flag.current();
        assert_eq!(state.spec.mode, Mode::Enforce, "the last valid flag stays");
        assert!(state.stale);
    }
    let mut binary = config_map("3", &[]);
    binary.binary_data = Some(BTreeMap::from([(
        "mode".to_owned(),
        k8s_openapi::ByteString(b"enforce".to_vec()),
    )]));
    assert_eq!(
        flag.apply(Some(&binary)).unwrap_err().field(),
        Field::BinaryData
    );
    // A valid ConfigMap clears the staleness.
    flag.apply(Some(&config_map("4", &[("mode", "shadow")])))
        .expect("valid");
    assert!(!flag.current().stale);
    assert_eq!(flag.current().spec.mode, Mode::Shadow);
}

#[test]
fn buckets_are_stable_uniform_and_nested() {
    // Fixed values (computed with Python's hashlib): a change of the hash would move objects
    // across a ramp in production.
    assert_eq!(
        [bucket("a"), bucket("b"), bucket("uid-1")],
        [2250, 7946, 5495]
    );
    assert_eq!(bucket("uid-1"), golden_bucket("uid-1"));
    let n = 20_000;
    let inside = |percent: f64| {
        let ramp = Ramp::from_percent(percent).unwrap();
        (0..n)
            .filter(|i| ramp.includes(bucket(&format!("uid-{i}"))))
            .count()
    };
    for (percent, expected) in [(5.0, 1000), (50.0, 10_000)] {
        let got = inside(percent);
        assert!(
            got.abs_diff(expected) < expected / 10,
            "{percent}%: {got} of {n}"
        );
    }
    assert_eq!(inside(0.0), 0);
    assert_eq!(inside(100.0), n);
    let five = Ramp::from_percent(5.0).unwrap();
    let fifty = Ramp::from_percent(50.0).unwrap();
    for i in 0..n {
        let b = bucket(&format!("uid-{i}"));
        assert!(
            !five.includes(b) || fifty.includes(b),
            "inside 5% but not 50%"
        );
    }
}

/// The bucket computed independently of [`bucket`]: SHA-256, first 8 bytes big-endian, mod 10,000.
fn golden_bucket(uid: &str) -> u16 {
    let d = Sha256::digest(uid.as_bytes());
    let v = d[..8]
        .iter()
        .fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
    u16::try_from(v % 10_000).unwrap()
}

#[test]
fn the_annotation_wins_only_when_allowed() {
    let flag = live();
    flag.apply(Some(&config_map("1", &[("mode", "shadow")])))
        .unwrap();
    let state = flag.current();
    let hc = hostedcluster(&state);
    let e = state.evaluate(&hc, "u", Some("enforce"));
    assert_eq!((e.mode, e.decision.reason), (Mode::Shadow, Reason::Static));
    assert_eq!(e.decision.version.as_deref(), Some("1"));
    flag.apply(Some(&config_map(
        "2",
        &[("mode", "shadow"), ("allowObjectOverride", "true")],
    )))
    .unwrap();
    let state = flag.current();
    let hc = hostedcluster(&state);
    let e = state.evaluate(&hc, "u", Some("enforce"));
    assert_eq!(
        (e.mode, e.decision.reason),
        (Mode::Enforce, Reason::TargetingMatch)
    );
    let e = state.evaluate(&hc, "u", Some("off"));
    assert_eq!(
        (e.mode, e.decision.reason),
        (Mode::Off, Reason::TargetingMatch)
    );
    let e = state.evaluate(&hc, "u", Some("bogus"));
    assert_eq!((e.mode, e.decision.reason), (Mode::Shadow, Reason::Error));
    let e = state.evaluate(&hc, "u", None);
    assert_eq!((e.mode, e.decision.reason), (Mode::Shadow, Reason::Static));
}

#[test]
fn outside_the_ramp_an_object_gets_the_mode_below() {
    assert_eq!(below(Mode::Enforce), Mode::Shadow);
    assert_eq!(below(Mode::Shadow), Mode::Off);
    assert_eq!(below(Mode::Off), Mode::Off);
    let flag = live();
    flag.apply(Some(&config_map(
        "1",
        &[("mode", "enforce"), ("rampPercent", "50")],
    )))
    .unwrap();
    let state = flag.current();
    let hc = hostedcluster(&state);
    let (mut enforce, mut shadow) = (0, 0);
    for i in 0..1000 {
        let uid = format!("uid-{i}");
        let e = state.evaluate(&hc, &uid, None);
        assert_eq!(e.decision.reason, Reason::Split);
        assert_eq!(e, state.evaluate(&hc, &uid, None), "same object, same side");
        match e.mode {
            Mode::Enforce => enforce += 1,
            Mode::Shadow => shadow += 1,
            Mode::Off | Mode::Calibrate => panic!("enforce ramps over shadow, never {}", e.mode),
        }
    }
    assert!(enforce > 400 && shadow > 400, "{enforce} / {shadow}");
}

fn hostedcluster(state: &FlagState) -> PlanFlag {
    let plan = plans()
        .into_iter()
        .find(|p| p.name() == "hostedcluster")
        .expect("shipped plan");
    state.spec.for_plan(&plan)
}

#[test]
fn each_group_has_its_own_ramp() {
    let flag = live();
    flag.apply(Some(&config_map(
        "1",
        &[
            ("mode", "enforce"),
            (
                "groups",
                "non-critical-syncs: enforce 100\nhostedcluster/gated-components: enforce 5%",
            ),
        ],
    )))
    .expect("valid");
    let state = flag.current();
    let hc = hostedcluster(&state);
    assert_eq!(
        hc.enforced,
        [
            ("non-critical-syncs".to_owned(), Ramp::ALL),
            (
                "gated-components".to_owned(),
                Ramp::from_percent(5.0).unwrap()
            ),
        ]
    );
    let (mut both, mut first) = (0, 0);
    for i in 0..2000 {
        let uid = format!("uid-{i}");
        let e = state.evaluate(&hc, &uid, None);
        assert_eq!(
            (e.mode, e.decision.reason),
            (Mode::Enforce, Reason::Split),
            "{uid}"
        );
        if bucket(&uid) < 500 {
            assert_eq!(
                e.decision.enforced_groups,
                ["non-critical-syncs", "gated-components"]
            );
            both += 1;
        } else {
            assert_eq!(e.decision.enforced_groups, ["non-critical-syncs"]);
            first += 1;
        }
    }
    assert!(both > 50 && first > 1500, "{both} / {first}");
    // Every set an object can get has its policy.
    let sets = hc.enforced_sets();
    assert!(sets.contains(&vec!["non-critical-syncs".to_owned()]));
    assert!(sets.contains(&vec![
        "non-critical-syncs".to_owned(),
        "gated-components".to_owned()
    ]));
    // The add-on plan is named by no entry: its control enforces nothing, in mode enforce.
    let addon = plans()
        .into_iter()
        .find(|p| p.name() == "addon-install-progression")
        .unwrap();
    let addon = state.spec.for_plan(&addon);
    assert!(!addon.named);
    let e = state.evaluate(&addon, "uid-1", None);
    assert_eq!(
        (e.mode, e.decision.enforced_groups.len()),
        (Mode::Enforce, 0)
    );
}

#[test]
fn a_group_in_shadow_is_rolled_back_whatever_enforced_groups_says() {
    let flag = live();
    flag.apply(Some(&config_map(
        "1",
        &[
            ("mode", "enforce"),
            ("enforcedGroups", "non-critical-syncs gated-components"),
            (
                "groups",
                "gated-components: shadow, non-critical-syncs: enforce 0",
            ),
        ],
    )))
    .expect("valid");
    let state = flag.current();
    let hc = hostedcluster(&state);
    assert!(hc.named);
    assert_eq!(hc.enforced, [("non-critical-syncs".to_owned(), Ramp(0))]);
    for i in 0..200 {
        // Inside no group's ramp: shadow, not a phased control enforcing nothing.
        let e = state.evaluate(&hc, &format!("uid-{i}"), None);
        assert_eq!((e.mode, e.decision.reason), (Mode::Shadow, Reason::Split));
        assert!(e.decision.enforced_groups.is_empty());
    }
    // A canary enforces every group the flag enforces, whatever its ramp.
    flag.apply(Some(&config_map(
        "2",
        &[
            ("mode", "enforce"),
            ("allowObjectOverride", "true"),
            (
                "groups",
                "gated-components: shadow, non-critical-syncs: enforce 0",
            ),
        ],
    )))
    .expect("valid");
    let state = flag.current();
    let e = state.evaluate(&hostedcluster(&state), "uid-1", Some("enforce"));
    assert_eq!(e.decision.enforced_groups, ["non-critical-syncs"]);
    // The qualified entry wins over the plain one.
    flag.apply(Some(&config_map(
        "3",
        &[
            ("mode", "enforce"),
            (
                "groups",
                "hostedcluster/gated-components: enforce 50, gated-components: shadow",
            ),
        ],
    )))
    .expect("valid");
    let state = flag.current();
    assert_eq!(
        hostedcluster(&state).enforced,
        [("gated-components".to_owned(), Ramp(5000))]
    );
    assert!(state.spec.summary().ends_with(
        " groups=[hostedcluster/gated-components: enforce 50%, gated-components: shadow]"
    ));
}

#[test]
fn a_bad_groups_entry_is_refused_with_what_is_wrong() {
    let flag = live();
    for (value, want) in [
        (
            "non-critical-syncs",
            "expected `GROUP: enforce PERCENT` or `GROUP: shadow`",
        ),
        (
            "non-critical-syncs: enforced 5",
            "expected `GROUP: enforce PERCENT`",
        ),
        (
            "non-critical-syncs: enforce 150",
            "\"150\" is not a percentage",
        ),
        (
            "non-critical-syncs: enforce 5 10",
            "expected `GROUP: enforce PERCENT`",
        ),
        (
            "non-critical-syncs: shadow 5",
            "a group in shadow takes no percentage",
        ),
        ("a/b/c: shadow", "is not GROUP or PLAN/GROUP"),
        (
            "non-critical-syncs: shadow, non-critical-syncs: enforce",
            "non-critical-syncs is named twice",
        ),
        ("no-such-group: enforce 5", "no plan has this rollout group"),
    ] {
        let err = flag
            .apply(Some(&config_map("9", &[("groups", value)])))
            .expect_err(value);
        assert_eq!(err.field(), Field::Groups, "{value}");
        let text = err.to_string();
        assert!(text.starts_with("data.groups: "), "{text}");
        assert!(text.contains(want), "{value}: {text}");
    }
}

#[test]
fn group_references() {
    assert_eq!(GroupRef::parse(" a "), Some(GroupRef::any_plan("a")));
    assert_eq!(GroupRef::parse("p/a"), Some(GroupRef::qualified("p", "a")));
    for bad in ["", "/a", "p/", "p/a/b"] {
        assert_eq!(GroupRef::parse(bad), None, "{bad:?}");
    }
    assert_eq!(Ramp::from_percent(12.5).map(Ramp::percent), Some(12.5));
    assert_eq!(Ramp::from_percent(-1.0), None);
    assert_eq!(Ramp::from_percent(f64::NAN), None);
}
