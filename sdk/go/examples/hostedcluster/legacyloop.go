package main

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/plan"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/shadow"
)

// LegacyLoop is the legacy reconcile in HyperShift's shape (`--legacy func`): one function kept
// beside the phased reconcile, its steps marked with shadow.Step. It is the control whenever the
// control is the legacy loop (modes off, calibrate and shadow); in mode shadow the phased code of
// each marked step runs in dry-run at its mark, and the engine compares what the two wrote. It
// does what Legacy() does operation by operation: the two are the same controller.
func LegacyLoop() shadow.Legacy[*HostedCluster, State] {
	return shadow.Legacy[*HostedCluster, State]{Func: reconcileLegacy}
}

// legacySteps is the legacy loop's code in its order (the plan's legacy order): the shared
// helpers, the legacy SSH key code without the clean-up fix, the inline status update.
var legacySteps = []struct {
	name string
	code func(context.Context, *run) error
}{
	{"CPOImageAndNamespace", cpoImageAndNamespace},
	{"ValidConfigurationCondition", validConfigurationCondition},
	{"MonitoringAndCLISecrets", monitoringAndCLISecrets},
	{"PlatformCredentials", platformCredentials},
	{"RestoredFromBackup", restoredFromBackup},
	{"PullSecretSync", func(ctx context.Context, r *run) error {
		return copySecret(ctx, r.Client, r.Object.Namespace, hc(r).Spec.PullSecret.Name, cpNamespace(r), "pull-secret")
	}},
	{"SecretEncryptionSync", copyOptional(func(h *HostedCluster) *LocalRef { return h.Spec.SecretEncryption }, "encryption-key")},
	{"AuditWebhookSync", copyOptional(func(h *HostedCluster) *LocalRef { return h.Spec.AuditWebhook }, "audit-webhook")},
	{"SSHKeySync", legacySSHKeySync},
	{"AdditionalTrustBundle", trustBundle},
	{"ServiceAccountSigningKey", copyOptional(func(h *HostedCluster) *LocalRef { return h.Spec.ServiceAccountSigningKey }, "sa-signing-key")},
	{"UnmanagedEtcdMTLS", copyOptional(func(h *HostedCluster) *LocalRef { return h.Spec.UnmanagedEtcdTLS }, "etcd-client-tls")},
	{"ETCDMemberRecovery", etcdMemberRecovery},
	{"GlobalConfigSync", globalConfigSync},
	{"ReleaseImageVersion", releaseImageVersion},
	{"CoreHCPChain", coreHCPChain},
	{"RBACAndPolicies", rbacAndPolicies},
	{"KubeconfigAndPasswordSync", kubeconfigSync},
	{"OperatorDeployments", operatorDeployments},
	{"PlatformOIDCAndCSI", platformOIDCAndCSI},
}

// reconcileLegacy is the legacy loop: it writes through c, stops at its first error (the failure
// of the step it is in) and returns the result the controller-runtime controller requeues with.
// Outside the engine the marks do nothing and it is the controller's plain reconcile.
func reconcileLegacy(ctx context.Context, h *HostedCluster, c client.Client) (reconcile.Result, error) {
	r := &run{Client: c, Object: h, State: &State{}, Execution: shadow.ExecReal, Path: plan.PathLegacy}
	for _, step := range legacySteps {
		shadow.Step(ctx, step.name)
		if err := step.code(ctx, r); err != nil {
			return reconcile.Result{}, err
		}
	}
	shadow.Step(ctx, "PublicEndpointExposed")
	requeue, err := exposeEndpoint(ctx, r)
	return reconcile.Result{RequeueAfter: requeue}, err
}
