package shadow

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// The package's span names are the crate's: every name of tests/data/span-vectors.json (written
// by the Rust crate from src/vocab/span.rs) is here under the same key with the same value, and
// nothing else is.
func TestSpanNamesAreTheSharedVectors(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "tests", "data", "span-vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var vectors struct {
		Schema string            `json:"schema"`
		Names  map[string]string `json:"names"`
	}
	if err := json.Unmarshal(raw, &vectors); err != nil {
		t.Fatal(err)
	}
	if vectors.Schema != "shadow-reconciler.io/span-vectors/v1" {
		t.Fatalf("unknown vectors schema %q", vectors.Schema)
	}
	if len(vectors.Names) == 0 {
		t.Fatal("the vectors name nothing")
	}
	for key, want := range vectors.Names {
		got, ok := spanNames[key]
		if !ok {
			t.Errorf("%s = %q in the crate has no constant here", key, want)
		} else if got != want {
			t.Errorf("%s: %q here, %q in the crate", key, got, want)
		}
	}
	for key, got := range spanNames {
		if _, ok := vectors.Names[key]; !ok {
			t.Errorf("%s = %q here is not in the crate's vectors", key, got)
		}
	}
	if ReevaluatedAttribute != spanNames["REEVALUATED"] {
		t.Errorf("ReevaluatedAttribute is %q", ReevaluatedAttribute)
	}
}
