// Command rawbinder binds the pending pods of one schedulerName to nodes in
// round-robin order, with no filtering or scoring: what a binder costs when
// scheduling costs nothing. It lists and watches the pods (an informer), keeps
// the node names from a node informer, and POSTs a Binding per pod from a pool
// of workers.
//
// It prints one JSON line with its counts on SIGUSR1, and again on SIGTERM or
// SIGINT before it exits.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
)

type counts struct {
	Bound   int64 `json:"bound"`
	Errors  int64 `json:"errors"`
	Writes  int64 `json:"writes"`
	Retries int64 `json:"retries"`
}

// nodeRing hands out node names in turn. Node events only mark it stale: it is
// rebuilt from the informer's store when next used, so the initial list of N
// nodes costs one rebuild, not N.
type nodeRing struct {
	mu    sync.RWMutex
	names []string
	next  atomic.Uint64
	stale atomic.Bool
	store cache.Store
}

func (r *nodeRing) rebuild() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.stale.Swap(false) {
		return
	}
	names := make([]string, 0, len(r.store.ListKeys()))
	names = append(names, r.store.ListKeys()...)
	sort.Strings(names)
	r.names = names
}

func (r *nodeRing) pick() (string, bool) {
	if r.stale.Load() {
		r.rebuild()
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if len(r.names) == 0 {
		return "", false
	}
	i := r.next.Add(1) - 1
	return r.names[i%uint64(len(r.names))], true
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file")
	schedulerName := flag.String("scheduler-name", "bench-raw-binder", "spec.schedulerName of the pods to bind")
	workers := flag.Int("workers", 64, "concurrent Binding requests")
	qps := flag.Float64("qps", 5000, "client QPS")
	burst := flag.Int("burst", 5000, "client burst")
	flag.Parse()

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "rawbinder: %v\n", err)
		os.Exit(2)
	}
	cfg.QPS = float32(*qps)
	cfg.Burst = *burst
	// kube-scheduler's default content type, so the two clients pay the same encoding costs
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.UserAgent = "rawbinder"
	client := kubernetes.NewForConfigOrDie(cfg)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	var c counts
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	go func() {
		for range usr1 {
			report(&c)
		}
	}()

	nodeFactory := informers.NewSharedInformerFactory(client, 0)
	nodeInformer := nodeFactory.Core().V1().Nodes().Informer()
	ring := &nodeRing{store: nodeInformer.GetStore()}
	_, _ = nodeInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { ring.stale.Store(true) },
		DeleteFunc: func(any) { ring.stale.Store(true) },
	})

	// only unbound pods of this scheduler: bound pods are of no interest and
	// would only cost decoding
	selector := fields.AndSelectors(
		fields.OneTermEqualSelector("spec.schedulerName", *schedulerName),
		fields.OneTermEqualSelector("spec.nodeName", ""),
	).String()
	podFactory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = selector }))
	podInformer := podFactory.Core().V1().Pods().Informer()
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	enqueue := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			queue.Add(key)
		}
	}
	_, _ = podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue})

	nodeFactory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), nodeInformer.HasSynced) {
		report(&c)
		return
	}
	ring.stale.Store(true)
	podFactory.Start(ctx.Done())

	bind := func(key string) error {
		obj, exists, err := podInformer.GetStore().GetByKey(key)
		if err != nil || !exists {
			return nil
		}
		pod := obj.(*corev1.Pod)
		if pod.Spec.NodeName != "" {
			return nil
		}
		node, ok := ring.pick()
		if !ok {
			return fmt.Errorf("no nodes")
		}
		binding := &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: node},
		}
		atomic.AddInt64(&c.Writes, 1)
		err = client.CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{})
		switch {
		case err == nil:
			atomic.AddInt64(&c.Bound, 1)
			return nil
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
			// bound meanwhile, or gone: nothing left to do for this pod
			atomic.AddInt64(&c.Errors, 1)
			return nil
		default:
			atomic.AddInt64(&c.Errors, 1)
			return err
		}
	}

	var wg sync.WaitGroup
	for i := 0; i < *workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				key, shutdown := queue.Get()
				if shutdown {
					return
				}
				if err := bind(key); err != nil && ctx.Err() == nil {
					atomic.AddInt64(&c.Retries, 1)
					queue.AddRateLimited(key)
				} else {
					queue.Forget(key)
				}
				queue.Done(key)
			}
		}()
	}
	fmt.Fprintf(os.Stderr, "rawbinder: ready at %s, binding pods of %q\n", time.Now().Format(time.RFC3339Nano), *schedulerName)

	<-ctx.Done()
	queue.ShutDown()
	wg.Wait()
	report(&c)
}

func report(c *counts) {
	out, _ := json.Marshal(map[string]any{"rawbinder": map[string]int64{
		"bound": atomic.LoadInt64(&c.Bound), "errors": atomic.LoadInt64(&c.Errors),
		"writes": atomic.LoadInt64(&c.Writes), "retries": atomic.LoadInt64(&c.Retries),
	}})
	fmt.Println(string(out))
}
