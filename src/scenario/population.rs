//! The simulated cluster's population: HostedClusters with their input secrets (some missing, as
//! the scenario says) and ClusterManagementAddOns.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};

use super::Scenario;
use crate::reconcilers::addon::{
    ClusterManagementAddOn, ClusterManagementAddOnSpec, ConfigRef, InstallStrategy, PlacementRef,
    SELF_MANAGED_ANNOTATION,
};
use crate::reconcilers::hostedcluster::{
    HostedCluster, HostedClusterSpec, HostedControlPlane, LocalRef, MANAGED_HSM_ANNOTATION,
    Release, control_plane_namespace,
};
use crate::util::Rng;

/// Namespaces the HostedClusters are spread over.
pub const NAMESPACES: usize = 10;

/// The share of HostedClusters that carry each fault. Each fault is planted in exactly
/// `round(rate × HostedClusters)` objects drawn at random (with the seed), independently of the
/// other faults: the number of faulty objects does not depend on the seed, which objects (and
/// which carry two faults) does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Faults {
    /// Referencing an SSH key secret that does not exist.
    pub missing_ssh_key: f64,
    /// Referencing an audit-webhook secret that does not exist.
    pub missing_audit_webhook: f64,
    /// Whose pull secret does not exist.
    pub missing_pull_secret: f64,
    /// Whose release image carries no parseable version.
    pub bad_release_image: f64,
    /// That reference no SSH key any more, while the copy made when they did is still in their
    /// control-plane namespace (the legacy loop never removes it; the phased code does). Drawn
    /// among those whose SSH key secret and pull secret exist: without its pull secret a cluster
    /// never got its control-plane namespace (`CPOImageAndNamespace` resolves the image with it),
    /// so it cannot hold a copy, and the namespace stays missing for the operations after it.
    pub stale_ssh_key_copy: f64,
    /// That keep their encryption keys in a managed HSM but run a release older than 4.17
    /// (`ManagedHSMVersionCheck`, in the phased path only, fails).
    pub managed_hsm_old_release: f64,
}

impl Faults {
    /// No fault.
    pub const NONE: Self = Self {
        missing_ssh_key: 0.0,
        missing_audit_webhook: 0.0,
        missing_pull_secret: 0.0,
        bad_release_image: 0.0,
        stale_ssh_key_copy: 0.0,
        managed_hsm_old_release: 0.0,
    };

    /// The scenario's faults. `missing-secrets` and `mixed` plant each fault in at least 30 of
    /// the default 200 HostedClusters (the analyzer's default `--min-samples`), except the
    /// audit-webhook secret and the managed HSM, which stay rarer so that faults are below it.
    #[must_use]
    pub const fn of(scenario: Scenario) -> Self {
        if scenario.missing_secrets() {
            Self {
                missing_ssh_key: 0.20,
                missing_audit_webhook: 0.05,
                missing_pull_secret: 0.17,
                bad_release_image: 0.17,
                stale_ssh_key_copy: 0.15,
                managed_hsm_old_release: 0.05,
            }
        } else {
            Self::NONE
        }
    }
}

/// `round(rate × n)`, at most `n`.
fn share(n: usize, rate: f64) -> usize {
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )] // a share of a population size
    let k = (rate.clamp(0.0, 1.0) * n as f64).round() as usize;
    k.min(n)
}

/// `round(rate × n)` distinct indices of `0..n`, drawn with `rng`.
fn draw(rng: &mut Rng, n: usize, rate: f64) -> Vec<bool> {
    draw_k(rng, n, share(n, rate))
}

/// `k` (at most `n`) distinct indices of `0..n`, drawn with `rng`.
fn draw_k(rng: &mut Rng, n: usize, k: usize) -> Vec<bool> {
    let k = k.min(n);
    let mut order: Vec<usize> = (0..n).collect();
    // A partial Fisher-Yates shuffle: the first k are a uniform sample.
    for i in 0..k {
        let j = i + rng.below(n - i);
        order.swap(i, j);
    }
    let mut chosen = vec![false; n];
    for &i in &order[..k] {
        chosen[i] = true;
    }
    chosen
}

/// `round(rate × eligible.len())` distinct indices among the `eligible` ones (all of them when
/// fewer), drawn with `rng`.
fn draw_among(rng: &mut Rng, eligible: &[bool], rate: f64) -> Vec<bool> {
    let candidates: Vec<usize> = (0..eligible.len()).filter(|&i| eligible[i]).collect();
    let picked = draw_k(rng, candidates.len(), share(eligible.len(), rate));
    let mut chosen = vec![false; eligible.len()];
    for (j, &i) in candidates.iter().enumerate() {
        chosen[i] = picked[j];
    }
    chosen
}

/// What was planted: how many objects miss which input.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Planted {
    /// HostedClusters created.
    pub hosted_clusters: usize,
    /// Of those, referencing an SSH key secret that does not exist.
    pub missing_ssh_key: usize,
    /// Referencing an audit-webhook secret that does not exist.
    pub missing_audit_webhook: usize,
    /// Whose pull secret does not exist.
    pub missing_pull_secret: usize,
    /// Whose release image carries no parseable version (`ReleaseImageVersion` fails, and every
    /// operation that uses the version cannot run).
    pub bad_release_image: usize,
    /// Referencing no SSH key, with a stale copy in their control-plane namespace.
    pub stale_ssh_key_copy: usize,
    /// With keys in a managed HSM and a release older than 4.17.
    pub managed_hsm_old_release: usize,
    /// ClusterManagementAddOns created.
    pub addons: usize,
}

fn named(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespace.map(str::to_owned),
        ..ObjectMeta::default()
    }
}

/// Creates (or updates, by server-side apply) the CRDs of both reference reconcilers and waits
/// until the API server serves them (`Established`), which a real server reports a moment after
/// the create.
pub async fn create_crds(client: &kube::Client) -> Result<(), kube::Error> {
    apply_crds(
        client,
        &[
            HostedCluster::crd(),
            HostedControlPlane::crd(),
            ClusterManagementAddOn::crd(),
        ],
    )
    .await
}

/// Applies `all` and waits until each is `Established`.
///
/// # Errors
/// The server refused one, or did not establish it within a minute.
pub async fn apply_crds(
    client: &kube::Client,
    all: &[CustomResourceDefinition],
) -> Result<(), kube::Error> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let apply = PatchParams::apply("shadow-reconciler").force();
    for crd in all {
        let name = crd.metadata.name.clone().unwrap_or_default();
        crds.patch(&name, &apply, &Patch::Apply(crd)).await?;
    }
    for crd in all {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let established = |c: &CustomResourceDefinition| {
            c.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c.type_ == "Established" && c.status == "True")
                })
        };
        // A real server establishes a new CRD within a second; a minute is a broken server.
        for attempt in 0.. {
            if established(&crds.get(&name).await?) {
                break;
            }
            if attempt == 600 {
                return Err(kube::Error::Service(
                    format!("CustomResourceDefinition {name} not Established after a minute")
                        .into(),
                ));
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

/// Fails when the cluster holds a population already: its objects would collide with the new
/// one's, and their status would skew the run.
pub async fn ensure_fresh(client: &kube::Client) -> Result<(), super::ScenarioError> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    match namespaces.get_opt("team-0").await {
        Ok(None) => {}
        Ok(Some(_)) => {
            return Err(super::ScenarioError::PopulationExists(
                "namespace team-0".into(),
            ));
        }
        Err(e) => return Err(super::ScenarioError::Population(e)),
    }
    let addons: Api<ClusterManagementAddOn> = Api::all(client.clone());
    let existing = match addons
        .list(&kube::api::ListParams::default().limit(1))
        .await
    {
        Ok(list) => list,
        // The CRD is not installed yet: no add-on either.
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
        Err(e) => return Err(super::ScenarioError::Population(e)),
    };
    if let Some(name) = existing.items.first().and_then(|a| a.metadata.name.clone()) {
        return Err(super::ScenarioError::PopulationExists(format!(
            "ClusterManagementAddOn {name}"
        )));
    }
    Ok(())
}

/// Creates the population, with `faults` planted among the HostedClusters.
pub async fn create(
    client: &kube::Client,
    faults: Faults,
    hosted_clusters: usize,
    addons: usize,
    rng: &mut Rng,
) -> Result<Planted, kube::Error> {
    let pp = PostParams::default();
    let mut planted = Planted {
        hosted_clusters,
        addons,
        ..Planted::default()
    };
    let ssh = draw(rng, hosted_clusters, faults.missing_ssh_key);
    let audit = draw(rng, hosted_clusters, faults.missing_audit_webhook);
    let pull = draw(rng, hosted_clusters, faults.missing_pull_secret);
    let release = draw(rng, hosted_clusters, faults.bad_release_image);
    // Drawn after the others, so that a seed plants the faults above where it always did.
    let had_namespace: Vec<bool> = (0..hosted_clusters).map(|i| !ssh[i] && !pull[i]).collect();
    let stale = draw_among(rng, &had_namespace, faults.stale_ssh_key_copy);
    let good_release: Vec<bool> = release.iter().map(|bad| !bad).collect();
    let hsm = draw_among(rng, &good_release, faults.managed_hsm_old_release);
    for n in 0..NAMESPACES.min(hosted_clusters.max(1)) {
        let ns = Namespace {
            metadata: named(&format!("team-{n}"), None),
            ..Namespace::default()
        };
        Api::<Namespace>::all(client.clone())
            .create(&pp, &ns)
            .await?;
    }
    for i in 0..hosted_clusters {
        let ns = format!("team-{}", i % NAMESPACES);
        let name = format!("hc-{i:04}");
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        let (missing_ssh, missing_audit, missing_pull, bad_release) =
            (ssh[i], audit[i], pull[i], release[i]);
        planted.bad_release_image += usize::from(bad_release);
        planted.missing_ssh_key += usize::from(missing_ssh);
        planted.missing_audit_webhook += usize::from(missing_audit);
        planted.missing_pull_secret += usize::from(missing_pull);
        planted.stale_ssh_key_copy += usize::from(stale[i]);
        planted.managed_hsm_old_release += usize::from(hsm[i]);
        if stale[i] {
            plant_stale_ssh_key(client, &ns, &name).await?;
        }
        for (suffix, missing) in [
            ("pull-secret", missing_pull),
            ("ssh-key", missing_ssh),
            ("audit-webhook", missing_audit),
            ("encryption-key", false),
        ] {
            if !missing {
                let secret = Secret {
                    metadata: named(&format!("{name}-{suffix}"), Some(&ns)),
                    string_data: Some([("value".to_owned(), format!("{name}-{suffix}"))].into()),
                    ..Secret::default()
                };
                secrets.create(&pp, &secret).await?;
            }
        }
        let bundle = ConfigMap {
            metadata: named(&format!("{name}-ca"), Some(&ns)),
            data: Some([("ca.crt".to_owned(), "pem".to_owned())].into()),
            ..ConfigMap::default()
        };
        Api::<ConfigMap>::namespaced(client.clone(), &ns)
            .create(&pp, &bundle)
            .await?;
        let local = |suffix: &str| LocalRef {
            name: format!("{name}-{suffix}"),
        };
        let spec = HostedClusterSpec {
            release: Release {
                image: if bad_release {
                    // A digest instead of a version tag: nothing to parse a version from.
                    format!("quay.io/openshift-release-dev/ocp-release@sha256:{i:064x}")
                } else {
                    format!(
                        "quay.io/openshift-release-dev/ocp-release:4.{}.{}-x86_64",
                        if hsm[i] { 16 } else { 16 + i % 3 },
                        i % 10
                    )
                },
            },
            platform: ["AWS", "Azure", "KubeVirt"][i % 3].to_owned(),
            pull_secret: local("pull-secret"),
            ssh_key: (!stale[i]).then(|| local("ssh-key")),
            audit_webhook: Some(local("audit-webhook")),
            additional_trust_bundle: Some(local("ca")),
            secret_encryption: Some(local("encryption-key")),
            ..HostedClusterSpec::default()
        };
        let mut hc = HostedCluster::new(&name, spec);
        hc.metadata.namespace = Some(ns.clone());
        if hsm[i] {
            hc.metadata.annotations =
                Some([(MANAGED_HSM_ANNOTATION.to_owned(), "true".to_owned())].into());
        }
        Api::<HostedCluster>::namespaced(client.clone(), &ns)
            .create(&pp, &hc)
            .await?;
    }
    create_addons(client, addons).await?;
    Ok(planted)
}

/// The control-plane namespace of `namespace/name` with the SSH key copy an earlier reconcile
/// made, before the HostedCluster stopped referencing a key.
async fn plant_stale_ssh_key(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<(), kube::Error> {
    let pp = PostParams::default();
    let mut hc = HostedCluster::new(name, HostedClusterSpec::default());
    hc.metadata.namespace = Some(namespace.to_owned());
    let cp = control_plane_namespace(&hc);
    let ns = Namespace {
        metadata: named(&cp, None),
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&pp, &ns)
        .await?;
    let copy = Secret {
        metadata: named("ssh-key", Some(&cp)),
        string_data: Some([("value".to_owned(), format!("{name}-ssh-key"))].into()),
        ..Secret::default()
    };
    Api::<Secret>::namespaced(client.clone(), &cp)
        .create(&pp, &copy)
        .await?;
    Ok(())
}

/// Creates the add-ons: 20% manual, 10% self-managed, the rest installed by placements.
async fn create_addons(client: &kube::Client, addons: usize) -> Result<(), kube::Error> {
    let pp = PostParams::default();
    for i in 0..addons {
        let (strategy, self_managed) = match i % 10 {
            0 | 1 => ("Manual", false),
            2 => ("Placements", true),
            _ => ("Placements", false),
        };
        let spec = ClusterManagementAddOnSpec {
            install_strategy: InstallStrategy {
                type_: strategy.to_owned(),
                placements: (0..=i % 3)
                    .map(|p| PlacementRef {
                        name: format!("placement-{p}"),
                        namespace: "open-cluster-management".into(),
                    })
                    .collect(),
            },
            default_configs: vec![ConfigRef {
                group: "addon.open-cluster-management.io".into(),
                resource: "addondeploymentconfigs".into(),
                name: format!("addon-{i}-defaults"),
                namespace: "open-cluster-management".into(),
            }],
        };
        let mut addon = ClusterManagementAddOn::new(&format!("addon-{i:02}"), spec);
        if self_managed {
            addon.metadata.annotations =
                Some([(SELF_MANAGED_ANNOTATION.to_owned(), "self".to_owned())].into());
        }
        Api::<ClusterManagementAddOn>::all(client.clone())
            .create(&pp, &addon)
            .await?;
    }
    Ok(())
}
