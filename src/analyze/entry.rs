//! The analyzer's entry points: a dataset (local or in an object store) and the plans in, the
//! [`Analysis`] out.

use std::path::Path;

use super::{
    Analysis, AnalyzeError, PlanReport, Readiness, SCHEMA, Settings, answer, clusters, judge, scan,
    stats,
};
use crate::dataset::Location;
use crate::plan::ReconcilePlan;

/// Analyses the local directory `dir` against `plans`.
///
/// A small simulated run written as Parquet, then analysed: per plan, the reconciles and objects
/// it rests on, and the readiness of every rollout group (here too few objects to judge).
///
/// ```
/// # #[tokio::main]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use shadow_reconciler::analyze::{self, Readiness};
/// use shadow_reconciler::dataset::{ParquetSink, SinkConfig};
/// use shadow_reconciler::scenario::{self, Scenario};
///
/// let dir = tempfile::tempdir()?;
/// let sink = Arc::new(ParquetSink::start(SinkConfig::new(dir.path()), None));
/// let settings = scenario::Settings {
///     hosted_clusters: 12,
///     addons: 3,
///     scenario: Scenario::MissingSecrets,
///     progress: false,
///     parquet: Some(sink.clone()),
///     ..scenario::Settings::default()
/// };
/// scenario::run(&settings).await?;
/// sink.shutdown(std::time::Duration::from_secs(10))?;
///
/// let plans = ["hostedcluster", "addon-install-progression"]
///     .map(|name| shadow_reconciler::plan::embedded::load(name).unwrap());
/// let analysis = analyze::analyze(dir.path(), &plans, &analyze::Settings::default())?;
/// let hc = analysis.plans.iter().find(|p| p.plan == "hostedcluster").unwrap();
/// assert_eq!(hc.plan_hash, *plans[0].hash());
/// assert_eq!(hc.objects, 12);
/// assert!(hc.reconciles >= 12);
/// // 12 objects are fewer than `min_samples` (30): no group can be judged ready.
/// assert_ne!(analysis.readiness, Readiness::Ready);
/// # Ok(())
/// # }
/// ```
pub fn analyze(
    dir: &Path,
    plans: &[ReconcilePlan],
    settings: &Settings,
) -> Result<Analysis, AnalyzeError> {
    analyze_at(&Location::Local(dir.to_owned()), plans, settings)
}

/// Analyses the dataset at `location` (a local directory or an object store's prefix) against
/// `plans`.
pub fn analyze_at(
    location: &Location,
    plans: &[ReconcilePlan],
    settings: &Settings,
) -> Result<Analysis, AnalyzeError> {
    if let Location::Local(dir) = location
        && !dir.is_dir()
    {
        return Err(AnalyzeError::NoDirectory(dir.clone()));
    }
    let dir = &location.root();
    if !settings.clusters.is_empty() {
        let known = scan::clusters(location)?;
        if let Some(missing) = settings.clusters.iter().find(|c| !known.contains(c)) {
            return Err(AnalyzeError::UnknownCluster {
                cluster: missing.clone(),
                dir: dir.to_owned(),
                known: if known.is_empty() {
                    "no data".to_owned()
                } else {
                    known.join(", ")
                },
            });
        }
    }
    let mut counts = scan::scan_since(
        location,
        plans,
        settings.threads,
        &settings.clusters,
        settings.since_us,
    )?;
    for s in &counts.skipped {
        tracing::warn!(path = %s.path.display(), error = %s.error, "skipped a Parquet file that cannot be read");
    }
    let z = stats::z_for(settings.confidence);
    let reports: Vec<PlanReport> = plans
        .iter()
        .zip(&counts.plans)
        .zip(&counts.other_versions)
        .filter(|((_, c), _)| c.reconciles > 0 || c.step_reconciles > 0 || c.cancelled > 0)
        .map(|((plan, c), &other)| judge::judge(plan, c, other, settings.min_samples, z))
        .collect();
    if reports.is_empty() {
        return Err(no_data(dir, plans, &counts));
    }
    let readiness = reports
        .iter()
        .flat_map(|p| p.readiness.iter().map(|g| g.readiness))
        .max()
        .unwrap_or(Readiness::Inconclusive);
    let clusters = clusters::reports(
        std::mem::take(&mut counts.clusters),
        &reports,
        plans,
        settings.min_samples,
        z,
    );
    Ok(Analysis {
        schema: SCHEMA,
        answer: answer::answer(&reports, readiness),
        dir: dir.to_owned(),
        files_read: counts.files_read,
        files_skipped: counts.skipped,
        rows: counts.rows,
        unknown_plans: counts.unknown_plans.into_iter().collect(),
        min_samples: settings.min_samples,
        confidence: settings.confidence,
        plans: reports,
        readiness,
        clusters,
        rollouts: crate::dataset::rollouts::read(location).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "the rollouts' record cannot be read; the report leaves it out");
            Vec::new()
        }),
    })
}

/// Why nothing could be analysed: what the directory holds instead, and which plan files to
/// pass when it holds rows of other plans.
fn no_data(dir: &Path, plans: &[ReconcilePlan], counts: &scan::Counts) -> AnalyzeError {
    let mut found: Vec<String> = counts
        .unknown_plans
        .iter()
        .map(|(k, v)| format!("{v} rows of plan {k}"))
        .collect();
    for (plan, other) in plans.iter().zip(&counts.other_versions) {
        if *other > 0 {
            found.push(format!(
                "{other} rows of another version of plan {}",
                plan.name()
            ));
        }
    }
    if found.is_empty() {
        found.push(format!("{} readable files, no rows", counts.files_read));
    }
    if !counts.skipped.is_empty() {
        found.push(format!(
            "{} files skipped, each logged with the reason",
            counts.skipped.len()
        ));
    }
    let mut named: Vec<String> = counts.unknown_plans.keys().cloned().collect();
    named.extend(
        plans
            .iter()
            .zip(&counts.other_versions)
            .filter(|(_, other)| **other > 0)
            .map(|(plan, _)| format!("{} (another version)", plan.name())),
    );
    let hint = if named.is_empty() {
        String::new()
    } else {
        format!(
            "; the data was recorded with the plan{} {}: pass the plan file it was recorded with, --plan FILE (one per plan)",
            if named.len() == 1 { "" } else { "s" },
            named.join(", ")
        )
    };
    AnalyzeError::NoData {
        dir: dir.to_owned(),
        plans: plans.iter().map(|p| p.name().to_owned()).collect(),
        found: found.join(", "),
        hint,
    }
}
