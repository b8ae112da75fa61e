package shadow

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/flag"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/plan"
)

// On the happy path the candidate reuses every result of the control: shadow sends exactly
// the requests off sends, and its dry-run client sends none, but for the operations the control
// never has (only: phased), which the candidate executes: each of them costs its own requests
// (here a read through the cache reader, the controller's client, and one dry-run write).
// Counted at an HTTP server, by user agent, over the same REST clients a controller builds.
func TestShadowSendsNoExtraRequestOnTheHappyPath(t *testing.T) {
	for _, planName := range []string{"hostedcluster", "addon-install-progression"} {
		t.Run(planName, func(t *testing.T) { happyPathRequests(t, planName) })
	}
}

func happyPathRequests(t *testing.T, planName string) {
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
	p := shipped(t, planName)
	ops := map[string]Op[*corev1.ConfigMap, struct{}]{}
	phasedOnly := 0
	for _, op := range p.Operations {
		name := op.Name
		if op.Only == plan.PathPhased {
			phasedOnly++
		}
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
	const reconciles = 5
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
		for range reconciles {
			out := e.Reconcile(context.Background(), object)
			if out.Err != nil {
				t.Fatalf("%s: %v", mode, out.Err)
			}
			if mode == flag.Shadow && int(out.DryRunRequests) != phasedOnly {
				t.Fatalf("shadow: %d dry-run requests in one reconcile", out.DryRunRequests)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		return map[string]int{"control": requests["control"], "dry": requests[UserAgent]}
	}
	off, shadow := count(flag.Off), count(flag.Shadow)
	if off["control"] != reconciles*2*len(p.LegacyOrder) || off["dry"] != 0 {
		t.Fatalf("off: %v", off)
	}
	if shadow["control"] != off["control"]+reconciles*phasedOnly || shadow["dry"] != reconciles*phasedOnly {
		t.Fatalf("shadow costs requests beyond the %d phased-only operations: off %v, shadow %v", phasedOnly, off, shadow)
	}
}

// A paired run's dry-run requests are the candidate's: counted in the outcome (and sent with
// the dry-run client's user agent), over the REST clients a controller builds. The one
// operation with legacy code of its own costs one dry-run write per reconcile, nothing else.
func TestPairedRunsCountTheirDryRunRequests(t *testing.T) {
	var mu sync.Mutex
	requests := map[string]int{}
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		requests[r.UserAgent()+" "+r.Method]++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"out","namespace":"ns","resourceVersion":"1"},"data":{"v":"` + r.UserAgent() + `"}}`))
	}))
	defer server.Close()
	cfg := &rest.Config{Host: server.URL, UserAgent: "control", QPS: -1}
	cfg.ContentType = "application/json"
	options := client.Options{Scheme: clientScheme(), Mapper: restMapper()}
	real, err := client.New(cfg, options)
	if err != nil {
		t.Fatal(err)
	}
	dry, err := NewDryRun(cfg, real, options)
	if err != nil {
		t.Fatal(err)
	}
	p := shipped(t, "addon-install-progression")
	write := func(ctx context.Context, r *Run[*corev1.ConfigMap, struct{}]) error {
		return r.Client.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "out"}, Data: map[string]string{"v": "x"}})
	}
	ops := map[string]Op[*corev1.ConfigMap, struct{}]{}
	for _, op := range p.Operations {
		ops[op.Name] = write
	}
	distinct := p.Operations[p.LegacyOrder[0]].Name
	e, err := NewWithLegacy(p, real, ops, Legacy[*corev1.ConfigMap, struct{}]{Ops: map[string]Op[*corev1.ConfigMap, struct{}]{distinct: write}}, Options{DryRun: dry})
	if err != nil {
		t.Fatal(err)
	}
	object := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "addon", UID: "u"}}
	out := e.Reconcile(context.Background(), object)
	if out.Err != nil || out.DryRunRequests != 1 || out.GuardRefusals != 0 {
		t.Fatalf("%v: %d dry-run requests, %d refusals", out.Err, out.DryRunRequests, out.GuardRefusals)
	}
	// Both requests send data.v, and the two answers differ in it (each side's user agent): a
	// sent field is compared as the server answered it.
	if len(out.WriteDifferences) != 1 || out.WriteDifferences[0].Operation != distinct ||
		out.WriteDifferences[0].Kind != "ConfigMap" || !slices.Equal(out.WriteDifferences[0].Fields, []string{"data.v"}) {
		t.Fatalf("%+v", out.WriteDifferences)
	}
	mu.Lock()
	defer mu.Unlock()
	if requests[UserAgent+" PUT"] != 1 || requests["control PUT"] != len(p.LegacyOrder) {
		t.Fatalf("requests: %v", requests)
	}
}
