package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/plan"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/shadow"
)

// The code matches the shipped plan: the engine starts with it, as main builds it.
func TestTheCodeMatchesTheShippedPlan(t *testing.T) {
	p, err := plan.Load(filepath.Join("..", "..", "..", "..", "deploy", "plans", "hostedcluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mapper := apimeta.NewDefaultRESTMapper(nil)
	for gvk := range scheme.AllKnownTypes() {
		mapper.Add(gvk, apimeta.RESTScopeNamespace)
	}
	real := fake.NewClientBuilder().WithScheme(scheme).Build()
	dry, err := shadow.NewDryRun(&rest.Config{Host: "http://127.0.0.1:1"}, real, client.Options{Scheme: scheme, Mapper: mapper})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := shadow.NewWithLegacy(p, real, Operations(), Legacy(), shadow.Options{DryRun: dry}); err != nil {
		t.Fatal(err)
	}
	if _, err := shadow.NewWithLegacy(p, real, Operations(), LegacyLoop(), shadow.Options{DryRun: dry}); err != nil {
		t.Fatal(err)
	}
	// The legacy function marks the plan's legacy order, step by step.
	var marked []string
	for _, s := range legacySteps {
		marked = append(marked, s.name)
	}
	marked = append(marked, "PublicEndpointExposed")
	var order []string
	for _, op := range p.LegacyOrder {
		order = append(order, p.Operations[op].Name)
	}
	if fmt.Sprint(marked) != fmt.Sprint(order) {
		t.Fatalf("the legacy function marks %v; the plan's legacy order is %v", marked, order)
	}
	// Without its legacy code the legacy-only step is missing.
	var mismatch *shadow.MismatchError
	if _, err := shadow.New(p, real, Operations(), shadow.Options{DryRun: dry}); !errors.As(err, &mismatch) ||
		len(mismatch.MissingInCode) != 1 || mismatch.MissingInCode[0] != "ValidConfigurationCondition" {
		t.Fatalf("%v", err)
	}
}

func TestManagedHSMNeedsRelease417(t *testing.T) {
	cases := []struct {
		annotation, version string
		class               string // "" when it passes
	}{
		{"", "4.14.0", ""},
		{"false", "4.14.0", ""},
		{"true", "4.17.0", ""},
		{"true", "4.18.2", ""},
		{"true", "5.0.0", ""},
		{"true", "4.16.9", shadow.ClassInvalid},
		{"true", "3.99.0", shadow.ClassInvalid},
		{"true", "", shadow.ClassPrecondition},
	}
	for _, c := range cases {
		h := &HostedCluster{}
		if c.annotation != "" {
			h.Annotations = map[string]string{ManagedHSMAnnotation: c.annotation}
		}
		r := &run{Object: h, State: &State{ReleaseVersion: c.version}}
		err := managedHSMVersionCheck(context.Background(), r)
		if got := classOf(err); got != c.class {
			t.Errorf("%q on %q: %v", c.annotation, c.version, err)
		}
	}
}

func classOf(err error) string {
	if err == nil {
		return ""
	}
	return shadow.Classify(err)
}
