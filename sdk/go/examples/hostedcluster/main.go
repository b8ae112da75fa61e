// Command hostedcluster is the HostedCluster reference reconciler in Go: the same operations
// as the Rust crate's (21 in the phased reconcile, the legacy loop's own code of SSHKeySync and
// its inline ValidConfigurationCondition), on controller-runtime, run by the shadow package. With
// OTEL_EXPORTER_OTLP_ENDPOINT pointing at the shadow-reconciler sidecar (`ingest`), its
// reconciles become the sidecar's metrics and Parquet data.
//
//	hostedcluster --kubeconfig FILE --plan deploy/plans/hostedcluster.yaml [--mode shadow]
//	    [--enforce-group [PLAN/]GROUP]... [--candidate-group [PLAN/]GROUP]... [--ramp-percent 100]
//	    [--flag-namespace NS --flag-name shadow-reconciler-flag] [--content-type protobuf|json]
//	    [--leader-elect [--leader-elect-namespace NS] [--leader-elect-id NAME]]
package main

import (
	"context"
	goflag "flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/flag"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/plan"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/shadow"
)

// ControllerUserAgent is the control's User-Agent (the candidate's is shadow.UserAgent).
const ControllerUserAgent = "shadow-reconciler-go-example/" + shadow.Version

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	if err := start(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func start() error {
	var (
		planPath, mode, flagNamespace, flagName string
		enforce, candidate                      list
		ramp                                    float64
		workers                                 int
		contentType, probeAddress               string
		metricsAddress, legacy                  string
		shadowQPS                               string
		shadowBurst                             int
		shadowAs                                string
		pairedSample                            float64
		leaderElect                             bool
		leaderNamespace, leaderID               string
	)
	goflag.StringVar(&planPath, "plan", "", "the ReconcilePlan file (deploy/plans/hostedcluster.yaml)")
	goflag.StringVar(&mode, "mode", "shadow", "the mode when no ConfigMap says otherwise: off, calibrate, shadow or enforce")
	goflag.Var(&enforce, "enforce-group", "a rollout group the control enforces in mode enforce, GROUP or PLAN/GROUP (repeatable)")
	goflag.Var(&candidate, "candidate-group", "a rollout group the candidate evaluates, GROUP or PLAN/GROUP (repeatable; none: every group)")
	// The names of shadow-reconciler's own commands; the earlier spellings still work.
	goflag.Var(&enforce, "enforce", "the earlier name of --enforce-group")
	goflag.Var(&candidate, "candidate", "the earlier name of --candidate-group")
	goflag.Float64Var(&ramp, "ramp-percent", 100, "the share of objects that get the mode (0 to 100)")
	goflag.StringVar(&flagNamespace, "flag-namespace", "", "the namespace of the flag ConfigMap (empty: no ConfigMap)")
	goflag.StringVar(&flagName, "flag-name", "shadow-reconciler-flag", "the name of the flag ConfigMap")
	goflag.IntVar(&workers, "workers", 4, "concurrent reconciles")
	goflag.StringVar(&contentType, "content-type", "protobuf", "request bodies of built-in types: protobuf (client-go's default) or json (the embedded simulator reads JSON only)")
	goflag.StringVar(&probeAddress, "health-probe-bind-address", "0", "where to serve /healthz and /readyz, e.g. :6060 in a pod (0: nowhere)")
	goflag.StringVar(&metricsAddress, "metrics-bind-address", "0", "where to serve controller-runtime's /metrics, e.g. :8080 (0: nowhere)")
	goflag.StringVar(&shadowQPS, "shadow-qps", "10", "the shadow's own requests per second (a positive number, or unlimited: no bound and no pause under load): a reconcile that finds them spent runs its control alone, counted")
	goflag.IntVar(&shadowBurst, "shadow-burst", 0, "the most requests the shadow's budget holds at once (0: 20)")
	goflag.Float64Var(&pairedSample, "paired-sample-percent", -1, "the share of objects (0 to 100) whose comparisons pair code (the legacy code beside the phased), by a stable hash of the UID (-1: 20 with a rate, 100 with --shadow-qps unlimited)")
	goflag.StringVar(&shadowAs, "shadow-as", "", "the identity the shadow's requests impersonate, for a FlowSchema of its own, e.g. system:serviceaccount:NAMESPACE:NAME (empty: the controller's)")
	goflag.BoolVar(&leaderElect, "leader-elect", false, "reconcile only while this process holds a coordination.k8s.io Lease (controller-runtime's leader election): replicas stand by, one leads")
	goflag.StringVar(&leaderNamespace, "leader-elect-namespace", "", "the Lease's namespace (empty: the flag's namespace, else the pod's)")
	goflag.StringVar(&leaderID, "leader-elect-id", "hostedcluster-example", "the Lease's name")
	goflag.StringVar(&legacy, "legacy", "ops", "the legacy loop's shape: ops (its own code per operation, Legacy) or func (one function with shadow.Step marks, LegacyLoop)")
	opts := zap.Options{Development: false}
	opts.BindFlags(goflag.CommandLine)
	goflag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("hostedcluster")

	if planPath == "" {
		return fmt.Errorf("--plan is required (deploy/plans/hostedcluster.yaml)")
	}
	p, err := plan.Load(planPath)
	if err != nil {
		return err
	}
	defaults := flag.Default()
	switch flag.Mode(mode) {
	case flag.Off, flag.Calibrate, flag.Shadow, flag.Enforce:
		defaults.Mode = flag.Mode(mode)
	default:
		return fmt.Errorf("--mode %q: expected off, calibrate, shadow or enforce", mode)
	}
	for _, g := range enforce {
		ref, ok := flag.ParseGroupRef(g)
		if !ok {
			return fmt.Errorf("--enforce-group %q: expected GROUP or PLAN/GROUP", g)
		}
		defaults.EnforcedGroups = append(defaults.EnforcedGroups, ref)
	}
	for _, g := range candidate {
		ref, ok := flag.ParseGroupRef(g)
		if !ok {
			return fmt.Errorf("--candidate-group %q: expected GROUP or PLAN/GROUP", g)
		}
		defaults.CandidateGroups = append(defaults.CandidateGroups, ref)
	}
	r, ok := flag.RampFromPercent(ramp)
	if !ok {
		return fmt.Errorf("--ramp-percent %v: expected a percentage from 0 to 100 with at most two decimals", ramp)
	}
	defaults.Ramp = r
	var legacyCode shadow.Legacy[*HostedCluster, State]
	switch legacy {
	case "ops":
		legacyCode = Legacy()
	case "func":
		legacyCode = LegacyLoop()
	default:
		return fmt.Errorf("--legacy %q: expected ops or func", legacy)
	}

	ctx := ctrl.SetupSignalHandler()
	tp, err := shadow.Tracing(ctx, "hostedcluster-controller", attribute.String(shadow.PlanAttribute, "hostedcluster"))
	if err != nil {
		return err
	}
	defer func() {
		// Flush the last spans to the sidecar before exiting.
		shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := tp.Shutdown(shutdown); err != nil {
			log.Error(err, "cannot flush the spans")
		}
	}()

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	cfg.UserAgent = ControllerUserAgent
	switch contentType {
	case "protobuf":
	case "json":
		cfg.ContentType = "application/json"
	default:
		return fmt.Errorf("--content-type %q: expected protobuf or json", contentType)
	}
	budget, err := shadow.ParseBudget(shadowQPS, shadowBurst)
	if err != nil {
		return err
	}
	if pairedSample >= 0 {
		if err := budget.SetPairedSample(pairedSample); err != nil {
			return err
		}
	}
	// The manager's requests are the control's: their 429s and latency pause the shadow.
	shadow.WatchControl(cfg, budget)
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := AddToScheme(scheme); err != nil {
		return err
	}
	uncached := &client.CacheOptions{DisableFor: UncachedKinds()}
	if leaderNamespace == "" {
		leaderNamespace = flagNamespace
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Client:                 client.Options{Cache: uncached},
		Metrics:                metricsserver.Options{BindAddress: metricsAddress},
		HealthProbeBindAddress: probeAddress,
		// Only the leader reconciles, so only its sidecar receives spans; on SIGTERM it gives
		// the Lease up once its reconciles ended, and a standby takes over at once.
		LeaderElection:                leaderElect,
		LeaderElectionID:              leaderID,
		LeaderElectionNamespace:       leaderNamespace,
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	// Ready once the informers' caches have synced.
	if err := mgr.AddReadyzCheck("informers", func(r *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(r.Context()) {
			return fmt.Errorf("the informers' caches have not synced")
		}
		return nil
	}); err != nil {
		return err
	}
	var f *shadow.Flag
	if flagNamespace != "" {
		f, err = shadow.ConfigMapFlag(mgr.GetClient(), types.NamespacedName{Namespace: flagNamespace, Name: flagName}, defaults, log.WithName("flag"), p)
	} else {
		f, err = shadow.StaticFlag(defaults, p)
	}
	if err != nil {
		return err
	}
	dryOpts := []shadow.DryRunOption{shadow.WithBudget(budget)}
	if shadowAs != "" {
		dryOpts = append(dryOpts, shadow.WithIdentity(shadowAs))
	}
	dry, err := shadow.NewDryRun(cfg, mgr.GetCache(), client.Options{Scheme: scheme, Mapper: mgr.GetRESTMapper(), Cache: uncached}, dryOpts...)
	if err != nil {
		return err
	}
	engine, err := shadow.NewWithLegacy(p, mgr.GetClient(), Operations(), legacyCode, shadow.Options{
		Flag: f, DryRun: dry, WriteCondition: true, APIReader: mgr.GetAPIReader(), Log: log,
	})
	if err != nil {
		return err
	}
	err = ctrl.NewControllerManagedBy(mgr).
		For(&HostedCluster{}).
		Named("hostedcluster").
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(shadow.Reconciler(engine, mgr.GetClient(), func() *HostedCluster { return &HostedCluster{} }))
	if err != nil {
		return err
	}
	log.Info("starting", "plan", p.Name, "planHash", p.ShortHash(), "flag", defaults.Summary())
	if err := mgr.Start(ctx); err != nil {
		return err
	}
	log.Info("stopped", "dryRunRequests", dry.Stats().DryRunRequests(), "guardRefusals", dry.Stats().Refused())
	return nil
}
