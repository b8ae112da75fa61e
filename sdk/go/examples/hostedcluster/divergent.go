package main

import (
	"context"
	"strconv"
	"strings"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/shadow"
)

// Where the HostedCluster reconciler's two code paths differ, as the Rust crate's
// (src/reconcilers/hostedcluster/divergent.rs) and as the shipped plan declares them: the legacy
// loop's own code of SSHKeySync (without the clean-up fix) and its inline status update
// (ValidConfigurationCondition, `only: legacy`), and the phased reconcile's check the legacy
// loop never got (ManagedHSMVersionCheck, `only: phased`, in Operations).

// Legacy is the legacy loop's code where it is not the phased code: the engine runs it in the
// control whenever the control is the legacy loop (modes off and shadow), and in mode shadow
// runs the phased code of SSHKeySync in dry-run just before it and compares what the two wrote.
func Legacy() shadow.Legacy[*HostedCluster, State] {
	return shadow.Legacy[*HostedCluster, State]{Ops: map[string]shadow.Op[*HostedCluster, State]{
		"SSHKeySync":                  legacySSHKeySync,
		"ValidConfigurationCondition": validConfigurationCondition,
	}}
}

// legacySSHKeySync is the legacy loop's SSH key code: it copies the key, and never removes a
// copy once the HostedCluster references none (the clean-up fix, sshKeySync's delete, landed in
// the phased path only; the plan declares that difference intended).
func legacySSHKeySync(ctx context.Context, r *run) error {
	if ref := hc(r).Spec.SSHKey; ref != nil {
		return copySecret(ctx, r.Client, r.Object.Namespace, ref.Name, cpNamespace(r), "ssh-key")
	}
	return nil
}

// validConfigurationCondition is the legacy loop's inline status update right after the pull
// secret and the CPO image; the phased reconcile has no such step.
func validConfigurationCondition(ctx context.Context, r *run) error {
	return setCondition(ctx, r, "ValidConfiguration", true, "AsExpected", "Configuration passes validation")
}

// ManagedHSMAnnotation says that a HostedCluster keeps its encryption keys in a managed HSM.
const ManagedHSMAnnotation = "hypershift.openshift.io/kms-managed-hsm"

// managedHSMSince is the first release that supports keys in a managed HSM.
var managedHSMSince = [2]int{4, 17}

// managedHSMVersionCheck: a HostedCluster whose keys live in a managed HSM must run a release
// that supports it. It only reads.
func managedHSMVersionCheck(_ context.Context, r *run) error {
	if hc(r).Annotations[ManagedHSMAnnotation] != "true" {
		return nil
	}
	version := r.State.ReleaseVersion
	if version == "" {
		return shadow.Precondition("no release version: ReleaseImageVersion did not run")
	}
	part := func(parts []string, i int) int {
		if i >= len(parts) {
			return 0
		}
		n, err := strconv.Atoi(parts[i])
		if err != nil || n < 0 {
			return 0
		}
		return n
	}
	parts := strings.Split(version, ".")
	major, minor := part(parts, 0), part(parts, 1)
	if major < managedHSMSince[0] || (major == managedHSMSince[0] && minor < managedHSMSince[1]) {
		return shadow.Errorf(shadow.ClassInvalid, "the encryption keys are in a managed HSM, which needs release %d.%d or later; the HostedCluster runs %s",
			managedHSMSince[0], managedHSMSince[1], version)
	}
	return nil
}
