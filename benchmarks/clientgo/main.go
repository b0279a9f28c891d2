// Command clientgo does one kind of the harness's load with client-go, so that the load's client cost can be set
// beside that of the clients it imitates (benchmarks/client_cost.py):
//
//	create: pods at -rate per second for -duration into -namespace, the body pod_churn sends (JSON), then
//	        deletes them (after the result line: outside the measured work)
//	list:   cluster-scope LISTs of pods at -rate per second, resourceVersion=0, limit=500 (JSON), like list_pollers
//	watch:  -watches watches of pods by spec.nodeName=<node-i> in protobuf as a kubelet asks (LIST rv=0, then
//	        WATCH with bookmarks, timeoutSeconds drawn from 300-600 and renewed from the last resourceVersion),
//	        held for -duration once all are established
//
// It prints `{"started": true}` when the measured work starts and one JSON line when it ends (requests done,
// errors, wall time, watch events), then waits for its standard input to close, so that whoever measures its
// CPU reads it before it exits.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const protobuf = "application/vnd.kubernetes.protobuf"

type result struct {
	Work        string  `json:"work"`
	Requests    int64   `json:"requests"`
	Errors      int64   `json:"errors"`
	WallS       float64 `json:"wall_s"`
	Watches     int     `json:"watches,omitempty"`
	WatchEvents int64   `json:"watch_events"`
}

type counts struct{ requests, errors, events atomic.Int64 }

func (c *counts) done(err error) {
	c.requests.Add(1)
	if err != nil {
		c.errors.Add(1)
	}
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "the cluster's kubeconfig")
	work := flag.String("work", "create", "create, list or watch")
	rate := flag.Float64("rate", 10, "creates or LISTs per second")
	duration := flag.Duration("duration", 20*time.Second, "how long the work lasts")
	namespace := flag.String("namespace", "loadtest-churn", "where pods are created")
	label := flag.String("label", "clientgo", "the k8s-loadtest/run label of the pods created")
	watches := flag.Int("watches", 100, "watches held (watch)")
	nodePrefix := flag.String("node-prefix", "kwok-node-", "node names: <prefix><index, 5 digits>")
	flag.Parse()

	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fail(err)
	}
	config.QPS, config.Burst = 10000, 10000 // the rate is the work's own; client-go's limiter stays out of it
	config.UserAgent = "k8s-loadtest/clientgo"
	if *work == "watch" {
		config.ContentType = protobuf
		config.AcceptContentTypes = protobuf + ",application/json"
	}
	client := kubernetes.NewForConfigOrDie(config)
	var c counts
	start := time.Now()
	out := result{Work: *work}
	switch *work {
	case "create":
		pods := client.CoreV1().Pods(*namespace)
		paced(*rate, *duration, func(i int) error {
			_, err := pods.Create(context.Background(), pod(*namespace, *label, i), metav1.CreateOptions{})
			return err
		}, &c)
	case "list":
		pods := client.CoreV1().Pods("")
		paced(*rate, *duration, func(int) error {
			_, err := pods.List(context.Background(), metav1.ListOptions{ResourceVersion: "0", Limit: 500})
			return err
		}, &c)
	case "watch":
		out.Watches = *watches
		start = hold(client, *watches, *nodePrefix, *duration, &c)
	default:
		fail(fmt.Errorf("unknown work %q", *work))
	}
	out.WallS = time.Since(start).Seconds()
	out.Requests, out.Errors, out.WatchEvents = c.requests.Load(), c.errors.Load(), c.events.Load()
	line, _ := json.Marshal(out)
	fmt.Println(string(line))
	_, _ = io.Copy(io.Discard, os.Stdin) // measured until here
	if *work == "create" {
		selector := metav1.ListOptions{LabelSelector: "k8s-loadtest/run=" + *label}
		_ = client.CoreV1().Pods(*namespace).DeleteCollection(context.Background(), metav1.DeleteOptions{}, selector)
	}
}

func started() { fmt.Println(`{"started": true}`) }

// paced calls do at rate per second for duration, each call in its own goroutine (an open loop: a slow answer
// does not hold up the next), and waits for the last.
func paced(rate float64, duration time.Duration, do func(int) error, c *counts) {
	started()
	ticker := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer ticker.Stop()
	end := time.Now().Add(duration)
	var wg sync.WaitGroup
	for i := 0; time.Now().Before(end); i++ {
		wg.Add(1)
		go func() { defer wg.Done(); c.done(do(i)) }()
		<-ticker.C
	}
	wg.Wait()
}

// pod is the harness's pod (kwok-configs/pod-template.yaml with pod_churn's labels), named by its index.
func pod(namespace, label string, i int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("churn-%s-%012d", label, i), Namespace: namespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "k8s-loadtest", "k8s-loadtest/run": label,
				"k8s-loadtest/scenario": "pod-churn"},
		},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"type": "kwok"},
			Tolerations: []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists,
				Effect: corev1.TaintEffectNoSchedule}},
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}}}},
		},
	}
}

// hold establishes n node watches (LIST rv=0, then WATCH), says when all are, and keeps them for duration,
// renewing each when its timeout ends; it returns when the hold started.
func hold(client *kubernetes.Clientset, n int, prefix string, duration time.Duration, c *counts) time.Time {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	var established, wg sync.WaitGroup
	established.Add(n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); watchNode(ctx, client, fmt.Sprintf("%s%05d", prefix, i), &established, c) }()
	}
	established.Wait()
	started()
	start := time.Now()
	time.Sleep(duration)
	cancel()
	wg.Wait()
	return start
}

// watchNode is a kubelet's pod watch: LIST, then WATCH from its resourceVersion, renewed at each timeout.
func watchNode(ctx context.Context, client *kubernetes.Clientset, node string, established *sync.WaitGroup,
	c *counts) {
	pods, selector := client.CoreV1().Pods(""), "spec.nodeName="+node
	list, err := pods.List(ctx, metav1.ListOptions{ResourceVersion: "0", FieldSelector: selector})
	c.done(err)
	if err != nil {
		established.Done()
		return
	}
	rv, first := list.ResourceVersion, true
	for ctx.Err() == nil {
		timeout := int64(300 + rand.IntN(301))
		w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, FieldSelector: selector,
			AllowWatchBookmarks: true, TimeoutSeconds: &timeout})
		c.done(err)
		if first {
			established.Done()
			first = false
		}
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		for event := range w.ResultChan() {
			c.events.Add(1)
			if object, ok := event.Object.(metav1.Object); ok && event.Type != watch.Error {
				rv = object.GetResourceVersion()
			}
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
