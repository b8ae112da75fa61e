package shadow

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/flag"
)

// One client over a Routed config: a request with a candidate run's context is a dry run, with
// the candidate's User-Agent (and identity, WithIdentity), counted in the run; any other goes
// as the controller's.
func TestARoutedClientSendsTheCandidatesRequestsAsDryRuns(t *testing.T) {
	for _, identity := range []string{"", "system:serviceaccount:ops:operator-shadow"} {
		t.Run("identity="+identity, func(t *testing.T) { routedDryRuns(t, identity) })
	}
}

func routedDryRuns(t *testing.T, identity string) {
	type seen struct{ method, query, agent, auth, as string }
	var mu sync.Mutex
	var requests []seen
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests = append(requests, seen{r.Method, r.URL.RawQuery, r.UserAgent(), r.Header.Get("Authorization"), r.Header.Get("Impersonate-User")})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x","namespace":"ns"}}`))
	}))
	defer server.Close()
	control := &rest.Config{Host: server.URL, UserAgent: "controller/1", BearerToken: "secret"}
	var opts []DryRunOption
	if identity != "" {
		opts = append(opts, WithIdentity(identity))
	}
	dry, err := NewDryRunConfig(control, opts...)
	if err != nil {
		t.Fatal(err)
	}
	routed, err := dry.Routed(control)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(routed)
	if err != nil {
		t.Fatal(err)
	}
	local := &GuardStats{}
	candidate := newShadowRun(context.Background()).ctx
	candidate = WithCounters(candidate, local)
	patch := func(ctx context.Context) {
		if _, err := cs.CoreV1().ConfigMaps("ns").Patch(ctx, "x", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	patch(context.Background())
	patch(candidate)
	if _, err := cs.CoreV1().ConfigMaps("ns").Create(candidate, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(requests) != 3 {
		t.Fatalf("requests: %+v", requests)
	}
	want := []seen{
		{http.MethodPatch, "", "controller/1", "Bearer secret", ""},
		{http.MethodPatch, "dryRun=All", UserAgent, "Bearer secret", identity},
		{http.MethodPost, "dryRun=All", UserAgent, "Bearer secret", identity},
	}
	for i := range want {
		if requests[i] != want[i] {
			t.Errorf("request %d: %+v, want %+v", i, requests[i], want[i])
		}
	}
	if local.DryRunRequests() != 2 || dry.Stats().Refused() != 0 {
		t.Errorf("the run counted %d dry runs, %d refused", local.DryRunRequests(), dry.Stats().Refused())
	}
	if InCandidate(context.Background()) || !InCandidate(candidate) {
		t.Error("InCandidate")
	}
}

// Under retry-on-conflict an operation reads from the cache on its first attempt and afresh on
// the attempts after a 409, which the engine counts.
func TestFreshReadsAfreshOnTheAttemptsAfterA409(t *testing.T) {
	h := newHarness(t, "addon-install-progression", staticFlag(t, enforceAll(t), "addon-install-progression"))
	id, _ := h.plan.Lookup("PlacementStatus")
	var reads []string
	h.engine.ops[id] = func(_ context.Context, r *Run[*corev1.Secret, state]) error {
		from, _ := Fresh(r, func() (string, error) { return "cache", nil }, func() (string, error) { return "server", nil })
		reads = append(reads, from)
		if r.Attempt() < 3 {
			return conflictOn(r.Object.Name)
		}
		return nil
	}
	h.reconcile()
	if strings.Join(reads, ",") != "cache,server,server" {
		t.Fatalf("reads: %v", reads)
	}
}

// enforceAll is a flag spec in mode enforce with every group of the addon plan enforced.
func enforceAll(t *testing.T) flag.Spec {
	t.Helper()
	spec := flag.Default()
	spec.Mode = flag.Enforce
	spec.EnforcedGroups = nil
	for _, g := range shipped(t, "addon-install-progression").Groups {
		spec.EnforcedGroups = append(spec.EnforcedGroups, flag.GroupRef{Group: g.Name})
	}
	return spec
}

func TestWithIdentityRefusesWhatIsNotAUserName(t *testing.T) {
	for _, bad := range []string{"", "a b", "x\ny"} {
		_, err := NewDryRunConfig(&rest.Config{Host: "https://127.0.0.1:1"}, WithIdentity(bad))
		if err == nil || !strings.Contains(err.Error(), "shadow.WithIdentity") {
			t.Errorf("WithIdentity(%q): %v", bad, err)
		}
	}
}
