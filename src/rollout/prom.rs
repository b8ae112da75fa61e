//! The `PromQL` gates: an instant query against Prometheus's HTTP API (`/api/v1/query`), its one
//! value compared with the gate's bounds, as Argo Rollouts' `prometheus` provider does.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::flag::rollout::{GateResult, PromGate, Verdict};

#[derive(Deserialize)]
struct Answer {
    status: String,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Data {
    result_type: String,
    result: serde_json::Value,
}

/// The query's one number: a scalar, or the only sample of a vector.
///
/// # Errors
/// The answer is an error, empty, several samples, or not a number.
pub fn value_of(body: &str) -> Result<f64, String> {
    let answer: Answer =
        serde_json::from_str(body).map_err(|e| format!("not a Prometheus answer: {e}"))?;
    if answer.status != "success" {
        return Err(format!(
            "Prometheus answered {}: {}",
            answer.status,
            answer.error.unwrap_or_default()
        ));
    }
    let data = answer.data.ok_or("the answer has no data")?;
    let pair = match data.result_type.as_str() {
        "scalar" => data.result,
        "vector" => {
            let samples = data.result.as_array().ok_or("the vector is not a list")?;
            match samples.as_slice() {
                [one] => one
                    .get("value")
                    .cloned()
                    .ok_or("a sample without a value")?,
                [] => return Err("no sample: the query matched no series".to_owned()),
                many => {
                    return Err(format!(
                        "{} samples: the query must give one number (aggregate it, e.g. with sum or max)",
                        many.len()
                    ));
                }
            }
        }
        other => return Err(format!("a {other} result; the query must give one number")),
    };
    pair.get(1)
        .and_then(serde_json::Value::as_str)
        .ok_or("the value is not [time, \"number\"]")?
        .parse::<f64>()
        .map_err(|e| format!("the value is not a number: {e}"))
}

/// The verdict of a value against a gate's bounds.
#[must_use]
pub fn judge(gate: &PromGate, value: f64) -> GateResult {
    let above = gate.max.is_some_and(|m| value > m);
    let below = gate.min.is_some_and(|m| value < m);
    let bounds = match (gate.min, gate.max) {
        (Some(lo), Some(hi)) => format!("from {lo} to {hi}"),
        (Some(lo), None) => format!("at least {lo}"),
        (None, Some(hi)) => format!("at most {hi}"),
        (None, None) => "any".to_owned(),
    };
    GateResult {
        name: gate.name.clone(),
        result: if above || below || value.is_nan() {
            Verdict::Failed
        } else {
            Verdict::Passed
        },
        message: format!("{} = {value} (must be {bounds})", gate.query),
        figures: BTreeMap::from([("value".to_owned(), value)]),
    }
}

/// Evaluates a gate against Prometheus at `url`: a failure to ask or to read the answer waits
/// (the step does not advance), it never passes.
pub async fn evaluate(url: &str, gate: &PromGate) -> GateResult {
    let endpoint = format!("{}/api/v1/query", url.trim_end_matches('/'));
    let waiting = |why: String| GateResult {
        name: gate.name.clone(),
        result: Verdict::Waiting,
        message: format!("{}: {why}", gate.query),
        figures: BTreeMap::new(),
    };
    let Ok(endpoint) = reqwest::Url::parse_with_params(&endpoint, [("query", gate.query.as_str())])
    else {
        return waiting(format!("{url:?} is not a URL"));
    };
    let client = match reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
    {
        Ok(c) => c,
        Err(e) => return waiting(format!("no HTTP client: {e}")),
    };
    let body = match client.get(endpoint.clone()).send().await {
        Ok(r) => match r.text().await {
            Ok(body) => body,
            Err(e) => return waiting(format!("{endpoint}: {e}")),
        },
        Err(e) => return waiting(format!("{endpoint}: {e}")),
    };
    match value_of(&body) {
        Ok(v) => judge(gate, v),
        Err(why) => waiting(format!("{endpoint}: {why}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_number_or_a_reason() {
        let vector = |samples: &str| {
            format!(
                r#"{{"status":"success","data":{{"resultType":"vector","result":[{samples}]}}}}"#
            )
        };
        assert_eq!(
            value_of(&vector(r#"{"metric":{},"value":[1.5,"0.25"]}"#)),
            Ok(0.25)
        );
        assert_eq!(
            value_of(r#"{"status":"success","data":{"resultType":"scalar","result":[1.5,"3"]}}"#),
            Ok(3.0)
        );
        assert!(value_of(&vector("")).unwrap_err().contains("no sample"));
        let two = vector(r#"{"value":[1,"1"]},{"value":[1,"2"]}"#);
        assert!(value_of(&two).unwrap_err().contains("2 samples"));
        assert!(
            value_of(r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#)
                .unwrap_err()
                .contains("parse error")
        );
    }

    #[test]
    fn bounds() {
        let gate = PromGate {
            name: "errors".into(),
            query: "q".into(),
            max: Some(0.05),
            min: None,
        };
        assert_eq!(judge(&gate, 0.01).result, Verdict::Passed);
        assert_eq!(judge(&gate, 0.2).result, Verdict::Failed);
        assert_eq!(judge(&gate, f64::NAN).result, Verdict::Failed);
    }
}
