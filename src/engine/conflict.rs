//! Status patches that may meet 409 Conflict, with Open Cluster Management's proposed policy
//! (`retry.RetryOnConflict(retry.DefaultRetry, ...)`) as the candidate.
//!
//! `patch_status` behaves as sdk-go's `PatchStatus`: no request when the computed status equals
//! the current one; otherwise one JSON merge patch of `{status}` carrying the object's uid and
//! resourceVersion, so a stale object answers 409. Under the retry policy, a 409 is followed by
//! a re-fetch, a recomputation from the fresh object (the no-op check still applies) and a new
//! patch, up to client-go's `DefaultRetry`: 5 attempts, 10 ms apart, jitter 0.1.

use std::time::Duration;

use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::classify::is_conflict;
use super::{OpContext, OpError};

/// client-go's `retry.DefaultRetry`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Backoff {
    /// Attempts in all.
    pub steps: u32,
    /// Wait before the second attempt.
    pub duration: Duration,
    /// Growth of the wait per attempt.
    pub factor: f64,
    /// Random extra wait, as a fraction of the wait.
    pub jitter: f64,
}

/// `retry.DefaultRetry`: 5 steps, 10 ms, factor 1.0, jitter 0.1.
pub const DEFAULT_RETRY: Backoff = Backoff {
    steps: 5,
    duration: Duration::from_millis(10),
    factor: 1.0,
    jitter: 0.1,
};

impl Backoff {
    /// The wait before attempt `attempt` (2-based: the first attempt does not wait).
    #[must_use]
    pub fn wait(&self, attempt: u32, unit_random: f64) -> Duration {
        let exponent = i32::try_from(attempt.saturating_sub(2)).unwrap_or(i32::MAX);
        let base = self.duration.as_secs_f64() * self.factor.powi(exponent);
        Duration::from_secs_f64(base * (1.0 + self.jitter * unit_random.clamp(0.0, 1.0)))
    }
}

/// What a status patch did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusPatch {
    /// The computed status equals the current one: no request.
    Unchanged,
    /// The status was patched.
    Patched,
}

fn status_of<K: Serialize>(object: &K) -> Value {
    serde_json::to_value(object)
        .ok()
        .and_then(|mut v| v.get_mut("status").map(Value::take))
        .unwrap_or(Value::Null)
}

/// Patches the object's status to what `compute` derives from an object, as described in the
/// module docs. Every 409 met is counted on the context.
pub async fn patch_status<K, S, F>(
    ctx: &mut OpContext<K, S>,
    api: &Api<K>,
    cached: &K,
    compute: F,
) -> Result<StatusPatch, OpError>
where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
    F: Fn(&K) -> Value,
{
    let name = cached.meta().name.clone().unwrap_or_default();
    let mut object = cached.clone();
    let mut attempt = 1;
    let mut rng = crate::util::Rng::new(0x5eed ^ u64::try_from(name.len()).unwrap_or(0));
    loop {
        let new = compute(&object);
        if new == status_of(&object) {
            return Ok(StatusPatch::Unchanged);
        }
        let meta = object.meta();
        let patch = json!({"metadata": {"uid": meta.uid, "resourceVersion": meta.resource_version}, "status": new});
        match api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Ok(StatusPatch::Patched),
            Err(e) if is_conflict(&e) => {
                ctx.count_conflict();
                if !ctx.retry_on_conflict() || attempt >= DEFAULT_RETRY.steps {
                    return Err(OpError::from(e)
                        .context(&format!("patch status of {name} (attempt {attempt})")));
                }
            }
            Err(e) => return Err(OpError::from(e).context(&format!("patch status of {name}"))),
        }
        attempt += 1;
        tokio::time::sleep(DEFAULT_RETRY.wait(attempt, rng.next_f64())).await;
        object = api
            .get(&name)
            .await
            .map_err(|e| OpError::from(e).context(&format!("re-fetch {name} after a conflict")))?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_retry_waits_10ms_plus_jitter() {
        assert_eq!(DEFAULT_RETRY.wait(2, 0.0), Duration::from_millis(10));
        assert_eq!(DEFAULT_RETRY.wait(5, 1.0), Duration::from_millis(11));
        let slower = Backoff {
            factor: 2.0,
            ..DEFAULT_RETRY
        };
        assert_eq!(slower.wait(4, 0.0), Duration::from_millis(40));
    }
}
