package flag_test

import (
	"fmt"
	"path/filepath"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/flag"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/plan"
)

// The flag ConfigMap's data read against the plans (a group no plan has is an error), then the
// mode each object gets: enforce inside the 50% ramp, shadow (the mode below) outside it. An
// object's bucket comes from its UID, so it stays on one side of the ramp in every process and
// in the Rust crate (tests/data/flag-vectors.json).
func ExampleParseConfigMap() {
	p, err := plan.Load(filepath.Join("..", "..", "..", "deploy", "plans", "addon-install-progression.yaml"))
	if err != nil {
		panic(err)
	}
	data := map[string]string{
		"mode":           "enforce",
		"rampPercent":    "50",
		"enforcedGroups": "status-patches",
	}
	spec, err := flag.ParseConfigMap(data, nil, flag.Default(), []*plan.Plan{p})
	if err != nil {
		panic(err)
	}
	fmt.Println(spec.Summary())
	for _, uid := range []string{"uid-1", "uid-2", "uid-3", "uid-4"} {
		fmt.Println(uid, flag.Bucket(uid), flag.ModeFor(spec.Mode, spec.Ramp, uid))
	}
	_, err = flag.ParseConfigMap(map[string]string{"enforcedGroups": "status-patch"}, nil, flag.Default(), []*plan.Plan{p})
	fmt.Println(err)
	// Output:
	// mode=enforce enforcedGroups=[status-patches] candidateGroups=every group rampPercent=50 allowObjectOverride=false
	// uid-1 5495 shadow
	// uid-2 9459 shadow
	// uid-3 3933 enforce
	// uid-4 5262 shadow
	// data.enforcedGroups: "status-patch": no plan has this rollout group; known: addon-install-progression/status-patches, addon-install-progression/config-references
}
