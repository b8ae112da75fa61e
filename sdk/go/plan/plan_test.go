package plan

import (
	"path/filepath"
	"testing"
)

func TestShippedPlansLoad(t *testing.T) {
	for _, name := range []string{"hostedcluster", "addon-install-progression"} {
		p, err := Load(filepath.Join("../../../deploy/plans", name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if p.Name != name || len(p.Operations) == 0 || len(p.Hash()) != 64 {
			t.Fatalf("%s: name %q, %d operations, hash %q", name, p.Name, len(p.Operations), p.Hash())
		}
		if len(p.LegacyOrder) != len(p.Operations) || len(p.PhasedOrder) != len(p.Operations) {
			t.Fatalf("%s: orders do not cover the operations", name)
		}
	}
}
