//! Where the HostedCluster reconciler's two code paths differ: the legacy loop's own code of
//! the operations in `super::LEGACY_CODE`, and the phased reconcile's operation the legacy loop
//! never got (`ManagedHSMVersionCheck`).

use kube::ResourceExt;

use super::common::{Ctx, cp_namespace, hc, hc_namespace, set_condition};
use crate::engine::{OpError, OpOutput, OpResult};
use crate::reconcilers::k8s::copy_secret;

/// Dispatches the legacy code of the operations in [`super::LEGACY_CODE`].
pub(super) async fn run_legacy(op: &str, ctx: &mut Ctx) -> OpResult {
    match op {
        "SSHKeySync" => legacy_ssh_key_sync(ctx).await,
        "ValidConfigurationCondition" => {
            set_condition(
                ctx,
                "ValidConfiguration",
                true,
                "AsExpected",
                "Configuration passes validation",
            )
            .await?;
            Ok(OpOutput::done())
        }
        other => Err(OpError::internal(format!(
            "operation {other} has no legacy code of its own"
        ))),
    }
}

/// The legacy loop's SSH key code: it copies the key, and never removes a copy once the
/// HostedCluster references none (the clean-up fix landed in the phased path only).
async fn legacy_ssh_key_sync(ctx: &mut Ctx) -> OpResult {
    if let Some(r) = hc(ctx).spec.ssh_key {
        copy_secret(
            &ctx.client(),
            &hc_namespace(ctx),
            &r.name,
            &cp_namespace(ctx),
            "ssh-key",
        )
        .await?;
    }
    Ok(OpOutput::done())
}

/// The first release that supports keys in a managed HSM.
const MANAGED_HSM_SINCE: (u32, u32) = (4, 17);

/// A HostedCluster whose keys live in a managed HSM must run a release that supports it.
pub(super) fn managed_hsm_version_check(ctx: &mut Ctx) -> OpResult {
    let hc = hc(ctx);
    if hc
        .annotations()
        .get(super::MANAGED_HSM_ANNOTATION)
        .is_none_or(|v| v != "true")
    {
        return Ok(OpOutput::done());
    }
    let version = ctx.state.release_version.clone().ok_or_else(|| {
        OpError::precondition("no release version: ReleaseImageVersion did not run")
    })?;
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    if (major, minor) < MANAGED_HSM_SINCE {
        return Err(OpError::new(
            crate::vocab::ErrorClass::Invalid,
            format!(
                "the encryption keys are in a managed HSM, which needs release {}.{} or later; the HostedCluster runs {version}",
                MANAGED_HSM_SINCE.0, MANAGED_HSM_SINCE.1
            ),
        ));
    }
    Ok(OpOutput::done())
}
