package shadow

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/flag"
)

// On the happy path the candidate reuses every result of the control: shadow sends exactly
// the requests off sends, and its dry-run client sends none. Counted at an HTTP server, by
// user agent, over the same REST clients a controller builds.
func TestShadowSendsNoExtraRequestOnTheHappyPath(t *testing.T) {
	var mu sync.Mutex
	requests := map[string]int{}
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		requests[r.UserAgent()]++
		mu.Unlock()
		name := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"` + name + `","namespace":"ns","resourceVersion":"1"}}`))
	}))
	defer server.Close()
	cfg := &rest.Config{Host: server.URL, UserAgent: "control"}
	cfg.ContentType = "application/json"
	cfg.QPS = -1 // no client-side throttling: the test counts requests, not time
	options := client.Options{Scheme: clientScheme(), Mapper: restMapper()}
	real, err := client.New(cfg, options)
	if err != nil {
		t.Fatal(err)
	}
	dry, err := NewDryRun(cfg, real, options)
	if err != nil {
		t.Fatal(err)
	}
	p := shipped(t, "hostedcluster")
	ops := map[string]Op[*corev1.ConfigMap, struct{}]{}
	for _, op := range p.Operations {
		name := op.Name
		ops[name] = func(ctx context.Context, r *Run[*corev1.ConfigMap, struct{}]) error {
			cm := &corev1.ConfigMap{}
			if err := r.Client.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "in-" + name}, cm); err != nil {
				return err
			}
			out := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "out-" + name}}
			return r.Client.Update(ctx, out)
		}
	}
	object := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "hc", UID: "u"}}
	count := func(mode flag.Mode) map[string]int {
		spec := flag.Default()
		spec.Mode = mode
		f, err := StaticFlag(spec, p)
		if err != nil {
			t.Fatal(err)
		}
		e, err := New(p, real, ops, Options{Flag: f, DryRun: dry})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		clear(requests)
		mu.Unlock()
		for range 5 {
			if out := e.Reconcile(context.Background(), object); out.Err != nil {
				t.Fatalf("%s: %v", mode, out.Err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		return map[string]int{"control": requests["control"], "dry": requests[UserAgent]}
	}
	off, shadow := count(flag.Off), count(flag.Shadow)
	if off["control"] != 5*2*len(p.Operations) {
		t.Fatalf("off: %v", off)
	}
	if shadow["control"] != off["control"] || shadow["dry"] != 0 {
		t.Fatalf("shadow costs requests: off %v, shadow %v", off, shadow)
	}
}
