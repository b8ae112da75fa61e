package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/shadow"
)

// The operations of the HostedCluster reference reconciler, the same as the Rust crate's
// (src/reconcilers/hostedcluster/ops.rs): most are written once and run with the real client in
// the control and with the dry-run client in the candidate; where the legacy loop's code is its
// own, it is in divergent.go.

// FieldManager owns what the operations apply.
const FieldManager = "shadow-reconciler"

// State is what the operations of one run share.
type State struct {
	// HostedCluster as last written (its resourceVersion is the next status update's
	// precondition).
	HostedCluster *HostedCluster
	// HostedControlPlane CoreHCPChain produced.
	HostedControlPlane *HostedControlPlane
	// ReleaseVersion ReleaseImageVersion parsed.
	ReleaseVersion string
}

type run = shadow.Run[*HostedCluster, State]

// Operations maps every operation of the hostedcluster plan's phased path to its code (the
// phased code, which the legacy loop shares but where Legacy has its own).
func Operations() map[string]shadow.Op[*HostedCluster, State] {
	return map[string]shadow.Op[*HostedCluster, State]{
		"CPOImageAndNamespace": cpoImageAndNamespace,
		"PlatformCredentials":  platformCredentials,
		"PullSecretSync": func(ctx context.Context, r *run) error {
			return copySecret(ctx, r.Client, r.Object.Namespace, hc(r).Spec.PullSecret.Name, cpNamespace(r), "pull-secret")
		},
		"SecretEncryptionSync":      copyOptional(func(h *HostedCluster) *LocalRef { return h.Spec.SecretEncryption }, "encryption-key"),
		"RestoredFromBackup":        restoredFromBackup,
		"AuditWebhookSync":          copyOptional(func(h *HostedCluster) *LocalRef { return h.Spec.AuditWebhook }, "audit-webhook"),
		"SSHKeySync":                sshKeySync,
		"AdditionalTrustBundle":     trustBundle,
		"ServiceAccountSigningKey":  copyOptional(func(h *HostedCluster) *LocalRef { return h.Spec.ServiceAccountSigningKey }, "sa-signing-key"),
		"UnmanagedEtcdMTLS":         copyOptional(func(h *HostedCluster) *LocalRef { return h.Spec.UnmanagedEtcdTLS }, "etcd-client-tls"),
		"ETCDMemberRecovery":        etcdMemberRecovery,
		"GlobalConfigSync":          globalConfigSync,
		"CoreHCPChain":              coreHCPChain,
		"KubeconfigAndPasswordSync": kubeconfigSync,
		"PlatformOIDCAndCSI":        platformOIDCAndCSI,
		"MonitoringAndCLISecrets":   monitoringAndCLISecrets,
		"ReleaseImageVersion":       releaseImageVersion,
		"ManagedHSMVersionCheck":    managedHSMVersionCheck,
		"OperatorDeployments":       operatorDeployments,
		"RBACAndPolicies":           rbacAndPolicies,
		"PublicEndpointExposed":     publicEndpointExposed,
	}
}

func hc(r *run) *HostedCluster {
	if r.State.HostedCluster != nil {
		return r.State.HostedCluster
	}
	return r.Object
}

// ControlPlaneNamespace is {namespace}-{name}, as HyperShift names it.
func ControlPlaneNamespace(h *HostedCluster) string { return h.Namespace + "-" + h.Name }

func cpNamespace(r *run) string { return ControlPlaneNamespace(r.Object) }

func object(apiVersion, kind, namespace, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: fields}
	if u.Object == nil {
		u.Object = map[string]any{}
	}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetName(name)
	if namespace != "" {
		u.SetNamespace(namespace)
	}
	return u
}

// apply server-side applies u, forcing ownership, as the Rust reconciler does.
func apply(ctx context.Context, c client.Client, u *unstructured.Unstructured) error {
	err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership)
	if err != nil {
		where := u.GetName()
		if ns := u.GetNamespace(); ns != "" {
			where = ns + "/" + where
		}
		return fmt.Errorf("apply %s %s: %w", u.GetKind(), where, err)
	}
	return nil
}

func copySecret(ctx context.Context, c client.Client, fromNS, name, toNS, toName string) error {
	source := &corev1.Secret{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: fromNS, Name: name}, source); err != nil {
		return fmt.Errorf("read secret %s/%s: %w", fromNS, name, err)
	}
	data := map[string]any{}
	for k, v := range source.Data {
		data[k] = v // []byte marshals as base64, as the API wants
	}
	fields := map[string]any{"data": data}
	if source.Type != "" {
		fields["type"] = string(source.Type)
	}
	return apply(ctx, c, object("v1", "Secret", toNS, toName, fields))
}

func copyConfigMap(ctx context.Context, c client.Client, fromNS, name, toNS, toName string) error {
	source := &corev1.ConfigMap{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: fromNS, Name: name}, source); err != nil {
		return fmt.Errorf("read configmap %s/%s: %w", fromNS, name, err)
	}
	data := map[string]any{}
	for k, v := range source.Data {
		data[k] = v
	}
	return apply(ctx, c, object("v1", "ConfigMap", toNS, toName, map[string]any{"data": data}))
}

func deleteIfPresent(ctx context.Context, c client.Client, obj client.Object) error {
	if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// setCondition sets a HostedCluster condition with a status update carrying the last known
// resourceVersion (a stale one answers 409), as HyperShift does mid-loop. No write when nothing
// changes.
func setCondition(ctx context.Context, r *run, kind string, status bool, reason, message string) error {
	current := hc(r).DeepCopyObject().(*HostedCluster)
	text := "False"
	if status {
		text = "True"
	}
	kept := current.Status.Conditions[:0:0]
	for _, c := range current.Status.Conditions {
		if c["type"] == kind {
			if c["status"] == text && c["reason"] == reason && c["message"] == message {
				return nil
			}
			continue
		}
		kept = append(kept, c)
	}
	current.Status.Conditions = append(kept, map[string]any{
		"type": kind, "status": text, "reason": reason, "message": message,
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
	})
	if err := r.Client.Status().Update(ctx, current); err != nil {
		return fmt.Errorf("update HostedCluster status (%s): %w", kind, err)
	}
	r.State.HostedCluster = current
	return nil
}

func cpoImageAndNamespace(ctx context.Context, r *run) error {
	h := hc(r)
	// The CPO image is looked up with the pull secret: it must exist.
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: r.Object.Namespace, Name: h.Spec.PullSecret.Name}, &corev1.Secret{}); err != nil {
		return fmt.Errorf("read the pull secret to resolve the control-plane operator image: %w", err)
	}
	ns := object("v1", "Namespace", "", cpNamespace(r), nil)
	ns.SetLabels(map[string]string{"hypershift.openshift.io/hosted-control-plane": "true"})
	ns.SetAnnotations(map[string]string{"hypershift.openshift.io/cluster": r.Object.Namespace + "/" + h.Name})
	return apply(ctx, r.Client, ns)
}

func platformCredentials(ctx context.Context, r *run) error {
	secret := object("v1", "Secret", cpNamespace(r), "platform-credentials",
		map[string]any{"stringData": map[string]any{"platform": hc(r).Spec.Platform}})
	if err := apply(ctx, r.Client, secret); err != nil {
		return err
	}
	return setCondition(ctx, r, "PlatformCredentialsFound", true, "AsExpected", "platform credentials are valid")
}

func copyOptional(ref func(*HostedCluster) *LocalRef, target string) shadow.Op[*HostedCluster, State] {
	return func(ctx context.Context, r *run) error {
		if l := ref(hc(r)); l != nil {
			return copySecret(ctx, r.Client, r.Object.Namespace, l.Name, cpNamespace(r), target)
		}
		return nil
	}
}

func restoredFromBackup(ctx context.Context, r *run) error {
	hcp := &HostedControlPlane{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: cpNamespace(r), Name: hc(r).Name}, hcp)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, restored := hcp.Annotations["hypershift.openshift.io/restored-from-backup"]; restored {
		return setCondition(ctx, r, "HostedClusterRestoredFromBackup", true, "RestoreComplete", "the control plane was restored from a backup")
	}
	return nil
}

func sshKeySync(ctx context.Context, r *run) error {
	if ref := hc(r).Spec.SSHKey; ref != nil {
		return copySecret(ctx, r.Client, r.Object.Namespace, ref.Name, cpNamespace(r), "ssh-key")
	}
	return deleteIfPresent(ctx, r.Client, &corev1.Secret{ObjectMeta: meta(cpNamespace(r), "ssh-key")})
}

func trustBundle(ctx context.Context, r *run) error {
	if ref := hc(r).Spec.AdditionalTrustBundle; ref != nil {
		return copyConfigMap(ctx, r.Client, r.Object.Namespace, ref.Name, cpNamespace(r), "user-ca-bundle")
	}
	return deleteIfPresent(ctx, r.Client, &corev1.ConfigMap{ObjectMeta: meta(cpNamespace(r), "user-ca-bundle")})
}

func podTemplate(name, image string) map[string]any {
	return map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"app": name}},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": name, "image": image}}},
	}
}

func etcdMemberRecovery(ctx context.Context, r *run) error {
	// Feature-gated upstream: only with the annotation.
	if _, on := hc(r).Annotations["hypershift.openshift.io/etcd-recovery"]; !on {
		return nil
	}
	job := object("batch/v1", "Job", cpNamespace(r), "etcd-recovery", map[string]any{
		"spec": map[string]any{"template": podTemplate("etcd-recovery", "registry.example/etcd:recovery")},
	})
	return apply(ctx, r.Client, job)
}

func globalConfigSync(ctx context.Context, r *run) error {
	config := hc(r).Spec.Configuration
	if config == nil {
		return nil
	}
	for _, ref := range config.ConfigMaps {
		if err := copyConfigMap(ctx, r.Client, r.Object.Namespace, ref.Name, cpNamespace(r), ref.Name); err != nil {
			return err
		}
	}
	for _, ref := range config.Secrets {
		if err := copySecret(ctx, r.Client, r.Object.Namespace, ref.Name, cpNamespace(r), ref.Name); err != nil {
			return err
		}
	}
	return nil
}

func coreHCPChain(ctx context.Context, r *run) error {
	h := hc(r)
	ns := cpNamespace(r)
	hcp := object(GroupVersion.String(), "HostedControlPlane", ns, h.Name, map[string]any{
		"spec": map[string]any{"releaseImage": h.Spec.Release.Image, "platform": h.Spec.Platform},
	})
	if err := apply(ctx, r.Client, hcp); err != nil {
		return err
	}
	produced := &HostedControlPlane{}
	if err := runtimeFromUnstructured(hcp, produced); err != nil {
		return shadow.Errorf(shadow.ClassInternal, "read the applied HostedControlPlane: %v", err)
	}
	r.State.HostedControlPlane = produced
	// The infrastructure CR and the CAPI Cluster, modelled as ConfigMaps.
	for _, name := range []string{"infrastructure", "capi-cluster"} {
		cm := object("v1", "ConfigMap", ns, name, map[string]any{"data": map[string]any{"cluster": h.Name}})
		if err := apply(ctx, r.Client, cm); err != nil {
			return err
		}
	}
	return privateEndpoint(ctx, r.Client, hcp)
}

func kubeconfigSync(ctx context.Context, r *run) error {
	hcp := r.State.HostedControlPlane
	if hcp == nil {
		return shadow.Precondition("no HostedControlPlane: CoreHCPChain did not produce one")
	}
	// Nothing to copy until the control plane reports its kubeconfig.
	if hcp.Status.Kubeconfig == nil {
		return nil
	}
	return copySecret(ctx, r.Client, cpNamespace(r), hcp.Status.Kubeconfig.Name, r.Object.Namespace, hc(r).Name+"-admin-kubeconfig")
}

func platformOIDCAndCSI(ctx context.Context, r *run) error {
	name := cpNamespace(r) + "-csi"
	role := object("rbac.authorization.k8s.io/v1", "ClusterRole", "", name, map[string]any{
		"rules": []any{map[string]any{"apiGroups": []any{"storage.k8s.io"}, "resources": []any{"volumeattachments"}, "verbs": []any{"get", "list"}}},
	})
	if err := apply(ctx, r.Client, role); err != nil {
		return err
	}
	binding := object("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", name, map[string]any{
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
		"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "csi-driver", "namespace": cpNamespace(r)}},
	})
	// Upstream also uploads the OIDC discovery documents to cloud storage here: an external
	// side effect no dry run contains, which is why the plan declares this operation
	// `shadow: skip`.
	return apply(ctx, r.Client, binding)
}

func monitoringAndCLISecrets(ctx context.Context, r *run) error {
	h := hc(r)
	cli := object("v1", "Secret", r.Object.Namespace, h.Name+"-cli-config", map[string]any{"stringData": map[string]any{"cluster": h.Name}})
	if err := apply(ctx, r.Client, cli); err != nil {
		return err
	}
	monitoring := object("v1", "ConfigMap", cpNamespace(r), "monitoring-config", map[string]any{"data": map[string]any{"scrape": "true"}})
	return apply(ctx, r.Client, monitoring)
}

var releaseVersion = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+$`)

// ParseReleaseVersion reads `...:4.17.3-x86_64` as 4.17.3.
func ParseReleaseVersion(image string) (string, bool) {
	at := strings.LastIndex(image, ":")
	if at < 0 {
		return "", false
	}
	version, _, _ := strings.Cut(image[at+1:], "-")
	return version, releaseVersion.MatchString(version)
}

func releaseImageVersion(_ context.Context, r *run) error {
	image := hc(r).Spec.Release.Image
	version, ok := ParseReleaseVersion(image)
	if !ok {
		return shadow.Errorf(shadow.ClassInvalid, "cannot parse a release version from image %q", image)
	}
	r.State.ReleaseVersion = version
	return nil
}

func operatorDeployments(ctx context.Context, r *run) error {
	version := r.State.ReleaseVersion
	if version == "" {
		return shadow.Precondition("no release version: ReleaseImageVersion did not run")
	}
	for _, name := range []string{"control-plane-operator", "capi-manager", "capi-provider"} {
		d := object("apps/v1", "Deployment", cpNamespace(r), name, map[string]any{"spec": map[string]any{
			"replicas": int64(1),
			"selector": map[string]any{"matchLabels": map[string]any{"app": name}},
			"template": podTemplate(name, "registry.example/"+name+":"+version),
		}})
		if err := apply(ctx, r.Client, d); err != nil {
			return err
		}
	}
	return nil
}

func rbacAndPolicies(ctx context.Context, r *run) error {
	ns := cpNamespace(r)
	role := object("rbac.authorization.k8s.io/v1", "Role", ns, "prometheus", map[string]any{
		"rules": []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"services", "endpoints", "pods"}, "verbs": []any{"get", "list", "watch"}}},
	})
	if err := apply(ctx, r.Client, role); err != nil {
		return err
	}
	binding := object("rbac.authorization.k8s.io/v1", "RoleBinding", ns, "prometheus", map[string]any{
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "prometheus"},
		"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "openshift-monitoring"}},
	})
	if err := apply(ctx, r.Client, binding); err != nil {
		return err
	}
	policy := object("networking.k8s.io/v1", "NetworkPolicy", ns, "openshift-monitoring", map[string]any{
		"spec": map[string]any{"podSelector": map[string]any{}, "policyTypes": []any{"Ingress"}},
	})
	return apply(ctx, r.Client, policy)
}

func publicEndpointExposed(ctx context.Context, r *run) error {
	requeue, err := exposeEndpoint(ctx, r)
	r.RequeueAfter(requeue)
	return err
}

// exposeEndpoint sets the PublicEndpointExposed condition; until the Service exists, it asks to
// be run again after a while.
func exposeEndpoint(ctx context.Context, r *run) (requeue time.Duration, err error) {
	err = r.Client.Get(ctx, types.NamespacedName{Namespace: cpNamespace(r), Name: "kube-apiserver"}, &corev1.Service{})
	switch {
	case err == nil:
		return 0, setCondition(ctx, r, "PublicEndpointExposed", true, "AsExpected", "the API server is exposed")
	case apierrors.IsNotFound(err):
		return 30 * time.Second, setCondition(ctx, r, "PublicEndpointExposed", false, "WaitingForService", "the kube-apiserver Service does not exist yet")
	default:
		return 0, err
	}
}
