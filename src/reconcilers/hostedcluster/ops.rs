//! The operations of the HostedCluster reconciler.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, Namespace, PodSpec, PodTemplateSpec, Secret, Service,
};
use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicySpec};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::ResourceExt;
use kube::api::{Api, ObjectMeta};

use super::HostedCluster;
use super::common::{Ctx, cp_namespace, hc, hc_namespace, labels, set_condition};
use super::types::{HostedControlPlane, HostedControlPlaneSpec, LocalRef};
use crate::engine::{OpError, OpOutput, OpResult};
use crate::reconcilers::k8s::{
    apply, apply_cluster, copy_config_map, copy_secret, delete_if_present, meta,
};

/// Dispatches an operation by name.
pub(super) async fn run(op: &str, ctx: &mut Ctx) -> OpResult {
    match op {
        "CPOImageAndNamespace" => cpo_image_and_namespace(ctx).await,
        "PlatformCredentials" => platform_credentials(ctx).await,
        "PullSecretSync" => pull_secret_sync(ctx).await,
        "SecretEncryptionSync" => {
            copy_optional(
                ctx,
                |hc| hc.spec.secret_encryption.clone(),
                "encryption-key",
            )
            .await
        }
        "RestoredFromBackup" => restored_from_backup(ctx).await,
        "AuditWebhookSync" => {
            copy_optional(ctx, |hc| hc.spec.audit_webhook.clone(), "audit-webhook").await
        }
        "SSHKeySync" => ssh_key_sync(ctx).await,
        "AdditionalTrustBundle" => trust_bundle(ctx).await,
        "ServiceAccountSigningKey" => {
            copy_optional(
                ctx,
                |hc| hc.spec.service_account_signing_key.clone(),
                "sa-signing-key",
            )
            .await
        }
        "UnmanagedEtcdMTLS" => {
            copy_optional(
                ctx,
                |hc| hc.spec.unmanaged_etcd_tls.clone(),
                "etcd-client-tls",
            )
            .await
        }
        "ETCDMemberRecovery" => etcd_member_recovery(ctx).await,
        "GlobalConfigSync" => global_config_sync(ctx).await,
        "CoreHCPChain" => core_hcp_chain(ctx).await,
        "KubeconfigAndPasswordSync" => kubeconfig_sync(ctx).await,
        "PlatformOIDCAndCSI" => platform_oidc_and_csi(ctx).await,
        "MonitoringAndCLISecrets" => monitoring_and_cli_secrets(ctx).await,
        "ReleaseImageVersion" => release_image_version(ctx),
        "ManagedHSMVersionCheck" => super::divergent::managed_hsm_version_check(ctx),
        "OperatorDeployments" => operator_deployments(ctx).await,
        "RBACAndPolicies" => rbac_and_policies(ctx).await,
        "PublicEndpointExposed" => public_endpoint_exposed(ctx).await,
        other => Err(OpError::internal(format!(
            "operation {other} is not implemented"
        ))),
    }
}

async fn cpo_image_and_namespace(ctx: &mut Ctx) -> OpResult {
    let hc = hc(ctx);
    // The CPO image is looked up with the pull secret: it must exist.
    Api::<Secret>::namespaced(ctx.client(), &hc_namespace(ctx))
        .get(&hc.spec.pull_secret.name)
        .await
        .map_err(|e| {
            OpError::from(e)
                .context("read the pull secret to resolve the control-plane operator image")
        })?;
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(cp_namespace(ctx)),
            labels: Some(labels(&[(
                "hypershift.openshift.io/hosted-control-plane",
                "true",
            )])),
            annotations: Some(
                [(
                    "hypershift.openshift.io/cluster".to_owned(),
                    format!("{}/{}", hc_namespace(ctx), hc.name_any()),
                )]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    apply_cluster(&ctx.client(), &namespace).await?;
    Ok(OpOutput::done())
}

async fn platform_credentials(ctx: &mut Ctx) -> OpResult {
    let hc = hc(ctx);
    let secret = Secret {
        metadata: meta(&cp_namespace(ctx), "platform-credentials"),
        string_data: Some([("platform".to_owned(), hc.spec.platform.clone())].into()),
        ..Secret::default()
    };
    apply(&ctx.client(), &secret).await?;
    set_condition(
        ctx,
        "PlatformCredentialsFound",
        true,
        "AsExpected",
        "platform credentials are valid",
    )
    .await?;
    Ok(OpOutput::done())
}

async fn pull_secret_sync(ctx: &mut Ctx) -> OpResult {
    let name = hc(ctx).spec.pull_secret.name;
    copy_secret(
        &ctx.client(),
        &hc_namespace(ctx),
        &name,
        &cp_namespace(ctx),
        "pull-secret",
    )
    .await?;
    Ok(OpOutput::done())
}

/// Copies an optional Secret reference into the control-plane namespace; unset means nothing to do.
async fn copy_optional(
    ctx: &mut Ctx,
    reference: impl Fn(&HostedCluster) -> Option<LocalRef>,
    target: &str,
) -> OpResult {
    if let Some(r) = reference(&hc(ctx)) {
        copy_secret(
            &ctx.client(),
            &hc_namespace(ctx),
            &r.name,
            &cp_namespace(ctx),
            target,
        )
        .await?;
    }
    Ok(OpOutput::done())
}

async fn restored_from_backup(ctx: &mut Ctx) -> OpResult {
    let hcp = Api::<HostedControlPlane>::namespaced(ctx.client(), &cp_namespace(ctx))
        .get_opt(&hc(ctx).name_any())
        .await
        .map_err(OpError::from)?;
    let restored = hcp.is_some_and(|h| {
        h.annotations()
            .contains_key("hypershift.openshift.io/restored-from-backup")
    });
    if restored {
        set_condition(
            ctx,
            "HostedClusterRestoredFromBackup",
            true,
            "RestoreComplete",
            "the control plane was restored from a backup",
        )
        .await?;
    }
    Ok(OpOutput::done())
}

async fn ssh_key_sync(ctx: &mut Ctx) -> OpResult {
    match hc(ctx).spec.ssh_key {
        Some(r) => {
            copy_secret(
                &ctx.client(),
                &hc_namespace(ctx),
                &r.name,
                &cp_namespace(ctx),
                "ssh-key",
            )
            .await?;
        }
        None => {
            delete_if_present::<Secret>(&ctx.client(), &cp_namespace(ctx), "ssh-key").await?;
        }
    }
    Ok(OpOutput::done())
}

async fn trust_bundle(ctx: &mut Ctx) -> OpResult {
    match hc(ctx).spec.additional_trust_bundle {
        Some(r) => {
            copy_config_map(
                &ctx.client(),
                &hc_namespace(ctx),
                &r.name,
                &cp_namespace(ctx),
                "user-ca-bundle",
            )
            .await?;
        }
        None => {
            delete_if_present::<ConfigMap>(&ctx.client(), &cp_namespace(ctx), "user-ca-bundle")
                .await?;
        }
    }
    Ok(OpOutput::done())
}

async fn etcd_member_recovery(ctx: &mut Ctx) -> OpResult {
    // Feature-gated upstream: only with the annotation.
    if !hc(ctx)
        .annotations()
        .contains_key("hypershift.openshift.io/etcd-recovery")
    {
        return Ok(OpOutput::done());
    }
    let job = Job {
        metadata: meta(&cp_namespace(ctx), "etcd-recovery"),
        spec: Some(JobSpec {
            template: pod_template("etcd-recovery", "registry.example/etcd:recovery"),
            ..JobSpec::default()
        }),
        ..Job::default()
    };
    apply(&ctx.client(), &job).await?;
    Ok(OpOutput::done())
}

async fn global_config_sync(ctx: &mut Ctx) -> OpResult {
    let Some(config) = hc(ctx).spec.configuration else {
        return Ok(OpOutput::done());
    };
    let (from, to) = (hc_namespace(ctx), cp_namespace(ctx));
    for r in &config.config_maps {
        copy_config_map(&ctx.client(), &from, &r.name, &to, &r.name).await?;
    }
    for r in &config.secrets {
        copy_secret(&ctx.client(), &from, &r.name, &to, &r.name).await?;
    }
    Ok(OpOutput::done())
}

async fn core_hcp_chain(ctx: &mut Ctx) -> OpResult {
    let hc = hc(ctx);
    let ns = cp_namespace(ctx);
    let mut hcp = HostedControlPlane::new(
        &hc.name_any(),
        HostedControlPlaneSpec {
            release_image: hc.spec.release.image.clone(),
            platform: hc.spec.platform.clone(),
        },
    );
    hcp.metadata.namespace = Some(ns.clone());
    let hcp = apply(&ctx.client(), &hcp).await?;
    ctx.state.hosted_control_plane = Some(hcp.clone());
    // The infrastructure CR and the CAPI Cluster, modelled as ConfigMaps.
    for name in ["infrastructure", "capi-cluster"] {
        let cm = ConfigMap {
            metadata: meta(&ns, name),
            data: Some([("cluster".to_owned(), hc.name_any())].into()),
            ..ConfigMap::default()
        };
        apply(&ctx.client(), &cm).await?;
    }
    super::endpoint::private_endpoint(&ctx.client(), &ns, &hcp).await?;
    Ok(OpOutput::done())
}

async fn kubeconfig_sync(ctx: &mut Ctx) -> OpResult {
    let hcp = ctx.state.hosted_control_plane.clone().ok_or_else(|| {
        OpError::precondition("no HostedControlPlane: CoreHCPChain did not produce one")
    })?;
    // Nothing to copy until the control plane reports its kubeconfig.
    let Some(kubeconfig) = hcp.status.and_then(|s| s.kubeconfig) else {
        return Ok(OpOutput::done());
    };
    let target = format!("{}-admin-kubeconfig", hc(ctx).name_any());
    copy_secret(
        &ctx.client(),
        &cp_namespace(ctx),
        &kubeconfig.name,
        &hc_namespace(ctx),
        &target,
    )
    .await?;
    Ok(OpOutput::done())
}

async fn platform_oidc_and_csi(ctx: &mut Ctx) -> OpResult {
    let name = format!("{}-csi", cp_namespace(ctx));
    let role = ClusterRole {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            ..ObjectMeta::default()
        },
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec!["storage.k8s.io".into()]),
            resources: Some(vec!["volumeattachments".into()]),
            verbs: vec!["get".into(), "list".into()],
            ..PolicyRule::default()
        }]),
        ..ClusterRole::default()
    };
    apply_cluster(&ctx.client(), &role).await?;
    let binding = ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name,
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: "csi-driver".into(),
            namespace: Some(cp_namespace(ctx)),
            ..Subject::default()
        }]),
    };
    apply_cluster(&ctx.client(), &binding).await?;
    // Upstream also uploads the OIDC discovery documents to cloud storage here: an external side
    // effect no dry run contains, which is why the plan declares this operation `shadow: skip`.
    Ok(OpOutput::done())
}

async fn monitoring_and_cli_secrets(ctx: &mut Ctx) -> OpResult {
    let hc = hc(ctx);
    let cli = Secret {
        metadata: meta(&hc_namespace(ctx), &format!("{}-cli-config", hc.name_any())),
        string_data: Some([("cluster".to_owned(), hc.name_any())].into()),
        ..Secret::default()
    };
    apply(&ctx.client(), &cli).await?;
    let monitoring = ConfigMap {
        metadata: meta(&cp_namespace(ctx), "monitoring-config"),
        data: Some([("scrape".to_owned(), "true".to_owned())].into()),
        ..ConfigMap::default()
    };
    apply(&ctx.client(), &monitoring).await?;
    Ok(OpOutput::done())
}

/// `...:4.17.3-x86_64` -> `4.17.3`.
fn parse_release_version(image: &str) -> Option<String> {
    let tag = image.rsplit_once(':')?.1;
    let version = tag.split('-').next()?;
    let parts: Vec<&str> = version.split('.').collect();
    (parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit())))
    .then(|| version.to_owned())
}

fn release_image_version(ctx: &mut Ctx) -> OpResult {
    let image = hc(ctx).spec.release.image;
    let version = parse_release_version(&image).ok_or_else(|| {
        OpError::new(
            crate::vocab::ErrorClass::Invalid,
            format!("cannot parse a release version from image {image:?}"),
        )
    })?;
    ctx.state.release_version = Some(version);
    Ok(OpOutput::done())
}

fn pod_template(name: &str, image: &str) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels(&[("app", name)])),
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            containers: vec![Container {
                name: name.to_owned(),
                image: Some(image.to_owned()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
    }
}

async fn operator_deployments(ctx: &mut Ctx) -> OpResult {
    let version = ctx.state.release_version.clone().ok_or_else(|| {
        OpError::precondition("no release version: ReleaseImageVersion did not run")
    })?;
    let ns = cp_namespace(ctx);
    for name in ["control-plane-operator", "capi-manager", "capi-provider"] {
        let deployment = Deployment {
            metadata: meta(&ns, name),
            spec: DeploymentSpec {
                replicas: Some(1),
                selector: LabelSelector {
                    match_labels: Some(labels(&[("app", name)])),
                    ..LabelSelector::default()
                },
                template: pod_template(name, &format!("registry.example/{name}:{version}")),
                ..DeploymentSpec::default()
            },
            ..Deployment::default()
        };
        apply(&ctx.client(), &deployment).await?;
    }
    Ok(OpOutput::done())
}

async fn rbac_and_policies(ctx: &mut Ctx) -> OpResult {
    let ns = cp_namespace(ctx);
    let role = Role {
        metadata: meta(&ns, "prometheus"),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["services".into(), "endpoints".into(), "pods".into()]),
            verbs: vec!["get".into(), "list".into(), "watch".into()],
            ..PolicyRule::default()
        }]),
    };
    apply(&ctx.client(), &role).await?;
    let binding = RoleBinding {
        metadata: meta(&ns, "prometheus"),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: "prometheus".into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: "prometheus-k8s".into(),
            namespace: Some("openshift-monitoring".into()),
            ..Subject::default()
        }]),
    };
    apply(&ctx.client(), &binding).await?;
    let policy = NetworkPolicy {
        metadata: meta(&ns, "openshift-monitoring"),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector::default()),
            policy_types: Some(vec!["Ingress".into()]),
            ..NetworkPolicySpec::default()
        }),
    };
    apply(&ctx.client(), &policy).await?;
    Ok(OpOutput::done())
}

async fn public_endpoint_exposed(ctx: &mut Ctx) -> OpResult {
    let service = Api::<Service>::namespaced(ctx.client(), &cp_namespace(ctx))
        .get_opt("kube-apiserver")
        .await
        .map_err(OpError::from)?;
    if service.is_some() {
        set_condition(
            ctx,
            "PublicEndpointExposed",
            true,
            "AsExpected",
            "the API server is exposed",
        )
        .await?;
        Ok(OpOutput::done())
    } else {
        set_condition(
            ctx,
            "PublicEndpointExposed",
            false,
            "WaitingForService",
            "the kube-apiserver Service does not exist yet",
        )
        .await?;
        Ok(OpOutput::requeue(Duration::from_secs(30)))
    }
}

#[cfg(test)]
mod tests {
    use super::parse_release_version;

    #[test]
    fn release_versions() {
        assert_eq!(
            parse_release_version("quay.io/openshift-release-dev/ocp-release:4.17.3-x86_64")
                .as_deref(),
            Some("4.17.3")
        );
        assert_eq!(
            parse_release_version("registry:5000/ocp:4.18.0").as_deref(),
            Some("4.18.0")
        );
        assert_eq!(parse_release_version("quay.io/ocp-release:latest"), None);
        assert_eq!(parse_release_version("no-tag"), None);
    }
}
