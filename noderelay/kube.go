package noderelay

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// DefaultNamespace is the namespace of the turn Pods and of arizukod's own, as the
// manifests of contrib/kubernetes/ make it.
const DefaultNamespace = "arizuko"

// Client is a clientset of the cluster: of kubeconfig when given, else of the
// in-cluster service account, else of $KUBECONFIG.
func Client(kubeconfig string) (kubernetes.Interface, error) {
	var (
		cfg *rest.Config
		err error
	)
	switch {
	case kubeconfig != "":
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	case os.Getenv("KUBERNETES_SERVICE_HOST") != "":
		cfg, err = rest.InClusterConfig()
	case os.Getenv("KUBECONFIG") != "":
		cfg, err = clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	default:
		return nil, fmt.Errorf("kubernetes: no kubeconfig given, not in a cluster and no $KUBECONFIG")
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	return cs, nil
}

// live is whether a Pod still runs or is about to: a node serves it, the central relays
// for it.
func live(p *corev1.Pod) bool {
	return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// owner is who the Pod's first container runs as, -1 where it does not say.
func owner(p *corev1.Pod) (uid, gid int) {
	uid, gid = -1, -1
	if sc := p.Spec.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = int(*sc.RunAsUser)
		}
		if sc.RunAsGroup != nil {
			gid = int(*sc.RunAsGroup)
		}
	}
	if len(p.Spec.Containers) > 0 {
		if sc := p.Spec.Containers[0].SecurityContext; sc != nil {
			if sc.RunAsUser != nil {
				uid = int(*sc.RunAsUser)
			}
			if sc.RunAsGroup != nil {
				gid = int(*sc.RunAsGroup)
			}
		}
	}
	if uid < 0 || gid < 0 {
		return -1, -1
	}
	return uid, gid
}

// WatchNode sends on out, at every change, the turns of the Pods of node in namespace that
// carry the Annotation, until ctx ends. A snapshot not yet taken is replaced by a newer
// one: out holds the latest.
func WatchNode(ctx context.Context, cs kubernetes.Interface, namespace, node string, out chan []Turn) error {
	f := informers.NewSharedInformerFactoryWithOptions(cs, 10*time.Minute, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", node).String()
		}))
	inf := f.Core().V1().Pods()
	kick := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: poke, UpdateFunc: func(_, o any) { poke(o) }, DeleteFunc: poke,
	}); err != nil {
		return fmt.Errorf("kubernetes: %w", err)
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		return fmt.Errorf("kubernetes: the Pods of node %s: %w", node, context.Cause(ctx))
	}
	poke(nil)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-kick:
		}
		ts, err := nodeTurns(inf.Lister(), namespace)
		if err != nil {
			return err
		}
		select {
		case <-out:
		default:
		}
		out <- ts
	}
}

func nodeTurns(l listersv1.PodLister, namespace string) ([]Turn, error) {
	pods, err := l.Pods(namespace).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	var ts []Turn
	for _, p := range pods {
		slug, ok := p.Annotations[Annotation]
		if !ok || !live(p) {
			continue
		}
		uid, gid := owner(p)
		ts = append(ts, Turn{Slug: slug, UID: uid, GID: gid})
	}
	slices.SortFunc(ts, func(a, b Turn) int {
		if a.Slug < b.Slug {
			return -1
		}
		if a.Slug > b.Slug {
			return 1
		}
		return 0
	})
	return ts, nil
}

// KubePods is Pods over the Kubernetes API: a cache of namespace's Pods, asked again at a
// miss (a Pod just made may not be in it yet).
type KubePods struct {
	cs        kubernetes.Interface
	namespace string
	lister    listersv1.PodLister
}

// NewKubePods starts the cache of namespace's Pods; it stops with ctx. Until it has synced
// every question is asked of the API.
func NewKubePods(ctx context.Context, cs kubernetes.Interface, namespace string) *KubePods {
	f := informers.NewSharedInformerFactoryWithOptions(cs, 10*time.Minute, informers.WithNamespace(namespace))
	inf := f.Core().V1().Pods()
	inf.Informer()
	f.Start(ctx.Done())
	return &KubePods{cs: cs, namespace: namespace, lister: inf.Lister()}
}

// OnNode is Pods' OnNode.
func (k *KubePods) OnNode(ctx context.Context, slug, node string) (bool, error) {
	pods, err := k.lister.Pods(k.namespace).List(labels.Everything())
	if err != nil {
		return false, err
	}
	if onNode(pods, slug, node) {
		return true, nil
	}
	list, err := k.cs.CoreV1().Pods(k.namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return false, fmt.Errorf("kubernetes: %w", err)
	}
	ps := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		ps[i] = &list.Items[i]
	}
	return onNode(ps, slug, node), nil
}

func onNode(pods []*corev1.Pod, slug, node string) bool {
	for _, p := range pods {
		if p.Annotations[Annotation] == slug && p.Spec.NodeName == node && live(p) {
			return true
		}
	}
	return false
}
