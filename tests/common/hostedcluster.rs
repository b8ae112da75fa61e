//! A HostedCluster and its inputs in any API server (the simulator or a real kube-apiserver),
//! and reference reconcilers whose legacy code differs in known ways.

use std::future::Future;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use std::sync::Arc;

use shadow_reconciler::engine::{
    Engine, MemorySink, OpContext, OpResult, ReconcileRecord, Reconciler,
};
use shadow_reconciler::flag::{FlagSpec, LiveFlag};
use shadow_reconciler::reconcilers::hostedcluster::{
    self, HostedCluster, HostedClusterReconciler, HostedClusterSpec, HostedControlPlane, LocalRef,
    Release, State,
};
use shadow_reconciler::vocab::Mode;

use super::wait::wait_until_async;

/// The namespace of the HostedClusters.
pub const NS: &str = "clusters";

/// A reference to a Secret or ConfigMap of the HostedCluster's namespace.
pub fn local(name: &str) -> LocalRef {
    LocalRef { name: name.into() }
}

fn named(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: namespace.map(str::to_owned),
        ..ObjectMeta::default()
    }
}

/// One reconcile of HostedCluster `name` (in [`NS`]) by a fresh engine of `reconciler` with the
/// shipped plan, in `mode`; its record. The shadow guard must refuse nothing.
pub async fn reconcile<R: Reconciler<Object = HostedCluster>>(
    client: &kube::Client,
    reconciler: R,
    name: &str,
    mode: Mode,
) -> ReconcileRecord {
    let sink = MemorySink::new();
    let plan = HostedClusterReconciler::plan();
    let engine = Engine::new(
        Arc::new(reconciler),
        plan.clone(),
        client.clone(),
        Arc::new(
            LiveFlag::new(
                FlagSpec {
                    mode,
                    ..FlagSpec::default()
                },
                vec![plan],
            )
            .unwrap(),
        ),
    )
    .unwrap()
    .with_sink(Arc::new(sink.clone()));
    let hc = Api::<HostedCluster>::namespaced(client.clone(), NS)
        .get(name)
        .await
        .unwrap();
    engine.reconcile(Arc::new(hc)).await;
    assert_eq!(engine.guard().refused(), 0);
    sink.records().pop().expect("one record")
}

/// The CRDs (server-side applied, so twice is fine), established.
pub async fn install_crds(client: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let apply = PatchParams::apply("tests").force();
    for crd in [HostedCluster::crd(), HostedControlPlane::crd()] {
        let name = crd.metadata.name.clone().unwrap();
        crds.patch(&name, &apply, &Patch::Apply(&crd))
            .await
            .unwrap();
        // Past the bound, the test goes on: its own requests say what is not served.
        let _ = wait_until_async(
            &format!("{name} established"),
            std::time::Duration::from_mins(1),
            std::time::Duration::from_millis(100),
            async || {
                let c = crds.get(&name).await.unwrap();
                let established = c.status.and_then(|s| s.conditions).is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c.type_ == "Established" && c.status == "True")
                });
                if established {
                    Ok(())
                } else {
                    Err("not Established".to_owned())
                }
            },
        )
        .await;
    }
}

/// Creates namespace `ns` unless it exists.
pub async fn namespace(client: &kube::Client, ns: &str) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces.get_opt(ns).await.unwrap().is_none() {
        let object = Namespace {
            metadata: named(ns, None),
            ..Namespace::default()
        };
        namespaces
            .create(&PostParams::default(), &object)
            .await
            .unwrap();
    }
}

/// The CRDs, the namespace [`NS`], the input secrets and the trust bundle of HostedCluster
/// `name` (prefixed with it), and the HostedCluster, whose spec `adjust` may change.
pub async fn hosted_cluster(
    client: &kube::Client,
    name: &str,
    adjust: impl FnOnce(&mut HostedClusterSpec),
) -> HostedCluster {
    install_crds(client).await;
    namespace(client, NS).await;
    let pp = PostParams::default();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let input = |suffix: &str| format!("{name}-{suffix}");
    for suffix in ["pull-secret", "ssh-key", "audit-webhook", "encryption-key"] {
        let secret = Secret {
            metadata: named(&input(suffix), None),
            string_data: Some([("key".to_owned(), "value".to_owned())].into()),
            ..Secret::default()
        };
        secrets.create(&pp, &secret).await.unwrap();
    }
    let bundle = ConfigMap {
        metadata: named(&input("trust-bundle"), None),
        data: Some([("ca.crt".to_owned(), "pem".to_owned())].into()),
        ..ConfigMap::default()
    };
    Api::<ConfigMap>::namespaced(client.clone(), NS)
        .create(&pp, &bundle)
        .await
        .unwrap();
    let mut spec = HostedClusterSpec {
        release: Release {
            image: "quay.io/openshift-release-dev/ocp-release:4.17.3-x86_64".into(),
        },
        platform: "AWS".into(),
        pull_secret: local(&input("pull-secret")),
        ssh_key: Some(local(&input("ssh-key"))),
        audit_webhook: Some(local(&input("audit-webhook"))),
        additional_trust_bundle: Some(local(&input("trust-bundle"))),
        secret_encryption: Some(local(&input("encryption-key"))),
        ..HostedClusterSpec::default()
    };
    adjust(&mut spec);
    Api::<HostedCluster>::namespaced(client.clone(), NS)
        .create(&pp, &HostedCluster::new(name, spec))
        .await
        .unwrap()
}

/// The control-plane namespace of HostedCluster `name` with a Secret or ConfigMap in it, as an
/// earlier reconcile left it.
pub async fn control_plane_object(client: &kube::Client, name: &str, object: Leftover<'_>) {
    let cp = format!("{NS}-{name}");
    namespace(client, &cp).await;
    let pp = PostParams::default();
    match object {
        Leftover::Secret(secret) => {
            let copy = Secret {
                metadata: named(secret, None),
                string_data: Some([("key".to_owned(), "value".to_owned())].into()),
                ..Secret::default()
            };
            Api::<Secret>::namespaced(client.clone(), &cp)
                .create(&pp, &copy)
                .await
                .unwrap();
        }
        Leftover::ConfigMap(config_map) => {
            let copy = ConfigMap {
                metadata: named(config_map, None),
                data: Some([("dashboard".to_owned(), "{}".to_owned())].into()),
                ..ConfigMap::default()
            };
            Api::<ConfigMap>::namespaced(client.clone(), &cp)
                .create(&pp, &copy)
                .await
                .unwrap();
        }
    }
}

/// An object an earlier reconcile left in a control-plane namespace.
pub enum Leftover<'a> {
    /// A Secret of this name.
    Secret(&'a str),
    /// A ConfigMap of this name.
    ConfigMap(&'a str),
}

/// The reference reconciler with a planted behavioural difference in `MonitoringAndCLISecrets`:
/// its phased code also sets `retention` in the monitoring ConfigMap (a field the legacy code
/// does not write) and deletes the `monitoring-dashboard` ConfigMap (which the legacy code
/// keeps); its legacy code is the shipped one.
#[derive(Clone, Copy, Debug, Default)]
pub struct PlantedReconciler;

/// The operations whose legacy code [`PlantedReconciler`] runs from `run_legacy`: the shipped
/// reconciler's and the planted one.
static PLANTED_LEGACY: std::sync::LazyLock<Vec<&str>> = std::sync::LazyLock::new(|| {
    [hostedcluster::LEGACY_CODE, &["MonitoringAndCLISecrets"]].concat()
});

impl Reconciler for PlantedReconciler {
    type Object = HostedCluster;
    type State = State;

    fn operations(&self) -> &'static [&'static str] {
        hostedcluster::OPERATIONS
    }

    async fn run(&self, op: &str, ctx: &mut OpContext<HostedCluster, State>) -> OpResult {
        let result = HostedClusterReconciler.run(op, ctx).await?;
        if op == "MonitoringAndCLISecrets" {
            let cp = format!(
                "{}-{}",
                ctx.object()
                    .metadata
                    .namespace
                    .as_deref()
                    .unwrap_or_default(),
                ctx.object().metadata.name.as_deref().unwrap_or_default()
            );
            let monitoring = ConfigMap {
                metadata: named("monitoring-config", Some(&cp)),
                data: Some(
                    [
                        ("scrape".to_owned(), "true".to_owned()),
                        ("retention".to_owned(), "15d".to_owned()),
                    ]
                    .into(),
                ),
                ..ConfigMap::default()
            };
            shadow_reconciler::reconcilers::k8s::apply(&ctx.client(), &monitoring).await?;
            shadow_reconciler::reconcilers::k8s::delete_if_present::<ConfigMap>(
                &ctx.client(),
                &cp,
                "monitoring-dashboard",
            )
            .await?;
        }
        Ok(result)
    }

    fn legacy_code(&self) -> &'static [&'static str] {
        &PLANTED_LEGACY
    }

    async fn run_legacy(&self, op: &str, ctx: &mut OpContext<HostedCluster, State>) -> OpResult {
        if op == "MonitoringAndCLISecrets" {
            HostedClusterReconciler.run(op, ctx).await
        } else {
            HostedClusterReconciler.run_legacy(op, ctx).await
        }
    }
}

/// The reference reconciler with one code for every operation of both paths (the shipped one
/// gives `SSHKeySync` legacy code of its own): the candidate reuses every control result, as
/// for a controller whose two paths share their code.
#[derive(Clone, Copy, Debug, Default)]
pub struct SharedCodeReconciler;

impl Reconciler for SharedCodeReconciler {
    type Object = HostedCluster;
    type State = State;

    fn operations(&self) -> &'static [&'static str] {
        hostedcluster::OPERATIONS
    }

    fn run<'a>(
        &'a self,
        op: &'a str,
        ctx: &'a mut OpContext<HostedCluster, State>,
    ) -> impl Future<Output = OpResult> + Send + 'a {
        HostedClusterReconciler.run(op, ctx)
    }

    fn legacy_code(&self) -> &'static [&'static str] {
        hostedcluster::LEGACY_ONLY
    }

    fn run_legacy<'a>(
        &'a self,
        op: &'a str,
        ctx: &'a mut OpContext<HostedCluster, State>,
    ) -> impl Future<Output = OpResult> + Send + 'a {
        HostedClusterReconciler.run_legacy(op, ctx)
    }
}

/// A write difference in brief: `Kind namespace/name`, the two verbs, the fields, intended.
pub type Brief = (
    String,
    Option<shadow_reconciler::vocab::WriteVerb>,
    Option<shadow_reconciler::vocab::WriteVerb>,
    Vec<String>,
    bool,
);

/// The write differences of a record's operations of both paths, in brief.
pub fn compared(record: &ReconcileRecord) -> Vec<Brief> {
    record
        .write_differences
        .iter()
        .filter(|d| d.only.is_none())
        .map(|d| {
            (
                format!(
                    "{} {}/{}",
                    d.kind,
                    d.namespace.as_deref().unwrap_or(""),
                    d.name
                ),
                d.control,
                d.candidate,
                d.fields.clone(),
                d.intended,
            )
        })
        .collect()
}

/// What `PlantedReconciler` writes differently on HostedCluster `alpha`, in brief.
pub fn planted_alpha() -> Vec<Brief> {
    use shadow_reconciler::vocab::WriteVerb;
    vec![
        (
            "ConfigMap clusters-alpha/monitoring-config".to_owned(),
            Some(WriteVerb::Patch),
            Some(WriteVerb::Patch),
            vec!["data.retention".to_owned()],
            false,
        ),
        (
            "ConfigMap clusters-alpha/monitoring-dashboard".to_owned(),
            None,
            Some(WriteVerb::Delete),
            Vec::new(),
            false,
        ),
    ]
}
