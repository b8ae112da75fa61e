// Command ocm runs Open Cluster Management's real cmainstallprogression controller (module
// open-cluster-management.io/ocm, imported unchanged) in shadow with the shadow-reconciler Go
// package: the adoption of a client-go controller (typed clientset, informers, sdk-go's
// basecontroller factory, no controller-runtime) is adopt.go; this file is what a test around it
// needs: the flags, the tracing set-up, and a second status writer.
//
// The second writer (--second-writer) stands for OCM's addonconfiguration controller, which
// patches the same add-ons' installProgressions, and for anyone else who writes an add-on: just
// before the controller's first real status patch of each add-on, and again before the
// candidate's first dry-run status patch of it, it writes the add-on (the installProgressions of
// one installed by placements, an annotation of another), so the cached resourceVersion is stale
// and the patch meets a 409 Conflict, as in production when the two race, but every time: the
// control's is requeued, the candidate's is retried with a fresh read.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"go.opentelemetry.io/otel/attribute"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	addonclient "open-cluster-management.io/api/client/addon/clientset/versioned"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/plan"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/shadow"
)

// UserAgent is the controller's (the control's requests); the candidate's is shadow.UserAgent.
const UserAgent = "ocm-cma-install-progression/shadow-example"

// SecondWriterAgent is the second status writer's.
const SecondWriterAgent = "ocm-addon-configuration/second-writer"

// SecondWriterAnnotation is what the second writer writes on an add-on installed by no
// placement.
const SecondWriterAnnotation = "example.io/second-writer"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "ocm example:", err)
		os.Exit(1)
	}
}

func run() error {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "the kubeconfig of the API server")
	planFile := flag.String("plan", "", "the ReconcilePlan (deploy/plans/addon-install-progression.yaml)")
	workers := flag.Int("workers", 2, "workers, as OCM's manager runs the controller")
	secondWriter := flag.Bool("second-writer", false, "patch each add-on's status just before the controller's first status patch of it")
	sampleRate := flag.Float64("reexecute-sample-rate", 0, "the share of reused steps the candidate re-executes in dry run")
	shadowQPS := flag.String("shadow-qps", "10", "the shadow's own requests per second (a positive number, or unlimited: no bound and no pause under load): a reconcile that finds them spent runs its control alone, counted")
	shadowBurst := flag.Int("shadow-burst", 0, "the most requests the shadow's budget holds at once (0: 20)")
	pairedSample := flag.Float64("paired-sample-percent", -1, "the share of objects (0 to 100) whose comparisons pair code (the candidate's 409 retry beside today's code), by a stable hash of the UID (-1: 20 with a rate, 100 with --shadow-qps unlimited)")
	shadowAs := flag.String("shadow-as", "", "the identity the shadow's requests impersonate, for a FlowSchema of its own, e.g. system:serviceaccount:NAMESPACE:NAME (empty: the controller's)")
	flag.Parse()
	if *planFile == "" {
		return fmt.Errorf("--plan is required")
	}
	p, err := plan.Load(*planFile)
	if err != nil {
		return err
	}
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("the kubeconfig %s: %w", *kubeconfig, err)
	}
	if *secondWriter {
		other := rest.CopyConfig(config)
		other.UserAgent = SecondWriterAgent
		writer, err := addonclient.NewForConfig(other)
		if err != nil {
			return err
		}
		// One writer for every transport made from the config (the control's, and the
		// candidate's, made from a copy of it): one count of the add-ons it wrote.
		racer := &racingWriter{writer: writer}
		config.Wrap(func(rt http.RoundTripper) http.RoundTripper { return racing{racer, rt} })
	}
	// The control's User-Agent: the audit log tells its requests from the candidate's, which
	// carry shadow.UserAgent (the dry-run config sets it).
	config.UserAgent = UserAgent
	// SIGTERM (the pod's shutdown) ends the context every reconcile runs in: a reconcile it cuts
	// short is recorded as cancelled, never as a failure or a write difference.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	// The spans the ingest sidecar records: the standard OTEL_EXPORTER_OTLP_* variables, every
	// reconcile sampled, a queue deep enough for a burst; the plan's name on every span.
	tp, err := shadow.Tracing(ctx, "ocm-addon-manager", attribute.String(shadow.PlanAttribute, p.Name))
	if err != nil {
		return err
	}
	log := funcr.NewJSON(func(obj string) { fmt.Fprintln(os.Stderr, obj) }, funcr.Options{Verbosity: 0})
	budget, err := shadow.ParseBudget(*shadowQPS, *shadowBurst)
	if err != nil {
		return err
	}
	if *pairedSample >= 0 {
		if err := budget.SetPairedSample(*pairedSample); err != nil {
			return err
		}
	}
	dryRun := []shadow.DryRunOption{shadow.WithBudget(budget)}
	if *shadowAs != "" {
		dryRun = append(dryRun, shadow.WithIdentity(*shadowAs))
	}
	err = adopt(ctx, config, p, *workers, dryRun, shadow.Options{Log: logr.Logger(log), ReexecuteSampleRate: *sampleRate})
	// Flush the spans the sidecar is waiting for, whatever stopped the controller, before the
	// process exits.
	if shutdownErr := tp.Shutdown(context.Background()); err == nil {
		err = shutdownErr
	}
	return err
}

// racingWriter writes an add-on before the controller's first real status patch of it goes out,
// and before the candidate's first dry-run one: its installProgressions, with a condition, as
// OCM's addonconfiguration controller does, or, for an add-on installed by no placement, an
// annotation.
type racingWriter struct {
	writer     addonclient.Interface
	done, dry  sync.Map
	generation atomic.Int64 // every write changes the add-on
}

// racing is a transport with the racing writer before it.
type racing struct {
	w    *racingWriter
	next http.RoundTripper
}

func (r racing) RoundTrip(req *http.Request) (*http.Response, error) {
	r.w.before(req)
	return r.next.RoundTrip(req)
}

// before writes the add-on req patches the status of, if this is the first real, or the first
// dry-run, status patch of it.
func (w *racingWriter) before(req *http.Request) {
	const prefix = "/apis/addon.open-cluster-management.io/v1alpha1/clustermanagementaddons/"
	name, isStatus := strings.CutSuffix(strings.TrimPrefix(req.URL.Path, prefix), "/status")
	if req.Method == http.MethodPatch && isStatus && strings.HasPrefix(req.URL.Path, prefix) {
		done := &w.done
		if req.URL.Query().Get("dryRun") != "" {
			done = &w.dry
		}
		if _, seen := done.LoadOrStore(name, true); !seen {
			if err := w.write(req.Context(), name); err != nil {
				fmt.Fprintf(os.Stderr, "second writer: %s: %v\n", name, err)
			}
		}
	}
}

func (w *racingWriter) write(ctx context.Context, name string) error {
	addons := w.writer.AddonV1alpha1().ClusterManagementAddOns()
	addon, err := addons.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	generation := strconv.FormatInt(w.generation.Add(1), 10)
	if len(addon.Spec.InstallStrategy.Placements) == 0 {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, SecondWriterAnnotation, generation)
		_, err = addons.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
	progressions := []map[string]any{}
	for _, placement := range addon.Spec.InstallStrategy.Placements {
		progressions = append(progressions, map[string]any{
			"name": placement.Name, "namespace": placement.Namespace,
			"conditions": []map[string]any{{
				"type": "Progressing", "status": "True", "reason": "Installing",
				"message": "installing (write " + generation + ")", "lastTransitionTime": metav1.Now().UTC().Format("2006-01-02T15:04:05Z"),
			}},
		})
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"installProgressions": progressions}})
	if err != nil {
		return err
	}
	_, err = addons.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}
