package main

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The custom resources of deploy/crds, a small model of HyperShift's, in Go.

// GroupVersion of the example resources.
var GroupVersion = schema.GroupVersion{Group: "example.shadow-reconciler.io", Version: "v1"}

// LocalRef names an object in the HostedCluster's namespace.
type LocalRef struct {
	Name string `json:"name"`
}

// Release is the OpenShift release the cluster runs.
type Release struct {
	Image string `json:"image"`
}

// Configuration lists ConfigMaps and Secrets copied into the control plane.
type Configuration struct {
	ConfigMaps []LocalRef `json:"configMaps,omitempty"`
	Secrets    []LocalRef `json:"secrets,omitempty"`
}

// HostedClusterSpec is the desired hosted cluster.
type HostedClusterSpec struct {
	Release                  Release        `json:"release"`
	Platform                 string         `json:"platform"`
	PullSecret               LocalRef       `json:"pullSecret"`
	SSHKey                   *LocalRef      `json:"sshKey,omitempty"`
	AuditWebhook             *LocalRef      `json:"auditWebhook,omitempty"`
	AdditionalTrustBundle    *LocalRef      `json:"additionalTrustBundle,omitempty"`
	SecretEncryption         *LocalRef      `json:"secretEncryption,omitempty"`
	ServiceAccountSigningKey *LocalRef      `json:"serviceAccountSigningKey,omitempty"`
	UnmanagedEtcdTLS         *LocalRef      `json:"unmanagedEtcdTls,omitempty"`
	Configuration            *Configuration `json:"configuration,omitempty"`
}

// HostedClusterStatus is what the controller reports.
type HostedClusterStatus struct {
	Conditions []map[string]any `json:"conditions,omitempty"`
	Version    string           `json:"version,omitempty"`
	Kubeconfig *LocalRef        `json:"kubeconfig,omitempty"`
}

// HostedCluster is the object reconciled.
type HostedCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              HostedClusterSpec   `json:"spec"`
	Status            HostedClusterStatus `json:"status,omitempty"`
}

// HostedClusterList is a list of them.
type HostedClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HostedCluster `json:"items"`
}

// HostedControlPlaneSpec is what CoreHCPChain writes.
type HostedControlPlaneSpec struct {
	ReleaseImage string `json:"releaseImage"`
	Platform     string `json:"platform"`
}

// HostedControlPlaneStatus is reported by the control plane.
type HostedControlPlaneStatus struct {
	Kubeconfig *LocalRef `json:"kubeconfig,omitempty"`
	Ready      bool      `json:"ready,omitempty"`
}

// HostedControlPlane is the control plane in its own namespace.
type HostedControlPlane struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              HostedControlPlaneSpec   `json:"spec"`
	Status            HostedControlPlaneStatus `json:"status,omitempty"`
}

// HostedControlPlaneList is a list of them.
type HostedControlPlaneList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HostedControlPlane `json:"items"`
}

// deepCopy copies through JSON: small objects, and no generated code to keep in step.
func deepCopy[T any](in *T) *T {
	if in == nil {
		return nil
	}
	data, err := json.Marshal(in)
	if err != nil {
		panic(err)
	}
	out := new(T)
	if err := json.Unmarshal(data, out); err != nil {
		panic(err)
	}
	return out
}

func (in *HostedCluster) DeepCopyObject() runtime.Object          { return deepCopy(in) }
func (in *HostedClusterList) DeepCopyObject() runtime.Object      { return deepCopy(in) }
func (in *HostedControlPlane) DeepCopyObject() runtime.Object     { return deepCopy(in) }
func (in *HostedControlPlaneList) DeepCopyObject() runtime.Object { return deepCopy(in) }

// AddToScheme registers the types.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &HostedCluster{}, &HostedClusterList{}, &HostedControlPlane{}, &HostedControlPlaneList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
