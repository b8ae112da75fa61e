//! A fleet's data: each cluster's readiness, judged on its own data, beside the fleet's.

use serde::Serialize;

use super::counts::PlanCounts;
use super::{PlanReport, Readiness, judge};
use crate::plan::ReconcilePlan;

/// One cluster's readiness beside the fleet's.
#[derive(Clone, Debug, Serialize)]
pub struct ClusterReport {
    /// The cluster (the `cluster` column and partition).
    pub cluster: String,
    /// Its reconciles, over the plans analysed.
    pub reconciles: u64,
    /// Its objects, over the plans analysed.
    pub objects: u64,
    /// Its worst readiness over every plan and group.
    pub readiness: Readiness,
    /// Per plan and group, judged on this cluster's data alone.
    pub groups: Vec<ClusterGroup>,
}

/// A group's readiness judged on one cluster's data.
#[derive(Clone, Debug, Serialize)]
pub struct ClusterGroup {
    /// The plan.
    pub plan: String,
    /// The group.
    pub group: String,
    /// Its readiness on this cluster's data.
    pub readiness: Readiness,
}

impl ClusterReport {
    fn new(cluster: String, reports: &[PlanReport]) -> Self {
        let groups: Vec<ClusterGroup> = reports
            .iter()
            .flat_map(|p| {
                p.readiness.iter().map(|g| ClusterGroup {
                    plan: p.plan.clone(),
                    group: g.group.clone(),
                    readiness: g.readiness,
                })
            })
            .collect();
        Self {
            cluster,
            reconciles: reports.iter().map(|p| p.reconciles).sum(),
            objects: reports.iter().map(|p| p.objects).sum(),
            readiness: groups
                .iter()
                .map(|g| g.readiness)
                .max()
                .unwrap_or(Readiness::Inconclusive),
            groups,
        }
    }
}

/// Per cluster scanned, its report: the fleet's own (`reports`) when the data is one cluster's,
/// else judged on that cluster's counts alone.
pub(super) fn reports(
    clusters: Vec<(String, Option<Vec<PlanCounts>>)>,
    reports: &[PlanReport],
    plans: &[ReconcilePlan],
    min_samples: u64,
    z: f64,
) -> Vec<ClusterReport> {
    clusters
        .into_iter()
        .map(|(name, own)| match own {
            None => ClusterReport::new(name, reports),
            Some(own) => {
                let mine: Vec<PlanReport> = plans
                    .iter()
                    .zip(&own)
                    .filter(|(_, c)| c.reconciles > 0 || c.step_reconciles > 0)
                    .map(|(plan, c)| judge::judge(plan, c, 0, min_samples, z))
                    .collect();
                ClusterReport::new(name, &mine)
            }
        })
        .collect()
}
