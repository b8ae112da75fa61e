package main

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"open-cluster-management.io/addon-framework/pkg/utils"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	addonclient "open-cluster-management.io/api/client/addon/clientset/versioned"
	addoninformers "open-cluster-management.io/api/client/addon/informers/externalversions"
	addoninformerv1alpha1 "open-cluster-management.io/api/client/addon/informers/externalversions/addon/v1alpha1"
	addonlisters "open-cluster-management.io/api/client/addon/listers/addon/v1alpha1"
	"open-cluster-management.io/ocm/pkg/addon/controllers/cmainstallprogression"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/plan"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/shadow"
)

type cma = addonv1alpha1.ClusterManagementAddOn

// adopt runs OCM's cmainstallprogression controller, unchanged, under the shadow engine: the
// plan's operations are the three status-patch branches of its sync; the candidate retries a
// 409 with a fresh read (OCM PR #1585), the control runs today's code.
func adopt(ctx context.Context, config *rest.Config, p *plan.Plan, workers int, dryRun []shadow.DryRunOption, opts shadow.Options) error {
	// One client: the candidate's requests go as dry runs, spending the shadow's budget (and
	// under its own identity, WithIdentity).
	dry, routed, err := shadow.NewRouted(config, dryRun...)
	if err != nil {
		return err
	}
	client := addonclient.NewForConfigOrDie(routed)
	informers := addoninformers.NewSharedInformerFactory(client, 10*time.Minute)
	cmas := freshCMAs{informers.Addon().V1alpha1().ClusterManagementAddOns(), client, &sync.Map{}}
	controller := cmainstallprogression.NewCMAInstallProgressionController(client,
		informers.Addon().V1alpha1().ManagedClusterAddOns(), cmas, utils.ManagedByAddonManager)
	branch := func(taken func(*cma) bool) shadow.Op[*cma, struct{}] {
		return func(ctx context.Context, r *shadow.Run[*cma, struct{}]) error {
			if !taken(r.Object) {
				r.NothingToDo() // the branch this add-on does not take
				return nil
			}
			if r.Attempt() > 1 { // a retry after a 409: the sync reads the add-on afresh, as this run
				cmas.fresh.Store(r.Object.Name, ctx)
				defer cmas.fresh.Delete(r.Object.Name)
			}
			return controller.Sync(ctx, controller.SyncContext(), r.Object.Name)
		}
	}
	manual := func(a *cma) bool {
		return a.Spec.InstallStrategy.Type == "" || a.Spec.InstallStrategy.Type == addonv1alpha1.AddonInstallStrategyManual
	}
	ops := map[string]shadow.Op[*cma, struct{}]{
		"DefaultConfigReferences": branch(func(*cma) bool { return false }), // computed by each branch: nothing to do here
		"ManualStrategyStatus":    branch(manual),
		"SelfManagedStatus":       branch(func(a *cma) bool { return !manual(a) && !utils.ManagedByAddonManager(a) }),
		"PlacementStatus":         branch(func(a *cma) bool { return !manual(a) && utils.ManagedByAddonManager(a) }),
	}
	opts.DryRun, opts.Kind = dry, "ClusterManagementAddOn"
	engine, err := shadow.New(p, nil, ops, opts)
	if err != nil {
		return err
	}
	informers.Start(ctx.Done())
	informers.WaitForCacheSync(ctx.Done())
	shadow.RunWorkers(ctx, controller.SyncContext().Queue(), shadow.Sync(engine, cmas.Lister().Get), workers)
	return nil
}

// freshCMAs is the controller's add-on informer whose lister reads an add-on from the API
// server, not the cache, on a retry after a 409 (the re-fetch of PR #1585), with the retrying
// run's context: a candidate's re-read goes as the candidate's.
type freshCMAs struct {
	addoninformerv1alpha1.ClusterManagementAddOnInformer
	client addonclient.Interface
	fresh  *sync.Map // add-on name: the context of the run whose next read of it is afresh
}

func (f freshCMAs) Lister() addonlisters.ClusterManagementAddOnLister { return f }
func (f freshCMAs) List(s labels.Selector) ([]*cma, error) {
	return f.ClusterManagementAddOnInformer.Lister().List(s)
}
func (f freshCMAs) Get(name string) (*cma, error) {
	if ctx, ok := f.fresh.LoadAndDelete(name); ok {
		return f.client.AddonV1alpha1().ClusterManagementAddOns().Get(ctx.(context.Context), name, metav1.GetOptions{})
	}
	return f.ClusterManagementAddOnInformer.Lister().Get(name)
}
