package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/shadow"
)

// The control plane's private API endpoint, which CoreHCPChain makes once the HostedControlPlane
// exists, as the Rust crate's (src/reconcilers/hostedcluster/endpoint.rs): a NodePort Service
// owned by the HostedControlPlane (the server allocates its cluster IP and node port) and a
// ConfigMap, named by the server from generateName, that gives the Service's address. Every value
// the server allocates travels into a later request (the owner's UID, the address), as in real
// controllers: what the write comparison must not mistake for a difference of the codes.

const (
	// EndpointService is the Service's name.
	EndpointService = "kube-apiserver-private"
	// EndpointLabel finds the endpoint ConfigMap (its name is the server's).
	EndpointLabel = "hypershift.openshift.io/endpoint"
	endpointPort  = 6443
)

// UncachedKinds are the kinds the controller reads from the API server, not from its informers'
// cache: the endpoint ConfigMap is found by its label, and a cache that has not yet seen the
// controller's own create of it would have it created twice. The candidate's client is given the
// same list, so the two read the same world.
func UncachedKinds() []client.Object { return []client.Object{&corev1.ConfigMap{}} }

// privateEndpoint writes the Service and the endpoint ConfigMap of hcp (as the server answered
// its apply: with its UID).
func privateEndpoint(ctx context.Context, c client.Client, hcp *unstructured.Unstructured) error {
	ns := hcp.GetNamespace()
	owner := metav1.OwnerReference{APIVersion: hcp.GetAPIVersion(), Kind: hcp.GetKind(), Name: hcp.GetName(), UID: hcp.GetUID()}
	service := object("v1", "Service", ns, EndpointService, map[string]any{
		"spec": map[string]any{
			"type":     "NodePort",
			"selector": map[string]any{"app": "kube-apiserver"},
			"ports":    []any{map[string]any{"name": "https", "port": int64(endpointPort), "targetPort": int64(endpointPort)}},
		},
	})
	service.SetOwnerReferences([]metav1.OwnerReference{owner})
	if err := apply(ctx, c, service); err != nil {
		return err
	}
	address, _, _ := unstructured.NestedString(service.Object, "spec", "clusterIP")
	if address == "" {
		return shadow.Errorf(shadow.ClassInternal, "the API server gave Service %s/%s no cluster IP", ns, EndpointService)
	}
	existing := &corev1.ConfigMapList{}
	if err := c.List(ctx, existing, client.InNamespace(ns), client.MatchingLabels{EndpointLabel: EndpointService}); err != nil {
		return fmt.Errorf("list the endpoint ConfigMap in %s: %w", ns, err)
	}
	if len(existing.Items) > 0 {
		return nil
	}
	endpoint := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "kas-endpoint-", Namespace: ns,
			Labels:          map[string]string{EndpointLabel: EndpointService},
			OwnerReferences: []metav1.OwnerReference{owner},
		},
		Data: map[string]string{"url": fmt.Sprintf("https://%s:%d", address, endpointPort)},
	}
	if err := c.Create(ctx, endpoint); err != nil {
		return fmt.Errorf("create the endpoint ConfigMap in %s: %w", ns, err)
	}
	return nil
}
