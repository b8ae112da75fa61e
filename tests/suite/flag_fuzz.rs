//! Fuzzing the flag ConfigMap with proptest: random keys and values (known keys with random
//! values, unknown keys, huge and non-ASCII values, binaryData) through the parser the watch
//! uses. It never panics; a refusal names the field and says what is expected, in a bounded line;
//! an accepted flag has only groups the plans have.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use proptest::prelude::*;
use shadow_reconciler::flag::{FlagSpec, LiveFlag};

fn flag() -> LiveFlag {
    let plans = vec![
        shadow_reconciler::plan::embedded::load("hostedcluster")
            .map(std::sync::Arc::new)
            .expect("the shipped plan"),
    ];
    LiveFlag::new(FlagSpec::default(), plans).expect("the defaults are valid")
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("mode".to_owned()),
        Just("enforcedGroups".to_owned()),
        Just("candidateGroups".to_owned()),
        Just("rampPercent".to_owned()),
        Just("allowObjectOverride".to_owned()),
        "[a-zA-Z]{1,12}",
    ]
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("enforce".to_owned()),
        Just("shadow".to_owned()),
        Just("non-critical-syncs".to_owned()),
        Just("hostedcluster/gated-components, non-critical-syncs".to_owned()),
        Just("12.5".to_owned()),
        Just("true".to_owned()),
        "[ -~]{0,40}",
        "\\PC{0,20}",
        (1usize..200_000).prop_map(|n| "x".repeat(n)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn random_flag_maps_are_refused_in_a_bounded_sentence_or_accepted_whole(
        data in proptest::collection::btree_map(key(), value(), 0..6),
        binary in proptest::option::of("[a-z]{1,8}"),
    ) {
        let cm = ConfigMap {
            data: Some(data.clone()),
            binary_data: binary.map(|k| BTreeMap::from([(k, ByteString(vec![1, 2]))])),
            ..ConfigMap::default()
        };
        let flag = flag();
        match flag.parse(&cm) {
            Ok(spec) => {
                prop_assert!(spec.validate(&[shadow_reconciler::plan::embedded::load("hostedcluster").map(std::sync::Arc::new).unwrap()]).is_ok());
            }
            Err(error) => {
                let text = error.to_string();
                prop_assert!(text.len() < 1024, "{} bytes: {}", text.len(), &text[..200]);
                prop_assert!(
                    text.starts_with("data.") || text.starts_with("binaryData"),
                    "{text}"
                );
                prop_assert!(
                    text.contains("expected") || text.contains("unknown key") || text.contains("no plan has") || text.contains("move these keys") || text.contains("is not GROUP"),
                    "{text}"
                );
            }
        }
    }
}
